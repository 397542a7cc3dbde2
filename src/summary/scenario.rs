//! `summary.json`'s `scenarios` section: each catalogue entry's observation against its
//! expectation (the choreography is in `crate::scenario`).

use serde::{Deserialize, Serialize};

use crate::judgement::Availability;

/// What an entry expects on one side of fencing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// Two holders, or a lost update (on this side's register).
    Violation,
    /// No overlap and no lost update.
    NoViolation,
    /// Stale writes refused, no legitimate write refused, no token inversion, no update lost.
    Rejected,
    /// The tokens did not survive the fault: a holder with a valid lease was refused, or a
    /// token went backwards.
    FencingBroken,
    /// The client must be told "not acquired", and nothing of it may stay on the servers.
    MustFail,
    /// No violation (with holders exposed enough to see one), the fault applied, and a grant
    /// after every heal. The time to it is reported against
    /// [`crate::scenario::RECOVERY_BOUND`], and the grant rate during the fault.
    Recovers,
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expect::Violation => "violation",
            Expect::NoViolation => "no violation",
            Expect::Rejected => "stale writes rejected",
            Expect::FencingBroken => crate::judgement::FENCING_BROKEN,
            Expect::MustFail => "acquire fails, nothing left",
            Expect::Recovers => "no violation, recovers",
        })
    }
}

/// One observed case on one side of fencing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    pub scenario: String,
    pub case: String,
    pub backend: String,
    pub title: String,
    /// `off` or `on`.
    pub fencing: String,
    pub expected: Expect,
    pub observed: String,
    /// The observation agrees with the expectation.
    pub ok: bool,
    pub overlaps: u64,
    pub lost_updates: u64,
    pub rejected: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    pub notes: Vec<String>,
    /// Every node healthy again after the entry.
    pub healed: bool,
    /// The published finding this entry reproduces, and its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One measurement of a "what users hit" entry (U1-U7) on one backend: a cell of the report's
/// backend x entry table. Figures, not a verdict; where the entry has an expectation (a double
/// grant behind a transaction pooler, none in the safe configuration) `ok` says whether the
/// observation met it, and elsewhere whether there was evidence to measure at all.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hit {
    /// The catalogue entry (`U1`).
    pub entry: String,
    pub title: String,
    pub backend: String,
    /// The case within the entry (`cut off`, `transaction pooling`), empty for a single case.
    pub case: String,
    /// The measured figure, as the table shows it.
    pub figure: String,
    /// The numbers behind the figure, by name (seconds, counts, rates).
    pub values: std::collections::BTreeMap<String, f64>,
    /// What the case expects, when it has an expectation; `None` for a measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// Measured with evidence and, where there is an expectation, as expected.
    pub ok: bool,
    /// The evidence file in the result directory (every event with its time), relative.
    pub evidence: String,
    pub notes: Vec<String>,
}
