//! Numbers that hold up, in every renderer (terminal table, summary.md, report.html): a
//! percentile only with the samples to back it, latencies in their column's unit, server
//! counters in units that fit, rates per workload (never pooled), growth trends only from
//! runs long enough, no empty tables.

use super::evidence::Excerpts;
use super::html::page;
use super::text::{markdown, properties_table, table};
use super::Input;
use crate::judgement::FencingMode;
use crate::summary::usage::{Trend, UsageSummary};
use crate::summary::{BackendSummary, Summary, WorkloadSummary};

/// A phase of `n` acquisitions: p50 1 µs, p99 = p99.9 = max 595.97 ms (as HdrHistogram
/// reports a tail it has no samples for).
fn phase(name: &str, ops: f64, n: u64) -> WorkloadSummary {
    let pct = serde_json::json!({"count": n, "mean": 100.0, "p50": 1, "p90": 500, "p99": 595_970, "p999": 595_970, "p9999": 595_970, "max": 595_970});
    serde_json::from_value(serde_json::json!({
        "name": name, "clients": 8, "keys": 1, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
        "ops_per_sec": ops, "acquired": n, "acquire_latency_us": pct, "service_latency_us": pct,
        "release_latency_us": pct, "handoff_latency_us": pct, "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
        "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
        "sections": 0, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
    }))
    .unwrap()
}

fn summary(backends: Vec<BackendSummary>) -> Summary {
    let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
    s.backends = backends;
    s
}

fn backend(name: &str, phases: Vec<WorkloadSummary>) -> BackendSummary {
    let mut b = BackendSummary::empty(name, None);
    // The backend's own figure is the pooled one (acquisitions over all phases' seconds).
    b.ops_per_sec = 1614.0;
    b.workloads = phases;
    b
}

fn html(s: &Summary) -> String {
    let input = Input { summary: s.clone(), verdicts: vec![], incomplete: None, has_history: false, files: vec![] };
    page(&input, &[], &Excerpts::new())
}

/// The issue's case: about 48 acquisitions gave p99 = p99.9 = max with no warning, and a
/// "p50 ms" column showed "1 µs".
#[test]
fn percentiles_need_their_samples_everywhere() {
    let s = summary(vec![backend("etcd", vec![phase("hot-key", 9.6, 48)])]);
    let term = table(&s);
    let row = term.lines().find(|l| l.starts_with("etcd")).expect(&term);
    assert_eq!(row.matches("- (n=48)").count(), 2, "p99 and p99.9: {row}");
    assert!(!row.contains("595.97") && !row.contains("µs"), "{row}");
    assert!(row.contains(" 0.001 "), "1 µs in a ms column is 0.001: {row}");
    let md = markdown(&s);
    // The decision table's p99 says the same; the phase's row is the one naming its workload.
    let answer = md.lines().find(|l| l.starts_with("| etcd |")).expect(&md);
    assert!(answer.contains("| - (n=48) |"), "{answer}");
    let mrow = md.lines().find(|l| l.starts_with("| etcd |") && l.contains("hot-key")).expect(&md);
    assert!(mrow.contains("| 0.001 | - (n=48) | - (n=48) |"), "{mrow}");
    let page = html(&s);
    assert!(page.contains("<td>0.001</td><td>- (n=48)</td><td>- (n=48)</td><td>595.97</td>"), "the page's p50, p99, p99.9, max");
    // With the samples, the figures are shown.
    let s = summary(vec![backend("etcd", vec![phase("hot-key", 9.6, 1000)])]);
    assert!(table(&s).lines().find(|l| l.starts_with("etcd")).unwrap().matches("595.97").count() == 2, "{}", table(&s));
}

/// The issue's case: postgres' acq/s 1614, the unlabelled mean of hot-key (221) and
/// many-keys (3008).
#[test]
fn the_properties_table_gives_each_workloads_rate() {
    let s = summary(vec![
        backend("postgres", vec![phase("hot-key", 221.0, 1000), phase("many-keys", 3008.0, 1000)]),
        backend("etcd", vec![phase("hot-key", 480.0, 1000)]),
    ]);
    let md = properties_table(&s);
    let pg = md.lines().find(|l| l.contains("| postgres |")).expect(&md);
    assert!(pg.contains("| 221 (hot-key), 3008 (many-keys) |"), "{pg}");
    assert!(!pg.contains("1614"), "{pg}");
    let etcd = md.lines().find(|l| l.contains("| etcd |")).expect(&md);
    assert!(etcd.contains("| 480 |"), "one workload needs no label: {etcd}");
    let page = html(&s);
    assert!(page.contains("<td>221 (hot-key), 3008 (many-keys)</td>") && !page.contains(">1614<"));
    // Repeats of a workload: their mean, said so.
    let mut reps = phase("hot-key", 230.0, 1000);
    reps.repeat = 1;
    let s = summary(vec![backend("postgres", vec![phase("hot-key", 210.0, 1000), reps, phase("many-keys", 3008.0, 1000)])]);
    assert!(properties_table(&s).contains("| 220 (hot-key, mean of 2), 3008 (many-keys) |"), "{}", properties_table(&s));
}

