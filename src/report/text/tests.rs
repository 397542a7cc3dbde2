use super::*;
use crate::report::tables::NOT_LOCAL;
use crate::summary::{BackendSummary, WorkloadSummary};
use crate::judgement::FencingMode;

fn row(clients: usize, ops: f64, p99: u64, server: Option<f64>) -> WorkloadSummary {
    let pct = serde_json::json!({"count": 10, "mean": 100.0, "p50": 100, "p90": 500, "p99": p99, "p999": p99, "p9999": p99, "max": p99});
    let mut w: WorkloadSummary = serde_json::from_value(serde_json::json!({
        "name": "many-keys", "clients": clients, "keys": 64, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
        "ops_per_sec": ops, "acquired": 1, "acquire_latency_us": pct, "service_latency_us": pct,
        "release_latency_us": pct, "handoff_latency_us": pct, "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
        "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
        "sections": 0, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
    }))
    .unwrap();
    w.server_cpu_us_per_acq = server;
    w.dlbench_cpu_us_per_acq = Some(30.0);
    w
}

fn hit(entry: &str, backend: &str, case: &str, ok: bool) -> Hit {
    Hit {
        entry: entry.into(),
        title: format!("title of {entry}"),
        backend: backend.into(),
        case: case.into(),
        figure: format!("{entry} on {backend} {case} | figure"),
        ok,
        evidence: format!("evidence/{entry}-{backend}.json"),
        ..Hit::default()
    }
}

/// Backend x entry, entries in catalogue order whatever the order measured, each case
/// of a cell with its link, a cell an entry has no hit for said so, a NO kept visible.
#[test]
fn what_users_hit_is_a_grid_with_links() {
    let hits = vec![
        hit("U7", "redis", "", true),
        hit("U6", "pg-advisory", "transaction pooling", true),
        hit("U6", "pg-advisory", "session pooling", false),
        hit("U1", "redis", "cut off", true),
    ];
    let (entries, rows) = hits_grid(&hits);
    assert_eq!(entries.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(), ["U1", "U6", "U7"]);
    assert_eq!(rows.len(), 2);
    let md = hits_markdown(&hits);
    let redis = md.lines().find(|l| l.starts_with("| redis |")).expect(&md);
    assert_eq!(redis.matches(" | ").count(), 3, "backend and three entries: {redis}");
    assert!(redis.contains("does not apply"), "redis has no U6: {redis}");
    assert!(redis.contains("cut off: U1 on redis cut off / figure ([evidence](evidence/U1-redis.json))"), "{redis}");
    let pg = md.lines().find(|l| l.starts_with("| pg-advisory |")).expect(&md);
    assert!(pg.contains("<br>session pooling: ") && pg.contains("(NO)"), "{pg}");
    assert!(hits_markdown(&[]).is_empty());
    let term = hits_terminal(&hits);
    assert!(term.find("U1 ").unwrap() < term.find("U6 ").unwrap() && term.contains("-- NO"), "{term}");
}

fn summary(target: &str, server: Option<f64>) -> Summary {
    let mut s = Summary::begin("r", target, FencingMode::Both, vec![]);
    let mut b = BackendSummary::empty("redis", None);
    b.workloads = vec![row(1, 1000.0, 1000, server), row(2, 1900.0, 1100, server), row(4, 2000.0, 3000, server)];
    s.backends.push(b);
    s
}

#[test]
fn cost_is_a_figure_on_the_local_target_and_said_unmeasured_elsewhere() {
    let local = markdown(&summary("local", Some(21.5)));
    assert!(local.contains("| redis | many-keys | 1 | 1000 | 21.5 | 30.0 |"), "{local}");
    assert!(!local.contains(NOT_LOCAL), "{local}");
    let external = markdown(&summary("external", None));
    assert!(external.contains(&format!("| redis | many-keys | 1 | 1000 | {NOT_LOCAL} | 30.0 |")), "{external}");
    assert!(!external.contains("| 0.0 |"), "not measured is never printed as 0: {external}");
}

#[test]
fn the_scaling_table_marks_the_knee() {
    let md = scaling_markdown(&summary("local", Some(20.0)));
    // 2 -> 4 clients: throughput x1.05, p99 x2.7.
    assert!(md.contains("| redis | many-keys | 4 | 2000 | 3.00 | - | 20.0 | **knee** |"), "{md}");
    assert_eq!(md.matches("**knee**").count(), 1, "{md}");
}

/// The terminal table keeps the family order (database, Redis, consensus) without heading
/// lines, as docs/reading-the-table.md shows it; summary.md heads each family. (Until issue
/// 34 the terminal printed "-- database" lines the docs never showed.)
#[test]
fn the_table_groups_designs_by_family_in_any_run_order() {
    let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
    for name in ["etcd", "redis", "pg-advisory", "zookeeper", "postgres"] {
        let mut b = BackendSummary::empty(name, None);
        b.workloads = vec![row(8, 100.0, 1000, None)];
        s.backends.push(b);
    }
    let t = table(&s);
    let order: Vec<&str> = t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(order, ["pg-advisory", "postgres", "redis", "etcd", "zookeeper"], "{t}");
    assert!(!t.contains("-- "), "no heading lines on the terminal: {t}");
    let md = markdown_table(&s);
    assert!(md.find("| **database** |").unwrap() < md.find("| **consensus** |").unwrap(), "{md}");
    // One family: no headings.
    s.backends.retain(|b| b.name == "redis");
    assert!(!table(&s).contains("--") && !markdown_table(&s).contains("**"));
}

