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

/// The shortest run whose growth trends are shown: a slope over a minute, scaled to an hour,
/// says nothing (a 49 s run's "+7489.9% / hour" is noise). The terminal, summary.md and the
/// page all ask [`UsageSummary::growth`], so they show a trend from the same length on.
pub const TREND_MIN_S: f64 = 600.0;

impl UsageSummary {
    /// Whether the run was long enough to show growth trends ([`TREND_MIN_S`]).
    pub fn long_enough_for_trends(&self) -> bool {
        self.seconds >= TREND_MIN_S
    }

    /// A series' growth per hour (in its unit, and in percent of its mean), when the run was
    /// long enough ([`TREND_MIN_S`]) and the series had the samples for a slope.
    pub fn growth(&self, t: &Trend) -> Option<(f64, Option<f64>)> {
        if !self.long_enough_for_trends() {
            return None;
        }
        t.growth_per_hour.map(|g| (g, t.growth_pct_per_hour))
    }

    /// Why no growth is shown, in a few words, when none is.
    pub fn no_trend_reason(&self) -> Option<String> {
        (!self.long_enough_for_trends()).then(|| format!("run too short for a growth trend: {:.0} s, trends from {:.0} min", self.seconds, TREND_MIN_S / 60.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The case: a 49 s run whose etcd node's slope scaled to +7489.9% an hour.
    #[test]
    fn short_runs_show_no_growth_anywhere() {
        let t = Trend { growth_per_hour: Some(120.0), growth_pct_per_hour: Some(7489.9), ..Trend::default() };
        let short = UsageSummary { seconds: 49.0, servers_mb: [("etcd-1".to_string(), t.clone())].into(), ..UsageSummary::default() };
        assert_eq!(short.growth(&t), None);
        assert!(short.no_trend_reason().unwrap().contains("too short"));
        let long = UsageSummary { seconds: TREND_MIN_S, ..short };
        assert_eq!(long.growth(&t), Some((120.0, Some(7489.9))));
        assert_eq!(long.no_trend_reason(), None);
    }
}
