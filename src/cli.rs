//! Command-line parsing and the process-level plumbing: logging, signals, exit codes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::connect::Timeouts;
use crate::kind::{self, BackendKind};
use crate::run::{HistoryMode, RunPlan, TargetChoice};
use crate::util::parse_duration;
use crate::verdict::FencingMode;
use crate::workload::{self, Dist, KeyDist, Overrides, Workload};

#[derive(Parser, Debug)]
#[command(name = "dlbench", version, about = "Benchmark and safety-test distributed locks on real servers")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the servers, run the workload on each backend, print the table.
    Run(RunArgs),
    /// Start the local target and keep it running until Ctrl-C.
    Up(UpArgs),
    /// Hold lock NAME while a command runs (like `etcdctl lock NAME -- CMD`).
    Lock(LockArgs),
    /// Re-run the checkers over a history offline. Exit 0 valid, 1 invalid, 3 unknown.
    Check(CheckArgs),
    /// Regenerate summary.md, the plots and report.html of a run directory (also of an
    /// interrupted run, from what it recorded).
    Report(ReportArgs),
    /// Compare two runs (directories or summary.json files) per backend and metric; exit 1
    /// on a regression. Default thresholds (relative change that counts): ops_per_sec 25%,
    /// acquire_p50_us 30%, acquire_p99_us 50%, acquire_p999_us 100%, release_p99_us 50%,
    /// handoff_p50_us 50%, errors 100% (and at least 10), availability_pct 5 points,
    /// longest_gap_ms 50%, recovery_ms 50%. Any new overlap or lost update, or a safety
    /// verdict turning worse, always fails.
    Compare(CompareArgs),
    /// Print the JSON Schema of summary.json (committed as schema/summary.schema.json).
    Schema,
    /// Run failure scenarios from the catalogue (S1-S10, or all) and compare what happens
    /// with what is expected, without and with fencing. Exit 1 on a contradiction.
    Scenario(ScenarioArgs),
    /// Run every backend for a long time (default 1h, shared equally) under a nemesis cycling
    /// through every fault the target supports, sampling dlbench's memory and open files and
    /// each server's memory every second. Exit 0 when the harness's memory grew under
    /// --max-rss-growth after the warm-up, its open files stayed flat, every fault healed
    /// and every history was checked; 1 otherwise.
    Soak(SoakArgs),
    /// Measure the servers beside the locks on one local target: dlbench's Redis SET NX PX
    /// against redis-benchmark, its postgres lock cycle against pgbench -f, each backend's
    /// primitive rate against its lock-cycle rate, and each hot-key hand-off rate against
    /// the bound set by release write + notification + confirm. Writes a result set whose
    /// summary.json has a `calibration` section.
    Calibrate(CalibrateArgs),
    /// Internal: the compose delay fault's sidecar. Holds every packet through this network
    /// namespace's interface for DELAY (netfilter queue), until SIGTERM.
    #[command(hide = true)]
    DelayNode(DelayNodeArgs),
}

#[derive(Args, Debug)]
struct DelayNodeArgs {
    /// How long each packet is held, each way.
    #[arg(long, value_parser = parse_duration)]
    delay: Duration,
    /// Let go after this long even without a SIGTERM.
    #[arg(long, value_parser = parse_duration, default_value = "1h")]
    max: Duration,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A run directory (results/<run-id>, or results/latest).
    run_dir: PathBuf,
}

#[derive(Args, Debug)]
struct CompareArgs {
    /// The baseline run (directory or summary.json).
    base: PathBuf,
    /// The new run (directory or summary.json).
    new: PathBuf,
    /// Override a threshold, METRIC=PERCENT (repeatable), e.g. --threshold ops_per_sec=10.
    #[arg(long = "threshold")]
    thresholds: Vec<String>,
    /// Also write the comparison as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the Markdown to this file (for a pull-request comment).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Compare even when the runs differ in plan, backends, target, completeness or
    /// machine (by default exit 2 naming the difference); the output says so.
    #[arg(long)]
    allow_mismatch: bool,
}

