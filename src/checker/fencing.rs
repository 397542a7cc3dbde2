//! Fencing: replays the register that refuses stale tokens and judges the tokens themselves.
//!
//! A fenced register cannot lose an update while every section presents a token, so "no
//! update lost with fencing" proves nothing by itself. What this checker judges is whether
//! fencing *worked*, from the sections (what the resource saw, in its own order):
//! - token inversions: a section entered, its lease valid, with a token not above one an
//!   earlier section of the key presented (a counter reset by a restart, repeated or
//!   regressing tokens) — `invalid`;
//! - legitimate writes refused: the register refused a section because of a token an earlier
//!   section presented, while the refused holder's lease was valid — `invalid`;
//! - stale writes refused: refusals caused by a later section, whose holder had been
//!   superseded — what fencing is for;
//! - updates lost on the fenced register (sections without tokens) — `invalid`.
//!
//! Without sections (a hand-made history), tokens must grow in the order acquisitions
//! complete. The same rules as `dlbench_core::Resource`, applied offline.

use std::collections::HashMap;

use super::lost_update::{lost_evidence, replay, section_ref};
use super::{CheckResult, Evidence, History, OpRef, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

/// Each section's rank in its key's entry order (ties broken by record order).
fn entry_ranks(h: &History) -> Vec<u64> {
    let mut order: Vec<usize> = (0..h.sections.len()).collect();
    order.sort_by_key(|&i| (h.sections[i].key, h.sections[i].enter, i));
    let mut rank = vec![0u64; h.sections.len()];
    let mut last_key = None;
    let mut r = 0u64;
    for i in order {
        if last_key != Some(h.sections[i].key) {
            last_key = Some(h.sections[i].key);
            r = 0;
        }
        r += 1;
        rank[i] = r;
    }
    rank
}

/// Sections (indices) that entered with a valid lease and a token not above one an earlier
/// section of the key presented, each with that earlier section.
fn section_inversions(h: &History, rank: &[u64]) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..h.sections.len()).collect();
    order.sort_by_key(|&i| (h.sections[i].key, rank[i]));
    let mut max: HashMap<u32, (u64, usize)> = HashMap::new();
    let mut out = Vec::new();
    for i in order {
        let s = &h.sections[i];
        let Some(t) = s.token else { continue };
        match max.get(&s.key) {
            Some(&(m, j)) if t <= m => {
                if !s.lease_lost {
                    out.push((i, j));
                }
            }
            _ => {
                max.insert(s.key, (t, i));
            }
        }
    }
    out
}

/// Acquisitions (completion order) granted a token not above the previous grant's.
fn op_inversions(h: &History) -> Vec<(OpRef, OpRef)> {
    let mut acquired: Vec<_> = h
        .ops
        .iter()
        .filter(|o| o.f == Op::Acquire && o.outcome == Outcome::Ok && o.token.is_some())
        .collect();
    acquired.sort_by_key(|o| (o.key, o.complete_ns));
    acquired
        .windows(2)
        .filter(|w| w[0].key == w[1].key && w[1].token <= w[0].token)
        .map(|w| (w[0].as_ref(), w[1].as_ref()))
        .collect()
}

pub fn check(h: &History) -> CheckResult {
    let has_tokens = h.ops.iter().any(|o| o.token.is_some()) || h.sections.iter().any(|s| s.token.is_some());
    if !has_tokens {
        let why = if h.fencing_tokens == Some(false) { "the backend has no fencing tokens" } else { "no fencing tokens in the history" };
        return CheckResult::new("fencing", Validity::Unknown, why);
    }
    let rank = entry_ranks(h);
    let inversions: Vec<(OpRef, OpRef)> = if h.sections.is_empty() {
        op_inversions(h)
    } else {
        section_inversions(h, &rank).into_iter().map(|(i, j)| (section_ref(h, j), section_ref(h, i))).collect()
    };
    // The fenced register, refusals classified by who caused them.
    let mut max: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut legit: Vec<usize> = Vec::new();
    let (lost, refused) = replay(h, |i, _| {
        let s = &h.sections[i];
        let Some(t) = s.token else { return true };
        match max.get(&s.key) {
            Some(&(m, by)) if t < m || (t == m && by != rank[i]) => {
                // A section is refused at most once: a refused read skips its write.
                if by < rank[i] && !s.lease_lost {
                    legit.push(i);
                }
                false
            }
            _ => {
                max.insert(s.key, (t, rank[i]));
                true
            }
        }
    });
    let stale_refused = refused.len().saturating_sub(legit.len());
    let mut r = if !inversions.is_empty() || !legit.is_empty() {
        let mut r = CheckResult::new(
            "fencing",
            Validity::Invalid,
            format!(
                "fencing broken: {} token inversion(s), {} legitimate write(s) refused",
                inversions.len(),
                legit.len()
            ),
        );
        for (a, b) in inversions.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence {
                what: format!("key {}: token {:?} came after token {:?}", a.key, b.token, a.token),
                ops: vec![a.clone(), b.clone()],
            });
        }
        for i in legit.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence {
                what: "a holder with a valid lease refused because of an earlier holder's token".into(),
                ops: vec![section_ref(h, *i)],
            });
        }
        r
    } else if !lost.is_empty() {
        let mut r = CheckResult::new("fencing", Validity::Invalid, format!("{} update(s) lost despite fencing", lost.len()));
        r.evidence = lost_evidence(h, &lost);
        r
    } else if h.sections.is_empty() {
        CheckResult::new("fencing", Validity::Valid, "tokens grew with every grant")
    } else if stale_refused == 0 {
        CheckResult::new(
            "fencing",
            Validity::Valid,
            "tokens grew with every holder; no stale write arrived, so fencing was not exercised",
        )
    } else {
        let mut r = CheckResult::new(
            "fencing",
            Validity::Valid,
            format!("{stale_refused} stale write(s) refused; tokens grew with every holder and no legitimate write was refused"),
        );
        for i in refused.iter().take(MAX_EVIDENCE) {
            r.evidence.push(Evidence { what: "stale token refused".into(), ops: vec![section_ref(h, *i)] });
        }
        r
    };
    r.figures = serde_json::json!({
        "token_inversions": inversions.len(),
        "rejected": refused.len(),
        "stale_refused": stale_refused,
        "legit_refused": legit.len(),
        "lost_updates_fenced": lost.len(),
    });
    r
}
