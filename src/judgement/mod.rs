//! The judgement: from measurements to a verdict, computed once. Is the lock safe (without
//! and with fencing), did it stay available under the faults that took effect, how strong is
//! the evidence, and what class did it show? Every label dlbench prints or writes (the
//! terminal, summary.json, summary.md, report.html, `compare`'s verdict rows) is a field of
//! the [`Verdict`] made here; renderers only read it, and the exit status is its `valid`.
//!
//! Axes, each judged on its own and all of them in `valid` (the worst wins):
//! - **safety**: `safe` (no violation, holders exposed at least [`WEAK_EXPOSURE`] of the time),
//!   `no violation seen` (below it: weak evidence), `not tested` (nothing was inside the
//!   protected resource), `unsafe`, `safe with fencing` (the lock let two holders in, fencing
//!   refused every stale write, nothing broken), `fencing broken` (tokens went backwards or
//!   a legitimate holder was refused), or `unknown` (a checker could not decide).
//! - **fencing**: `n/a (no tokens)`, `not exercised`, `refused N stale write(s)`, `broken: ...`.
//! - **findings**: what the contention checker saw (an acquire reported failed while nobody
//!   could have held the key: it may have taken effect). Not two holders, so never `unsafe`,
//!   but a defect all the same: it fails the run and the headline says so.
//! - **availability**: only under faults that took effect and with a history to measure it:
//!   `available`, `degraded` or `unavailable` (grant rate during faults against the rate
//!   outside them), and the recovery after each heal; otherwise "not measured" and why.
//! - **class**: what the backend *claims* (its capabilities) and what was *observed*, only
//!   when availability was measured under faults that took effect: CP, CP+A, AP, neither.
//!
//! The one-cell answer, [`Verdict::headline`], names the safety word and every other axis
//! that failed, so a table can never say `safe` beside a run that exits 1.

use serde::{Deserialize, Serialize};

use crate::checker::{CheckResult, SegmentVerdict, Validity};

mod scenario;
pub use scenario::{meets, Expect, Seen};

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
    /// Critical sections entered at the protected resource (its counts are exact).
    pub sections: u64,
    /// Every checker's answer, over every phase.
    pub checks: Vec<CheckBrief>,
    /// From the availability checker, only when faults took effect and a history was kept.
    pub availability: Option<Availability>,
    /// Why availability was not measured, when it was not.
    pub availability_missing: Option<String>,
    /// `CP` or `AP`, from the backend's capabilities.
    pub claimed: String,
    /// Faults of the service that took effect (started, and not shown to have done nothing).
    pub faults_applied: Vec<String>,
    /// Faults the target could not apply.
    pub faults_skipped: Vec<String>,
    /// Faults that started but were shown to do nothing (a cut that dropped no traffic).
    pub faults_no_effect: Vec<String>,
    /// Mean over keys of the fraction of wall time some holder was inside.
    pub exposure: Option<f64>,
}

impl Measured {
    fn worst(&self, names: &[&str]) -> Option<Validity> {
        self.checks.iter().filter(|c| names.contains(&c.checker.as_str())).map(|c| c.valid).max()
    }
}

