//! `dlbench run`: one validated plan, then one loop — target up, every backend through
//! every phase (with faults, when asked), results written as they arrive, the history
//! checked, target down. The run returns what it found ([`Finished`]); the command line
//! renders and prints it (`cli/output.rs`).
//!
//! - `plan.rs`: the plan and its rules;
//! - `target.rs`: the target once it is up;
//! - here: the run's steps, in the order they happen.

mod plan;
mod scaled;
mod settings;
mod target;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dlbench_core::Backend;
use tokio_util::sync::CancellationToken;

use std::collections::BTreeMap;

use crate::checker;
use crate::connect;
use crate::durability::{self, Durability};
use crate::driver::{self, FaultRunner, PhaseOutputs};
use crate::endpoints::Endpoints;
use crate::history::HistoryWriter;
use crate::kind::BackendKind;
use crate::nemesis::{Faults, Nemesis};
use crate::phase::PhaseResult;
use crate::progress::PhaseProgress;
use crate::results::RunDir;
use crate::summarize::BackendAcc;
use crate::summary::{self, BackendSummary, Summary};
use crate::cluster::local::bins;
use crate::workload::Workload;

pub use plan::{HistoryMode, Preset, RunPlan, TargetChoice};
pub use settings::{Use, PHASE_FIELDS, PLAN_FIELDS};
use target::{bring_up, reachable, Running};

/// A run that ended (complete, or cut short after its directory existed): its summary, with
/// the verdicts attached, and where its result set is.
pub struct Finished {
    pub summary: Summary,
    pub dir: PathBuf,
    /// The plan's `--no-fail-on-violation`, inverted: whether a bad verdict is the exit status.
    pub fail_on_violation: bool,
}

/// One backend's accumulated phases.
type Done = Vec<(BackendKind, Arc<dyn Backend>, BackendAcc)>;

/// What every step of a run reads: the plan, where it writes, the target, the history.
struct Ctx<'a> {
    plan: &'a RunPlan,
    dir: &'a RunDir,
    /// The summary's head (no backends yet): each partial write adds the backends so far.
    head: &'a Summary,
    /// The backends measured at the levels before this one (several `--durability` levels).
    earlier: &'a [BackendSummary],
    target: Option<&'a Running>,
    history: Option<HistoryWriter>,
    cancel: &'a CancellationToken,
    repeat: u32,
    /// This pass's level when the run has several (results go under `design@level`).
    level: Option<Durability>,
    /// Each design's durability as set (local) or found (compose, external).
    durability: &'a BTreeMap<BackendKind, durability::Recorded>,
}

impl Ctx<'_> {
    /// The name `kind`'s results go under in this pass.
    fn name(&self, kind: BackendKind) -> String {
        durability::keyed(kind.name(), self.level)
    }
}

/// The TTL the `--properties` expiry probe gives its holder (the scenarios' TTL).
pub const PROPERTIES_TTL: Duration = Duration::from_secs(3);

/// Expiry and reentrancy of one backend ([`dlbench_core::probe`]), on keys of its own.
async fn probe_properties(backend: &Arc<dyn Backend>, key: &str) -> summary::Properties {
    use dlbench_core::probe;
    let mut errors = Vec::new();
    let expiry_ms = match probe::expiry(backend, &format!("{key}-expiry"), PROPERTIES_TTL).await {
        Ok(d) => Some(d.as_millis() as u64),
        Err(e) => {
            errors.push(format!("expiry: {e}"));
            None
        }
    };
    let reentrancy = match probe::reentrancy(backend, &format!("{key}-reentry")).await {
        Ok(r) => Some(r.to_string()),
        Err(e) => {
            errors.push(format!("reentrancy: {e}"));
            None
        }
    };
    summary::Properties { ttl_ms: PROPERTIES_TTL.as_millis() as u64, expiry_ms, reentrancy, errors }
}