#[derive(Args, Debug)]
struct ScenarioArgs {
    /// Entries, comma-separated (S1,S3), or `all`: S1 holder pauses past its TTL, S2 write
    /// delayed past release, S3 Redlock clock jump, S4 Redlock node restarts empty, S5 Redis
    /// failover, S6 holder partitioned, S7 waiter's session expires, S8 leader killed,
    /// S9 follower paused, S10 PostgreSQL restarted.
    ids: String,
    /// Backend, comma-separated list, or `all` (entries run where they apply).
    #[arg(long, default_value = "all")]
    backend: String,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct CalibrateArgs {
    /// Concurrent connections (clients) in every rate measurement, for dlbench and the
    /// reference tools alike.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Length of each rate measurement.
    #[arg(long, value_parser = duration, default_value = "5s")]
    seconds: Duration,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct SoakArgs {
    /// Backends, comma-separated, or `all`; each runs its share of --duration, in turn.
    #[arg(long, default_value = "all")]
    backends: String,
    /// Total length of the soak, shared equally by the backends.
    #[arg(long, value_parser = duration, default_value = "1h")]
    duration: Duration,
    /// Faults cycled in turn (forms as in `run --nemesis`); faults the target cannot inject
    /// on a backend are skipped there and listed.
    #[arg(long, default_value = "kill,pause,partition,isolate,delay,clock,failover")]
    nemesis: String,
    /// Start a fault every this often; each lasts half of it.
    #[arg(long, value_parser = duration, default_value = "10s")]
    nemesis_interval: Duration,
    /// The workload every backend runs (shipped name or TOML file); under faults a 0 ms
    /// hold becomes 25 ms, as in `run`.
    #[arg(long, default_value = "many-keys")]
    workload: String,
    /// Concurrent clients per backend (default: the workload's).
    #[arg(long)]
    clients: Option<usize>,
    /// Seed for key choice and sampled durations (default: random, and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Largest growth of dlbench's resident memory after the warm-up (5 minutes, or a
    /// twelfth of a shorter soak) over the rest of the soak, in percent.
    #[arg(long, default_value_t = 5.0)]
    max_rss_growth: f64,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Where the servers are: local, compose or external (as in `run`).
    #[arg(long, default_value = "local", value_parser = ["local", "compose", "external"])]
    target: String,
    /// The endpoints file of an external target.
    #[arg(long)]
    endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT)]
    compose_project: String,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s")]
    connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"])]
    connections: String,
}

