//! Fencing: tokens handed out for a key grow in the order acquisitions complete, and a
//! register that refuses stale tokens (below the highest seen, or equal to it from another
//! section) loses no update. Figures: how many sections presented stale tokens and were
//! refused.

use std::collections::HashMap;

use super::lost_update::{lost_evidence, replay, section_ref};
use super::{CheckResult, Evidence, History, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

pub fn check(h: &History) -> CheckResult {
    let has_tokens = h.ops.iter().any(|o| o.token.is_some()) || h.sections.iter().any(|s| s.token.is_some());
    if !has_tokens {
        let why = if h.fencing_tokens == Some(false) { "the backend has no fencing tokens" } else { "no fencing tokens in the history" };
        return CheckResult::new("fencing", Validity::Unknown, why);
    }
    // (a) Token order per key in completion order.
    let mut acquired: Vec<_> = h
        .ops
        .iter()
        .filter(|o| o.f == Op::Acquire && o.outcome == Outcome::Ok && o.token.is_some())
        .collect();
    acquired.sort_by_key(|o| (o.key, o.complete_ns));
    let mut inversions = Vec::new();
    for w in acquired.windows(2) {
        if w[0].key == w[1].key && w[1].token <= w[0].token {
            inversions.push((w[0], w[1]));
        }
    }
    // (b) The fenced register.
    let mut max: HashMap<u32, (u64, usize)> = HashMap::new();
    let (lost, refused) = replay(h, |i, _| {
        let s = &h.sections[i];
        let Some(t) = s.token else { return true };
        match max.get(&s.key) {
            Some(&(m, owner)) if t < m || (t == m && owner != i) => false,
            _ => {
                max.insert(s.key, (t, i));
                true
            }
        }
    });
    let mut r = if !inversions.is_empty() {
        let mut r = CheckResult::new(
            "fencing",
            Validity::Invalid,
            format!("{} acquisition(s) got a token not above the previous holder's", inversions.len()),
        );
        for (a, b) in inversions.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence {
                what: format!("key {}: token {:?} granted after token {:?}", a.key, b.token, a.token),
                ops: vec![a.as_ref(), b.as_ref()],
            });
        }
        r
    } else if !lost.is_empty() {
        let mut r = CheckResult::new("fencing", Validity::Invalid, format!("{} update(s) lost despite fencing", lost.len()));
        r.evidence = lost_evidence(h, &lost);
        r
    } else if h.sections.is_empty() {
        CheckResult::new("fencing", Validity::Valid, "tokens grew with every grant")
    } else {
        let mut r = CheckResult::new(
            "fencing",
            Validity::Valid,
            format!("tokens grew with every grant; {} stale request(s) refused, no update lost", refused.len()),
        );
        for i in refused.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence { what: "stale token refused".into(), ops: vec![section_ref(h, *i)] });
        }
        r
    };
    r.figures = serde_json::json!({
        "token_inversions": inversions.len(),
        "rejected": refused.len(),
        "lost_updates_fenced": lost.len(),
    });
    r
}
