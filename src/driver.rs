//! The load loop: clients acquire, work on the protected resource, release, think, repeat.
//!
//! One phase runs one [`Workload`] against one backend. Each client is a task with its own
//! [`DistLock`] (its own session); a client whose operation ended with an unknown outcome
//! is retired (abandoned, as a crashed process would be) and replaced, never reused.
//!
//! Closed loop: each client acquires, holds, releases, thinks, repeats. Open loop
//! (`rate`): operation *i* is due at `start + i / rate`; whichever client is free takes the
//! next due operation, and its latency counts from when it was due, so a stalled server
//! cannot hide its stall by slowing the load down (coordinated omission; wrk2 and YCSB's
//! `intended` mode). How late a free client starts a due operation is the driver's own lag,
//! reported separately from the system's latency.
//!
//! Latency counts only operations that started after the warm-up; the resource counts
//! everything, because a safety violation during warm-up is still a violation.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, DistLock, LockError, Resource};
use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use crate::history::{HistoryWriter, Meta, Op, Record, CANCELLED};
use crate::phase::PhaseResult;
use crate::phase::quiet_tail;
use crate::nemesis::NemesisEvent;
use crate::stats::{new_histogram, HlogWriter, Recorder, TimePoint};
use crate::workload::{KeyPicker, Workload};

/// How many clients' first keys the result keeps, and how many keys each.
const SAMPLE_CLIENTS: usize = 4;
const SAMPLE_KEYS: usize = 32;

/// What the ticker tells a progress display once a second.
#[derive(Debug, Clone)]
pub struct Tick {
    pub point: TimePoint,
    pub elapsed: Duration,
    /// Warm-up plus duration.
    pub planned: Duration,
}

pub type OnTick = Arc<dyn Fn(&Tick) + Send + Sync>;

/// Faults for a phase: given the phase's clock origin and a token that fires when faults
/// must stop, runs them and ends healed, returning what it did.
pub type FaultRunner = Box<
    dyn FnOnce(Instant, CancellationToken) -> futures::future::BoxFuture<'static, anyhow::Result<Vec<NemesisEvent>>> + Send,
>;

/// Where a phase sends its side outputs, and what else runs beside it.
#[derive(Default)]
pub struct PhaseOutputs {
    /// Write `<dir>/<label>-acquire.hlog` as the phase runs.
    pub hlog: Option<(PathBuf, String)>,
    pub on_tick: Option<OnTick>,
    /// Stream every operation to this history (a `meta` record opens the segment).
    pub history: Option<(HistoryWriter, String)>,
    pub faults: Option<FaultRunner>,
    /// How long before the phase's end faults stop (default: a quarter of the phase, 2 s at
    /// least), so that whether the service recovered can be seen.
    pub quiet_tail: Option<Duration>,
    /// Snapshot the cost counters at the measured window's start and end (see `cost`).
    pub cost: Option<crate::cost::CostProbe>,
    /// This phase is one shard of a larger one (`run --shard I/N`): its clients are
    /// `w.clients` of the whole plan's, numbered from here on.
    pub shard: Option<ShardSlice>,
    /// The protected resource lives in this server (`--resource redis://...`), under this
    /// scope (shared by every shard of a plan), rather than in this process.
    pub resource_server: Option<(crate::resource_server::ResourceUrl, String)>,
}

/// Which clients of a sharded phase this process runs. Client `c` here is client
/// `first_client + c` of the whole: its key sequence and its process id in the history are
/// the ones it has in an unsharded run, so the merged history has one id per client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSlice {
    pub index: u32,
    pub count: u32,
    pub first_client: usize,
    pub total_clients: usize,
}

/// Per-key arrival order, to count grants that jump the queue.
///
/// A grant is out of order when its client arrived after the key's previous grant while
/// another client, which was already waiting before that grant, is still waiting: a FIFO
/// lock hands the key to the oldest waiter. Arrival is when the client called acquire, so a
/// waiter that called within one round trip of the previous grant may not have reached the
/// server yet; requiring it to have waited since before that grant keeps that race small.
struct FifoTracker {
    keys: Vec<Mutex<KeyQueue>>,
    violations: AtomicU64,
}

#[derive(Default)]
struct KeyQueue {
    waiting: HashMap<usize, Instant>,
    last_grant: Option<Instant>,
}