/// Run the plan. `None`: interrupted before the servers were up, nothing to report.
pub async fn run(plan: RunPlan, cancel: CancellationToken) -> anyhow::Result<Option<Finished>> {
    plan.validate()?;
    let real: Vec<BackendKind> = plan.backends.iter().copied().filter(|k| *k != BackendKind::Memory).collect();
    // Fail before creating anything when a server binary is missing.
    if matches!(plan.target, TargetChoice::Local) {
        bins::find(&real)?;
    }
    // An external or compose target is found and checked (endpoints file, credentials,
    // reachability) before the run directory exists or `latest` moves: a configuration
    // error leaves nothing behind.
    let mut early = None;
    if !real.is_empty() && !matches!(plan.target, TargetChoice::Local) {
        let Some(t) = interruptible(&cancel, "finding the servers", bring_up(&plan, None, &real, None)).await? else {
            return Ok(None);
        };
        reachable(&t.endpoints(), &real, plan.timeouts.connect).await?;
        early = Some(t);
    }
    let (dir, mut summary) = begin(&plan)?;
    // Sampled from the start, so the servers' start-up and the first phase's warm-up are seen.
    let sampler = crate::usage::Sampler::start(dir.path.join("resources.jsonl"), crate::cluster::local::process::live_processes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.path.join("resources.jsonl").display()))?;
    let history_path = dir.path.join("history.jsonl");
    let history = if plan.history_on() { Some(HistoryWriter::create(&history_path)?) } else { None };

    let memory = dlbench_memory::MemoryBackend::new();
    if !levels(&plan, &dir, &mut summary, early, &real, &history, &cancel, &memory).await? {
        return Ok(None);
    }
    // The load is over: the checking below is not part of the soak's memory curve.
    summary.resources = Some(sampler.finish());

    let verdicts = match &history {
        Some(h) => {
            h.close()?;
            let v = checker::check_file(&history_path)?;
            dir.write_json("checks.json", &v)?;
            v
        }
        None => Vec::new(),
    };
    summary.attach_checks(&verdicts, plan.fencing);
    summary.finish(!cancel.is_cancelled());
    if let Some(goal) = plan.soak {
        summary.soak = Some(crate::soak::judge_summary(&summary, summary.resources.as_ref(), goal));
    }
    dir.write_json("summary.json", &summary)?;
    Ok(Some(Finished { summary, dir: dir.path.clone(), fail_on_violation: plan.fail_on_violation }))
}

/// Every backend through every phase, once per durability level when the plan has several
/// (fresh local servers for each), else once on the plan's target. `false`: interrupted
/// before the first servers were up, nothing to report.
#[allow(clippy::too_many_arguments)]
async fn levels(
    plan: &RunPlan,
    dir: &RunDir,
    summary: &mut Summary,
    mut early: Option<Running>,
    real: &[BackendKind],
    history: &Option<HistoryWriter>,
    cancel: &CancellationToken,
    memory: &dlbench_memory::MemoryBackend,
) -> anyhow::Result<bool> {
    let levels: Vec<Option<Durability>> = if plan.durability.len() > 1 { plan.durability.iter().map(|l| Some(*l)).collect() } else { vec![None] };
    for (i, level) in levels.into_iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let target = if real.is_empty() || early.is_some() {
            early.take()
        } else {
            if let Some(l) = level {
                eprintln!("dlbench: durability {l}: fresh servers");
            }
            let Some(t) = interruptible(cancel, "starting servers", bring_up(plan, Some(dir), real, level)).await? else {
                if i == 0 {
                    return Ok(false);
                }
                break;
            };
            Some(t)
        };
        if let Some(t) = &target {
            if i == 0 {
                ready(plan, dir, summary, t, real).await?;
            } else {
                reachable(&t.endpoints(), real, plan.timeouts.connect).await?;
            }
        }
        // After `ready`: a silent server is refused there, within one connect timeout.
        let found = durability_of(plan, target.as_ref(), level).await;
        let earlier = std::mem::take(&mut summary.backends);
        let ctx = Ctx { plan, dir, head: &*summary, earlier: &earlier, target: target.as_ref(), history: history.clone(), cancel, repeat: plan.repeat.max(1), level, durability: &found };
        let measured = pass(&ctx, memory).await;
        summary.backends = earlier;
        summary.backends.extend(measured?);
        drop(target); // stop the servers before checking (and before the next level's)
    }
    Ok(true)
}

