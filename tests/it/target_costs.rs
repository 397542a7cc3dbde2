//! Every run on a target dlbench can look into records what its layer costs (issue 35):
//! `summary.json`'s `target_costs`, printed after the run table and in summary.md.

use std::process::Stdio;

use serde_json::Value;

use crate::common::{self, dlbench, processes_under, scratch};

/// What is wrong with a `target_costs` section of a run of `services` whose packets go
/// over `via` and whose data is on `medium` (empty: nothing).
pub(crate) fn problems(c: &Value, services: &[(&str, usize)], via: &str, medium: &str) -> Vec<String> {
    let mut p = Vec::new();
    let rts = c["round_trips"].as_array().cloned().unwrap_or_default();
    for (s, nodes) in services {
        let mine: Vec<&Value> = rts.iter().filter(|r| r["service"] == *s).collect();
        if mine.len() != *nodes {
            p.push(format!("{s}: {} round trips for {nodes} nodes", mine.len()));
        }
        for r in mine {
            let (med, p90) = (r["median_us"].as_f64().unwrap_or(0.0), r["p90_us"].as_f64().unwrap_or(0.0));
            if r["n"] != 200 || med <= 0.0 || p90 < med || r["via"] != via || r["not_measured"] != Value::Null {
                p.push(format!("{s}: implausible round trip {r}"));
            }
        }
        // Under load: 8 connections to each node at once for 1 s, each answered at least once.
        let loaded = c["loaded"].as_array().and_then(|l| l.iter().find(|x| x["service"] == *s).cloned()).unwrap_or_default();
        let (med, p90, rate) = (loaded["median_us"].as_f64().unwrap_or(0.0), loaded["p90_us"].as_f64().unwrap_or(0.0), loaded["per_second"].as_f64().unwrap_or(0.0));
        if loaded["nodes"] != *nodes || loaded["connections_per_node"] != 8 || loaded["n"].as_u64().unwrap_or(0) < (nodes * 8) as u64 || med <= 0.0 || p90 < med || rate <= 0.0 || loaded["via"] != via {
            p.push(format!("{s}: implausible loaded round trip {loaded}"));
        }
        if c["data_on"][s]["kind"] != medium {
            p.push(format!("{s}: data not on {medium}: {}", c["data_on"][s]));
        }
    }
    p.extend(fsync_problem(c, medium));
    p
}

/// What is wrong with the fsync figure of `medium` (none: it was measured 100 times).
pub(crate) fn fsync_problem(c: &Value, medium: &str) -> Option<String> {
    let fsync = c["fsync"].as_array().cloned().unwrap_or_default();
    match fsync.iter().find(|f| f["kind"] == medium) {
        Some(f) if f["n"] == 100 && f["median_us"].as_f64().is_some_and(|m| m > 0.0) && f["p90_us"].as_f64() >= f["median_us"].as_f64() => None,
        other => Some(format!("no plausible fsync on {medium}: {other:?}")),
    }
}

#[test]
fn a_local_run_records_and_prints_its_target_costs() {
    let _g = common::heavy();
    let dir = scratch("target-costs");
    let out = dlbench()
        .args(["run", "--backends", "redis,etcd", "--workload", "hot-key", "--duration", "1s", "--warmup", "0s", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {}: {stdout}", out.status);
    let summary: Value = serde_json::from_slice(&std::fs::read(dir.join("latest/summary.json")).unwrap()).unwrap();
    let c = &summary["target_costs"];
    let services = [("redis", 1), ("etcd", 3)];
    let found = problems(c, &services, "loopback", "host");
    assert!(found.is_empty(), "{found:?}\n{c}");
    // The checker above fails on wrong figures: a short count, a zero median, a node gone,
    // the data said to be elsewhere.
    for (path, v) in [
        ("/round_trips/0/n", Value::from(199)),
        ("/round_trips/1/median_us", Value::from(0.0)),
        ("/data_on/etcd/kind", Value::from("volume")),
        ("/loaded/0/per_second", Value::Null),
        ("/loaded/1/n", Value::from(0)),
    ] {
        let mut bad = c.clone();
        *bad.pointer_mut(path).unwrap() = v;
        assert!(!problems(&bad, &services, "loopback", "host").is_empty(), "{path} doctored, not caught");
    }
    let mut bad = c.clone();
    bad["round_trips"].as_array_mut().unwrap().retain(|r| r["service"] != "etcd" || r["node"] != c["round_trips"].as_array().unwrap().iter().find(|r| r["service"] == "etcd").unwrap()["node"]);
    assert!(!problems(&bad, &services, "loopback", "host").is_empty(), "a missing node is caught");

    let schema: Value = serde_json::from_str(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/summary.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&summary).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "summary.json does not validate: {errors:?}");

    // The terminal wraps a long line within 100 columns, its continuations indented by two:
    // read each item whole.
    let mut items: Vec<String> = Vec::new();
    for l in stdout.lines() {
        match (l.strip_prefix("  "), items.last_mut()) {
            (Some(rest), Some(last)) => {
                last.push(' ');
                last.push_str(rest.trim_start());
            }
            _ => items.push(l.to_string()),
        }
    }
    assert!(stdout.lines().all(|l| l.chars().count() <= 100 || l.starts_with("results: ")), "a line over 100 columns:\n{stdout}");
    let stdout = items.join("\n");
    let rtt = stdout.lines().find(|l| l.starts_with("network round trip (median per node, loopback): ")).unwrap_or_else(|| panic!("no round-trip line:\n{stdout}"));
    assert!(rtt.contains("redis ") && rtt.contains("etcd ") && rtt.contains(" µs"), "{rtt}");
    let loaded = stdout.lines().find(|l| l.starts_with("round trip under load (median, nodes x connections at once): ")).unwrap_or_else(|| panic!("no loaded line:\n{stdout}"));
    assert!(loaded.contains(", 1x8)") && loaded.contains(", 3x8)") && loaded.contains(" req/s"), "{loaded}");
    let fs = stdout.lines().find(|l| l.starts_with("fsync (4 KiB write + fdatasync, median): host ")).unwrap_or_else(|| panic!("no fsync line:\n{stdout}"));
    assert!(fs.contains("etcd on host") && fs.contains("redis on host"), "{fs}");
    let md = std::fs::read_to_string(dir.join("latest/summary.md")).unwrap();
    assert!(md.contains("Target costs, measured before the phases:") && md.contains(&format!("- {rtt}")), "{md}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}
