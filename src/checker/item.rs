//! What the sweep carries: the items a history segment becomes ([`Stamped`] [`Item`]s, in
//! time order through the external sort, with their compact on-disk encoding), the
//! [`Context`] every checker knows before the sweep, and [`Latest2`], the open-interval index
//! two checkers share. The checkers read these; [`super::stream`] makes them and feeds the
//! checkers, so no checker imports the stream.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::io::{Read, Write};

use extsort::Sortable;

use super::ops::{Fault, Skipped};
use super::{OpRecord, OpRef, Outcome};
use crate::history::{Op, Record};

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
    /// A `section` record as the checkers read it.
    pub fn of(r: &Record) -> Option<SectionItem> {
        let Record::Section { p, key, token, enter, exit, read_seq, read, write_seq, lease_lost, register } = r else { return None };
        Some(SectionItem {
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
        })
    }

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
    wopt(w, o.token)?;
    wopt(w, o.attempt_ns)
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
        attempt_ns: ropt(r)?,
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
    /// A scenario's choreography (see `Meta::choreographed`).
    pub choreographed: bool,
    /// An interrupt cut the segment.
    pub interrupted: bool,
    /// What the servers may need after a heal besides the TTL (see
    /// `Meta::recovery_allowance_ms`), in nanoseconds.
    pub allowance_ns: u64,
}

impl Context {
    /// `t` plus the TTL (the end of time when the TTL is not known).
    pub fn plus_ttl(&self, t: u64) -> u64 {
        t.saturating_add(self.ttl_ns.unwrap_or(u64::MAX))
    }
}
