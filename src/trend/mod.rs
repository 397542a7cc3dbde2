//! `dlbench trend DIR...`: each compared metric across a series of result sets given in order
//! (one per commit, say), its spread at every point, and the points where `compare` flags a
//! change. The flags are `compare`'s own: every consecutive pair goes through
//! [`crate::compare::compare_gated`] with the same thresholds and gate, so a point is flagged
//! here exactly when `dlbench compare PREVIOUS THIS` would have decided on it (a change it
//! confirmed on a gated row; not one past its threshold it could not confirm). Nothing is
//! re-judged.
//!
//! Each DIR is read as a side of `compare` is: a result set, or a directory of result sets
//! whose runs are pooled as repeats. `html` draws the page, `text` the terminal summary;
//! `cli/output.rs` writes and prints them.

pub mod html;
pub mod text;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::compare::{Better, Comparison, METRICS, SAFETY};
use crate::judgement::Change;
use crate::summary::Summary;

/// The trend over a series of result sets.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    pub points: Vec<Point>,
    /// Point `i` to point `i + 1`, for every `i`.
    pub steps: Vec<Step>,
    /// One line per phase (backend, workload, clients) and metric, in run order.
    pub series: Vec<Series>,
}

/// One result set (or pooled directory) of the series.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub dir: String,
    /// The run id from summary.json (a pooled directory names itself and its count).
    pub run_id: String,
    /// The git commit dlbench was built from, when recorded.
    pub commit: Option<String>,
    pub complete: bool,
}

impl Point {
    /// A short name: `#N` and the commit's first 12 characters, else the run id.
    pub fn label(&self, i: usize) -> String {
        match &self.commit {
            Some(c) => format!("#{} {}", i + 1, &c[..c.len().min(12)]),
            None => format!("#{} {}", i + 1, self.run_id),
        }
    }
}

/// What `compare` said of one consecutive pair.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub from: usize,
    pub to: usize,
    /// Why `compare` refused the pair (it would have exited 2); no flags then.
    pub refused: Option<String>,
    /// `compare`'s counts, as in its JSON.
    pub regressions: usize,
    pub safety_regressions: usize,
    /// Whether a regression could have been seen at all (`compare` exits 3 when not).
    pub detectable: bool,
    pub min_samples: usize,
    /// Every row `compare` judged other than unchanged.
    pub flags: Vec<Flag>,
}

impl Step {
    /// The exit status `dlbench compare` gives this pair: 2 refused, 1 a regression, 3 none
    /// detectable, else 0 (as `cli/output.rs` decides it for `compare`).
    pub fn compare_exit(&self) -> i32 {
        if self.refused.is_some() {
            2
        } else if self.regressions > 0 {
            1
        } else if !self.detectable {
            3
        } else {
            0
        }
    }
}

/// A row of a comparison that changed.
#[derive(Debug, Clone, Serialize)]
pub struct Flag {
    pub backend: String,
    pub workload: String,
    pub clients: usize,
    pub metric: String,
    pub verdict: Change,
    pub safety: bool,
    pub change_pct: Option<f64>,
    pub note: String,
}

/// One metric of one phase across the points.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub backend: String,
    pub workload: String,
    pub clients: usize,
    pub metric: String,
    /// Higher or lower is better (none for the safety counts: any increase is worse).
    pub better: Option<Better>,
    /// Per point: the samples' median and spread, or none where the point did not measure it.
    pub values: Vec<Option<Spread>>,
}

/// A point's samples of one metric: one per repeat of the phase in the set.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Series {
    /// The flag `compare` put on this series' metric at point `to` (from the step into it).
    pub fn flag_at<'a>(&self, steps: &'a [Step], to: usize) -> Option<&'a Flag> {
        steps
            .iter()
            .find(|s| s.to == to)?
            .flags
            .iter()
            .find(|f| f.backend == self.backend && f.workload == self.workload && f.clients == self.clients && f.metric == self.metric)
    }
}

