//! `run --shard I/N` and `merge`: three shard processes (three load hosts) against one set of
//! servers, merged into one result set that adds up exactly and whose checkers see holders
//! of different shards collide.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{dlbench, scratch, sigint, up, wait_exit};
use serde_json::Value;

fn redis_endpoint(ep: &Path) -> String {
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(ep).unwrap()).unwrap();
    t["redis"]["endpoints"][0].as_str().unwrap().to_string()
}

/// Start shard `i` of 3 of a Redis plan, all shards starting at `start_at`.
fn shard(ep: &Path, out: &Path, i: u32, start_at: u64, extra: &[&str]) -> Child {
    dlbench()
        .args(["run", "--target", "external", "--backends", "redis", "--seed", "7", "--no-fail-on-violation"])
        .arg("--endpoints")
        .arg(ep)
        .args(["--shard", &format!("{i}/3"), "--start-at", &start_at.to_string()])
        .args(extra)
        .arg("--out")
        .arg(out.join(format!("s{i}")))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("latest/summary.json")).unwrap()).unwrap()
}

/// Run three shards to their end and merge them; the merge's exit status and summary.
fn run_and_merge(dir: &Path, ep: &Path, extra: &[&str]) -> (i32, Value, Vec<Value>) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut kids: Vec<Child> = (0..3).map(|i| shard(ep, dir, i, now + 3, extra)).collect();
    for k in &mut kids {
        assert!(wait_exit(k, Duration::from_secs(120)).success(), "a shard failed");
    }
    let shards: Vec<Value> = (0..3).map(|i| summary(&dir.join(format!("s{i}")))).collect();
    let m = dlbench()
        .arg("merge")
        .args((0..3).map(|i| dir.join(format!("s{i}"))))
        .arg("--out")
        .arg(dir.join("merged"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let code = m.status.code().unwrap();
    (code, summary(&dir.join("merged")), shards)
}

/// Stops `dlbench up` on every exit from the test, a failed assertion included.
struct Servers(Child);

impl Drop for Servers {
    fn drop(&mut self) {
        sigint(&self.0);
        let _ = wait_exit(&mut self.0, Duration::from_secs(60));
    }
}

fn workload(s: &Value) -> &Value {
    &s["backends"][0]["workloads"][0]
}

#[test]
fn three_shards_add_up_and_a_collision_across_shards_is_caught() {
    let _g = common::heavy();
    let dir = scratch("shard");
    let (up_child, ep) = up(&dir, &["--backends", "redis"], &[]);
    let mut servers = Servers(up_child);

    // 1. Figures add up: 6 clients over 3 shards, many keys, no fault.
    let a = dir.join("sum");
    let (code, merged, shards) = run_and_merge(&a, &ep, &["--workload", "many-keys", "--clients", "6", "--duration", "2s", "--warmup", "1s"]);
    assert_eq!(code, 0, "a clean merged run is valid");
    let w = workload(&merged);
    let shard_clients: Vec<u64> = shards.iter().map(|s| workload(s)["clients"].as_u64().unwrap()).collect();
    assert_eq!(shard_clients, vec![2, 2, 2]);
    assert_eq!(w["clients"].as_u64().unwrap(), 3 * shard_clients[0], "clients = 3x a shard's");
    let sum = |f: &dyn Fn(&Value) -> u64| shards.iter().map(|s| f(workload(s))).sum::<u64>();
    assert_eq!(w["acquired"].as_u64().unwrap(), sum(&|w| w["acquired"].as_u64().unwrap()));
    assert_eq!(
        w["acquire_latency_us"]["count"].as_u64().unwrap(),
        sum(&|w| w["acquire_latency_us"]["count"].as_u64().unwrap()),
        "merged histogram count = sum of the shards'"
    );
    assert!(w["acquired"].as_u64().unwrap() > 0);
    assert_eq!(merged["shards"].as_array().unwrap().len(), 3, "one row per shard");
    // The merged history holds every client of the plan under its own process id.
    let hist = std::fs::read_to_string(a.join("merged/latest/history.jsonl")).unwrap();
    let mut procs: Vec<u64> = hist
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "ok" && r["f"] == "acquire")
        .map(|r| r["p"].as_u64().unwrap())
        .collect();
    procs.sort();
    procs.dedup();
    assert_eq!(procs, (0..6).collect::<Vec<u64>>(), "each shard's clients keep their ids in the whole");

    // 2. One client per shard on one key, the lock deleted under its holders: no shard can
    // see an overlap on its own (one holder each), the merged history must.
    let b = dir.join("violation");
    let flusher = common::Flusher::start(&redis_endpoint(&ep));
    let (code, merged, shards) =
        run_and_merge(&b, &ep, &["--workload", "hot-key", "--clients", "3", "--hold", "40ms", "--duration", "3s", "--warmup", "1s"]);
    drop(flusher);
    for s in &shards {
        assert_eq!(workload(s)["overlaps"].as_u64().unwrap(), 0, "a shard of one client sees no overlap at its own resource");
    }
    let checks: Value = serde_json::from_str(&std::fs::read_to_string(b.join("merged/latest/checks.json")).unwrap()).unwrap();
    let text = checks.to_string();
    assert_eq!(code, 1, "the merged verdict is invalid: {text:.2000}");
    assert_eq!(merged["backends"][0]["verdict"]["valid"], "invalid");
    assert!(workload(&merged)["overlaps"].as_u64().unwrap() > 0, "the table counts the overlaps across shards");

    // 3. The same collisions judged in one place: every shard's sections on a resource server
    // (a second, dedicated Redis). Each shard's own tallies now see the other shards' holders
    // (the server decided every overlap), the merged tallies are their sum, and each shard's
    // clock offset to the server is measured.
    let res_dir = dir.join("resource-server");
    let (res_child, res_ep) = up(&res_dir, &["--backends", "redis"], &[]);
    let _resource = Servers(res_child);
    let resource = format!("redis://{}", redis_endpoint(&res_ep));
    let c = dir.join("server");
    let flusher = common::Flusher::start(&redis_endpoint(&ep));
    let (code, merged, shards) = run_and_merge(
        &c,
        &ep,
        &["--workload", "hot-key", "--clients", "3", "--hold", "40ms", "--duration", "3s", "--warmup", "1s", "--resource", &resource],
    );
    drop(flusher);
    let per_shard: Vec<u64> = shards.iter().map(|s| workload(s)["overlaps"].as_u64().unwrap()).collect();
    assert!(per_shard.iter().sum::<u64>() > 0, "one client per shard, yet the server saw the shards' holders overlap: {per_shard:?}");
    assert_eq!(code, 1, "the merged verdict is invalid");
    let sections = |v: &Value| workload(v)["sections"].as_u64().unwrap_or(0);
    assert_eq!(sections(&merged), shards.iter().map(sections).sum::<u64>(), "the merged sections are the shards' sum");
    assert!(workload(&merged)["overlaps"].as_u64().unwrap() >= per_shard.iter().sum::<u64>(), "the merged overlaps hold every shard's");
    assert_eq!(merged["resource_server"].as_str(), Some(resource.as_str()), "the summary names where sections were judged");
    for row in merged["shards"].as_array().unwrap() {
        assert!(row["clock_offset_ms"].is_number(), "each shard's clock offset to the resource server: {row}");
    }
    for s in &shards {
        assert!(!s.to_string().contains("password"), "no credentials in a result");
    }
    // A shard without the resource server does not merge with those that had it.
    let o = dlbench().arg("merge").arg(c.join("s0")).arg(c.join("s1")).arg(b.join("s2")).arg("--out").arg(dir.join("mixed")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("same --resource"), "{}", String::from_utf8_lossy(&o.stderr));

    // 4. Bad input: one clear line, nothing created.
    let o = dlbench()
        .args(["run", "--target", "external", "--backends", "redis", "--workload", "many-keys", "--shard", "0/3"])
        .arg("--endpoints")
        .arg(&ep)
        .arg("--out")
        .arg(dir.join("noseed"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--seed"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.join("noseed").exists(), "nothing created");
    for (args, says) in [
        (&["--resource", "redis://:hunter2@127.0.0.1:1"][..], "DLBENCH_RESOURCE_PASSWORD"),
        (&["--resource", "redis://10.1.2.3:6379"][..], "loopback"),
        (&["--shard", "0/3", "--seed", "1", "--resource", "redis://127.0.0.1:1"][..], "--start-at"),
    ] {
        let o = dlbench()
            .args(["run", "--target", "external", "--backends", "redis", "--workload", "many-keys"])
            .arg("--endpoints")
            .arg(&ep)
            .args(args)
            .arg("--out")
            .arg(dir.join("bad-resource"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says) && err.trim().lines().count() == 1 && !err.contains("hunter2"), "{args:?}: {err}");
        assert!(!dir.join("bad-resource").exists(), "nothing created");
    }
    let o = dlbench().arg("merge").arg(a.join("s0")).arg(a.join("s2")).arg("--out").arg(dir.join("m2")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("each of 0..3 once"), "{}", String::from_utf8_lossy(&o.stderr));

    sigint(&servers.0);
    assert!(wait_exit(&mut servers.0, Duration::from_secs(60)).success(), "dlbench up stops cleanly");
}

/// The resource server applies the in-process resource's rules: the same timelines of
/// sections (an overlap with a lost update, a stale write refused, a token inversion with a
/// legitimate holder refused, a holder whose lease was lost, sections without tokens) give
/// the same record, flag for flag, from `Resource`, from the Lua port on a real Redis and
/// from the PL/pgSQL port on a real PostgreSQL.
#[test]
fn the_resource_server_judges_as_the_in_process_resource() {
    let _g = common::heavy();
    use dlbench::resource_server::{ResourceUrl, ServerResource};
    use dlbench_core::{FencingToken, Resource, SectionRecord};
    use std::time::Instant;

    let dir = scratch("resource-rules");
    let (child, ep) = up(&dir, &["--backends", "redis,postgres"], &[]);
    let mut servers = Servers(child);
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(&ep).unwrap()).unwrap();
    let pg = &t["postgres"];
    let urls = [
        format!("redis://{}", redis_endpoint(&ep)),
        format!("postgres://{}@{}/{}", pg["user"].as_str().unwrap(), pg["endpoints"][0].as_str().unwrap(), pg["database"].as_str().unwrap()),
    ];
    for url in &urls {
    let url = ResourceUrl::parse(url).unwrap().unwrap();

    // (start ms, token, lease valid, hold ms) per section, on one key.
    type Timeline = &'static [(u64, Option<u64>, bool, u64)];
    let timelines: [(&str, Timeline); 5] = [
        ("overlap, stale write refused", &[(0, Some(1), true, 300), (100, Some(2), true, 0)]),
        ("token inversion", &[(0, Some(5), true, 0), (150, Some(3), true, 0)]),
        ("no tokens", &[(0, None, true, 250), (100, None, true, 0), (400, None, true, 0)]),
        ("lease lost", &[(0, Some(7), true, 250), (100, Some(8), false, 0), (400, Some(9), true, 0)]),
        ("sequential", &[(0, Some(1), true, 0), (100, Some(2), true, 0), (200, Some(3), true, 0)]),
    ];
    let flags = |r: &SectionRecord| {
        (r.overlapped, r.lost_update, r.lost_update_fenced, r.stale, r.rejected, r.legit_refused, r.inversion, r.lease_lost)
    };
    // Every time in the timelines stretched by this factor: the judgement depends only on
    // their order, and a server call stalled by a busy machine (150 ms once, with a disk
    // busy beside the test) must not reorder sections meant to be apart.
    const STRETCH: u64 = 3;
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (i, (name, t)) in timelines.iter().enumerate() {
        let (local, remote) = rt.block_on(async {
            let local = Resource::new(1);
            let t0 = Instant::now();
            let runs = t.iter().map(|&(at, tok, valid, hold)| {
                let local = &local;
                async move {
                    tokio::time::sleep_until((t0 + Duration::from_millis(at * STRETCH)).into()).await;
                    let mut s = local.enter_as(0, tok.map(FencingToken), valid);
                    s.read_sleep_write(Duration::from_millis(hold * STRETCH)).await;
                    s.exit();
                    s.record()
                }
            });
            let local: Vec<SectionRecord> = futures::future::join_all(runs).await;
            let srv = ServerResource::open(&url, &format!("rules-{i}-{}", std::process::id()), 1, Instant::now()).await.unwrap();
            let t0 = Instant::now();
            let runs = t.iter().map(|&(at, tok, valid, hold)| {
                let srv = &srv;
                async move {
                    tokio::time::sleep_until((t0 + Duration::from_millis(at * STRETCH)).into()).await;
                    srv.section_as(0, tok.map(FencingToken), valid, Duration::from_millis(hold * STRETCH)).await.unwrap()
                }
            });
            let remote: Vec<SectionRecord> = futures::future::join_all(runs).await;
            (local, remote)
        });
        let (l, r): (Vec<_>, Vec<_>) = (local.iter().map(flags).collect(), remote.iter().map(flags).collect());
        assert_eq!(l, r, "{name}: in-process (left) and {} (right) disagree", url.shown());
        assert_eq!(local.iter().map(|s| s.read_value).collect::<Vec<_>>(), remote.iter().map(|s| s.read_value).collect::<Vec<_>>(), "{name}: reads");
        // Each timeline shows what it is named for, so agreement is not agreement on nothing.
        let any = |f: &dyn Fn(&SectionRecord) -> bool| remote.iter().any(f);
        match *name {
            "overlap, stale write refused" => assert!(any(&|s| s.overlapped) && any(&|s| s.rejected && s.stale && !s.legit_refused) && any(&|s| s.lost_update)),
            "token inversion" => assert!(any(&|s| s.inversion) && any(&|s| s.legit_refused)),
            "no tokens" => assert!(any(&|s| s.lost_update && s.lost_update_fenced) && !any(&|s| s.rejected)),
            "lease lost" => assert!(any(&|s| s.lease_lost) && any(&|s| s.overlapped)),
            _ => assert!(!any(&|s| s.overlapped || s.lost_update || s.stale || s.inversion)),
        }
        // Server stamps: entries in order, each exit after its entry.
        assert!(remote.iter().all(|s| s.exit_ns >= s.enter_ns), "{name}: server-stamped spans");
    }
    }
    sigint(&servers.0);
    assert!(wait_exit(&mut servers.0, Duration::from_secs(60)).success(), "dlbench up stops cleanly");
}
