//! Checking a history of any length in bounded memory.
//!
//! A history is written as it happens, by many clients through a few buffers, so its lines
//! are only roughly in time order, and an operation's invocation and completion are two lines
//! apart. Checking it used to mean holding a whole segment in memory (about 490 MB per
//! million operations). Instead, two passes:
//!
//! 1. **Pairing**, in file order: each invocation waits for its process's completion (state:
//!    one open operation per process, one held lock per process and key), and every finished
//!    thing becomes an [`Item`] stamped with the time it starts: an acquire at its
//!    invocation, a grant at its completion, a client-side hold and a server-side claim at
//!    their starts, a critical section at its entry. Faults (a few per minute) are kept in
//!    memory.
//! 2. **Sweep**, in time order: the items go through an external sort (`extsort`: sorted
//!    segments spilled to a temporary directory past a fixed number of items, then merged),
//!    and every checker consumes them once, keeping only what is still open — holders
//!    inside, claims not yet expired, contended acquires not yet explained, reads whose writes
//!    have not landed. Each checker is O(n log n) in operations, unknown ones included.
//!
//! Memory is the sort buffer ([`SEGMENT_ITEMS`] items) plus what is open at one moment.

use std::cmp::Ordering;
use std::collections::HashMap;

use extsort::ExternalSorter;

pub use super::item::{Context, Item, SectionItem, Stamped, SEGMENT_ITEMS};
use super::ops::{Fault, Skipped};
use super::{availability, contention, fencing, lost_update, mutex, CheckResult, OpRecord, Outcome, SegmentVerdict, Validity};
use crate::history::{Meta, Op, Record};

/// One segment fed record by record, checked at [`SegmentStream::finish`].
pub struct SegmentStream {
    meta: Option<Meta>,
    sorter: extsort::PushExternalSorter<Stamped, fn(&Stamped, &Stamped) -> Ordering>,
    serial: u64,
    ctx: Context,
    /// The open invocation of each process.
    open: HashMap<u64, OpRecord>,
    /// Each process's granted lock on a key, until its release completes.
    holding: HashMap<(u64, u32), OpRecord>,
    /// Where an interrupt cut the segment.
    interrupted_ns: Option<u64>,
    /// Acquires cancelled by the interrupt or the drain bound.
    cancelled: u64,
}

fn by_key(a: &Stamped, b: &Stamped) -> Ordering {
    a.cmp(b)
}

impl SegmentStream {
    pub fn new(meta: Option<Meta>) -> Self {
        let sorter = ExternalSorter::new().with_segment_size(SEGMENT_ITEMS).pushed_by(by_key as fn(&Stamped, &Stamped) -> Ordering);
        let ctx = Context {
            ttl_ns: meta.as_ref().and_then(Meta::window_ns),
            fencing_tokens: meta.as_ref().map(|m| m.fencing_tokens),
            split_votes: meta.as_ref().is_some_and(|m| m.split_votes),
            ..Default::default()
        };
        SegmentStream { meta, sorter, serial: 0, ctx, open: HashMap::new(), holding: HashMap::new(), interrupted_ns: None, cancelled: 0 }
    }

    fn emit(&mut self, at: u64, item: Item) -> std::io::Result<()> {
        self.serial += 1;
        self.sorter.push(Stamped { at, serial: self.serial, item })
    }

    fn ended(&mut self, acq: OpRecord, release_invoke: u64, release: Option<&OpRecord>) -> std::io::Result<()> {
        let start = acq.complete_ns.unwrap_or(acq.invoke_ns);
        if self.ctx.sections == 0 {
            self.emit(start, Item::Hold { start, end: release_invoke, op: acq.clone() })?;
        }
        let end = match release {
            Some(r) if r.outcome == Outcome::Ok => r.complete_ns.unwrap_or(release_invoke),
            Some(r) => self.ctx.plus_ttl(r.complete_ns.unwrap_or(release_invoke)),
            None => u64::MAX,
        };
        self.emit(acq.invoke_ns, Item::Claim { start: acq.invoke_ns, end: end.max(acq.invoke_ns + 1), p: acq.p, key: acq.key })
    }

