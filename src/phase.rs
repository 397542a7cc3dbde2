//! What one phase measured: the record the driver (or a scenario's script) produces and the
//! result model aggregates, with the phase-timing rules both sides use. A leaf: it imports
//! no producer and no reader, so the driver, the summary and the runners all stand on it.

use std::time::Duration;

use dlbench_core::ResourceStats;
use hdrhistogram::Histogram;

use crate::faultlog::NemesisEvent;
use crate::stats::{new_histogram, TimePoint, Totals};
use crate::workload::Workload;

/// The hold a faulted phase uses when its workload holds 0 and no `--hold` was given: a fault
/// must find holders inside to show anything.
pub const FAULT_HOLD: Duration = Duration::from_millis(25);

/// The hold of the default plan's fault round (`--preset answer`): long enough that each fault
/// finds holders inside (a class needs strong evidence in every window; at 25 ms a pause
/// found them inside 1.1% of it on a loaded host).
pub const ANSWER_HOLD: Duration = Duration::from_millis(200);

/// The part of a phase at its end with no fault, so the service can show its recovery: a
/// quarter of the phase, at least 2 s, at most half (the driver's rule).
pub fn quiet_tail(duration: Duration) -> Duration {
    (duration / 4).max(Duration::from_secs(2)).min(duration / 2)
}

/// How a phase under faults is laid out, so that each fault is judged in a window of its own:
/// half an interval of quiet, the fault for half an interval, its heal, then quiet for at
/// least `room` (the TTL the servers grant and their election or restart time) before the
/// next fault, and after the last a tail of at least `room` (and [`quiet_tail`]). A recovery
/// then always fits before the next fault or the phase's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultLayout {
    pub interval: Duration,
    pub room: Duration,
}

impl FaultLayout {
    /// How long each fault holds.
    pub fn hold(&self) -> Duration {
        self.interval / 2
    }
    /// The quiet before the first fault.
    pub fn lead(&self) -> Duration {
        self.interval - self.hold()
    }
    /// The quiet after each heal, before the next fault.
    pub fn gap(&self) -> Duration {
        self.lead().max(self.room)
    }
    /// The quiet at a phase's end, after its last fault.
    pub fn tail(&self, duration: Duration) -> Duration {
        quiet_tail(duration).max(self.room)
    }
    /// How many faults a phase of `duration` holds, each whole and with its room after it.
    pub fn fits(&self, duration: Duration) -> usize {
        let Some(last_end) = duration.checked_sub(self.tail(duration)) else { return 0 };
        let (lead, hold, step) = (self.lead(), self.hold(), self.hold() + self.gap());
        if last_end < lead + hold {
            return 0;
        }
        1 + ((last_end - lead - hold).as_secs_f64() / step.as_secs_f64()).floor() as usize
    }
    /// The shortest phase, in whole seconds, that holds `n` faults.
    pub fn shortest(&self, n: usize) -> Duration {
        let mut d = Duration::from_secs(((self.lead() + self.hold() * n as u32 + self.gap() * n.saturating_sub(1) as u32 + self.room).as_secs_f64()).ceil() as u64);
        while self.fits(d) < n {
            d += Duration::from_secs(1);
        }
        d
    }
}

/// What one phase measured.
#[derive(Clone)]
pub struct PhaseResult {
    pub workload: Workload,
    /// Which phase this is ([`crate::history::phase_id`]): what its history segment's checks
    /// are paired by. Empty for a phase without a segment of its own.
    pub phase: String,
    pub totals: Totals,
    /// Wall time of the measured window (after warm-up), shortened if cancelled.
    pub measured: Duration,
    pub resource: ResourceStats,
    pub cancelled: bool,
    /// Clients retired after an operation with an unknown outcome.
    pub retired: u64,
    pub timeseries: Vec<TimePoint>,
    /// Measured-window acquisitions per client.
    pub per_client: Vec<u64>,
    /// Grants out of arrival order, for backends that promise FIFO.
    pub fifo_violations: Option<u64>,
    /// How late the driver's own timers fired (10 ms probe): the driver as a bottleneck.
    pub driver_lag: Histogram<u64>,
    /// Open loop: how late a free client started a due operation.
    pub schedule_lag: Option<Histogram<u64>>,
    /// Open loop: operations that came due in the measured window.
    pub scheduled: Option<u64>,
    /// The first keys (indices) each of the first few clients chose.
    pub first_keys: Vec<Vec<u32>>,
    /// Faults applied during the phase.
    pub nemesis: Vec<NemesisEvent>,
    /// Acquires still in flight when the phase's time was up (they finish, and are counted,
    /// during the drain).
    pub in_flight_at_end: u64,
    /// Open loop: operations due that no client had started when the phase's time was up.
    pub backlog_at_end: Option<u64>,
    /// The cost counters at the measured window's start and end, when a probe was given
    /// and the window was reached.
    pub cost: Option<(crate::cost::Snapshot, crate::cost::Snapshot)>,
    /// dlbench's resident memory at its highest during the phase, MiB (sampled each second).
    pub peak_rss_mb: Option<f64>,
    /// Wall clock of the phase's start and of its history's time zero (the resource's
    /// epoch), so shards' results can be laid on one time line.
    pub started_wall: std::time::SystemTime,
    pub history_epoch_wall: std::time::SystemTime,
    /// This host's clock against the resource server's, when the resource is one.
    pub resource_clock: Option<crate::resource_server::ClockOffset>,
    /// A scenario's choreography rather than a load loop (see `Meta::choreographed`).
    pub choreographed: bool,
}

impl PhaseResult {
    /// The result of a scripted phase (a scenario's choreography rather than a load loop).
    pub fn scripted(workload: Workload, totals: Totals, measured: Duration, resource: ResourceStats, nemesis: Vec<NemesisEvent>) -> Self {
        PhaseResult {
            workload,
            phase: String::new(),
            totals,
            measured,
            resource,
            cancelled: false,
            retired: 0,
            timeseries: Vec::new(),
            per_client: Vec::new(),
            fifo_violations: None,
            driver_lag: new_histogram(),
            schedule_lag: None,
            scheduled: None,
            first_keys: Vec::new(),
            nemesis,
            in_flight_at_end: 0,
            backlog_at_end: None,
            cost: None,
            peak_rss_mb: None,
            resource_clock: None,
            started_wall: std::time::SystemTime::now(),
            history_epoch_wall: std::time::SystemTime::now(),
            choreographed: true,
        }
    }

    pub fn ops_per_sec(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.totals.acquired as f64 / s
        } else {
            0.0
        }
    }
}
