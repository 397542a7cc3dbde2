//! The `power-loss` fault on the local target (issue 36): each node's data directory on the
//! `dlbench-faultfs` layer, the fault a SIGKILL plus a power cut under the data (unsynced
//! writes dropped), its inverse a remount and a restart; evidence read from the process and
//! the layer's own account; nothing left mounted or running afterwards.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{self, dlbench, processes_under, runtime_dirs_under, scratch, wait_exit};

fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("latest").join("summary.json")).unwrap()).unwrap()
}

/// Every faultfs mount still in the mount table.
fn layer_mounts() -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table.lines().filter(|l| l.contains(" dlbench-faultfs ")).map(str::to_string).collect()
}

/// The faultfs mounts under `dir`.
fn layer_mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().to_string();
    layer_mounts().into_iter().filter(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with(dir.as_str()))).collect()
}

/// `dlbench run --nemesis FAULT` on `backends`: the run ended cleanly (no input error, no
/// process left, no layer left mounted). Returns the summary's backends and the table.
fn power_loss_run(backends: &str, fault: &str, duration: &str, interval: &str) -> (Vec<serde_json::Value>, String) {
    power_loss_run_by(dlbench(), backends, fault, duration, interval)
}

/// The same, by the binary `cmd` runs.
fn power_loss_run_by(mut cmd: std::process::Command, backends: &str, fault: &str, duration: &str, interval: &str) -> (Vec<serde_json::Value>, String) {
    let dir = scratch(&format!("power-loss-{}", backends.replace(',', "-")));
    let out = cmd
        // A 2 s TTL: the room after each heal (TTL and restart) fits a short phase.
        .args(["run", "--backends", backends, "--workload", "hot-key", "--duration", duration, "--warmup", "0s", "--ttl", "2s", "--nemesis", fault])
        .args(["--nemesis-interval", interval, "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.code().is_some_and(|c| c != 2), "the run failed:\n{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
    // Under this run's own runtime directories: other runs on the machine may have layers up.
    let rts = runtime_dirs_under(&dir);
    assert!(!rts.is_empty(), "no runtime directory recorded under {}", dir.display());
    let left: Vec<String> = rts.iter().flat_map(|r| layer_mounts_under(r)).collect();
    assert!(left.is_empty(), "a layer is still mounted after the run: {left:?}");
    let s = summary(&dir);
    (s["backends"].as_array().unwrap().clone(), stdout)
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
    let (all, stdout) = power_loss_run("etcd", "power-loss:leader", "10s", "4s");
    let b = &all[0];
    for d in starts(b, "power-loss:leader") {
        assert!(
            d.starts_with("checked: ") && d.contains("process gone; power loss: dropped"),
            "evidence from the process and the layer: {d}"
        );
    }
    assert_eq!(b["verdict"]["faults_applied"], serde_json::json!(["power-loss:leader"]), "{}\n{stdout}", b["verdict"]);
}

/// The `dlbench` binary alone, copied into an empty directory (as `cargo install` or the
/// compose image leave it): it carries the power-loss layer, so the fault runs and heals.
#[test]
fn the_binary_alone_carries_the_power_loss_layer() {
    let _g = common::heavy();
    let lone = scratch("lone-binary");
    std::fs::create_dir_all(&lone).unwrap();
    let bin = lone.join("dlbench");
    std::fs::copy(env!("CARGO_BIN_EXE_dlbench"), &bin).unwrap();
    assert_eq!(std::fs::read_dir(&lone).unwrap().count(), 1, "nothing beside it");
    let mut cmd = std::process::Command::new(&bin);
    cmd.env_remove("DLBENCH_LOG").env("DLBENCH_STRICT_VERDICTS", "1").current_dir(&lone);
    let (all, stdout) = power_loss_run_by(cmd, "redis", "power-loss", "10s", "4s");
    for d in starts(&all[0], "power-loss") {
        assert!(d.contains("process gone; power loss: dropped"), "the layer's own account: {d}");
    }
    assert_eq!(all[0]["verdict"]["faults_applied"], serde_json::json!(["power-loss"]), "{}\n{stdout}", all[0]["verdict"]);
    let _ = std::fs::remove_dir_all(&lone);
}

/// Every other server family at once, in one run (its servers start together): a power loss
/// of all of a family's nodes at once (a correlated failure), every node's process gone and
/// its layer's unsynced writes dropped, every one healed (remounted, restarted, healthy), the
/// fault counted as applied, and nothing left running or mounted. (etcd is the test above.)
#[test]
fn a_power_loss_of_all_nodes_heals_on_every_other_family() {
    let _g = common::heavy();
    let started = Instant::now();
    let families = ["redis", "redlock", "postgres", "mariadb", "zookeeper", "nats"];
    let (all, stdout) = power_loss_run(&families.join(","), "power-loss:all", "11s", "3s");
    let names: Vec<&str> = all.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, families, "{stdout}");
    for b in &all {
        let nodes = if b["name"] == "redlock" { 5 } else if ["zookeeper", "nats"].contains(&b["name"].as_str().unwrap()) { 3 } else { 1 };
        for d in starts(b, "power-loss:all") {
            assert_eq!(d.matches("process gone; power loss: dropped").count(), nodes, "{}: evidence for each node: {d}", b["name"]);
        }
        assert_eq!(b["verdict"]["faults_applied"], serde_json::json!(["power-loss:all"]), "{}: {}\n{stdout}", b["name"], b["verdict"]);
    }
    eprintln!("six families under power-loss:all took {:?}", started.elapsed());
}

/// A `dlbench run` SIGKILLed while its nodes sit on the power-loss layer: the layers die with
/// it (parent-death signal) and leave their mounts behind, answering ENOTCONN. The next run's
/// sweep detaches them, by the mount paths the dead run recorded in its runtime directory,
/// and removes that directory.
#[test]
fn the_sweep_detaches_the_layers_of_a_killed_run() {
    let _g = common::heavy();
    let dir = scratch("power-loss-sigkill");
    let base = dir.join("runtime");
    let killed = dir.join("killed");
    let mut child = dlbench()
        .args(["run", "--backends", "redis", "--workload", "hot-key", "--duration", "60s", "--warmup", "0s"])
        .args(["--nemesis", "power-loss", "--nemesis-interval", "30s", "--out"])
        .arg(&killed)
        .env("DLBENCH_RUNTIME_DIR", &base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while layer_mounts_under(&base).is_empty() && Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGKILL to the one PID we started: no cleanup code of dlbench runs.
    child.kill().unwrap();
    wait_exit(&mut child, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let left = layer_mounts_under(&base);
    let rts = runtime_dirs_under(&killed);
    assert!(!left.is_empty() && rts.len() == 1, "the kill left no layer mounted, so the sweep is not tested: {rts:?}");
    assert!(processes_under(&killed).is_empty(), "left behind: {:?}", processes_under(&killed));

    let o = dlbench()
        .args(["run", "--backends", "redis", "--workload", "hot-key", "--duration", "500ms", "--warmup", "0s", "--out"])
        .arg(dir.join("next"))
        .env("DLBENCH_RUNTIME_DIR", &base)
        .output()
        .unwrap();
    let still = layer_mounts_under(&base);
    let gone = !rts[0].exists();
    // Whatever the outcome, nothing stays mounted in /tmp after the test.
    for m in &still {
        let path = m.split(' ').nth(4).unwrap();
        let _ = std::process::Command::new("umount").args(["-l", path]).status();
    }
    assert!(o.status.success(), "the next run: {}", String::from_utf8_lossy(&o.stderr));
    assert!(still.is_empty(), "the next run's sweep left the killed run's layers mounted: {still:?}");
    assert!(gone, "the next run's sweep left {}", rts[0].display());
}
