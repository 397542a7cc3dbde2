//! `dlbench run`: one validated plan, then one loop — target up, every backend through
//! every phase (with faults, when asked), results written as they arrive, the history
//! checked, target down.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dlbench_core::Backend;
use tokio_util::sync::CancellationToken;

use crate::checker::{self, Validity};
use crate::connect::{self, Timeouts};
use crate::driver::{self, FaultRunner, PhaseOutputs};
use crate::phase::PhaseResult;
use crate::history::HistoryWriter;
use crate::kind::BackendKind;
use crate::nemesis::{FaultKind, FaultSpec, Faults, Nemesis};
use crate::progress::PhaseProgress;
use crate::results::RunDir;
use crate::summarize::BackendAcc;
use crate::summary::{self, BackendSummary, Summary};
use crate::endpoints::Endpoints;
use crate::cluster::compose::ComposeTarget;
use crate::cluster::external::ExternalTarget;
use crate::cluster::local::{bins, LocalTarget, TargetOptions};
use crate::judgement::FencingMode;
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
    /// Each client on its own connection, or all sharing one per server.
    pub connections: dlbench_core::Connections,
    pub command: Vec<String>,
    pub nemesis: Vec<FaultSpec>,
    #[serde(with = "crate::workload::dur")]
    pub nemesis_interval: Duration,
    pub fencing: FencingMode,
    /// Stream the history (and check it at the end).
    pub history: HistoryMode,
    /// Exit 1 on an invalid verdict and 3 on an unknown one (Jepsen's convention); off for
    /// exploratory runs (`--no-fail-on-violation`).
    pub fail_on_violation: bool,
    pub target: TargetChoice,
    /// `dlbench soak`: judge the run against this goal; the soak's verdict is the exit status,
    /// and faults no backend of the target supports are dropped from the schedule instead of
    /// refused.
    pub soak: Option<crate::summary::soak::SoakGoal>,
    /// `--repeat N`: every phase N times, interleaved across backends.
    pub repeat: u32,
    /// `--shard I/N`: this process runs one shard of the plan (see `shard`).
    pub shard: Option<crate::shard::ShardSpec>,
    /// `--resource redis://...`: the protected resource in its own server (see
    /// `resource_server`); `None` keeps it in this process.
    pub resource: Option<crate::resource_server::ResourceUrl>,
    /// `--properties`: after its phases, measure each backend's expiry and reentrancy.
    pub properties: bool,
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

/// Where the servers are.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum TargetChoice {
    /// dlbench starts them (the embedded default).
    Local,
    /// The services of a docker compose project.
    Compose { project: String },
    /// Endpoints named in a file; `allow_remote` permits addresses off this machine.
    External { endpoints: PathBuf, allow_remote: bool },
}

impl TargetChoice {
    pub fn name(&self) -> &'static str {
        match self {
            TargetChoice::Local => "local",
            TargetChoice::Compose { .. } => "compose",
            TargetChoice::External { .. } => "external",
        }
    }
}

/// A target that is up.
enum Running {
    Local(Arc<LocalTarget>),
    Compose(Arc<ComposeTarget>),
    External(Arc<ExternalTarget>),
}

impl Running {
    fn endpoints(&self) -> Endpoints {
        match self {
            Running::Local(t) => t.endpoints().clone(),
            Running::Compose(t) => t.endpoints().clone(),
            Running::External(t) => t.endpoints().clone(),
        }
    }

    fn faults(&self) -> Arc<dyn Faults> {
        match self {
            Running::Local(t) => t.clone(),
            Running::Compose(t) => t.clone(),
            Running::External(t) => t.clone(),
        }
    }

    async fn versions(&self, within: Duration) -> Result<std::collections::BTreeMap<String, String>, String> {
        match self {
            Running::Local(t) => Ok(t.versions().await),
            Running::Compose(t) => crate::cluster::probe::versions(t.endpoints(), None, within).await,
            Running::External(t) => t.versions(within).await,
        }
    }
}