    fn complete(&mut self, p: u64, ns: u64, outcome: Outcome, token: Option<u64>, contention: bool) -> std::io::Result<()> {
        let Some(mut o) = self.open.remove(&p) else { return Ok(()) };
        o.complete_ns = Some(ns);
        o.outcome = outcome;
        o.token = token;
        o.contention = contention;
        self.finished(o)
    }

    fn finished(&mut self, o: OpRecord) -> std::io::Result<()> {
        match o.f {
            Op::Acquire => {
                self.ctx.ops += 1;
                if o.token.is_some() {
                    self.ctx.has_tokens = true;
                }
                self.emit(o.invoke_ns, Item::Acquire(o.clone()))?;
                if o.outcome == Outcome::Ok {
                    let c = o.complete_ns.unwrap_or(o.invoke_ns);
                    self.emit(c, Item::Grant(o.clone()))?;
                    self.holding.insert((o.p, o.key), o);
                }
            }
            Op::Release => {
                self.ctx.ops += 1;
                if let Some(acq) = self.holding.remove(&(o.p, o.key)) {
                    self.ended(acq, o.invoke_ns, Some(&o))?;
                }
            }
        }
        Ok(())
    }

    /// Take one record of the segment (its `meta` excluded).
    pub fn push(&mut self, r: &Record) -> std::io::Result<()> {
        if let Some(ns) = r.ns() {
            self.ctx.end_ns = self.ctx.end_ns.max(ns);
        }
        match r {
            Record::Meta(_) => {}
            Record::Invoke { p, f, key, ns } => {
                let o = OpRecord { p: *p, f: *f, key: *key, invoke_ns: *ns, complete_ns: None, outcome: Outcome::Unresolved, token: None, contention: false };
                if let Some(prev) = self.open.insert(*p, o) {
                    // A process invoked again without completing: its earlier operation stays
                    // unresolved.
                    self.finished(prev)?;
                }
            }
            Record::Ok { p, ns, token, .. } => self.complete(*p, *ns, Outcome::Ok, *token, false)?,
            Record::Fail { p, ns, kind, error, .. } => {
                let contention = match kind.as_deref() {
                    Some(k) => k == "timeout" || k == "busy",
                    // A hand-written history: LockError's contention messages.
                    None => error.starts_with("not acquired"),
                };
                self.complete(*p, *ns, Outcome::Fail, None, contention)?;
            }
            Record::Info { p, f, ns, error, .. } => {
                if *f == Op::Acquire && error.contains(crate::history::CANCELLED) && self.open.get(p).is_some_and(|o| o.f == Op::Acquire) {
                    self.cancelled += 1;
                }
                self.complete(*p, *ns, Outcome::Info, None, false)?
            }
            Record::Interrupted { ns } => self.interrupted_ns = Some(self.interrupted_ns.map_or(*ns, |t| t.min(*ns))),
            Record::Section { p, key, token, enter, exit, read_seq, read, write_seq, lease_lost, register } => {
                self.ctx.end_ns = self.ctx.end_ns.max(*exit);
                self.ctx.sections += 1;
                if token.is_some() {
                    self.ctx.has_tokens = true;
                }
                let s = SectionItem {
                    p: *p,
                    key: *key,
                    token: *token,
                    enter: *enter,
                    exit: *exit,
                    read_seq: *read_seq,
                    read: *read,
                    write_seq: *write_seq,
                    lease_lost: *lease_lost,
                    register: *register,
                };
                self.emit(*enter, Item::Section(s))?;
            }
            Record::Nemesis { f, phase, targets, ns, detail } => match phase.as_str() {
                // A start whose own check showed it did nothing (a kill that left the
                // process running) opens no fault window.
                "start" if crate::nemesis::no_effect(detail) => self.ctx.skipped.push(Skipped { f: f.clone(), ns: *ns, why: detail.clone() }),
                "start" => self.ctx.faults.push(Fault { f: f.clone(), targets: targets.clone(), start: *ns, end: None }),
                "end" => {
                    if let Some(i) = self.ctx.faults.iter().rposition(|x| x.f == *f && x.end.is_none()) {
                        // A fault its probe showed doing nothing (a cut that dropped no
                        // traffic) is no fault window: judged as if it had been skipped.
                        if crate::nemesis::no_effect(detail) {
                            self.ctx.faults.remove(i);
                            self.ctx.skipped.push(Skipped { f: f.clone(), ns: *ns, why: detail.clone() });
                        } else {
                            self.ctx.faults[i].end = Some(*ns);
                        }
                    }
                }
                _ => self.ctx.skipped.push(Skipped { f: f.clone(), ns: *ns, why: detail.clone() }),
            },
        }
        Ok(())
    }

