//! The command line's shape: the subcommands and their flags, as clap derives them, and
//! `command()`, which writes the workload files' values into the help as defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand};

use super::help::*;
use crate::run::HistoryMode;
use crate::util::parse_duration;
use crate::judgement::FencingMode;
use crate::workload::{Dist, KeyDist};

#[derive(Parser, Debug)]
#[command(name = "dlbench", version = version(), about = "Benchmark and safety-test distributed locks on real servers")]
#[command(after_help = "Run `dlbench COMMAND --help` for a command's options, defaults and examples.")]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    /// Each metric across result sets in order, and where compare flags a change.
    ///
    /// DIRs are result sets (or directories of runs pooled as repeats, as for compare), one per
    /// commit, oldest first. Writes one self-contained page (trend.html: per backend, workload
    /// and metric the median at each point, its spread over the repeats, and a ring where
    /// `dlbench compare PREVIOUS THIS` flags a regression or an improvement) and prints each
    /// step's conclusion. The flags are compare's own judgement of every consecutive pair, with
    /// the same --threshold. Exit 0 when the page is written, whatever it shows; 2 when a DIR
    /// cannot be read.
    #[command(after_long_help = TREND_EXAMPLES)]
    Trend(TrendArgs),
    /// Print the JSON Schema of summary.json.
    ///
    /// The repository commits it as schema/summary.schema.json.
    #[command(after_long_help = SCHEMA_EXAMPLES)]
    Schema,
    /// Run failure scenarios from the catalogue against what is expected.
    ///
    /// Runs catalogue entries (S1-S10, J1, U1-U7, or all) on the backends they apply to;
    /// `dlbench scenario list` prints every entry's id, title and source, and runs nothing.
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
pub(crate) struct DelayNodeArgs {
    /// How long each packet is held, each way.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) delay: Duration,
    /// Let go after this long even without a SIGTERM.
    #[arg(long, value_parser = parse_duration, default_value = "1h")]
    pub(crate) max: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// A run directory (results/<run-id>, or results/latest).
    pub(crate) run_dir: PathBuf,
}

/// How `compare` prints its result on stdout.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompareFormat {
    Text,
    Markdown,
}

#[derive(Args, Debug)]
pub(crate) struct TrendArgs {
    /// The result sets in order, oldest first (at least two): run directories, summary.json
    /// files, or directories of runs pooled as repeats.
    #[arg(required = true, num_args = 2..)]
    pub(crate) dirs: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(long, default_value = "trend.html")]
    pub(crate) html: PathBuf,
    /// Also write the trend (points, steps with compare's flags, series) as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Override a threshold, METRIC=PERCENT (repeatable), as for compare.
    #[arg(long = "threshold")]
    pub(crate) thresholds: Vec<String>,
    /// The metrics that can flag a step, as for compare.
    #[arg(long, default_value = crate::compare::DEFAULT_GATE)]
    pub(crate) gate: String,
    /// Compare consecutive sets even when they differ in plan, backends, target,
    /// completeness or machine, as for compare.
    #[arg(long)]
    pub(crate) allow_mismatch: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The baseline: a run (directory or summary.json), or a directory of runs pooled as
    /// repeats (an --out root).
    pub(crate) base: PathBuf,
    /// The new side, as the baseline.
    pub(crate) new: PathBuf,
    /// Override a threshold, METRIC=PERCENT (repeatable), e.g. --threshold ops_per_sec=10.
    #[arg(long = "threshold")]
    pub(crate) thresholds: Vec<String>,
    /// The metrics that can fail the comparison, comma-separated, or `all`: only their rows
    /// form the test family (Holm's adjustment), so fewer gated metrics need fewer runs a side
    /// (compare prints the number). Every row is reported; safety counts and the verdict row
    /// always gate.
    #[arg(long, default_value = crate::compare::DEFAULT_GATE)]
    pub(crate) gate: String,
    /// Also write the comparison as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Also write the Markdown to this file (for a pull-request comment), whatever --format
    /// prints.
    #[arg(long)]
    pub(crate) markdown: Option<PathBuf>,
    /// What to print: `text`, an aligned table (on a terminal and into a pipe alike), or
    /// `markdown`, the pull-request comment (changes first, unchanged rows folded).
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub(crate) format: CompareFormat,
    /// Compare even when the runs differ in plan, backends, target, completeness or
    /// machine (by default exit 2 naming the difference); the output says so.
    #[arg(long)]
    pub(crate) allow_mismatch: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ScenarioArgs {
    /// Entries, comma-separated (S1,S3), `all`, or `list` (print every entry with its title
    /// and source, exit 0): S1 holder pauses past its TTL, S2 write
    /// delayed past release, S3 Redlock clock jump, S4 Redlock node restarts empty, S5 Redis
    /// failover, S6 holder partitioned, S7 waiter's session expires, S8 leader killed,
    /// S9 follower paused, S10 PostgreSQL restarted, J1 Jepsen's etcd lock setup, P1 power
    /// loss under a holder, J2 Jepsen's NATS power failure; what users
    /// hit: U1 lost-lock notice delay, U2 holder starved or paused, U3 1,000 locks kept
    /// alive, U4 Redlock quorum erosion, U5 grant with no validity left, U6 PgBouncer, U7
    /// waiters' cost.
    pub(crate) ids: String,
    /// Backends, comma-separated, or `all` (entries run where they apply).
    #[arg(long, visible_alias = "backend", default_value = "all", help_heading = "Target")]
    pub(crate) backends: String,
    /// U7: the numbers of waiters to step through, comma-separated (each 1 to 10000).
    #[arg(long, value_delimiter = ',', value_parser = waiter_count, default_value = "1,10,100,1000", help_heading = "Workload")]
    pub(crate) waiters: Vec<usize>,
    /// U3: how many locks to hold and keep alive at once (1 to 100000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000), default_value_t = 1000, help_heading = "Workload")]
    pub(crate) locks: u32,
    /// The servers' durability (as `run --durability`, one level): P1 judges each backend
    /// against its setting's published expectation.
    #[arg(long, value_enum, default_value_t = crate::durability::Durability::Default, help_heading = "Target")]
    pub(crate) durability: crate::durability::Durability,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    pub(crate) out: PathBuf,
}

