//! Each backend's primitives, measured with the same client libraries the locks use:
//! the rate of the one operation a lock is built from, and the terms of a hot-key hand-off's
//! critical path, from the protocol: for a polling lock (Redis, Redlock, PostgreSQL) the
//! winning attempt's reply and the release's request, one round trip of the primitive, the
//! retry gap counted at its best case, 0; for a watching lock (etcd, ZooKeeper) the time from
//! the holder's delete being sent to the waiter's watch event, plus the reads the recipe makes
//! after the event before its acquire returns (etcd: the predecessors, then its own key;
//! ZooKeeper: the children).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_redis::{NodeConfig, RedisNode};
use futures::StreamExt;

use super::measure::{rate, serial_us, timed, Rate, Serial};
use crate::endpoints::Endpoints;
use crate::kind::BackendKind;
use crate::summary::calibration::BoundTerm;

/// Samples per latency median.
const SAMPLES: u64 = 200;
const TTL: Duration = Duration::from_secs(10);

/// What a backend's primitives measured.
pub struct Prims {
    /// The primitive, e.g. "SET NX PX".
    pub name: &'static str,
    pub per_sec: f64,
    /// The hand-off's critical path (see [`crate::summary::calibration::Efficiency`]).
    pub path: Vec<BoundTerm>,
    /// Measured beside the path, not summed.
    pub beside: Vec<BoundTerm>,
    pub note: &'static str,
}

/// The retry interval of the hot-key measurement (`AcquireOptions`' default), jittered by the
/// backends to half to one and a half times it.
fn retry_interval_us() -> f64 {
    dlbench_core::AcquireOptions::default().retry_interval.as_secs_f64() * 1e6
}

/// A polling lock's terms, from its primitive's rate run `r` (with `clients` tasks) and its
/// serial round trips. Between one holder's acquire returning and the next one's: the
/// holder's release request (one way), a waiter's attempt arriving after it (a gap of 0 at
/// best), and that attempt's reply (one way): one round trip, at its fastest: the fastest
/// serial sample or the rate run's 1st percentile, whichever is lower (serial samples on an
/// idle runtime pay for waking threads, which a busy lock does not: Redis hand-offs beat the
/// serial median by 1.4x). Every term of every bound is its fastest observation, not its
/// median: a machine whose load moves between the term's samples and the hot-key run must
/// not lift a lock above its bound (ZooKeeper did, at 1.13, with medians). The medians, the
/// gap's expected value and the releaser's own next attempt (two round trips, the path a
/// hold-0 loop often takes) are listed beside.
fn polling(name: &'static str, r: &Rate, what: &str, serial: Serial, clients: usize) -> Prims {
    let waiters = clients.saturating_sub(1).max(1);
    let rtt = if r.p1_us > 0.0 { serial.min.min(r.p1_us) } else { serial.min };
    let period = serial.median + retry_interval_us();
    Prims {
        name,
        per_sec: r.per_sec,
        path: vec![BoundTerm::new(format!("{what} round trip at its fastest (release request + winning attempt's reply; retry gap 0)"), 1, rtt)],
        beside: vec![
            BoundTerm::new(format!("{what} round trip, serial median"), 1, serial.median),
            BoundTerm::new(format!("expected retry gap ({waiters} waiters, one attempt every {:.1} ms on average)", period / 1000.0), 1, period / (waiters as f64 + 1.0)),
            BoundTerm::new("releaser's own next acquire (release + attempt round trips, serial medians)", 1, 2.0 * serial.median),
        ],
        note: "polling: the best case is a waiter's attempt arriving just after the release",
    }
}

/// The reads a watching lock's waiter makes after its watch fires and before it holds.
struct Read {
    what: &'static str,
    /// Appended to `what` on the path, e.g. which keys are read.
    detail: &'static str,
    times: u32,
    took: Serial,
}

