//! `dlbench run`: one validated plan, then one loop — target up, every backend through
//! every phase, results written as they arrive, target down.

use std::path::PathBuf;

use dlbench_core::Backend;
use tokio_util::sync::CancellationToken;

use crate::connect::{self, Timeouts};
use crate::driver::{self, PhaseOutputs, PhaseResult};
use crate::progress::PhaseProgress;
use crate::kind::BackendKind;
use crate::results::{now_rfc3339, RunDir};
use crate::summary::{self, BackendSummary, Summary};
use crate::target::local::{bins, LocalTarget};
use crate::workload::Workload;

/// Everything `run` needs, validated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunPlan {
    pub backends: Vec<BackendKind>,
    pub phases: Vec<Workload>,
    pub out: PathBuf,
    #[serde(skip)]
    pub timeouts: Timeouts,
    pub command: Vec<String>,
}

impl RunPlan {
    pub fn validate(&self) -> anyhow::Result<()> {
        for w in &self.phases {
            w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
        }
        Ok(())
    }
}

fn capabilities(b: &dyn Backend) -> Option<serde_json::Value> {
    serde_json::to_value(b.capabilities()).ok()
}

/// Run the plan; returns the process exit code.
pub async fn run(plan: RunPlan, cancel: CancellationToken) -> anyhow::Result<i32> {
    plan.validate()?;
    let real: Vec<BackendKind> = plan.backends.iter().copied().filter(|k| *k != BackendKind::Memory).collect();
    // Fail before creating anything when a server binary is missing.
    bins::find(&real)?;
    let dir = RunDir::create(&plan.out, "")?;
    dir.write_json("plan.json", &plan)?;
    let mut summary = Summary {
        schema_version: summary::SCHEMA_VERSION,
        run_id: dir.id.clone(),
        complete: false,
        started_at: now_rfc3339(),
        ended_at: None,
        command: plan.command.clone(),
        target: "local".into(),
        versions: Default::default(),
        peak_rss_mb: None,
        backends: Vec::new(),
    };
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: run {} -> {}", dir.id, dir.path.display());
    if let Some(seed) = plan.phases.first().and_then(|w| w.seed) {
        eprintln!("dlbench: seed {seed} (repeat the run with --seed {seed})");
    }

    let target = if real.is_empty() {
        None
    } else {
        eprintln!("dlbench: starting local servers for {}", names(&real));
        let t = tokio::select! {
            t = LocalTarget::start(&dir.path, &real) => t?,
            _ = cancel.cancelled() => {
                eprintln!("dlbench: interrupted while starting servers");
                return Ok(130);
            }
        };
        Some(t)
    };
    if let Some(t) = &target {
        summary.versions = t.versions().await;
        dir.write_json("summary.json", &summary)?;
    }
    let memory = dlbench_memory::MemoryBackend::new();
    let endpoints = target.as_ref().map(|t| t.endpoints().clone()).unwrap_or_default();

    for &kind in &plan.backends {
        if cancel.is_cancelled() {
            break;
        }
        let backend = match connect::connect(kind, &endpoints, plan.timeouts, Some(&memory)).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("dlbench: {kind}: cannot connect: {e}");
                summary.backends.push(BackendSummary::failed(kind.name(), e.to_string()));
                dir.write_json("summary.json", &summary)?;
                continue;
            }
        };
        let mut phases: Vec<PhaseResult> = Vec::new();
        for w in &plan.phases {
            if cancel.is_cancelled() {
                break;
            }
            eprintln!("dlbench: {kind:<9} {:<10} {}", w.name, w.describe());
            let label = format!("{kind} {}", w.name);
            let (progress, on_tick) = PhaseProgress::start(&label, w.warmup + w.duration);
            let outputs = PhaseOutputs {
                hlog: Some((dir.path.join("hdr"), format!("{kind}-{}", w.name))),
                on_tick: Some(on_tick),
            };
            let p = driver::run_phase(backend.clone(), w, &dir.id, &cancel, outputs).await;
            progress.finish();
            let p = p?;
            let ws = summary::WorkloadSummary::from_phase(&p);
            eprintln!(
                "dlbench: {kind:<9} {:<10} {:.0} acq/s, p99 {:.2} ms, {} errors, {} overlaps",
                w.name,
                ws.ops_per_sec,
                ws.acquire_latency_us.p99 as f64 / 1000.0,
                ws.errors,
                ws.overlaps
            );
            if let Some(ol) = ws.open_loop.as_ref().filter(|o| o.behind_schedule) {
                eprintln!(
                    "dlbench: {kind:<9} {:<10} WARNING: the driver fell behind its schedule: {} of {} due operations \
                     completed, free clients started them up to {:.1} ms late (p99); raise --clients or lower --rate. \
                     Latency still counts from each intended start.",
                    w.name, ol.completed, ol.scheduled, ol.schedule_lag_ms.p99
                );
            }
            phases.push(p);
            // Written after every phase, so a killed run leaves what it measured.
            let mut partial = summary.clone();
            partial.backends.push(BackendSummary::new(kind.name(), capabilities(&*backend), &phases));
            dir.write_json("summary.json", &partial)?;
        }
        summary.backends.push(BackendSummary::new(kind.name(), capabilities(&*backend), &phases));
    }

    summary.complete = !cancel.is_cancelled();
    summary.ended_at = Some(now_rfc3339());
    summary.peak_rss_mb = summary::peak_rss_mb();
    dir.write_json("summary.json", &summary)?;
    dir.write("summary.md", summary::markdown(&summary).as_bytes())?;
    drop(target); // stop the servers before printing, so the table is the last thing said
    println!("{}", summary::table(&summary));
    println!("results: {}", dir.path.join("summary.json").display());
    Ok(if summary.complete { 0 } else { 130 })
}

pub fn names(v: &[BackendKind]) -> String {
    v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}
