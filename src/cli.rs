//! Command-line parsing and the process-level plumbing: logging, signals, exit codes.
//!
//! The help reads like ripgrep's: `dlbench -h` lists one line per subcommand, `dlbench X
//! --help` gives the detail, the options under headings, every default and examples that
//! run as written (a unit test parses each one).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::connect::Timeouts;
use crate::kind::{self, BackendKind};
use crate::run::{HistoryMode, RunPlan, TargetChoice};
use crate::util::parse_duration;
use crate::judgement::FencingMode;
use crate::workload::{self, Dist, KeyDist, Overrides, Workload};

/// `dlbench 0.1.0 (commit 0123456789ab)`, or `(commit unknown)` for a build outside git.
fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let commit = crate::facts::commit().map(|c| match c.strip_suffix("-dirty") {
            Some(h) => format!("{}-dirty", &h[..h.len().min(12)]),
            None => c[..c.len().min(12)].to_string(),
        });
        format!("{} (commit {})", env!("CARGO_PKG_VERSION"), commit.as_deref().unwrap_or("unknown"))
    })
}

#[derive(Parser, Debug)]
#[command(name = "dlbench", version = version(), about = "Benchmark and safety-test distributed locks on real servers")]
#[command(after_help = "Run `dlbench COMMAND --help` for a command's options, defaults and examples.")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

const RUN_EXAMPLES: &str = "\
Examples:
  dlbench run                                   # every backend, hot-key then many-keys
  dlbench run --backends redis,etcd --workload zipf --clients 1,4,16
  dlbench run --backends memory --workload many-keys --duration 10s
  dlbench run --workload hot-key --duration 30s --nemesis kill:leader,pause --nemesis-interval 10s
  dlbench run --backends postgres,redis --repeat 5 --seed 1 --out results/ab
  dlbench run --target external --endpoints ep.toml";

const UP_EXAMPLES: &str = "\
Examples:
  dlbench up --endpoints ep.toml                # every backend, until Ctrl-C
  dlbench up --backends redis,etcd --faults --endpoints ep.toml
  dlbench up --backends redis --password-env BENCH_PASSWORD --endpoints ep.toml   # BENCH_PASSWORD exported";

const LOCK_EXAMPLES: &str = "\
Examples:
  dlbench lock --endpoints ep.toml --backend etcd backup -- pg_dump mydb
  dlbench lock --endpoints ep.toml --backend redis --ttl 30s --wait 5s nightly -- ./nightly.sh";

const CHECK_EXAMPLES: &str = "\
Examples:
  dlbench check results/latest/history.jsonl
  dlbench check results/latest/history.jsonl --json";