/// A watching lock's terms (etcd, ZooKeeper): between one holder's acquire returning and
/// the next one's, the holder's delete reaching the waiter as a watch event (`notify`, from
/// the delete being sent), then the waiter's `reads`; each at its fastest. The medians and
/// the delete's reply to the holder (`release`, not on the path: the waiter does not wait
/// for it) are listed beside.
fn watching(name: &'static str, per_sec: f64, notify: Serial, reads: Read, release: Serial, note: &'static str) -> Prims {
    Prims {
        name,
        per_sec,
        path: vec![
            BoundTerm::new("delete sent -> watch event at the waiter, fastest", 1, notify.min),
            BoundTerm::new(format!("{}{}, fastest", reads.what, reads.detail), reads.times, reads.took.min),
        ],
        beside: vec![
            BoundTerm::new("delete sent -> watch event, median", 1, notify.median),
            BoundTerm::new(format!("{}, median", reads.what), 1, reads.took.median),
            BoundTerm::new("delete's reply to the holder, median", 1, release.median),
        ],
        note,
    }
}

fn eps(e: &Endpoints, k: BackendKind) -> anyhow::Result<Vec<String>> {
    Ok(e.get(k).ok_or_else(|| anyhow::anyhow!("no [{k}] endpoints"))?.endpoints.clone())
}

async fn redis_nodes(ep: &str, n: usize) -> anyhow::Result<Vec<Arc<RedisNode>>> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(Arc::new(RedisNode::connect(&NodeConfig::new(ep)).await?));
    }
    Ok(v)
}

/// `SET cal:<task>:<i> v NX PX` on `tasks` connections of their own, per second.
async fn redis_set_rate(ep: &str, tasks: usize, secs: Duration) -> anyhow::Result<Rate> {
    let nodes = redis_nodes(ep, tasks).await?;
    let salt: u32 = rand::random();
    rate(tasks, secs, move |t, i| {
        let n = nodes[t].clone();
        async move {
            n.set_nx_px(&format!("cal:{salt:x}:{t}:{i}"), "v", TTL).await?;
            Ok(())
        }
    })
    .await
}

pub async fn redis(e: &Endpoints, tasks: usize, secs: Duration) -> anyhow::Result<Prims> {
    let ep = eps(e, BackendKind::Redis)?.remove(0);
    let r = redis_set_rate(&ep, tasks, secs).await?;
    let node = RedisNode::connect(&NodeConfig::new(&ep)).await?;
    let node = &node;
    let w = serial_us(SAMPLES as usize, |i| async move { timed(node.set_nx_px(&format!("cal:lat:{i}"), "v", TTL)).await }).await?;
    Ok(polling("SET NX PX", &r, "SET NX PX", w, tasks))
}

/// Redlock's primitive: SET NX PX sent to every node at once, done at the majority's replies.
async fn majority_set(nodes: &[Arc<RedisNode>], key: &str) -> anyhow::Result<()> {
    let quorum = nodes.len() / 2 + 1;
    let mut pending: futures::stream::FuturesUnordered<_> = nodes.iter().map(|n| n.set_nx_px(key, "v", TTL)).collect();
    let mut ok = 0;
    while let Some(r) = pending.next().await {
        if r? {
            ok += 1;
        }
        if ok >= quorum {
            return Ok(());
        }
    }
    anyhow::bail!("no majority for {key}")
}

pub async fn redlock(e: &Endpoints, tasks: usize, secs: Duration) -> anyhow::Result<Prims> {
    let eps = eps(e, BackendKind::Redlock)?;
    let mut per_task = Vec::new();
    for _ in 0..tasks {
        let mut nodes = Vec::new();
        for ep in &eps {
            nodes.push(Arc::new(RedisNode::connect(&NodeConfig::new(ep)).await?));
        }
        per_task.push(Arc::new(nodes));
    }
    let salt: u32 = rand::random();
    let first = per_task[0].clone();
    let r = rate(tasks, secs, move |t, i| {
        let nodes = per_task[t].clone();
        async move { majority_set(&nodes, &format!("cal:rl:{salt:x}:{t}:{i}")).await }
    })
    .await?;
    let w = serial_us(SAMPLES as usize, |i| {
        let nodes = first.clone();
        async move { timed(majority_set(&nodes, &format!("cal:rl:lat:{salt:x}:{i}"))).await }
    })
    .await?;
    Ok(polling("SET NX PX on a majority of 5", &r, "majority SET", w, tasks))
}

