//! The short soak: `dlbench soak` on all five backends for 1 minute, a fault every 5 s (the
//! README gives the hour-long one). Memory growth over a minute says little, so this checks the machinery a
//! long soak relies on: a sample every second of dlbench and of every server it started,
//! every fault healed, every history checked, the trends in the summary, the plot in the
//! report, and an exit status that is the soak's judgment.

use crate::common;

use common::{dlbench, scratch};

#[test]
fn a_one_minute_soak_samples_everything_and_heals_every_fault() {
    let _g = common::heavy();
    let out = scratch("soak");
    let o = dlbench().args(["soak", "--duration", "1m", "--nemesis-interval", "5s", "--out"]).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    println!("{stdout}");
    let run = out.join("latest");
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let soak = &summary["soak"];
    let r = &summary["resources"];
    assert!(summary["complete"].as_bool().unwrap(), "{stderr}");

    // The exit status is the soak's judgment, and says why when it fails.
    let passed = soak["passed"].as_bool().unwrap();
    assert_eq!(o.status.code(), Some(if passed { 0 } else { 1 }), "{stdout}\n{stderr}");
    assert_eq!(passed, soak["failures"].as_array().unwrap().is_empty(), "{soak}");
    assert!(stdout.contains(if passed { "soak: passed" } else { "soak: FAILED" }), "{stdout}");

    // One sample a second, each with every server group dlbench started.
    let samples = std::fs::read_to_string(run.join("resources.jsonl")).unwrap();
    let samples: Vec<serde_json::Value> = samples.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let seconds = samples.last().unwrap()["t"].as_f64().unwrap();
    assert!(seconds >= 60.0, "sampled for {seconds}s");
    assert!(samples.len() as f64 >= seconds * 0.9, "{} samples over {seconds}s", samples.len());
    let mid = &samples[samples.len() / 2];
    assert!(mid["rss_kb"].as_u64().unwrap() > 1024 && mid["fds"].as_u64().unwrap() > 3, "{mid}");
    let servers = r["servers_mb"].as_object().unwrap();
    for backend in ["postgres", "redis", "redlock", "zookeeper", "etcd"] {
        let nodes: Vec<(&String, &serde_json::Value)> = servers.iter().filter(|(n, _)| n.starts_with(backend)).collect();
        assert!(!nodes.is_empty(), "no {backend} server sampled: {servers:?}");
        for (n, t) in nodes {
            assert!(t["peak"].as_f64().unwrap() > 1.0, "{n}: {t}");
        }
    }
    for k in ["harness_rss_mb", "harness_fds"] {
        assert!(r[k]["growth_per_hour"].is_number(), "{k} has a trend: {r}");
    }

    // Faults were applied on every backend, and every one healed.
    let applied = soak["faults_applied"].as_u64().unwrap();
    assert!(applied >= 5, "{soak}");
    assert_eq!(soak["faults_healed"], soak["faults_applied"], "{soak}");
    for b in summary["backends"].as_array().unwrap() {
        let starts = b["workloads"][0]["nemesis"].as_array().unwrap().iter().filter(|e| e["phase"] == "start").count();
        assert!(starts >= 1, "{}: no fault applied", b["name"]);
        assert!(b["verdict"].is_object(), "{}: history not checked", b["name"]);
    }
    assert!(soak["checked"].as_bool().unwrap());
    assert!(run.join("checks.json").exists());

    // The report plots the series.
    assert!(run.join("plots/resources.svg").exists(), "resources plot drawn");
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(page.contains("<h2>Resources</h2>") && page.contains("resources.svg"));
    let _ = std::fs::remove_dir_all(&out);
}

/// The judgment can fail: the same soak with a deliberate leak in dlbench (half a MiB a
/// second, written to and never freed) exits 1 naming the memory growth, and the heap series
/// shows the leak as memory in use, which the sampler's periodic trim cannot give back.
#[test]
fn a_deliberate_leak_fails_the_soak() {
    let out = scratch("soak-leak");
    let o = dlbench()
        .env(dlbench::usage::LEAK_HOOK, "512")
        .args(["soak", "--backends", "redis", "--duration", "40s", "--nemesis", "kill", "--nemesis-interval", "5s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("latest/summary.json")).unwrap()).unwrap();
    let soak = &summary["soak"];
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("soak: FAILED"), "{stdout}");
    let failures = soak["failures"].as_array().unwrap();
    assert!(failures.iter().any(|f| f.as_str().unwrap().contains("harness memory grew")), "{soak}");
    assert!(soak["rss_growth_pct"].as_f64().unwrap() > 20.0, "{soak}");
    // About 18 MiB leaked after the warm-up: in use, so still there after every trim.
    let heap = &summary["resources"]["harness_heap_mb"];
    assert!(heap["last"].as_f64().unwrap() - heap["first"].as_f64().unwrap() > 10.0, "{heap}");
    assert_eq!(soak["faults_healed"], soak["faults_applied"], "{soak}");
    let _ = std::fs::remove_dir_all(&out);
}
