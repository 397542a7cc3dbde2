//! The `power-loss` fault on the local target (issue 36): each node's data directory on the
//! `dlbench-faultfs` layer, the fault a SIGKILL plus a power cut under the data (unsynced
//! writes dropped), its inverse a remount and a restart; evidence read from the process and
//! the layer's own account; nothing left mounted or running afterwards.

use std::process::Stdio;

use crate::common::{self, dlbench, processes_under, scratch};

fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("latest").join("summary.json")).unwrap()).unwrap()
}

/// Every faultfs mount still in the mount table.
fn layer_mounts() -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table.lines().filter(|l| l.contains(" dlbench-faultfs ")).map(str::to_string).collect()
}

fn power_loss_run(backend: &str, fault: &str) -> (serde_json::Value, String) {
    let dir = scratch(&format!("power-loss-{backend}"));
    let before = layer_mounts();
    let out = dlbench()
        .args(["run", "--backends", backend, "--workload", "hot-key", "--duration", "10s", "--warmup", "0s", "--nemesis", fault])
        .args(["--nemesis-interval", "4s", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.code().is_some_and(|c| c != 2), "the run failed:\n{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
    assert_eq!(layer_mounts(), before, "a layer is still mounted after the run");
    let s = summary(&dir);
    (s["backends"][0].clone(), stdout)
}

fn starts(b: &serde_json::Value, f: &str) -> Vec<String> {
    let events = b["nemesis"].as_array().unwrap();
    let ends = events.iter().filter(|e| e["f"] == f && e["phase"] == "end").count();
    let starts: Vec<String> = events
        .iter()
        .filter(|e| e["f"] == f && e["phase"] == "start")
        .map(|e| e["detail"].as_str().unwrap().to_string())
        .collect();
    assert!(!starts.is_empty() && starts.len() == ends, "every power loss healed: {events:?}");
    starts
}

#[test]
fn a_power_loss_kills_cuts_the_power_and_heals() {
    let _g = common::heavy();
    let (b, stdout) = power_loss_run("etcd", "power-loss:leader");
    for d in starts(&b, "power-loss:leader") {
        assert!(
            d.starts_with("checked: ") && d.contains("process gone; power loss: dropped"),
            "evidence from the process and the layer: {d}"
        );
    }
    assert_eq!(b["verdict"]["faults_applied"], serde_json::json!(["power-loss:leader"]), "{}\n{stdout}", b["verdict"]);
}