pub async fn postgres(e: &Endpoints, tasks: usize, secs: Duration, password: Option<&str>) -> anyhow::Result<Prims> {
    let ep = eps(e, BackendKind::Postgres)?.remove(0);
    let mut cfg = dlbench_postgres::PgConfig::new(&ep);
    cfg.password = password.map(str::to_string);
    let pg = dlbench_postgres::PgBackend::connect(cfg).await?;
    let pool = pg.pool().clone();
    sqlx::query("CREATE TABLE IF NOT EXISTS dlbench_calibration (id int PRIMARY KEY, n bigint NOT NULL)").execute(&pool).await?;
    for t in 0..tasks as i32 {
        sqlx::query("INSERT INTO dlbench_calibration VALUES ($1, 0) ON CONFLICT DO NOTHING").bind(t).execute(&pool).await?;
    }
    // One committed single-row write: each task on its own row, as each lock client on its key.
    const WRITE: &str = "UPDATE dlbench_calibration SET n = n + 1 WHERE id = $1";
    let p = pool.clone();
    let r = rate(tasks, secs, move |t, _| {
        let p = p.clone();
        async move {
            sqlx::query(WRITE).bind(t as i32).execute(&p).await?;
            Ok(())
        }
    })
    .await?;
    let w = serial_us(SAMPLES as usize, |_| timed(sqlx::query(WRITE).bind(0).execute(&pool))).await?;
    Ok(polling("single-row UPDATE commit", &r, "UPDATE commit", w, tasks))
}

async fn etcd_client(eps: &[String]) -> anyhow::Result<etcd_client::Client> {
    let urls: Vec<String> = eps.iter().map(|e| format!("http://{e}")).collect();
    Ok(etcd_client::Client::connect(urls, None).await?)
}

pub async fn etcd(e: &Endpoints, tasks: usize, secs: Duration) -> anyhow::Result<Prims> {
    let eps = eps(e, BackendKind::Etcd)?;
    let holder = etcd_client(&eps).await?;
    let waiter = etcd_client(&eps).await?;
    let salt: u32 = rand::random();
    let c = holder.clone();
    let per_sec = rate(tasks, secs, move |t, i| {
        let mut kv = c.kv_client();
        async move {
            kv.put(format!("cal/{salt:x}/{t}"), i.to_string(), None).await?;
            Ok(())
        }
    })
    .await?
    .per_sec;
    let key = format!("cal/{salt:x}/handoff");
    let mut kv = holder.kv_client();
    let release = serial_us(SAMPLES as usize, |_| {
        let (mut kv, key) = (kv.clone(), key.clone());
        async move {
            kv.put(key.clone(), "x", None).await?;
            timed(kv.delete(key, None)).await
        }
    })
    .await?;
    // Notification: from the holder's delete being sent to the waiter's watch event.
    let mut watch = waiter.watch_client();
    let opts = etcd_client::WatchOptions::new().with_filters([etcd_client::WatchFilterType::NoPut]);
    let mut stream = watch.watch(key.clone(), Some(opts)).await?;
    stream.message().await?; // the "created" response
    let mut samples = Vec::new();
    for _ in 0..SAMPLES / 2 {
        kv.put(key.clone(), "x", None).await?;
        let t0 = Instant::now();
        // The event is timed on its own stream, concurrently with the delete's reply: the
        // waiter does not wait for the holder's reply, so neither may the measurement.
        let mut del = kv.clone();
        let (d, ev) = tokio::join!(del.delete(key.clone(), None), async {
            loop {
                let m = tokio::time::timeout(Duration::from_secs(5), stream.message()).await??;
                let m = m.ok_or_else(|| anyhow::anyhow!("etcd watch ended"))?;
                if m.events().iter().any(|ev| ev.event_type() == etcd_client::EventType::Delete) {
                    return Ok::<_, anyhow::Error>(t0.elapsed());
                }
            }
        });
        d?;
        samples.push(ev?.as_secs_f64() * 1e6);
    }
    let notify = Serial::of(samples);
    let wkv = waiter.kv_client();
    let confirm = serial_us(SAMPLES as usize, |_| {
        let (mut wkv, key) = (wkv.clone(), key.clone());
        async move { timed(wkv.get(key, None)).await }
    })
    .await?;
    let reads = Read { what: "range read", detail: " (the predecessors, then its own key)", times: 2, took: confirm };
    Ok(watching("put", per_sec, notify, reads, release, "watching: the next waiter's watch on its predecessor fires, it reads twice, and holds"))
}

