//! `dlbench calibrate --peers` on real servers with every official client (installed by
//! `sh scripts/setup.sh --peers`, which .ci/run calls): each peer runs both workloads once,
//! briefly, beside dlbench. Checks that every peer acquired, that every backend x workload x
//! client row has a finite positive ratio equal to dlbench / peer, that summary.json validates
//! against the committed schema, that the tables show the rows, and that nothing is left
//! running. How large the ratios are belongs in the README, not here.

use crate::common;

use std::process::Stdio;

use common::{dlbench, processes_under, scratch};

#[test]
fn calibrate_peers_runs_every_official_client_beside_dlbench() {
    let _g = common::heavy();
    let dir = scratch("peers");
    let out = dlbench()
        .args(["calibrate", "--peers", "--repeats", "1", "--connections", "4", "--seconds", "1s", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "calibrate --peers failed (installed? sh scripts/setup.sh --peers):\n{stdout}");
    let run = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.join("summary.json").exists()).unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["complete"], true);
    let rows = summary["calibration"]["peers"].as_array().expect("calibration.peers");
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let peer = r["peer_per_sec"][0].as_f64().unwrap();
        let ours = r["dlbench_per_sec"][0].as_f64().unwrap();
        assert!(peer > 0.0 && ours > 0.0, "both sides acquired: {r}");
        assert!(f("ratio_median").is_finite() && f("ratio_median") > 0.0, "finite ratio: {r}");
        assert!((f("ratio_median") - ours / peer).abs() < 1e-9 * f("ratio_median").max(1.0), "ratio is dlbench / peer: {r}");
        assert_eq!(r["clients"], 4);
        seen.push((r["backend"].as_str().unwrap().into(), r["workload"].as_str().unwrap().into(), r["peer"].as_str().unwrap().into()));
    }
    let mut expected = Vec::new();
    for (backend, peer) in [("redis", "redis-py"), ("redlock", "pottery"), ("zookeeper", "curator"), ("zookeeper", "kazoo"), ("etcd", "etcd-go")] {
        for w in ["hot-key", "many-keys"] {
            expected.push((backend.to_string(), w.to_string(), peer.to_string()));
        }
    }
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected, "one row per backend x workload x official client");
    for client in ["redis-py", "pottery", "Curator", "kazoo", "clientv3/concurrency"] {
        assert!(stdout.contains(client), "{client} missing from the printed table:\n{stdout}");
    }
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/summary.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&summary).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "summary.json does not validate: {errors:?}");
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(page.contains("Official clients beside dlbench"), "the report shows the peer table");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

#[test]
fn calibrate_peers_refuses_an_unknown_peer_before_starting_anything() {
    let dir = scratch("peers-bad");
    let out = dlbench().args(["calibrate", "--peers", "redis-pie", "--out"]).arg(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("unknown peer or backend \"redis-pie\""), "{stderr}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing created");
}
