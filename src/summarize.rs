//! The producer of the result model: builds a [`WorkloadSummary`] from one finished phase
//! and folds a backend's phases into its [`BackendSummary`] (the model in `summary/` is
//! data only and builds nothing from a phase).

use hdrhistogram::Histogram;

use crate::judgement::SafetyCounts;
use crate::phase::PhaseResult;
use crate::stats::{jain, new_histogram, Percentiles, Totals};
use crate::summary::{steady, BackendSummary, LagMs, OpenLoop, Properties, SeriesPoint, WorkloadSummary};
use crate::workload::{KeyDist, Workload};

/// One phase's summary (repeat 0, no checks or verdict yet: `attach_checks` adds them).
pub fn workload(p: &PhaseResult) -> WorkloadSummary {
    let r = &p.resource;
    let round4 = |x: Option<f64>| x.map(crate::judgement::round_share);
    let acquire = Percentiles::of(&p.totals.acquire);
    let service = Percentiles::of(&p.totals.service);
    let wait_timeout_ms = p.workload.wait_timeout.as_millis() as u64;
    let cost = p.cost.as_ref().map(|(a, b)| crate::cost::per_acquisition(a, b, p.totals.acquired)).unwrap_or_default();
    let steady = steady::assess(&p.timeseries, p.workload.warmup.as_secs_f64(), &acquire, &service, wait_timeout_ms, &p.nemesis);
    WorkloadSummary {
        name: p.workload.name.clone(),
        phase_id: p.phase.clone(),
        clients: p.workload.clients,
        keys: p.workload.keys,
        seed: p.workload.seed,
        warmup_s: p.workload.warmup.as_secs_f64(),
        measured_s: (p.measured.as_secs_f64() * 1000.0).round() / 1000.0,
        hold: p.workload.hold.to_string(),
        duration_s: p.workload.duration.as_secs_f64(),
        wait_timeout_ms,
        ttl_ms: p.workload.ttl.as_millis() as u64,
        think: p.workload.think.to_string(),
        key_dist: key_dist(&p.workload),
        repeat: 0,
        settled_after_s: steady.settled_after_s,
        anomalies: steady.anomalies,
        ops_per_sec: (p.ops_per_sec() * 10.0).round() / 10.0,
        acquired: p.totals.acquired,
        acquire_latency_us: acquire,
        service_latency_us: service,
        release_latency_us: Percentiles::of(&p.totals.release),
        handoff_latency_us: Percentiles::of(&p.totals.handoff),
        timeout_latency_us: Percentiles::of(&p.totals.timeout_latency),
        error_latency_us: Percentiles::of(&p.totals.error_latency),
        fairness_jain: jain(&p.per_client).map(|j| (j * 10000.0).round() / 10000.0),
        fifo_violations: p.fifo_violations,
        driver_lag_ms: LagMs::of(&p.driver_lag),
        open_loop: open_loop(p),
        first_keys: p.first_keys.clone(),
        timeseries: p.timeseries.clone(),
        errors: p.totals.error_count(),
        error_kinds: p.totals.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        errors_window: Some(crate::summary::ERRORS_WINDOW_MEASURED.into()),
        timeouts: p.totals.timeouts,
        cancelled: p.totals.cancelled,
        in_flight_at_end: p.in_flight_at_end,
        retired_clients: p.retired,
        sections: r.total.sections,
        counts: SafetyCounts::of_phase(&r.total),
        entered_expired: r.total.entered_expired,
        exposure: round4(r.exposure()),
        busiest_key_exposure: round4(r.busiest_key_exposure()),
        availability: None,
        checks: Vec::new(),
        validity: None,
        verdict: None,
        windows: None,
        choreographed: p.choreographed,
        expectation: None,
        nemesis: p.nemesis.clone(),
        server_cpu_us_per_acq: cost.server_cpu_us,
        dlbench_cpu_us_per_acq: cost.dlbench_cpu_us,
        server_counters_per_acq: cost.counters,
        harness_peak_rss_mb: p.peak_rss_mb,
    }
}

