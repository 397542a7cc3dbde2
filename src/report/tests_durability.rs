//! The durability table and the label beside the verdict, from a built summary: the rows
//! function every renderer draws from, and a doctored summary it must not pass.

use super::tables::{durability_lines, durability_rows};
use super::text::{markdown, table};
use crate::durability::{keyed, settings, Durability};
use crate::judgement::FencingMode;
use crate::kind::BackendKind;
use crate::summary::{BackendSummary, Summary, WorkloadSummary};

/// One hot-key phase of 1,000 acquisitions at `ops`/s with `overlaps` seen.
fn phase(ops: f64, overlaps: u64) -> WorkloadSummary {
    let pct = serde_json::json!({"count": 1000, "mean": 100.0, "p50": 100, "p90": 500, "p99": 900, "p999": 990, "p9999": 999, "max": 1000});
    serde_json::from_value(serde_json::json!({
        "name": "hot-key", "clients": 8, "keys": 1, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
        "ops_per_sec": ops, "acquired": 1000, "acquire_latency_us": pct, "service_latency_us": pct,
        "release_latency_us": pct, "handoff_latency_us": pct, "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
        "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
        "sections": 1000, "exposure": 0.9, "overlaps": overlaps, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
    }))
    .unwrap()
}

/// `kind` at `level` (named `kind@level`, as a run with several levels names it).
fn at(kind: BackendKind, level: Option<Durability>, ops: f64, overlaps: u64) -> BackendSummary {
    let mut b = BackendSummary::empty(&keyed(kind.name(), level), None);
    b.workloads = vec![phase(ops, overlaps)];
    b.counts.overlaps = overlaps;
    b.ops_per_sec = ops;
    b.durability = Some(settings(kind, level.unwrap_or_default()).record());
    b
}

fn summary(backends: Vec<BackendSummary>) -> Summary {
    let mut s = Summary::begin("r", "local", FencingMode::Both, vec!["power-loss".into()]);
    s.backends = backends;
    s.attach_checks(&[], FencingMode::Both);
    s
}

/// redis and postgres at relaxed and strict: relaxed redis lost a lock (3 overlaps).
fn two_levels() -> Summary {
    use Durability::*;
    summary(vec![
        at(BackendKind::Redis, Some(Relaxed), 1000.0, 3),
        at(BackendKind::Postgres, Some(Relaxed), 400.0, 0),
        at(BackendKind::Redis, Some(Strict), 250.0, 0),
        at(BackendKind::Postgres, Some(Strict), 300.0, 0),
        at(BackendKind::Etcd, Some(Relaxed), 200.0, 0),
        at(BackendKind::Etcd, Some(Strict), 210.0, 0),
    ])
}

/// What the table must say about `s`: one row per backend x level, the settings behind each,
/// the verdict beside them, and the stricter level's rate against the least strict one's.
fn check(s: &Summary) -> Result<(), String> {
    let rows = durability_rows(s);
    let row = |d: &str, l: &str| rows.iter().find(|r| r[0] == d && r[1] == l).ok_or(format!("no row {d} {l}: {rows:?}"));
    let ensure = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("{what}: {rows:?}")) };
    ensure(rows.len() == 6, "six rows")?;
    let (rr, rs) = (row("redis", "relaxed")?, row("redis", "strict")?);
    ensure(rr[2] == "appendonly yes, appendfsync everysec" && rs[2] == "appendonly yes, appendfsync always", "redis settings")?;
    ensure(rr[3].contains("unsafe") && rr[4] == "3", "relaxed redis is unsafe with its 3 overlaps")?;
    ensure(!rs[3].contains("unsafe") && rs[4] == "0", "strict redis is not unsafe")?;
    ensure(rr[6] == "1 (least strict)" && rs[6] == "0.25", "strict redis costs 250/1000")?;
    ensure(row("postgres", "strict")?[6] == "0.75" && row("postgres", "relaxed")?[2] == "synchronous_commit off", "postgres")?;
    ensure(row("etcd", "strict")?[6].contains("one level"), "etcd has one level")?;
    Ok(())
}

#[test]
fn the_durability_table_has_backend_by_level_with_verdict_and_cost() {
    let s = two_levels();
    check(&s).unwrap();
    // Every renderer draws the same rows.
    let md = markdown(&s);
    assert!(md.contains("## Durability") && md.contains("| redis | strict | appendonly yes, appendfsync always |"), "{md}");
    let page = super::html::page(&super::Input { summary: s.clone(), verdicts: vec![], incomplete: None, has_history: false, files: vec![] }, &[], &super::evidence::Excerpts::new());
    assert!(page.contains("id=\"durability\"") && page.contains("appendonly yes, appendfsync everysec"), "the page has the table");
    // With several levels no label lines: the table says it.
    assert!(durability_lines(&s).is_empty());
    // The main table keys each level as a backend of its own, grouped under its family.
    assert!(table(&s).lines().any(|l| l.starts_with("redis@relaxed")), "{}", table(&s));
}

#[test]
fn the_check_fails_on_a_doctored_summary() {
    // The levels swapped on redis: strict now looks cheaper than relaxed and safe at relaxed.
    let mut s = two_levels();
    let (a, b) = (s.backends[0].durability.clone(), s.backends[2].durability.clone());
    s.backends[0].durability = b;
    s.backends[2].durability = a;
    assert!(check(&s).is_err(), "a doctored summary passed: {:?}", durability_rows(&s));
    // A strict phase's rate changed: the ratio is not 0.25 any more.
    let mut s = two_levels();
    s.backends[2].workloads[0].ops_per_sec = 500.0;
    assert!(check(&s).unwrap_err().contains("250/1000"));
}

#[test]
fn one_level_is_a_label_beside_the_verdict_and_no_table() {
    let s = summary(vec![at(BackendKind::Redis, None, 1000.0, 3), at(BackendKind::Postgres, None, 400.0, 0)]);
    assert!(durability_rows(&s).is_empty());
    let lines = durability_lines(&s);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let redis = lines.iter().find(|l| l.starts_with("redis (")).unwrap();
    assert!(redis.contains("nothing on disk") && redis.contains(": unsafe"), "{redis}");
    assert!(markdown(&s).contains("- redis (no persistence"), "{}", markdown(&s));
}
