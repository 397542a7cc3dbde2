//! The verdict: the record every reader shows ([`Verdict`]) and the one function that makes
//! it from the measurements ([`verdict`]), step by step: safety and fencing, availability,
//! recovery and class (from the fault windows that count), each axis's validity, then the
//! headline and the table's line ([`super::headline`]).

use serde::{Deserialize, Serialize};

use crate::checker::windows::Recovery;
use crate::checker::Validity;

use super::words::{grant_rate, AvailWord, Class, SafetyWord, Strength};
use super::{round_share, FencingMode, Measured, NOT_TESTED};

/// The verdict: every label a reader sees, and the validity the exit status is made of. Fields
/// after `safety` default when a summary written by an older dlbench is read back (compare,
/// report). Each word is a type that serializes to the word summary.json always carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// `safe`, `no violation seen`, `not tested`, `unsafe`, `safe with fencing`, `fencing
    /// broken`, or `unknown`.
    pub safety: SafetyWord,
    /// `n/a (no tokens)`, `not exercised`, `refused N stale write(s)`, or `broken: ...`.
    #[serde(default)]
    pub fencing: String,
    /// `strong`, `weak`, or `none` (nothing entered the resource).
    #[serde(default = "no_evidence")]
    pub evidence: Strength,
    #[serde(default)]
    pub exposure: Option<f64>,
    /// `available`, `degraded` or `unavailable`, from the grant rate during the fault windows
    /// that count against the no-fault rate; absent when not measured (see
    /// `availability_note`).
    #[serde(default)]
    pub availability: Option<AvailWord>,
    /// Why availability was not measured (no fault took effect, no history kept, no rate
    /// without faults to compare with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_note: Option<String>,
    /// The grant rate under faults as a share of the rate without them, as a reader sees it
    /// ("grant rate 0% of the no-fault rate"); absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_rate: Option<String>,
    /// The same share as a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_ratio: Option<f64>,
    /// After the heals, in words: `recovered in N ms`, `NOT recovered (...)`, `cut short by
    /// the next fault at ...`, `recovery not judged: ...`; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<String>,
    /// The same, typed: the worst of the windows that count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_outcome: Option<Recovery>,
    /// The class the backend claims: `CP` or `AP`.
    #[serde(default)]
    pub class_claimed: String,
    /// The class observed under the faults that count; absent when not established (see
    /// `class_note`).
    #[serde(default)]
    pub class_observed: Option<Class>,
    /// Why no class was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_note: Option<String>,
    /// The backend claims CP and was observed letting two holders in, or losing its state.
    #[serde(default)]
    pub contradiction: bool,
    #[serde(default)]
    pub faults_applied: Vec<String>,
    #[serde(default)]
    pub faults_skipped: Vec<String>,
    /// Faults that started but were shown to have done nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults_no_effect: Vec<String>,
    /// Faults that started but nothing could tell whether they took effect (not applied).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults_unchecked: Vec<String>,
    /// What the history showed beside two holders: acquires reported failed that nothing
    /// could have refused (they may have taken effect).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// A scenario's expectation, where the phase is a scenario's choreography: its words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<String>,
    /// The worst of every axis the chosen side speaks for (the exit status).
    #[serde(default = "unknown")]
    pub valid: Validity,
    /// The one-cell answer: the safety word, `(weak)` when the evidence was, and every other
    /// axis that set the exit status ("NOT RECOVERED", "failed acquire took effect"), so it
    /// never reads well beside a run that exits 1.
    #[serde(default)]
    pub headline: String,
    /// One line for the table.
    #[serde(default)]
    pub summary: String,
}

fn unknown() -> Validity {
    Validity::Unknown
}

fn no_evidence() -> Strength {
    Strength::None
}

