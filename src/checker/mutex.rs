//! Mutual exclusion: no two holders of one key at once.
//!
//! With section records (what the resource saw), two sections on a key whose
//! [enter, exit] intervals intersect are a proven violation, and sections are the only way a
//! holder uses a lock: an acquire whose outcome is unknown never entered the resource (the
//! driver and the scenarios enter only on `ok`), so it cannot cause damage there and does not
//! make the answer uncertain.
//!
//! Without sections (a hand-made or foreign history), a process holds a key from its `ok`
//! acquire to its next release invocation on that key, or to the end of the history. An
//! acquire whose outcome is unknown may hold the key from its invocation until its claim could
//! have expired: a polling acquire can be granted at any moment until it completes, and a
//! session lock keeps its claim alive while it waits, so the window runs to completion + TTL
//! (to the end of time when the TTL is not known, or when the acquire never completed). An
//! overlap with such a window cannot be proven, so it makes the answer `unknown`, and so does
//! any such window that reaches past the end of the history.
//!
//! One sweep in time order: per key, the holder that ends last so far (an overlap is a new
//! holder starting before it ends), and the open holds and unknown windows per process.

use std::collections::HashMap;

use super::item::{Context, Item, Latest2, Stamped};
use super::{CheckResult, Evidence, OpRecord, OpRef, Outcome, Validity, MAX_EVIDENCE};

#[derive(Debug, Clone)]
struct Hold {
    start: u64,
    end: u64,
    op: OpRef,
}

pub struct Mutex {
    from_sections: bool,
    end_ns: u64,
    ttl_ns: Option<u64>,
    /// Per key, the holder that ends last so far.
    current: HashMap<u32, Hold>,
    holds: u64,
    overlaps: u64,
    evidence: Vec<Evidence>,
    /// The latest `ok` acquire of each process on each key, to name a section's operation.
    last_acquire: HashMap<(u64, u32), OpRef>,
    unknown: u64,
    past_end: u64,
    past_end_evidence: Vec<OpRef>,
    clashes: u64,
    open_holds: Latest2,
    open_unknown: Latest2,
}

impl Mutex {
    pub fn new(ctx: &Context) -> Self {
        Mutex {
            from_sections: ctx.sections > 0,
            end_ns: ctx.end_ns,
            ttl_ns: ctx.ttl_ns,
            current: HashMap::new(),
            holds: 0,
            overlaps: 0,
            evidence: Vec::new(),
            last_acquire: HashMap::new(),
            unknown: 0,
            past_end: 0,
            past_end_evidence: Vec::new(),
            clashes: 0,
            open_holds: Latest2::default(),
            open_unknown: Latest2::default(),
        }
    }

    fn hold(&mut self, key: u32, h: Hold) {
        self.holds += 1;
        match self.current.get(&key) {
            Some(c) if h.start < c.end => {
                self.overlaps += 1;
                if self.evidence.len() < MAX_EVIDENCE {
                    self.evidence.push(Evidence {
                        what: format!(
                            "key {}: held by process {} from {:.3}s to {:.3}s and by process {} from {:.3}s",
                            key,
                            c.op.p,
                            c.start as f64 / 1e9,
                            c.end as f64 / 1e9,
                            h.op.p,
                            h.start as f64 / 1e9
                        ),
                        ops: vec![c.op.clone(), h.op.clone()],
                    });
                }
                if h.end > c.end {
                    self.current.insert(key, h);
                }
            }
            _ => {
                self.current.insert(key, h);
            }
        }
    }

    fn unknown_acquire(&mut self, o: &OpRecord) {
        self.unknown += 1;
        let end = match (o.outcome, o.complete_ns, self.ttl_ns) {
            (Outcome::Info, Some(c), Some(ttl)) => c.saturating_add(ttl),
            _ => u64::MAX,
        };
        if end > self.end_ns {
            self.past_end += 1;
            if self.past_end_evidence.len() < MAX_EVIDENCE {
                self.past_end_evidence.push(o.as_ref());
            }
        }
        if !self.from_sections {
            if self.open_holds.other_after(o.key, o.p, o.invoke_ns) {
                self.clashes += 1;
            }
            self.open_unknown.add(o.key, o.p, end);
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        match &s.item {
            Item::Acquire(o) => match o.outcome {
                Outcome::Ok => {
                    self.last_acquire.insert((o.p, o.key), o.as_ref());
                }
                Outcome::Info | Outcome::Unresolved => self.unknown_acquire(o),
                Outcome::Fail => {}
            },
            Item::Hold { start, end, op } if !self.from_sections => {
                if self.open_unknown.other_after(op.key, op.p, *start) {
                    self.clashes += 1;
                }
                self.open_holds.add(op.key, op.p, *end);
                self.hold(op.key, Hold { start: *start, end: *end, op: op.as_ref() });
            }
            Item::Section(sec) if self.from_sections => {
                let op = self.last_acquire.remove(&(sec.p, sec.key)).unwrap_or_else(|| sec.stand_in());
                self.hold(sec.key, Hold { start: sec.enter, end: sec.exit, op });
            }
            _ => {}
        }
    }

    pub fn finish(self) -> CheckResult {
        let mut r = if self.overlaps > 0 {
            let mut r = CheckResult::new(
                crate::checker::CheckerId::MutualExclusion,
                Validity::Invalid,
                format!("{} time(s) two holders held one key at once", self.overlaps),
            );
            r.evidence = self.evidence;
            r
        } else if self.holds == 0 {
            CheckResult::new(crate::checker::CheckerId::MutualExclusion, Validity::Unknown, "no holder in the history: nothing to judge")
        } else {
            CheckResult::new(crate::checker::CheckerId::MutualExclusion, Validity::Valid, "no two holders overlapped")
        };
        if !self.from_sections && r.valid == Validity::Valid && (self.past_end > 0 || self.clashes > 0) {
            r.valid = Validity::Unknown;
            r.message = format!(
                "no proven overlap, but {} acquire(s) with unknown outcome may still hold a lock past the end of the history \
                 and {} time(s) one may have held a lock while another process did",
                self.past_end, self.clashes
            );
            for op in self.past_end_evidence {
                r.evidence.push(Evidence { what: "unknown outcome, window open past the end".into(), ops: vec![op] });
            }
        }
        if self.from_sections && r.valid == Validity::Valid && self.unknown > 0 {
            r.message = format!("no two holders overlapped at the resource ({} acquire(s) with unknown outcome never entered it)", self.unknown);
        }
        r.figures = serde_json::json!({
            "overlaps": self.overlaps,
            "holds": self.holds,
            "unknown_acquires": self.unknown,
            "from_sections": self.from_sections,
        });
        r
    }
}