/// The key distribution as the summary names it: `uniform` or `zipf(s)`.
fn key_dist(w: &Workload) -> String {
    match w.key_dist {
        KeyDist::Uniform => "uniform".to_string(),
        KeyDist::Zipf => format!("zipf({})", w.zipf_s),
    }
}

/// Open-loop figures (none in closed loop): what was scheduled and what the driver managed.
fn open_loop(p: &PhaseResult) -> Option<OpenLoop> {
    p.workload.rate.map(|rate| {
        let completed = p.totals.acquired + p.totals.timeouts + p.totals.error_count();
        let scheduled = p.scheduled.unwrap_or(0);
        let lag = p.schedule_lag.as_ref().map(LagMs::of).unwrap_or_default();
        OpenLoop {
            target_rate: rate,
            scheduled,
            completed,
            // More than 5% of due operations never started, or free clients started
            // them over 10 ms late at p99: the schedule was not kept.
            behind_schedule: (completed as f64) < scheduled as f64 * 0.95 || lag.p99 > 10.0,
            schedule_lag_ms: lag,
            backlog_at_end: p.backlog_at_end.unwrap_or(0),
            backlog_max: p.timeseries.iter().filter_map(|t| t.backlog).max().unwrap_or(0),
        }
    })
}

/// A backend's summary from its phases, all of repeat 0 (no checks or verdict yet).
pub fn backend(name: &str, capabilities: Option<serde_json::Value>, phases: &[PhaseResult]) -> BackendSummary {
    let mut acc = BackendAcc::default();
    for p in phases {
        acc.add(p, 0);
    }
    acc.summary(name, capabilities)
}

/// A backend's phases folded in as each finishes: the merged totals and driver lag, and each
/// phase's summary. A long run (a soak's dozens of turns) so holds one set of histograms per
/// backend instead of every phase's (about 1.2 MB each), and its memory stays flat.
pub struct BackendAcc {
    all: Totals,
    lag: Histogram<u64>,
    secs: f64,
    workloads: Vec<WorkloadSummary>,
    /// Set by `run --properties` once the phases are done.
    pub properties: Option<Properties>,
}

impl Default for BackendAcc {
    fn default() -> Self {
        BackendAcc { all: Totals::default(), lag: new_histogram(), secs: 0.0, workloads: Vec::new(), properties: None }
    }
}

impl BackendAcc {
    /// Fold in one finished phase, the `repeat`th round of its workload.
    pub fn add(&mut self, p: &PhaseResult, repeat: u32) {
        self.all.merge(&p.totals);
        self.lag.add(&p.driver_lag).expect("same bounds");
        self.secs += p.measured.as_secs_f64();
        let mut w = workload(p);
        w.repeat = repeat;
        self.workloads.push(w);
    }

    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty()
    }

    pub fn summary(&self, name: &str, capabilities: Option<serde_json::Value>) -> BackendSummary {
        let (all, workloads) = (&self.all, self.workloads.clone());
        let fifo: Vec<u64> = workloads.iter().filter_map(|w| w.fifo_violations).collect();
        BackendSummary {
            name: name.to_string(),
            capabilities,
            connections: None,
            ops_per_sec: if self.secs > 0.0 { (all.acquired as f64 / self.secs * 10.0).round() / 10.0 } else { 0.0 },
            acquire_latency_us: Percentiles::of(&all.acquire),
            release_latency_us: Percentiles::of(&all.release),
            handoff_latency_us: Percentiles::of(&all.handoff),
            fairness_jain: workloads.iter().filter_map(|w| w.fairness_jain).reduce(f64::min),
            fifo_violations: (!fifo.is_empty()).then(|| fifo.iter().sum()),
            driver_lag_ms: LagMs::of(&self.lag),
            timeseries: workloads
                .iter()
                .flat_map(|w| w.timeseries.iter().map(|p| SeriesPoint { workload: w.name.clone(), point: p.clone() }))
                .collect(),
            errors: all.error_count(),
            timeouts: all.timeouts,
            counts: workloads.iter().map(|w| &w.counts).sum(),
            availability: None,
            validity: None,
            verdict: None,
            nemesis: workloads.iter().flat_map(|w| w.nemesis.clone()).collect(),
            workloads,
            failure: None,
            properties: self.properties.clone(),
            durability: None,
        }
    }
}
