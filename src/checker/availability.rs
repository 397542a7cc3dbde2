//! Availability: did the lock keep granting during the faults that were applied, and did it
//! come back after they healed?
//!
//! Judged against the same workload without faults, so that every hold time reads the same
//! way: `ratio` is the grant rate inside the fault windows over the grant rate outside them
//! (the segment's own no-fault time, from its first grant, start-up excluded). With holds of
//! seconds (long-hold) a second without a grant is normal; a rate that falls is not.
//! `recovery_ms` is the longest time from a fault's heal to the first grant after it (a heal
//! followed by another fault before any grant has its recovery cut short: listed, not
//! counted; the last heal never followed by a grant counts as the rest of the segment);
//! `longest_gap_ms` the longest stretch without a grant after the first one.
//!
//! `valid` when something was granted after the last fault healed (or, without faults,
//! something was granted at all); `invalid` when nothing was after the last heal; `unknown`
//! on an empty history or a fault that never healed. Faults the nemesis could not apply are
//! not fault windows: they are listed as skipped.
//!
//! The grants arrive in time order; the faults (a few a minute) are known before the sweep.

use super::item::{Context, Item, Stamped};
use super::{CheckResult, Validity};
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

/// What one fault saw of the grants.
#[derive(Default, Clone)]
struct FaultSeen {
    first_after_start: Option<u64>,
    first_after_heal: Option<u64>,
}

pub struct AvailabilityChecker {
    ctx: Context,
    windows: Vec<(u64, u64)>,
    /// Whole seconds of the fault windows (at least half a second long), and whether each
    /// saw a grant.
    seconds: Vec<(u64, u64, bool)>,
    seen: Vec<FaultSeen>,
    /// Faults by start, and (healed ones) by heal, with how far the grants have come.
    by_start: Vec<usize>,
    by_heal: Vec<usize>,
    next_start: usize,
    next_heal: usize,
    grants: u64,
    first: Option<u64>,
    last: Option<u64>,
    longest: u64,
    in_faults: u64,
    /// Next window / second to look at (grants come in time order).
    wi: usize,
    si: usize,
}

