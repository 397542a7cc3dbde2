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

#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub f: String,
    pub targets: Vec<String>,
    pub start: u64,
    pub end: Option<u64>,
}

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
                let o = OpRecord { p: *p, f: *f, key: *key, invoke_ns: *ns, complete_ns: None, outcome: Outcome::Unresolved, token: None, contention: false };
                self.open.insert(*p, o)
            }
            Record::Ok { p, ns, token, .. } => self.complete(*p, *ns, Outcome::Ok, *token, false),
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

/// The nemesis records of a history as fault windows, and the faults that were not windows.
#[derive(Debug, Default, Clone)]
pub struct FaultLog {
    pub faults: Vec<Fault>,
    pub skipped: Vec<Skipped>,
}

impl FaultLog {
    /// One `nemesis` record.
    pub fn push(&mut self, f: &str, phase: &str, targets: &[String], ns: u64, detail: &str) {
        let skip = Skipped { f: f.to_string(), ns, why: detail.to_string() };
        match phase {
            // A start whose own check showed it did nothing (a kill that left the
            // process running) opens no fault window.
            "start" if crate::nemesis::no_effect(detail) => self.skipped.push(skip),
            "start" => self.faults.push(Fault { f: f.to_string(), targets: targets.to_vec(), start: ns, end: None }),
            "end" => {
                if let Some(i) = self.faults.iter().rposition(|x| x.f == f && x.end.is_none()) {
                    // A fault its probe showed doing nothing (a cut that dropped no
                    // traffic) is no fault window: judged as if it had been skipped.
                    if crate::nemesis::no_effect(detail) {
                        self.faults.remove(i);
                        self.skipped.push(skip);
                    } else {
                        self.faults[i].end = Some(ns);
                    }
                }
            }
            _ => self.skipped.push(skip),
        }
    }
}
