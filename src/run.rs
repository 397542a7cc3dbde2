//! `dlbench run`: one validated plan, then one loop — target up, every backend through
//! every phase (with faults, when asked), results written as they arrive, the history
//! checked, target down.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dlbench_core::Backend;
use tokio_util::sync::CancellationToken;

use crate::checker::{self, SegmentVerdict};
use crate::connect::{self, Timeouts};
use crate::driver::{self, FaultRunner, PhaseOutputs, PhaseResult};
use crate::history::{self, HistoryWriter};
use crate::kind::BackendKind;
use crate::nemesis::{FaultKind, FaultSpec, Nemesis};
use crate::progress::PhaseProgress;
use crate::results::RunDir;
use crate::summary::{self, BackendSummary, Summary};
use crate::target::local::{bins, LocalTarget, TargetOptions};
use crate::verdict::FencingMode;
use crate::workload::Workload;

/// Whether a run keeps its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HistoryMode {
    Auto,
    On,
    Off,
}

/// Everything `run` needs, validated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunPlan {
    pub backends: Vec<BackendKind>,
    pub phases: Vec<Workload>,
    pub out: PathBuf,
    #[serde(skip)]
    pub timeouts: Timeouts,
    pub command: Vec<String>,
    pub nemesis: Vec<FaultSpec>,
    #[serde(with = "crate::workload::dur")]
    pub nemesis_interval: Duration,
    pub fencing: FencingMode,
    /// Stream the history (and check it at the end).
    pub history: HistoryMode,
}

impl RunPlan {
    pub fn validate(&self) -> anyhow::Result<()> {
        for w in &self.phases {
            w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
        }
        if !self.nemesis.is_empty() {
            if self.backends.contains(&BackendKind::Memory) {
                anyhow::bail!("--nemesis acts on server nodes; the memory backend has none (drop it from --backends)");
            }
            if self.nemesis_interval < Duration::from_secs(2) {
                anyhow::bail!("--nemesis-interval must be at least 2s");
            }
            let short = self.phases.iter().find(|w| w.duration < self.nemesis_interval * 2);
            if let Some(w) = short {
                anyhow::bail!(
                    "workload {} lasts {}, too short for faults every {}: use --duration of at least twice --nemesis-interval",
                    w.name,
                    crate::util::fmt_duration(w.duration),
                    crate::util::fmt_duration(self.nemesis_interval)
                );
            }
        }
        Ok(())
    }

    /// `auto` keeps a history for the servers and not for the memory backend, whose
    /// hundreds of thousands of operations a second would make gigabytes of it.
    pub fn history_on(&self) -> bool {
        match self.history {
            HistoryMode::On => true,
            HistoryMode::Off => false,
            HistoryMode::Auto => !self.backends.contains(&BackendKind::Memory),
        }
    }

    /// What the target must offer for this plan's faults.
    pub fn target_options(&self) -> TargetOptions {
        let has = |k: FaultKind| self.nemesis.iter().any(|f| f.kind == k);
        TargetOptions {
            proxies: has(FaultKind::Partition) || has(FaultKind::Isolate) || has(FaultKind::Delay) || has(FaultKind::Failover),
            clock_shim: has(FaultKind::Clock),
            redis_replica: has(FaultKind::Failover),
        }
    }
}

fn capabilities(b: &dyn Backend) -> Option<serde_json::Value> {
    serde_json::to_value(b.capabilities()).ok()
}

/// The faults of one phase: a nemesis over `kind`'s nodes, recording into the history.
fn fault_runner(target: &Arc<LocalTarget>, kind: BackendKind, w: &Workload, plan: &RunPlan, history: Option<HistoryWriter>) -> FaultRunner {
    let target = target.clone();
    let schedule = plan.nemesis.clone();
    let interval = plan.nemesis_interval;
    let workload = w.name.clone();
    Box::new(move |epoch, stop| {
        Box::pin(async move {
            let n = Nemesis::new(target, kind, &workload, epoch, history);
            let r = n.run(&schedule, interval, stop).await;
            r.map_err(|e| anyhow::anyhow!("{kind}: could not heal after faults: {e}"))?;
            Ok(n.events())
        })
    })
}

