//! One function per subcommand: each builds its input, calls the producer and returns the
//! exit code; `run` and `soak` hand their result to `output`, which renders and prints it.

use tokio_util::sync::CancellationToken;

use super::args::{CalibrateArgs, CheckArgs, Cli, Command, LockArgs, UpArgs};
use super::output;
use super::plans::{run_plan, soak_plan};
use crate::kind::{self, BackendKind};

/// SIGINT or SIGTERM cancels the token once; a second one kills every server at once and
/// exits, for a user who does not want to wait for the clean shutdown.
pub(crate) fn install_signals(cancel: CancellationToken) {
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

pub(crate) async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let cancel = CancellationToken::new();
    match cli.command {
        Command::Run(a) => {
            install_signals(cancel.clone());
            let wide = a.wide;
            let mut plan = run_plan(a)?;
            // Validated as written (in run_plan), then shortened when DLBENCH_TIME_SCALE asks
            // (README test).
            plan.scale_in_time()?;
            Ok(crate::run::run(plan, cancel).await?.map_or(130, |f| output::run_finished(&f, wide)))
        }
        Command::Soak(a) => {
            install_signals(cancel.clone());
            Ok(crate::run::run(soak_plan(a)?, cancel).await?.map_or(130, |f| output::run_finished(&f, false)))
        }
        Command::Up(a) => up(a, cancel).await,
        Command::Check(a) => check(a),
        Command::Merge(a) => {
            let (summary, dir) = crate::merge::merge(&a.shards, &a.out)?;
            Ok(output::merged(&summary, &dir, !a.no_fail_on_violation))
        }
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
            let gate = crate::compare::Gate::parse(&a.gate)?;
            let c = crate::compare::compare_gated(&crate::compare::load_side(&a.base)?, &crate::compare::load_side(&a.new)?, &t, &gate, a.allow_mismatch)?;
            output::compared(&c, a.format, a.json.as_deref(), a.markdown.as_deref())
        }
        Command::Trend(a) => {
            let t = crate::compare::thresholds(&a.thresholds)?;
            let trend = crate::trend::trend(&a.dirs, &t, &crate::compare::Gate::parse(&a.gate)?, a.allow_mismatch)?;
            output::trended(&trend, &a.html, a.json.as_deref())
        }
        Command::Calibrate(a) => calibrate(a, cancel).await,
        Command::Scenario(a) if a.ids.trim().eq_ignore_ascii_case("list") => Ok(output::scenario_list()),
        Command::Scenario(a) => {
            install_signals(cancel.clone());
            let args = crate::scenario::command::ScenarioArgs {
                ids: a.ids,
                backends: a.backends,
                out: a.out,
                sizes: crate::scenario::users::Sizes { waiters: a.waiters, locks: a.locks as usize },
                durability: a.durability,
            };
            Ok(crate::scenario::command::command(args, cancel).await?.map_or(130, |(summary, dir)| output::scenarios(&summary, &dir)))
        }
        Command::DelayNode(a) => Ok(tokio::task::spawn_blocking(move || crate::nemesis::nfdelay::run(a.delay, a.max)).await??),
        Command::Lock(a) => lock(a).await,
    }
}

async fn up(a: UpArgs, cancel: CancellationToken) -> anyhow::Result<i32> {
    install_signals(cancel.clone());
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    let password = match &a.password_env {
        Some(var) => Some(std::env::var(var).map_err(|_| anyhow::anyhow!("--password-env {var}: {var} is not set in the environment"))?),
        None => None,
    };
    let opts = crate::cluster::local::TargetOptions { proxies: a.faults, clock_shim: a.faults, redis_replica: a.faults, power_loss: false, durability: Default::default(), password, connect_timeout: None };
    crate::up::up(backends, a.endpoints, a.out, opts, a.password_env, cancel).await
}

async fn calibrate(a: CalibrateArgs, cancel: CancellationToken) -> anyhow::Result<i32> {
    install_signals(cancel.clone());
    let args = crate::calibrate::CalibrateArgs {
        connections: a.connections,
        seconds: crate::timescale::scale_seconds(a.seconds)?,
        out: a.out,
        peers: a.peers,
        repeats: a.repeats,
    };
    let done = crate::calibrate::command(args, cancel).await?;
    Ok(output::calibrated(&done))
}

async fn lock(a: LockArgs) -> anyhow::Result<i32> {
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

pub(crate) fn check(a: CheckArgs) -> anyhow::Result<i32> {
    if a.history.is_dir() {
        let inside = a.history.join("history.jsonl");
        if inside.is_file() {
            anyhow::bail!("{} is a directory: check takes a history file (try {})", a.history.display(), inside.display());
        }
        anyhow::bail!("{} is a directory, not a history file (dlbench run writes RUN_DIR/history.jsonl)", a.history.display());
    }
    let (verdicts, read) = crate::checker::check_file_counted(&a.history)?;
    if verdicts.is_empty() {
        anyhow::bail!("{} holds no operations", a.history.display());
    }
    // A run killed mid-write leaves a cut last line: what was judged is said, so the reader
    // knows the tail is missing (on stderr under --json, which keeps stdout JSON).
    use std::fmt::Write as _;
    let mut out = String::new();
    if read.torn_tail {
        let note = format!("read {} records of {}; ignored its partial last line (cut off: the writer was killed)", read.records, a.history.display());
        if a.json { eprintln!("dlbench: {note}") } else { writeln!(out, "{note}")? }
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&verdicts)?)?;
    } else {
        for v in &verdicts {
            writeln!(out, "{} {}: {}", v.backend, v.workload, v.describe())?;
            for r in &v.results {
                writeln!(out, "  {:<17} {:<8} {}", r.checker, r.valid.to_string(), r.message)?;
                for e in &r.evidence {
                    writeln!(out, "      {}", e.what)?;
                    for op in &e.ops {
                        writeln!(out, "        {op}")?;
                    }
                }
            }
        }
    }
    let worst = crate::checker::worst(&verdicts);
    let verdict = if crate::checker::interrupted(&verdicts) {
        format!("verdict: {worst} (interrupted: the run was cut short; this judges what completed)")
    } else {
        format!("verdict: {worst}")
    };
    // Under --json stdout is the JSON alone; the verdict line goes to stderr.
    if a.json { eprintln!("dlbench: {verdict}") } else { writeln!(out, "{verdict}")? }
    write_out(&out)?;
    Ok(crate::judgement::exit_code(worst))
}

/// Print `text` on stdout; a reader that stopped reading (`dlbench check ... | head`) is not
/// an error, and never a panic: the exit status stays the verdict's.
fn write_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