/// A soak is a run: one workload per backend, each for its share of the time, every fault.
fn soak_plan(a: SoakArgs) -> anyhow::Result<RunPlan> {
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    if backends.contains(&BackendKind::Memory) {
        anyhow::bail!("--backends: a soak runs under faults and the memory backend has no servers; drop memory");
    }
    let n = backends.len().max(1) as u32;
    let share = a.duration / n;
    if share < a.nemesis_interval * 2 {
        anyhow::bail!(
            "--duration {} gives each of {n} backends {}, too short for faults every {}: use at least {}",
            crate::util::fmt_duration(a.duration),
            crate::util::fmt_duration(share),
            crate::util::fmt_duration(a.nemesis_interval),
            crate::util::fmt_duration(a.nemesis_interval * 2 * n)
        );
    }
    if !(a.max_rss_growth > 0.0) {
        anyhow::bail!("--max-rss-growth must be a positive percentage, got {}", a.max_rss_growth);
    }
    let run = RunArgs {
        backends: a.backends,
        workload: Some(a.workload),
        clients: a.clients.map(|c| c.to_string()),
        keys: None,
        key_dist: None,
        duration: Some(share),
        ops: None,
        warmup: None,
        hold: None,
        think: None,
        ttl: None,
        wait_timeout: None,
        rate: None,
        seed: a.seed,
        out: a.out,
        nemesis: Some(a.nemesis),
        nemesis_interval: a.nemesis_interval,
        fencing: FencingMode::Both,
        history: HistoryMode::Auto,
        target: a.target,
        endpoints: a.endpoints,
        compose_project: a.compose_project,
        allow_remote: false,
        connect_timeout: a.connect_timeout,
        connections: a.connections,
        no_fail_on_violation: true,
        repeat: 1,
    };
    let mut plan = run_plan(run)?;
    plan.soak = Some(crate::soak::SoakGoal { max_rss_growth_pct: a.max_rss_growth, ..Default::default() });
    Ok(plan)
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

fn client_list(s: &str) -> Result<Vec<usize>, String> {
    let v: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>().map_err(|_| format!("{x:?} is not a number of clients")))
        .collect::<Result<_, _>>()?;
    if v.is_empty() || v.contains(&0) {
        return Err("clients must be at least 1".into());
    }
    Ok(v)
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Backends to run, comma-separated, or `all` (postgres, redis, redlock, zookeeper, etcd;
    /// `memory` is the in-process reference).
    #[arg(long, default_value = "all")]
    backends: String,
    /// Workloads to run in order, comma-separated: shipped names (hot-key, many-keys, zipf,
    /// long-hold, open-loop) or TOML files. Default: hot-key,many-keys. The flags below
    /// override the workloads' own values.
    #[arg(long)]
    workload: Option<String>,
    /// Concurrent clients per backend; a list (1,4,16,64) runs every workload once per
    /// count, a sweep the report plots as throughput against clients.
    #[arg(long)]
    clients: Option<String>,
    /// Number of keys. Without --workload, a single phase with this many keys.
    #[arg(long)]
    keys: Option<usize>,
    /// How keys are chosen: uniform or zipf.
    #[arg(long)]
    key_dist: Option<KeyDist>,
    /// Measured time per phase (e.g. 5s, 500ms).
    #[arg(long, value_parser = duration)]
    duration: Option<Duration>,
    /// Stop each phase after this many operations (warm-up included).
    #[arg(long)]
    ops: Option<u64>,
    /// Warm-up per phase, excluded from the figures.
    #[arg(long, value_parser = duration)]
    warmup: Option<Duration>,
    /// Time inside the critical section: 5ms, uniform(1ms,10ms) or exp(5ms).
    #[arg(long)]
    hold: Option<Dist>,
    /// Closed loop: time between a release and the next acquire (same forms as --hold).
    #[arg(long)]
    think: Option<Dist>,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration)]
    ttl: Option<Duration>,
    /// How long one acquire may wait for a contended lock.
    #[arg(long, value_parser = duration)]
    wait_timeout: Option<Duration>,
    /// Open loop: acquisitions per second in total; latency counts from intended starts.
    #[arg(long)]
    rate: Option<f64>,
    /// Seed for key choice and sampled durations (default: random, and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Faults to inject in turn, comma-separated: kill, pause, partition, isolate, delay,
    /// clock, failover, each optionally :random, :leader, :minority, :majority or :all
    /// (e.g. kill:leader,pause). Adds the AP / CP table to the output.
    #[arg(long)]
    nemesis: Option<String>,
    /// Start a fault every this often; each lasts half of it.
    #[arg(long, value_parser = duration, default_value = "10s")]
    nemesis_interval: Duration,
    /// Whether the protected resource refuses stale fencing tokens: off, on, or both (one
    /// run measures both; the verdict speaks for the side chosen).
    #[arg(long, value_enum, default_value = "both")]
    fencing: FencingMode,
    /// Stream every operation to history.jsonl and check it at the end. `auto`: on, except
    /// for the memory backend (hundreds of thousands of operations a second).
    #[arg(long, value_enum, default_value = "auto")]
    history: HistoryMode,
    /// Where the servers are: local (dlbench starts them), compose (the services of
    /// docker-compose.yml), external (the endpoints file given with --endpoints). The
    /// compose file's bench service sets DLBENCH_TARGET=compose.
    #[arg(long, env = "DLBENCH_TARGET", default_value = "local", value_parser = ["local", "compose", "external"])]
    target: String,
    /// The endpoints file of an external target (see README: external target).
    #[arg(long)]
    endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT)]
    compose_project: String,
    /// Let an external target's endpoints be off this machine (by default only loopback).
    #[arg(long)]
    allow_remote: bool,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s")]
    connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"])]
    connections: String,
    /// Exit 0 even when a verdict is invalid (exit 1 otherwise) or unknown (exit 3), for
    /// exploratory runs.
    #[arg(long)]
    no_fail_on_violation: bool,
    /// Run every phase this many times, interleaved across backends (all backends' phases,
    /// then again), so that `compare` can judge a change against the spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// A history.jsonl written by `dlbench run` (or by hand).
    history: PathBuf,
    /// Print the full result, with evidence, as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Backends to start, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    backends: String,
    /// Write the endpoints (TOML) to this file.
    #[arg(long)]
    endpoints: Option<PathBuf>,
    /// Where the servers' logs go (DIR/up-<id>/servers/; their data is in a runtime
    /// directory linked from there, see README).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Start the target as fault runs do: links through proxies, Redlock under the clock
    /// shim, Redis with a replica.
    #[arg(long)]
    faults: bool,
    /// Require the password held in this environment variable: Redis (requirepass),
    /// PostgreSQL's postgres user, etcd's root user (auth on). The endpoints file names the
    /// variable, never the password.
    #[arg(long)]
    password_env: Option<String>,
}