/// The verdict: every label a reader sees, and the validity the exit status is made of. Fields
/// after `safety` default when a summary written by an older dlbench is read back (compare,
/// report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// `safe`, `no violation seen`, `not tested`, `unsafe`, `safe with fencing`, `fencing
    /// broken`, or `unknown`.
    pub safety: String,
    /// `n/a (no tokens)`, `not exercised`, `refused N stale write(s)`, or `broken: ...`.
    #[serde(default)]
    pub fencing: String,
    /// `strong`, `weak`, or `none` (nothing entered the resource).
    #[serde(default)]
    pub evidence: String,
    #[serde(default)]
    pub exposure: Option<f64>,
    /// `available`, `degraded` or `unavailable`, from the grant rate during faults that took
    /// effect against the rate outside them; absent when not measured (see
    /// `availability_note`).
    #[serde(default)]
    pub availability: Option<String>,
    /// Why availability was not measured (no fault took effect, no history kept, no rate
    /// outside the faults to compare with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_note: Option<String>,
    /// The grant rate under faults as a share of the rate without them, as a reader sees it
    /// ("0% of the no-fault rate"); absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_rate: Option<String>,
    /// After the heals: `recovered in N ms`, or `NOT recovered (no grant in N ms after a
    /// heal)`; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<String>,
    /// The class the backend claims: `CP` or `AP`.
    #[serde(default)]
    pub class_claimed: String,
    /// The class observed under the faults that took effect; absent when not tested (see
    /// `class_note`).
    #[serde(default)]
    pub class_observed: Option<String>,
    /// Why no class was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_note: Option<String>,
    /// The backend claims CP and was observed letting two holders in.
    #[serde(default)]
    pub contradiction: bool,
    #[serde(default)]
    pub faults_applied: Vec<String>,
    #[serde(default)]
    pub faults_skipped: Vec<String>,
    /// Faults that started but were shown to have done nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults_no_effect: Vec<String>,
    /// What the history showed beside two holders: acquires reported failed that nothing
    /// could have refused (they may have taken effect).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// The worst of every axis the chosen side speaks for (the exit status).
    #[serde(default = "unknown")]
    pub valid: Validity,
    /// The one-cell answer: the safety word, `(weak)` when the evidence was, and every other
    /// axis that failed ("NOT RECOVERED", "failed acquire took effect"), so it never reads
    /// well beside a run that exits 1.
    #[serde(default)]
    pub headline: String,
    /// One line for the table.
    #[serde(default)]
    pub summary: String,
}

fn unknown() -> Validity {
    Validity::Unknown
}

impl Verdict {
    /// The observed-class cell every renderer prints: the class, marked when it contradicts
    /// the claim, or why none was observed.
    pub fn observed_cell(&self) -> String {
        match &self.class_observed {
            Some(c) if self.contradiction => format!("{c} (contradicts)"),
            Some(c) => c.clone(),
            None => self.class_note.clone().unwrap_or_else(|| NOT_TESTED.into()),
        }
    }
}

/// The word for an axis with no evidence at all.
pub const NOT_TESTED: &str = "not tested";
/// Tokens went backwards or a legitimate holder was refused (also a scenario's expectation).
pub const FENCING_BROKEN: &str = "fencing broken";

/// Jepsen's convention, as `dlbench check` uses it: 0 valid, 1 invalid, 3 unknown.
pub fn exit_code(v: Validity) -> i32 {
    match v {
        Validity::Valid => 0,
        Validity::Invalid => 1,
        Validity::Unknown => 3,
    }
}

/// The heading of the table of observed classes.
pub const CLASS_HEADING: &str = "AP / CP";

/// Why a run has no AP / CP table: no fault was asked for, or every fault asked for was
/// skipped or did nothing (then no class can be observed, and the line says so).
pub fn no_class(asked: bool) -> &'static str {
    if asked {
        "No fault took effect (each was skipped or did nothing): no AP / CP class can be observed."
    } else {
        "No fault applied, no AP / CP verdict."
    }
}

/// What a reader shows where a result set carries no verdict at all (written before
/// verdicts were recorded): never a safety word.
pub const NO_VERDICT: &str = "no verdict recorded";

/// The checkers that speak for two holders at once. The contention checker is a finding of
/// its own (a refusal nothing explains is not two holders).
const LOCK_CHECKERS: [&str; 2] = ["mutual-exclusion", "lost-updates"];

/// The safety words a verdict can carry.
pub const SAFETY_WORDS: [&str; 7] = ["safe", "no violation seen", "not tested", "safe with fencing", "unknown", "fencing broken", "unsafe"];

/// How bad a safety word is as a violation, for `compare`: no violation (whatever the
/// strength of the evidence, a missing verdict included) 0, safe with fencing 1, unknown 2,
/// fencing broken 3, unsafe or a word this build does not know 4.
pub fn violation_rank(word: Option<&str>) -> u8 {
    match word {
        None | Some("safe" | "no violation seen" | "not tested") => 0,
        Some("safe with fencing") => 1,
        Some("unknown") => 2,
        Some("fencing broken") => 3,
        _ => 4,
    }
}

