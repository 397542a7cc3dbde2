//! Availability during the faults that took effect: the availability checker's figures as
//! the model keeps them, combined over phases, and the word they earn.

use serde::{Deserialize, Serialize};

use crate::checker::CheckResult;


/// Availability during the faults that were applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Availability {
    /// Grant rate during faults over the rate outside them (the same workload without faults).
    pub ratio: Option<f64>,
    /// Grants per second inside the fault windows, and outside them.
    pub rate_in_faults: Option<f64>,
    pub rate_outside: Option<f64>,
    pub grants_in_faults: u64,
    pub grants_outside: u64,
    pub fault_ms: u64,
    pub outside_ms: u64,
    /// Share of whole fault seconds with at least one successful acquisition.
    pub success_seconds_pct: f64,
    /// Longest stretch without a successful acquisition (after the first).
    pub longest_gap_ms: u64,
    /// Longest time from a fault's heal to the first success after it (at least the rest of
    /// the phase when none came).
    pub recovery_ms: u64,
    /// Every heal was followed by a successful acquisition.
    #[serde(default = "yes")]
    pub recovered: bool,
    pub seconds: u64,
}

fn yes() -> bool {
    true
}

impl Availability {
    pub fn from_check(r: &CheckResult) -> Option<Self> {
        let f = &r.figures;
        Some(Availability {
            ratio: f.get("ratio").and_then(|v| v.as_f64()),
            rate_in_faults: f.get("rate_in_faults").and_then(|v| v.as_f64()),
            rate_outside: f.get("rate_outside").and_then(|v| v.as_f64()),
            grants_in_faults: f.get("grants_in_faults")?.as_u64()?,
            grants_outside: f.get("grants_outside")?.as_u64()?,
            fault_ms: f.get("fault_ms")?.as_u64()?,
            outside_ms: f.get("outside_ms")?.as_u64()?,
            success_seconds_pct: f.get("success_seconds_pct")?.as_f64()?,
            longest_gap_ms: f.get("longest_gap_ms")?.as_u64()?,
            recovery_ms: f.get("recovery_ms")?.as_u64()?,
            recovered: f.get("recovered").and_then(|v| v.as_bool()).unwrap_or(true),
            seconds: f.get("seconds")?.as_u64()?,
        })
    }

    /// Combine phases: grants and times add up, the worst gap and recovery stand.
    pub fn combine<'a>(it: impl IntoIterator<Item = &'a Availability>) -> Option<Availability> {
        let v: Vec<&Availability> = it.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        let sum = |f: fn(&Availability) -> u64| v.iter().map(|a| f(a)).sum::<u64>();
        let (gi, go, fm, om) = (sum(|a| a.grants_in_faults), sum(|a| a.grants_outside), sum(|a| a.fault_ms), sum(|a| a.outside_ms));
        let seconds = sum(|a| a.seconds);
        let good: f64 = v.iter().map(|a| a.success_seconds_pct / 100.0 * a.seconds as f64).sum();
        let rate = |n: u64, ms: u64| (ms > 0).then(|| ((n as f64 / (ms as f64 / 1000.0)) * 10.0).round() / 10.0);
        let (ri, ro) = (rate(gi, fm), rate(go, om));
        let ratio = match (fm > 0, om > 0 && go > 0) {
            (true, true) => Some((((gi as f64 / fm as f64) / (go as f64 / om as f64)) * 1000.0).round() / 1000.0),
            _ => None,
        };
        Some(Availability {
            ratio,
            rate_in_faults: ri,
            rate_outside: ro,
            grants_in_faults: gi,
            grants_outside: go,
            fault_ms: fm,
            outside_ms: om,
            success_seconds_pct: if seconds > 0 { (good * 1000.0 / seconds as f64).round() / 10.0 } else { 100.0 },
            longest_gap_ms: v.iter().map(|a| a.longest_gap_ms).max().unwrap_or(0),
            recovery_ms: v.iter().map(|a| a.recovery_ms).max().unwrap_or(0),
            recovered: v.iter().all(|a| a.recovered),
            seconds,
        })
    }

    /// `available`, `degraded`, `unavailable`, or `unknown` (no rate to compare with).
    pub fn label(&self) -> &'static str {
        self.ratio.map_or("unknown", |r| super::words::AvailWord::of_ratio(r).as_str())
    }
}
