//! Availability: did the lock keep granting during the faults that were applied, and did it
//! come back after they healed?
//!
//! Judged against the same workload without faults, so that every hold time reads the same
//! way: `ratio` is the grant rate inside the fault windows over the grant rate outside them
//! (the segment's own no-fault time, from its first grant, start-up excluded). With holds of
//! seconds (long-hold) a second without a grant is normal; a rate that falls is not.
//! `recovery_ms` is the longest time from a fault's heal to the first grant after it;
//! `longest_gap_ms` the longest stretch without a grant after the first one.
//!
//! `valid` when something was granted after the last fault healed (or, without faults,
//! something was granted at all); `invalid` when nothing was after the last heal; `unknown`
//! on an empty history or a fault that never healed. Faults the nemesis could not apply are
//! not fault windows: they are listed as skipped.

use super::{CheckResult, History, Outcome, Validity};
use crate::history::Op;

const SEC: u64 = 1_000_000_000;

/// Merge overlapping windows.
fn union(mut w: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    w.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in w {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

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
    let first = oks.first().copied();
    // Longest gap between grants, from the first grant on (the start-up is not a gap), and
    // from the last grant to the end.
    let mut longest = 0u64;
    if let Some(f) = first {
        let mut prev = f;
        for &t in &oks {
            longest = longest.max(t - prev);
            prev = t;
        }
        longest = longest.max(end - prev);
    }
    let count_in = |a: u64, b: u64| (oks.partition_point(|&t| t < b) - oks.partition_point(|&t| t < a)) as u64;

    let windows = union(h.faults.iter().map(|f| (f.start, f.end.unwrap_or(end).max(f.start))).collect());
    let fault_ns: u64 = windows.iter().map(|(a, b)| b - a).sum();
    let oks_in: u64 = windows.iter().map(|&(a, b)| count_in(a, b)).sum();
    // Outside the fault windows, from the first grant to the end.
    let base_from = first.unwrap_or(end);
    let mut outside_ns = end.saturating_sub(base_from);
    let mut oks_out = count_in(base_from, end.saturating_add(1));
    for &(a, b) in &windows {
        let (a, b) = (a.max(base_from), b.min(end));
        if b > a {
            outside_ns -= b - a;
            oks_out -= count_in(a, b);
        }
    }

    // Whole seconds of the fault windows with a grant (a figure for short holds).
    let (mut seconds, mut good) = (0u64, 0u64);
    for &(a, b) in &windows {
        let mut s = a;
        while s < b {
            let e = (s + SEC).min(b);
            if e - s >= SEC / 2 {
                seconds += 1;
                if count_in(s, e) > 0 {
                    good += 1;
                }
            }
            s = e;
        }
    }
    let pct = if seconds > 0 { (good as f64 * 1000.0 / seconds as f64).round() / 10.0 } else { 100.0 };

    let mut faults = Vec::new();
    // From each heal to the first grant after it. A fault whose heal is followed by another
    // fault before any grant has its recovery cut short (listed, not counted); the last heal
    // never followed by a grant counts as at least the rest of the segment, and the segment
    // as not recovered.
    let mut recovery = 0u64;
    let mut starts: Vec<u64> = h.faults.iter().map(|f| f.start).collect();
    starts.sort_unstable();
    for f in &h.faults {
        let after_start = oks.get(oks.partition_point(|&t| t < f.start)).map(|&t| t - f.start);
        let next_grant = f.end.and_then(|e| oks.get(oks.partition_point(|&t| t < e)).copied());
        let next_fault = f.end.and_then(|e| starts.get(starts.partition_point(|&s| s <= e)).copied());
        let after_heal = match (f.end, next_grant, next_fault) {
            (Some(e), Some(g), nf) if nf.is_none_or(|s| g <= s) => {
                recovery = recovery.max(g - e);
                Some(g - e)
            }
            (Some(e), _, None) => {
                recovery = recovery.max(end.saturating_sub(e));
                None
            }
            _ => None,
        };
        let cut_short = matches!((f.end, next_grant, next_fault), (Some(_), g, Some(s)) if g.is_none_or(|g| g > s));
        faults.push(serde_json::json!({
            "fault": f.f,
            "targets": f.targets,
            "start_ms": f.start / 1_000_000,
            "end_ms": f.end.map(|e| e / 1_000_000),
            "first_success_after_ms": after_start.map(|d| d / 1_000_000),
            "recovery_after_heal_ms": after_heal.map(|d| d / 1_000_000),
            "next_fault_before_recovery": cut_short,
        }));
    }
    let skipped: Vec<_> = h.skipped.iter().map(|s| serde_json::json!({"fault": s.f, "at_ms": s.ns / 1_000_000, "why": s.why})).collect();
    let never_healed = h.faults.iter().any(|f| f.end.is_none());
    // Recovered: a grant after the last heal (without faults: any grant at all).
    let recovered = match h.faults.iter().filter_map(|f| f.end).max() {
        Some(t) => !never_healed && oks.last().is_some_and(|&l| l >= t),
        None => !oks.is_empty() && !never_healed,
    };
    let rate = |n: u64, ns: u64| (ns > 0).then(|| n as f64 / (ns as f64 / 1e9));
    let (rate_in, rate_out) = (rate(oks_in, fault_ns), rate(oks_out, outside_ns));
    let ratio = match (rate_in, rate_out) {
        (Some(i), Some(o)) if o > 0.0 => Some(((i / o) * 1000.0).round() / 1000.0),
        _ => None,
    };
    let (valid, message) = if never_healed {
        (Validity::Unknown, "a fault was never healed in this history".to_string())
    } else if !recovered {
        (
            Validity::Invalid,
            if h.faults.is_empty() { "nothing was ever acquired".to_string() } else { "no successful acquisition after the last fault healed".to_string() },
        )
    } else if h.faults.is_empty() {
        (Validity::Valid, format!("no faults applied; longest gap between grants {} ms", longest / 1_000_000))
    } else {
        (
            Validity::Valid,
            format!(
                "grant rate during faults {} of the rate outside them; recovered within {} ms of each heal",
                ratio.map_or("unknown".to_string(), |r| format!("{:.0}%", r * 100.0)),
                recovery / 1_000_000
            ),
        )
    };
    let mut r = CheckResult::new("availability", valid, message);
    let round = |x: Option<f64>| x.map(|v| (v * 10.0).round() / 10.0);
    r.figures = serde_json::json!({
        "faults_applied": h.faults.len(),
        "fault_ms": fault_ns / 1_000_000,
        "outside_ms": outside_ns / 1_000_000,
        "grants_in_faults": oks_in,
        "grants_outside": oks_out,
        "rate_in_faults": round(rate_in),
        "rate_outside": round(rate_out),
        "ratio": ratio,
        "seconds": seconds,
        "success_seconds": good,
        "success_seconds_pct": pct,
        "longest_gap_ms": longest / 1_000_000,
        "recovery_ms": recovery / 1_000_000,
        "recovered": recovered,
        "faults": faults,
        "skipped": skipped,
    });
    r
}
