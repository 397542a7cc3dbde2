//! Contention that nobody explains: an acquire told "held by someone else" (a wait timeout, a
//! busy try-lock) while, by the history, no other process held the key, tried to take it, or
//! may have held it. Then some holder exists that the history says does not: an acquire
//! reported as failed that took effect, or a release reported as done that did not. A lock
//! whose reports cannot be believed is not one to build on.
//!
//! What explains a contended acquire of process `q` on key `k` over [invoke, complete]: an
//! interval of another process on `k` that intersects it —
//! - any acquire in flight, whatever its outcome ([invoke, complete]): a claim being made
//!   can block others (a Redlock split vote, a queued etcd or ZooKeeper claim);
//! - a hold: an `ok` acquire from its invocation to its release's completion; when the
//!   release did not end `ok` (or never came), until a TTL after it (the claim expires);
//! - an acquire with unknown outcome: to its completion plus the TTL (never completed: open).
//!
//! Faults can make waits time out with no holder at all (a waiter whose watch is cut off), so
//! an unexplained contention inside a fault window (to a TTL after it heals) makes the answer
//! `unknown` rather than `invalid`.

use std::collections::HashMap;

use super::ops::IntervalIndex;
use super::{CheckResult, Evidence, History, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

pub fn check(h: &History) -> CheckResult {
    let ttl = h.ttl_ns.unwrap_or(u64::MAX);
    let plus_ttl = |t: u64| t.saturating_add(ttl);
    // Every process's activity per key: (start, end, process).
    let mut activity: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
    // The open `ok` acquire of each (process, key), by start.
    let mut holding: HashMap<(u64, u32), u64> = HashMap::new();
    for o in &h.ops {
        let done = o.complete_ns.unwrap_or(u64::MAX);
        match o.f {
            Op::Acquire => {
                let end = match o.outcome {
                    Outcome::Info => o.complete_ns.map_or(u64::MAX, plus_ttl),
                    Outcome::Unresolved => u64::MAX,
                    Outcome::Ok | Outcome::Fail => done,
                };
                activity.entry(o.key).or_default().push((o.invoke_ns, end.max(o.invoke_ns + 1), o.p));
                if o.outcome == Outcome::Ok {
                    holding.insert((o.p, o.key), o.invoke_ns);
                }
            }
            Op::Release => {
                if let Some(start) = holding.remove(&(o.p, o.key)) {
                    let end = match o.outcome {
                        Outcome::Ok => done,
                        _ => plus_ttl(o.complete_ns.unwrap_or(u64::MAX).min(h.end_ns.max(o.invoke_ns))),
                    };
                    activity.entry(o.key).or_default().push((start, end.max(start + 1), o.p));
                }
            }
        }
    }
    // Holds never released are held to the end (and beyond, for all we know).
    for ((p, key), start) in holding {
        activity.entry(key).or_default().push((start, u64::MAX, p));
    }
    let index: HashMap<u32, IntervalIndex> = activity.into_iter().map(|(k, v)| (k, IntervalIndex::new(v))).collect();
    let in_fault = |a: u64, b: u64| h.faults.iter().any(|f| f.start < b && plus_ttl(f.end.unwrap_or(u64::MAX)) > a);

    let contended: Vec<_> = h.ops.iter().filter(|o| o.f == Op::Acquire && o.outcome == Outcome::Fail && o.contention).collect();
    let mut unexplained = Vec::new();
    let mut unexplained_in_faults = 0usize;
    for o in &contended {
        let (a, b) = (o.invoke_ns, o.complete_ns.unwrap_or(o.invoke_ns).max(o.invoke_ns + 1));
        if index.get(&o.key).is_some_and(|ix| ix.other_intersects(o.p, a, b)) {
            continue;
        }
        if in_fault(a, b) {
            unexplained_in_faults += 1;
        } else {
            unexplained.push(*o);
        }
    }
    let mut r = if !unexplained.is_empty() {
        let mut r = CheckResult::new(
            "contention",
            Validity::Invalid,
            format!(
                "{} acquire(s) were refused as contended while no other process held, took or could hold the key: \
                 a holder the history does not know (an acquire reported failed that took effect?)",
                unexplained.len()
            ),
        );
        for o in unexplained.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence { what: format!("key {}: contended with nobody", o.key), ops: vec![o.as_ref()] });
        }
        r
    } else if unexplained_in_faults > 0 {
        CheckResult::new(
            "contention",
            Validity::Unknown,
            format!("{unexplained_in_faults} contended acquire(s) during faults had no holder to explain them (a fault can cause that)"),
        )
    } else if contended.is_empty() {
        CheckResult::new("contention", Validity::Valid, "no acquire was refused as contended")
    } else {
        CheckResult::new(
            "contention",
            Validity::Valid,
            format!("each of {} contended acquire(s) met another process holding or taking the key", contended.len()),
        )
    };
    r.figures = serde_json::json!({
        "contended": contended.len(),
        "unexplained": unexplained.len(),
        "unexplained_in_faults": unexplained_in_faults,
    });
    r
}
