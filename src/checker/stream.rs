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
use std::io::{Read, Write};

use extsort::{ExternalSorter, Sortable};

use super::ops::{Fault, Skipped};
use super::{availability, contention, fencing, lost_update, mutex, CheckResult, OpRecord, OpRef, Outcome, SegmentVerdict, Validity};
use crate::history::{Meta, Op, Record};

/// Items the sort keeps in memory before it spills a sorted segment to disk (about 100 bytes
/// each in memory).
pub const SEGMENT_ITEMS: usize = 1_000_000;

/// A critical section as the resource saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionItem {
    pub p: u64,
    pub key: u32,
    pub token: Option<u64>,
    pub enter: u64,
    pub exit: u64,
    pub read_seq: Option<u64>,
    pub read: Option<u64>,
    pub write_seq: Option<u64>,
    pub lease_lost: bool,
    /// The register it read and wrote (see `Record::Section`).
    pub register: u32,
}

impl SectionItem {
    /// The operation to name for this section when its `ok` acquire is not in the history
    /// (a hand-made or cut history): an acquire granted at the moment it entered.
    pub fn stand_in(&self) -> OpRef {
        OpRef { p: self.p, f: Op::Acquire, key: self.key, invoke_ns: self.enter, complete_ns: Some(self.enter), outcome: Outcome::Ok, token: self.token }
    }
}

/// One thing the sweep sees, at the time it starts.
#[derive(Debug, Clone)]
pub enum Item {
    /// An acquire, at its invocation, with its outcome.
    Acquire(OpRecord),
    /// An `ok` acquire's grant, at its completion.
    Grant(OpRecord),
    /// A client-side hold (for histories without sections): from the `ok` acquire's
    /// completion to its release's invocation (or the end of the history).
    Hold { start: u64, end: u64, op: OpRecord },
    /// What a holder may hold on the servers: from the acquire's invocation to the release's
    /// completion, plus the TTL when the release did not end `ok` (to the end of time when it
    /// never came).
    Claim { start: u64, end: u64, p: u64, key: u32 },
    /// A critical section, at its entry.
    Section(SectionItem),
}

/// An item and its place: sorted by time, then by its order in the file.
#[derive(Debug, Clone)]
pub struct Stamped {
    pub at: u64,
    pub serial: u64,
    pub item: Item,
}

impl Stamped {
    fn key(&self) -> (u64, u64) {
        (self.at, self.serial)
    }
}

impl PartialEq for Stamped {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Stamped {}
impl PartialOrd for Stamped {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Stamped {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

// A small fixed encoding for the sort's spill files.
fn w64(w: &mut impl Write, v: u64) -> std::io::Result<()> {
    w.write_all(&v.to_le_bytes())
}
fn wopt(w: &mut impl Write, v: Option<u64>) -> std::io::Result<()> {
    match v {
        Some(x) => {
            w.write_all(&[1])?;
            w64(w, x)
        }
        None => w.write_all(&[0]),
    }
}
fn r64(r: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}
fn r8(r: &mut impl Read) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}
fn ropt(r: &mut impl Read) -> std::io::Result<Option<u64>> {
    Ok(if r8(r)? == 1 { Some(r64(r)?) } else { None })
}

fn wop(w: &mut impl Write, o: &OpRecord) -> std::io::Result<()> {
    w64(w, o.p)?;
    let f = if o.f == Op::Acquire { 0u8 } else { 1 };
    let outcome = match o.outcome {
        Outcome::Ok => 0u8,
        Outcome::Fail => 1,
        Outcome::Info => 2,
        Outcome::Unresolved => 3,
    };
    w.write_all(&[f, outcome, o.contention as u8])?;
    w64(w, o.key as u64)?;
    w64(w, o.invoke_ns)?;
    wopt(w, o.complete_ns)?;
    wopt(w, o.token)
}
fn rop(r: &mut impl Read) -> std::io::Result<OpRecord> {
    let p = r64(r)?;
    let mut b = [0u8; 3];
    r.read_exact(&mut b)?;
    let f = if b[0] == 0 { Op::Acquire } else { Op::Release };
    let outcome = match b[1] {
        0 => Outcome::Ok,
        1 => Outcome::Fail,
        2 => Outcome::Info,
        _ => Outcome::Unresolved,
    };
    Ok(OpRecord {
        p,
        f,
        outcome,
        contention: b[2] == 1,
        key: r64(r)? as u32,
        invoke_ns: r64(r)?,
        complete_ns: ropt(r)?,
        token: ropt(r)?,
    })
}

impl Sortable for Stamped {
    fn encode<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        w64(w, self.at)?;
        w64(w, self.serial)?;
        match &self.item {
            Item::Acquire(o) => {
                w.write_all(&[0])?;
                wop(w, o)
            }
            Item::Grant(o) => {
                w.write_all(&[1])?;
                wop(w, o)
            }
            Item::Hold { start, end, op } => {
                w.write_all(&[2])?;
                w64(w, *start)?;
                w64(w, *end)?;
                wop(w, op)
            }
            Item::Claim { start, end, p, key } => {
                w.write_all(&[3])?;
                w64(w, *start)?;
                w64(w, *end)?;
                w64(w, *p)?;
                w64(w, *key as u64)
            }
            Item::Section(s) => {
                w.write_all(&[4, s.lease_lost as u8])?;
                w64(w, s.p)?;
                w64(w, s.key as u64)?;
                wopt(w, s.token)?;
                w64(w, s.enter)?;
                w64(w, s.exit)?;
                wopt(w, s.read_seq)?;
                wopt(w, s.read)?;
                wopt(w, s.write_seq)?;
                w64(w, s.register as u64)
            }
        }
    }

