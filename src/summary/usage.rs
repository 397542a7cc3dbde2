//! `summary.json`'s `resources` section: the harness's and the servers' memory and open files
//! over the run, as trends (the samples are in resources.jsonl).

use std::collections::BTreeMap;

/// How one series moved over the run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Trend {
    pub first: f64,
    pub peak: f64,
    pub last: f64,
    /// Mean over the samples after the warm-up.
    pub mean: f64,
    /// Least-squares slope after the warm-up, in the series' unit per hour; `None` with fewer
    /// than 10 samples after the warm-up.
    pub growth_per_hour: Option<f64>,
    /// The slope as a share of the mean, in percent per hour.
    pub growth_pct_per_hour: Option<f64>,
    /// Lowest and highest value after the warm-up.
    pub min_after_warmup: f64,
    pub max_after_warmup: f64,
}

/// The machine usage figures of a run (memory and open files: not the protected resource).
// summary.json's key stays `resources` and the schema keeps the definition's old name.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ResourceSummary")]
pub struct UsageSummary {
    pub samples: u64,
    pub seconds: f64,
    /// Samples before this many seconds are excluded from trends (allocator arenas, pools and
    /// JIT-compiled servers fill up first).
    pub warmup_s: f64,
    /// dlbench's resident memory, MiB.
    pub harness_rss_mb: Trend,
    /// dlbench's open file descriptors.
    pub harness_fds: Trend,
    /// dlbench's allocator's bytes in use, MiB (glibc): the live part of the RSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_heap_mb: Option<Trend>,
    /// Each server's memory (PSS over its process group), MiB, by node name.
    pub servers_mb: BTreeMap<String, Trend>,
}
