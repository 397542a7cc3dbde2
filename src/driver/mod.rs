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

mod client;
mod fifo;
mod shared;
mod window;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::Backend;
use hdrhistogram::Histogram;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::history::HistoryWriter;
use crate::faultlog::NemesisEvent;
use crate::phase::{quiet_tail, PhaseResult};
use crate::stats::{new_histogram, HlogWriter, TimePoint};
use crate::workload::Workload;
use shared::Shared;
use window::Ticker;

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

/// Faults for a phase: given the phase's clock origin, a token that fires when faults must
/// stop, and the instant it will fire (so no fault starts that could not hold its full time),
/// runs them and ends healed, returning what it did.
pub type FaultRunner = Box<
    dyn FnOnce(Instant, CancellationToken, Instant) -> futures::future::BoxFuture<'static, anyhow::Result<Vec<NemesisEvent>>> + Send,
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
    /// What the servers need after a heal, besides the TTL, to grant again (recorded in the
    /// history's `meta`, so recovery is judged only past it).
    pub recovery_allowance: Option<Duration>,
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
    let shared = Arc::new(Shared::open(backend, w, run_id, started, cancel, &out).await?);
    let mut running = Running::start(shared, cancel, out)?;
    let stopped_at = running.ticker.run(&mut running.clients, cancel).await;
    running.finish(cancel, stopped_at).await
}

/// A phase whose clients, probes and faults are running.
struct Running {
    shared: Arc<Shared>,
    clients: JoinSet<()>,
    ticker: Ticker,
    probe: JoinHandle<Histogram<u64>>,
    cost_probe: Option<crate::cost::CostProbe>,
    cost_start: Option<JoinHandle<Option<crate::cost::Snapshot>>>,
    /// Fires when faults must stop.
    faults_stop: CancellationToken,
    faults: Option<JoinHandle<anyhow::Result<Vec<NemesisEvent>>>>,
}

impl Running {
    /// Start the probes, the clients and the faults.
    fn start(shared: Arc<Shared>, cancel: &CancellationToken, out: PhaseOutputs) -> anyhow::Result<Running> {
        let PhaseOutputs { hlog, on_tick, faults, quiet_tail: tail, cost: cost_probe, .. } = out;
        let w = &shared.workload;
        let hlog = match &hlog {
            Some((dir, label)) => Some(
                HlogWriter::create(&dir.join(format!("{label}-acquire.hlog")), &format!("dlbench {label} acquire latency"))
                    .map_err(|e| anyhow::anyhow!("cannot write the HDR interval log in {}: {e}", dir.display()))?,
            ),
            None => None,
        };
        let probe = tokio::spawn(window::lag_probe(shared.stop.clone()));
        let cost_start = window::cost_start(cost_probe.clone(), shared.measure_from, shared.stop.clone());
        let ticker = Ticker::new(shared.clone(), hlog, on_tick);
        let mut clients = JoinSet::new();
        for c in 0..w.clients {
            clients.spawn(client::client_loop(shared.clone(), c));
        }
        let end = shared.started + w.warmup + w.duration;
        // Faults run in the measured window and stop early enough for the service to recover
        // before the phase ends (a run always ends healed, and shows whether it recovered).
        let faults_stop = cancel.child_token();
        let faults = faults.map(|f| {
            let tail = tail.unwrap_or_else(|| quiet_tail(w.duration)).min(w.duration);
            window::spawn_faults(f, shared.resource.epoch(), shared.measure_from, end - tail, faults_stop.clone())
        });
        Ok(Running { shared, clients, ticker, probe, cost_probe, cost_start, faults_stop, faults })
    }

    /// Stop the load at `stopped_at`, drain, heal, and gather what the phase measured.
    async fn finish(mut self, cancel: &CancellationToken, stopped_at: Instant) -> anyhow::Result<PhaseResult> {
        let sh = self.shared.clone();
        let cost_end = match &self.cost_probe {
            Some(c) if stopped_at >= sh.measure_from => Some(c(false).await),
            _ => None,
        };
        sh.stop.cancel();
        self.faults_stop.cancel();
        let cost = match (self.cost_start, cost_end) {
            (Some(t), Some(end)) => t.await.ok().flatten().map(|s| (s, end)),
            _ => None,
        };
        let in_flight_at_end = sh.in_flight.load(Ordering::SeqCst);
        let backlog_at_end = sh.backlog(stopped_at);
        window::drain(&mut self.clients, &sh, cancel, stopped_at).await;
        let nemesis = match self.faults {
            Some(t) => t.await.map_err(|e| anyhow::anyhow!("nemesis task: {e}"))??,
            None => Vec::new(),
        };
        self.ticker.close(stopped_at);
        let driver_lag = self.probe.await.unwrap_or_else(|_| new_histogram());
        let w = &sh.workload;
        let measured = stopped_at.saturating_duration_since(sh.measure_from);
        let scheduled = w.rate.map(|r| {
            let due = (measured.as_secs_f64() * r).floor() as u64;
            w.ops.map_or(due, |n| due.min(n))
        });
        if let Some(why) = sh.resource_failed.lock().unwrap().take() {
            anyhow::bail!("{why}: the phase stopped, as its sections could no longer be judged");
        }
        let first_keys = sh.first_keys.lock().unwrap().clone();
        let schedule_lag = sh.schedule_lag.as_ref().map(|h| h.lock().unwrap().clone());
        Ok(PhaseResult {
            workload: w.clone(),
            phase: sh.phase.clone(),
            totals: sh.recorder.totals(),
            measured,
            resource: match &sh.server {
                Some(srv) => srv.stats().await,
                None => sh.resource.stats(),
            },
            resource_clock: sh.server.as_ref().map(|s| s.clock),
            cancelled: cancel.is_cancelled(),
            retired: sh.retired.load(Ordering::Relaxed),
            timeseries: std::mem::take(&mut self.ticker.series),
            per_client: sh.recorder.per_client(),
            fifo_violations: sh.fifo.as_ref().map(|f| f.violations()),
            driver_lag,
            schedule_lag,
            scheduled,
            first_keys,
            nemesis,
            in_flight_at_end,
            backlog_at_end,
            cost,
            peak_rss_mb: self.ticker.peak_rss_kb.map(|kb| (kb as f64 / 1024.0 * 10.0).round() / 10.0),
            started_wall: std::time::SystemTime::now() - sh.started.elapsed(),
            history_epoch_wall: std::time::SystemTime::now() - sh.resource.epoch().elapsed(),
            choreographed: false,
        })
    }
}
