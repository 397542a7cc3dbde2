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

use std::collections::HashMap;

use super::ops::IntervalIndex;
use super::{CheckResult, Evidence, History, OpRef, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

#[derive(Debug, Clone)]
struct Hold {
    key: u32,
    start: u64,
    end: u64,
    op: OpRef,
}

/// Sweep holds of one key sorted by start; report pairs that overlap.
fn overlaps(mut holds: Vec<Hold>) -> Vec<(Hold, Hold)> {
    holds.sort_by_key(|h| (h.key, h.start));
    let mut out = Vec::new();
    let mut current: Option<Hold> = None;
    for h in holds {
        match &current {
            Some(c) if c.key == h.key && h.start < c.end => {
                out.push((c.clone(), h.clone()));
                if h.end > c.end {
                    current = Some(h);
                }
            }
            _ => current = Some(h),
        }
    }
    out
}

fn definite_holds(h: &History) -> Vec<Hold> {
    if !h.sections.is_empty() {
        return h
            .sections
            .iter()
            .map(|s| {
                let op = h.acquire_before(s.p, s.key, s.enter).map(|o| o.as_ref()).unwrap_or(OpRef {
                    p: s.p,
                    f: Op::Acquire,
                    key: s.key,
                    invoke_ns: s.enter,
                    complete_ns: Some(s.enter),
                    outcome: Outcome::Ok,
                    token: s.token,
                });
                Hold { key: s.key, start: s.enter, end: s.exit, op }
            })
            .collect();
    }
    // Client-side holds: from the ok acquire to the same process's next release of the key.
    let mut holds = Vec::new();
    let mut open: HashMap<(u64, u32), usize> = HashMap::new();
    for o in &h.ops {
        match (o.f, o.outcome) {
            (Op::Acquire, Outcome::Ok) => {
                let start = o.complete_ns.unwrap_or(o.invoke_ns);
                open.insert((o.p, o.key), holds.len());
                holds.push(Hold { key: o.key, start, end: u64::MAX, op: o.as_ref() });
            }
            (Op::Release, _) => {
                if let Some(i) = open.remove(&(o.p, o.key)) {
                    holds[i].end = o.invoke_ns;
                }
            }
            _ => {}
        }
    }
    for hold in &mut holds {
        if hold.end == u64::MAX {
            hold.end = h.end_ns.max(hold.start) + 1;
        }
    }
    holds
}

/// The window in which an acquire with unknown outcome may hold its key.
fn uncertain_window(h: &History, o: &super::OpRecord) -> (u64, u64) {
    let end = match (o.outcome, o.complete_ns, h.ttl_ns) {
        (Outcome::Info, Some(c), Some(ttl)) => c.saturating_add(ttl),
        _ => u64::MAX,
    };
    (o.invoke_ns, end)
}

pub fn check(h: &History) -> CheckResult {
    let definite = definite_holds(h);
    let from_sections = !h.sections.is_empty();
    let pairs = overlaps(definite.clone());
    let mut r = if !pairs.is_empty() {
        let mut r = CheckResult::new(
            "mutual-exclusion",
            Validity::Invalid,
            format!("{} time(s) two holders held one key at once", pairs.len()),
        );
        for (a, b) in pairs.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence {
                what: format!(
                    "key {}: held by process {} from {:.3}s to {:.3}s and by process {} from {:.3}s",
                    a.key,
                    a.op.p,
                    a.start as f64 / 1e9,
                    a.end as f64 / 1e9,
                    b.op.p,
                    b.start as f64 / 1e9
                ),
                ops: vec![a.op.clone(), b.op.clone()],
            });
        }
        r
    } else if definite.is_empty() {
        CheckResult::new("mutual-exclusion", Validity::Unknown, "no holder in the history: nothing to judge")
    } else {
        CheckResult::new("mutual-exclusion", Validity::Valid, "no two holders overlapped")
    };

    // Acquires with unknown outcome: windows in which they may have held their key.
    let uncertain: Vec<(u64, u64, &super::OpRecord)> = h
        .ops
        .iter()
        .filter(|o| o.f == Op::Acquire && matches!(o.outcome, Outcome::Info | Outcome::Unresolved))
        .map(|o| {
            let (a, b) = uncertain_window(h, o);
            (a, b, o)
        })
        .collect();
    if !from_sections && r.valid == Validity::Valid && !uncertain.is_empty() {
        let mut by_key: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
        for d in &definite {
            by_key.entry(d.key).or_default().push((d.start, d.end, d.op.p));
        }
        let index: HashMap<u32, IntervalIndex> = by_key.into_iter().map(|(k, v)| (k, IntervalIndex::new(v))).collect();
        let past_end: Vec<_> = uncertain.iter().filter(|u| u.1 > h.end_ns).collect();
        let clashing = uncertain
            .iter()
            .filter(|(a, b, o)| index.get(&o.key).is_some_and(|ix| ix.other_intersects(o.p, *a, *b)))
            .count();
        if !past_end.is_empty() || clashing > 0 {
            r.valid = Validity::Unknown;
            r.message = format!(
                "no proven overlap, but {} acquire(s) with unknown outcome may still hold a lock past the end of the history \
                 and {clashing} may have held one while another process did",
                past_end.len(),
            );
            for u in past_end.iter().take(MAX_EVIDENCE) {
                r.evidence.push(Evidence { what: "unknown outcome, window open past the end".into(), ops: vec![u.2.as_ref()] });
            }
        }
    }
    if from_sections && r.valid == Validity::Valid && !uncertain.is_empty() {
        r.message = format!(
            "no two holders overlapped at the resource ({} acquire(s) with unknown outcome never entered it)",
            uncertain.len()
        );
    }
    r.figures = serde_json::json!({
        "overlaps": pairs.len(),
        "holds": definite.len(),
        "unknown_acquires": uncertain.len(),
        "from_sections": from_sections,
    });
    r
}