const MERGE_EXAMPLES: &str = "\
Examples:
  dlbench merge shards/0 shards/1 shards/2 --out results
  dlbench merge shards/*/latest";

const REPORT_EXAMPLES: &str = "\
Examples:
  dlbench report results/latest";

const COMPARE_EXAMPLES: &str = "\
Examples:
  dlbench compare results/baseline results/latest
  dlbench compare base/summary.json new/summary.json --threshold ops_per_sec=10 --markdown compare.md";

const SCHEMA_EXAMPLES: &str = "\
Examples:
  dlbench schema > schema/summary.schema.json";

const SCENARIO_EXAMPLES: &str = "\
Examples:
  dlbench scenario all                          # every entry on every backend it applies to
  dlbench scenario S1,S3 --backends redlock
  dlbench scenario S8 --backends etcd,zookeeper
  dlbench scenario U6 --backends pg-advisory,pg-advisory-xact   # PgBouncer (needs pgbouncer)";

const SOAK_EXAMPLES: &str = "\
Examples:
  dlbench soak                                  # 1h, every backend, every fault
  dlbench soak --backends redis,etcd --duration 10m --nemesis kill,pause";

const CALIBRATE_EXAMPLES: &str = "\
Examples:
  dlbench calibrate                             # about 90 s; results/calibrate-<id>/
  dlbench calibrate --connections 16 --seconds 10s
  dlbench calibrate --peers                     # official clients beside dlbench (sh scripts/setup.sh --peers first)
  dlbench calibrate --peers redis-py,etcd --repeats 5";

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the servers, run the workloads on each backend, print the table.
    ///
    /// Starts real servers (or uses a compose or external target), runs each workload on
    /// each backend in turn, checks every history, prints the table and writes a result set
    /// (summary.json, summary.md, report.html, the history). Exit 0 when every verdict is
    /// valid, 1 on a violation, 3 when a verdict is unknown, 2 on a configuration error.
    #[command(after_long_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Start the local target and keep it running until Ctrl-C.
    ///
    /// The same servers `run` starts, left up for `lock`, `run --target external` or your
    /// own programs; --endpoints writes where they listen.
    #[command(after_long_help = UP_EXAMPLES)]
    Up(UpArgs),
    /// Hold lock NAME while a command runs, like `etcdctl lock NAME -- CMD`.
    ///
    /// Takes the lock on the backend of an endpoints file, runs CMD with DLBENCH_LOCK_NAME
    /// set, releases the lock when CMD ends and exits with CMD's status.
    #[command(after_long_help = LOCK_EXAMPLES)]
    Lock(LockArgs),
    /// Re-run the checkers over a history file offline.
    ///
    /// Reads a history.jsonl written by `dlbench run` (or by hand) and prints each
    /// checker's result with its evidence. Exit 0 valid, 1 invalid, 3 unknown, 2 when the
    /// file cannot be read (the message names it).
    #[command(after_long_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
    /// Combine the result sets of `run --shard I/N` into one.
    ///
    /// Adds the shards' HDR histograms, counters and per-second series exactly, interleaves
    /// their histories on the wall clock, runs the checkers on the whole and shows each
    /// shard's rate, driver lag and start offset. Exit as `run`: 0 valid, 1 invalid, 3
    /// unknown, 2 when the directories are not every shard of one plan (the message says).
    #[command(after_long_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// Regenerate summary.md, the plots and report.html of a run directory.
    ///
    /// Also of an interrupted run, from what it recorded. Prints the page's path.
    #[command(after_long_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Compare two runs per backend, workload and metric; exit 1 on a regression.
    ///
    /// BASE and NEW are run directories or summary.json files, or directories of runs (an
    /// --out root) pooled as repeats: take the two sides' runs in turn (A B A B) so both see
    /// the same machine. With 3 or more samples per side a change counts when it passes its
    /// threshold and a one-sided Mann-Whitney test after Holm's adjustment over every test;
    /// exit 3 when too few repeats leave no change detectable. Default thresholds (relative
    /// change that counts): ops_per_sec 25%, acquire_p50_us 30%, acquire_p99_us 50%,
    /// acquire_p999_us 100%, release_p99_us 50%, handoff_p50_us 50%, errors 100% (and at
    /// least 10), availability_pct 5 points, longest_gap_ms 50%, recovery_ms 50%. Any new
    /// overlap or lost update, or a safety verdict turning worse, always fails. Runs that
    /// differ in plan, backends, target, completeness or machine are refused (exit 2).
    #[command(after_long_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Print the JSON Schema of summary.json.
    ///
    /// The repository commits it as schema/summary.schema.json.
    #[command(after_long_help = SCHEMA_EXAMPLES)]
    Schema,
    /// Run failure scenarios from the catalogue against what is expected.
    ///
    /// Runs catalogue entries (S1-S10, J1, U1-U7, or all) on the backends they apply to.
    /// S1-S10 and J1: without and with fencing, what was expected against what was observed.
    /// U1-U7, the failures lock users report: a figure per backend and case ("what users
    /// hit"), each with its evidence file. Writes a result set. Exit 1 on a contradiction or
    /// a measurement without evidence.
    #[command(after_long_help = SCENARIO_EXAMPLES)]
    Scenario(ScenarioArgs),
    /// Run every backend for a long time under faults, watching dlbench's resources.
    ///
    /// The backends take turns, in rounds, for equal shares of --duration, under a nemesis
    /// cycling through every fault the target supports (continuing the cycle across turns), sampling dlbench's memory and open files and each
    /// server's memory every second. Exit 0 when the harness's memory grew under
    /// --max-rss-growth after the warm-up, its open files stayed flat, every fault healed
    /// and every history was checked; 1 otherwise.
    #[command(after_long_help = SOAK_EXAMPLES)]
    Soak(SoakArgs),
    /// Measure the servers beside the locks, against the servers' own benchmark tools.
    ///
    /// On one local target: dlbench's Redis SET NX PX against redis-benchmark, its
    /// postgres lock cycle against pgbench -f, each backend's primitive rate against its
    /// lock-cycle rate, and each hot-key hand-off rate against the bound set by release
    /// write + notification + confirm. Writes a result set whose summary.json has a
    /// `calibration` section.
    #[command(after_long_help = CALIBRATE_EXAMPLES)]
    Calibrate(CalibrateArgs),
    /// Internal: hold this namespace's packets for a delay (the compose delay fault).
    ///
    /// The compose target starts it from the bench image in a server container's network
    /// namespace (`docker run --network container:NODE --cap-add NET_ADMIN`): every packet
    /// through the default interface goes to a netfilter queue and is let go after --delay,
    /// each way, until SIGTERM (`docker stop`), which lets everything go and removes the rules.
    #[command(hide = true, after_long_help = "Examples:\n  dlbench delay-node --delay 100ms            # inside the node's namespace, as root\n")]
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
    /// The baseline: a run (directory or summary.json), or a directory of runs pooled as
    /// repeats (an --out root).
    base: PathBuf,
    /// The new side, as the baseline.
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
    /// S9 follower paused, S10 PostgreSQL restarted, J1 Jepsen's etcd lock setup; what users
    /// hit: U1 lost-lock notice delay, U2 holder starved or paused, U3 1,000 locks kept
    /// alive, U4 Redlock quorum erosion, U5 grant with no validity left, U6 PgBouncer, U7
    /// waiters' cost.
    ids: String,
    /// Backends, comma-separated, or `all` (entries run where they apply).
    #[arg(long, visible_alias = "backend", default_value = "all", help_heading = "Target")]
    backends: String,
    /// U7: the numbers of waiters to step through, comma-separated (each 1 to 10000).
    #[arg(long, value_delimiter = ',', value_parser = waiter_count, default_value = "1,10,100,1000", help_heading = "Workload")]
    waiters: Vec<usize>,
    /// U3: how many locks to hold and keep alive at once (1 to 100000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000), default_value_t = 1000, help_heading = "Workload")]
    locks: u32,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    out: PathBuf,
}

/// One of `--waiters`: a count from 1 to 10,000.
fn waiter_count(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().ok().filter(|n| (1..=10_000).contains(n)).ok_or_else(|| format!("{s:?} is not a number of waiters from 1 to 10000"))
}

#[derive(Args, Debug)]
struct CalibrateArgs {
    /// Concurrent connections (clients) in every rate measurement, for dlbench and the
    /// reference tools alike.
    #[arg(long, default_value_t = 8, help_heading = "Connection")]
    connections: usize,
    /// Length of each rate measurement.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Workload")]
    seconds: Duration,
    /// Instead of the reference tools: each recipe's official client (redis-py, pottery,
    /// curator, kazoo, etcd-go) beside dlbench on the hot-key and many-keys workloads,
    /// interleaved; `all` or a comma-separated list of peer or backend names. Needs
    /// `sh scripts/setup.sh --peers`.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "PEERS", help_heading = "Target")]
    peers: Option<String>,
    /// With --peers: runs per side for each row (dlbench, peer, dlbench, peer, ...).
    #[arg(long, default_value_t = 3, help_heading = "Workload")]
    repeats: usize,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct SoakArgs {
    /// Backends, comma-separated; `default` is the five families' own recipes, `all` adds
    /// the other designs (pg-advisory, pg-advisory-xact, redisson, etcd-v3lock). Each runs its share of
    /// --duration, in turn.
    #[arg(long, default_value = "default", help_heading = "Target")]
    backends: String,
    /// Total length of the soak, shared equally by the backends.
    #[arg(long, value_parser = duration, default_value = "1h", help_heading = "Workload")]
    duration: Duration,
    /// The backends take turns this many times (A B C, A B C, ...), each turn
    /// --duration / (backends x rounds) long [default: enough that the first round ends
    /// inside the warm-up, so every backend's working set is there before growth is judged;
    /// 14 for an hour; fewer when turns would be shorter than two fault intervals]
    #[arg(long, help_heading = "Workload")]
    rounds: Option<u32>,
    /// Faults cycled in turn (forms as in `run --nemesis`); faults the target cannot inject
    /// on a backend are skipped there and listed.
    #[arg(long, default_value = "kill,pause,partition,isolate,delay,clock,failover", help_heading = "Faults")]
    nemesis: String,
    /// Start a fault every this often; each lasts half of it.
    #[arg(long, value_parser = duration, default_value = "10s", help_heading = "Faults")]
    nemesis_interval: Duration,
    /// The workload every backend runs (shipped name or TOML file); under faults a 0 ms
    /// hold becomes 25 ms, as in `run`.
    #[arg(long, default_value = "many-keys", help_heading = "Workload")]
    workload: String,
    /// Concurrent clients per backend.
    #[arg(long, help_heading = "Workload")]
    clients: Option<usize>,
    /// Seed for key choice and sampled durations [default: random, and printed]
    #[arg(long, help_heading = "Workload")]
    seed: Option<u64>,
    /// Largest growth of dlbench's resident memory after the warm-up (5 minutes, or a
    /// twelfth of a shorter soak) over the rest of the soak, in percent.
    #[arg(long, default_value_t = 5.0, help_heading = "Output")]
    max_rss_growth: f64,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    out: PathBuf,
    /// Where the servers are: local, compose or external (as in `run`).
    #[arg(long, default_value = "local", value_parser = ["local", "compose", "external"], help_heading = "Target")]
    target: String,
    /// The endpoints file of an external target.
    #[arg(long, help_heading = "Target")]
    endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT, help_heading = "Target")]
    compose_project: String,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Connection")]
    connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"], help_heading = "Connection")]
    connections: String,
}

/// A soak is a run: one workload per backend, each for its share of the time, every fault.
fn soak_plan(a: SoakArgs) -> anyhow::Result<RunPlan> {
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    if backends.contains(&BackendKind::Memory) {
        anyhow::bail!("--backends: a soak runs under faults and the memory backend has no servers; drop memory");
    }
    let n = backends.len().max(1) as u32;
    let (rounds, share) = soak_rounds(a.duration, n, a.nemesis_interval, a.rounds)?;
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
        properties: false,
        repeat: rounds,
        shard: None,
        start_at: None,
        resource: "local".into(),
    };
    let (mut plan, notices) = build_run_plan(run)?;
    plan.soak = Some(crate::summary::soak::SoakGoal { max_rss_growth_pct: a.max_rss_growth, ..Default::default() });
    checked(plan, notices)
}

/// A soak's rounds and the length of one backend's turn. Run one backend after another for
/// its whole share, a soak measures the order of their working sets (the last backend's
/// connections and sessions appear after the warm-up and read as growth); in rounds, every
/// backend has had a turn before the warm-up ends, and what the later rounds add is growth.
fn soak_rounds(total: Duration, backends: u32, interval: Duration, rounds: Option<u32>) -> anyhow::Result<(u32, Duration)> {
    let fmt = crate::util::fmt_duration;
    let shortest = interval * 2;
    let most = (total.as_secs_f64() / (backends as f64 * shortest.as_secs_f64())).floor() as u32;
    if most == 0 {
        anyhow::bail!(
            "--duration {} gives each of {backends} backends {}, too short for faults every {}: use at least {}",
            fmt(total),
            fmt(total / backends),
            fmt(interval),
            fmt(shortest * backends)
        );
    }
    let rounds = match rounds {
        Some(0) => anyhow::bail!("--rounds must be at least 1"),
        Some(r) if r > most => anyhow::bail!(
            "--rounds {r}: turns of {} are shorter than two fault intervals ({}); use at most {most} rounds, or a longer --duration",
            fmt(total / (backends * r)),
            fmt(shortest)
        ),
        Some(r) => r,
        None => {
            // The first round, plus the servers' start-up, inside the warm-up: 15% spare.
            let warmup = crate::usage::warmup_for(total.as_secs_f64());
            ((total.as_secs_f64() * 1.15 / warmup).ceil() as u32).clamp(1, most)
        }
    };
    Ok((rounds, total / (backends * rounds)))
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
    /// Backends to run, comma-separated; `default` is the five families' own recipes
    /// (postgres, redis, redlock, zookeeper, etcd); `all` adds the other designs
    /// (pg-advisory, pg-advisory-xact, mariadb, mariadb-get-lock, redisson, etcd-v3lock);
    /// `memory` is the in-process reference.
    #[arg(long, default_value = "default", help_heading = "Target")]
    backends: String,
    /// Workloads to run in order, comma-separated: shipped names (hot-key, many-keys, zipf,
    /// long-hold, open-loop) or TOML files; the flags under Workload override the workloads'
    /// own values [default: hot-key,many-keys; with --keys alone: hot-key for 1 key,
    /// many-keys otherwise]
    #[arg(long, help_heading = "Workload")]
    workload: Option<String>,
    /// Concurrent clients per backend; a list (1,4,16,64) runs every workload once per
    /// count, a sweep the report plots as throughput against clients.
    #[arg(long, help_heading = "Workload")]
    clients: Option<String>,
    /// Number of keys. Without --workload, a single phase with this many keys.
    #[arg(long, help_heading = "Workload")]
    keys: Option<usize>,
    /// How keys are chosen: uniform or zipf.
    #[arg(long, help_heading = "Workload")]
    key_dist: Option<KeyDist>,
    /// Measured time per phase (e.g. 5s, 500ms).
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    duration: Option<Duration>,
    /// Stop each phase after this many operations (warm-up included).
    #[arg(long, help_heading = "Workload")]
    ops: Option<u64>,
    /// Warm-up per phase, excluded from the figures.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    warmup: Option<Duration>,
    /// Time inside the critical section: 5ms, uniform(1ms,10ms) or exp(5ms).
    #[arg(long, help_heading = "Workload")]
    hold: Option<Dist>,
    /// Closed loop: time between a release and the next acquire (same forms as --hold).
    #[arg(long, help_heading = "Workload")]
    think: Option<Dist>,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    ttl: Option<Duration>,
    /// How long one acquire may wait for a contended lock.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    wait_timeout: Option<Duration>,
    /// Open loop: acquisitions per second in total; latency counts from intended starts.
    #[arg(long, help_heading = "Workload")]
    rate: Option<f64>,
    /// Seed for key choice and sampled durations [default: random, and printed]
    #[arg(long, help_heading = "Workload")]
    seed: Option<u64>,
    /// Run every phase this many times, interleaved across backends (all backends' phases,
    /// then again), so that `compare` can judge a change against the spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100), help_heading = "Workload")]
    repeat: u32,
    /// Faults to inject in turn, comma-separated: kill, pause, partition, isolate, delay,
    /// clock, failover, each optionally :random, :leader, :minority, :majority or :all
    /// (e.g. kill:leader,pause). Adds the AP / CP table to the output [default: none]
    #[arg(long, help_heading = "Faults")]
    nemesis: Option<String>,
    /// Start a fault every this often; each lasts half of it.
    #[arg(long, value_parser = duration, default_value = "10s", help_heading = "Faults")]
    nemesis_interval: Duration,
    /// Whether the protected resource refuses stale fencing tokens: off, on, or both (one
    /// run measures both; the verdict speaks for the side chosen).
    #[arg(long, value_enum, default_value = "both", help_heading = "Faults")]
    fencing: FencingMode,
    /// Run shard I of N of this plan (I from 0, as a Kubernetes completion index): clients
    /// [I*C/N, (I+1)*C/N) of --clients C, on the keys of the whole plan; `dlbench merge`
    /// combines the shards' result sets. One backend, one workload, the same --seed in every
    /// shard, a compose or external target.
    #[arg(long, env = "DLBENCH_SHARD", help_heading = "Shards")]
    shard: Option<crate::shard::ShardSpec>,
    /// With --shard: start the phase at this Unix time in seconds, the same in every shard
    /// (e.g. $(( $(date +%s) + 30 ))) [default: at once]
    #[arg(long, env = "DLBENCH_START_AT", requires = "shard", help_heading = "Shards")]
    start_at: Option<u64>,
    /// Where the protected resource lives: `local` (in this process), redis://HOST:PORT[/DB]
    /// or postgres://[USER@]HOST:PORT/DB, a dedicated server (never a lock server under test)
    /// where every critical-section step is one atomic call stamped with the server's clock,
    /// so shards on several hosts are judged in one place. Password: DLBENCH_RESOURCE_PASSWORD.
    #[arg(long, env = "DLBENCH_RESOURCE", default_value = "local", help_heading = "Shards")]
    resource: String,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    out: PathBuf,
    /// Stream every operation to history.jsonl and check it at the end. `auto`: on, except
    /// for the memory backend (hundreds of thousands of operations a second).
    #[arg(long, value_enum, default_value = "auto", help_heading = "Output")]
    history: HistoryMode,
    /// Exit 0 even when a verdict is invalid (exit 1 otherwise) or unknown (exit 3), for
    /// exploratory runs.
    #[arg(long, help_heading = "Output")]
    no_fail_on_violation: bool,
    /// After its phases, measure each backend's expiry (a holder vanishes: time to the next
    /// grant, TTL 3s) and reentrancy (the holder acquires again), for the four-properties
    /// table of the report.
    #[arg(long, help_heading = "Output")]
    properties: bool,
    /// Where the servers are: local (dlbench starts them), compose (the services of
    /// docker-compose.yml), external (the endpoints file given with --endpoints). The
    /// compose file's bench service sets DLBENCH_TARGET=compose.
    #[arg(long, env = "DLBENCH_TARGET", default_value = "local", value_parser = ["local", "compose", "external"], help_heading = "Target")]
    target: String,
    /// The endpoints file of an external target (see docs/external.md).
    #[arg(long, help_heading = "Target")]
    endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT, help_heading = "Target")]
    compose_project: String,
    /// Let an external target's endpoints be off this machine (by default only loopback).
    #[arg(long, help_heading = "Target")]
    allow_remote: bool,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Connection")]
    connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"], help_heading = "Connection")]
    connections: String,
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// The shards' run directories (or --out roots whose `latest` is one), every shard of
    /// one plan once.
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// Results root; the merged set goes to DIR/merged-<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Exit 0 even when the merged verdict is invalid or unknown.
    #[arg(long)]
    no_fail_on_violation: bool,
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
    /// directory linked from there, see docs/server-data.md).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Start the target as fault runs do: links through proxies, Redlock under the clock
    /// shim, Redis with a replica.
    #[arg(long)]
    faults: bool,
    /// Require the password held in this environment variable: Redis (requirepass),
    /// PostgreSQL's postgres user, MariaDB's dlbench user, etcd's root user (auth on). The endpoints file names the
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
    /// Give up after waiting this long [default: wait until acquired]
    #[arg(long, value_parser = duration)]
    wait: Option<Duration>,
    /// Chubby's lock-delay (etcd only): when the holder before us lost its session instead
    /// of releasing, enter only this long after its claim went, so its in-flight writes
    /// land first. 0s is off.
    #[arg(long, value_parser = duration, default_value = "0s")]
    lock_delay: Duration,
    /// The lock name.
    name: String,
    /// The command to run while holding the lock.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn run_plan(a: RunArgs) -> anyhow::Result<RunPlan> {
    let (plan, notices) = build_run_plan(a)?;
    checked(plan, notices)
}

/// The plan validated as written, then the notices about it: bad input gets its one line and
/// nothing else.
fn checked(plan: RunPlan, notices: Vec<String>) -> anyhow::Result<RunPlan> {
    plan.validate()?;
    for n in notices {
        eprintln!("{n}");
    }
    Ok(plan)
}

/// The plan of `run` (and of `soak`, which sets its goal on it) and what to tell the user
/// about it once it is known good.
fn build_run_plan(a: RunArgs) -> anyhow::Result<(RunPlan, Vec<String>)> {
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
    if let Some(s) = &a.shard {
        if a.seed.is_none() {
            anyhow::bail!("--shard {}/{}: give --seed N, the same in every shard, so that all of them choose from the same keys", s.index, s.count);
        }
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
    let mut notices = Vec::new();
    if !nemesis.is_empty() && a.hold.is_none() {
        for w in phases.iter_mut().filter(|w| w.hold.max().is_zero()) {
            notices.push(format!(
                "dlbench: workload {} holds 0ms; under --nemesis it holds {} so that a second holder would be seen (--hold to choose)",
                w.name,
                crate::util::fmt_duration(crate::phase::FAULT_HOLD)
            ));
            w.hold = Dist::Fixed(crate::phase::FAULT_HOLD);
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
    let plan = RunPlan {
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
        shard: a.shard.map(|s| crate::shard::ShardSpec { start_at: a.start_at, ..s }),
        resource: crate::resource_server::ResourceUrl::parse(&a.resource).map_err(anyhow::Error::msg)?,
        properties: a.properties,
    };
    Ok((plan, notices))
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
            // Validated as written (in run_plan), then shortened when DLBENCH_TIME_SCALE asks
            // (README test).
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
        Command::Merge(a) => crate::merge::merge(&a.shards, &a.out, !a.no_fail_on_violation),
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
            let c = crate::compare::compare_checked(&crate::compare::load_side(&a.base)?, &crate::compare::load_side(&a.new)?, &t, a.allow_mismatch)?;
            let md = crate::compare::markdown(&c);
            print!("{md}");
            if let Some(p) = &a.json {
                crate::util::write_atomic(p, serde_json::to_string_pretty(&c)?.as_bytes())?;
            }
            if let Some(p) = &a.markdown {
                crate::util::write_atomic(p, md.as_bytes())?;
            }
            // 3, as for an undecided verdict: no regression found, but none could have been.
            Ok(if c.regressions > 0 { 1 } else if !c.detectable { 3 } else { 0 })
        }
        Command::Calibrate(a) => {
            install_signals(cancel.clone());
            let args = crate::calibrate::CalibrateArgs {
                connections: a.connections,
                seconds: crate::timescale::scale_seconds(a.seconds)?,
                out: a.out,
                peers: a.peers,
                repeats: a.repeats,
            };
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
            let args = crate::scenario::command::ScenarioArgs {
                ids: a.ids,
                backends: a.backends,
                out: a.out,
                sizes: crate::scenario::users::Sizes { waiters: a.waiters, locks: a.locks as usize },
            };
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
                lock_delay: a.lock_delay,
                command: &a.command,
            })
            .await
        }
    }
}

fn check(a: CheckArgs) -> anyhow::Result<i32> {
    if a.history.is_dir() {
        let inside = a.history.join("history.jsonl");
        if inside.is_file() {
            anyhow::bail!("{} is a directory: check takes a history file (try {})", a.history.display(), inside.display());
        }
        anyhow::bail!("{} is a directory, not a history file (dlbench run writes RUN_DIR/history.jsonl)", a.history.display());
    }
    let verdicts = crate::checker::check_file(&a.history)?;
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
    Ok(crate::judgement::exit_code(worst))
}

/// A flag's value in one workload, as the flag takes it (None: the workload leaves it unset).
fn workload_value(w: &Workload, flag: &str) -> Option<String> {
    use crate::util::fmt_duration;
    Some(match flag {
        "clients" => w.clients.to_string(),
        "keys" => w.keys.to_string(),
        "key_dist" => match w.key_dist {
            KeyDist::Uniform => "uniform".into(),
            KeyDist::Zipf => "zipf".into(),
        },
        "duration" => fmt_duration(w.duration),
        "ops" => w.ops?.to_string(),
        "warmup" => fmt_duration(w.warmup),
        "hold" => w.hold.to_string(),
        "think" => w.think.to_string(),
        "ttl" => fmt_duration(w.ttl),
        "wait_timeout" => fmt_duration(w.wait_timeout),
        "rate" => w.rate?.to_string(),
        _ => return None,
    })
}

/// The flags whose default is the workload file's value.
const WORKLOAD_FLAGS: &[&str] = &["clients", "keys", "key_dist", "duration", "ops", "warmup", "hold", "think", "ttl", "wait_timeout", "rate"];

/// `[default: ...]` for a flag that takes its default from the workload file, with the
/// values the shipped workloads really have (read from workloads/*.toml, compiled in).
fn workload_default(flag: &str) -> String {
    let shipped: Vec<Workload> = workload::SHIPPED.iter().filter_map(|(name, _)| workload::load(name).ok()).collect();
    let set: Vec<String> = shipped.iter().filter_map(|w| workload_value(w, flag).map(|v| format!("{}: {v}", w.name))).collect();
    let mut s = if set.is_empty() {
        "none, unless the workload file sets it".to_string()
    } else if set.len() < shipped.len() {
        format!("from the workload file; {}; the others: none", set.join(", "))
    } else {
        format!("from the workload file; {}", set.join(", "))
    };
    if flag == "rate" {
        s.push_str(" (closed loop)");
    }
    if flag == "hold" {
        s.push_str(&format!("; under --nemesis a 0ms hold becomes {}", crate::util::fmt_duration(crate::phase::FAULT_HOLD)));
    }
    format!("[default: {s}]")
}

/// Append `extra` to an argument's help, short and long.
fn append_help(a: clap::Arg, extra: &str) -> clap::Arg {
    let long = a.get_long_help().map(|h| format!("{h} {extra}"));
    let short = a.get_help().map(|h| format!("{h} {extra}")).unwrap_or_else(|| extra.to_string());
    let a = a.help(short);
    match long {
        Some(l) => a.long_help(l),
        None => a,
    }
}

/// The command line as clap sees it: the derive's, with the defaults that come from the
/// workload files written into the help.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for sub in ["run", "soak"] {
        cmd = cmd.mut_subcommand(sub, |mut c| {
            for flag in WORKLOAD_FLAGS {
                // Only where the flag has no default of its own (soak's --duration has one).
                if c.get_arguments().any(|a| a.get_id() == *flag && a.get_default_values().is_empty()) {
                    let d = workload_default(flag);
                    c = c.mut_arg(*flag, |a| append_help(a, &d));
                }
            }
            c
        });
    }
    cmd
}

/// Colour only on a terminal, and never when NO_COLOR is set to anything (no-color.org).
/// The log goes to stderr, so the caller asks about stderr; clap's own help and errors
/// follow the same rule (its auto colour choice).
pub fn colour(is_terminal: bool) -> bool {
    colour_with(is_terminal, std::env::var_os("NO_COLOR").as_deref())
}

fn colour_with(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command()).exit())
}

/// The whole program; returns the exit code.
pub fn main() -> i32 {
    let cli = parse();
    // DLBENCH_LOG takes `LEVEL` or `TARGET=LEVEL,...` (tracing-subscriber's `Targets`).
    // Our own warnings by default; the client libraries only when something is wrong.
    let filter = std::env::var("DLBENCH_LOG")
        .ok()
        .and_then(|s| s.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            "error,dlbench=warn,dlbench_etcd=warn,dlbench_zookeeper=warn,dlbench_redis=warn,dlbench_redlock=warn,dlbench_postgres=warn"
                .parse()
                .expect("the default filter parses")
        });
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour(std::io::IsTerminal::is_terminal(&std::io::stderr())));
        tracing_subscriber::registry().with(fmt).with(filter).init();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soak_runs_in_rounds_whose_first_ends_inside_the_warm_up() {
        let s = Duration::from_secs;
        // An hour, five backends, a fault every 10 s: 14 rounds of 51 s turns; the first
        // round (257 s) ends inside the 300 s warm-up with room for the servers' start-up.
        let (r, turn) = soak_rounds(s(3600), 5, s(10), None).unwrap();
        assert_eq!(r, 14);
        assert!((turn.as_secs_f64() - 3600.0 / 70.0).abs() < 1e-6, "{turn:?}");
        assert!(turn * 5 < Duration::from_secs_f64(crate::usage::warmup_for(3600.0)));
        // Two minutes: turns may not be shorter than two fault intervals, so one round.
        assert_eq!(soak_rounds(s(120), 5, s(10), None).unwrap(), (1, s(24)));
        // Asked for, within bounds.
        assert_eq!(soak_rounds(s(600), 2, s(10), Some(3)).unwrap(), (3, s(100)));
        let e = soak_rounds(s(600), 2, s(10), Some(20)).unwrap_err().to_string();
        assert!(e.contains("--rounds 20") && e.contains("at most 15 rounds"), "{e}");
        let e = soak_rounds(s(60), 5, s(10), None).unwrap_err().to_string();
        assert!(e.contains("too short for faults every 10s") && e.contains("at least 100s"), "{e}");
    }

    /// The example lines of a subcommand's `--help` (`  dlbench ...`, comments dropped).
    fn examples(sub: &clap::Command) -> Vec<String> {
        let text = sub.get_after_long_help().map(|h| h.to_string()).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.trim_start().strip_prefix("dlbench "))
            .map(|l| l.split(" # ").next().unwrap().trim().to_string())
            .collect()
    }

    /// Every example parses as written: the flags exist and their values are accepted.
    #[test]
    fn every_example_parses() {
        let cmd = command();
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            let lines = examples(sub);
            assert!(!lines.is_empty(), "{} has no examples", sub.get_name());
            for l in lines {
                // A redirect is the shell's, not dlbench's.
                let words: Vec<&str> = l.split(" > ").next().unwrap().split_whitespace().collect();
                assert_eq!(words[0], sub.get_name(), "an example of {} runs {l}", sub.get_name());
                let parsed = command().try_get_matches_from(std::iter::once("dlbench").chain(words.iter().copied()));
                assert!(parsed.is_ok(), "dlbench {l}: {}", parsed.unwrap_err());
                seen += 1;
            }
        }
        assert!(seen >= 20, "{seen} examples");
    }

    /// `dlbench -h` gives each subcommand one line: a short first paragraph, the rest in --help.
    #[test]
    fn every_about_is_one_short_line_with_detail_in_long_about() {
        for sub in command().get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty() && !about.contains('\n') && about.len() <= 80, "{}: {about:?}", sub.get_name());
            let long = sub.get_long_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(long.len() > about.len(), "{} has no detail for --help", sub.get_name());
        }
    }

    /// `--backends` and its alias `--backend` give `scenario` the same list.
    #[test]
    fn scenario_backends_and_backend_alias_parse_alike() {
        for flag in ["--backends", "--backend"] {
            let cli = Cli::from_arg_matches(&command().try_get_matches_from(["dlbench", "scenario", "S1", flag, "redis,etcd"]).unwrap()).unwrap();
            match cli.command {
                Command::Scenario(a) => assert_eq!(a.backends, "redis,etcd", "{flag}"),
                other => panic!("{other:?}"),
            }
        }
    }

    /// `--waiters` is a comma-separated list, every count checked; `--locks` one count.
    #[test]
    fn scenario_sizes_parse() {
        let parse = |args: &[&str]| {
            let mut v = vec!["dlbench", "scenario", "U7"];
            v.extend_from_slice(args);
            command().try_get_matches_from(v).and_then(|m| Cli::from_arg_matches(&m))
        };
        match parse(&[]).unwrap().command {
            Command::Scenario(a) => assert_eq!((a.waiters, a.locks), (vec![1, 10, 100, 1000], 1000)),
            other => panic!("{other:?}"),
        }
        match parse(&["--waiters", "1,10", "--locks", "200"]).unwrap().command {
            Command::Scenario(a) => assert_eq!((a.waiters, a.locks), (vec![1, 10], 200)),
            other => panic!("{other:?}"),
        }
        for bad in [["--waiters", "1,0"], ["--waiters", "10001"], ["--locks", "0"]] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }

    /// The workload defaults in the help are the files' own values, read here straight from
    /// workloads/*.toml (not through the loader the help uses).
    #[test]
    fn workload_defaults_in_the_help_are_the_files_values() {
        let cmd = command();
        let run = cmd.find_subcommand("run").unwrap();
        let help = |id: &str| run.get_arguments().find(|a| a.get_id() == id).unwrap().get_help().unwrap().to_string();
        for (name, text) in workload::SHIPPED {
            let t: toml::Table = toml::from_str(text).unwrap();
            let clients = t["clients"].as_integer().unwrap();
            assert!(help("clients").contains(&format!("{name}: {clients}")), "{name}: {}", help("clients"));
            let ttl = t["ttl"].as_str().unwrap();
            assert!(help("ttl").contains(&format!("{name}: {ttl}")), "{name}: {}", help("ttl"));
            let keys = t["keys"].as_integer().unwrap();
            assert!(help("keys").contains(&format!("{name}: {keys}")), "{name}: {}", help("keys"));
            match t.get("rate") {
                Some(r) => assert!(help("rate").contains(&format!("{name}: {}", r.as_float().unwrap())), "{}", help("rate")),
                None => assert!(!help("rate").contains(&format!("{name}:")), "{}", help("rate")),
            }
        }
        assert!(help("ops").contains("[default: none"), "{}", help("ops"));
        // soak's --clients carries the same, and its --workload a plain clap default.
        let soak = cmd.find_subcommand("soak").unwrap();
        let soak_help = |id: &str| soak.get_arguments().find(|a| a.get_id() == id).unwrap().get_help().unwrap().to_string();
        assert!(soak_help("clients").contains("many-keys: 8"), "{}", soak_help("clients"));
        assert!(!soak_help("duration").contains("workload file"), "soak's --duration has its own default: {}", soak_help("duration"));
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour_with(true, None));
        assert!(!colour_with(false, None), "not a terminal");
        assert!(!colour_with(true, Some(OsStr::new("1"))), "NO_COLOR=1");
        assert!(colour_with(true, Some(OsStr::new(""))), "an empty NO_COLOR does not count (no-color.org)");
        assert!(!colour(false));
    }
}