/// One of `--waiters`: a count from 1 to 10,000.
pub(crate) fn waiter_count(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().ok().filter(|n| (1..=10_000).contains(n)).ok_or_else(|| format!("{s:?} is not a number of waiters from 1 to 10000"))
}

#[derive(Args, Debug)]
pub(crate) struct CalibrateArgs {
    /// Concurrent connections (clients) in every rate measurement, for dlbench and the
    /// reference tools alike.
    #[arg(long, default_value_t = 8, help_heading = "Connection")]
    pub(crate) connections: usize,
    /// Length of each rate measurement.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Workload")]
    pub(crate) seconds: Duration,
    /// Instead of the reference tools: each recipe's official client (redis-py, pottery,
    /// curator, kazoo, etcd-go) beside dlbench on the hot-key and many-keys workloads,
    /// interleaved; `all` or a comma-separated list of peer or backend names. Needs
    /// `sh scripts/setup.sh --peers`.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "PEERS", help_heading = "Target")]
    pub(crate) peers: Option<String>,
    /// With --peers: runs per side for each row (dlbench, peer, dlbench, peer, ...).
    #[arg(long, default_value_t = 3, help_heading = "Workload")]
    pub(crate) repeats: usize,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    pub(crate) out: PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct SoakArgs {
    /// Backends, comma-separated; `default` is the five families' own recipes, `all` adds
    /// the other designs (pg-advisory, pg-advisory-xact, redisson, etcd-v3lock, nats). Each runs its share of
    /// --duration, in turn.
    #[arg(long, default_value = "default", help_heading = "Target")]
    pub(crate) backends: String,
    /// Total length of the soak, shared equally by the backends.
    #[arg(long, value_parser = duration, default_value = "1h", help_heading = "Workload")]
    pub(crate) duration: Duration,
    /// The backends take turns this many times (A B C, A B C, ...), each turn
    /// --duration / (backends x rounds) long [default: enough that the first round ends
    /// inside the warm-up, so every backend's working set is there before growth is judged;
    /// 14 for an hour; fewer when turns would be shorter than two fault intervals]
    #[arg(long, help_heading = "Workload")]
    pub(crate) rounds: Option<u32>,
    /// Faults cycled in turn (forms as in `run --nemesis`); faults the target cannot inject
    /// on a backend are skipped there and listed.
    #[arg(long, default_value = "kill,pause,partition,isolate,delay,clock,failover", help_heading = "Faults")]
    pub(crate) nemesis: String,
    /// Start a fault every this often; each lasts half of it.
    #[arg(long, value_parser = duration, default_value = "10s", help_heading = "Faults")]
    pub(crate) nemesis_interval: Duration,
    /// The workload every backend runs (shipped name or TOML file); under faults a 0 ms
    /// hold becomes 25 ms, as in `run`.
    #[arg(long, default_value = "many-keys", help_heading = "Workload")]
    pub(crate) workload: String,
    /// Concurrent clients per backend.
    #[arg(long, help_heading = "Workload")]
    pub(crate) clients: Option<usize>,
    /// Seed for key choice and sampled durations [default: random, and printed]
    #[arg(long, help_heading = "Workload")]
    pub(crate) seed: Option<u64>,
    /// Largest growth of dlbench's resident memory after the warm-up (5 minutes, or a
    /// twelfth of a shorter soak) over the rest of the soak, in percent.
    #[arg(long, default_value_t = 5.0, help_heading = "Output")]
    pub(crate) max_rss_growth: f64,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    pub(crate) out: PathBuf,
    /// Where the servers are: local, compose or external (as in `run`).
    #[arg(long, default_value = "local", value_parser = ["local", "compose", "external"], help_heading = "Target")]
    pub(crate) target: String,
    /// The endpoints file of an external target.
    #[arg(long, help_heading = "Target")]
    pub(crate) endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT, help_heading = "Target")]
    pub(crate) compose_project: String,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Connection")]
    pub(crate) connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"], help_heading = "Connection")]
    pub(crate) connections: String,
}

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

