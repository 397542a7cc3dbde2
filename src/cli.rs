//! Command-line parsing and the process-level plumbing: logging, signals, exit codes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::connect::Timeouts;
use crate::kind::{self, BackendKind};
use crate::run::RunPlan;
use crate::util::parse_duration;
use crate::workload::Workload;

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
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Backends to run, comma-separated, or `all` (postgres, redis, redlock, zookeeper, etcd;
    /// `memory` is the in-process reference).
    #[arg(long, default_value = "all")]
    backends: String,
    /// Concurrent clients per backend.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Number of keys. Without it the run has two phases: one hot key, then 64 keys.
    #[arg(long)]
    keys: Option<usize>,
    /// Measured time per phase (e.g. 5s, 500ms).
    #[arg(long, value_parser = duration, default_value = "5s")]
    duration: Duration,
    /// Warm-up per phase, excluded from the figures.
    #[arg(long, value_parser = duration, default_value = "1s")]
    warmup: Duration,
    /// Time spent inside the critical section.
    #[arg(long, default_value = "0ms")]
    hold: String,
    /// Time between releasing and the next acquire.
    #[arg(long, default_value = "0ms")]
    think: String,
    /// Lock TTL / lease / session timeout.
    #[arg(long, value_parser = duration, default_value = "10s")]
    ttl: Duration,
    /// How long one acquire may wait for a contended lock.
    #[arg(long, value_parser = duration, default_value = "5s")]
    wait_timeout: Duration,
    /// Seed for key choice and sampled durations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Results root; each run writes DIR/<run-id>/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Backends to start, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    backends: String,
    /// Write the endpoints (TOML) to this file.
    #[arg(long)]
    endpoints: Option<PathBuf>,
    /// Where the servers' data and logs go (DIR/up-<id>/servers/).
    #[arg(long, default_value = "results")]
    out: PathBuf,
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
    let base = Workload {
        clients: a.clients,
        duration: a.duration,
        warmup: a.warmup,
        hold: a.hold.parse().map_err(|e| anyhow::anyhow!("--hold: {e}"))?,
        think: a.think.parse().map_err(|e| anyhow::anyhow!("--think: {e}"))?,
        ttl: a.ttl,
        wait_timeout: a.wait_timeout,
        seed: a.seed,
        ..Workload::default()
    };
    let phases = match a.keys {
        Some(1) => vec![Workload { name: "hot-key".into(), keys: 1, ..base }],
        Some(k) => vec![Workload { name: "many-keys".into(), keys: k, ..base }],
        None => vec![
            Workload { name: "hot-key".into(), keys: 1, ..base.clone() },
            Workload { name: "many-keys".into(), keys: 64, ..base },
        ],
    };
    Ok(RunPlan { backends, phases, out: a.out, timeouts: Timeouts::default(), command: std::env::args().collect() })
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
                crate::target::local::process::kill_all_now();
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
            crate::run::run(run_plan(a)?, cancel).await
        }
        Command::Up(a) => {
            install_signals(cancel.clone());
            let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
            crate::up::up(backends, a.endpoints, a.out, cancel).await
        }
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

/// The whole program; returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DLBENCH_LOG").unwrap_or_else(|_| "warn".into()),
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
