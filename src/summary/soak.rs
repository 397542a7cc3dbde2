//! `summary.json`'s `soak` section: a soak's goal and what it showed against it.

/// What a soak must show.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SoakGoal {
    /// Largest growth of the harness's resident memory after the warm-up, in percent of its
    /// mean, over the rest of the run.
    pub max_rss_growth_pct: f64,
    /// Largest growth of open file descriptors after the warm-up, over the rest of the run.
    pub max_fd_growth: f64,
}

impl Default for SoakGoal {
    fn default() -> Self {
        SoakGoal { max_rss_growth_pct: 5.0, max_fd_growth: 5.0 }
    }
}

/// What a soak showed, against its goal.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SoakOutcome {
    pub goal: Option<SoakGoal>,
    /// Harness RSS growth after the warm-up, over the rest of the run, percent of its mean.
    pub rss_growth_pct: Option<f64>,
    /// Open file descriptors gained after the warm-up, over the rest of the run (the slope
    /// times the time, so a transient reconnect does not count).
    pub fd_growth: Option<f64>,
    pub faults_applied: u64,
    /// Faults whose end (the inverse: restart, resume, heal) was recorded.
    pub faults_healed: u64,
    /// The run ended normally (not interrupted, not killed).
    pub complete: bool,
    /// Every backend's history was checked.
    pub checked: bool,
    pub passed: bool,
    /// Why it did not pass; empty when it did.
    pub failures: Vec<String>,
}