impl FifoTracker {
    fn new(keys: usize) -> Self {
        FifoTracker { keys: (0..keys).map(|_| Mutex::default()).collect(), violations: AtomicU64::new(0) }
    }
    fn arrive(&self, key: usize, client: usize, at: Instant) {
        self.keys[key].lock().unwrap().waiting.insert(client, at);
    }
    fn leave(&self, key: usize, client: usize) {
        self.keys[key].lock().unwrap().waiting.remove(&client);
    }
    fn granted(&self, key: usize, client: usize, arrived: Instant) {
        let mut q = self.keys[key].lock().unwrap();
        q.waiting.remove(&client);
        if let Some(prev) = q.last_grant {
            if arrived > prev && q.waiting.values().any(|&w| w < prev) {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
        }
        q.last_grant = Some(Instant::now());
    }
}

struct Shared {
    backend: Arc<dyn Backend>,
    workload: Workload,
    keys: Vec<String>,
    resource: Resource,
    /// Where sections run when the resource is a server (`--resource`).
    server: Option<crate::resource_server::ServerResource>,
    recorder: Recorder,
    started: Instant,
    measure_from: Instant,
    /// No new operations after this fires.
    stop: CancellationToken,
    /// Cancel operations in flight (interrupt, or the drain took too long).
    abort: CancellationToken,
    retired: AtomicU64,
    /// The next process id for a client replacing a retired one.
    next_process: AtomicU64,
    /// Number of this process's client 0 in the whole (sharded) phase.
    first_client: usize,
    history: Option<HistoryWriter>,
    /// Next operation index (open loop) or operations started (closed loop with `ops`).
    next_op: AtomicU64,
    /// Nanoseconds after `started` of the latest release call per key (0 = none yet).
    last_release: Vec<AtomicU64>,
    fifo: Option<FifoTracker>,
    schedule_lag: Option<Mutex<Histogram<u64>>>,
    first_keys: Mutex<Vec<Vec<u32>>>,
    /// Acquires invoked and not yet completed.
    in_flight: AtomicU64,
    /// The resource server failed a step: the phase stops and says this.
    resource_failed: Mutex<Option<String>>,
}

impl Shared {
    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.started).as_nanos() as u64
    }

    /// History time: nanoseconds since the resource's epoch (sections use the same base).
    fn hist_ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.resource.epoch()).as_nanos() as u64
    }

    fn resource_error(&self, e: anyhow::Error) {
        self.resource_failed.lock().unwrap().get_or_insert_with(|| format!("{e:#}"));
        self.stop.cancel();
    }

    fn op(&self, r: Record) {
        if let Some(h) = &self.history {
            h.record(&r);
        }
    }

    fn completion(&self, p: u64, f: Op, key: u32, t: Instant, r: Result<Option<u64>, &LockError>) {
        self.op(Record::completion(p, f, key, self.hist_ns(t), r));
    }
}

/// How long a retired client may take to close its session before it is abandoned.
const RETIRE_CLOSE: Duration = Duration::from_secs(2);

/// How long in-flight operations may take to finish once a phase's time is up.
fn drain_bound(w: &Workload) -> Duration {
    (w.wait_timeout + w.hold.max() + Duration::from_secs(5)).min(Duration::from_secs(30))
}

