//! Availability: how much of the time the lock could be acquired, the longest stretch
//! without a successful acquisition, and how long each fault took to recover from.
//!
//! `success_seconds_pct` is the share of whole seconds (of the fault windows when there were
//! faults, of the whole segment otherwise) with at least one successful acquisition.
//! `recovery_ms` is the longest time from a fault's start to the first success after it.
//! `valid` when the lock was acquired after the last fault healed (or there were no faults
//! and something was acquired); `invalid` when it never was again; `unknown` on an empty
//! history.

use super::{CheckResult, History, Outcome, Validity};
use crate::history::Op;

pub fn check(h: &History) -> CheckResult {
    let mut oks: Vec<u64> = h
        .ops
        .iter()
        .filter(|o| o.f == Op::Acquire && o.outcome == Outcome::Ok)
        .filter_map(|o| o.complete_ns)
        .collect();
    oks.sort_unstable();
    if h.ops.is_empty() {
        return CheckResult::new("availability", Validity::Unknown, "no operations");
    }
    let end = h.end_ns.max(oks.last().copied().unwrap_or(0));
    // Longest gap, including from the start and to the end.
    let mut longest = 0u64;
    let mut prev = 0u64;
    for &t in &oks {
        longest = longest.max(t - prev);
        prev = t;
    }
    longest = longest.max(end - prev);

    let windows: Vec<(u64, u64)> = if h.faults.is_empty() {
        vec![(0, end)]
    } else {
        h.faults.iter().map(|f| (f.start, f.end.unwrap_or(end))).collect()
    };
    let (mut seconds, mut good) = (0u64, 0u64);
    for (a, b) in &windows {
        let mut s = *a;
        while s < *b {
            let e = (s + 1_000_000_000).min(*b);
            if e - s >= 500_000_000 {
                seconds += 1;
                let i = oks.partition_point(|&t| t < s);
                if oks.get(i).is_some_and(|&t| t < e) {
                    good += 1;
                }
            }
            s = e;
        }
    }
    let pct = if seconds > 0 { (good as f64 * 1000.0 / seconds as f64).round() / 10.0 } else { 100.0 };

    let mut faults = Vec::new();
    let mut recovery = 0u64;
    for f in &h.faults {
        let i = oks.partition_point(|&t| t < f.start);
        let first = oks.get(i).map(|&t| t - f.start);
        if let Some(d) = first {
            recovery = recovery.max(d);
        }
        faults.push(serde_json::json!({
            "fault": f.f,
            "targets": f.targets,
            "start_ms": f.start / 1_000_000,
            "end_ms": f.end.map(|e| e / 1_000_000),
            "first_success_after_ms": first.map(|d| d / 1_000_000),
        }));
    }
    let last_heal = h.faults.iter().filter_map(|f| f.end).max();
    let recovered = match last_heal {
        Some(t) => oks.last().is_some_and(|&l| l >= t),
        None => !oks.is_empty(),
    };
    let never_healed = h.faults.iter().any(|f| f.end.is_none());
    let (valid, message) = if recovered && !never_healed {
        (Validity::Valid, format!("{pct}% of seconds had a success; longest gap {} ms", longest / 1_000_000))
    } else if never_healed {
        (Validity::Unknown, "a fault was never healed in this history".to_string())
    } else {
        (Validity::Invalid, "no successful acquisition after the last fault healed".to_string())
    };
    let mut r = CheckResult::new("availability", valid, message);
    r.figures = serde_json::json!({
        "seconds": seconds,
        "success_seconds": good,
        "success_seconds_pct": pct,
        "longest_gap_ms": longest / 1_000_000,
        "recovery_ms": recovery / 1_000_000,
        "faults": faults,
    });
    r
}