/// Bring the plan's target up (or find it), for the real backends in `real`.
/// The local target needs the run directory (its servers' data live there); the others are
/// found, and their files and credentials checked, before any directory is created.
async fn bring_up(plan: &RunPlan, dir: Option<&RunDir>, real: &[BackendKind]) -> anyhow::Result<Running> {
    Ok(match &plan.target {
        TargetChoice::Local => {
            let dir = dir.ok_or_else(|| anyhow::anyhow!("the local target needs its run directory"))?;
            eprintln!("dlbench: starting local servers for {}", names(real));
            Running::Local(Arc::new(LocalTarget::start(&dir.path, real, plan.target_options()).await?))
        }
        TargetChoice::Compose { project } => {
            let t = ComposeTarget::discover(project, real, plan.timeouts.connect).await?;
            let via = if t.inside() { "by name, inside its network" } else { "through its published ports" };
            eprintln!("dlbench: using compose project {} for {} ({via})", t.project(), names(real));
            Running::Compose(Arc::new(t))
        }
        TargetChoice::External { endpoints, allow_remote } => {
            let e = Endpoints::load(endpoints)?;
            let remote = e.non_loopback();
            if !remote.is_empty() && !allow_remote {
                anyhow::bail!(
                    "{} names endpoints off this machine ({}); dlbench only talks to loopback unless you pass --allow-remote",
                    endpoints.display(),
                    remote.join(", ")
                );
            }
            Running::External(Arc::new(ExternalTarget::new(e, real, plan.timeouts)?))
        }
    })
}

/// Every endpoint answers a TCP connection within the connect timeout: an unreachable
/// server is named at once instead of surfacing as a hang later.
async fn reachable(e: &Endpoints, kinds: &[BackendKind], within: Duration) -> anyhow::Result<()> {
    for &k in kinds {
        for ep in e.get(k).map(|s| s.endpoints.clone()).unwrap_or_default() {
            match tokio::time::timeout(within, tokio::net::TcpStream::connect(ep.as_str())).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => anyhow::bail!("[{k}] {ep} is unreachable: {err}"),
                Err(_) => anyhow::bail!("[{k}] {ep} did not accept a connection within {}", crate::util::fmt_duration(within)),
            }
        }
    }
    Ok(())
}

use crate::phase::quiet_tail;

/// How many faults a phase of `duration` holds whole: the nemesis waits half an interval,
/// holds a fault half an interval, and so on, until the quiet tail.
pub fn faults_that_fit(duration: Duration, interval: Duration) -> usize {
    let window = duration.saturating_sub(quiet_tail(duration));
    (window.as_secs_f64() / interval.as_secs_f64()).floor() as usize
}

/// The shortest phase (in whole seconds) that holds `n` faults one `interval` apart.
pub fn min_duration_for_faults(n: usize, interval: Duration) -> Duration {
    let mut d = Duration::from_secs((interval.as_secs_f64() * n as f64).ceil() as u64);
    while faults_that_fit(d, interval) < n {
        d += Duration::from_secs(1);
    }
    d
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
            if self.shard.is_some() {
                anyhow::bail!("--shard runs load only: faults from several load hosts at once would not be one schedule (drop --nemesis, or run it unsharded)");
            }
            if self.nemesis.iter().any(|f| f.kind == crate::nemesis::FaultKind::Partition) {
                let why: Vec<String> = self.backends.iter().filter_map(|b| b.nothing_to_partition().map(|w| format!("{b}: {w}"))).collect();
                anyhow::ensure!(
                    why.len() < self.backends.len(),
                    "--nemesis partition would do nothing here ({}): use isolate to cut a node off from its clients, or add a consensus backend (etcd, zookeeper)",
                    why.join("; ")
                );
            }
            // Every fault asked for must fit once in every phase: the nemesis cycles them from
            // the first, one every interval, and stops early enough for a recovery (a soak
            // carries the cycle on from turn to turn instead).
            if self.soak.is_none() {
                let need = min_duration_for_faults(self.nemesis.len(), self.nemesis_interval);
                if let Some(w) = self.phases.iter().find(|w| w.duration < need) {
                    let fits = faults_that_fit(w.duration, self.nemesis_interval);
                    anyhow::bail!(
                        "workload {}: --duration {} leaves room for {} of the {} faults asked ({}) at one every {}: use --duration {} or more",
                        w.name,
                        crate::util::fmt_duration(w.duration),
                        fits.min(self.nemesis.len()),
                        self.nemesis.len(),
                        self.nemesis.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", "),
                        crate::util::fmt_duration(self.nemesis_interval),
                        crate::util::fmt_duration(need)
                    );
                }
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
        if let Some(s) = &self.shard {
            let what = format!("--shard {}/{}", s.index, s.count);
            anyhow::ensure!(
                self.backends.len() == 1 && self.phases.len() == 1 && self.repeat == 1,
                "{what}: a sharded run is one backend and one workload, once (--backends X --workload Y, no --repeat or client list), so that every shard runs the same phase"
            );
            anyhow::ensure!(!matches!(self.target, TargetChoice::Local), "{what}: shards must share the servers: use --target compose or --target external --endpoints FILE");
            anyhow::ensure!(self.backends[0] != BackendKind::Memory, "{what}: the memory backend lives in one process; shards cannot share it");
            let w = &self.phases[0];
            anyhow::ensure!(w.clients >= s.count as usize, "{what}: {} client(s) cannot be spread over {} shards (--clients at least {})", w.clients, s.count, s.count);
            anyhow::ensure!(w.ops.is_none(), "{what}: --ops counts one process's operations; give --duration instead");
            s.wait()?;
            anyhow::ensure!(
                self.resource.is_none() || s.start_at.is_some(),
                "{what} --resource: give --start-at (the same in every shard): it starts the shards together and names the resource cells they share"
            );
        }
        if let Some(r) = &self.resource {
            let host = r.host();
            let near = crate::endpoints::is_loopback(&host) || (!host.contains('.') && !host.contains(':'));
            let allow = matches!(self.target, TargetChoice::External { allow_remote: true, .. });
            anyhow::ensure!(
                near || allow,
                "--resource {}: not on loopback nor a service name of the project's network; dlbench only talks to loopback unless you pass --allow-remote",
                r.shown()
            );
            anyhow::ensure!(!self.backends.contains(&BackendKind::Memory), "--resource: the memory backend is the in-process reference; run it with --resource local");
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
            password: None,
            connect_timeout: Some(self.timeouts.connect),
        }
    }
}