/// How `compare` judges one metric between two sets of runs (its thresholds and tests are
/// in `compare`; the words are here, with every other label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Improved,
    Unchanged,
    Regressed,
}

impl Change {
    /// The word a row prints; a safety metric that regressed says so.
    pub fn word(self, safety: bool) -> &'static str {
        match self {
            Change::Regressed if safety => "regressed (safety)",
            Change::Regressed => "regressed",
            Change::Improved => "improved",
            Change::Unchanged => "unchanged",
        }
    }
}

/// `compare`'s conclusions: a clean bill only when a regression could have been seen.
pub const NO_REGRESSION: &str = "No regression";
pub const NOTHING_DETECTABLE: &str = "No regression could have been detected";
/// After the count: "2 regression(s)".
pub const REGRESSIONS: &str = "regression(s)";

/// A share kept to 3 significant digits: fixed decimals would round a short hold's 0.00004
/// to 0, which reads as "nothing inside".
pub fn round_share(share: f64) -> f64 {
    if share <= 0.0 || !share.is_finite() {
        return share;
    }
    let scale = 10f64.powi(2 - share.log10().floor() as i32);
    (share * scale).round() / scale
}

/// A share of time printed with the digits it needs: a short hold on many keys is inside
/// 0.004% of the time, which "0.0%" would hide.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p == 0.0 || p >= 0.1 { format!("{p:.1}%") } else { format!("{p:.1e}%") }
}

/// The contention checker's finding, as a reader sees it.
const FAILED_BUT_TOOK: &str = "an acquire reported failed while nobody could hold the key (it may have taken effect)";

/// The availability words and the class, as they stand, for a phase with faults that took
/// effect and an availability measured with a rate to compare with.
fn availability_word(a: &Availability) -> Option<&'static str> {
    match a.ratio {
        Some(r) if r >= AVAILABLE_RATIO => Some("available"),
        Some(r) if r >= DEGRADED_RATIO => Some("degraded"),
        Some(_) => Some("unavailable"),
        None => None,
    }
}