/// Run `w` against `backend` until its duration passes, its operation count is reached, or
/// `cancel` fires.
pub async fn run_phase(
    backend: Arc<dyn Backend>,
    w: &Workload,
    run_id: &str,
    cancel: &CancellationToken,
    out: PhaseOutputs,
) -> anyhow::Result<PhaseResult> {
    w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
    let started = Instant::now();
    let stop = cancel.child_token();
    let abort = cancel.child_token();
    let caps = backend.capabilities();
    let fifo = caps.fifo.then(|| FifoTracker::new(w.keys));
    let keys: Vec<String> = (0..w.keys).map(|i| w.key_name(run_id, i)).collect();
    let phase = crate::history::phase_id(out.history.as_ref().map_or(backend.name(), |(_, name)| name.as_str()), &keys[0]);
    // Asked before the phase, so the checkers judge unknown outcomes by the servers' TTL.
    let granted_ttl = match &out.history {
        Some(_) => backend.granted_ttl(w.ttl).await.ok(),
        None => None,
    };
    if let Some((h, _)) = &out.history {
        h.sync().await;
    }
    let history = out.history.as_ref().map(|(h, backend_name)| {
        h.record(&Record::Meta(Meta {
            backend: backend_name.clone(),
            workload: w.name.clone(),
            keys: keys.clone(),
            ttl_ms: w.ttl.as_millis() as u64,
            fencing_tokens: caps.fencing,
            started_at: crate::results::now_rfc3339(),
            split_votes: caps.consistency == dlbench_core::Consistency::Ap,
            granted_ttl,
        }));
        h.clone()
    });
    let resource = Resource::new(w.keys);
    let server = match &out.resource_server {
        Some((url, scope)) => Some(crate::resource_server::ServerResource::open(url, scope, w.keys, resource.epoch()).await?),
        None => None,
    };
    let shared = Arc::new(Shared {
        backend,
        workload: w.clone(),
        keys,
        resource,
        server,
        recorder: Recorder::new(w.clients),
        started,
        measure_from: started + w.warmup,
        stop: stop.clone(),
        abort: abort.clone(),
        retired: AtomicU64::new(0),
        // Replacement processes get ids after every client's; each shard its own range.
        next_process: AtomicU64::new(match out.shard {
            Some(s) => s.total_clients as u64 + ((s.index as u64) << 32),
            None => w.clients as u64,
        }),
        first_client: out.shard.map_or(0, |s| s.first_client),
        history,
        next_op: AtomicU64::new(0),
        last_release: (0..w.keys).map(|_| AtomicU64::new(0)).collect(),
        fifo,
        schedule_lag: w.rate.map(|_| Mutex::new(new_histogram())),
        first_keys: Mutex::new(vec![Vec::new(); w.clients.min(SAMPLE_CLIENTS)]),
        in_flight: AtomicU64::new(0),
        resource_failed: Mutex::new(None),
    });

    let mut hlog = match &out.hlog {
        Some((dir, label)) => Some(
            HlogWriter::create(&dir.join(format!("{label}-acquire.hlog")), &format!("dlbench {label} acquire latency"))
                .map_err(|e| anyhow::anyhow!("cannot write the HDR interval log in {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    let probe = tokio::spawn(lag_probe(stop.clone()));
    // The cost window opens with the measured window (a phase interrupted before cannot
    // have one).
    let cost_start = out.cost.clone().map(|c| {
        let from = started + w.warmup;
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(from.into()) => Some(c(true).await),
                _ = stop.cancelled() => None,
            }
        })
    });
    let mut peak_rss_kb = crate::usage::self_rss_kb();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..w.clients {
        clients.spawn(client_loop(shared.clone(), c));
    }

    let planned = w.warmup + w.duration;
    let end = started + planned;
    // Faults run in the measured window and stop early enough for the service to recover
    // before the phase ends (a run always ends healed, and shows whether it recovered).
    let faults_stop = cancel.child_token();
    let faults = out.faults.map(|f| {
        let tail = out.quiet_tail.unwrap_or_else(|| quiet_tail(w.duration)).min(w.duration / 2);
        let fs = faults_stop.clone();
        let epoch = shared.resource.epoch();
        let from = started + w.warmup;
        tokio::spawn(async move {
            tokio::time::sleep_until(from.into()).await;
            let timer = tokio::spawn({
                let fs = fs.clone();
                async move {
                    tokio::time::sleep_until((end - tail).into()).await;
                    fs.cancel();
                }
            });
            let r = f(epoch, fs).await;
            timer.abort();
            r
        })
    });
    let mut series = Vec::new();
    let mut merged = new_histogram();
    let mut next_tick = started + Duration::from_secs(1);
    let backlog = |at: Instant| {
        w.rate.map(|r| {
            let due = (at.saturating_duration_since(started).as_secs_f64() * r).floor() as u64;
            let due = w.ops.map_or(due, |n| due.min(n));
            due.saturating_sub(shared.next_op.load(Ordering::Relaxed))
        })
    };
    let mut emit = |t: u32, from: Instant, to: Instant, series: &mut Vec<TimePoint>, merged: &mut Histogram<u64>| {
        peak_rss_kb = peak_rss_kb.max(crate::usage::self_rss_kb());
        let mut point = shared.recorder.tick(t, merged);
        point.backlog = backlog(to);
        if let Some(h) = hlog.as_mut() {
            let _ = h.append(merged, from - started, to - from);
        }
        if let Some(cb) = &out.on_tick {
            cb(&Tick { point: point.clone(), elapsed: to - started, planned });
        }
        series.push(point);
    };
    let stopped_at = loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next_tick.min(end).into()) => {
                let now = Instant::now();
                if now >= end {
                    break now;
                }
                let t = series.len() as u32;
                emit(t, next_tick - Duration::from_secs(1), next_tick, &mut series, &mut merged);
                next_tick += Duration::from_secs(1);
            }
            r = clients.join_next() => match r {
                None => break Instant::now(), // every client finished (operation count reached)
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Some(_) => {}
            },
            _ = cancel.cancelled() => break Instant::now(),
        }
    };
    let cost_end = match &out.cost {
        Some(c) if stopped_at >= shared.measure_from => Some(c(false).await),
        _ => None,
    };
    stop.cancel();
    faults_stop.cancel();
    let cost = match (cost_start, cost_end) {
        (Some(t), Some(end)) => t.await.ok().flatten().map(|s| (s, end)),
        _ => None,
    };
    let in_flight_at_end = shared.in_flight.load(Ordering::SeqCst);
    let backlog_at_end = backlog(stopped_at);
    // Let operations in flight finish (so the history ends resolved), within a bound.
    let drain_until = tokio::time::Instant::now() + drain_bound(w);
    let mut interrupted_at = cancel.is_cancelled().then_some(stopped_at);
    loop {
        tokio::select! {
            r = clients.join_next() => match r {
                None => break,
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Some(_) => {}
            },
            _ = tokio::time::sleep_until(drain_until), if !abort.is_cancelled() => abort.cancel(),
            _ = cancel.cancelled(), if !abort.is_cancelled() => {
                interrupted_at.get_or_insert_with(Instant::now);
                abort.cancel()
            }
        }
    }
    if cancel.is_cancelled() {
        // The history says where the interrupt cut it, so `check` judges what completed.
        let at = interrupted_at.unwrap_or_else(Instant::now);
        shared.op(Record::Interrupted { ns: shared.hist_ns(at) });
    }
    let nemesis = match faults {
        Some(t) => t.await.map_err(|e| anyhow::anyhow!("nemesis task: {e}"))??,
        None => Vec::new(),
    };
    let last_from = next_tick - Duration::from_secs(1);
    if stopped_at > last_from {
        let t = series.len() as u32;
        emit(t, last_from, stopped_at, &mut series, &mut merged);
    }
    let driver_lag = probe.await.unwrap_or_else(|_| new_histogram());
    let measured = stopped_at.saturating_duration_since(shared.measure_from);
    let scheduled = w.rate.map(|r| {
        let due = (measured.as_secs_f64() * r).floor() as u64;
        w.ops.map_or(due, |n| due.min(n))
    });
    let sh = &shared;
    if let Some(why) = sh.resource_failed.lock().unwrap().take() {
        anyhow::bail!("{why}: the phase stopped, as its sections could no longer be judged");
    }
    let first_keys = sh.first_keys.lock().unwrap().clone();
    let schedule_lag = sh.schedule_lag.as_ref().map(|h| h.lock().unwrap().clone());
    Ok(PhaseResult {
        workload: w.clone(),
        phase,
        totals: sh.recorder.totals(),
        measured,
        resource: match &sh.server {
            Some(srv) => srv.stats().await,
            None => sh.resource.stats(),
        },
        resource_clock: sh.server.as_ref().map(|s| s.clock),
        cancelled: cancel.is_cancelled(),
        retired: sh.retired.load(Ordering::Relaxed),
        timeseries: series,
        per_client: sh.recorder.per_client(),
        fifo_violations: sh.fifo.as_ref().map(|f| f.violations.load(Ordering::Relaxed)),
        driver_lag,
        schedule_lag,
        scheduled,
        first_keys,
        nemesis,
        in_flight_at_end,
        backlog_at_end,
        cost,
        peak_rss_mb: peak_rss_kb.map(|kb| (kb as f64 / 1024.0 * 10.0).round() / 10.0),
        started_wall: std::time::SystemTime::now() - started.elapsed(),
        history_epoch_wall: std::time::SystemTime::now() - sh.resource.epoch().elapsed(),
    })
}

