//! `dlbench calibrate` on real servers: the side-by-side ratios for Redis and PostgreSQL,
//! the primitive cost and the efficiency fraction for every backend, stored in summary.json
//! (validated against the committed schema) and shown in the report. Figures are checked for
//! presence and sanity only; their size belongs in the README's performance section.

use crate::common;

use std::process::Stdio;

use common::{dlbench, processes_under, scratch};

#[test]
fn calibrate_prints_and_stores_ratios_and_efficiency() {
    let _g = common::heavy();
    let dir = scratch("calibrate");
    let out = dlbench()
        .args(["calibrate", "--connections", "4", "--seconds", "1s", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "calibrate failed:\n{stdout}");
    for needle in ["redis-benchmark", "pgbench", "efficiency", "Hand-offs as they happened"] {
        assert!(stdout.contains(needle), "{needle} missing from the printed tables:\n{stdout}");
    }
    let run = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.join("summary.json").exists()).unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["complete"], true);
    let cal = &summary["calibration"];
    let positive = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0);
    let side: Vec<&str> = cal["side_by_side"].as_array().unwrap().iter().map(|r| r["backend"].as_str().unwrap()).collect();
    assert_eq!(side, ["postgres", "redis"], "side-by-side rows");
    for r in cal["side_by_side"].as_array().unwrap() {
        assert!(positive(&r["ratio"]) && positive(&r["reference_per_sec"]), "side by side: {r}");
        let ratio = r["dlbench_per_sec"].as_f64().unwrap() / r["reference_per_sec"].as_f64().unwrap();
        assert!((ratio - r["ratio"].as_f64().unwrap()).abs() < 1e-6, "ratio is dlbench / reference: {r}");
    }
    for section in ["primitive_cost", "efficiency"] {
        let names: Vec<&str> = cal[section].as_array().unwrap().iter().map(|r| r["backend"].as_str().unwrap()).collect();
        assert_eq!(names, ["postgres", "redis", "redlock", "zookeeper", "etcd"], "{section}");
    }
    for r in cal["efficiency"].as_array().unwrap() {
        assert!(positive(&r["bound_per_sec"]) && positive(&r["handoff_per_sec"]) && positive(&r["efficiency"]), "efficiency: {r}");
        // The bound is the inverse of its listed terms, each measured (none a placeholder 0).
        let terms = r["critical_path"].as_array().unwrap();
        assert!(!terms.is_empty(), "no terms: {r}");
        let mut path = 0.0;
        for t in terms {
            assert!(positive(&t["us"]) && t["times"].as_u64().unwrap() >= 1 && !t["what"].as_str().unwrap().is_empty(), "term: {t}");
            path += t["us"].as_f64().unwrap() * t["times"].as_f64().unwrap();
        }
        let bound = 1e6 / path;
        assert!((bound - r["bound_per_sec"].as_f64().unwrap()).abs() / bound < 1e-6, "bound = 1 / the sum of the path's terms: {r}");
        // The hand-offs as they happened: who won each, and the harness's own time on the path.
        let h = &r["handoffs"];
        assert!(h["count"].as_u64().unwrap() >= 1 && positive(&h["median_us"]), "hand-offs recorded: {r}");
        let share = h["to_releaser_share"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share), "a share: {h}");
        assert_eq!(h["to_releaser_median_us"].is_number(), share > 0.0, "a median exactly when some hand-off went that way: {h}");
        assert_eq!(h["to_waiter_median_us"].is_number(), share < 1.0, "{h}");
        let harness = h["harness_share"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&harness) && h["harness_median_us"].as_f64().unwrap() >= 0.0, "{h}");
        let beside = r["beside"].as_array().unwrap();
        assert!(beside.iter().any(|t| t["what"].as_str().unwrap().contains("under the hot-key load") && positive(&t["us"])), "the loaded release is listed: {r}");
    }
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/summary.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&summary).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "calibrate's summary.json does not validate: {errors:?}");
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(page.contains("Calibration") && page.contains("pgbench"), "the report shows the calibration");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}
