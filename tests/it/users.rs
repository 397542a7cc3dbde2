//! The "what users hit" entries (U1, U6, U7) on real servers: each measurement has evidence,
//! the PgBouncer entry shows the breakage and the safe setups beside it, and the figures
//! tell a polling lock from a waiting one.

use crate::common;

use std::process::Stdio;

use common::{dlbench, processes_under, scratch};

#[test]
fn what_users_hit_is_measured_with_evidence() {
    let _g = common::heavy();
    let dir = scratch("users");
    let out = dlbench()
        .args(["scenario", "U1,U6,U7", "--backends", "redis,pg-advisory,pg-advisory-xact", "--waiters", "1,10", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "a measurement had no evidence or contradicted its expectation:\n{stdout}");
    let run = dir.join("latest");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    let hits = s["hits"].as_array().expect("hits in summary.json");
    let find = |entry: &str, backend: &str, case: &str| {
        hits.iter()
            .find(|h| h["entry"] == entry && h["backend"] == backend && h["case"] == case)
            .unwrap_or_else(|| panic!("no {entry} {backend} ({case}) in {hits:?}"))
    };
    let v = |h: &serde_json::Value, k: &str| h["values"][k].as_f64().unwrap_or_else(|| panic!("no {k} in {h}"));
    for h in hits {
        let evidence = run.join(h["evidence"].as_str().unwrap());
        let e: serde_json::Value = serde_json::from_slice(&std::fs::read(&evidence).unwrap_or_else(|e| panic!("{}: {e}", evidence.display()))).unwrap();
        assert!(!e["events"].as_array().unwrap().is_empty(), "evidence with events: {}", evidence.display());
    }

    // U6: transaction pooling breaks the session lock; session pooling and the transaction
    // lock do not.
    let tx = find("U6", "pg-advisory", "transaction pooling");
    assert!(v(tx, "overlaps") + v(tx, "refused_unlocks") + v(tx, "stranded") > 0.0, "transaction pooling: {tx}");
    for (b, case) in [("pg-advisory", "session pooling"), ("pg-advisory-xact", "transaction pooling, transaction lock")] {
        let h = find("U6", b, case);
        assert!(v(h, "grants") > 0.0, "{b} {case}: {h}");
        assert_eq!(v(h, "overlaps") + v(h, "refused_unlocks") + v(h, "stranded") + v(h, "errors"), 0.0, "{b} {case}: {h}");
    }

    // U1: the Redis key expires on the server; Redis has no lost signal, so a holder that
    // does not extend is told only by its release; one that extends learns by a failed extend.
    let cut = find("U1", "redis", "cut off");
    assert!(v(cut, "let_go_s") > 0.0 && v(cut, "told_s") > 0.0, "redis cut off: {cut}");
    let idle = find("U1", "redis", "not extended");
    assert!(v(idle, "let_go_s") > 0.0, "redis not extended: the TTL ran out: {idle}");
    assert_eq!(v(idle, "never_told"), 1.0, "redis has no lost signal: {idle}");
    // A session advisory lock lives on its connection, which the cut holds open.
    let pg = find("U1", "pg-advisory", "cut off");
    assert!(pg["values"].get("let_go_s").is_none(), "the server keeps a cut-off session's lock: {pg}");

    // U7: Redis waiters poll; a session advisory lock's waiters wait inside the server.
    let poll = v(find("U7", "redis", ""), "requests_per_waiter_s@10");
    let wait = v(find("U7", "pg-advisory", ""), "requests_per_waiter_s@10");
    assert!(poll > 5.0 * wait.max(0.1), "polling {poll:.1}/s per waiter against waiting {wait:.1}/s");

    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("## What users hit") && md.contains("(evidence/U6-pg-advisory-transaction-pooling.json)"), "{md}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("What users hit") && html.contains("href=\"evidence/U7-redis.json\""));
    assert!(stdout.contains("What users hit") && stdout.contains("PgBouncer"), "{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}
