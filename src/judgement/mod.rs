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

use crate::checker::Validity;

mod availability;
mod axes;
mod evidence;
pub mod glossary;
mod headline;
pub mod matrix;
mod scenario;
mod verdict;
pub mod window;
pub mod words;
pub use availability::Availability;
pub use evidence::{briefs, CheckBrief, Expectation, Measured, SafetyCounts};
pub use headline::{CONTRADICTS, FAILED_ACQUIRE, HISTORY_INVALID, NOT_RECOVERED, RECOVERY_NOT_JUDGED, TWO_HOLDERS_UNFENCED};
pub use scenario::{meets, Expect, Expected, PowerSeen, Seen};
pub use verdict::{listed, verdict, Verdict};

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

/// The word for an axis with no evidence at all.
pub const NOT_TESTED: &str = "not tested";
/// Tokens went backwards or a legitimate holder was refused (also a scenario's expectation).
pub const FENCING_BROKEN: &str = "fencing broken";

/// Whether two holders were caught by fencing on the side `mode` speaks for (every stale
/// write refused, nothing broken): a window's two holders then read "safe with fencing".
pub fn fenced(m: &Measured, mode: FencingMode) -> bool {
    axes::safety(m, mode).fenced
}

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

/// How bad a safety word is as a violation, for `compare`: no violation (whatever the
/// strength of the evidence, a missing verdict included) 0, safe with fencing 1, unknown 2,
/// fencing broken 3, unsafe 4.
pub fn violation_rank(word: Option<words::SafetyWord>) -> u8 {
    word.map_or(0, words::SafetyWord::violation_rank)
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
/// A row past its threshold that no test could confirm (fewer runs a side than the test
/// needs): not a regression, and not nothing either (exit 3).
pub const NOT_CONFIRMED: &str = "changed beyond the threshold, not confirmed";
/// "1 change beyond its threshold, not confirmed", "2 changes ...".
pub fn unconfirmed(n: usize) -> String {
    format!("{n} change{} beyond the threshold, not confirmed", if n == 1 { "" } else { "s" })
}
/// The count of regressions in words: "1 regression", "2 regressions".
pub fn regressions(n: usize) -> String {
    if n == 1 { "1 regression".into() } else { format!("{n} regressions") }
}

/// A share kept to 3 significant digits: fixed decimals would round a short hold's 0.00004
/// to 0, which reads as "nothing inside".
pub fn round_share(share: f64) -> f64 {
    if share <= 0.0 || !share.is_finite() {
        return share;
    }
    let scale = 10f64.powi(2 - share.log10().floor() as i32);
    (share * scale).round() / scale
}

/// A share of time printed with the digits it needs, in plain decimals: a short hold on
/// many keys is inside 0.0042% of the time, which "0.0%" would hide and "4.2e-3%" makes a
/// reader decode. Two significant digits under 0.1%, "<0.001%" below that.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p == 0.0 || p >= 0.095 {
        return format!("{p:.1}%");
    }
    if p < 0.001 {
        return "<0.001%".into();
    }
    // Two significant digits: 0.059, 0.0042, 0.0010.
    let decimals = (1 - p.log10().floor() as i32).max(0) as usize;
    format!("{p:.decimals$}%")
}


/// What a verdict says against itself, if anything: a headline that fails an axis the record
/// passes (or the reverse), "NOT RECOVERED" beside a recovery, a class beside "not tested",
/// a class from weak evidence, a consistent class beside two holders, an availability word
/// beside the note that it was not measured. Empty for a verdict that holds together. Tests
/// walk every verdict of a run set through it.
pub fn contradictions(v: &Verdict) -> Vec<String> {
    use crate::checker::windows::Recovery;
    let mut out = Vec::new();
    let mut say = |cond: bool, what: &str| {
        if cond {
            out.push(format!("{what}: {}", v.summary));
        }
    };
    let not_recovered = v.headline.contains(NOT_RECOVERED);
    let recovered = matches!(v.recovery_outcome, Some(Recovery::Recovered { .. } | Recovery::CutShort { ms: Some(_), .. }));
    say(not_recovered && recovered, "NOT RECOVERED beside a recovery");
    say(v.recovery_outcome.as_ref().is_some_and(Recovery::failed) && !not_recovered, "a failed recovery the headline does not name");
    say(v.summary.contains("NOT recovered") && v.summary.contains("recovered in"), "NOT recovered and recovered in one line");
    say(v.class_observed.is_some() && v.class_note.is_some(), "a class beside why there is none");
    say(v.class_observed.is_some() && v.availability.is_none(), "a class without availability measured");
    let violated = matches!(v.safety, words::SafetyWord::Unsafe | words::SafetyWord::SafeWithFencing | words::SafetyWord::FencingBroken);
    say(v.class_observed.is_some_and(|c| c != words::Class::Unknown && c.consistent()) && violated && v.expectation.is_none(), "a consistent class beside two holders or lost state");
    say(
        v.class_observed.is_some_and(|c| c.consistent()) && v.evidence == words::Strength::Weak && v.expectation.is_none(),
        "a consistent class from weak evidence",
    );
    say(v.availability.is_some() && v.availability_note.is_some(), "an availability word beside why it was not measured");
    say(v.availability.is_some() != v.availability_rate.is_some(), "an availability word without its rate, or the reverse");
    let failed_words = [NOT_RECOVERED, FAILED_ACQUIRE, HISTORY_INVALID, TWO_HOLDERS_UNFENCED, CONTRADICTS, "unsafe", "fencing broken"];
    let loud = failed_words.iter().any(|w| v.headline.contains(w));
    say(v.valid == Validity::Invalid && !loud, "exit 1 under a headline that names no failure");
    let quiet_fail = v.headline.contains(NOT_RECOVERED) || v.headline.contains(FAILED_ACQUIRE) || v.headline.contains(HISTORY_INVALID) || v.headline.contains(TWO_HOLDERS_UNFENCED);
    say(v.valid == Validity::Valid && quiet_fail, "a failure in the headline of a valid verdict");
    say(v.safety == words::SafetyWord::NotTested && v.class_observed.is_some_and(|c| c != words::Class::Unknown), "a class beside \"not tested\"");
    out
}

#[cfg(test)]
pub(super) mod tests;
