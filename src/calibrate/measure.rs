//! The measurements behind `dlbench calibrate`: rates of single primitives and of lock
//! cycles with N concurrent connections, the latency of one write, one notification and one
//! confirming read, and the reference tools (`redis-benchmark`, `pgbench`) on the same servers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend};

use crate::summary::calibration::Cycle;

/// What a rate measurement saw.
pub struct Rate {
    /// Successful operations per second.
    pub per_sec: f64,
    /// The 1st percentile of the operations' durations, µs: an operation at its fastest
    /// with every task busy (threads awake, as in a loaded lock), which a serial sample on
    /// an otherwise idle runtime does not show.
    pub p1_us: f64,
}

/// Run `op(task, i)` on `tasks` concurrent tasks for `secs`; successful ops per second, and
/// their fastest durations.
pub async fn rate<F, Fut>(tasks: usize, secs: Duration, op: F) -> anyhow::Result<Rate>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (op, stop, done) = (op.clone(), stop.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let mut i = 0u64;
            // Each task its own samples: no lock shared on the measured path.
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                op(t, i).await?;
                took.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, anyhow::Error>(took)
        }));
    }
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let mut took = Vec::new();
    for h in handles {
        took.extend(h.await??);
    }
    let per_sec = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    took.sort_unstable();
    let p1_us = took.get(took.len() / 100).copied().unwrap_or(0) as f64;
    Ok(Rate { per_sec, p1_us })
}

/// `n` serial timings of one operation, µs.
#[derive(Debug, Clone, Copy)]
pub struct Serial {
    pub median: f64,
    /// The fastest: a bound's term at its best case.
    pub min: f64,
}

impl Serial {
    pub fn of(mut v: Vec<f64>) -> Serial {
        v.sort_by(|a, b| a.total_cmp(b));
        Serial { median: v[v.len() / 2], min: v[0] }
    }
}

/// `n` serial timings of `op`, in microseconds.
pub async fn serial_us<F, Fut>(n: usize, mut op: F) -> anyhow::Result<Serial>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let mut v = Vec::with_capacity(n);
    for i in 0..n as u64 {
        v.push(op(i).await?.as_secs_f64() * 1e6);
    }
    Ok(Serial::of(v))
}

/// Time one future.
pub async fn timed<T, E: Into<anyhow::Error>>(f: impl std::future::Future<Output = Result<T, E>>) -> anyhow::Result<Duration> {
    let t = Instant::now();
    f.await.map_err(Into::into)?;
    Ok(t.elapsed())
}

/// What a lock-cycle measurement saw.
pub struct Cycles {
    /// Lock cycles (acquire, release at once) per second.
    pub per_sec: f64,
    /// Median release latency over the measurement, µs: the release under this load.
    pub release_us: f64,
    /// Every cycle's instants, for the hand-offs between them.
    pub cycles: Vec<Cycle>,
}

/// Lock cycles (acquire, release at once) per second: each task on its own key when
/// `own_keys`, else all on one hot key (then the rate is the hand-off rate).
pub async fn lock_cycles(backend: Arc<dyn Backend>, tasks: usize, secs: Duration, own_keys: bool, tag: &str) -> anyhow::Result<Cycles> {
    let mut clients = Vec::new();
    for _ in 0..tasks {
        clients.push(Arc::new(backend.client().await?));
    }
    let tag = tag.to_string();
    let opts = AcquireOptions { ttl: Duration::from_secs(10), wait: Duration::from_secs(10), ..Default::default() };
    // Each task keeps its own cycles (no lock shared on the measured path), handed over at
    // the end through one mutex.
    let cycles = Arc::new(std::sync::Mutex::new(Vec::<Cycle>::new()));
    let c2 = cycles.clone();
    let origin = Instant::now();
    let us = move |t: Instant| t.duration_since(origin).as_secs_f64() * 1e6;
    let per_sec = rate(tasks, secs, move |t, _| {
        let c = clients[t].clone();
        let key = if own_keys { format!("{tag}-{t}") } else { tag.clone() };
        let opts = opts.clone();
        let cycles = c2.clone();
        async move {
            let acquire_called = Instant::now();
            let lease = c.acquire(&key, &opts).await?;
            let granted = Instant::now();
            let release_called = Instant::now();
            c.release(lease).await?;
            let released = Instant::now();
            let cycle = Cycle { client: t, acquire_called: us(acquire_called), granted: us(granted), release_called: us(release_called), released: us(released) };
            cycles.lock().unwrap().push(cycle);
            Ok(())
        }
    })
    .await?
    .per_sec;
    let cycles = std::mem::take(&mut *cycles.lock().unwrap());
    let mut v: Vec<f64> = cycles.iter().map(|c| c.released - c.release_called).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let release_us = v.get(v.len() / 2).copied().unwrap_or(0.0);
    Ok(Cycles { per_sec, release_us, cycles })
}

/// `redis-benchmark` running `SET cal:<random> v NX PX 10000` with `clients` connections.
pub async fn redis_benchmark(endpoint: &str, clients: usize, requests: u64) -> anyhow::Result<f64> {
    let (host, port) = endpoint.rsplit_once(':').ok_or_else(|| anyhow::anyhow!("bad endpoint {endpoint}"))?;
    let out = tokio::process::Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-c", &clients.to_string(), "-n", &requests.to_string(), "-r", "100000000", "--csv"])
        .args(["SET", "cal:__rand_int__", "v", "NX", "PX", "10000"])
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run redis-benchmark: {e} (Debian package redis-tools)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps",... then "SET ...","42069.84",...
    text.lines()
        .rev()
        .find_map(|l| l.split("\",\"").nth(1).and_then(|v| v.trim_matches('"').parse::<f64>().ok()))
        .ok_or_else(|| anyhow::anyhow!("redis-benchmark printed no rate: {}", String::from_utf8_lossy(&out.stderr).trim()))
}

/// The pgbench script: the postgres backend's own acquire and release statements, each
/// client on its own lock name (`:client_id`), as dlbench's side of the comparison runs.
pub fn pgbench_script() -> String {
    let name = "('cal-pg-' || :client_id)";
    let owner = "('owner-' || :client_id)";
    let acquire = dlbench_postgres::ACQUIRE.replace("$1", name).replace("$2", ":ttl").replace("$3", owner);
    let release = dlbench_postgres::RELEASE.replace("$1", name).replace("$2", owner);
    format!("\\set ttl 10\n{};\n{};\n", acquire.replace('\n', " "), release.replace('\n', " "))
}

/// `pgbench -f` with the lock cycle script, `clients` connections, for `secs`; cycles/s.
pub async fn pgbench(endpoint: &str, clients: usize, secs: Duration, script: &std::path::Path, password: Option<&str>) -> anyhow::Result<f64> {
    let (host, port) = endpoint.rsplit_once(':').ok_or_else(|| anyhow::anyhow!("bad endpoint {endpoint}"))?;
    let bin = crate::cluster::local::bins::find_pg("pgbench").ok_or_else(|| anyhow::anyhow!("pgbench not found (Debian package postgresql)"))?;
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["-h", host, "-p", port, "-U", "postgres", "-n", "-M", "prepared", "-c", &clients.to_string(), "-j", "2"])
        .args(["-T", &secs.as_secs().max(1).to_string(), "-f"])
        .arg(script)
        .arg("postgres");
    if let Some(pw) = password {
        cmd.env("PGPASSWORD", pw);
    }
    let out = cmd.output().await.map_err(|e| anyhow::anyhow!("cannot run pgbench: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ").and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<f64>().ok()))
        .ok_or_else(|| anyhow::anyhow!("pgbench printed no tps: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim()))
}
