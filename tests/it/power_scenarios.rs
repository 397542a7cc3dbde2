//! P1 and J2 (issue 36): the power lost under a holder, on real servers through the
//! `dlbench-faultfs` layer. Redis without persistence must lose the lock (the next client is
//! granted it while the first holder still works); NATS with its default flush, all three
//! nodes cut, is Jepsen's finding: the row carries the version read from the server beside
//! the published finding. Every row says what the layer dropped.

use std::process::Stdio;

use serde_json::Value;

use crate::common::{self, dlbench, processes_under, scratch};

fn scenario(name: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let dir = scratch(name);
    let out = dlbench().arg("scenario").args(args).arg("--out").arg(&dir).stderr(Stdio::inherit()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
    let latest = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.join("summary.json").is_file()).unwrap();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(latest.join("summary.json")).unwrap()).unwrap();
    (out.status.code(), s, stdout)
}

fn rows<'a>(s: &'a Value, id: &str) -> Vec<&'a Value> {
    s["scenarios"].as_array().unwrap().iter().filter(|o| o["scenario"] == id).collect()
}

/// The layer's own account on every row: what it dropped, in bytes.
fn evidence(o: &Value) {
    let observed = o["observed"].as_str().unwrap();
    assert!(observed.contains("unsynced bytes dropped"), "no evidence of the cut: {o}");
    assert!(o["notes"].to_string().contains("power cut on"), "{o}");
    assert_eq!(o["fencing"], "off", "one side: {o}");
}

#[test]
fn redis_without_persistence_loses_the_lock_under_a_power_loss() {
    let _g = common::heavy();
    let (code, s, stdout) = scenario("p1-redis", &["P1", "--backends", "redis"]);
    let r = rows(&s, "P1");
    assert_eq!(r.len(), 1, "{r:?}");
    let o = r[0];
    evidence(o);
    assert_eq!(o["expected"], "lock-lost", "{o}");
    assert!(o["observed"].as_str().unwrap().starts_with("LOST"), "{o}");
    assert!(o["overlaps"].as_u64().unwrap() > 0, "the resource saw two holders: {o}");
    assert!(o["case"].as_str().unwrap().contains("no persistence"), "the setting named: {o}");
    assert!(stdout.contains("published (antirez"), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn jepsens_nats_finding_beside_what_the_server_run_here_does() {
    let _g = common::heavy();
    let (code, s, stdout) = scenario("j2-nats", &["J2", "--backends", "nats"]);
    let r = rows(&s, "J2");
    assert_eq!(r.len(), 1, "{r:?}");
    let o = r[0];
    evidence(o);
    // The version is the server's own answer, not a constant.
    let version = s["versions"]["nats"].as_str().unwrap();
    assert!(version.starts_with("2."), "{version}");
    assert!(o["case"].as_str().unwrap().starts_with(&format!("nats-server {version}, all 3 nodes")), "{o}");
    assert!(o["source"].as_str().unwrap().starts_with("Jepsen, NATS 2.12.1"), "{o}");
    assert!(stdout.contains("published (Jepsen, NATS 2.12.1"), "{stdout}");
    let observed = o["observed"].as_str().unwrap();
    assert!(observed.starts_with("LOST") || observed.starts_with("held"), "a verdict, not no effect: {o}");
    assert_eq!(code, Some(if o["ok"] == true { 0 } else { 1 }), "{stdout}");
}

/// The same script at the two other levels: `appendfsync always` keeps the grant (the next
/// client is refused); `everysec` races its once-a-second fsync, so either outcome meets
/// the expectation and the row says which one happened.
#[test]
fn redis_strict_keeps_the_lock_and_relaxed_says_which_way_its_flush_race_went() {
    let _g = common::heavy();
    let (code, s, stdout) = scenario("p1-redis-strict", &["P1", "--backends", "redis", "--durability", "strict"]);
    let o = rows(&s, "P1")[0];
    evidence(o);
    assert_eq!(o["expected"], "lock-held", "{o}");
    assert!(o["observed"].as_str().unwrap().starts_with("held"), "{o}");
    assert_eq!(o["overlaps"], 0, "{o}");
    assert!(o["case"].as_str().unwrap().starts_with("strict: appendonly yes, appendfsync always"), "{o}");
    assert_eq!(code, Some(0), "{stdout}");
    let (code, s, stdout) = scenario("p1-redis-relaxed", &["P1", "--backends", "redis", "--durability", "relaxed"]);
    let o = rows(&s, "P1")[0];
    evidence(o);
    assert_eq!(o["expected"], "may-lose-lock", "{o}");
    let observed = o["observed"].as_str().unwrap();
    assert!(observed.starts_with("LOST") || observed.starts_with("held"), "{o}");
    assert!(observed.contains("either outcome was possible"), "{o}");
    assert!(o["case"].as_str().unwrap().contains("appendfsync everysec"), "{o}");
    assert_eq!(code, Some(0), "{stdout}");
}