#[derive(Args, Debug)]
struct LockArgs {
    /// Endpoints file written by `dlbench up --endpoints FILE`.
    #[arg(long)]
    endpoints: PathBuf,
    /// Which backend's lock to take.
    #[arg(long)]
    backend: String,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration, default_value = "10s")]
    ttl: Duration,
    /// Give up after waiting this long (default: wait until acquired).
    #[arg(long, value_parser = duration)]
    wait: Option<Duration>,
    /// The lock name.
    name: String,
    /// The command to run while holding the lock.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn run_plan(a: RunArgs) -> anyhow::Result<RunPlan> {
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    let clients = a.clients.as_deref().map(client_list).transpose().map_err(|e| anyhow::anyhow!("--clients: {e}"))?;
    let mut phases: Vec<Workload> = match (&a.workload, a.keys) {
        (Some(list), _) => {
            list.split(',').filter(|s| !s.trim().is_empty()).map(|s| workload::load(s.trim())).collect::<Result<_, _>>()
        }
        (None, Some(1)) => workload::load("hot-key").map(|w| vec![w]),
        (None, Some(_)) => workload::load("many-keys").map(|w| vec![w]),
        (None, None) => ["hot-key", "many-keys"].iter().map(|n| workload::load(n)).collect(),
    }
    .map_err(anyhow::Error::msg)?;
    if phases.is_empty() {
        anyhow::bail!("--workload names no workload; shipped: {}", workload::shipped_names());
    }
    // One seed for the whole run, chosen now and logged, unless given.
    let seed = a.seed.unwrap_or_else(|| rand::random::<u32>() as u64);
    let o = Overrides {
        clients: clients.as_ref().filter(|c| c.len() == 1).map(|c| c[0]),
        keys: a.keys,
        key_dist: a.key_dist,
        hold: a.hold,
        think: a.think,
        ttl: a.ttl,
        wait_timeout: a.wait_timeout,
        duration: a.duration,
        ops: a.ops,
        warmup: a.warmup,
        rate: a.rate,
        seed: None,
    };
    if let Some(sweep) = clients.as_ref().filter(|c| c.len() > 1) {
        phases = phases.iter().flat_map(|w| sweep.iter().map(move |&c| Workload { clients: c, ..w.clone() })).collect();
    }
    for w in &mut phases {
        o.apply(w);
        if a.seed.is_some() || w.seed.is_none() {
            w.seed = Some(seed);
        }
        w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
    }
    let nemesis = match &a.nemesis {
        Some(s) => crate::nemesis::parse_schedule(s).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    // A verdict under faults needs holders a second holder could collide with: a zero hold
    // (a yield, microseconds inside) would make "0 overlaps" say almost nothing.
    if !nemesis.is_empty() && a.hold.is_none() {
        for w in phases.iter_mut().filter(|w| w.hold.max().is_zero()) {
            eprintln!(
                "dlbench: workload {} holds 0ms; under --nemesis it holds {} so that a second holder would be seen (--hold to choose)",
                w.name,
                crate::util::fmt_duration(crate::run::FAULT_HOLD)
            );
            w.hold = Dist::Fixed(crate::run::FAULT_HOLD);
        }
    }
    let target = match a.target.as_str() {
        "compose" => TargetChoice::Compose { project: a.compose_project.clone() },
        "external" => TargetChoice::External {
            endpoints: a.endpoints.clone().ok_or_else(|| anyhow::anyhow!("--target external needs --endpoints FILE (dlbench up --endpoints FILE writes one)"))?,
            allow_remote: a.allow_remote,
        },
        _ => TargetChoice::Local,
    };
    if a.endpoints.is_some() && !matches!(target, TargetChoice::External { .. }) {
        anyhow::bail!("--endpoints is for --target external");
    }
    Ok(RunPlan {
        backends,
        phases,
        out: a.out,
        timeouts: Timeouts { connect: a.connect_timeout, ..Timeouts::default() },
        connections: a.connections.parse().map_err(anyhow::Error::msg)?,
        target,
        command: std::env::args().collect(),
        nemesis,
        nemesis_interval: a.nemesis_interval,
        fencing: a.fencing,
        history: a.history,
        fail_on_violation: !a.no_fail_on_violation,
        repeat: a.repeat,
        soak: None,
    })
}

/// SIGINT or SIGTERM cancels the token once; a second one kills every server at once and
/// exits, for a user who does not want to wait for the clean shutdown.
fn install_signals(cancel: CancellationToken) {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
            return;
        };
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            seen += 1;
            if seen == 1 {
                eprintln!("\ndlbench: stopping (again to stop at once)");
                cancel.cancel();
            } else {
                crate::cluster::local::process::kill_all_now();
                std::process::exit(130);
            }
        }
    });
}

