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

use super::item::{Context, Item, SectionItem, Stamped, SEGMENT_ITEMS};
use super::ops::{FaultLog, Pairing};
use super::{availability, contention, fencing, lost_update, mutex, windows, CheckResult, OpRecord, Outcome, SegmentVerdict, Validity};
use crate::history::{Meta, Op, Record};

/// One segment fed record by record, checked at [`SegmentStream::finish`].
pub struct SegmentStream {
    meta: Option<Meta>,
    sorter: extsort::PushExternalSorter<Stamped, fn(&Stamped, &Stamped) -> Ordering>,
    serial: u64,
    ctx: Context,
    /// The open invocation of each process.
    pairing: Pairing,
    /// The nemesis's fault windows, into `ctx` at the end.
    faults: FaultLog,
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
            choreographed: meta.as_ref().is_some_and(|m| m.choreographed),
            allowance_ns: meta.as_ref().and_then(|m| m.recovery_allowance_ms).unwrap_or(0) * 1_000_000,
            ..Default::default()
        };
        SegmentStream { meta, sorter, serial: 0, ctx, pairing: Pairing::default(), faults: FaultLog::default(), holding: HashMap::new(), interrupted_ns: None, cancelled: 0 }
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
        // A polling lock's earlier attempts were refused: it could hold only from the attempt
        // that was granted, so only from there does it explain another's refusal.
        let from = acq.attempt_ns.filter(|&a| a >= acq.invoke_ns).unwrap_or(acq.invoke_ns);
        self.emit(from, Item::Claim { start: from, end: end.max(from + 1), p: acq.p, key: acq.key })
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
            Record::Interrupted { ns } => self.interrupted_ns = Some(self.interrupted_ns.map_or(*ns, |t| t.min(*ns))),
            Record::Section { .. } => {
                let s = SectionItem::of(r).expect("a section record");
                self.ctx.end_ns = self.ctx.end_ns.max(s.exit);
                self.ctx.sections += 1;
                if s.token.is_some() {
                    self.ctx.has_tokens = true;
                }
                self.emit(s.enter, Item::Section(s))?;
            }
            Record::Nemesis { .. } => self.faults.push(r),
            _ => {
                if let Record::Info { p, f, error, .. } = r {
                    if *f == Op::Acquire && error.contains(crate::history::CANCELLED) && self.pairing.open(*p).is_some_and(|o| o.f == Op::Acquire) {
                        self.cancelled += 1;
                    }
                }
                if let Some(o) = self.pairing.push(r) {
                    self.finished(o)?;
                }
            }
        }
        Ok(())
    }

    /// Sweep the sorted items through every checker; the worst of them is the segment's.
    pub fn finish(mut self) -> std::io::Result<SegmentVerdict> {
        // What never completed stays unresolved: acquires that may hold to the end of time,
        // releases that may not have happened.
        for o in self.pairing.unfinished() {
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
        let log = std::mem::take(&mut self.faults);
        (self.ctx.faults, self.ctx.skipped) = (log.windows(), log.skipped);
        self.ctx.interrupted = self.interrupted_ns.is_some();
        let ctx = self.ctx.clone();
        let sorted = self.sorter.done()?;

        let mut mutex = mutex::Mutex::new(&ctx);
        let mut replay = lost_update::Replay::new();
        let mut fence = fencing::Fencing::new(&ctx);
        let mut cont = contention::Contention::new(&ctx);
        let mut wins = windows::Windows::new(&ctx);
        for s in sorted {
            let s = s?;
            mutex.item(&s);
            replay.item(&s);
            fence.item(&s);
            cont.item(&s);
            wins.item(&s);
        }
        replay.drain();
        let mut results: Vec<CheckResult> = vec![mutex.finish(), lost_update::result(&replay, &ctx), cont.finish()];
        // The fencing question does not arise for a backend that declares it has no tokens
        // (Redlock): its answer would only ever be `unknown`, and would mask the others.
        if ctx.fencing_tokens != Some(false) {
            results.push(fence.finish(&replay));
        }
        let seen = wins.finish();
        results.push(availability::result(&seen, &ctx));
        let valid = results.iter().map(|r| r.valid).max().unwrap_or(Validity::Unknown);
        let (backend, workload) =
            self.meta.as_ref().map(|m| (m.backend.clone(), m.workload.clone())).unwrap_or_else(|| ("unknown".into(), "unknown".into()));
        let phase = self.meta.as_ref().map(|m| m.phase_id()).unwrap_or_default();
        Ok(SegmentVerdict { backend, workload, phase, valid, results, interrupted_ns: self.interrupted_ns, cancelled: self.cancelled, windows: Some(seen) })
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
