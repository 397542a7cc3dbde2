//! `summary.json`'s `scenarios` section: each catalogue entry's observation against its
//! expectation (the choreography is in `crate::scenario`).

use serde::{Deserialize, Serialize};

use crate::judgement::{Availability, Expect};

/// One observed case on one side of fencing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Outcome")]
pub struct ScenarioOutcome {
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
