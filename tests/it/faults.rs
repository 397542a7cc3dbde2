//! Faults end to end: the scenario catalogue's key entries on real servers, a nemesis run's
//! AP / CP table, and `dlbench check` on hand-made histories.

use crate::common;

use std::process::Stdio;

use common::{dlbench, processes_under, scratch};


fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("latest").join("summary.json")).unwrap()).unwrap()
}

/// S1 on every backend, S3 and S4 on Redlock, S5 on Redis, S7, S8 and J1 on etcd and
/// ZooKeeper: every observation agrees with the catalogue (the exit status says so), every
/// entry ends healed, nothing is left running.
#[test]
fn scenario_catalogue_holds_on_real_servers() {
    let _g = common::heavy();
    let dir = scratch("scenarios");
    let out = dlbench()
        .args(["scenario", "S1,S3,S4,S5,S7,S8,J1", "--backend", "default", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let s = summary(&dir);
    let outcomes = s["scenarios"].as_array().unwrap();
    let wrong: Vec<String> = outcomes
        .iter()
        .filter(|o| o["ok"] != true)
        .map(|o| format!("{} {} {} fencing {}: expected {}, observed {} {}", o["scenario"], o["backend"], o["case"], o["fencing"], o["expected"], o["observed"], o["notes"]))
        .collect();
    assert!(out.status.success(), "a scenario contradicted its expectation (exit {:?}):\n{}", out.status.code(), wrong.join("\n"));
    let find = |id: &str, backend: &str, fencing: &str| {
        outcomes
            .iter()
            .find(|o| o["scenario"] == id && o["backend"] == backend && o["fencing"] == fencing && o["case"].as_str().unwrap_or("").len() < 16)
            .unwrap_or_else(|| panic!("no {id} {backend} fencing {fencing} in {outcomes:?}"))
    };
    for b in ["postgres", "redis", "redlock", "zookeeper", "etcd"] {
        let off = find("S1", b, "off");
        assert!(off["overlaps"].as_u64().unwrap() + off["lost_updates"].as_u64().unwrap() > 0, "S1 {b} without fencing: {off}");
        let on = find("S1", b, "on");
        if b != "redlock" {
            assert!(on["rejected"].as_u64().unwrap() > 0, "S1 {b} with fencing refuses the stale write: {on}");
            assert_eq!(on["lost_updates"], 0, "S1 {b} with fencing loses nothing: {on}");
        }
        assert!(off["published"].as_str().is_some_and(|p| !p.is_empty()) && off["source"].is_string(), "S1 cites its source");
    }
    for b in ["etcd", "zookeeper"] {
        let o = find("S8", b, "off");
        assert_eq!(o["overlaps"], 0, "S8 {b}");
        // Recovery is judged after the heal, never by a start-up gap; its time is a figure
        // (4-12 s for ZooKeeper here), reported, not asserted.
        assert_eq!(o["availability"]["recovered"], true, "S8 {b} recovered after the last heal: {o}");
        assert!(o["availability"]["recovery_ms"].as_u64().is_some(), "S8 {b} recovery time reported: {o}");
        let s7 = find("S7", b, "off");
        assert_eq!(s7["ok"], true, "S7 {b}: the expired waiter failed and left nothing: {s7}");
    }
    let j1 = outcomes.iter().filter(|o| o["scenario"] == "J1").count();
    assert_eq!(j1, 4, "J1: two cases, both sides of fencing");
    let double = |id: &str, b: &str| find(id, b, "off")["overlaps"].as_u64().unwrap() > 0;
    assert!(double("S3", "redlock") || double("S4", "redlock"), "S3 or S4 shows a Redlock double grant");
    assert!(double("S5", "redis"), "S5 shows a single-Redis double grant");
    assert!(outcomes.iter().all(|o| o["healed"] == true), "every entry ends healed");
    // The summary speaks for the backends too: a class is observed only under faults of the
    // service (postgres ran S1 alone, a paused holder: no class).
    for b in s["backends"].as_array().unwrap() {
        assert!(b["verdict"]["safety"].is_string(), "{}: verdict", b["name"]);
        let observed = &b["verdict"]["class_observed"];
        if b["name"] == "postgres" {
            assert!(observed.is_null(), "a holder's pause is no fault of the service: {}", b["verdict"]);
        } else if b["name"] == "etcd" || b["name"] == "zookeeper" || !b["verdict"]["availability_rate"].is_null() {
            assert!(observed.is_string(), "{}: observed class under applied faults: {}", b["name"], b["verdict"]);
        } else {
            // Faults took effect but no grant rate outside them to compare with (S5 is a
            // failover from start to end): no class, and the note says why (issue 32).
            assert!(observed.is_null(), "{}: a class without a rate to compare: {}", b["name"], b["verdict"]);
            let note = b["verdict"]["class_note"].as_str().unwrap_or_default();
            assert!(note.starts_with("not tested:") && note.len() > 20, "{}: why no class: {}", b["name"], b["verdict"]);
        }
        assert!(!b["nemesis"].as_array().unwrap().is_empty(), "{}: nemesis events", b["name"]);
    }
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// `dlbench run --nemesis`: faults recorded with start and end, availability judged against
/// the rate without faults, the class claimed beside the class observed, the AP / CP table
/// printed, and the exit status the verdict's.
#[test]
fn nemesis_run_reports_claimed_and_observed_classes() {
    let _g = common::heavy();
    let dir = scratch("nemesis");
    let out = dlbench()
        .args([
            // Each fault with its room after the heal (etcd: the 2 s TTL and 3 s to elect):
            // the shortest phase that holds both is 16 s.
            "run", "--backends", "etcd", "--workload", "hot-key", "--duration", "16s", "--warmup", "0s", "--nemesis",
            // Holders held 200 ms, so that each fault finds them inside: a class needs strong
            // evidence in every window (at 25 ms a pause found them inside 1.1% of it on a
            // loaded host: "not established", rightly).
            "kill,pause", "--nemesis-interval", "4s", "--ttl", "2s", "--hold", "200ms", "--out",
        ])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("claims") && stdout.contains("observed"), "AP/CP table:\n{stdout}");
    let s = summary(&dir);
    let b = &s["backends"][0];
    let v = &b["verdict"];
    let code = match v["valid"].as_str().unwrap() {
        "valid" => 0,
        "invalid" => 1,
        _ => 3,
    };
    assert_eq!(out.status.code(), Some(code), "the exit status is the verdict's: {v}\n{stdout}");
    assert_eq!(v["class_claimed"], "CP");
    assert!(v["class_observed"].is_string(), "{v}");
    assert_eq!(v["faults_applied"], serde_json::json!(["kill", "pause"]), "{v}");
    for f in ["ratio", "recovery_ms", "longest_gap_ms", "success_seconds_pct"] {
        assert!(b["availability"].get(f).is_some(), "availability.{f}: {}", b["availability"]);
    }
    let w = &b["workloads"][0];
    assert!(w["exposure"].as_f64().unwrap() > 0.0, "exposure measured");
    assert_eq!(w["overlaps"], 0, "kill and pause break no etcd lock");
    let events = b["nemesis"].as_array().unwrap();
    let starts = events.iter().filter(|e| e["phase"] == "start").count();
    let ends = events.iter().filter(|e| e["phase"] == "end").count();
    assert!(starts > 0 && starts == ends, "every fault healed: {events:?}");
    // Each start carries the evidence that it took effect, read from the process itself.
    let detail = |f: &str| events.iter().filter(|e| e["f"] == f && e["phase"] == "start").map(|e| e["detail"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert!(detail("kill").iter().all(|d| d.starts_with("checked: ") && d.contains("process gone")), "{:?}", detail("kill"));
    assert!(detail("pause").iter().all(|d| d.starts_with("checked: ") && d.contains("stopped (state T")), "{:?}", detail("pause"));
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// A Redis restarted without persistence forgets its fencing counter: the next holders get
/// tokens below ones already seen and the fenced resource refuses them although their leases
/// are valid. With `--fencing on` that is "fencing broken", exit 1, never "safe".
#[test]
fn a_redis_restart_without_persistence_breaks_fencing() {
    let _g = common::heavy();
    let dir = scratch("fence-reset");
    let out = dlbench()
        .args([
            // The kill's room after its heal: the 2 s TTL and 2 s to restart.
            "run", "--backends", "redis", "--workload", "hot-key", "--duration", "8s", "--warmup", "0s", "--nemesis", "kill",
            "--nemesis-interval", "4s", "--ttl", "2s", "--fencing", "on", "--out",
        ])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "fencing broken exits 1:\n{stdout}");
    let s = summary(&dir);
    let b = &s["backends"][0];
    assert_eq!(b["verdict"]["safety"], "fencing broken", "{}", b["verdict"]);
    assert!(b["legit_refused"].as_u64().unwrap() > 0 && b["token_inversions"].as_u64().unwrap() > 0, "{b}");
    assert!(b["verdict"]["fencing"].as_str().unwrap().contains("legitimate write(s) refused"), "{}", b["verdict"]);
    assert!(stdout.contains("fencing broken"), "{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

fn write_history(dir: &std::path::Path, lines: &[&str]) -> std::path::PathBuf {
    let p = dir.join("history.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

const META: &str = r#"{"type":"meta","backend":"hand","workload":"made","keys":["k"],"ttl_ms":10000,"fencing_tokens":true,"started_at":"x"}"#;

#[test]
fn check_finds_an_overlap_and_names_both_operations() {
    let dir = scratch("check-overlap");
    let h = write_history(
        &dir,
        &[
            META,
            r#"{"type":"invoke","p":1,"f":"acquire","key":0,"ns":1000}"#,
            r#"{"type":"ok","p":1,"f":"acquire","key":0,"ns":2000,"token":7}"#,
            r#"{"type":"invoke","p":2,"f":"acquire","key":0,"ns":3000}"#,
            r#"{"type":"ok","p":2,"f":"acquire","key":0,"ns":4000,"token":8}"#,
            r#"{"type":"invoke","p":1,"f":"release","key":0,"ns":5000}"#,
            r#"{"type":"ok","p":1,"f":"release","key":0,"ns":6000}"#,
            r#"{"type":"invoke","p":2,"f":"release","key":0,"ns":7000}"#,
            r#"{"type":"ok","p":2,"f":"release","key":0,"ns":8000}"#,
        ],
    );
    let out = dlbench().arg("check").arg(&h).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "invalid exits 1:\n{text}");
    assert!(text.contains("mutual-exclusion  invalid"), "{text}");
    assert!(text.contains("process 1 acquire key 0") && text.contains("process 2 acquire key 0"), "both ops named:\n{text}");
}

#[test]
fn check_never_says_valid_for_a_history_ending_unresolved() {
    let dir = scratch("check-info");
    let h = write_history(
        &dir,
        &[
            META,
            r#"{"type":"invoke","p":1,"f":"acquire","key":0,"ns":1000}"#,
            r#"{"type":"ok","p":1,"f":"acquire","key":0,"ns":2000,"token":7}"#,
            r#"{"type":"invoke","p":1,"f":"release","key":0,"ns":5000}"#,
            r#"{"type":"ok","p":1,"f":"release","key":0,"ns":6000}"#,
            r#"{"type":"invoke","p":2,"f":"acquire","key":0,"ns":7000}"#,
            r#"{"type":"info","p":2,"f":"acquire","key":0,"ns":8000,"error":"timed out"}"#,
            r#"{"type":"invoke","p":3,"f":"acquire","key":0,"ns":9000}"#,
        ],
    );
    let out = dlbench().arg("check").arg(&h).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "unknown exits 3:\n{text}");
    assert!(text.contains("verdict: unknown"), "{text}");
}