/// Sleep 10 ms over and over and record how late each wake-up is: when the driver's
/// runtime is starved (too many clients for the CPU), this grows.
async fn lag_probe(stop: CancellationToken) -> Histogram<u64> {
    let mut h = new_histogram();
    let period = Duration::from_millis(10);
    while !stop.is_cancelled() {
        let t = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.cancelled() => break,
        }
        h.saturating_record(crate::stats::us(t.elapsed().saturating_sub(period)));
    }
    h
}

async fn new_client(sh: &Shared, c: usize) -> Option<Box<dyn DistLock>> {
    loop {
        match sh.backend.client().await {
            Ok(client) => return Some(client),
            Err(e) => {
                sh.recorder.failed(c, e.kind());
                tokio::select! {
                    _ = sh.stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}

/// Sleep until `t` unless the phase stops first; false when it stopped.
async fn sleep_until(sh: &Shared, t: Instant) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(t.into()) => true,
        _ = sh.stop.cancelled() => false,
    }
}

async fn client_loop(sh: Arc<Shared>, c: usize) {
    let w = &sh.workload;
    let mut picker = KeyPicker::new(w, (sh.first_client + c) as u64);
    let opts = AcquireOptions { ttl: w.ttl, wait: w.wait_timeout, retry_interval: w.retry_interval, ..AcquireOptions::default() };
    let mut sample: Vec<u32> = Vec::new();
    // The process id in the history; a replacement client gets a fresh one.
    let mut p = (sh.first_client + c) as u64;
    let Some(mut client) = new_client(&sh, c).await else { return };
    let open_interval = w.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    while !sh.stop.is_cancelled() {
        if let Some(h) = &sh.history {
            h.backpressure().await;
        }
        // Which operation, and when it is due.
        let ready = Instant::now();
        let due = match open_interval {
            Some(iv) => {
                let i = sh.next_op.fetch_add(1, Ordering::Relaxed);
                if w.ops.is_some_and(|n| i >= n) {
                    break;
                }
                let due = sh.started + iv.mul_f64(i as f64);
                if due > ready && !sleep_until(&sh, due).await {
                    break;
                }
                due
            }
            None => {
                if let Some(n) = w.ops {
                    if sh.next_op.fetch_add(1, Ordering::Relaxed) >= n {
                        break;
                    }
                }
                ready
            }
        };
        let k = picker.next_key();
        if c < SAMPLE_CLIENTS && sample.len() < SAMPLE_KEYS {
            sample.push(k as u32);
            if sample.len() == SAMPLE_KEYS {
                sh.first_keys.lock().unwrap()[c] = sample.clone();
            }
        }
        let hold = picker.sample(&w.hold);
        let think = picker.sample(&w.think);
        let t0 = Instant::now();
        if let Some(lag) = &sh.schedule_lag {
            lag.lock().unwrap().saturating_record(crate::stats::us(t0.saturating_duration_since(due.max(ready))));
        }
        let measured = due >= sh.measure_from;
        if let Some(f) = &sh.fifo {
            f.arrive(k, c, t0);
        }
        let key = k as u32;
        sh.op(Record::Invoke { p, f: Op::Acquire, key, ns: sh.hist_ns(t0) });
        sh.in_flight.fetch_add(1, Ordering::SeqCst);
        let r = tokio::select! {
            r = client.acquire(&sh.keys[k], &opts) => r,
            _ = sh.abort.cancelled() => Err(LockError::Indeterminate(CANCELLED.into())),
        };
        sh.in_flight.fetch_sub(1, Ordering::SeqCst);
        let got = Instant::now();
        sh.completion(p, Op::Acquire, key, got, r.as_ref().map(|l| l.token.map(|t| t.0)));
        let mut retire = false;
        match r {
            Ok(lease) => {
                sh.recorder.acquired(c, got - due, got - t0, measured);
                if let Some(f) = &sh.fifo {
                    f.granted(k, c, t0);
                }
                let released_at = sh.last_release[k].load(Ordering::Acquire);
                if released_at > sh.nanos(t0) {
                    // We were waiting when the previous holder let go: a hand-off.
                    let gap = Duration::from_nanos(sh.nanos(got).saturating_sub(released_at));
                    sh.recorder.handoff(c, gap, measured);
                }
                let rec = match &sh.server {
                    Some(srv) => match srv.section(k, &lease, hold).await {
                        Ok(rec) => rec,
                        Err(e) => {
                            // No evidence without the resource: stop the phase, say why.
                            sh.resource_error(e);
                            let _ = client.release(lease).await;
                            break;
                        }
                    },
                    None => {
                        let mut section = sh.resource.enter_lease(k, &lease);
                        section.read_sleep_write(hold).await;
                        section.exit();
                        section.record()
                    }
                };
                sh.op(Record::section(p, &rec));
                let t1 = Instant::now();
                sh.last_release[k].store(sh.nanos(t1).max(1), Ordering::Release);
                sh.op(Record::Invoke { p, f: Op::Release, key, ns: sh.hist_ns(t1) });
                let rr = client.release(lease).await;
                sh.completion(p, Op::Release, key, Instant::now(), rr.as_ref().map(|_| None));
                match rr {
                    Ok(()) => sh.recorder.released(c, t1.elapsed(), measured),
                    Err(e) => {
                        sh.recorder.failed(c, release_kind(&e));
                        // A release that failed may leave the claim behind, kept alive by
                        // this client's session: retire the client so the claim expires.
                        retire = !matches!(e, LockError::NotHeld(_));
                    }
                }
            }
            Err(e) => {
                if let Some(f) = &sh.fifo {
                    f.leave(k, c);
                }
                if e.is_contention() {
                    sh.recorder.timed_out(c, got - due, measured);
                    // A try-lock (`--wait-timeout 0s`) that finds the key busy returns at
                    // once: wait a retry interval, as a polling client would, rather than spin
                    // (a spinning task starves the others, the ticker and the lock's holder).
                    if opts.wait.is_zero() {
                        let pause = opts.retry_interval.max(Duration::from_millis(1));
                        if !sleep_until(&sh, Instant::now() + pause).await {
                            break;
                        }
                    }
                } else if sh.abort.is_cancelled() && matches!(&e, LockError::Indeterminate(m) if m == CANCELLED) {
                    // Cut short by us, not failed by the lock; its outcome is still unknown,
                    // so the process is retired like any other `info`.
                    sh.recorder.cancelled(c);
                    retire = true;
                } else {
                    sh.recorder.acquire_failed(c, e.kind(), got - due, measured);
                    retire = !e.is_definite();
                    // A server that refuses is not hammered: back off a little.
                    if !retire && !sleep_until(&sh, Instant::now() + Duration::from_millis(50)).await {
                        break;
                    }
                }
            }
        }
        if retire {
            // Its operation may still take effect: this process is done, a new one takes
            // its place (Jepsen's rule for `info`). Like an application that saw the error,
            // it closes its session (revoking its lease, freeing any claim it may hold) if
            // the servers answer in time; if they do not, the claim expires with its TTL.
            if tokio::time::timeout(RETIRE_CLOSE, client.close()).await.is_err() {
                client.abandon().await;
            }
            sh.retired.fetch_add(1, Ordering::Relaxed);
            if sh.abort.is_cancelled() {
                return;
            }
            p = sh.next_process.fetch_add(1, Ordering::Relaxed);
            let Some(next) = new_client(&sh, c).await else { return };
            client = next;
            // The fault that made the outcome unknown is likely still there.
            if !sleep_until(&sh, Instant::now() + Duration::from_millis(50)).await {
                break;
            }
        }
        // Think time belongs to the closed loop; in the open loop the schedule paces.
        if open_interval.is_none() && !think.is_zero() && !sleep_until(&sh, Instant::now() + think).await {
            break;
        }
    }
    if c < SAMPLE_CLIENTS && sample.len() < SAMPLE_KEYS {
        sh.first_keys.lock().unwrap()[c] = sample;
    }
    client.close().await;
}

/// A release that finds the lock gone means the holder outlived its lease.
fn release_kind(e: &LockError) -> &'static str {
    match e {
        LockError::NotHeld(_) => "release_not_held",
        LockError::Indeterminate(_) => "release_indeterminate",
        _ => "release_failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_tracker_counts_a_late_arrival_served_first() {
        let f = FifoTracker::new(1);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        f.arrive(0, 1, at(0));
        f.arrive(0, 2, at(0)); // 2 queues behind 1
        f.granted(0, 1, at(0)); // 1 is served first: in order
        assert_eq!(f.violations.load(Ordering::Relaxed), 0);
        std::thread::sleep(Duration::from_millis(2));
        f.arrive(0, 1, Instant::now()); // 1 comes back after its grant
        f.granted(0, 1, Instant::now()); // ...and barges in ahead of 2: out of order
        assert_eq!(f.violations.load(Ordering::Relaxed), 1);
        f.granted(0, 2, at(0));
        assert_eq!(f.violations.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn fifo_tracker_accepts_arrival_order() {
        let f = FifoTracker::new(1);
        let t0 = Instant::now();
        f.arrive(0, 1, t0);
        f.arrive(0, 2, t0 + Duration::from_millis(1));
        f.granted(0, 1, t0);
        f.granted(0, 2, t0 + Duration::from_millis(1));
        f.arrive(0, 1, Instant::now());
        f.granted(0, 1, Instant::now());
        assert_eq!(f.violations.load(Ordering::Relaxed), 0);
    }
}
