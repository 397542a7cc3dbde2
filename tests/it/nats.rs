//! The NATS JetStream KV lock end to end: `dlbench run --backends nats` on a three-server
//! JetStream cluster under kill, pause and partition, judged from summary.json; and the same
//! run with a lock that skips the revision compare (the test hook), which must be judged
//! unsafe, so the first run's "no overlap" is a check that can fail.

use crate::common;

use std::process::Stdio;

use common::{dlbench, processes_under, scratch};

fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("latest").join("summary.json")).unwrap()).unwrap()
}

/// One `run --backends nats` with `nemesis`; `broken`: with the compare skipped.
fn run(name: &str, nemesis: &str, broken: bool) -> (std::process::Output, serde_json::Value, std::path::PathBuf) {
    let dir = scratch(name);
    let mut c = dlbench();
    c.args(["run", "--backends", "nats", "--workload", "hot-key", "--duration", "12s", "--warmup", "0s", "--ttl", "3s"]);
    if !nemesis.is_empty() {
        c.args(["--nemesis", nemesis, "--nemesis-interval", "3s"]);
    }
    if broken {
        c.env(dlbench_nats::SKIP_REVISION_CHECK, "1");
    }
    let out = c.arg("--out").arg(&dir).stderr(Stdio::inherit()).output().unwrap();
    let s = summary(&dir);
    (out, s, dir)
}

#[test]
fn nats_holds_under_kill_pause_and_partition_and_a_lock_without_the_compare_does_not() {
    let _g = common::heavy();
    let (out, s, dir) = run("nats-faults", "kill,pause,partition", false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let b = &s["backends"][0];
    assert_eq!(b["name"], "nats");
    let v = &b["verdict"];
    assert_eq!(v["class_claimed"], "CP", "{v}");
    assert_eq!(v["faults_applied"], serde_json::json!(["kill", "pause", "partition"]), "every fault took effect: {v}");
    assert!(v["class_observed"].is_string(), "a class observed under the applied faults: {v}");
    let w = &b["workloads"][0];
    assert!(w["acquired"].as_u64().unwrap() > 0, "nothing acquired: {w}");
    assert_eq!(w["overlaps"], 0, "two holders at once on the JetStream KV lock: {v}");
    assert_eq!(w["lost_updates"], 0, "{v}");
    assert_eq!(w["stale_tokens"], 0, "the revision went backwards as a fencing token: {v}");
    let events = b["nemesis"].as_array().unwrap();
    let starts = events.iter().filter(|e| e["phase"] == "start").count();
    let ends = events.iter().filter(|e| e["phase"] == "end").count();
    assert!(starts >= 3 && starts == ends, "every fault healed: {events:?}");
    assert!(s["versions"]["nats"].as_str().is_some_and(|v| v.starts_with("2.")), "version asked of the server: {}", s["versions"]);
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));

    // The same lock with its compare skipped: every acquire is a plain put, so holders
    // overlap at once, without any fault, and the verdict says so (exit 1).
    let (out, s, dir) = run("nats-broken", "", true);
    let v = &s["backends"][0]["verdict"];
    let w = &s["backends"][0]["workloads"][0];
    assert!(w["overlaps"].as_u64().unwrap() > 0, "a lock without the revision compare showed no overlap: {v}");
    assert_eq!(v["safety"], "unsafe", "{v}");
    assert_eq!(out.status.code(), Some(1), "the exit status is the verdict's: {v}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}
