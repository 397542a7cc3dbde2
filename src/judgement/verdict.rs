//! The verdict: the record every reader shows ([`Verdict`]) and the one function that makes
//! it from the measurements ([`verdict`]), step by step: safety and fencing, availability
//! and class, each axis's validity, then the headline and the table's line.

use serde::{Deserialize, Serialize};

use crate::checker::Validity;

use super::availability::availability_word;
use super::{percent, round_share, FencingMode, Measured, NOT_TESTED, WEAK_EXPOSURE};

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

/// The checkers that speak for two holders at once. The contention checker is a finding of
/// its own (a refusal nothing explains is not two holders).
const LOCK_CHECKERS: [&str; 2] = ["mutual-exclusion", "lost-updates"];

/// The contention checker's finding, as a reader sees it.
const FAILED_BUT_TOOK: &str = "an acquire reported failed while nobody could hold the key (it may have taken effect)";

pub fn verdict(m: &Measured, mode: FencingMode) -> Verdict {
    let s = safety(m, mode);
    let a = availability(m, &s);
    let x = axes(m, mode, &s);
    let headline = headline(mode, &s, &a, &x);
    let summary = summary_line(m, &s, &a, &x, &headline);
    Verdict {
        safety: s.word.to_string(),
        fencing: s.fencing,
        evidence: s.evidence.to_string(),
        exposure: m.exposure.map(round_share),
        availability: a.word.map(str::to_string),
        availability_note: a.note,
        availability_rate: a.rate,
        recovery: a.recovery,
        class_claimed: m.claimed.clone(),
        class_observed: a.class_observed,
        class_note: a.class_note,
        contradiction: a.contradiction,
        faults_applied: m.faults_applied.clone(),
        faults_skipped: m.faults_skipped.clone(),
        faults_no_effect: m.faults_no_effect.clone(),
        findings: x.findings,
        valid: x.valid,
        headline,
        summary,
    }
}

/// The safety axis and what it rests on: two holders, fencing, the strength of the evidence.
struct Safety {
    /// The safety word (`safe`, `unsafe`, ...).
    word: &'static str,
    /// The fencing label (`n/a (no tokens)`, `refused N stale write(s)`, `broken: ...`).
    fencing: String,
    /// `strong`, `weak` or `none`.
    evidence: &'static str,
    lock_violated: bool,
    lock_unknown: bool,
    nothing_inside: bool,
    fencing_broken: bool,
    /// The fencing checker's answer, where the lock has tokens.
    fencing_check: Option<Validity>,
}

