//! `summary.json` and the table: what a run measured, per backend and per workload.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::driver::PhaseResult;
use crate::stats::{Percentiles, Totals};

pub const SCHEMA_VERSION: u32 = 1;

/// One workload phase on one backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadSummary {
    pub name: String,
    pub clients: usize,
    pub keys: usize,
    pub measured_s: f64,
    pub ops_per_sec: f64,
    pub acquired: u64,
    pub acquire_latency_us: Percentiles,
    pub release_latency_us: Percentiles,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    pub timeouts: u64,
    pub retired_clients: u64,
    pub sections: u64,
    pub overlaps: u64,
    pub lost_updates: u64,
    pub stale_tokens: u64,
}

/// One backend over all its phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackendSummary {
    pub name: String,
    pub capabilities: Option<serde_json::Value>,
    /// Acquisitions per second over all measured phases.
    pub ops_per_sec: f64,
    pub acquire_latency_us: Percentiles,
    pub release_latency_us: Percentiles,
    pub errors: u64,
    pub timeouts: u64,
    pub overlaps: u64,
    pub lost_updates: u64,
    pub stale_tokens: u64,
    pub workloads: Vec<WorkloadSummary>,
    /// Why this backend could not be measured, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    /// False until the run ends normally; a killed or interrupted run stays false.
    pub complete: bool,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub command: Vec<String>,
    pub target: String,
    pub versions: BTreeMap<String, String>,
    pub backends: Vec<BackendSummary>,
}

impl WorkloadSummary {
    pub fn from_phase(p: &PhaseResult) -> Self {
        WorkloadSummary {
            name: p.workload.name.clone(),
            clients: p.workload.clients,
            keys: p.workload.keys,
            measured_s: (p.measured.as_secs_f64() * 1000.0).round() / 1000.0,
            ops_per_sec: (p.ops_per_sec() * 10.0).round() / 10.0,
            acquired: p.totals.acquired,
            acquire_latency_us: Percentiles::of(&p.totals.acquire),
            release_latency_us: Percentiles::of(&p.totals.release),
            errors: p.totals.error_count(),
            error_kinds: p.totals.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            timeouts: p.totals.timeouts,
            retired_clients: p.retired,
            sections: p.resource.total.sections,
            overlaps: p.resource.total.overlaps,
            lost_updates: p.resource.total.lost_updates,
            stale_tokens: p.resource.total.stale_tokens,
        }
    }
}

impl BackendSummary {
    pub fn new(name: &str, capabilities: Option<serde_json::Value>, phases: &[PhaseResult]) -> Self {
        let mut all = Totals::default();
        let mut secs = 0.0;
        for p in phases {
            all.merge(&p.totals);
            secs += p.measured.as_secs_f64();
        }
        let workloads: Vec<WorkloadSummary> = phases.iter().map(WorkloadSummary::from_phase).collect();
        BackendSummary {
            name: name.to_string(),
            capabilities,
            ops_per_sec: if secs > 0.0 { (all.acquired as f64 / secs * 10.0).round() / 10.0 } else { 0.0 },
            acquire_latency_us: Percentiles::of(&all.acquire),
            release_latency_us: Percentiles::of(&all.release),
            errors: all.error_count(),
            timeouts: all.timeouts,
            overlaps: workloads.iter().map(|w| w.overlaps).sum(),
            lost_updates: workloads.iter().map(|w| w.lost_updates).sum(),
            stale_tokens: workloads.iter().map(|w| w.stale_tokens).sum(),
            workloads,
            failure: None,
        }
    }

    pub fn failed(name: &str, why: String) -> Self {
        BackendSummary {
            name: name.to_string(),
            capabilities: None,
            ops_per_sec: 0.0,
            acquire_latency_us: Percentiles::default(),
            release_latency_us: Percentiles::default(),
            errors: 0,
            timeouts: 0,
            overlaps: 0,
            lost_updates: 0,
            stale_tokens: 0,
            workloads: Vec::new(),
            failure: Some(why),
        }
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

const HEADER: [&str; 12] =
    ["backend", "workload", "clients", "keys", "acq/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "overlaps", "lost upd", "stale tok"];

fn rows(s: &Summary) -> Vec<[String; 12]> {
    let mut out = Vec::new();
    for b in &s.backends {
        if let Some(f) = &b.failure {
            let mut r: [String; 12] = Default::default();
            r[0] = b.name.clone();
            r[1] = format!("FAILED: {f}");
            out.push(r);
            continue;
        }
        for w in &b.workloads {
            out.push([
                b.name.clone(),
                w.name.clone(),
                w.clients.to_string(),
                w.keys.to_string(),
                format!("{:.0}", w.ops_per_sec),
                ms(w.acquire_latency_us.p50),
                ms(w.acquire_latency_us.p99),
                ms(w.acquire_latency_us.p999),
                w.errors.to_string(),
                w.overlaps.to_string(),
                w.lost_updates.to_string(),
                w.stale_tokens.to_string(),
            ]);
        }
    }
    out
}

/// The table for a terminal: aligned columns.
pub fn table(s: &Summary) -> String {
    let rows = rows(s);
    let mut width: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if !(i == 1 && c.starts_with("FAILED")) {
                width[i] = width[i].max(c.len());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            if i < 2 {
                let _ = write!(out, "{:<w$}  ", c, w = width[i]);
            } else {
                let _ = write!(out, "{:>w$}  ", c, w = width[i]);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&HEADER.map(String::from), &mut out);
    for r in &rows {
        line(r, &mut out);
    }
    out
}

/// The same table in Markdown.
pub fn markdown_table(s: &Summary) -> String {
    let mut out = format!("| {} |\n|{}\n", HEADER.join(" | "), "---|".repeat(HEADER.len()));
    for r in rows(s) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

/// `summary.md`: the table and how to read it.
pub fn markdown(s: &Summary) -> String {
    let mut out = format!(
        "# dlbench run {}\n\n{}\n\nTarget: {}. Command: `{}`.\n\n",
        s.run_id,
        if s.complete { "Complete." } else { "**Incomplete**: the run was interrupted; figures cover what finished." },
        s.target,
        s.command.join(" ")
    );
    out.push_str(&markdown_table(s));
    out.push_str(
        "\nacq/s: successful acquisitions per second (measured window, warm-up excluded). \
         p50/p99/p99.9: acquire latency. errors: failures other than contention timeouts. \
         overlaps: critical sections that began while another holder of the same key was inside, \
         seen at the protected resource. lost upd: read-modify-write updates overwritten by a concurrent \
         holder. stale tok: fencing tokens presented out of order.\n",
    );
    if !s.versions.is_empty() {
        out.push_str("\nServers: ");
        out.push_str(&s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
        out.push('\n');
    }
    out
}