/// `step` unless the user interrupts it first (then `None`, and a line saying what was cut).
async fn interruptible<T>(cancel: &CancellationToken, doing: &str, step: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<Option<T>> {
    tokio::select! {
        t = step => t.map(Some),
        _ = cancel.cancelled() => {
            eprintln!("dlbench: interrupted while {doing}");
            Ok(None)
        }
    }
}

/// The run directory, its plan.json, and the summary's head, written at once.
fn begin(plan: &RunPlan) -> anyhow::Result<(RunDir, Summary)> {
    let dir = RunDir::create(&plan.out, "")?;
    dir.write_json("plan.json", plan)?;
    let mut summary = Summary::begin(&dir.id, plan.target.name(), plan.fencing, plan.nemesis.iter().map(|f| f.to_string()).collect());
    summary.nemesis_interval_s = (!plan.nemesis.is_empty()).then(|| plan.nemesis_interval.as_secs_f64());
    summary.resource_server = plan.resource.as_ref().map(|r| r.shown());
    summary.command = plan.command.clone();
    summary.plan_settings = plan.settings();
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: run {} -> {}", dir.id, dir.path.display());
    if let Some(seed) = plan.phases.first().and_then(|w| w.seed) {
        eprintln!("dlbench: seed {seed} (repeat the run with --seed {seed})");
    }
    Ok((dir, summary))
}

/// Each design's durability in this pass: the level's settings on the local target (the
/// plan's one level, or this pass's), the settings found on a compose or external target's
/// servers. Printed as the plan's durability lines.
async fn durability_of(plan: &RunPlan, target: Option<&Running>, level: Option<Durability>) -> BTreeMap<BackendKind, durability::Recorded> {
    let level = level.unwrap_or_else(|| plan.durability.first().copied().unwrap_or_default());
    let mut out = BTreeMap::new();
    for &k in plan.backends.iter().filter(|k| **k != BackendKind::Memory) {
        let r = match target {
            Some(t) if !matches!(t, Running::Local(_)) => t.durability_found(k, plan.timeouts.connect).await,
            _ => durability::settings(k, level).record(),
        };
        eprintln!("dlbench: durability {}", r.label);
        out.insert(k, r);
    }
    out
}

/// The target answers, its versions are recorded, and the nemesis can inject what was asked.
async fn ready(plan: &RunPlan, dir: &RunDir, summary: &mut Summary, t: &Running, real: &[BackendKind]) -> anyhow::Result<()> {
    let endpoints = &t.endpoints();
    reachable(endpoints, real, plan.timeouts.connect).await?;
    summary.versions = t.versions(plan.timeouts.connect).await.map_err(anyhow::Error::msg)?;
    if !matches!(plan.target, TargetChoice::External { .. }) {
        eprintln!("dlbench: timing the target's round trips and fsync (a few seconds)");
    }
    summary.target_costs = t.target_costs(real, &dir.path).await;
    dir.write_json("summary.json", summary)?;
    if plan.nemesis.is_empty() {
        return Ok(());
    }
    let asked: Vec<crate::nemesis::FaultKind> = plan.nemesis.iter().map(|f| f.kind).collect();
    let (can, cannot) = crate::nemesis::capabilities(&*t.faults(), real, &asked);
    eprintln!("dlbench: on this {} target the nemesis can inject: {}", plan.target.name(), if can.is_empty() { "nothing".into() } else { can.join(", ") });
    if !cannot.is_empty() {
        eprintln!("dlbench: it cannot inject {} asked for: {}", if cannot.len() == 1 { "a fault" } else { "faults" }, cannot.join("; "));
    }
    for l in crate::nemesis::skipped_where(&*t.faults(), real, &asked) {
        eprintln!("dlbench: {l}");
    }
    for f in &plan.nemesis {
        if real.iter().all(|k| t.faults().cannot(*k, f.kind).is_some()) && plan.soak.is_none() {
            anyhow::bail!("--nemesis {f}: {}", t.faults().cannot(real[0], f.kind).unwrap_or_default());
        }
    }
    Ok(())
}

/// Connect everything before any load: a wrong password or a dead server stops the run
/// at once with one line, rather than after the other backends ran.
async fn connect_all(plan: &RunPlan, endpoints: &Endpoints, memory: &dlbench_memory::MemoryBackend) -> anyhow::Result<Vec<(BackendKind, Arc<dyn Backend>)>> {
    let mut backends = Vec::new();
    for &kind in &plan.backends {
        let b = connect::connect_with(kind, endpoints, plan.timeouts, plan.connections, Some(memory))
            .await
            .map_err(|e| anyhow::anyhow!("{kind}: cannot connect: {e}"))?;
        backends.push((kind, b));
    }
    Ok(backends)
}

/// One pass: connect every backend, run its phases (and `--properties`), and return the
/// backends' summaries, named for this pass's level when the run has several.
async fn pass(ctx: &Ctx<'_>, memory: &dlbench_memory::MemoryBackend) -> anyhow::Result<Vec<BackendSummary>> {
    let endpoints = ctx.target.map(|t| t.endpoints()).unwrap_or_default();
    let mut done: Done = connect_all(ctx.plan, &endpoints, memory).await?.into_iter().map(|(k, b)| (k, b, BackendAcc::default())).collect();
    phases(ctx, &mut done).await?;
    if ctx.plan.properties {
        properties(ctx, &mut done).await?;
    }
    Ok(done.iter().filter(|d| !d.2.is_empty()).map(|d| backend_summary(ctx, d.0, &*d.1, &d.2)).collect())
}

/// Every backend through every phase. With --repeat N: every backend's phases, then again,
/// N times (A B A B), so that slow drift of the machine spreads over every backend instead
/// of biasing one. Each phase is folded into its backend's accumulator as it ends and then
/// dropped; summary.json is written after every phase, so a killed run leaves what it measured.
async fn phases(ctx: &Ctx<'_>, done: &mut Done) -> anyhow::Result<()> {
    for rep in 0..ctx.repeat {
        for bi in 0..done.len() {
            let (kind, backend) = (done[bi].0, done[bi].1.clone());
            if ctx.cancel.is_cancelled() {
                break;
            }
            for w in &ctx.plan.phases {
                if ctx.cancel.is_cancelled() {
                    break;
                }
                let Some(p) = phase(ctx, rep, kind, &backend, w).await? else { break };
                report_phase(&ctx.name(kind), w, &p);
                done[bi].2.add(&p, rep);
                drop(p);
                write_partial(ctx, done)?;
            }
        }
    }
    Ok(())
}

/// summary.json as far as the run got.
fn write_partial(ctx: &Ctx<'_>, done: &Done) -> anyhow::Result<()> {
    let mut partial = ctx.head.clone();
    partial.backends = ctx.earlier.to_vec();
    partial.backends.extend(done.iter().filter(|d| !d.2.is_empty()).map(|d| backend_summary(ctx, d.0, &*d.1, &d.2)));
    ctx.dir.write_json("summary.json", &partial)?;
    Ok(())
}

/// One phase of one backend. `None`: interrupted while a shard waited for its start.
async fn phase(ctx: &Ctx<'_>, rep: u32, kind: BackendKind, backend: &Arc<dyn Backend>, w: &Workload) -> anyhow::Result<Option<PhaseResult>> {
    let plan = ctx.plan;
    let name = ctx.name(kind);
    let conns = backend.connections().map(|c| format!(", connections {c}")).unwrap_or_default();
    eprintln!("dlbench: {name:<9} {:<10} {}{conns}", w.name, w.describe());
    let label = format!("{name} {}", w.name);
    let (progress, on_tick) = PhaseProgress::start(&label, w.warmup + w.duration);
    let faults = match (ctx.target, !plan.faulted(w)) {
        (Some(t), false) => Some(fault_runner(t.faults(), kind, w, plan, rep, ctx.history.clone())),
        _ => None,
    };
    // A sweep runs one workload at several client counts: keep their logs apart.
    let sweep = plan.phases.iter().filter(|x| x.name == w.name).count() > 1;
    let label = if sweep { format!("{name}-{}-c{}", w.name, w.clients) } else { format!("{name}-{}", w.name) };
    let label = if ctx.repeat > 1 { format!("{label}-r{rep}") } else { label };
    let outputs = PhaseOutputs {
        hlog: Some((ctx.dir.path.join("hdr"), label)),
        on_tick: Some(on_tick),
        history: ctx.history.clone().map(|h| (h, name.clone())),
        quiet_tail: plan.faulted(w).then(|| plan.fault_layout(kind, w).tail(w.duration)),
        recovery_allowance: Some(kind.recovery_allowance()),
        faults,
        cost: Some(cost_probe(ctx.target, kind)),
        shard: None,
        resource_server: None,
    };
    // Keys are named after the run and the workload; the phases of a sweep get keys
    // of their own, so no claim left by one phase can block the next.
    let key_scope = if sweep { format!("{}-c{}", ctx.dir.id, w.clients) } else { ctx.dir.id.clone() };
    let key_scope = if ctx.repeat > 1 { format!("{key_scope}-r{rep}") } else { key_scope };
    let key_scope = match ctx.level {
        Some(l) => format!("{key_scope}-{l}"),
        None => key_scope,
    };
    let (w_run, key_scope, outputs) = match plan.shard {
        Some(s) => match shard_share(ctx, s, kind, w, outputs).await? {
            Some(share) => share,
            None => return Ok(None),
        },
        None => {
            // A phase's cells are its own, as an in-process resource is.
            let resource_server = plan.resource.clone().map(|r| (r, format!("{key_scope}:{name}:{}", w.name)));
            (w.clone(), key_scope, PhaseOutputs { resource_server, ..outputs })
        }
    };
    let p = driver::run_phase(backend.clone(), &w_run, &key_scope, ctx.cancel, outputs).await;
    progress.finish();
    let p = p?;
    if let Some(s) = plan.shard {
        let label = format!("{kind}-{}", w.name);
        let dump = crate::shard::ShardPhase::of(&p, s.slice(w.clients), kind.name(), &label, &key_scope, capabilities(&**backend), backend.connections().map(|c| c.to_string()), plan.resource.as_ref().map(|r| r.shown()));
        ctx.dir.write_json("shard.json", &dump)?;
    }
    Ok(Some(p))
}

/// A shard runs its share of the clients (and of an open loop's rate) on the keys of the
/// whole plan, from the common start. `None`: interrupted while waiting for that start.
async fn shard_share(ctx: &Ctx<'_>, s: crate::shard::ShardSpec, kind: BackendKind, w: &Workload, outputs: PhaseOutputs) -> anyhow::Result<Option<(Workload, String, PhaseOutputs)>> {
    let slice = s.slice(w.clients);
    let next = if s.index + 1 < s.count { crate::shard::ShardSpec { index: s.index + 1, ..s }.slice(w.clients).first_client } else { w.clients };
    let share = next - slice.first_client;
    let w_run = Workload { clients: share, rate: w.rate.map(|r| r * share as f64 / w.clients as f64), ..w.clone() };
    let wait = s.wait()?;
    if !wait.is_zero() {
        eprintln!("dlbench: shard {}/{}: {} client(s) from client {}, starting in {}", s.index, s.count, share, slice.first_client, crate::util::fmt_duration(wait));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = ctx.cancel.cancelled() => return Ok(None),
        }
    }
    let scope = s.key_scope(w.seed.unwrap_or(0));
    // The resource cells of the plan: the same for every shard, new for every start.
    let resource_server = ctx.plan.resource.clone().map(|r| (r, format!("{scope}-{}:{kind}:{}", s.start_at.unwrap_or(0), w.name)));
    Ok(Some((w_run, scope, PhaseOutputs { shard: Some(slice), resource_server, ..outputs })))
}