    fn decode<R: Read>(r: &mut R) -> std::io::Result<Self> {
        let at = r64(r)?;
        let serial = r64(r)?;
        let item = match r8(r)? {
            0 => Item::Acquire(rop(r)?),
            1 => Item::Grant(rop(r)?),
            2 => Item::Hold { start: r64(r)?, end: r64(r)?, op: rop(r)? },
            3 => Item::Claim { start: r64(r)?, end: r64(r)?, p: r64(r)?, key: r64(r)? as u32 },
            4 => {
                let lease_lost = r8(r)? == 1;
                Item::Section(SectionItem {
                    lease_lost,
                    p: r64(r)?,
                    key: r64(r)? as u32,
                    token: ropt(r)?,
                    enter: r64(r)?,
                    exit: r64(r)?,
                    read_seq: ropt(r)?,
                    read: ropt(r)?,
                    write_seq: ropt(r)?,
                    register: r64(r)? as u32,
                })
            }
            t => return Err(std::io::Error::other(format!("bad item tag {t}"))),
        };
        Ok(Stamped { at, serial, item })
    }
}

/// Per key, the two latest ends of open intervals by two different processes: enough to
/// answer "is something of a process other than `p` open after `t`?" in O(1), however many
/// processes came and went (each retired process leaves a window open for a TTL).
#[derive(Default)]
pub struct Latest2(HashMap<u32, [(u64, u64); 2]>);

impl Latest2 {
    const NONE: (u64, u64) = (0, u64::MAX);

    pub fn add(&mut self, key: u32, p: u64, end: u64) {
        let [a, b] = self.0.entry(key).or_insert([Self::NONE, Self::NONE]);
        if a.1 == p {
            a.0 = a.0.max(end);
        } else if end > a.0 {
            *b = *a;
            *a = (end, p);
        } else if b.1 == p || end > b.0 {
            *b = (b.0.max(end), p);
        }
    }

    /// Something of a process other than `p` open after `t` on `key`.
    pub fn other_after(&self, key: u32, p: u64, t: u64) -> bool {
        self.0.get(&key).is_some_and(|[a, b]| if a.1 != p { a.1 != u64::MAX && a.0 > t } else { b.1 != u64::MAX && b.0 > t })
    }
}

/// What every checker knows before the sweep: the segment's settings, its faults, its end.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub ttl_ns: Option<u64>,
    pub fencing_tokens: Option<bool>,
    /// The last timestamp in the segment.
    pub end_ns: u64,
    pub faults: Vec<Fault>,
    pub skipped: Vec<Skipped>,
    pub sections: u64,
    pub has_tokens: bool,
    pub ops: u64,
    /// See [`Meta::split_votes`].
    pub split_votes: bool,
}

impl Context {
    /// `t` plus the TTL (the end of time when the TTL is not known).
    pub fn plus_ttl(&self, t: u64) -> u64 {
        t.saturating_add(self.ttl_ns.unwrap_or(u64::MAX))
    }
}

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
            ttl_ns: meta.as_ref().map(|m| m.ttl_ms * 1_000_000),
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
                if *f == Op::Acquire && error.contains(crate::driver::CANCELLED) && self.open.get(p).is_some_and(|o| o.f == Op::Acquire) {
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
        let mut avail = availability::Availability::new(&ctx);
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
    use super::Latest2;

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