/// Run the plan; returns the process exit code.
pub async fn run(plan: RunPlan, cancel: CancellationToken) -> anyhow::Result<i32> {
    plan.validate()?;
    let real: Vec<BackendKind> = plan.backends.iter().copied().filter(|k| *k != BackendKind::Memory).collect();
    // Fail before creating anything when a server binary is missing.
    bins::find(&real)?;
    let dir = RunDir::create(&plan.out, "")?;
    dir.write_json("plan.json", &plan)?;
    let mut summary = Summary::begin(&dir.id, "local", plan.fencing, plan.nemesis.iter().map(|f| f.to_string()).collect());
    summary.command = plan.command.clone();
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: run {} -> {}", dir.id, dir.path.display());
    if let Some(seed) = plan.phases.first().and_then(|w| w.seed) {
        eprintln!("dlbench: seed {seed} (repeat the run with --seed {seed})");
    }
    let history_path = dir.path.join("history.jsonl");
    let history = if plan.history_on() { Some(HistoryWriter::create(&history_path)?) } else { None };

    let target = if real.is_empty() {
        None
    } else {
        eprintln!("dlbench: starting local servers for {}", names(&real));
        let t = tokio::select! {
            t = LocalTarget::start(&dir.path, &real, plan.target_options()) => t?,
            _ = cancel.cancelled() => {
                eprintln!("dlbench: interrupted while starting servers");
                return Ok(130);
            }
        };
        Some(Arc::new(t))
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
            let faults = match (&target, plan.nemesis.is_empty()) {
                (Some(t), false) => Some(fault_runner(t, kind, w, &plan, history.clone())),
                _ => None,
            };
            // A sweep runs one workload at several client counts: keep their logs apart.
            let sweep = plan.phases.iter().filter(|x| x.name == w.name).count() > 1;
            let label = if sweep { format!("{kind}-{}-c{}", w.name, w.clients) } else { format!("{kind}-{}", w.name) };
            let outputs = PhaseOutputs {
                hlog: Some((dir.path.join("hdr"), label)),
                on_tick: Some(on_tick),
                history: history.clone().map(|h| (h, kind.name().to_string())),
                faults,
            };
            let p = driver::run_phase(backend.clone(), w, &dir.id, &cancel, outputs).await;
            progress.finish();
            let p = p?;
            report_phase(kind, w, &p);
            phases.push(p);
            // Written after every phase, so a killed run leaves what it measured.
            let mut partial = summary.clone();
            partial.backends.push(BackendSummary::new(kind.name(), capabilities(&*backend), &phases));
            dir.write_json("summary.json", &partial)?;
        }
        summary.backends.push(BackendSummary::new(kind.name(), capabilities(&*backend), &phases));
    }
    drop(target); // stop the servers before checking, so the table is the last thing said

    if let Some(h) = &history {
        h.close()?;
        let verdicts = check_history(&history_path)?;
        attach(&mut summary, &verdicts, plan.fencing, !plan.nemesis.is_empty());
        dir.write_json("checks.json", &verdicts)?;
    }
    summary.finish(!cancel.is_cancelled());
    dir.write_json("summary.json", &summary)?;
    if let Err(e) = crate::report::render(&dir.path) {
        eprintln!("dlbench: the report could not be written: {e:#}");
    }
    println!("{}", summary::table(&summary));
    if !plan.nemesis.is_empty() || plan.fencing != FencingMode::Both {
        println!("{}", summary::ap_cp_table(&summary));
    }
    println!("results: {}", dir.path.join("summary.json").display());
    Ok(if summary.complete { 0 } else { 130 })
}

fn report_phase(kind: BackendKind, w: &Workload, p: &PhaseResult) {
    let ws = summary::WorkloadSummary::from_phase(p);
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
            "dlbench: {kind:<9} {:<10} WARNING: the driver fell behind its schedule: {} of {} due operations \\
             completed, free clients started them up to {:.1} ms late (p99); raise --clients or lower --rate. \\
             Latency still counts from each intended start.",
            w.name, ol.completed, ol.scheduled, ol.schedule_lag_ms.p99
        );
    }
}

/// Check every segment of a history file.
pub fn check_history(path: &std::path::Path) -> anyhow::Result<Vec<SegmentVerdict>> {
    let mut out = Vec::new();
    history::for_each_segment(path, |s| out.push(checker::check(&s)))?;
    Ok(out)
}

/// Hand each backend its segments' verdicts, in phase order.
pub fn attach(summary: &mut Summary, verdicts: &[SegmentVerdict], mode: FencingMode, faults: bool) {
    for b in &mut summary.backends {
        let mine: Vec<SegmentVerdict> = verdicts.iter().filter(|v| v.backend == b.name).cloned().collect();
        b.attach_checks(&mine, mode, faults);
    }
}

pub fn names(v: &[BackendKind]) -> String {
    v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}