/// After its phases, each backend's expiry and reentrancy (`--properties`).
async fn properties(ctx: &Ctx<'_>, done: &mut Done) -> anyhow::Result<()> {
    for bi in 0..done.len() {
        if ctx.cancel.is_cancelled() || done[bi].2.is_empty() {
            continue;
        }
        let (kind, backend) = (done[bi].0, done[bi].1.clone());
        let kind = ctx.name(kind);
        eprintln!("dlbench: {kind:<9} properties: expiry (holder gone, TTL {}) and reentrancy", crate::util::fmt_duration(PROPERTIES_TTL));
        let key = format!("dlbench-{}-properties-{kind}", ctx.dir.id);
        let p = tokio::select! {
            p = probe_properties(&backend, &key) => p,
            _ = ctx.cancel.cancelled() => break,
        };
        for e in &p.errors {
            eprintln!("dlbench: {kind}: {e}");
        }
        done[bi].2.properties = Some(p);
        write_partial(ctx, done)?;
    }
    Ok(())
}

/// One backend's summary over its phases, each labelled with its repetition, with the
/// durability it ran with.
fn backend_summary(ctx: &Ctx<'_>, kind: BackendKind, backend: &dyn Backend, acc: &BackendAcc) -> BackendSummary {
    let mut b = acc.summary(&ctx.name(kind), capabilities(backend)).with_connections(backend.connections());
    b.durability = ctx.durability.get(&kind).cloned();
    b
}