async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let cancel = CancellationToken::new();
    match cli.command {
        Command::Run(a) => {
            install_signals(cancel.clone());
            let mut plan = run_plan(a)?;
            // Validated as written, then shortened when DLBENCH_TIME_SCALE asks (README test).
            plan.validate()?;
            crate::timescale::scale_run(&mut plan)?;
            crate::run::run(plan, cancel).await
        }
        Command::Soak(a) => {
            install_signals(cancel.clone());
            crate::run::run(soak_plan(a)?, cancel).await
        }
        Command::Up(a) => {
            install_signals(cancel.clone());
            let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
            let password = match &a.password_env {
                Some(var) => Some(std::env::var(var).map_err(|_| anyhow::anyhow!("--password-env {var}: {var} is not set in the environment"))?),
                None => None,
            };
            let opts = crate::cluster::local::TargetOptions { proxies: a.faults, clock_shim: a.faults, redis_replica: a.faults, password, connect_timeout: None };
            crate::up::up(backends, a.endpoints, a.out, opts, a.password_env, cancel).await
        }
        Command::Check(a) => check(a),
        Command::Schema => {
            println!("{}", crate::summary::json_schema());
            Ok(0)
        }
        Command::Report(a) => {
            let page = crate::report::render(&a.run_dir)?;
            println!("{}", page.display());
            Ok(0)
        }
        Command::Compare(a) => {
            let t = crate::compare::thresholds(&a.thresholds)?;
            let c = crate::compare::compare_checked(&crate::compare::load(&a.base)?, &crate::compare::load(&a.new)?, &t, a.allow_mismatch)?;
            let md = crate::compare::markdown(&c);
            print!("{md}");
            if let Some(p) = &a.json {
                crate::util::write_atomic(p, serde_json::to_string_pretty(&c)?.as_bytes())?;
            }
            if let Some(p) = &a.markdown {
                crate::util::write_atomic(p, md.as_bytes())?;
            }
            Ok(if c.regressions > 0 { 1 } else { 0 })
        }
        Command::Calibrate(a) => {
            install_signals(cancel.clone());
            let args = crate::calibrate::CalibrateArgs { connections: a.connections, seconds: crate::timescale::scale_seconds(a.seconds)?, out: a.out };
            let done = crate::calibrate::command(args, cancel).await?;
            // Rendering is the command line's: calibrate measures and writes summary.json.
            if let Err(e) = crate::report::render(&done.run_dir) {
                eprintln!("dlbench: the report could not be written: {e:#}");
            }
            println!("{}", crate::report::text::calibration_markdown(&done.calibration));
            println!("results: {}", done.run_dir.join("summary.json").display());
            Ok(done.code)
        }
        Command::Scenario(a) => {
            install_signals(cancel.clone());
            let args = crate::scenario::command::ScenarioArgs { ids: a.ids, backends: a.backend, out: a.out };
            crate::scenario::command::command(args, cancel).await
        }
        Command::DelayNode(a) => Ok(tokio::task::spawn_blocking(move || crate::nemesis::nfdelay::run(a.delay, a.max)).await??),
        Command::Lock(a) => {
            let backend: BackendKind = a.backend.parse().map_err(anyhow::Error::msg)?;
            crate::lockcmd::lock(crate::lockcmd::LockArgs {
                endpoints: &a.endpoints,
                backend,
                name: &a.name,
                ttl: a.ttl,
                wait: a.wait,
                command: &a.command,
            })
            .await
        }
    }
}

fn check(a: CheckArgs) -> anyhow::Result<i32> {
    let verdicts = crate::run::check_history(&a.history)?;
    if verdicts.is_empty() {
        anyhow::bail!("{} holds no operations", a.history.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        for v in &verdicts {
            println!("{} {}: {}", v.backend, v.workload, v.describe());
            for r in &v.results {
                println!("  {:<17} {:<8} {}", r.checker, r.valid.to_string(), r.message);
                for e in &r.evidence {
                    println!("      {}", e.what);
                    for op in &e.ops {
                        println!("        {op}");
                    }
                }
            }
        }
    }
    let worst = crate::checker::worst(&verdicts);
    if crate::checker::interrupted(&verdicts) {
        println!("verdict: {worst} (interrupted: the run was cut short; this judges what completed)");
    } else {
        println!("verdict: {worst}");
    }
    Ok(crate::run::exit_code(worst))
}

/// The whole program; returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DLBENCH_LOG").unwrap_or_else(|_| {
                // Our own warnings; the client libraries only when something is wrong.
                "error,dlbench=warn,dlbench_etcd=warn,dlbench_zookeeper=warn,dlbench_redis=warn,dlbench_redlock=warn,dlbench_postgres=warn".into()
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dlbench: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = match rt.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("dlbench: error: {}", format!("{e:#}").replace('\n', " "));
            2
        }
    };
    // Drop the runtime without waiting for tasks still parked on sockets.
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}
