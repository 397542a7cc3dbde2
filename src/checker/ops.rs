//! A history segment turned into completed operations, sections and faults.

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use super::OpRef;
use crate::history::{Op, Record};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Fail,
    Info,
    /// Invoked, never completed in the history.
    Unresolved,
}

/// An invocation paired with its completion.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRecord {
    pub p: u64,
    pub f: Op,
    pub key: u32,
    pub invoke_ns: u64,
    pub complete_ns: Option<u64>,
    pub outcome: Outcome,
    pub token: Option<u64>,
    /// A `fail` that says someone else held the lock (wait timeout, busy).
    pub contention: bool,
    /// A polling acquire granted by a later attempt: when that attempt was sent.
    pub attempt_ns: Option<u64>,
}

impl OpRecord {
    pub fn as_ref(&self) -> OpRef {
        OpRef {
            p: self.p,
            f: self.f,
            key: self.key,
            invoke_ns: self.invoke_ns,
            complete_ns: self.complete_ns,
            outcome: self.outcome,
            token: self.token,
        }
    }
}

/// A fault window of a history (times in nanoseconds): a start paired with the end that
/// heals it, with its side and its effect ([`crate::faultlog::Window`]).
pub type Fault = crate::faultlog::Window;

/// A fault the nemesis could not inject (it is not a fault window).
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub f: String,
    pub ns: u64,
    pub why: String,
}

/// The one pairing of a history's records: an invocation waits for its process's
/// completion (one open operation per process). The streaming checker
/// ([`super::stream::SegmentStream`]) and [`History`] both read a history through it, so the
/// two cannot pair it differently.
#[derive(Debug, Default)]
pub struct Pairing {
    open: HashMap<u64, OpRecord>,
}

impl Pairing {
    /// An invocation, completion or `info`: the operation it finished, if any. An invocation
    /// finishes the process's earlier one, which never completed (it stays unresolved).
    pub fn push(&mut self, r: &Record) -> Option<OpRecord> {
        match r {
            Record::Invoke { p, f, key, ns } => {
                let o = OpRecord { p: *p, f: *f, key: *key, invoke_ns: *ns, complete_ns: None, outcome: Outcome::Unresolved, token: None, contention: false, attempt_ns: None };
                self.open.insert(*p, o)
            }
            Record::Ok { p, ns, token, attempt, .. } => {
                let mut o = self.complete(*p, *ns, Outcome::Ok, *token, false)?;
                o.attempt_ns = *attempt;
                Some(o)
            }
            Record::Fail { p, ns, kind, error, .. } => {
                let contention = match kind.as_deref() {
                    Some(k) => k == "timeout" || k == "busy",
                    // A hand-written history: LockError's contention messages.
                    None => error.starts_with("not acquired"),
                };
                self.complete(*p, *ns, Outcome::Fail, None, contention)
            }
            Record::Info { p, ns, .. } => self.complete(*p, *ns, Outcome::Info, None, false),
            _ => None,
        }
    }

    /// The open operation of process `p`.
    pub fn open(&self, p: u64) -> Option<&OpRecord> {
        self.open.get(&p)
    }

    fn complete(&mut self, p: u64, ns: u64, outcome: Outcome, token: Option<u64>, contention: bool) -> Option<OpRecord> {
        let mut o = self.open.remove(&p)?;
        o.complete_ns = Some(ns);
        o.outcome = outcome;
        o.token = token;
        o.contention = contention;
        Some(o)
    }

    /// What never completed, unresolved, in invocation order.
    pub fn unfinished(&mut self) -> Vec<OpRecord> {
        let mut open: Vec<OpRecord> = std::mem::take(&mut self.open).into_values().collect();
        open.sort_by_key(|o| (o.invoke_ns, o.p));
        open
    }
}

/// The nemesis records of a history, paired into fault windows at the end.
#[derive(Debug, Default, Clone)]
pub struct FaultLog {
    marks: Vec<crate::faultlog::MarkAt>,
    pub skipped: Vec<Skipped>,
}

impl FaultLog {
    /// One `nemesis` record (any other record is ignored).
    pub fn push(&mut self, r: &Record) {
        let Record::Nemesis { f, phase, targets, ns, detail, effect, side, stand_in } = r else { return };
        let effect = effect.clone().unwrap_or_else(|| crate::faultlog::Effect::from_detail(detail));
        if *phase == crate::faultlog::Mark::Skipped {
            self.skipped.push(Skipped { f: f.clone(), ns: *ns, why: detail.clone() });
            return;
        }
        self.marks.push(crate::faultlog::MarkAt {
            f: f.clone(),
            mark: *phase,
            targets: targets.clone(),
            at: *ns,
            effect,
            side: side.unwrap_or_else(|| crate::faultlog::Side::of_name(f)),
            stand_in: stand_in.clone(),
        });
    }

    /// Every window, whatever its side and effect (each checker picks what it judges).
    pub fn windows(&self) -> Vec<Fault> {
        crate::faultlog::pair(&self.marks)
    }
}