/// Read every DIR (as `compare` reads a side) and build the trend; consecutive pairs are
/// compared with thresholds `t` (`allow_mismatch` as for `compare`).
pub fn trend(dirs: &[PathBuf], t: &BTreeMap<String, f64>, gate: &crate::compare::Gate, allow_mismatch: bool) -> anyhow::Result<Trend> {
    anyhow::ensure!(dirs.len() >= 2, "trend needs at least two result sets, in order (got {})", dirs.len());
    let sets = dirs.iter().map(|d| crate::compare::load_side(d)).collect::<anyhow::Result<Vec<_>>>()?;
    let points = dirs
        .iter()
        .zip(&sets)
        .map(|(d, s)| Point { dir: d.display().to_string(), run_id: s.run_id.clone(), commit: s.dlbench_commit.clone(), complete: s.complete })
        .collect();
    let steps = sets.windows(2).enumerate().map(|(i, w)| step(i, crate::compare::compare_gated(&w[0], &w[1], t, gate, allow_mismatch))).collect();
    Ok(Trend { points, steps, series: series(&sets) })
}

fn step(i: usize, c: anyhow::Result<Comparison>) -> Step {
    let c = match c {
        Ok(c) => c,
        Err(e) => {
            return Step { from: i, to: i + 1, refused: Some(format!("{e:#}")), regressions: 0, safety_regressions: 0, detectable: false, min_samples: 0, flags: Vec::new() };
        }
    };
    let flags: Vec<Flag> = c
        .rows
        .iter()
        // What compare decides on: a gated row's confirmed change (not one it could not confirm).
        .filter(|r| r.verdict != Change::Unchanged && r.gated && !r.unconfirmed)
        .map(|r| Flag {
            backend: r.backend.clone(),
            workload: r.workload.clone(),
            clients: r.clients,
            metric: r.metric.clone(),
            verdict: r.verdict,
            safety: r.safety,
            change_pct: r.change_pct,
            note: r.note.clone(),
        })
        .collect();
    Step {
        from: i,
        to: i + 1,
        refused: None,
        regressions: c.regressions,
        safety_regressions: c.safety_regressions,
        detectable: c.detectable,
        min_samples: c.min_samples,
        flags,
    }
}

/// A phase's identity, as `compare` keys it: backend, workload, clients.
type Key = (String, String, usize);

/// Every phase of every set, in first-seen order, and every metric any point measured.
fn series(sets: &[Summary]) -> Vec<Series> {
    let mut keys: Vec<Key> = Vec::new();
    for s in sets {
        for b in s.backends.iter().filter(|b| b.failure.is_none()) {
            for w in &b.workloads {
                let k = (b.name.clone(), w.name.clone(), w.clients);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
    }
    let metrics = METRICS.iter().map(|(m, b, _)| (*m, Some(*b))).chain(SAFETY.iter().map(|m| (*m, None)));
    let metrics: Vec<(&str, Option<Better>)> = metrics.collect();
    let mut out = Vec::new();
    for (backend, workload, clients) in keys {
        for &(m, better) in &metrics {
            let values: Vec<Option<Spread>> = sets.iter().map(|s| spread(s, (&backend, &workload, clients), m)).collect();
            // Safety counts only where one was ever non-zero; other metrics wherever measured.
            let shown = if better.is_none() { values.iter().flatten().any(|v| v.max > 0.0) } else { values.iter().any(|v| v.is_some()) };
            if shown {
                out.push(Series { backend: backend.clone(), workload: workload.clone(), clients, metric: m.to_string(), better, values });
            }
        }
    }
    out
}

/// One point's samples of a metric of a phase (every repeat under the phase's key).
fn spread(s: &Summary, (backend, workload, clients): (&str, &str, usize), m: &str) -> Option<Spread> {
    let mut xs: Vec<f64> = s
        .backends
        .iter()
        .filter(|b| b.failure.is_none() && b.name == backend)
        .flat_map(|b| b.workloads.iter())
        .filter(|w| w.name == workload && w.clients == clients)
        .filter_map(|w| crate::compare::metric(w, m))
        .collect();
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    Some(Spread { median: crate::stats::samples::median(&xs), min: xs[0], max: xs[xs.len() - 1], n: xs.len() })
}