pub fn verdict(m: &Measured, mode: FencingMode) -> Verdict {
    let lock_checks = m.worst(&LOCK_CHECKERS);
    let contention = m.worst(&["contention"]);
    let fencing_check = m.worst(&["fencing"]).filter(|_| m.has_tokens);
    let availability_check = m.worst(&["availability"]);
    let lock_violated = m.overlaps > 0 || m.lost_updates > 0 || lock_checks == Some(Validity::Invalid);
    // Without a history (the memory backend's default) the resource's exact counts speak alone.
    let lock_unknown = lock_checks == Some(Validity::Unknown);
    // Nothing inside: no section, or sections that took no measurable time. Any time inside, however
    // short, is evidence (weak below WEAK_EXPOSURE): the resource counted every entry.
    let nothing_inside = m.sections == 0 || m.exposure.is_none_or(|e| e <= 0.0);
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
    let evidence = match m.exposure {
        _ if m.sections == 0 => "none",
        None => "none",
        Some(e) if e < WEAK_EXPOSURE => "weak",
        Some(_) => "strong",
    };
    let safety = if fenced_side && fencing_broken {
        if lock_violated { "unsafe" } else { "fencing broken" }
    } else if lock_violated {
        if fenced_side && m.has_tokens && stale_refused > 0 { "safe with fencing" } else { "unsafe" }
    } else if lock_unknown || (fenced_side && fencing_check == Some(Validity::Unknown)) {
        "unknown"
    } else if nothing_inside {
        "not tested"
    } else if evidence == "weak" {
        "no violation seen"
    } else {
        "safe"
    };

    // Availability and class: only from faults that took effect, with a rate to compare.
    let applied = !m.faults_applied.is_empty();
    let measured = m.availability.as_ref().filter(|_| applied);
    let word = measured.and_then(availability_word);
    let availability_note = match (applied, measured, word) {
        (false, _, _) if !m.faults_no_effect.is_empty() => {
            Some(format!("not measured: no fault took effect ({} did nothing)", m.faults_no_effect.join(", ")))
        }
        (false, _, _) => Some("not measured: no fault applied".to_string()),
        (true, None, _) => Some(format!("not measured: {}", m.availability_missing.as_deref().unwrap_or("no availability check"))),
        (true, Some(_), None) => Some("not measured: no grant rate outside the faults to compare with".to_string()),
        (true, Some(_), Some(_)) => None,
    };
    let availability_rate = measured.and_then(|a| a.ratio).map(|r| format!("{:.0}% of the no-fault rate", r * 100.0));
    let recovery = measured.map(|a| {
        if a.recovered {
            format!("recovered in {} ms", a.recovery_ms)
        } else {
            format!("NOT recovered (no grant in the {} ms after a heal)", a.recovery_ms)
        }
    });
    let class_observed = word.map(|w| {
        let available = w == "available";
        match (safety, lock_violated, available) {
            ("unknown", _, _) => "unknown",
            (_, false, true) => "CP+A",
            (_, false, false) => "CP",
            (_, true, true) => "AP",
            (_, true, false) => "neither",
        }
        .to_string()
    });
    let class_note = class_observed.is_none().then(|| {
        availability_note.clone().unwrap_or_default().replacen("not measured", "not tested", 1)
    });
    let contradiction = m.claimed == "CP" && class_observed.is_some() && lock_violated;

    // The axes' validities, as the chosen side speaks for them.
    let lock_axis = if lock_violated {
        if mode == FencingMode::On && safety == "safe with fencing" { Validity::Valid } else { Validity::Invalid }
    } else if lock_unknown || nothing_inside {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let fencing_axis = match mode {
        FencingMode::Off => Validity::Valid,
        _ if fencing_broken => Validity::Invalid,
        _ => fencing_check.unwrap_or(Validity::Valid),
    };
    // The contention checker's `unknown` (a lone waiter timing out in a fault window) does
    // not overrule the resource's exact count; its `invalid` is a finding of its own.
    let contention_axis = match contention {
        Some(Validity::Invalid) => Validity::Invalid,
        Some(Validity::Unknown) if m.sections == 0 => Validity::Unknown,
        _ => Validity::Valid,
    };
    let availability_axis = availability_check.unwrap_or(Validity::Valid);
    let others = m
        .checks
        .iter()
        .filter(|c| !["mutual-exclusion", "lost-updates", "contention", "fencing", "availability"].contains(&c.checker.as_str()))
        .map(|c| c.valid)
        .max()
        .unwrap_or(Validity::Valid);
    let valid = [lock_axis, fencing_axis, contention_axis, availability_axis, others].into_iter().max().unwrap();
    let findings: Vec<String> = (contention == Some(Validity::Invalid)).then(|| FAILED_BUT_TOOK.to_string()).into_iter().collect();

    // The headline: the safety word, then every other axis that failed or could not decide.
    let mut headline = match safety {
        "no violation seen" => "no violation seen (weak)".to_string(),
        w => w.to_string(),
    };
    if recovery.as_deref().is_some_and(|r| r.starts_with("NOT")) || availability_axis == Validity::Invalid {
        headline.push_str("; NOT RECOVERED");
    } else if availability_axis == Validity::Unknown {
        headline.push_str("; recovery unknown");
    }
    if contention_axis == Validity::Invalid {
        headline.push_str("; failed acquire took effect");
    }
    if mode == FencingMode::Off && fencing_broken && safety != "unsafe" {
        headline.push_str("; fencing broken (not judged: --fencing off)");
    }
    if others == Validity::Invalid {
        headline.push_str("; history invalid");
    } else if valid == Validity::Unknown && !matches!(safety, "unknown" | "not tested") && availability_axis != Validity::Unknown {
        headline.push_str("; unknown");
    }

    let mut summary = headline.clone();
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
        ("weak", Some(e)) => summary.push_str(&format!("; weak evidence: holders inside {} of the time", percent(e))),
        ("none", _) => summary.push_str("; no evidence: nothing entered the resource"),
        _ => {}
    }
    for f in &findings {
        summary.push_str(&format!("; {f}"));
    }
    match (word, &class_observed) {
        (Some(av), Some(c)) => summary.push_str(&format!(
            "; {av} under {}: grant rate {}, {}; claims {}, observed {c}{}",
            m.faults_applied.join(", "),
            availability_rate.as_deref().unwrap_or("unknown"),
            recovery.as_deref().unwrap_or(""),
            m.claimed,
            if contradiction { " (CONTRADICTS the claim)" } else { "" }
        )),
        _ => summary.push_str(&format!("; class {} (claims {})", class_note.as_deref().unwrap_or("not tested"), m.claimed)),
    }
    if !m.faults_no_effect.is_empty() {
        summary.push_str(&format!("; no effect: {}", m.faults_no_effect.join(", ")));
    }
    if !m.faults_skipped.is_empty() {
        summary.push_str(&format!("; skipped: {}", m.faults_skipped.join(", ")));
    }
    Verdict {
        safety: safety.to_string(),
        fencing,
        evidence: evidence.to_string(),
        exposure: m.exposure.map(round_share),
        availability: word.map(str::to_string),
        availability_note,
        availability_rate,
        recovery,
        class_claimed: m.claimed.clone(),
        class_observed,
        class_note,
        contradiction,
        faults_applied: m.faults_applied.clone(),
        faults_skipped: m.faults_skipped.clone(),
        faults_no_effect: m.faults_no_effect.clone(),
        findings,
        valid,
        headline,
        summary,
    }
}

