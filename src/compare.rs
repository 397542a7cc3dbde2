//! `dlbench compare BASE NEW`: per backend and metric, how much changed and whether that is
//! an improvement, noise, or a regression; any new safety violation is always a regression.
//!
//! Thresholds are relative changes, set per metric; the defaults are wide because a shared
//! 2-core machine moves throughput by 10-20% from one run to the next. Count metrics
//! (errors) also need an absolute change of 10 before they count.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::summary::{BackendSummary, Summary};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Improved,
    Unchanged,
    Regressed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub backend: String,
    pub metric: String,
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// Relative change in percent, when both exist and the base is not zero.
    pub change_pct: Option<f64>,
    pub verdict: Change,
    /// A safety regression fails the comparison whatever the thresholds.
    pub safety: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub thresholds_pct: BTreeMap<String, f64>,
    pub rows: Vec<Row>,
    pub regressions: usize,
    pub safety_regressions: usize,
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

/// A run directory or a summary.json.
pub fn load(p: &Path) -> anyhow::Result<Summary> {
    let file = if p.is_dir() { p.join("summary.json") } else { p.to_path_buf() };
    let bytes = std::fs::read(&file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{} is not a dlbench summary: {e}", file.display()))
}

fn metric(b: &BackendSummary, m: &str) -> Option<f64> {
    let a = b.availability.as_ref();
    Some(match m {
        "ops_per_sec" => b.ops_per_sec,
        "acquire_p50_us" => b.acquire_latency_us.p50 as f64,
        "acquire_p99_us" => b.acquire_latency_us.p99 as f64,
        "acquire_p999_us" => b.acquire_latency_us.p999 as f64,
        "release_p99_us" => b.release_latency_us.p99 as f64,
        "handoff_p50_us" if b.handoff_latency_us.count > 0 => b.handoff_latency_us.p50 as f64,
        "errors" => b.errors as f64,
        "availability_pct" => a?.success_seconds_pct,
        "longest_gap_ms" => a?.longest_gap_ms as f64,
        "recovery_ms" => a?.recovery_ms as f64,
        "overlaps" => b.overlaps as f64,
        "lost_updates" => b.lost_updates as f64,
        "lost_updates_fenced" => b.lost_updates_fenced as f64,
        _ => return None,
    })
}

/// Worse verdicts rank higher: safe, safe with fencing, unknown (nothing could be decided),
/// fencing broken, unsafe.
fn safety_rank(b: &BackendSummary) -> u8 {
    match b.verdict.as_ref().map(|v| v.safety.as_str()) {
        Some("safe") | None => 0,
        Some("safe with fencing") => 1,
        Some("unknown") => 2,
        Some("fencing broken") => 3,
        _ => 4,
    }
}

pub fn compare(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>) -> Comparison {
    let mut rows = Vec::new();
    for bb in base.backends.iter().filter(|b| b.failure.is_none()) {
        let Some(nb) = new.backends.iter().find(|b| b.name == bb.name && b.failure.is_none()) else {
            rows.push(Row {
                backend: bb.name.clone(),
                metric: "measured".into(),
                base: Some(1.0),
                new: Some(0.0),
                change_pct: None,
                verdict: Change::Regressed,
                safety: false,
                note: "not measured in the new run".into(),
            });
            continue;
        };
        for (m, better, _) in METRICS {
            let (Some(b), Some(n)) = (metric(bb, m), metric(nb, m)) else { continue };
            let pct = if b != 0.0 { Some((n - b) / b.abs() * 100.0) } else { None };
            let limit = t.get(*m).copied().unwrap_or(50.0);
            let abs_ok = *m != "errors" || (n - b).abs() >= 10.0;
            let verdict = match (pct, better) {
                _ if !abs_ok => Change::Unchanged,
                // For availability the threshold is in percentage points.
                _ if *m == "availability_pct" => {
                    if n < b - limit {
                        Change::Regressed
                    } else if n > b + limit {
                        Change::Improved
                    } else {
                        Change::Unchanged
                    }
                }
                (None, _) if n == b => Change::Unchanged,
                (None, Better::Lower) => Change::Regressed,
                (None, Better::Higher) => Change::Improved,
                (Some(p), Better::Higher) if p < -limit => Change::Regressed,
                (Some(p), Better::Higher) if p > limit => Change::Improved,
                (Some(p), Better::Lower) if p > limit => Change::Regressed,
                (Some(p), Better::Lower) if p < -limit => Change::Improved,
                _ => Change::Unchanged,
            };
            rows.push(Row { backend: bb.name.clone(), metric: m.to_string(), base: Some(b), new: Some(n), change_pct: pct, verdict, safety: false, note: String::new() });
        }
        for m in SAFETY {
            let (Some(b), Some(n)) = (metric(bb, m), metric(nb, m)) else { continue };
            let verdict = if n > b { Change::Regressed } else if n < b { Change::Improved } else { Change::Unchanged };
            rows.push(Row {
                backend: bb.name.clone(),
                metric: m.to_string(),
                base: Some(b),
                new: Some(n),
                change_pct: None,
                verdict,
                safety: verdict == Change::Regressed,
                note: if verdict == Change::Regressed { "new safety violation".into() } else { String::new() },
            });
        }
        let (rb, rn) = (safety_rank(bb), safety_rank(nb));
        if rn != rb || rn > 0 {
            let v = |b: &BackendSummary| b.verdict.as_ref().map(|v| v.safety.clone()).unwrap_or_else(|| "safe".into());
            rows.push(Row {
                backend: bb.name.clone(),
                metric: "verdict".into(),
                base: Some(rb as f64),
                new: Some(rn as f64),
                change_pct: None,
                verdict: if rn > rb { Change::Regressed } else if rn < rb { Change::Improved } else { Change::Unchanged },
                safety: rn > rb,
                note: format!("{} -> {}", v(bb), v(nb)),
            });
        }
    }
    let regressions = rows.iter().filter(|r| r.verdict == Change::Regressed).count();
    let safety_regressions = rows.iter().filter(|r| r.safety).count();
    let label = |s: &Summary| format!("{}{}", s.run_id, s.dlbench_commit.as_ref().map(|c| format!(" ({})", &c[..c.len().min(12)])).unwrap_or_default());
    Comparison { base: label(base), new: label(new), thresholds_pct: t.clone(), rows, regressions, safety_regressions }
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

/// Markdown fit for a pull-request comment: the changes first, then everything else.
pub fn markdown(c: &Comparison) -> String {
    let mut s = format!("## dlbench compare\n\nbase `{}` → new `{}`\n\n", c.base, c.new);
    if c.regressions == 0 {
        s.push_str("**No regression.**\n\n");
    } else {
        let names: Vec<String> =
            c.rows.iter().filter(|r| r.verdict == Change::Regressed).map(|r| format!("{} {}", r.backend, r.metric)).collect();
        s.push_str(&format!(
            "**{} regression(s){}**: {}\n\n",
            c.regressions,
            if c.safety_regressions > 0 { format!(", {} of safety", c.safety_regressions) } else { String::new() },
            names.join(", ")
        ));
    }
    s.push_str("| backend | metric | base | new | change | verdict |\n|---|---|---:|---:|---:|---|\n");
    let mut rows: Vec<&Row> = c.rows.iter().collect();
    rows.sort_by_key(|r| match r.verdict {
        Change::Regressed => 0,
        Change::Improved => 1,
        Change::Unchanged => 2,
    });
    for r in rows {
        let change = r.change_pct.map(|p| format!("{p:+.1}%")).unwrap_or_else(|| "".into());
        let verdict = match r.verdict {
            Change::Regressed if r.safety => "**regressed (safety)**".to_string(),
            Change::Regressed => "**regressed**".to_string(),
            Change::Improved => "improved".to_string(),
            Change::Unchanged => "unchanged".to_string(),
        };
        let note = if r.note.is_empty() { String::new() } else { format!(" ({})", r.note) };
        s.push_str(&format!("| {} | {} | {} | {} | {} | {verdict}{note} |\n", r.backend, r.metric, fmt_num(r.base), fmt_num(r.new), change));
    }
    s.push_str(&format!(
        "\nThresholds (relative change that counts, %): {}; availability in percentage points; any increase in {} fails.\n",
        c.thresholds_pct.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        SAFETY.join(", ")
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::FencingMode;

    fn summary(ops: f64, overlaps: u64) -> Summary {
        let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
        let mut b = BackendSummary::new("etcd", None, &[]);
        b.ops_per_sec = ops;
        b.acquire_latency_us.p99 = 1000;
        b.acquire_latency_us.p50 = 100;
        b.overlaps = overlaps;
        s.backends.push(b);
        s
    }

    #[test]
    fn halved_throughput_regresses_and_is_named() {
        let t = thresholds(&[]).unwrap();
        let c = compare(&summary(1000.0, 0), &summary(500.0, 0), &t);
        assert_eq!(c.regressions, 1);
        let md = markdown(&c);
        assert!(md.contains("etcd ops_per_sec"), "{md}");
    }

    #[test]
    fn same_twice_is_unchanged_and_noise_is_tolerated() {
        let t = thresholds(&[]).unwrap();
        assert_eq!(compare(&summary(1000.0, 0), &summary(1000.0, 0), &t).regressions, 0);
        assert_eq!(compare(&summary(1000.0, 0), &summary(900.0, 0), &t).regressions, 0, "10% is noise");
        let strict = thresholds(&["ops_per_sec=5".into()]).unwrap();
        assert_eq!(compare(&summary(1000.0, 0), &summary(900.0, 0), &strict).regressions, 1);
    }

    #[test]
    fn a_new_overlap_always_fails() {
        let t = thresholds(&["ops_per_sec=1000".into()]).unwrap();
        let c = compare(&summary(1000.0, 0), &summary(1000.0, 1), &t);
        assert_eq!(c.safety_regressions, 1);
        assert!(c.regressions >= 1);
    }

    #[test]
    fn bad_threshold_is_named() {
        let e = thresholds(&["speed=10".into()]).unwrap_err().to_string();
        assert!(e.contains("speed") && e.contains("ops_per_sec"), "{e}");
    }
}