fn capabilities(b: &dyn Backend) -> Option<serde_json::Value> {
    serde_json::to_value(b.capabilities()).ok()
}

/// The faults of one phase: a nemesis over `kind`'s nodes, recording into the history.
/// A soak's later rounds carry on the fault cycle where the backend's previous turn left
/// it (`round` x the faults a turn holds), so short turns still see every fault; a run's
/// repeats start it afresh, to stay alike.
fn fault_runner(target: Arc<dyn Faults>, kind: BackendKind, w: &Workload, plan: &RunPlan, round: u32, history: Option<HistoryWriter>) -> FaultRunner {
    let mut schedule = plan.nemesis.clone();
    if plan.soak.is_some() && !schedule.is_empty() {
        let per_turn = ((w.warmup + w.duration).as_secs_f64() / plan.nemesis_interval.as_secs_f64()).floor().max(1.0) as usize;
        let len = schedule.len();
        schedule.rotate_left(round as usize * per_turn % len);
    }
    let layout = plan.fault_layout(kind, w);
    let (workload, ttl) = (w.name.clone(), w.ttl);
    // A soak carries its cycle on from turn to turn through turns too short to hold a fault
    // with its room, so it is not bound by the phase's fault stop (its load's end stops it).
    let bounded = plan.soak.is_none();
    Box::new(move |epoch, stop, until| {
        let until = if bounded { until } else { until + Duration::from_secs(365 * 24 * 3600) };
        Box::pin(async move {
            let n = Nemesis::new(target, kind, ttl, &workload, epoch, history);
            let r = n.run(&schedule, layout.interval, layout.room, stop, until).await;
            r.map_err(|e| anyhow::anyhow!("{kind}: could not heal after faults: {e}"))?;
            Ok(n.events())
        })
    })
}

