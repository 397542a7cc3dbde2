//! Command-line parsing and the process-level plumbing: logging, signals, exit codes.
//!
//! The help reads like ripgrep's: `dlbench -h` lists one line per subcommand, `dlbench X
//! --help` gives the detail, the options under headings, every default and examples that
//! run as written (a unit test parses each one).

mod args;
mod dispatch;
mod help;
mod output;

mod plans;
mod preset;
#[cfg(test)]
mod tests;

use std::time::Duration;

use clap::FromArgMatches;

pub use args::command;
use args::Cli;
use dispatch::dispatch;

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
            "error,dlbench=warn,dlbench_etcd=warn,dlbench_zookeeper=warn,dlbench_redis=warn,dlbench_redlock=warn,dlbench_postgres=warn,dlbench_nats=warn"
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