fn safety(m: &Measured, mode: FencingMode) -> Safety {
    let lock_checks = m.worst(&LOCK_CHECKERS);
    let fencing_check = m.worst(&["fencing"]).filter(|_| m.has_tokens);
    let lock_violated = m.counts.overlaps > 0 || m.counts.lost_updates > 0 || lock_checks == Some(Validity::Invalid);
    // Without a history (the memory backend's default) the resource's exact counts speak alone.
    let lock_unknown = lock_checks == Some(Validity::Unknown);
    // Nothing inside: no section, or sections that took no measurable time. Any time inside, however
    // short, is evidence (weak below WEAK_EXPOSURE): the resource counted every entry.
    let nothing_inside = m.sections == 0 || m.exposure.is_none_or(|e| e <= 0.0);
    let stale_refused = m.counts.rejected.saturating_sub(m.counts.legit_refused);
    let fencing_broken =
        m.has_tokens && (m.counts.token_inversions > 0 || m.counts.legit_refused > 0 || m.counts.lost_updates_fenced > 0 || fencing_check == Some(Validity::Invalid));
    let fenced_side = mode != FencingMode::Off;
    let evidence = match m.exposure {
        _ if m.sections == 0 => "none",
        None => "none",
        Some(e) if e < WEAK_EXPOSURE => "weak",
        Some(_) => "strong",
    };
    let word = if fenced_side && fencing_broken {
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
    let fencing = fencing_label(m, fencing_broken, stale_refused);
    Safety { word, fencing, evidence, lock_violated, lock_unknown, nothing_inside, fencing_broken, fencing_check }
}

/// What the fenced resource showed: `n/a (no tokens)`, `broken: ...` and why, `not
/// exercised`, or `refused N stale write(s)`.
fn fencing_label(m: &Measured, fencing_broken: bool, stale_refused: u64) -> String {
    if !m.has_tokens {
        "n/a (no tokens)".to_string()
    } else if fencing_broken {
        let mut why = Vec::new();
        if m.counts.legit_refused > 0 {
            why.push(format!("{} legitimate write(s) refused", m.counts.legit_refused));
        }
        if m.counts.token_inversions > 0 {
            why.push(format!("{} token inversion(s)", m.counts.token_inversions));
        }
        if m.counts.lost_updates_fenced > 0 {
            why.push(format!("{} update(s) lost with fencing", m.counts.lost_updates_fenced));
        }
        if why.is_empty() {
            why.push("the fencing checker found tokens out of order".into());
        }
        format!("broken: {}", why.join(", "))
    } else if stale_refused == 0 {
        "not exercised".to_string()
    } else {
        format!("refused {stale_refused} stale write(s)")
    }
}

/// Availability and class: only from faults that took effect, with a rate to compare.
struct Avail {
    /// `available`, `degraded` or `unavailable`; none when not measured.
    word: Option<&'static str>,
    note: Option<String>,
    rate: Option<String>,
    recovery: Option<String>,
    class_observed: Option<String>,
    class_note: Option<String>,
    contradiction: bool,
}

fn availability(m: &Measured, s: &Safety) -> Avail {
    let applied = !m.faults_applied.is_empty();
    let measured = m.availability.as_ref().filter(|_| applied);
    let word = measured.and_then(availability_word);
    let note = match (applied, measured, word) {
        (false, _, _) if !m.faults_no_effect.is_empty() => {
            Some(format!("not measured: no fault took effect ({} did nothing)", m.faults_no_effect.join(", ")))
        }
        (false, _, _) => Some("not measured: no fault applied".to_string()),
        (true, None, _) => Some(format!("not measured: {}", m.availability_missing.as_deref().unwrap_or("no availability check"))),
        (true, Some(_), None) => Some("not measured: no grant rate outside the faults to compare with".to_string()),
        (true, Some(_), Some(_)) => None,
    };
    let rate = measured.and_then(|a| a.ratio).map(|r| format!("{:.0}% of the no-fault rate", r * 100.0));
    let recovery = measured.map(|a| {
        if a.recovered {
            format!("recovered in {} ms", a.recovery_ms)
        } else {
            format!("NOT recovered (no grant in the {} ms after a heal)", a.recovery_ms)
        }
    });
    let class_observed = word.map(|w| {
        let available = w == "available";
        match (s.word, s.lock_violated, available) {
            ("unknown", _, _) => "unknown",
            (_, false, true) => "CP+A",
            (_, false, false) => "CP",
            (_, true, true) => "AP",
            (_, true, false) => "neither",
        }
        .to_string()
    });
    let class_note = class_observed.is_none().then(|| note.clone().unwrap_or_default().replacen("not measured", "not tested", 1));
    let contradiction = m.claimed == "CP" && class_observed.is_some() && s.lock_violated;
    Avail { word, note, rate, recovery, class_observed, class_note, contradiction }
}

/// Each axis's validity as the chosen side speaks for it, their worst, and the findings.
struct Axes {
    contention: Validity,
    availability: Validity,
    /// The worst of the checkers no axis speaks for.
    others: Validity,
    valid: Validity,
    findings: Vec<String>,
}

fn axes(m: &Measured, mode: FencingMode, s: &Safety) -> Axes {
    let contention_check = m.worst(&["contention"]);
    let lock = if s.lock_violated {
        if mode == FencingMode::On && s.word == "safe with fencing" { Validity::Valid } else { Validity::Invalid }
    } else if s.lock_unknown || s.nothing_inside {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let fencing = match mode {
        FencingMode::Off => Validity::Valid,
        _ if s.fencing_broken => Validity::Invalid,
        _ => s.fencing_check.unwrap_or(Validity::Valid),
    };
    // The contention checker's `unknown` (a lone waiter timing out in a fault window) does
    // not overrule the resource's exact count; its `invalid` is a finding of its own.
    let contention = match contention_check {
        Some(Validity::Invalid) => Validity::Invalid,
        Some(Validity::Unknown) if m.sections == 0 => Validity::Unknown,
        _ => Validity::Valid,
    };
    let availability = m.worst(&["availability"]).unwrap_or(Validity::Valid);
    let others = m
        .checks
        .iter()
        .filter(|c| !["mutual-exclusion", "lost-updates", "contention", "fencing", "availability"].contains(&c.checker.as_str()))
        .map(|c| c.valid)
        .max()
        .unwrap_or(Validity::Valid);
    let valid = [lock, fencing, contention, availability, others].into_iter().max().unwrap();
    let findings: Vec<String> = (contention_check == Some(Validity::Invalid)).then(|| FAILED_BUT_TOOK.to_string()).into_iter().collect();
    Axes { contention, availability, others, valid, findings }
}

/// The headline: the safety word, then every other axis that failed or could not decide.
fn headline(mode: FencingMode, s: &Safety, a: &Avail, x: &Axes) -> String {
    let mut headline = match s.word {
        "no violation seen" => "no violation seen (weak)".to_string(),
        w => w.to_string(),
    };
    if a.recovery.as_deref().is_some_and(|r| r.starts_with("NOT")) || x.availability == Validity::Invalid {
        headline.push_str("; NOT RECOVERED");
    } else if x.availability == Validity::Unknown {
        headline.push_str("; recovery unknown");
    }
    if x.contention == Validity::Invalid {
        headline.push_str("; failed acquire took effect");
    }
    if mode == FencingMode::Off && s.fencing_broken && s.word != "unsafe" {
        headline.push_str("; fencing broken (not judged: --fencing off)");
    }
    if x.others == Validity::Invalid {
        headline.push_str("; history invalid");
    } else if x.valid == Validity::Unknown && !matches!(s.word, "unknown" | "not tested") && x.availability != Validity::Unknown {
        headline.push_str("; unknown");
    }
    headline
}

/// The table's line: the headline, then the counts, the evidence, the findings, the class
/// and the faults that did not take effect.
fn summary_line(m: &Measured, s: &Safety, a: &Avail, x: &Axes, headline: &str) -> String {
    let mut summary = headline.to_string();
    if s.lock_violated {
        summary.push_str(&format!(" ({} overlap(s), {} lost update(s) without fencing", m.counts.overlaps, m.counts.lost_updates));
        if m.has_tokens {
            summary.push_str(&format!("; fencing {}", s.fencing));
        }
        summary.push(')');
    } else if s.fencing_broken {
        summary.push_str(&format!(" ({})", s.fencing));
    }
    match (s.evidence, m.exposure) {
        ("weak", Some(e)) => summary.push_str(&format!("; weak evidence: holders inside {} of the time", percent(e))),
        ("none", _) => summary.push_str("; no evidence: nothing entered the resource"),
        _ => {}
    }
    for f in &x.findings {
        summary.push_str(&format!("; {f}"));
    }
    match (a.word, &a.class_observed) {
        (Some(av), Some(c)) => summary.push_str(&format!(
            "; {av} under {}: grant rate {}, {}; claims {}, observed {c}{}",
            m.faults_applied.join(", "),
            a.rate.as_deref().unwrap_or("unknown"),
            a.recovery.as_deref().unwrap_or(""),
            m.claimed,
            if a.contradiction { " (CONTRADICTS the claim)" } else { "" }
        )),
        _ => summary.push_str(&format!("; class {} (claims {})", a.class_note.as_deref().unwrap_or("not tested"), m.claimed)),
    }
    if !m.faults_no_effect.is_empty() {
        summary.push_str(&format!("; no effect: {}", m.faults_no_effect.join(", ")));
    }
    if !m.faults_skipped.is_empty() {
        summary.push_str(&format!("; skipped: {}", m.faults_skipped.join(", ")));
    }
    summary
}