/// The cost probe of one backend's phases: its servers' CPU and counters on the local
/// target (whose server PIDs dlbench owns), dlbench's own CPU everywhere.
fn cost_probe(target: Option<&Running>, kind: BackendKind) -> crate::cost::CostProbe {
    match target {
        Some(Running::Local(t)) if kind != BackendKind::Memory && !t.nodes_of(kind).is_empty() => {
            let servers = crate::cost::LocalServers {
                kind,
                addrs: t.nodes_of(kind).iter().filter(|n| !n.replica).map(|n| n.real_addr.clone()).collect(),
                password: t.password().map(str::to_string),
            };
            let t = t.clone();
            let pids: Arc<dyn Fn() -> Vec<i32> + Send + Sync> = Arc::new(move || t.nodes_of(kind).iter().filter_map(|n| n.pid()).collect());
            crate::cost::probe(Some((servers, pids)))
        }
        _ => crate::cost::probe(None),
    }
}

fn report_phase(kind: &str, w: &Workload, p: &PhaseResult) {
    let ws = crate::summarize::workload(p);
    eprintln!(
        "dlbench: {kind:<9} {:<10} {:.0} acq/s, p99 {}, {} errors, {} overlaps",
        w.name,
        ws.ops_per_sec,
        match ws.acquire_latency_us.at(crate::stats::Quantile::P99) {
            Some(p99) => crate::stats::fmt_latency(p99),
            None => format!("- (n={})", ws.acquire_latency_us.count),
        },
        ws.errors,
        ws.counts.overlaps
    );
    if let Some(ol) = ws.open_loop.as_ref().filter(|o| o.behind_schedule) {
        eprintln!(
            "dlbench: {kind:<9} {:<10} WARNING: the driver fell behind its schedule: {} of {} due operations \
             completed, free clients started them up to {:.1} ms late (p99); raise --clients or lower --rate. \
             Latency still counts from each intended start.",
            w.name, ol.completed, ol.scheduled, ol.schedule_lag_ms.p99
        );
    }
}