/// One backend's summary over its phases, each labelled with its repetition.
fn backend_summary(kind: BackendKind, backend: &dyn Backend, acc: &BackendAcc) -> BackendSummary {
    acc.summary(kind.name(), capabilities(backend)).with_connections(backend.connections())
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

/// Run the plan; returns the process exit code.
pub async fn run(plan: RunPlan, cancel: CancellationToken) -> anyhow::Result<i32> {
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
        let t = tokio::select! {
            t = bring_up(&plan, None, &real) => t?,
            _ = cancel.cancelled() => {
                eprintln!("dlbench: interrupted while finding the servers");
                return Ok(130);
            }
        };
        reachable(&t.endpoints(), &real, plan.timeouts.connect).await?;
        early = Some(t);
    }
    let dir = RunDir::create(&plan.out, "")?;
    dir.write_json("plan.json", &plan)?;
    let mut summary = Summary::begin(&dir.id, plan.target.name(), plan.fencing, plan.nemesis.iter().map(|f| f.to_string()).collect());
    summary.nemesis_interval_s = (!plan.nemesis.is_empty()).then(|| plan.nemesis_interval.as_secs_f64());
    summary.resource_server = plan.resource.as_ref().map(|r| r.shown());
    summary.command = plan.command.clone();
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: run {} -> {}", dir.id, dir.path.display());
    if let Some(seed) = plan.phases.first().and_then(|w| w.seed) {
        eprintln!("dlbench: seed {seed} (repeat the run with --seed {seed})");
    }
    // Sampled from the start, so the servers' start-up and the first phase's warm-up are seen.
    let sampler = crate::usage::Sampler::start(dir.path.join("resources.jsonl"), crate::cluster::local::process::live_processes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.path.join("resources.jsonl").display()))?;
    let history_path = dir.path.join("history.jsonl");
    let history = if plan.history_on() { Some(HistoryWriter::create(&history_path)?) } else { None };

    let target = if real.is_empty() {
        None
    } else if early.is_some() {
        early
    } else {
        let t = tokio::select! {
            t = bring_up(&plan, Some(&dir), &real) => t?,
            _ = cancel.cancelled() => {
                eprintln!("dlbench: interrupted while starting servers");
                return Ok(130);
            }
        };
        Some(t)
    };
    let endpoints = target.as_ref().map(|t| t.endpoints()).unwrap_or_default();
    if let Some(t) = &target {
        reachable(&endpoints, &real, plan.timeouts.connect).await?;
        summary.versions = t.versions(plan.timeouts.connect).await.map_err(anyhow::Error::msg)?;
        dir.write_json("summary.json", &summary)?;
        if !plan.nemesis.is_empty() {
            let (can, cannot) = crate::nemesis::capabilities(&*t.faults(), &real);
            eprintln!("dlbench: on this {} target the nemesis can inject: {}", plan.target.name(), if can.is_empty() { "nothing".into() } else { can.join(", ") });
            if !cannot.is_empty() {
                eprintln!("dlbench: it cannot inject: {}", cannot.join("; "));
            }
            for f in &plan.nemesis {
                if real.iter().all(|k| t.faults().cannot(*k, f.kind).is_some()) && plan.soak.is_none() {
                    anyhow::bail!("--nemesis {f}: {}", t.faults().cannot(real[0], f.kind).unwrap_or_default());
                }
            }
        }
    }
    let memory = dlbench_memory::MemoryBackend::new();
    // Connect everything before any load: a wrong password or a dead server stops the run
    // at once with one line, rather than after the other backends ran.
    let mut backends: Vec<(BackendKind, Arc<dyn Backend>)> = Vec::new();
    for &kind in &plan.backends {
        let b = connect::connect_with(kind, &endpoints, plan.timeouts, plan.connections, Some(&memory))
            .await
            .map_err(|e| anyhow::anyhow!("{kind}: cannot connect: {e}"))?;
        backends.push((kind, b));
    }

    // With --repeat N: every backend's phases, then again, N times (A B A B), so that slow
    // drift of the machine spreads over every backend instead of biasing one.
    let repeat = plan.repeat.max(1);
    // Each phase is folded into its backend's accumulator as it ends and then dropped.
    let mut done: Vec<(BackendKind, Arc<dyn Backend>, BackendAcc)> = backends.into_iter().map(|(k, b)| (k, b, BackendAcc::default())).collect();
    for rep in 0..repeat {
    for bi in 0..done.len() {
        let (kind, backend) = (done[bi].0, done[bi].1.clone());
        if cancel.is_cancelled() {
            break;
        }
        for w in &plan.phases {
            if cancel.is_cancelled() {
                break;
            }
            let conns = backend.connections().map(|c| format!(", connections {c}")).unwrap_or_default();
            eprintln!("dlbench: {kind:<9} {:<10} {}{conns}", w.name, w.describe());
            let label = format!("{kind} {}", w.name);
            let (progress, on_tick) = PhaseProgress::start(&label, w.warmup + w.duration);
            let faults = match (&target, plan.nemesis.is_empty()) {
                (Some(t), false) => Some(fault_runner(t.faults(), kind, w, &plan, rep, history.clone())),
                _ => None,
            };
            // A sweep runs one workload at several client counts: keep their logs apart.
            let sweep = plan.phases.iter().filter(|x| x.name == w.name).count() > 1;
            let label = if sweep { format!("{kind}-{}-c{}", w.name, w.clients) } else { format!("{kind}-{}", w.name) };
            let label = if repeat > 1 { format!("{label}-r{rep}") } else { label };
            let outputs = PhaseOutputs {
                hlog: Some((dir.path.join("hdr"), label)),
                on_tick: Some(on_tick),
                history: history.clone().map(|h| (h, kind.name().to_string())),
                faults,
                quiet_tail: None,
                cost: Some(cost_probe(target.as_ref(), kind)),
                shard: None,
                resource_server: None,
            };
            // Keys are named after the run and the workload; the phases of a sweep get keys
            // of their own, so no claim left by one phase can block the next.
            let key_scope = if sweep { format!("{}-c{}", dir.id, w.clients) } else { dir.id.clone() };
            let key_scope = if repeat > 1 { format!("{key_scope}-r{rep}") } else { key_scope };
            // A shard runs its share of the clients (and of an open loop's rate) on the keys
            // of the whole plan, from the common start.
            let (w_run, key_scope, outputs) = match plan.shard {
                Some(s) => {
                    let slice = s.slice(w.clients);
                    let next = if s.index + 1 < s.count { crate::shard::ShardSpec { index: s.index + 1, ..s }.slice(w.clients).first_client } else { w.clients };
                    let share = next - slice.first_client;
                    let w_run = Workload { clients: share, rate: w.rate.map(|r| r * share as f64 / w.clients as f64), ..w.clone() };
                    let wait = s.wait()?;
                    if !wait.is_zero() {
                        eprintln!("dlbench: shard {}/{}: {} client(s) from client {}, starting in {}", s.index, s.count, share, slice.first_client, crate::util::fmt_duration(wait));
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = cancel.cancelled() => break,
                        }
                    }
                    let scope = s.key_scope(w.seed.unwrap_or(0));
                    // The resource cells of the plan: the same for every shard, new for every start.
                    let resource_server = plan.resource.clone().map(|r| (r, format!("{scope}-{}:{kind}:{}", s.start_at.unwrap_or(0), w.name)));
                    (w_run, scope, PhaseOutputs { shard: Some(slice), resource_server, ..outputs })
                }
                None => {
                    // A phase's cells are its own, as an in-process resource is.
                    let resource_server = plan.resource.clone().map(|r| (r, format!("{key_scope}:{kind}:{}", w.name)));
                    (w.clone(), key_scope, PhaseOutputs { resource_server, ..outputs })
                }
            };
            let p = driver::run_phase(backend.clone(), &w_run, &key_scope, &cancel, outputs).await;
            progress.finish();
            let p = p?;
            if let Some(s) = plan.shard {
                let label = format!("{kind}-{}", w.name);
                let dump = crate::shard::ShardPhase::of(&p, s.slice(w.clients), kind.name(), &label, &key_scope, capabilities(&*backend), backend.connections().map(|c| c.to_string()), plan.resource.as_ref().map(|r| r.shown()));
                dir.write_json("shard.json", &dump)?;
            }
            report_phase(kind, w, &p);
            done[bi].2.add(&p, rep);
            drop(p);
            // Written after every phase, so a killed run leaves what it measured.
            let mut partial = summary.clone();
            partial.backends.extend(done.iter().filter(|d| !d.2.is_empty()).map(|d| backend_summary(d.0, &*d.1, &d.2)));
            dir.write_json("summary.json", &partial)?;
        }
    }
    }
    if plan.properties {
        for bi in 0..done.len() {
            if cancel.is_cancelled() || done[bi].2.is_empty() {
                continue;
            }
            let (kind, backend) = (done[bi].0, done[bi].1.clone());
            eprintln!("dlbench: {kind:<9} properties: expiry (holder gone, TTL {}) and reentrancy", crate::util::fmt_duration(PROPERTIES_TTL));
            let key = format!("dlbench-{}-properties-{kind}", dir.id);
            let p = tokio::select! {
                p = probe_properties(&backend, &key) => p,
                _ = cancel.cancelled() => break,
            };
            for e in &p.errors {
                eprintln!("dlbench: {kind}: {e}");
            }
            done[bi].2.properties = Some(p);
            let mut partial = summary.clone();
            partial.backends.extend(done.iter().filter(|d| !d.2.is_empty()).map(|d| backend_summary(d.0, &*d.1, &d.2)));
            dir.write_json("summary.json", &partial)?;
        }
    }
    for d in done.iter().filter(|d| !d.2.is_empty()) {
        summary.backends.push(backend_summary(d.0, &*d.1, &d.2));
    }
    // The load is over: the checking below is not part of the soak's memory curve.
    summary.resources = Some(sampler.finish());
    drop(target); // stop the servers before checking, so the table is the last thing said

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
    if let Err(e) = crate::report::render(&dir.path) {
        eprintln!("dlbench: the report could not be written: {e:#}");
    }
    println!("{}", crate::report::text::table(&summary));
    if summary.backends.iter().any(|b| b.properties.is_some()) {
        println!("{}", crate::report::text::properties_table(&summary));
    }
    for f in crate::report::text::anomalies(&summary) {
        println!("anomaly: {f}");
    }
    if summary.faults_applied() {
        println!("{}", crate::report::text::ap_cp_table(&summary));
    } else {
        // The same rule as summary.md and the page: faults skipped or shown to do nothing.
        println!("{}\n", crate::judgement::no_class(summary.faults_without_effect()));
    }
    if let Some(r) = &summary.resources {
        println!("{}", crate::usage::line(r));
    }
    println!("results: {}", dir.path.join("summary.json").display());
    if !summary.complete {
        return Ok(130);
    }
    if let Some(o) = &summary.soak {
        // A soak judges the harness over hours; the locks' verdicts are in the table above.
        println!("{}", crate::soak::line(o, summary.resources.as_ref()));
        return Ok(if o.passed { 0 } else { 1 });
    }
    let worst = summary.worst();
    if worst != Validity::Valid {
        let what = if worst == Validity::Invalid { "invalid" } else { "unknown" };
        if plan.fail_on_violation {
            eprintln!("dlbench: verdict {what} (see the table and checks.json); exit {}", crate::judgement::exit_code(worst));
            return Ok(crate::judgement::exit_code(worst));
        }
        eprintln!("dlbench: verdict {what}; exit 0 because of --no-fail-on-violation");
    }
    Ok(0)
}


fn report_phase(kind: BackendKind, w: &Workload, p: &PhaseResult) {
    let ws = crate::summarize::workload(p);
    eprintln!(
        "dlbench: {kind:<9} {:<10} {:.0} acq/s, p99 {}, {} errors, {} overlaps",
        w.name,
        ws.ops_per_sec,
        crate::stats::fmt_latency(ws.acquire_latency_us.p99),
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


pub fn names(v: &[BackendKind]) -> String {
    v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}
