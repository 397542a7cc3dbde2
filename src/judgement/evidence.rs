//! What a verdict is made of: the checkers' answers in brief and the measurements
//! ([`Measured`]) the model hands the judgement.

use serde::{Deserialize, Serialize};

use crate::checker::{SegmentVerdict, Validity};

use super::Availability;

/// A checker's answer without its evidence (that is in `checks.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckBrief {
    pub checker: crate::checker::CheckerId,
    pub valid: Validity,
    pub message: String,
}

pub fn briefs(v: &SegmentVerdict) -> Vec<CheckBrief> {
    v.results.iter().map(|r| CheckBrief { checker: r.checker, valid: r.valid, message: r.message.clone() }).collect()
}

/// The protected resource's safety counts, declared once: a phase's and a backend's summary
/// embed them (flattened, so `summary.json` keeps its fields where they were) and a verdict
/// is made of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SafetyCounts {
    /// Sections that entered while another holder of the key was inside.
    pub overlaps: u64,
    /// Without fencing (the plain register).
    pub lost_updates: u64,
    /// Sections that presented a stale token.
    pub stale_tokens: u64,
    /// With fencing: updates lost on the register that refuses stale tokens.
    pub lost_updates_fenced: u64,
    /// With fencing: sections whose request was refused (stale or not).
    pub rejected: u64,
    /// With fencing: refusals of superseded holders (what fencing is for). A phase's only:
    /// a backend's summary has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_refused: Option<u64>,
    /// With fencing: holders with a valid lease refused because of an earlier token.
    #[serde(default)]
    pub legit_refused: u64,
    /// Sections that entered, lease valid, with a token not above an earlier section's.
    #[serde(default)]
    pub token_inversions: u64,
}

impl SafetyCounts {
    /// A phase's counts, from the protected resource's own (`dlbench_core::CellStats`, which
    /// also counts what the verdict does not use: sections, writes, expired entries). The one
    /// place the resource's counters become the model's.
    pub fn of_phase(c: &dlbench_core::CellStats) -> SafetyCounts {
        SafetyCounts {
            overlaps: c.overlaps,
            lost_updates: c.lost_updates,
            stale_tokens: c.stale_tokens,
            lost_updates_fenced: c.lost_updates_fenced,
            rejected: c.rejected,
            stale_refused: Some(c.stale_refused()),
            legit_refused: c.legit_refused,
            token_inversions: c.token_inversions,
        }
    }
}

/// A backend's counts: its phases' added up (without `stale_refused`, a phase's only).
impl<'a> std::iter::Sum<&'a SafetyCounts> for SafetyCounts {
    fn sum<I: Iterator<Item = &'a SafetyCounts>>(iter: I) -> SafetyCounts {
        iter.fold(SafetyCounts::default(), |t, c| SafetyCounts {
            overlaps: t.overlaps + c.overlaps,
            lost_updates: t.lost_updates + c.lost_updates,
            stale_tokens: t.stale_tokens + c.stale_tokens,
            lost_updates_fenced: t.lost_updates_fenced + c.lost_updates_fenced,
            rejected: t.rejected + c.rejected,
            stale_refused: None,
            legit_refused: t.legit_refused + c.legit_refused,
            token_inversions: t.token_inversions + c.token_inversions,
        })
    }
}

/// A scenario entry's expectation for a phase of its choreography, and whether the
/// observation met it ([`super::meets`] decided).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Expectation {
    /// The entry: `S1`, `S4`.
    pub entry: String,
    pub met: bool,
    /// "expected violation, observed 2 overlap(s)".
    pub words: String,
}

impl Expectation {
    /// Several choreographies' expectations as one: met when each was, every entry named.
    pub fn all<'a>(it: impl IntoIterator<Item = &'a Expectation>) -> Option<Expectation> {
        let v: Vec<&Expectation> = it.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        let mut entries: Vec<&str> = Vec::new();
        for e in &v {
            if !entries.contains(&e.entry.as_str()) {
                entries.push(&e.entry);
            }
        }
        let missed: Vec<String> = v.iter().filter(|e| !e.met).map(|e| format!("{}: {}", e.entry, e.words)).collect();
        let met = missed.is_empty();
        let words = if met { format!("{} of {} case(s) as expected", v.len(), v.len()) } else { missed.join("; ") };
        Some(Expectation { entry: entries.join(", "), met, words })
    }
}

/// The measurements a verdict is made of.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub counts: SafetyCounts,
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
    /// Faults that started but nothing could tell whether they took effect.
    pub faults_unchecked: Vec<String>,
    /// The phase's fault windows, judged (a backend's: one per phase); empty without a history.
    pub windows: Vec<super::window::Windows>,
    /// A scenario's choreography: its expectation, judged by the scenario runner.
    pub expectation: Option<Expectation>,
    /// The part of the measurement that is not a scenario's choreography, when some is: the
    /// lock and fencing axes and the class read it (the choreography answers to its
    /// expectation). None: all of it.
    pub unscripted: Option<Box<Measured>>,
    /// Mean over keys of the fraction of wall time some holder was inside.
    pub exposure: Option<f64>,
}

impl Measured {
    pub(super) fn worst(&self, names: &[crate::checker::CheckerId]) -> Option<Validity> {
        self.checks.iter().filter(|c| names.contains(&c.checker)).map(|c| c.valid).max()
    }
}
