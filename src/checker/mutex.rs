//! Mutual exclusion: no two holders of one key at once.
//!
//! With section records (what the resource saw), two sections on a key whose
//! [enter, exit] intervals intersect are a proven violation. Without them (a hand-made
//! history), a process holds a key from its `ok` acquire to its next release invocation on
//! that key, or to the end of the history. An acquire whose outcome is unknown (`info`, or
//! never completed) may hold the key from its invocation until its lease could have expired
//! (TTL after the invocation; to the end of the history when the TTL is not known): an
//! overlap with such a window cannot be proven, so it makes the answer `unknown`, and so
//! does any such window that reaches past the end of the history.

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
    let mut holds = Vec::new();
    for (i, o) in h.ops.iter().enumerate() {
        if o.f != Op::Acquire || o.outcome != Outcome::Ok {
            continue;
        }
        let start = o.complete_ns.unwrap_or(o.invoke_ns);
        let end = h.ops[i + 1..]
            .iter()
            .find(|r| r.p == o.p && r.key == o.key && r.f == Op::Release)
            .map(|r| r.invoke_ns)
            .unwrap_or(h.end_ns.max(start) + 1);
        holds.push(Hold { key: o.key, start, end, op: o.as_ref() });
    }
    holds
}

pub fn check(h: &History) -> CheckResult {
    let definite = definite_holds(h);
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
    } else {
        CheckResult::new("mutual-exclusion", Validity::Valid, "no two holders overlapped")
    };

    // Acquires with unknown outcome: windows in which they may have held their key.
    let uncertain: Vec<Hold> = h
        .ops
        .iter()
        .filter(|o| o.f == Op::Acquire && matches!(o.outcome, Outcome::Info | Outcome::Unresolved))
        .map(|o| Hold {
            key: o.key,
            start: o.invoke_ns,
            end: h.ttl_ns.map_or(u64::MAX, |t| o.invoke_ns.saturating_add(t)),
            op: o.as_ref(),
        })
        .collect();
    let past_end = uncertain.iter().filter(|u| u.end > h.end_ns).count();
    let clashing = uncertain
        .iter()
        .filter(|u| definite.iter().any(|d| d.key == u.key && d.start < u.end && u.start < d.end && d.op.p != u.op.p))
        .count();
    if r.valid == Validity::Valid && (past_end > 0 || (h.sections.is_empty() && clashing > 0)) {
        r.valid = Validity::Unknown;
        r.message = format!(
            "no proven overlap, but {} acquire(s) with unknown outcome may still hold a lock past the end of the history{}",
            past_end,
            if h.sections.is_empty() && clashing > 0 {
                format!(" and {clashing} may have held one while another process did")
            } else {
                String::new()
            }
        );
        for u in uncertain.iter().filter(|u| u.end > h.end_ns).take(MAX_EVIDENCE) {
            r.evidence.push(Evidence { what: "unknown outcome".into(), ops: vec![u.op.clone()] });
        }
    }
    r.figures = serde_json::json!({
        "overlaps": pairs.len(),
        "holds": definite.len(),
        "unknown_acquires": uncertain.len(),
        "from_sections": !h.sections.is_empty(),
    });
    r
}