    /// Sweep the sorted items through every checker; the worst of them is the segment's.
    pub fn finish(mut self) -> std::io::Result<SegmentVerdict> {
        // What never completed stays unresolved: acquires that may hold to the end of time,
        // releases that may not have happened.
        let mut open: Vec<OpRecord> = std::mem::take(&mut self.open).into_values().collect();
        open.sort_by_key(|o| (o.invoke_ns, o.p));
        for o in open {
            match o.f {
                Op::Acquire => self.finished(o)?,
                Op::Release => {
                    if let Some(acq) = self.holding.remove(&(o.p, o.key)) {
                        self.ended(acq, o.invoke_ns, None)?;
                    }
                }
            }
        }
        let mut held: Vec<OpRecord> = std::mem::take(&mut self.holding).into_values().collect();
        held.sort_by_key(|o| (o.invoke_ns, o.p));
        let end = self.ctx.end_ns;
        for acq in held {
            let start = acq.complete_ns.unwrap_or(acq.invoke_ns);
            self.ended(acq, end.max(start) + 1, None)?;
        }
        let ctx = self.ctx.clone();
        let sorted = self.sorter.done()?;

        let mut mutex = mutex::Mutex::new(&ctx);
        let mut replay = lost_update::Replay::new();
        let mut fence = fencing::Fencing::new(&ctx);
        let mut cont = contention::Contention::new(&ctx);
        let mut avail = availability::AvailabilityChecker::new(&ctx);
        for s in sorted {
            let s = s?;
            mutex.item(&s);
            replay.item(&s);
            fence.item(&s);
            cont.item(&s);
            avail.item(&s);
        }
        replay.drain();
        let mut results: Vec<CheckResult> = vec![mutex.finish(), lost_update::result(&replay, &ctx), cont.finish()];
        // The fencing question does not arise for a backend that declares it has no tokens
        // (Redlock): its answer would only ever be `unknown`, and would mask the others.
        if ctx.fencing_tokens != Some(false) {
            results.push(fence.finish(&replay));
        }
        results.push(avail.finish());
        let valid = results.iter().map(|r| r.valid).max().unwrap_or(Validity::Unknown);
        let (backend, workload) =
            self.meta.as_ref().map(|m| (m.backend.clone(), m.workload.clone())).unwrap_or_else(|| ("unknown".into(), "unknown".into()));
        let phase = self.meta.as_ref().map(|m| m.phase_id()).unwrap_or_default();
        Ok(SegmentVerdict { backend, workload, phase, valid, results, interrupted_ns: self.interrupted_ns, cancelled: self.cancelled })
    }
}

#[cfg(test)]
mod tests {
    use crate::checker::item::Latest2;

    /// Against the definition, on pseudo-random intervals added in any order.
    #[test]
    fn latest2_agrees_with_brute_force() {
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..500 {
            let mut l = Latest2::default();
            let mut all: Vec<(u64, u64)> = Vec::new();
            for _ in 0..rnd(12) {
                let (p, end) = (rnd(4), rnd(100));
                l.add(0, p, end);
                all.push((p, end));
                let (q, t) = (rnd(4), rnd(100));
                let brute = all.iter().any(|&(p, e)| p != q && e > t);
                assert_eq!(l.other_after(0, q, t), brute, "{all:?} q={q} t={t}");
            }
        }
    }
}
