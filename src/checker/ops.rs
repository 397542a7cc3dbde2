//! A history segment turned into completed operations, sections and faults.

use serde::{Deserialize, Serialize};

use super::OpRef;
use crate::history::{Meta, Op, Record, Segment};

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
pub struct SectionOp {
    pub p: u64,
    pub key: u32,
    pub token: Option<u64>,
    pub enter: u64,
    pub exit: u64,
    pub read_seq: Option<u64>,
    pub read: Option<u64>,
    pub write_seq: Option<u64>,
    /// The holder's lease was lost or past its validity when it entered.
    pub lease_lost: bool,
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

/// Everything the checkers need, in invocation order.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub ops: Vec<OpRecord>,
    pub sections: Vec<SectionOp>,
    pub faults: Vec<Fault>,
    pub skipped: Vec<Skipped>,
    /// The last timestamp in the segment.
    pub end_ns: u64,
    pub ttl_ns: Option<u64>,
    pub fencing_tokens: Option<bool>,
    /// `ok` acquires per (process, key): (completion time, index into `ops`), sorted.
    acquired: std::collections::HashMap<(u64, u32), Vec<(u64, usize)>>,
}

impl History {
    pub fn from_segment(seg: &Segment) -> History {
        let mut h = History {
            ttl_ns: seg.meta.as_ref().and_then(Meta::window_ns),
            fencing_tokens: seg.meta.as_ref().map(|m| m.fencing_tokens),
            ..Default::default()
        };
        // The open invocation of each process, by index into `ops`.
        let mut open: std::collections::HashMap<u64, usize> = Default::default();
        for r in &seg.records {
            if let Some(ns) = r.ns() {
                h.end_ns = h.end_ns.max(ns);
            }
            match r {
                Record::Meta(_) => {}
                Record::Invoke { p, f, key, ns } => {
                    open.insert(*p, h.ops.len());
                    h.ops.push(OpRecord {
                        p: *p,
                        f: *f,
                        key: *key,
                        invoke_ns: *ns,
                        complete_ns: None,
                        outcome: Outcome::Unresolved,
                        token: None,
                        contention: false,
                    });
                }
                Record::Ok { p, ns, token, .. } => complete(&mut h, &mut open, *p, *ns, Outcome::Ok, *token),
                Record::Fail { p, ns, kind, error, .. } => {
                    let contention = match kind.as_deref() {
                        Some(k) => k == "timeout" || k == "busy",
                        // A hand-written history: LockError's contention messages.
                        None => error.starts_with("not acquired"),
                    };
                    if let Some(&i) = open.get(p) {
                        h.ops[i].contention = contention;
                    }
                    complete(&mut h, &mut open, *p, *ns, Outcome::Fail, None)
                }
                Record::Info { p, ns, .. } => complete(&mut h, &mut open, *p, *ns, Outcome::Info, None),
                Record::Section { p, key, token, enter, exit, read_seq, read, write_seq, lease_lost, .. } => {
                    h.end_ns = h.end_ns.max(*exit);
                    h.sections.push(SectionOp {
                        p: *p,
                        key: *key,
                        token: *token,
                        enter: *enter,
                        exit: *exit,
                        read_seq: *read_seq,
                        read: *read,
                        write_seq: *write_seq,
                        lease_lost: *lease_lost,
                    })
                }
                Record::Nemesis { f, phase, targets, ns, detail } => match phase.as_str() {
                    "start" => h.faults.push(Fault { f: f.clone(), targets: targets.clone(), start: *ns, end: None }),
                    "end" => {
                        if let Some(x) = h.faults.iter_mut().rev().find(|x| x.f == *f && x.end.is_none()) {
                            x.end = Some(*ns);
                        }
                    }
                    _ => h.skipped.push(Skipped { f: f.clone(), ns: *ns, why: detail.clone() }),
                },
                Record::Interrupted { .. } => {}
            }
        }
        for (i, o) in h.ops.iter().enumerate() {
            if let (Op::Acquire, Outcome::Ok, Some(c)) = (o.f, o.outcome, o.complete_ns) {
                h.acquired.entry((o.p, o.key)).or_default().push((c, i));
            }
        }
        for v in h.acquired.values_mut() {
            v.sort_unstable();
        }
        h
    }

    /// The latest `ok` acquire of `p` on `key` completed at or before `t`.
    pub fn acquire_before(&self, p: u64, key: u32, t: u64) -> Option<&OpRecord> {
        let v = self.acquired.get(&(p, key))?;
        let i = v.partition_point(|&(c, _)| c <= t);
        (i > 0).then(|| &self.ops[v[i - 1].1])
    }
}

fn complete(
    h: &mut History,
    open: &mut std::collections::HashMap<u64, usize>,
    p: u64,
    ns: u64,
    outcome: Outcome,
    token: Option<u64>,
) {
    if let Some(i) = open.remove(&p) {
        let o = &mut h.ops[i];
        o.complete_ns = Some(ns);
        o.outcome = outcome;
        o.token = token;
    }
}
