//! U7: the cost of waiting. Client requests and server CPU per waiter, 1 to 1,000 waiters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlbench_core::DistLock;
use futures::StreamExt;
use serde_json::json;

use super::{hit, raise_nofile, signed_s, split, window, Log, Measurement};
use crate::scenario::stage::{opts, Ctx};

/// The waiter counts U7 steps through by default.
pub const HERD: [usize; 4] = [1, 10, 100, 1000];
/// How long the waiters are measured while they wait, and after the release.
const HERD_WINDOW: Duration = Duration::from_secs(2);
const HERD_SETTLE: Duration = Duration::from_secs(1);
const HERD_WAKE: Duration = Duration::from_secs(1);

/// U7: one holder keeps a key; 1, 10, 100, 1,000 waiters (each its own client, as separate
/// processes would be) wait for it. Measured while they wait: the requests clients send
/// (reads at the proxies) per waiter per second, and the servers' CPU, both beyond what the
/// holder alone costs; then the second after the release: requests per waiter (every poller
/// tries again; a watch wakes one) and the time to the next grant.
pub async fn herd(ctx: &Ctx, sizes: &[usize]) -> anyhow::Result<Measurement> {
    let net = ctx.net()?;
    let nodes = ctx.target.nodes_of(ctx.kind);
    let pids: Vec<i32> = nodes.iter().filter_map(|n| n.pid()).collect();
    let nofile = raise_nofile();
    let log = Log::new();
    let ttl = Duration::from_secs(30);
    let holder = ctx.backend.client().await?;
    // The holder alone: its keep-alives and the servers' idle work.
    let key0 = ctx.key("U7-base");
    let l0 = holder.acquire(&key0, &opts(ttl, Duration::from_secs(10))).await?;
    let (base_reads, base_cpu) = window(net, &pids, HERD_WINDOW).await;
    let _ = holder.release(l0).await;
    let base = (per_s(base_reads), per_s(base_cpu));
    log.at(format!("baseline, the holder alone: {:.1} requests/s, server CPU {:.1} ms/s", base.0, base.1));
    let mut h = hit(ctx, "U7", "");
    let mut rounds = Vec::new();
    let mut cells = Vec::new();
    let step = Herd { ctx, holder: &*holder, ttl, net, pids: &pids, base, log: &log };
    for &n in sizes {
        // Each client's connections pass a proxy: three descriptors each in this process.
        let need = n as u64 * nodes.len() as u64 * 3;
        if need > nofile / 2 {
            let why = format!("{n} waiters not run: about {need} open files, over half the limit ({nofile})");
            log.at(&why);
            h.notes.push(why);
            continue;
        }
        let r = match step.round(n).await {
            Ok(r) => r,
            Err(note) => {
                h.notes.push(note);
                break;
            }
        };
        h.values.insert(format!("requests_per_waiter_s@{n}"), r.req);
        h.values.insert(format!("server_cpu_ms_s@{n}"), r.cpu_s);
        h.values.insert(format!("wake_requests_per_waiter@{n}"), r.wake);
        if let Some(ms) = r.handoff {
            h.values.insert(format!("handoff_ms@{n}"), ms);
        }
        h.values.insert(format!("failed@{n}"), (r.failed.len() + r.open_errors.len()) as f64);
        if r.early > 0 {
            h.notes.push(format!("{n} waiters: {} granted while the holder held the key", r.early));
        }
        if !r.failed.is_empty() || !r.open_errors.is_empty() {
            h.notes.push(format!(
                "{n} waiters: {} failed: {}",
                r.failed.len() + r.open_errors.len(),
                r.open_errors.first().or(r.failed.first()).cloned().unwrap_or_default()
            ));
        }
        rounds.push(n);
        cells.push((if r.waiting < n { format!("{n} ({} opened)", r.waiting) } else { n.to_string() }, r.req, r.cpu_s, r.wake));
    }
    holder.close().await;
    h.figure = figure(&cells);
    // Evidence needs waiters that waited: every step run, none granted early.
    h.ok = !cells.is_empty() && !h.notes.iter().any(|n| n.contains("granted while the holder"));
    let about = json!({ "waiters": rounds, "window_s": HERD_WINDOW.as_secs_f64(), "settle_s": HERD_SETTLE.as_secs_f64(), "holder_ttl_s": ttl.as_secs_f64(),
        "baseline_requests_s": per_s(base_reads), "baseline_server_cpu_ms_s": per_s(base_cpu), "servers": pids.len() });
    Ok((h, log.evidence(about)))
}

/// Per second of the measuring window.
fn per_s(x: f64) -> f64 {
    x / HERD_WINDOW.as_secs_f64()
}

/// What one step runs with: the holder, the servers measured and the baseline (requests/s
/// and server CPU ms/s with the holder alone).
struct Herd<'a> {
    ctx: &'a Ctx,
    holder: &'a dyn DistLock,
    ttl: Duration,
    net: &'a crate::nemesis::net::Net,
    pids: &'a [i32],
    base: (f64, f64),
    log: &'a Log,
}