async fn zk_client(eps: &[String]) -> anyhow::Result<zookeeper_client::Client> {
    let cluster = eps.join(",");
    Ok(tokio::time::timeout(Duration::from_secs(10), zookeeper_client::Client::connect(&cluster)).await??)
}

pub async fn zookeeper(e: &Endpoints, tasks: usize, secs: Duration) -> anyhow::Result<Prims> {
    use zookeeper_client as zk;
    let eps = eps(e, BackendKind::Zookeeper)?;
    let mode = || zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let salt: u32 = rand::random();
    let mut clients = Vec::new();
    for _ in 0..tasks {
        clients.push(Arc::new(zk_client(&eps).await?));
    }
    let cs = clients.clone();
    let pairs = rate(tasks, secs, move |t, _| {
        let c = cs[t].clone();
        async move {
            let path = format!("/cal-{salt:x}-{t}");
            c.create(&path, b"", &mode()).await?;
            c.delete(&path, None).await?;
            Ok(())
        }
    })
    .await?
    .per_sec;
    let (holder, waiter) = (clients[0].clone(), zk_client(&eps).await?);
    let path = format!("/cal-{salt:x}-handoff");
    let mut release = Vec::new();
    let mut notify = Vec::new();
    for _ in 0..SAMPLES / 2 {
        holder.create(&path, b"", &mode()).await?;
        // The waiter may sit on a follower that has not applied the create yet: wait until it
        // sees the node, as a real waiter only watches a node it has listed.
        let mut seen = None;
        for _ in 0..500 {
            let (stat, watcher) = waiter.check_and_watch_stat(&path).await?;
            if stat.is_some() {
                seen = Some(watcher);
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let watcher = seen.ok_or_else(|| anyhow::anyhow!("zookeeper: {path} never became visible to a second session"))?;
        let t0 = Instant::now();
        let del = holder.delete(&path, None);
        let (d, ev) = tokio::join!(async { del.await.map(|_| t0.elapsed()) }, async {
            let _ = tokio::time::timeout(Duration::from_secs(5), watcher.changed()).await;
            t0.elapsed()
        });
        release.push(d?.as_secs_f64() * 1e6);
        notify.push(ev.as_secs_f64() * 1e6);
    }
    let (release, notify) = (Serial::of(release), Serial::of(notify));
    let confirm = serial_us(SAMPLES as usize, |_| timed(waiter.list_children("/"))).await?;
    let reads = Read { what: "getChildren", detail: "", times: 1, took: confirm };
    // A create-delete pair is two primitives.
    let note = "watching: the next waiter's watch on its predecessor fires, it lists the children, and holds";
    Ok(watching("create + delete", pairs * 2.0, notify, reads, release, note))
}
