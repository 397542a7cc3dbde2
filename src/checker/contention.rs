//! Contention that nobody explains: an acquire told "held by someone else" (a wait timeout, a
//! busy try-lock) while, by the history, no other process held the key, tried to take it, or
//! may have held it. Then some holder exists that the history says does not: an acquire
//! reported as failed that took effect, or a release reported as done that did not. A lock
//! whose reports cannot be believed is not one to build on.
//!
//! What explains a contended acquire of process `q` on key `k` over [invoke, complete]: a
//! possible holder of `k`, another process's interval that intersects it —
//! - a claim: an `ok` acquire from its invocation to its release's completion; when the
//!   release did not end `ok` (or never came), until a TTL after it (the claim expires);
//! - an acquire with unknown outcome: to its completion plus the TTL (never completed: open);
//! - only where a failed acquire can block without holding (the independent nodes of
//!   Redlock, whose split vote leaves claims on a minority: `Meta::split_votes`), any
//!   acquire in flight, whatever its outcome.
//!
//! A failed acquire is never a holder: two waiters refused by the same hidden holder do not
//! explain each other. (A queued etcd or ZooKeeper claim blocks only those behind it, and is
//! itself blocked by a holder, so a holder is always there to explain a refusal.)
//!
//! Faults can make waits time out with no holder at all (a waiter whose watch is cut off), so
//! an unexplained contention inside a fault window (to a TTL after it heals) makes the answer
//! `unknown` rather than `invalid`.
//!
//! One sweep in time order: intervals arrive by their start, so a contended acquire is
//! explained either by an interval already open when it arrives, or by one that starts before
//! it completes; once the sweep passes its completion, nothing more can explain it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::item::{Context, Item, Latest2, Stamped};
use super::{CheckResult, Evidence, OpRecord, OpRef, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

struct Query {
    start: u64,
    end: u64,
    op: OpRef,
}

pub struct Contention {
    ttl_ns: Option<u64>,
    split_votes: bool,
    faults: Vec<(u64, u64)>,
    /// Per key: the latest ends of open intervals, by process.
    open: Latest2,
    /// Per key, the contended acquires still waiting for an explanation.
    waiting: HashMap<u32, HashMap<u64, Query>>,
    /// (completion, key, id) of each waiting query, to close them as the sweep passes.
    deadlines: BinaryHeap<Reverse<(u64, u32, u64)>>,
    next_id: u64,
    contended: u64,
    unexplained: u64,
    unexplained_in_faults: u64,
    evidence: Vec<Evidence>,
}

impl Contention {
    pub fn new(ctx: &Context) -> Self {
        Contention {
            ttl_ns: ctx.ttl_ns,
            split_votes: ctx.split_votes,
            faults: ctx.faults.iter().filter(|f| !f.effect.is_none()).map(|f| (f.start, ctx.plus_ttl(f.heal.unwrap_or(u64::MAX)))).collect(),
            open: Latest2::default(),
            waiting: HashMap::new(),
            deadlines: BinaryHeap::new(),
            next_id: 0,
            contended: 0,
            unexplained: 0,
            unexplained_in_faults: 0,
            evidence: Vec::new(),
        }
    }

    fn activity(&mut self, key: u32, p: u64, start: u64, end: u64) {
        // Explains every waiting query of another process that completes after it starts.
        if let Some(w) = self.waiting.get_mut(&key) {
            w.retain(|_, q| q.op.p == p || q.end <= start);
        }
        self.open.add(key, p, end);
    }

    fn query(&mut self, o: &OpRecord) {
        self.contended += 1;
        let (start, end) = (o.invoke_ns, o.complete_ns.unwrap_or(o.invoke_ns).max(o.invoke_ns + 1));
        let explained = self.open.other_after(o.key, o.p, start);
        if !explained {
            self.next_id += 1;
            self.waiting.entry(o.key).or_default().insert(self.next_id, Query { start, end, op: o.as_ref() });
            self.deadlines.push(Reverse((end, o.key, self.next_id)));
        }
    }

    fn unexplained(&mut self, q: Query) {
        if self.faults.iter().any(|&(a, b)| a < q.end && b > q.start) {
            self.unexplained_in_faults += 1;
        } else {
            self.unexplained += 1;
            if self.evidence.len() < MAX_EVIDENCE {
                self.evidence.push(Evidence { what: format!("key {}: contended with nobody", q.op.key), ops: vec![q.op] });
            }
        }
    }

    /// Close the queries nothing can explain any more: the sweep is past their completion.
    fn close_until(&mut self, now: u64) {
        while let Some(&Reverse((end, key, id))) = self.deadlines.peek() {
            if end > now {
                break;
            }
            self.deadlines.pop();
            if let Some(q) = self.waiting.get_mut(&key).and_then(|w| w.remove(&id)) {
                self.unexplained(q);
            }
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        self.close_until(s.at);
        match &s.item {
            Item::Acquire(o) if o.f == Op::Acquire => {
                // An `ok` acquire holds from its invocation: its claim (below) says so.
                let end = match o.outcome {
                    Outcome::Info => Some(o.complete_ns.map_or(u64::MAX, |c| c.saturating_add(self.ttl_ns.unwrap_or(u64::MAX)))),
                    Outcome::Unresolved => Some(u64::MAX),
                    Outcome::Fail if self.split_votes => Some(o.complete_ns.unwrap_or(u64::MAX)),
                    Outcome::Ok | Outcome::Fail => None,
                };
                if let Some(end) = end {
                    self.activity(o.key, o.p, o.invoke_ns, end.max(o.invoke_ns + 1));
                }
                if o.outcome == Outcome::Fail && o.contention {
                    self.query(o);
                }
            }
            Item::Claim { start, end, p, key } => self.activity(*key, *p, *start, *end),
            _ => {}
        }
    }

    pub fn finish(mut self) -> CheckResult {
        self.close_until(u64::MAX);
        let mut r = if self.unexplained > 0 {
            let mut r = CheckResult::new(
                crate::checker::CheckerId::Contention,
                Validity::Invalid,
                format!(
                    "{} acquire(s) were refused as contended while no other process held, took or could hold the key: \
                     a holder the history does not know (an acquire reported failed that took effect?)",
                    self.unexplained
                ),
            );
            r.evidence = self.evidence;
            r
        } else if self.unexplained_in_faults > 0 {
            CheckResult::new(
                crate::checker::CheckerId::Contention,
                Validity::Unknown,
                format!("{} contended acquire(s) during faults had no holder to explain them (a fault can cause that)", self.unexplained_in_faults),
            )
        } else if self.contended == 0 {
            CheckResult::new(crate::checker::CheckerId::Contention, Validity::Valid, "no acquire was refused as contended")
        } else {
            CheckResult::new(
                crate::checker::CheckerId::Contention,
                Validity::Valid,
                format!("each of {} contended acquire(s) met another process holding or taking the key", self.contended),
            )
        };
        r.figures = serde_json::json!({
            "contended": self.contended,
            "unexplained": self.unexplained,
            "unexplained_in_faults": self.unexplained_in_faults,
        });
        r
    }
}