pub(crate) fn client_list(s: &str) -> Result<Vec<usize>, String> {
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
pub(crate) struct RunArgs {
    /// Backends to run, comma-separated; `default` is the five families' own recipes
    /// (postgres, redis, redlock, zookeeper, etcd); `all` adds the other designs
    /// (pg-advisory, pg-advisory-xact, mariadb, mariadb-get-lock, redisson, etcd-v3lock,
    /// nats);
    /// `memory` is the in-process reference.
    #[arg(long, visible_alias = "backend", default_value = "default", help_heading = "Target")]
    pub(crate) backends: String,
    /// Workloads to run in order, comma-separated: shipped names (hot-key, many-keys, zipf,
    /// long-hold, open-loop) or TOML files; the flags under Workload override the workloads'
    /// own values [default: hot-key,many-keys; with --keys alone: hot-key for 1 key,
    /// many-keys otherwise]
    #[arg(long, help_heading = "Workload")]
    pub(crate) workload: Option<String>,
    /// Concurrent clients per backend; a list (1,4,16,64) runs every workload once per
    /// count, a sweep the report plots as throughput against clients.
    #[arg(long, help_heading = "Workload")]
    pub(crate) clients: Option<String>,
    /// Number of keys. Without --workload, a single phase with this many keys.
    #[arg(long, help_heading = "Workload")]
    pub(crate) keys: Option<usize>,
    /// How keys are chosen: uniform or zipf.
    #[arg(long, help_heading = "Workload")]
    pub(crate) key_dist: Option<KeyDist>,
    /// Measured time per phase (e.g. 5s, 500ms).
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    pub(crate) duration: Option<Duration>,
    /// Stop each phase after this many operations (warm-up included).
    #[arg(long, help_heading = "Workload")]
    pub(crate) ops: Option<u64>,
    /// Warm-up per phase, excluded from the figures.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    pub(crate) warmup: Option<Duration>,
    /// Time inside the critical section: 5ms, uniform(1ms,10ms) or exp(5ms).
    #[arg(long, help_heading = "Workload")]
    pub(crate) hold: Option<Dist>,
    /// Closed loop: time between a release and the next acquire (same forms as --hold).
    #[arg(long, help_heading = "Workload")]
    pub(crate) think: Option<Dist>,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    pub(crate) ttl: Option<Duration>,
    /// How long one acquire may wait for a contended lock.
    #[arg(long, value_parser = duration, help_heading = "Workload")]
    pub(crate) wait_timeout: Option<Duration>,
    /// Open loop: acquisitions per second in total; latency counts from intended starts.
    #[arg(long, help_heading = "Workload")]
    pub(crate) rate: Option<f64>,
    /// Seed for key choice and sampled durations [default: random, and printed]
    #[arg(long, help_heading = "Workload")]
    pub(crate) seed: Option<u64>,
    /// Run every phase this many times, interleaved across backends (all backends' phases,
    /// then again), so that `compare` can judge a change against the spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100), help_heading = "Workload")]
    pub(crate) repeat: u32,
    /// Faults to inject in turn, comma-separated (the faults and targets are written into
    /// this help from the parser's own lists by `command()`).
    #[arg(long, help_heading = "Faults")]
    pub(crate) nemesis: Option<String>,
    /// What the run answers. `answer`: speed (hot-key, many-keys, no fault), then a fault
    /// round per backend (its leader or one server killed, then paused, each in a window of
    /// its own, holders inside 200 ms, TTL 2s) for safety, availability, recovery and the
    /// class observed. `speed`: the workloads alone (with --nemesis: under those faults);
    /// the CI gate and the baselines use it [default: answer when no Workload flag, --nemesis,
    /// --shard or --durability list is given and the target is local or compose; speed
    /// otherwise]
    #[arg(long, value_enum, help_heading = "Faults")]
    pub(crate) preset: Option<crate::run::Preset>,
    /// Start a fault every this often; each lasts half of it [default: 10s; 4s in the
    /// answer plan's fault round]
    #[arg(long, value_parser = duration, help_heading = "Faults")]
    pub(crate) nemesis_interval: Option<Duration>,
    /// The servers' durability on the local target: default (the settings it always ran
    /// with: Redis keeps nothing on disk, the databases and ZooKeeper their own defaults),
    /// strict (on disk before each acknowledgement) or relaxed (flushed about once a second).
    /// A list (relaxed,strict) runs every backend at each level on fresh servers, for the
    /// durability table. Compose and external targets cannot set it: they record what they find.
    #[arg(long, default_value = "default", help_heading = "Faults")]
    pub(crate) durability: String,
    /// Whether the protected resource refuses stale fencing tokens: off, on, or both (one
    /// run measures both; the verdict speaks for the side chosen).
    #[arg(long, value_enum, default_value = "both", help_heading = "Faults")]
    pub(crate) fencing: FencingMode,
    /// Run shard I of N of this plan (I from 0, as a Kubernetes completion index): clients
    /// [I*C/N, (I+1)*C/N) of --clients C, on the keys of the whole plan; `dlbench merge`
    /// combines the shards' result sets. One backend, one workload, the same --seed in every
    /// shard, a compose or external target.
    #[arg(long, env = "DLBENCH_SHARD", help_heading = "Shards")]
    pub(crate) shard: Option<crate::shard::ShardSpec>,
    /// With --shard: start the phase at this Unix time in seconds, the same in every shard
    /// (e.g. $(( $(date +%s) + 30 ))) [default: at once]
    #[arg(long, env = "DLBENCH_START_AT", requires = "shard", help_heading = "Shards")]
    pub(crate) start_at: Option<u64>,
    /// Where the protected resource lives: `local` (in this process), redis://HOST:PORT[/DB]
    /// or postgres://[USER@]HOST:PORT/DB, a dedicated server (never a lock server under test)
    /// where every critical-section step is one atomic call stamped with the server's clock,
    /// so shards on several hosts are judged in one place. Password: DLBENCH_RESOURCE_PASSWORD.
    #[arg(long, env = "DLBENCH_RESOURCE", default_value = "local", help_heading = "Shards")]
    pub(crate) resource: String,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results", help_heading = "Output")]
    pub(crate) out: PathBuf,
    /// Stream every operation to history.jsonl and check it at the end. `auto`: on, except
    /// for the memory backend (hundreds of thousands of operations a second).
    #[arg(long, value_enum, default_value = "auto", help_heading = "Output")]
    pub(crate) history: HistoryMode,
    /// Exit 0 even when a verdict is invalid (exit 1 otherwise) or unknown (exit 3), for
    /// exploratory runs.
    #[arg(long, help_heading = "Output")]
    pub(crate) no_fail_on_violation: bool,
    /// Print every column of the per-phase table. Without it the table keeps within 100
    /// columns (or a wider terminal's width), naming the columns it left out; summary.md and
    /// the page have every column.
    #[arg(long, help_heading = "Output")]
    pub(crate) wide: bool,
    /// After its phases, measure each backend's expiry (a holder vanishes: time to the next
    /// grant, TTL 3s) and reentrancy (the holder acquires again), for the four-properties
    /// table of the report.
    #[arg(long, help_heading = "Output")]
    pub(crate) properties: bool,
    /// Where the servers are: local (dlbench starts them), compose (the services of
    /// docker-compose.yml), external (the endpoints file given with --endpoints). The
    /// compose file's bench service sets DLBENCH_TARGET=compose.
    #[arg(long, env = "DLBENCH_TARGET", default_value = "local", value_parser = ["local", "compose", "external"], help_heading = "Target")]
    pub(crate) target: String,
    /// The endpoints file of an external target (see docs/external.md).
    #[arg(long, help_heading = "Target")]
    pub(crate) endpoints: Option<PathBuf>,
    /// The compose project holding the services.
    #[arg(long, env = "COMPOSE_PROJECT_NAME", default_value = crate::cluster::compose::DEFAULT_PROJECT, help_heading = "Target")]
    pub(crate) compose_project: String,
    /// Let an external target's endpoints be off this machine (by default only loopback).
    #[arg(long, help_heading = "Target")]
    pub(crate) allow_remote: bool,
    /// Bound on reaching each endpoint and on each client's connection.
    #[arg(long, value_parser = duration, default_value = "5s", help_heading = "Connection")]
    pub(crate) connect_timeout: Duration,
    /// How clients reach the servers: per-client (each its own connection, session or lease,
    /// as N application processes would) or shared (one multiplexed connection per server,
    /// one PostgreSQL pool, as one process with N threads). ZooKeeper is always per-client.
    #[arg(long, default_value = "per-client", value_parser = ["per-client", "shared"], help_heading = "Connection")]
    pub(crate) connections: String,
}

#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// The shards' run directories (or --out roots whose `latest` is one), every shard of
    /// one plan once.
    #[arg(required = true)]
    pub(crate) shards: Vec<PathBuf>,
    /// Results root; the merged set goes to DIR/merged-<run-id>/.
    #[arg(long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Exit 0 even when the merged verdict is invalid or unknown.
    #[arg(long)]
    pub(crate) no_fail_on_violation: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// A history.jsonl written by `dlbench run` (or by hand).
    pub(crate) history: PathBuf,
    /// Print the full result, with evidence, as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct UpArgs {
    /// Backends to start, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    pub(crate) backends: String,
    /// Write the endpoints (TOML) to this file.
    #[arg(long)]
    pub(crate) endpoints: Option<PathBuf>,
    /// Where the servers' logs go (DIR/up-<id>/servers/; their data is in a runtime
    /// directory linked from there, see docs/server-data.md).
    #[arg(long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Start the target as fault runs do: links through proxies, Redlock under the clock
    /// shim, Redis with a replica.
    #[arg(long)]
    pub(crate) faults: bool,
    /// Require the password held in this environment variable: Redis (requirepass),
    /// PostgreSQL's postgres user, MariaDB's dlbench user, etcd's root user (auth on), NATS's dlbench user. The endpoints file names the
    /// variable, never the password.
    #[arg(long)]
    pub(crate) password_env: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct LockArgs {
    /// Endpoints file written by `dlbench up --endpoints FILE`.
    #[arg(long)]
    pub(crate) endpoints: PathBuf,
    /// Which backend's lock to take.
    #[arg(long)]
    pub(crate) backend: String,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration, default_value = "10s")]
    pub(crate) ttl: Duration,
    /// Give up after waiting this long [default: wait until acquired]
    #[arg(long, value_parser = duration)]
    pub(crate) wait: Option<Duration>,
    /// Chubby's lock-delay (etcd only): when the holder before us lost its session instead
    /// of releasing, enter only this long after its claim went, so its in-flight writes
    /// land first. 0s is off.
    #[arg(long, value_parser = duration, default_value = "0s")]
    pub(crate) lock_delay: Duration,
    /// The lock name.
    pub(crate) name: String,
    /// The command to run while holding the lock.
    #[arg(last = true, required = true)]
    pub(crate) command: Vec<String>,
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
    // Its glossary is built from the judgement's constants, and --nemesis's help from the
    // parser's lists of faults and targets, so both are added here.
    let nemesis = nemesis_help();
    cmd.mut_subcommand("run", |c| c.after_long_help(run_after_long_help()).mut_arg("nemesis", |a| a.help(nemesis.clone()).long_help(nemesis)))
}

