//! `dlbench compare BASE NEW`: per backend, workload and client count (never pooled over
//! workloads), per metric, how much changed and whether that is an improvement, noise, or a
//! regression; any new safety violation is always a regression.
//!
//! Two runs are compared only when they can be: the same plans (workload, clients, keys,
//! hold, duration), backends, target, completeness and machine (cores, hostname, kernel);
//! otherwise `compare` refuses with one line naming what differs (`--allow-mismatch`
//! compares anyway and says so).
//!
//! **The samples.** Each side is one result set or a directory of them (an `--out` root):
//! every phase repeat (`run --repeat N`) of every run on a side is one sample. Runs of the
//! two builds taken in turn (A B A B ...) see the same drift of a shared machine; runs of one
//! build taken in a block and then the other's do not, and no test can tell the drift from
//! the build.
//!
//! **The decision.** A gated metric (`--gate`; the library's [`compare`] gates on all) changed
//! only if the medians differ by more than the metric's threshold (a minimum effect size)
//! *and* a one-sided Mann-Whitney U test (exact, ties counted half) in that direction stays
//! under [`ALPHA`] after Holm's adjustment over every gated test of the comparison. Ten
//! metrics per phase tested at 0.05 each would flag a false regression in a large share of
//! same-build comparisons; Holm keeps the chance of any false one in the whole comparison
//! under 0.05. The cost is repeats: with n runs per side the smallest p a test can reach is
//! 1 / C(2n, n), so the comparison states the runs a side its family needs
//! ([`runs_needed`]), and one that cannot reach the adjusted level says so (exit 3) instead
//! of printing "no regression". A percentile is judged only when each sample had at least
//! [`MIN_TAIL`] acquisitions beyond it. With fewer than [`MIN_SAMPLES`] samples a side (one
//! run a side) nothing is confirmed: a change past its threshold is "not confirmed" (exit 3,
//! never 1), whatever the load.
//!
//! Thresholds are relative changes, set per metric; the defaults are wide because a shared
//! 2-core machine moves throughput by 10-20% from one run to the next. Count metrics
//! (errors) also need an absolute change of 10 before they count.

mod comparable;
pub mod layer;
mod markdown;
mod rows;
mod side;
mod text;
mod verdicts;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_layer;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::judgement::Change;

pub use comparable::{mismatches, notes};
pub use markdown::{markdown, runs_needed};
pub use rows::{compare, compare_checked, compare_gated, compare_with, metric};
pub use side::{load, load_side};
pub use text::text;

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// A compared metric: name, direction, default threshold (percent).
pub const METRICS: &[(&str, Better, f64)] = &[
    ("ops_per_sec", Better::Higher, 25.0),
    ("acquire_p50_us", Better::Lower, 30.0),
    ("acquire_p99_us", Better::Lower, 50.0),
    ("acquire_p999_us", Better::Lower, 100.0),
    ("release_p99_us", Better::Lower, 50.0),
    ("handoff_p50_us", Better::Lower, 50.0),
    ("errors", Better::Lower, 100.0),
    ("availability_pct", Better::Higher, 5.0),
    ("longest_gap_ms", Better::Lower, 50.0),
    ("recovery_ms", Better::Lower, 50.0),
];

/// Safety counts: any increase is a regression, whatever the threshold.
pub const SAFETY: &[&str] = &["overlaps", "lost_updates", "lost_updates_fenced"];

/// A percentile is judged only when every sample saw at least this many acquisitions beyond it.
pub const MIN_TAIL: u64 = 10;

fn yes() -> bool {
    true
}

