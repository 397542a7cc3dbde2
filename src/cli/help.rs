//! The help text's parts: the version line, each subcommand's examples (every one is parsed
//! by a unit test) and the defaults that come from the shipped workload files.

use crate::workload::{self, KeyDist, Workload};

/// `dlbench 0.1.0 (commit 0123456789ab)`, or `(commit unknown)` for a build outside git.
pub(crate) fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let commit = crate::facts::commit().map(|c| match c.strip_suffix("-dirty") {
            Some(h) => format!("{}-dirty", &h[..h.len().min(12)]),
            None => c[..c.len().min(12)].to_string(),
        });
        format!("{} (commit {})", env!("CARGO_PKG_VERSION"), commit.as_deref().unwrap_or("unknown"))
    })
}

pub(crate) const RUN_EXAMPLES: &str = "\
Examples:
  dlbench run                                   # every backend, hot-key then many-keys
  dlbench run --backends redis,etcd --workload zipf --clients 1,4,16
  dlbench run --backends memory --workload many-keys --duration 10s
  dlbench run --workload hot-key --duration 30s --nemesis kill:leader,pause --nemesis-interval 10s
  dlbench run --backends postgres,redis --repeat 5 --seed 1 --out results/ab
  dlbench run --target external --endpoints ep.toml";

/// The end of `run --help`: the examples, then the glossary of every word the run's tables
/// print (the same text as docs/glossary.md and the report page's).
pub(crate) fn run_after_long_help() -> String {
    format!("{RUN_EXAMPLES}\n\n{}", glossary_text(100))
}

/// The glossary for a terminal: a heading per section, each term with its meaning wrapped
/// to `width` columns under it.
pub(crate) fn glossary_text(width: usize) -> String {
    use crate::judgement::glossary::{entries, SECTIONS};
    let mut s = String::from("Glossary (also docs/glossary.md and the report page):\n");
    let all = entries();
    for (i, title) in SECTIONS.iter().enumerate() {
        s.push_str(&format!("\n{title}\n"));
        for (_, term, meaning) in all.iter().filter(|e| e.0 == i) {
            s.push_str(&crate::util::wrap(&format!("{term}: {meaning}."), width, 2, 6));
        }
    }
    s
}

/// `run --nemesis`'s help, written from the lists `FaultSpec`'s parser reads, so a fault or
/// target the parser accepts is one the help names.
pub(crate) fn nemesis_help() -> String {
    use crate::nemesis::{either, FAULT_NAMES, TARGET_NAMES};
    format!(
        "Faults to inject in turn, comma-separated: {}, each optionally {} (e.g. kill:leader,pause). Adds the AP / CP table to the output [default: none]",
        FAULT_NAMES.iter().map(|f| f.0).collect::<Vec<_>>().join(", "),
        either(TARGET_NAMES.iter().map(|t| format!(":{}", t.0)))
    )
}

pub(crate) const UP_EXAMPLES: &str = "\
Examples:
  dlbench up --endpoints ep.toml                # every backend, until Ctrl-C
  dlbench up --backends redis,etcd --faults --endpoints ep.toml
  dlbench up --backends redis --password-env BENCH_PASSWORD --endpoints ep.toml   # BENCH_PASSWORD exported";

pub(crate) const LOCK_EXAMPLES: &str = "\
Examples:
  dlbench lock --endpoints ep.toml --backend etcd backup -- pg_dump mydb
  dlbench lock --endpoints ep.toml --backend redis --ttl 30s --wait 5s nightly -- ./nightly.sh";

pub(crate) const CHECK_EXAMPLES: &str = "\
Examples:
  dlbench check results/latest/history.jsonl
  dlbench check results/latest/history.jsonl --json";

pub(crate) const MERGE_EXAMPLES: &str = "\
Examples:
  dlbench merge shards/0 shards/1 shards/2 --out results
  dlbench merge shards/*/latest";

pub(crate) const REPORT_EXAMPLES: &str = "\
Examples:
  dlbench report results/latest";

pub(crate) const COMPARE_EXAMPLES: &str = "\
Examples:
  dlbench compare results/baseline results/latest
  dlbench compare base/summary.json new/summary.json --threshold ops_per_sec=10 --markdown compare.md
  dlbench compare results/base results/head --format markdown > compare.md   # the PR comment";

pub(crate) const TREND_EXAMPLES: &str = "\
Examples:
  dlbench trend results/c1 results/c2 results/c3 results/c4 results/c5
  dlbench trend ci/1/head ci/2/head ci/3/head --html trend.html --json trend.json --threshold ops_per_sec=10";

pub(crate) const SCHEMA_EXAMPLES: &str = "\
Examples:
  dlbench schema > schema/summary.schema.json";

pub(crate) const SCENARIO_EXAMPLES: &str = "\
Examples:
  dlbench scenario list                         # every entry: id, title, source
  dlbench scenario all                          # every entry on every backend it applies to
  dlbench scenario S1,S3 --backends redlock
  dlbench scenario S8 --backends etcd,zookeeper
  dlbench scenario U6 --backends pg-advisory,pg-advisory-xact   # PgBouncer (needs pgbouncer)";

pub(crate) const SOAK_EXAMPLES: &str = "\
Examples:
  dlbench soak                                  # 1h, every backend, every fault
  dlbench soak --backends redis,etcd --duration 10m --nemesis kill,pause";

pub(crate) const CALIBRATE_EXAMPLES: &str = "\
Examples:
  dlbench calibrate                             # about 90 s; results/calibrate-<id>/
  dlbench calibrate --connections 16 --seconds 10s
  dlbench calibrate --peers                     # official clients beside dlbench (sh scripts/setup.sh --peers first)
  dlbench calibrate --peers redis-py,etcd --repeats 5";

/// A flag's value in one workload, as the flag takes it (None: the workload leaves it unset).
pub(crate) fn workload_value(w: &Workload, flag: &str) -> Option<String> {
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
pub(crate) const WORKLOAD_FLAGS: &[&str] = &["clients", "keys", "key_dist", "duration", "ops", "warmup", "hold", "think", "ttl", "wait_timeout", "rate"];

/// `[default: ...]` for a flag that takes its default from the workload file, with the
/// values the shipped workloads really have (read from workloads/*.toml, compiled in).
pub(crate) fn workload_default(flag: &str) -> String {
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
pub(crate) fn append_help(a: clap::Arg, extra: &str) -> clap::Arg {
    let long = a.get_long_help().map(|h| format!("{h} {extra}"));
    let short = a.get_help().map(|h| format!("{h} {extra}")).unwrap_or_else(|| extra.to_string());
    let a = a.help(short);
    match long {
        Some(l) => a.long_help(l),
        None => a,
    }
}

