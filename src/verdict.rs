//! From measurements to a verdict: is the lock safe (without and with fencing), and did it
//! stay available under the faults? Nothing here is a per-backend label: every word of a
//! verdict comes from counts the run measured.

use serde::{Deserialize, Serialize};

use crate::checker::{CheckResult, SegmentVerdict, Validity};

/// Which side of the resource the verdict and table speak for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FencingMode {
    /// The resource takes every write: does the lock alone keep the data safe?
    Off,
    /// The resource refuses stale tokens: does lock + fencing keep the data safe?
    On,
    /// Both figures side by side (one run measures both).
    Both,
}

/// Availability during faults (or the whole run without faults).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Availability {
    /// Share of whole seconds with at least one successful acquisition.
    pub success_seconds_pct: f64,
    /// Longest stretch without a successful acquisition.
    pub longest_gap_ms: u64,
    /// Longest time from a fault's start to the first success after it.
    pub recovery_ms: u64,
    pub seconds: u64,
}

impl Availability {
    pub fn from_check(r: &CheckResult) -> Option<Self> {
        let f = &r.figures;
        Some(Availability {
            success_seconds_pct: f.get("success_seconds_pct")?.as_f64()?,
            longest_gap_ms: f.get("longest_gap_ms")?.as_u64()?,
            recovery_ms: f.get("recovery_ms")?.as_u64()?,
            seconds: f.get("seconds")?.as_u64()?,
        })
    }

    /// Combine phases: seconds add up, the worst gap and recovery stand.
    pub fn combine<'a>(it: impl IntoIterator<Item = &'a Availability>) -> Option<Availability> {
        let v: Vec<&Availability> = it.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        let seconds: u64 = v.iter().map(|a| a.seconds).sum();
        let good: f64 = v.iter().map(|a| a.success_seconds_pct / 100.0 * a.seconds as f64).sum();
        Some(Availability {
            success_seconds_pct: if seconds > 0 { (good * 1000.0 / seconds as f64).round() / 10.0 } else { 100.0 },
            longest_gap_ms: v.iter().map(|a| a.longest_gap_ms).max().unwrap_or(0),
            recovery_ms: v.iter().map(|a| a.recovery_ms).max().unwrap_or(0),
            seconds,
        })
    }
}

/// A checker's answer without its evidence (that is in `checks.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckBrief {
    pub checker: String,
    pub valid: Validity,
    pub message: String,
}

pub fn briefs(v: &SegmentVerdict) -> Vec<CheckBrief> {
    v.results.iter().map(|r| CheckBrief { checker: r.checker.clone(), valid: r.valid, message: r.message.clone() }).collect()
}

/// The measurements a verdict is made of.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub overlaps: u64,
    pub lost_updates: u64,
    pub lost_updates_fenced: u64,
    pub rejected: u64,
    pub has_tokens: bool,
    /// Only when faults ran.
    pub availability: Option<Availability>,
}

/// The verdict column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// `safe`, `unsafe` (data damaged even with fencing, or fencing off), or
    /// `safe with fencing` (the lock failed, fencing caught every stale write).
    pub safety: String,
    /// `available`, `degraded`, or `unavailable`, from the share of fault seconds with a
    /// success (99% and 50% are the lines); absent without faults.
    pub availability: Option<String>,
    /// CP: kept the data safe and gave up availability to do so; AP: stayed available and
    /// let two holders in; CP+A: safe and available under these faults.
    pub class: String,
    /// One line for the table.
    pub summary: String,
}

pub fn verdict(m: &Measured, mode: FencingMode) -> Verdict {
    let lock_violated = m.overlaps > 0 || m.lost_updates > 0;
    let fenced_ok = m.has_tokens && m.lost_updates_fenced == 0;
    let safety = match (lock_violated, mode) {
        (false, _) => "safe",
        (true, FencingMode::Off) => "unsafe",
        (true, _) if fenced_ok => "safe with fencing",
        (true, _) => "unsafe",
    };
    let availability = m.availability.as_ref().map(|a| {
        if a.success_seconds_pct >= 99.0 {
            "available"
        } else if a.success_seconds_pct >= 50.0 {
            "degraded"
        } else {
            "unavailable"
        }
    });
    let available = availability.is_none_or(|a| a == "available");
    let class = match (lock_violated, available) {
        (false, true) if availability.is_some() => "CP+A",
        (false, _) => "CP",
        (true, true) => "AP",
        (true, false) => "neither",
    };
    let mut summary = safety.to_string();
    if lock_violated {
        summary.push_str(&format!(" ({} overlap(s), {} lost update(s) without fencing", m.overlaps, m.lost_updates));
        if m.has_tokens {
            summary.push_str(&format!(", {} stale write(s) refused with fencing", m.rejected));
        }
        summary.push(')');
    }
    if let (Some(a), Some(av)) = (&m.availability, availability) {
        summary.push_str(&format!("; {av}: {}% of fault seconds, longest gap {} ms", a.success_seconds_pct, a.longest_gap_ms));
    }
    Verdict {
        safety: safety.to_string(),
        availability: availability.map(str::to_string),
        class: class.to_string(),
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_counts() {
        let ok = Measured { has_tokens: true, ..Default::default() };
        assert_eq!(verdict(&ok, FencingMode::Both).safety, "safe");
        let broken = Measured { overlaps: 2, lost_updates: 1, rejected: 1, has_tokens: true, ..Default::default() };
        assert_eq!(verdict(&broken, FencingMode::Both).safety, "safe with fencing");
        assert_eq!(verdict(&broken, FencingMode::Off).safety, "unsafe");
        let no_tokens = Measured { overlaps: 1, lost_updates: 1, lost_updates_fenced: 1, ..Default::default() };
        assert_eq!(verdict(&no_tokens, FencingMode::On).safety, "unsafe");
        let down = Measured {
            availability: Some(Availability { success_seconds_pct: 40.0, longest_gap_ms: 5000, recovery_ms: 4000, seconds: 10 }),
            ..ok.clone()
        };
        let v = verdict(&down, FencingMode::Both);
        assert_eq!((v.availability.as_deref(), v.class.as_str()), (Some("unavailable"), "CP"));
        let ap = Measured {
            availability: Some(Availability { success_seconds_pct: 100.0, ..Default::default() }),
            ..no_tokens
        };
        assert_eq!(verdict(&ap, FencingMode::Both).class, "AP");
    }
}
