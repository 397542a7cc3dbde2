//! `dlbench report RUN_DIR`: the tables, the plots and one offline HTML page, regenerated
//! from what a run directory holds — also for a run that was killed, from its partial
//! summary and history.

mod calibration;
pub mod decision;
mod evidence;
mod glance;
mod html;
mod partial;
pub mod plots;
mod tables;
pub mod text;
#[cfg(test)]
mod tests_numbers;
#[cfg(test)]
mod tests_durability;

use std::path::{Path, PathBuf};

use crate::checker::SegmentVerdict;
use crate::history;
use crate::summary::{self, BackendSummary, Summary};

/// What the report is made of.
pub struct Input {
    pub summary: Summary,
    pub verdicts: Vec<SegmentVerdict>,
    /// Why the figures may be incomplete, when they may.
    pub incomplete: Option<String>,
    pub has_history: bool,
    /// The run directory's data files the page links to (relative paths, those present).
    pub files: Vec<String>,
}

/// The data files of a run directory, in the order a reader wants them.
fn data_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = ["summary.json", "summary.md", "plan.json", "checks.json", "history.jsonl", "resources.jsonl"]
        .iter()
        .filter(|f| dir.join(f).is_file())
        .map(|f| f.to_string())
        .collect();
    let mut hlogs: Vec<String> = std::fs::read_dir(dir.join("hdr"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".hlog"))
        .map(|n| format!("hdr/{n}"))
        .collect();
    hlogs.sort();
    files.extend(hlogs);
    files
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> anyhow::Result<Option<T>> {
    match std::fs::read(p) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b).map_err(|e| anyhow::anyhow!("{} is not valid: {e}", p.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", p.display())),
    }
}

/// Load a run directory, filling from the history what a killed run did not summarise.
pub fn load(dir: &Path) -> anyhow::Result<Input> {
    if !dir.is_dir() {
        anyhow::bail!("{} is not a run directory", dir.display());
    }
    let mut summary: Summary = read_json(&dir.join("summary.json"))?
        .ok_or_else(|| anyhow::anyhow!("{} has no summary.json: not a dlbench run directory", dir.display()))?;
    let history_path = dir.join("history.jsonl");
    let has_history = history_path.is_file();
    let mut incomplete = (!summary.complete).then(|| {
        "the run did not finish (it was interrupted or killed); figures cover what it recorded".to_string()
    });
    let verdicts: Vec<SegmentVerdict> = match read_json(&dir.join("checks.json"))? {
        Some(v) if summary.complete => v,
        _ if has_history => {
            // Check the history now, and add the phases the summary never got to.
            let mut verdicts = Vec::new();
            let mut per_backend: std::collections::HashMap<String, usize> = Default::default();
            history::for_each_segment(&history_path, |seg| {
                let v = crate::checker::check(&seg);
                let n = per_backend.entry(v.backend.clone()).or_default();
                *n += 1;
                let have = summary.backends.iter().find(|b| b.name == v.backend).map_or(0, |b| b.workloads.len());
                if *n > have {
                    let w = partial::workload_from_history(&seg);
                    match summary.backends.iter_mut().find(|b| b.name == v.backend) {
                        Some(b) => b.workloads.push(w),
                        None => {
                            let mut b = BackendSummary::empty(&v.backend, None);
                            b.workloads.push(w);
                            summary.backends.push(b);
                        }
                    }
                }
                verdicts.push(v);
            })?;
            for b in &mut summary.backends {
                refresh_totals(b);
            }
            verdicts
        }
        Some(v) => v,
        None => Vec::new(),
    };
    if !summary.complete && !has_history {
        incomplete = Some("the run did not finish and kept no history; figures cover the phases it summarised".into());
    }
    Ok(Input { summary, verdicts, incomplete, has_history, files: data_files(dir) })
}

/// Totals of a backend rebuilt from its workloads (after phases were added from history).
fn refresh_totals(b: &mut BackendSummary) {
    let secs: f64 = b.workloads.iter().map(|w| w.measured_s).sum();
    let acquired: u64 = b.workloads.iter().map(|w| w.acquired).sum();
    if secs > 0.0 {
        b.ops_per_sec = (acquired as f64 / secs * 10.0).round() / 10.0;
    }
    b.counts.overlaps = b.workloads.iter().map(|w| w.counts.overlaps).sum();
    b.counts.lost_updates = b.workloads.iter().map(|w| w.counts.lost_updates).sum();
    b.counts.lost_updates_fenced = b.workloads.iter().map(|w| w.counts.lost_updates_fenced).sum();
    b.counts.rejected = b.workloads.iter().map(|w| w.counts.rejected).sum();
    b.errors = b.workloads.iter().map(|w| w.errors).sum();
    if b.acquire_latency_us.count == 0 {
        if let Some(w) = b.workloads.iter().max_by_key(|w| w.acquired) {
            b.acquire_latency_us = w.acquire_latency_us.clone();
        }
    }
    b.timeseries = b
        .workloads
        .iter()
        .flat_map(|w| w.timeseries.iter().map(|p| summary::SeriesPoint { workload: w.name.clone(), point: p.clone() }))
        .collect();
}

/// Write plots, summary.md and report.html into `dir`; returns the page's path.
pub fn render(dir: &Path) -> anyhow::Result<PathBuf> {
    let input = load(dir)?;
    let plots = plots::draw_all(dir, &input.summary);
    let page = dir.join("report.html");
    let evidence = if input.has_history { evidence::evidence_excerpts(&dir.join("history.jsonl"), &input.verdicts) } else { Default::default() };
    let text = html::page(&input, &plots, &evidence);
    crate::util::write_atomic(&page, text.as_bytes()).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", page.display()))?;
    let mut md = text::markdown(&input.summary);
    if let Some(why) = &input.incomplete {
        md = format!("> **Incomplete**: {why}.\n\n{md}");
    }
    crate::util::write_atomic(&dir.join("summary.md"), md.as_bytes())?;
    Ok(page)
}