/// Every word a reader meets in dlbench's tables, with what it means: one source for the
/// report's glossary, the terminal's notes and the docs (a test holds the docs to it).
pub const GLOSSARY: &[(&str, &str)] = &[
    ("acq/s", "successful acquisitions per second in the measured window (warm-up excluded)"),
    ("p50 / p99 / p99.9", "acquire latency from the call (or, in an open loop, from when it was due) to the lock being held, from an HDR histogram; shown as \"-\" with n when too few acquisitions back the percentile"),
    ("errors", "failures other than a contended lock's wait timeout: unreachable server, unknown outcome, a release that found the lock gone; timeouts and cancelled acquires are counted apart"),
    ("overlaps", "critical sections that began while another holder of the same key was inside, at the protected resource (one clock: exact)"),
    ("lost upd", "a section's read-hold-write of a counter that found the counter changed: two holders at once"),
    ("stale tok", "fencing tokens presented out of order at the resource; n/a where the lock has no tokens"),
    ("expo %", "exposure: how much of the wall time some holder was inside its section (mean over keys); a second holder granted at a random moment is seen only if it finds one inside"),
    ("safe", "no overlap or lost update, every checker valid, and holders exposed at least 20% of the time"),
    ("no violation seen (weak)", "no overlap or lost update, but holders were inside less than 20% of the time: a second holder would likely have gone unseen"),
    ("not tested", "nothing was inside the protected resource (or, for a class, no fault took effect or availability was not measured): no evidence either way"),
    ("unsafe", "two holders at once: an overlap, a lost update, or a checker's proof of one"),
    ("safe with fencing", "the lock let two holders in, and fencing refused every stale write with no token going backwards and no legitimate holder refused"),
    ("fencing broken", "tokens went backwards or a legitimate holder's write was refused (a counter reset by a restart)"),
    ("unknown", "a checker could not decide (an operation's outcome is unknown, a fault was never healed)"),
    ("failed acquire took effect", "the contention checker saw an acquire reported failed while no other client could have held the key: the failure may have taken the lock"),
    ("available / degraded / unavailable", "the grant rate while faults that took effect were in force, against the rate outside them: at least 80%, at least 30%, below 30%"),
    ("recovered / NOT RECOVERED", "a grant came after every heal (and how long the slowest took), or one heal was followed by no grant before the phase ended"),
    ("CP / CP+A / AP / neither", "the class observed under faults that took effect: no two holders and unavailable, no two holders and available, two holders and available, two holders and unavailable"),
    ("claims", "the class the design promises (CP: consistent under partition, at the cost of availability; AP: available, at the cost of safety)"),
    ("fencing", "what the fenced resource showed: n/a (no tokens), not exercised (no stale write arrived), refused N stale write(s), or broken"),
    ("evidence", "strong (exposure at least 20%), weak (below), none (nothing entered the resource)"),
];

#[cfg(test)]
mod tests;
