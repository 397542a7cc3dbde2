//! A phase's clock: the once-a-second series, the windows in which cost is measured and
//! faults run, the drain once its time is up, and the driver's own lag.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use super::{FaultRunner, OnTick, Tick};
use crate::history::Record;
use crate::faultlog::NemesisEvent;
use crate::stats::{new_histogram, HlogWriter, TimePoint};
use crate::workload::Workload;

/// Sleep 10 ms over and over and record how late each wake-up is: when the driver's
/// runtime is starved (too many clients for the CPU), this grows.
pub(super) async fn lag_probe(stop: CancellationToken) -> Histogram<u64> {
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

/// The cost window opens with the measured window, at `from` (a phase stopped before
/// cannot have one).
pub(super) fn cost_start(
    probe: Option<crate::cost::CostProbe>,
    from: Instant,
    stop: CancellationToken,
) -> Option<JoinHandle<Option<crate::cost::Snapshot>>> {
    probe.map(|c| {
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(from.into()) => Some(c(true).await),
                _ = stop.cancelled() => None,
            }
        })
    })
}

/// Run the faults from `from` (the measured window's start) until `until`, or until
/// `stop` fires, and end healed.
pub(super) fn spawn_faults(
    f: FaultRunner,
    epoch: Instant,
    from: Instant,
    until: Instant,
    stop: CancellationToken,
) -> JoinHandle<anyhow::Result<Vec<NemesisEvent>>> {
    tokio::spawn(async move {
        tokio::time::sleep_until(from.into()).await;
        // No timer cuts a fault in force at `until`: the nemesis starts none that cannot
        // hold its full time by then (a fault cut short would be another fault); `stop`
        // fires when the load stops or the run is interrupted.
        f(epoch, stop, until).await
    })
}

/// The once-a-second series: a point per second, the HDR interval log, the progress
/// callback, and the process's peak memory as the phase goes.
pub(super) struct Ticker {
    shared: Arc<Shared>,
    pub(super) series: Vec<TimePoint>,
    merged: Histogram<u64>,
    next_tick: Instant,
    pub(super) peak_rss_kb: Option<u64>,
    hlog: Option<HlogWriter>,
    on_tick: Option<OnTick>,
    /// Warm-up plus duration.
    planned: Duration,
}

impl Ticker {
    pub(super) fn new(shared: Arc<Shared>, hlog: Option<HlogWriter>, on_tick: Option<OnTick>) -> Ticker {
        let w = &shared.workload;
        Ticker {
            series: Vec::new(),
            merged: new_histogram(),
            next_tick: shared.started + Duration::from_secs(1),
            peak_rss_kb: crate::usage::self_rss_kb(),
            hlog,
            on_tick,
            planned: w.warmup + w.duration,
            shared,
        }
    }

    fn emit(&mut self, from: Instant, to: Instant) {
        let sh = &self.shared;
        let t = self.series.len() as u32;
        self.peak_rss_kb = self.peak_rss_kb.max(crate::usage::self_rss_kb());
        let mut point = sh.recorder.tick(t, &mut self.merged);
        point.backlog = sh.backlog(to);
        if let Some(h) = self.hlog.as_mut() {
            let _ = h.append(&self.merged, from - sh.started, to - from);
        }
        if let Some(cb) = &self.on_tick {
            cb(&Tick { point: point.clone(), elapsed: to - sh.started, planned: self.planned });
        }
        self.series.push(point);
    }

    /// Tick once a second until the phase's end, every client finished, or `cancel`;
    /// returns when it stopped.
    pub(super) async fn run(&mut self, clients: &mut JoinSet<()>, cancel: &CancellationToken) -> Instant {
        let end = self.shared.started + self.planned;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(self.next_tick.min(end).into()) => {
                    let now = Instant::now();
                    if now >= end {
                        break now;
                    }
                    self.emit(self.next_tick - Duration::from_secs(1), self.next_tick);
                    self.next_tick += Duration::from_secs(1);
                }
                r = clients.join_next() => match r {
                    None => break Instant::now(), // every client finished (operation count reached)
                    Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Some(_) => {}
                },
                _ = cancel.cancelled() => break Instant::now(),
            }
        }
    }

    /// The last, partial second, up to `stopped_at`.
    pub(super) fn close(&mut self, stopped_at: Instant) {
        let last_from = self.next_tick - Duration::from_secs(1);
        if stopped_at > last_from {
            self.emit(last_from, stopped_at);
        }
    }
}

/// How long in-flight operations may take to finish once a phase's time is up.
fn drain_bound(w: &Workload) -> Duration {
    (w.wait_timeout + w.hold.max() + Duration::from_secs(5)).min(Duration::from_secs(30))
}

/// Let operations in flight finish (so the history ends resolved), within a bound; an
/// interrupt cuts them short, and the history says where.
pub(super) async fn drain(clients: &mut JoinSet<()>, sh: &Shared, cancel: &CancellationToken, stopped_at: Instant) {
    let abort = &sh.abort;
    let drain_until = tokio::time::Instant::now() + drain_bound(&sh.workload);
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
        sh.op(Record::Interrupted { ns: sh.hist_ns(at) });
    }
}