/// One step's figures.
struct Round {
    /// The waiters whose clients opened.
    waiting: usize,
    /// Requests per waiter per second while waiting, beyond the baseline.
    req: f64,
    /// Server CPU ms/s while they wait, beyond the baseline.
    cpu_s: f64,
    /// Requests per waiter in the second after the release.
    wake: f64,
    /// The next grant, ms after the release.
    handoff: Option<f64>,
    /// Granted before the release.
    early: u64,
    failed: Vec<String>,
    open_errors: Vec<String>,
}

impl Herd<'_> {
    /// `n` waiters wait for the key the holder keeps, are measured, then see it released.
    /// `Err`: the holder could not take the key (the note saying so).
    async fn round(&self, n: usize) -> Result<Round, String> {
        let Herd { ctx, holder, ttl, net, pids, base, log } = *self;
        let key = ctx.key(&format!("U7-{n}"));
        let opened: Vec<Result<Box<dyn DistLock>, _>> =
            futures::stream::iter(0..n).map(|_| ctx.backend.client()).buffer_unordered(50).collect().await;
        let (clients, open_errors) = split(opened);
        let clients: Vec<Arc<dyn DistLock>> = clients.into_iter().map(Arc::from).collect();
        if !open_errors.is_empty() {
            log.at(format!("{n} waiters: {} could not open a client: {}", open_errors.len(), open_errors[0]));
        }
        let lease = match holder.acquire(&key, &opts(ttl, Duration::from_secs(10))).await {
            Ok(l) => l,
            Err(e) => {
                close_all(&clients).await;
                return Err(format!("{n} waiters: the holder could not take the key: {e}"));
            }
        };
        let grants = Arc::new(AtomicU64::new(0));
        let first_grant = Arc::new(Mutex::new(None::<Instant>));
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let tasks: Vec<_> = clients
            .iter()
            .map(|c| {
                let (c, key, grants, first_grant, failures) = (c.clone(), key.clone(), grants.clone(), first_grant.clone(), failures.clone());
                // The library's own retry interval: what a user of it gets.
                let o = dlbench_core::AcquireOptions::default().with_ttl(ttl).with_wait(Duration::from_secs(60));
                tokio::spawn(async move {
                    match c.acquire(&key, &o).await {
                        Ok(l) => {
                            grants.fetch_add(1, Ordering::Relaxed);
                            first_grant.lock().unwrap().get_or_insert(Instant::now());
                            let _ = c.release(l).await;
                        }
                        Err(e) => failures.lock().unwrap().push(e.to_string()),
                    }
                })
            })
            .collect();
        tokio::time::sleep(HERD_SETTLE).await;
        let waiting = clients.len();
        let (reads, cpu) = window(net, pids, HERD_WINDOW).await;
        let early = grants.load(Ordering::Relaxed);
        let released = Instant::now();
        let _ = holder.release(lease).await;
        let (wake_reads, _) = window(net, pids, HERD_WAKE).await;
        let handoff = first_grant.lock().unwrap().map(|t| signed_s(released, t) * 1000.0);
        for t in &tasks {
            t.abort();
        }
        close_all(&clients).await;
        let failed = failures.lock().unwrap().clone();
        let req = ((per_s(reads) - base.0) / waiting.max(1) as f64).max(0.0);
        let cpu_s = (per_s(cpu) - base.1).max(0.0);
        let wake = wake_reads / waiting.max(1) as f64;
        log.at(format!(
            "{n} waiters ({waiting} opened): {req:.2} requests/s each while waiting, server CPU {cpu_s:.1} ms/s beyond the holder's; \
             after the release {wake:.2} requests each in {:.0} s, next grant {}; {early} granted before the release, {} failed{}",
            HERD_WAKE.as_secs_f64(),
            handoff.map_or("none".into(), |ms| format!("{ms:.0} ms after it")),
            failed.len(),
            failed.first().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
        Ok(Round { waiting, req, cpu_s, wake, handoff, early, failed, open_errors })
    }
}

/// The figure: per step, the waiters, requests/s each, server CPU and requests after a
/// release.
fn figure(cells: &[(String, f64, f64, f64)]) -> String {
    let list = |f: &dyn Fn(&(String, f64, f64, f64)) -> String| cells.iter().map(f).collect::<Vec<_>>().join("/");
    if cells.is_empty() {
        "not measured".into()
    } else {
        format!(
            "requests/s per waiter at {} waiters: {}; server CPU ms/s: {}; requests per waiter in the second after a release: {}",
            list(&|c| c.0.clone()),
            list(&|c| format!("{:.1}", c.1)),
            list(&|c| format!("{:.1}", c.2)),
            list(&|c| format!("{:.2}", c.3))
        )
    }
}

async fn close_all(clients: &[Arc<dyn DistLock>]) {
    futures::stream::iter(clients.iter().cloned())
        .for_each_concurrent(100, |c| async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        })
        .await;
}
