//! U3: keep-alive at scale. 1,000 locks kept alive at once: losses, renewals, server CPU
//! per 1,000.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{Backend, DistLock, Expiry, Lease, LockError};
use futures::StreamExt;
use serde_json::json;

use super::{hit, raise_nofile, split, window_bytes, Log, Measurement};
use crate::scenario::stage::{opts, Ctx, TTL};

/// How many locks U3 keeps alive at once by default.
pub const SCALE: usize = 1000;
const SCALE_WINDOW: Duration = Duration::from_secs(9);

/// U3 (etcd #11886, #9911): 1,000 locks held at once, each by its own client over shared
/// connections (one process holding many locks), each kept alive for three TTLs: by an
/// extend every third of the TTL on the TTL designs, by the session's own keep-alive on the
/// others. Measured: locks lost, renewals failed, and the servers' CPU and the clients'
/// requests beyond idle, per 1,000 locks.
pub async fn keepalive_scale(ctx: &Ctx, locks: usize) -> anyhow::Result<Measurement> {
    let ttl = TTL;
    let net = ctx.net()?;
    let pids: Vec<i32> = ctx.target.nodes_of(ctx.kind).iter().filter_map(|n| n.pid()).collect();
    let nofile = raise_nofile();
    let log = Log::new();
    let shared = crate::connect::connect_with(ctx.kind, ctx.target.endpoints(), crate::connect::Timeouts::default(), dlbench_core::Connections::Shared, None).await?;
    let mode = shared.connections().map_or("in-process".to_string(), |c| c.to_string());
    let (_, base_bytes, base_cpu) = window_bytes(net, &pids, Duration::from_secs(2)).await;
    let per_s = |x: f64, d: Duration| x / d.as_secs_f64();
    log.at(format!("idle: clients sent {:.0} bytes/s, server CPU {:.1} ms/s", per_s(base_bytes, Duration::from_secs(2)), per_s(base_cpu, Duration::from_secs(2))));
    let n = if mode == "per-client" && locks as u64 * 3 > nofile / 2 { (nofile / 6) as usize } else { locks };
    let by_extend = shared.capabilities().expiry == Expiry::Ttl;
    let (held, failed_open) = split(take(ctx, &shared, n, ttl).await);
    log.at(format!("{} of {n} locks taken ({mode} connections){}", held.len(), failed_open.first().map(|e| format!("; first failure: {e}")).unwrap_or_default()));
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + SCALE_WINDOW;
    let keepers: Vec<_> = held.into_iter().map(|(c, l)| tokio::spawn(keep_alive(c, l, until, by_extend, counts.clone()))).collect();
    let (_, bytes, cpu) = window_bytes(net, &pids, SCALE_WINDOW).await;
    let mut back = Vec::new();
    for k in keepers {
        if let Ok(x) = k.await {
            back.push(x);
        }
    }
    let kept = back.len();
    release_all(back).await;
    let lost = counts.lost.load(Ordering::Relaxed);
    let (ok, failed) = (counts.renew_ok.load(Ordering::Relaxed), counts.renew_failed.load(Ordering::Relaxed));
    let scale = 1000.0 / kept.max(1) as f64;
    // Bytes, not reads: over shared connections many requests travel in one read.
    let kib = (per_s(bytes, SCALE_WINDOW) - per_s(base_bytes, Duration::from_secs(2))).max(0.0) * scale / 1024.0;
    let cpu_s = (per_s(cpu, SCALE_WINDOW) - per_s(base_cpu, Duration::from_secs(2))).max(0.0) * scale;
    log.at(format!("{kept} locks kept {:.0} s: {lost} lost, renewals {ok} ok / {failed} failed; per 1,000 locks the clients sent {kib:.1} KiB/s, server CPU {cpu_s:.1} ms/s", SCALE_WINDOW.as_secs_f64()));
    let mut h = hit(ctx, "U3", "");
    h.values.insert("locks".into(), kept as f64);
    h.values.insert("failed_to_take".into(), failed_open.len() as f64);
    h.values.insert("lost".into(), lost as f64);
    h.values.insert("renewals_ok".into(), ok as f64);
    h.values.insert("renewals_failed".into(), failed as f64);
    h.values.insert("client_kib_s_per_1000".into(), kib);
    h.values.insert("server_cpu_ms_s_per_1000".into(), cpu_s);
    let renewals = if by_extend { format!("renewals {ok} ok, {failed} failed") } else { "kept by the session's own keep-alive".into() };
    h.figure = format!(
        "{kept} locks for {:.0} s: {lost} lost, {renewals}; per 1,000 locks: server CPU {cpu_s:.1} ms/s, clients sent {kib:.1} KiB/s{}",
        SCALE_WINDOW.as_secs_f64(),
        if failed_open.is_empty() { String::new() } else { format!("; {} of {n} could not be taken: {}", failed_open.len(), failed_open[0]) }
    );
    if n < locks {
        h.notes.push(format!("{n} locks, not {locks}: per-client connections need about {} open files, over half the limit ({nofile})", locks * 3));
    }
    h.ok = kept > 0;
    let about = json!({ "locks": n, "ttl_s": ttl.as_secs_f64(), "window_s": SCALE_WINDOW.as_secs_f64(), "connections": mode, "kept_alive_by": if by_extend { "extend every TTL/3" } else { "the session's keep-alive" } });
    Ok((h, log.evidence(about)))
}

/// Take `n` locks, each by its own client of `shared`.
async fn take(ctx: &Ctx, shared: &Arc<dyn Backend>, n: usize, ttl: Duration) -> Vec<Result<(Arc<dyn DistLock>, Lease), LockError>> {
    futures::stream::iter(0..n)
        .map(|i| {
            let shared = shared.clone();
            let key = ctx.key(&format!("U3-{i}"));
            async move {
                let c: Arc<dyn DistLock> = Arc::from(shared.client().await?);
                let l = c.acquire(&key, &opts(ttl, Duration::from_secs(10))).await?;
                Ok::<_, LockError>((c, l))
            }
        })
        .buffer_unordered(50)
        .collect()
        .await
}

/// What the keep-alives counted together.
#[derive(Default)]
struct Counts {
    renew_ok: AtomicU64,
    renew_failed: AtomicU64,
    lost: AtomicU64,
}

/// Keep one lock alive until `until` (extending every third of the TTL when `by_extend`,
/// else only watching its lost signal); counts it lost if it was.
async fn keep_alive(c: Arc<dyn DistLock>, mut l: Lease, until: Instant, by_extend: bool, counts: Arc<Counts>) -> (Arc<dyn DistLock>, Lease) {
    let ttl = TTL;
    let mut signal = l.lost.clone();
    let mut was_lost = false;
    while Instant::now() < until {
        let tick = tokio::time::sleep(ttl / 3);
        tokio::select! {
            _ = signal.lost(), if !was_lost => { was_lost = true; }
            _ = tick => {
                if by_extend {
                    match c.extend(&mut l, ttl).await {
                        Ok(()) => { counts.renew_ok.fetch_add(1, Ordering::Relaxed); }
                        Err(_) => { counts.renew_failed.fetch_add(1, Ordering::Relaxed); was_lost = true; }
                    }
                }
            }
        }
    }
    if was_lost || l.lost.is_lost() {
        counts.lost.fetch_add(1, Ordering::Relaxed);
    }
    (c, l)
}

/// Release every lock and close its client, 100 at a time, 5 s at most each.
async fn release_all(held: Vec<(Arc<dyn DistLock>, Lease)>) {
    futures::stream::iter(held)
        .for_each_concurrent(100, |(c, l)| async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.release(l)).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        })
        .await;
}