impl AvailabilityChecker {
    pub fn new(ctx: &Context) -> Self {
        let end = ctx.end_ns;
        let windows = union(ctx.faults.iter().map(|f| (f.start, f.end.unwrap_or(end).max(f.start))).collect());
        let mut seconds = Vec::new();
        for &(a, b) in &windows {
            let mut s = a;
            while s < b {
                let e = (s + SEC).min(b);
                if e - s >= SEC / 2 {
                    seconds.push((s, e, false));
                }
                s = e;
            }
        }
        let mut by_start: Vec<usize> = (0..ctx.faults.len()).collect();
        by_start.sort_by_key(|&i| ctx.faults[i].start);
        let mut by_heal: Vec<usize> = (0..ctx.faults.len()).filter(|&i| ctx.faults[i].end.is_some()).collect();
        by_heal.sort_by_key(|&i| ctx.faults[i].end);
        AvailabilityChecker {
            seen: vec![FaultSeen::default(); ctx.faults.len()],
            by_start,
            by_heal,
            next_start: 0,
            next_heal: 0,
            ctx: ctx.clone(),
            windows,
            seconds,
            grants: 0,
            first: None,
            last: None,
            longest: 0,
            in_faults: 0,
            wi: 0,
            si: 0,
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        let Item::Grant(o) = &s.item else { return };
        if o.f != Op::Acquire {
            return;
        }
        let t = s.at;
        self.grants += 1;
        if let Some(prev) = self.last {
            self.longest = self.longest.max(t.saturating_sub(prev));
        }
        self.first.get_or_insert(t);
        self.last = Some(t);
        while self.wi < self.windows.len() && self.windows[self.wi].1 <= t {
            self.wi += 1;
        }
        if self.windows.get(self.wi).is_some_and(|&(a, _)| a <= t) {
            self.in_faults += 1;
        }
        while self.si < self.seconds.len() && self.seconds[self.si].1 <= t {
            self.si += 1;
        }
        if let Some(sec) = self.seconds.get_mut(self.si) {
            if sec.0 <= t {
                sec.2 = true;
            }
        }
        while let Some(&i) = self.by_start.get(self.next_start).filter(|&&i| self.ctx.faults[i].start <= t) {
            self.seen[i].first_after_start = Some(t - self.ctx.faults[i].start);
            self.next_start += 1;
        }
        while let Some(&i) = self.by_heal.get(self.next_heal).filter(|&&i| self.ctx.faults[i].end.is_some_and(|e| e <= t)) {
            self.seen[i].first_after_heal = Some(t);
            self.next_heal += 1;
        }
    }

    pub fn finish(self) -> CheckResult {
        let h = &self.ctx;
        if h.ops == 0 && h.sections == 0 {
            return CheckResult::new("availability", Validity::Unknown, "no operations");
        }
        let end = h.end_ns.max(self.last.unwrap_or(0));
        let longest = match self.last {
            Some(l) => self.longest.max(end - l),
            None => 0,
        };
        let (fault_ns, outside_ns) = self.window_ns(end);
        let oks_out = self.grants - self.in_faults;
        let (secs, good) = (self.seconds.len() as u64, self.seconds.iter().filter(|s| s.2).count() as u64);
        let pct = if secs > 0 { (good as f64 * 1000.0 / secs as f64).round() / 10.0 } else { 100.0 };
        let (recovery, faults) = self.recoveries(end);
        let skipped: Vec<_> = h.skipped.iter().map(|s| serde_json::json!({"fault": s.f, "at_ms": s.ns / 1_000_000, "why": s.why})).collect();
        let never_healed = h.faults.iter().any(|f| f.end.is_none());
        // Recovered: a grant after the last heal (without faults: any grant at all).
        let recovered = match h.faults.iter().filter_map(|f| f.end).max() {
            Some(t) => !never_healed && self.last.is_some_and(|l| l >= t),
            None => self.grants > 0 && !never_healed,
        };
        let rate = |n: u64, ns: u64| (ns > 0).then(|| n as f64 / (ns as f64 / 1e9));
        let (rate_in, rate_out) = (rate(self.in_faults, fault_ns), rate(oks_out, outside_ns));
        let ratio = match (rate_in, rate_out) {
            (Some(i), Some(o)) if o > 0.0 => Some(((i / o) * 1000.0).round() / 1000.0),
            _ => None,
        };
        let (valid, message) = judge(h.faults.is_empty(), never_healed, recovered, longest, ratio, recovery);
        let mut r = CheckResult::new("availability", valid, message);
        let round = |x: Option<f64>| x.map(|v| (v * 10.0).round() / 10.0);
        r.figures = serde_json::json!({
            "faults_applied": h.faults.len(),
            "fault_ms": fault_ns / 1_000_000,
            "outside_ms": outside_ns / 1_000_000,
            "grants_in_faults": self.in_faults,
            "grants_outside": oks_out,
            "rate_in_faults": round(rate_in),
            "rate_outside": round(rate_out),
            "ratio": ratio,
            "seconds": secs,
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

    /// Nanoseconds inside the fault windows, and outside them from the first grant to `end`.
    fn window_ns(&self, end: u64) -> (u64, u64) {
        let fault_ns: u64 = self.windows.iter().map(|(a, b)| b - a).sum();
        // Outside the fault windows, from the first grant to the end.
        let base_from = self.first.unwrap_or(end);
        let mut outside_ns = end.saturating_sub(base_from);
        for &(a, b) in &self.windows {
            let (a, b) = (a.max(base_from), b.min(end));
            if b > a {
                outside_ns -= b - a;
            }
        }
        (fault_ns, outside_ns)
    }

    /// The longest recovery after a heal, and each fault's figures.
    fn recoveries(&self, end: u64) -> (u64, Vec<serde_json::Value>) {
        let h = &self.ctx;
        let mut starts: Vec<u64> = h.faults.iter().map(|f| f.start).collect();
        starts.sort_unstable();
        let mut recovery = 0u64;
        let mut faults = Vec::new();
        for (f, seen) in h.faults.iter().zip(&self.seen) {
            let next_fault = f.end.and_then(|e| starts.get(starts.partition_point(|&s| s <= e)).copied());
            let grant = seen.first_after_heal;
            let after_heal = match (f.end, grant, next_fault) {
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
            let cut_short = matches!((f.end, grant, next_fault), (Some(_), g, Some(s)) if g.is_none_or(|g| g > s));
            faults.push(serde_json::json!({
                "fault": f.f,
                "targets": f.targets,
                "start_ms": f.start / 1_000_000,
                "end_ms": f.end.map(|e| e / 1_000_000),
                "first_success_after_ms": seen.first_after_start.map(|d| d / 1_000_000),
                "recovery_after_heal_ms": after_heal.map(|d| d / 1_000_000),
                "next_fault_before_recovery": cut_short,
            }));
        }
        (recovery, faults)
    }
}

/// The validity and its message.
fn judge(no_faults: bool, never_healed: bool, recovered: bool, longest: u64, ratio: Option<f64>, recovery: u64) -> (Validity, String) {
    if never_healed {
        (Validity::Unknown, "a fault was never healed in this history".to_string())
    } else if !recovered {
        (
            Validity::Invalid,
            if no_faults { "nothing was ever acquired".to_string() } else { "no successful acquisition after the last fault healed".to_string() },
        )
    } else if no_faults {
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
    }
}