/// The issue's case: "0.000 WAL bytes, 163 WAL syncs" per acquisition.
#[test]
fn server_counters_are_in_units_that_fit() {
    let mut w = phase("hot-key", 221.0, 1000);
    w.server_cpu_us_per_acq = Some(80.0);
    w.dlbench_cpu_us_per_acq = Some(30.0);
    w.server_counters_per_acq = [("wal_bytes".to_string(), 0.0004), ("wal_syncs".to_string(), 163.2)].into();
    let mut r = phase("hot-key", 221.0, 1000);
    r.server_cpu_us_per_acq = Some(80.0);
    r.server_counters_per_acq = [("net_bytes".to_string(), 1536.0)].into();
    let s = summary(vec![backend("postgres", vec![w]), backend("redis", vec![r])]);
    let md = markdown(&s);
    assert!(md.contains("| 0.0004 bytes of WAL, 163 WAL syncs |"), "{md}");
    assert!(md.contains("| 1.5 KiB on the wire |"), "{md}");
    assert!(!md.contains("0.000 "), "{md}");
    assert!(html(&s).contains("<td class=\"l\">0.0004 bytes of WAL, 163 WAL syncs</td>"));
}

/// The issue's case: the page's resources table showed "etcd-1 PSS growth/hour +7489.9%"
/// from a 49 s run while the terminal said "run too short for a growth trend".
#[test]
fn growth_trends_only_from_runs_long_enough_on_the_page_too() {
    let t = Trend { first: 40.0, peak: 44.0, last: 44.0, mean: 42.0, growth_per_hour: Some(3145.8), growth_pct_per_hour: Some(7489.9), ..Trend::default() };
    let usage = |seconds: f64| UsageSummary {
        samples: seconds as u64,
        seconds,
        harness_rss_mb: t.clone(),
        harness_fds: t.clone(),
        servers_mb: [("etcd-1".to_string(), t.clone())].into(),
        ..UsageSummary::default()
    };
    let mut s = summary(vec![backend("etcd", vec![phase("hot-key", 480.0, 1000)])]);
    s.resources = Some(usage(49.0));
    let page = html(&s);
    assert!(!page.contains("7489.9"), "a 49 s run shows no growth per hour");
    assert!(page.contains("run too short for a growth trend"));
    s.resources = Some(usage(3600.0));
    assert!(html(&s).contains("+7489.9%"), "an hour-long run shows its trend");
}

/// The issue's case: calibrate's summary.md printed the workload table and the
/// four-properties table as headers without rows.
#[test]
fn a_calibration_has_no_empty_tables() {
    let mut s = summary(vec![]);
    s.calibration = Some(Default::default());
    let md = markdown(&s);
    assert!(!md.contains("| backend | workload |"), "no workload table without workloads: {md}");
    assert!(!md.contains("## The four properties"), "{md}");
    assert!(!md.contains("No anomaly flagged"), "{md}");
    assert!(md.contains("No workload was run: a calibration"), "{md}");
    let page = html(&s);
    assert!(!page.contains("<h2>Workloads</h2>") && !page.contains("id=\"properties\""));
    // A run keeps them.
    let s = summary(vec![backend("etcd", vec![phase("hot-key", 480.0, 1000)])]);
    let md = markdown(&s);
    assert!(md.contains("| backend | workload |") && md.contains("## The four properties"), "{md}");
}

/// The issue's run: postgres killed and restarted inside the cost window, its pg_stat_wal
/// started again, giving "0.000 WAL bytes, 63 WAL syncs" per acquisition. A phase whose
/// server a fault restarted has no server figures, and says why.
#[test]
fn no_server_cost_where_a_fault_restarted_the_server() {
    let mut w = phase("hot-key", 4.0, 51);
    w.server_cpu_us_per_acq = Some(23333.3);
    w.dlbench_cpu_us_per_acq = Some(24705.9);
    w.server_counters_per_acq = [("wal_syncs".to_string(), 63.098)].into();
    use crate::faultlog::{Effect, Mark, NemesisEvent};
    let ev = |phase: Mark, at_ms: u64| NemesisEvent::new("kill:leader", phase, &["postgres-1"], at_ms, Effect::confirmed("process gone"));
    w.nemesis = vec![ev(Mark::Start, 2504), ev(Mark::End, 4008)];
    let md = markdown(&summary(vec![backend("postgres", vec![w])]));
    let row = md.lines().find(|l| l.starts_with("| postgres | hot-key | 8 | 4 |")).expect(&md);
    assert!(row.contains("| - (server restarted) | 24705.9 | - (restarted by kill:leader: counters started again) |"), "{row}");
    assert!(!row.contains("63.1") && !row.contains("23333"), "{row}");
}
