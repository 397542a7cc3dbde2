//! From measurements to a verdict: is the lock safe (without and with fencing), did it stay
//! available under the faults that were applied, and how strong is the evidence? Nothing here
//! is a per-backend label: every word of a verdict comes from counts the run measured and from
//! the checkers' answers, and the worst of them wins.
//!
//! - **safety**: `safe`, `unsafe`, `safe with fencing` (the lock let two holders in, fencing
//!   refused every stale write, no token went backwards, no legitimate holder was refused),
//!   `fencing broken` (tokens went backwards or a legitimate holder was refused), or
//!   `unknown` (a checker could not decide). Never `safe` while a checker says `unknown`.
//! - **fencing**: what the fenced side showed: `n/a (no tokens)`, `not exercised` (no stale
//!   write arrived), `refused N stale write(s)`, or `broken: ...`.
//! - **evidence**: `strong`, or `weak` when holders were inside their critical sections less
//!   than [`WEAK_EXPOSURE`] of the time: a second holder granted at a random moment would most
//!   likely find nobody inside and go unseen, so "0 overlaps" says little.
//! - **class**: what the backend *claims* (its capabilities), and what was *observed* — only
//!   when faults were actually applied: CP (kept the data safe, gave up availability), CP+A
//!   (safe and available under these faults), AP (available, let two holders in), neither.
//!   A backend that claims CP and is observed letting two holders in is a contradiction.

use serde::{Deserialize, Serialize};

use crate::checker::{CheckResult, SegmentVerdict, Validity};

/// Below this exposure (fraction of wall time some holder was inside, mean over keys) the
/// evidence for "no overlap" is weak.
pub const WEAK_EXPOSURE: f64 = 0.2;

/// Grant rate during faults over the rate outside them: at or above this, `available`.
pub const AVAILABLE_RATIO: f64 = 0.8;
/// ... at or above this, `degraded`; below, `unavailable`.
pub const DEGRADED_RATIO: f64 = 0.3;

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
        match self.ratio {
            Some(r) if r >= AVAILABLE_RATIO => "available",
            Some(r) if r >= DEGRADED_RATIO => "degraded",
            Some(_) => "unavailable",
            None => "unknown",
        }
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
    pub legit_refused: u64,
    pub token_inversions: u64,
    pub has_tokens: bool,
    /// Every checker's answer, over every phase.
    pub checks: Vec<CheckBrief>,
    /// Only when faults were applied.
    pub availability: Option<Availability>,
    /// `CP` or `AP`, from the backend's capabilities.
    pub claimed: String,
    /// Faults that were applied (start and end recorded), by name.
    pub faults_applied: Vec<String>,
    /// Faults the target could not apply.
    pub faults_skipped: Vec<String>,
    /// Mean over keys of the fraction of wall time some holder was inside.
    pub exposure: Option<f64>,
}

impl Measured {
    fn worst(&self, names: &[&str]) -> Option<Validity> {
        self.checks.iter().filter(|c| names.contains(&c.checker.as_str())).map(|c| c.valid).max()
    }
}

/// The verdict column. Fields after `safety` default when a summary written by an older
/// dlbench is read back (compare, report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// `safe`, `unsafe`, `safe with fencing`, `fencing broken`, or `unknown`.
    pub safety: String,
    /// `n/a (no tokens)`, `not exercised`, `refused N stale write(s)`, or `broken: ...`.
    #[serde(default)]
    pub fencing: String,
    /// `strong`, `weak`, or `none` (nothing entered the resource).
    #[serde(default)]
    pub evidence: String,
    #[serde(default)]
    pub exposure: Option<f64>,
    /// `available`, `degraded`, `unavailable` or `unknown`, from the grant rate during faults
    /// against the rate outside them; absent without applied faults.
    #[serde(default)]
    pub availability: Option<String>,
    /// The class the backend claims: `CP` or `AP`.
    #[serde(default)]
    pub class_claimed: String,
    /// The class observed under the faults applied; absent when none was applied.
    #[serde(default)]
    pub class_observed: Option<String>,
    /// The backend claims CP and was observed letting two holders in.
    #[serde(default)]
    pub contradiction: bool,
    #[serde(default)]
    pub faults_applied: Vec<String>,
    #[serde(default)]
    pub faults_skipped: Vec<String>,
    /// The worst of every checker and count the verdict speaks for (the exit status).
    #[serde(default = "unknown")]
    pub valid: Validity,
    /// One line for the table.
    #[serde(default)]
    pub summary: String,
}