/// A verdict as a fault run stores it (the fields the AP / CP table reads).
fn fault_verdict(availability: &str, rate: &str, recovery: &str, fencing: &str, exposure: f64, claims: &str, observed: Option<&str>, headline: &str) -> crate::judgement::Verdict {
    // The safety word is the headline's first; a class "(contradicts)" is the flag.
    let safety = headline.split([';', '(']).next().unwrap_or(headline).trim();
    let (observed, contradiction) = match observed.map(|o| o.strip_suffix(" (contradicts)")) {
        Some(Some(c)) => (Some(c), true),
        _ => (observed, false),
    };
    serde_json::from_value(serde_json::json!({
        "safety": safety, "contradiction": contradiction, "fencing": fencing, "evidence": if exposure >= 0.2 { "strong" } else { "weak" }, "exposure": exposure,
        "availability": availability, "availability_rate": rate, "recovery": recovery, "class_claimed": claims,
        "class_observed": observed, "class_note": if observed.is_none() { Some("not tested: no grant rate outside the faults to compare with") } else { None },
        "faults_applied": ["kill", "pause", "partition"], "valid": "valid", "headline": headline, "summary": headline
    }))
    .unwrap()
}

/// A wide, realistic fault run: every design with its longest name, the soak's figures of
/// docs/faults.md, a long "not tested" note, two workloads, run out of family order.
fn wide_fault_run() -> Summary {
    let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
    let broken = "broken: 1702 legitimate write(s) refused, 1702 token inversion(s)";
    let rows: [(&str, crate::judgement::Verdict); 6] = [
        ("zookeeper", fault_verdict("degraded", "57% of the no-fault rate", "recovered in 2396 ms", "not exercised", 0.09, "CP", Some("unknown"), "unknown")),
        ("pg-advisory-xact", fault_verdict("degraded", "36% of the no-fault rate", "recovered in 1364 ms", "not exercised", 0.08, "CP", Some("CP"), "no violation seen (weak)")),
        ("mariadb-get-lock", fault_verdict("degraded", "41% of the no-fault rate", "NOT recovered (no grant in the 2261 ms after a heal)", "not exercised", 0.09, "CP", None, "no violation seen (weak); NOT RECOVERED")),
        ("redis", fault_verdict("degraded", "64% of the no-fault rate", "recovered in 84 ms", broken, 0.10, "CP", Some("CP"), "fencing broken")),
        ("redlock", fault_verdict("available", "93% of the no-fault rate", "recovered in 93 ms", "n/a (no tokens)", 0.31, "AP", Some("AP (contradicts)"), "unsafe")),
        ("etcd-v3lock", fault_verdict("unavailable", "6% of the no-fault rate", "recovered in 4413 ms", "not exercised", 0.06, "CP", Some("unknown"), "unknown")),
    ];
    for (name, v) in rows {
        let mut b = BackendSummary::empty(name, None);
        for workload in ["many-keys", "long-hold"] {
            let mut w = row(8, 196.0, 53_050, None);
            w.name = workload.into();
            w.verdict = Some(v.clone());
            b.workloads.push(w);
        }
        s.backends.push(b);
    }
    s
}

/// The terminal's AP / CP table fits 100 columns, its details listed under it: every
/// verdict, fencing and evidence is still said (the old table was 180 columns wide).
#[test]
fn the_ap_cp_table_fits_100_columns_with_details_under_it() {
    let t = ap_cp_table(&wide_fault_run());
    let widest = t.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= WIDTH, "{widest} columns:\n{t}");
    let (table, details) = t.split_once("\n\n").expect("a blank line between the table and the details");
    assert_eq!(table.lines().count(), 1 + 12, "a header and one line per phase:\n{t}");
    assert!(table.lines().next().unwrap().starts_with("backend "), "{t}");
    for needle in ["pg-advisory-xact · many-keys: no violation seen (weak)", "fencing broken: 1702 legitimate write(s) refused", "evidence weak (8.0%)", "NOT RECOVERED"] {
        assert!(details.replace("\n  ", " ").contains(needle), "{needle} not under the table:\n{t}");
    }
    assert!(t.contains("NOT recovered") && t.contains("AP (contradicts)"), "{t}");
    // In the run table's order: the databases, then Redis, then consensus.
    let names: Vec<&str> = table.lines().skip(1).step_by(2).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["pg-advisory-xact", "mariadb-get-lock", "redis", "redlock", "zookeeper", "etcd-v3lock"], "{t}");
    // A narrow run keeps every column in the table.
    let mut one = wide_fault_run();
    one.backends.truncate(1);
    one.backends[0].name = "redis".into();
    let t = ap_cp_table(&one);
    let head = t.lines().next().unwrap();
    assert!(head.contains("acq/s") && head.contains("p99 ms") && head.contains("observed"), "{t}");
}

/// Plurals in the terminal's words: one is singular.
#[test]
fn counts_read_in_the_singular_for_one() {
    assert_eq!(crate::judgement::regressions(1), "1 regression");
    assert_eq!(crate::judgement::regressions(2), "2 regressions");
}

/// summary.md defines its columns with the glossary's words, not words of its own.
#[test]
fn summary_md_defines_the_columns_from_the_glossary() {
    let md = markdown(&summary("local", None));
    for term in ["acq/s", "errors", "expo %"] {
        let m = crate::judgement::glossary::meaning(term).unwrap();
        assert!(md.contains(&format!("- **{term}**: {m}.")), "{term}:\n{md}");
    }
    assert!(!md.contains("failures other than contention timeouts"), "the old definition of errors: {md}");
}
