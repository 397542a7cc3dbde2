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

/// One `run --backends nats` with `nemesis` (and `--properties` with it); `broken`: with the
/// compare skipped.
fn run(name: &str, nemesis: &str, broken: bool) -> (std::process::Output, serde_json::Value, std::path::PathBuf) {
    let dir = scratch(name);
    let mut c = dlbench();
    // Under faults, each with its room after the heal (the 3 s TTL, 4 s to elect): 27 s.
    let duration = if nemesis.is_empty() { "12s" } else { "27s" };
    c.args(["run", "--backends", "nats", "--workload", "hot-key", "--duration", duration, "--warmup", "0s", "--ttl", "3s"]);
    if !nemesis.is_empty() {
        // Holders held long enough that a fault finds them inside: a class needs strong
        // evidence in every fault's window (issue 48).
        c.args(["--nemesis", nemesis, "--nemesis-interval", "3s", "--hold", "200ms", "--properties"]);
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
    tables_have_a_measured_nats_row(&s, &stdout, &dir);

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

/// The four-properties table (summary.json, summary.md) and the AP / CP table (terminal)
/// have a nats row with figures this run measured: expiry, reentrancy, the grant rate under
/// the faults, the class claimed and the class observed. The expiry is the TTL the probe
/// asked (3 s): its lock lives in the bucket whose max age is 3 s. (Issue 54: every lock
/// once lived in one 10 s bucket, and the cell read "10.01 s (TTL 3 s)".)
fn tables_have_a_measured_nats_row(s: &serde_json::Value, stdout: &str, dir: &std::path::Path) {
    let p = &s["backends"][0]["properties"];
    let ttl = p["ttl_ms"].as_u64().unwrap();
    assert_eq!(ttl, 3_000, "{p}");
    assert!(p["expiry_ms"].as_u64().is_some_and(|ms| (ttl - 100..ttl + 2_000).contains(&ms)), "nats expiry, the probe's TTL {ttl} ms: {p}");
    assert!(p["reentrancy"].as_str().is_some_and(|r| r.starts_with("blocks")), "nats reentrancy (a second create finds the key): {p}");
    let md = std::fs::read_to_string(dir.join("latest/summary.md")).unwrap();
    let row = md.lines().find(|l| l.starts_with("| ") && l.contains("| nats |") && l.contains("(TTL 3 s)"));
    let row = row.unwrap_or_else(|| panic!("no nats row in the four-properties table:\n{md}"));
    assert!(row.contains("blocks") && !row.contains("not measured"), "{row}");
    let ap_cp = stdout.lines().find(|l| l.split_whitespace().next() == Some("nats") && l.contains("hot-key") && l.contains("CP"));
    let ap_cp = ap_cp.unwrap_or_else(|| panic!("no nats row in the AP / CP table:\n{stdout}"));
    assert!(!ap_cp.contains("not measured") && ap_cp.split_whitespace().nth(2).is_some_and(|r| r.parse::<f64>().is_ok_and(|r| r > 0.0)), "{ap_cp}");
}

const VAR: &str = "DLBENCH_TEST_NATS_PASSWORD";
const SECRET: &str = "nats-s3cret-for-the-test";

/// A client of the cluster in `ep` (the endpoints file), logging in with `login` or not at all.
fn connect(ep: &std::path::Path, login: Option<(&str, &str)>) -> Result<(), String> {
    let file: toml::Value = toml::from_str(&std::fs::read_to_string(ep).unwrap()).unwrap();
    let eps: Vec<String> = file["nats"]["endpoints"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect();
    let mut cfg = dlbench_nats::NatsConfig::new(eps);
    cfg.connect_timeout = std::time::Duration::from_secs(5);
    if let Some((u, p)) = login {
        cfg.user = Some(u.into());
        cfg.password = Some(p.into());
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(dlbench_nats::NatsBackend::connect(cfg)).map(|_| ()).map_err(|e| e.to_string())
}

/// `dlbench up --backends nats --password-env VAR`: every server requires the dlbench user's
/// password (from its private configuration file); the endpoints file names the variable,
/// and a run through it works, while a client without the password, or with a wrong one, is
/// refused by the servers.
#[test]
fn a_nats_cluster_with_a_password_refuses_a_client_without_it() {
    use std::os::unix::fs::PermissionsExt;
    let _g = common::heavy();
    let dir = scratch("nats-password");
    let (mut up, ep) = common::up(&dir, &["--backends", "nats", "--password-env", VAR], &[(VAR, SECRET)]);
    let file = std::fs::read_to_string(&ep).unwrap();
    // Stop `dlbench up` whatever the checks find.
    let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(file.contains(&format!("password_env = \"{VAR}\"")) && file.contains("user = \"dlbench\""), "{file}");
        assert!(!file.contains(SECRET), "the endpoints file holds the password itself");
        let rts = common::runtime_dirs_under(&dir);
        assert_eq!(rts.len(), 1, "{rts:?}");
        for i in 1..=3 {
            let conf = rts[0].join(format!("nats-{i}/nats.conf"));
            let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} is readable by others", conf.display());
            assert!(std::fs::read_to_string(&conf).unwrap().contains("authorization {"), "{}", conf.display());
        }
        let refused = connect(&ep, None).expect_err("a client without the password was let in");
        assert!(refused.to_lowercase().contains("authoriz"), "refused, but not for the password: {refused}");
        let wrong = connect(&ep, Some(("dlbench", "not-the-password"))).expect_err("a wrong password was let in");
        assert!(wrong.to_lowercase().contains("authoriz"), "{wrong}");
        connect(&ep, Some(("dlbench", SECRET))).expect("the right password");
        let out = dlbench()
            .args(["run", "--target", "external", "--backends", "nats", "--endpoints"])
            .arg(&ep)
            .args(["--duration", "1s", "--warmup", "0s", "--out"])
            .arg(dir.join("results"))
            .env(VAR, SECRET)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "a run with the password: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        assert!(!stdout.contains(SECRET), "the password reached the output");
        let s = summary(&dir.join("results"));
        assert!(s["backends"][0]["workloads"][0]["acquired"].as_u64().unwrap() > 0, "{}", s["backends"][0]);
        assert!(s["versions"]["nats"].as_str().is_some_and(|v| v.starts_with("2.")), "version asked with the password: {}", s["versions"]);
    }));
    common::sigint(&up);
    let status = common::wait_exit(&mut up, std::time::Duration::from_secs(60));
    assert!(status.success(), "dlbench up after Ctrl-C: {status}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
    if let Err(p) = checks {
        std::panic::resume_unwind(p);
    }
}

/// `kill:leader` on NATS kills the leader of the stream the phase's locks go through: the
/// bucket of the TTL they ask for, each bucket a stream with a leader of its own. (Issue 54:
/// the lookup once always asked for the 10 s bucket's leader, whatever the plan's TTL.) Buckets
/// are made for TTLs in turn until two have different leaders; for each, the lookup names its
/// own bucket's leader, as the servers report it.
#[test]
fn the_leader_looked_up_is_the_leader_of_the_plans_ttl_bucket() {
    use std::time::Duration;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let backend = rt.block_on(crate::support::backend(dlbench::kind::BackendKind::Nats));
    let ep = crate::support::endpoints().nats.as_ref().unwrap().endpoints[0].clone();
    let mut leaders: Vec<(Duration, String)> = Vec::new();
    for s in 3..=14u64 {
        let ttl = Duration::from_millis(s * 1000 + 7);
        rt.block_on(backend.granted_ttl(ttl)).unwrap();
        let bucket = dlbench_nats::bucket_name(ttl);
        let leader = rt.block_on(dlbench_nats::admin::bucket_leader(&ep, &bucket, None, Duration::from_secs(5))).unwrap();
        leaders.push((ttl, leader));
        if leaders.iter().any(|(_, l)| *l != leaders[0].1) {
            break;
        }
    }
    let (first, other) = (&leaders[0], leaders.last().unwrap());
    assert_ne!(first.1, other.1, "every bucket had one leader, so the lookup cannot be told apart: {leaders:?}");
    for (ttl, leader) in [first, other] {
        let looked_up = crate::support::leader(dlbench::kind::BackendKind::Nats, *ttl);
        assert_eq!(looked_up.as_deref(), Some(leader.as_str()), "TTL {ttl:?}: the lookup named another bucket's leader ({leaders:?})");
    }
}