/// Samples per side below which the thresholds alone decide.
pub const MIN_SAMPLES: usize = 3;
/// A latency change smaller than this (µs) never counts, whatever its relative size.
pub const LATENCY_FLOOR_US: f64 = 50.0;
/// The test's significance level (two-sided).
pub const ALPHA: f64 = 0.05;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub backend: String,
    #[serde(default)]
    pub workload: String,
    #[serde(default)]
    pub clients: usize,
    pub metric: String,
    /// The medians over the repeats (the value, with one run per side).
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// Samples on each side.
    #[serde(default)]
    pub samples: (usize, usize),
    /// Relative change of the medians in percent, when both exist and the base is not zero.
    pub change_pct: Option<f64>,
    /// The one-sided Mann-Whitney U p-value in the direction the medians moved (worse or
    /// better), when both sides had enough samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// That p-value after Holm's adjustment over every test of the comparison: a change
    /// counts only when this is under [`ALPHA`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_adjusted: Option<f64>,
    pub verdict: Change,
    /// A safety regression fails the comparison whatever the thresholds.
    pub safety: bool,
    /// Past its threshold, but no test could confirm it (too few runs a side): the verdict
    /// is the direction only, and the comparison exits 3, never 1, for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfirmed: bool,
    /// Whether the row can fail the comparison (`--gate`): an ungated row is reported, and
    /// neither joins Holm's family nor counts as a regression.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub gated: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub thresholds_pct: BTreeMap<String, f64>,
    /// What differs between the runs; non-empty only with `--allow-mismatch`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
    /// What differs without making the runs incomparable (kernel build, host, fields one
    /// side did not record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// When the sides ran on different targets and both measured their target's costs: per
    /// backend x workload, what part of the difference those costs explain (`layer.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_costs: Vec<String>,
    /// What only one side measured, left out of the comparison (with `--allow-mismatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The fewest samples any compared phase had on either side.
    #[serde(default)]
    pub min_samples: usize,
    /// How many metric tests the comparison made (the size of Holm's family).
    #[serde(default)]
    pub tests: usize,
    /// Whether a change could have been detected at all: with few repeats and many tests,
    /// even completely separated samples stay above the adjusted level.
    #[serde(default = "yes")]
    pub detectable: bool,
    /// The metrics gated on (`--gate`): "all", or their names.
    #[serde(default)]
    pub gate: String,
    /// The tests the comparison's rule makes (or would make, with enough runs a side) for
    /// the plans in front of it: the rows compared on both sides and judged.
    #[serde(default)]
    pub family: usize,
    /// The runs a side the rule needs for this family: the fewest with which completely
    /// separated samples pass Holm's first step ([`runs_needed`]).
    #[serde(default)]
    pub runs_needed: usize,
    pub rows: Vec<Row>,
    /// Regressions the rule confirmed (and safety counts that rose): the exit status 1.
    pub regressions: usize,
    pub safety_regressions: usize,
    /// Rows past their threshold that no test could confirm (exit 3).
    #[serde(default)]
    pub unconfirmed: usize,
}

/// What `compare` gates on by default: throughput and the p99 of acquiring, per phase. Every
/// row is still reported; gating on every metric (`--gate all`) makes Holm's family about
/// three times larger and the runs needed a side larger with it (7 for the default plan
/// against 6; see `runs_needed`).
pub const DEFAULT_GATE: &str = "ops_per_sec,acquire_p99_us";

/// The metrics whose rows can fail a comparison. Safety counts always can, and the verdict
/// row (the whole verdict, counted) is always gated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    All,
    Only(Vec<String>),
}

impl Gate {
    /// `all`, or metric names, comma-separated.
    pub fn parse(spec: &str) -> anyhow::Result<Gate> {
        if spec.trim() == "all" {
            return Ok(Gate::All);
        }
        let names: Vec<String> = spec.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect();
        for m in &names {
            anyhow::ensure!(METRICS.iter().any(|x| x.0 == m), "--gate {m:?}: unknown metric; metrics: all, {}", METRICS.iter().map(|m| m.0).collect::<Vec<_>>().join(", "));
        }
        anyhow::ensure!(!names.is_empty(), "--gate names no metric (all, or e.g. ops_per_sec,acquire_p99_us)");
        Ok(Gate::Only(names))
    }

    pub fn gates(&self, metric: &str) -> bool {
        match self {
            Gate::All => true,
            Gate::Only(v) => v.iter().any(|m| m == metric),
        }
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gate::All => f.write_str("all"),
            Gate::Only(v) => f.write_str(&v.join(",")),
        }
    }
}

/// `metric=PCT` overrides of the default thresholds.
pub fn thresholds(overrides: &[String]) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut t: BTreeMap<String, f64> = METRICS.iter().map(|(m, _, p)| (m.to_string(), *p)).collect();
    for o in overrides {
        let (m, v) = o.split_once('=').ok_or_else(|| anyhow::anyhow!("--threshold {o:?}: write METRIC=PERCENT, e.g. ops_per_sec=10"))?;
        if !t.contains_key(m) {
            anyhow::bail!("--threshold {o:?}: unknown metric; metrics: {}", METRICS.iter().map(|m| m.0).collect::<Vec<_>>().join(", "));
        }
        let v: f64 = v.trim_end_matches('%').parse().map_err(|_| anyhow::anyhow!("--threshold {o:?}: {v:?} is not a number"))?;
        t.insert(m.to_string(), v);
    }
    Ok(t)
}