impl Verdict {
    /// The cell of a table's "grant rate" column: the grant rate under the faults as a share
    /// of the no-fault rate, then the word it earns ("0% (unavailable)": the rate was 0%,
    /// never "0% unavailable"), or why it was not measured.
    pub fn availability_cell(&self) -> String {
        match (self.availability, self.grant_ratio) {
            (Some(w), Some(r)) => format!("{:.0}% ({w})", r * 100.0),
            // Result sets written before the ratio was recorded.
            (Some(w), None) => match &self.availability_rate {
                Some(rate) => format!("{} ({w})", rate.trim_start_matches("grant rate ").trim_end_matches(" of the no-fault rate")),
                None => w.to_string(),
            },
            (None, _) => self.availability_note.clone().unwrap_or_else(|| "not measured".into()),
        }
    }

    /// The recovery cell of a table: "1200 ms", "cut short", "NOT recovered", "not judged",
    /// or "-" when not measured.
    pub fn recovery_cell(&self) -> String {
        match &self.recovery_outcome {
            Some(Recovery::Recovered { ms }) => format!("{ms} ms"),
            Some(Recovery::CutShort { .. }) => "cut short".into(),
            Some(Recovery::NotRecovered { .. }) => "NOT recovered".into(),
            Some(Recovery::NotJudged { .. }) => "not judged".into(),
            // Result sets written before the outcome was typed: their words.
            None => match &self.recovery {
                Some(r) if r.starts_with("NOT") => "NOT recovered".into(),
                Some(r) => r.trim_start_matches("recovered in ").to_string(),
                None => "-".into(),
            },
        }
    }

    /// The observed-class cell every renderer prints: the class, marked when it contradicts
    /// the claim, or why none was observed.
    pub fn observed_cell(&self) -> String {
        match &self.class_observed {
            Some(c) if self.contradiction => format!("{c} (contradicts)"),
            Some(c) => c.to_string(),
            None => self.class_note.clone().unwrap_or_else(|| NOT_TESTED.into()),
        }
    }
}

pub fn verdict(m: &Measured, mode: FencingMode) -> Verdict {
    use super::axes::{availability, axes, safety};
    let s = safety(m, mode);
    // The axes and the class read what is not a scenario's choreography (that answers to
    // its expectation); the safety word shown covers everything.
    let basis = m.unscripted.as_deref().map(|u| safety(u, mode));
    let judged = basis.as_ref().unwrap_or(&s);
    let a = availability(m, judged);
    let x = axes(m, mode, judged, &a);
    let headline = super::headline::headline(m, mode, &s, &a, &x);
    let summary = super::headline::summary_line(m, &s, &a, &x, &headline);
    Verdict {
        safety: s.word,
        fencing: s.fencing,
        evidence: s.evidence,
        exposure: m.exposure.map(round_share),
        availability: a.word,
        availability_note: a.note,
        availability_rate: a.ratio.map(grant_rate),
        grant_ratio: a.ratio,
        recovery: a.recovery.as_ref().map(Recovery::words),
        recovery_outcome: a.recovery,
        class_claimed: m.claimed.clone(),
        class_observed: a.class_observed,
        class_note: a.class_note,
        contradiction: a.contradiction,
        faults_applied: m.faults_applied.clone(),
        faults_skipped: m.faults_skipped.clone(),
        faults_no_effect: m.faults_no_effect.clone(),
        faults_unchecked: m.faults_unchecked.clone(),
        findings: x.findings,
        expectation: m.expectation.as_ref().map(|e| e.words.clone()),
        valid: x.valid,
        headline,
        summary,
    }
}


/// A backend's verdict over phases that ran under different conditions (a scenario's
/// choreographies beside a load under a kill, phases under different faults): the pooled
/// record, its headline and line listing what each condition showed instead of pooling
/// their words ("S1: safe with fencing; as S1 expects (...) | kill:leader: safe").
pub fn listed(pooled: Verdict, parts: &[(String, &Verdict)]) -> Verdict {
    if parts.len() < 2 {
        return pooled;
    }
    let headline = parts.iter().map(|(c, v)| format!("{c}: {}", v.headline)).collect::<Vec<_>>().join(" | ");
    let summary = format!("{headline} | over all of them: {}", pooled.summary);
    Verdict { headline, summary, ..pooled }
}