fn unknown() -> Validity {
    Validity::Unknown
}

const LOCK_CHECKERS: [&str; 3] = ["mutual-exclusion", "lost-updates", "contention"];

pub fn verdict(m: &Measured, mode: FencingMode) -> Verdict {
    let lock_checks = m.worst(&LOCK_CHECKERS);
    let fencing_check = m.worst(&["fencing"]).filter(|_| m.has_tokens);
    let lock_violated = m.overlaps > 0 || m.lost_updates > 0 || lock_checks == Some(Validity::Invalid);
    // Without a history (the memory backend's default) the resource's exact counts speak alone.
    let lock_unknown = lock_checks == Some(Validity::Unknown);
    let stale_refused = m.rejected.saturating_sub(m.legit_refused);
    let fencing_broken =
        m.has_tokens && (m.token_inversions > 0 || m.legit_refused > 0 || m.lost_updates_fenced > 0 || fencing_check == Some(Validity::Invalid));
    let fencing = if !m.has_tokens {
        "n/a (no tokens)".to_string()
    } else if fencing_broken {
        let mut why = Vec::new();
        if m.legit_refused > 0 {
            why.push(format!("{} legitimate write(s) refused", m.legit_refused));
        }
        if m.token_inversions > 0 {
            why.push(format!("{} token inversion(s)", m.token_inversions));
        }
        if m.lost_updates_fenced > 0 {
            why.push(format!("{} update(s) lost with fencing", m.lost_updates_fenced));
        }
        if why.is_empty() {
            why.push("the fencing checker found tokens out of order".into());
        }
        format!("broken: {}", why.join(", "))
    } else if stale_refused == 0 {
        "not exercised".to_string()
    } else {
        format!("refused {stale_refused} stale write(s)")
    };
    let fenced_side = mode != FencingMode::Off;
    let safety = if fenced_side && fencing_broken {
        if lock_violated { "unsafe" } else { "fencing broken" }
    } else if lock_violated {
        if fenced_side && m.has_tokens && stale_refused > 0 { "safe with fencing" } else { "unsafe" }
    } else if lock_unknown || (fenced_side && fencing_check == Some(Validity::Unknown)) {
        "unknown"
    } else {
        "safe"
    };
    let evidence = match m.exposure {
        None => "none",
        Some(e) if e < WEAK_EXPOSURE => "weak",
        Some(_) => "strong",
    };
    let applied = !m.faults_applied.is_empty();
    let availability = m.availability.as_ref().filter(|_| applied).map(|a| a.label().to_string());
    let class_observed = applied.then(|| {
        let available = availability.as_deref() == Some("available");
        match (safety, lock_violated, available) {
            ("unknown", _, _) => "unknown",
            (_, false, true) => "CP+A",
            (_, false, false) => "CP",
            (_, true, true) => "AP",
            (_, true, false) => "neither",
        }
        .to_string()
    });
    let contradiction = m.claimed == "CP" && applied && lock_violated;

    // The exit status: the worst of what the chosen side speaks for.
    let all = m.checks.iter().map(|c| c.valid).max().unwrap_or(Validity::Valid);
    let valid = match mode {
        FencingMode::Off => all.max(if lock_violated { Validity::Invalid } else { Validity::Valid }),
        FencingMode::Both => {
            let counts = if lock_violated || fencing_broken { Validity::Invalid } else { Validity::Valid };
            all.max(counts)
        }
        FencingMode::On => {
            // The plain register's checkers speak for the lock alone; with fencing on, a
            // violation fencing caught is not a failure of the system under test.
            let others = m
                .checks
                .iter()
                .filter(|c| !["mutual-exclusion", "lost-updates"].contains(&c.checker.as_str()))
                .map(|c| c.valid)
                .max()
                .unwrap_or(Validity::Valid);
            let side = match safety {
                "unsafe" | "fencing broken" => Validity::Invalid,
                "unknown" => Validity::Unknown,
                _ => Validity::Valid,
            };
            others.max(side)
        }
    };

    let mut summary = safety.to_string();
    if lock_violated {
        summary.push_str(&format!(" ({} overlap(s), {} lost update(s) without fencing", m.overlaps, m.lost_updates));
        if m.has_tokens {
            summary.push_str(&format!("; fencing {fencing}"));
        }
        summary.push(')');
    } else if fencing_broken {
        summary.push_str(&format!(" ({fencing})"));
    }
    match (evidence, m.exposure) {
        ("weak", Some(e)) => summary.push_str(&format!("; weak evidence: holders inside {:.1}% of the time", e * 100.0)),
        ("none", _) => summary.push_str("; no evidence: nothing entered the resource"),
        _ => {}
    }
    match (&m.availability, &availability, &class_observed) {
        (Some(a), Some(av), Some(c)) => summary.push_str(&format!(
            "; {av} under {}: grant rate {} of normal, {}; claims {}, observed {c}{}",
            m.faults_applied.join(", "),
            a.ratio.map_or("unknown".into(), |r| format!("{:.0}%", r * 100.0)),
            if a.recovered { format!("recovery {} ms", a.recovery_ms) } else { format!("NOT recovered {} ms after a heal", a.recovery_ms) },
            m.claimed,
            if contradiction { " (CONTRADICTS the claim)" } else { "" }
        )),
        _ => summary.push_str(&format!("; not tested under faults (claims {})", m.claimed)),
    }
    if !m.faults_skipped.is_empty() {
        summary.push_str(&format!("; skipped: {}", m.faults_skipped.join(", ")));
    }
    Verdict {
        safety: safety.to_string(),
        fencing,
        evidence: evidence.to_string(),
        exposure: m.exposure.map(|e| (e * 10000.0).round() / 10000.0),
        availability,
        class_claimed: m.claimed.clone(),
        class_observed,
        contradiction,
        faults_applied: m.faults_applied.clone(),
        faults_skipped: m.faults_skipped.clone(),
        valid,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, valid: Validity) -> CheckBrief {
        CheckBrief { checker: name.into(), valid, message: String::new() }
    }

    fn all_valid() -> Vec<CheckBrief> {
        ["mutual-exclusion", "lost-updates", "contention", "fencing", "availability"].iter().map(|n| check(n, Validity::Valid)).collect()
    }

    fn clean() -> Measured {
        Measured { has_tokens: true, checks: all_valid(), claimed: "CP".into(), exposure: Some(0.5), ..Default::default() }
    }

    fn under_faults(m: Measured, ratio: f64) -> Measured {
        Measured {
            faults_applied: vec!["kill".into()],
            availability: Some(Availability { ratio: Some(ratio), recovered: true, ..Default::default() }),
            ..m
        }
    }

    #[test]
    fn a_clean_run_without_faults_is_safe_and_has_no_observed_class() {
        let v = verdict(&clean(), FencingMode::Both);
        assert_eq!((v.safety.as_str(), v.evidence.as_str(), v.valid), ("safe", "strong", Validity::Valid));
        assert_eq!(v.class_observed, None);
        assert_eq!(v.availability, None);
        assert!(v.summary.contains("not tested under faults"), "{}", v.summary);
        assert_eq!(v.fencing, "not exercised");
    }

    #[test]
    fn safe_with_fencing_needs_stale_writes_refused_and_nothing_broken() {
        let caught = Measured { overlaps: 2, lost_updates: 1, rejected: 1, ..clean() };
        let v = verdict(&caught, FencingMode::On);
        assert_eq!((v.safety.as_str(), v.fencing.as_str()), ("safe with fencing", "refused 1 stale write(s)"));
        assert_eq!(v.valid, Validity::Valid, "with fencing on, a violation fencing caught is not a failure");
        assert_eq!(verdict(&caught, FencingMode::Off).safety, "unsafe");
        assert_eq!(verdict(&caught, FencingMode::Both).valid, Validity::Invalid, "both: the lock alone failed");
        // Nothing refused: fencing was never exercised, so it earned nothing.
        let unexercised = Measured { overlaps: 1, ..clean() };
        assert_eq!(verdict(&unexercised, FencingMode::On).safety, "unsafe");
        // Refusals that were all legitimate holders: fencing broken, and the lock violated.
        let wrong = Measured { overlaps: 1, rejected: 1, legit_refused: 1, ..clean() };
        assert_eq!(verdict(&wrong, FencingMode::On).safety, "unsafe");
        assert!(verdict(&wrong, FencingMode::On).fencing.starts_with("broken"));
    }

    #[test]
    fn a_token_reset_is_fencing_broken_even_without_overlap() {
        let reset = Measured { rejected: 40, legit_refused: 40, token_inversions: 1, ..clean() };
        let v = verdict(&reset, FencingMode::On);
        assert_eq!(v.safety, "fencing broken");
        assert!(v.fencing.contains("40 legitimate write(s) refused"), "{}", v.fencing);
        assert_eq!(v.valid, Validity::Invalid);
        // Off: the lock alone was not at fault.
        assert_eq!(verdict(&reset, FencingMode::Off).safety, "safe");
    }

    #[test]
    fn no_tokens_is_na_and_never_safe_with_fencing() {
        let redlock = Measured { overlaps: 1, lost_updates: 1, lost_updates_fenced: 1, has_tokens: false, claimed: "AP".into(), ..clean() };
        let v = verdict(&redlock, FencingMode::Both);
        assert_eq!((v.safety.as_str(), v.fencing.as_str()), ("unsafe", "n/a (no tokens)"));
    }

    #[test]
    fn any_checker_decides_the_worst() {
        let mut m = clean();
        m.checks[0].valid = Validity::Unknown;
        assert_eq!(verdict(&m, FencingMode::Both).safety, "unknown", "unknown stays unknown, never safe");
        assert_eq!(verdict(&m, FencingMode::Both).valid, Validity::Unknown);
        let mut m = clean();
        m.checks[2].valid = Validity::Invalid; // contention: a holder nobody knows of
        assert_eq!(verdict(&m, FencingMode::Both).safety, "unsafe");
        let mut m = clean();
        m.checks[4].valid = Validity::Invalid; // no grant after the last heal
        let v = verdict(&m, FencingMode::Both);
        assert_eq!((v.safety.as_str(), v.valid), ("safe", Validity::Invalid));
        let mut m = clean();
        m.checks[3].valid = Validity::Invalid;
        assert_eq!(verdict(&m, FencingMode::On).safety, "fencing broken");
    }

    #[test]
    fn classes_come_only_from_applied_faults() {
        let v = verdict(&under_faults(clean(), 0.1), FencingMode::Both);
        assert_eq!((v.class_observed.as_deref(), v.availability.as_deref()), (Some("CP"), Some("unavailable")));
        let v = verdict(&under_faults(clean(), 0.95), FencingMode::Both);
        assert_eq!(v.class_observed.as_deref(), Some("CP+A"));
        let violated = Measured { overlaps: 1, lost_updates: 1, ..clean() };
        let v = verdict(&under_faults(violated.clone(), 0.9), FencingMode::Both);
        assert_eq!(v.class_observed.as_deref(), Some("AP"));
        assert!(v.contradiction && v.summary.contains("CONTRADICTS"), "{}", v.summary);
        assert_eq!(verdict(&under_faults(violated, 0.5), FencingMode::Both).class_observed.as_deref(), Some("neither"));
        // Faults asked for but all skipped: no class, and the skip is said.
        let skipped = Measured { faults_skipped: vec!["clock".into()], availability: Some(Availability::default()), ..clean() };
        let v = verdict(&skipped, FencingMode::Both);
        assert_eq!((v.class_observed, v.availability), (None, None));
        assert!(v.summary.contains("skipped: clock"), "{}", v.summary);
    }

    #[test]
    fn exposure_grades_the_evidence() {
        let weak = Measured { exposure: Some(0.01), ..clean() };
        let v = verdict(&weak, FencingMode::Both);
        assert_eq!(v.evidence, "weak");
        assert!(v.summary.contains("weak evidence: holders inside 1.0%"), "{}", v.summary);
        assert_eq!(verdict(&Measured { exposure: None, ..clean() }, FencingMode::Both).evidence, "none");
    }

    #[test]
    fn availability_is_judged_against_the_rate_without_faults() {
        let a = |gi, fm, go, om| Availability { grants_in_faults: gi, fault_ms: fm, grants_outside: go, outside_ms: om, ..Default::default() };
        // Long holds: one grant per 2.5 s both inside and outside the faults is available.
        let long = Availability::combine([&a(2, 5000, 4, 10000)]).unwrap();
        assert_eq!((long.ratio, long.label()), (Some(1.0), "available"));
        let stalled = Availability::combine([&a(10, 5000, 1000, 10000), &a(0, 5000, 1000, 10000)]).unwrap();
        assert_eq!(stalled.label(), "unavailable", "{stalled:?}");
        assert_eq!(Availability::combine([&a(5, 5000, 0, 10000)]).unwrap().label(), "unknown");
    }
}
