//! Figures rebuilt from a history alone, for a run killed before it wrote them: enough of a
//! workload summary (throughput, latency, errors, safety counts, the per-second series) to
//! render the report of an incomplete run.

use crate::checker::{self, History, Outcome};
use crate::history::{Op, Segment};
use crate::stats::{new_histogram, us, Percentiles, TimePoint};
use crate::summary::{LagMs, WorkloadSummary};
use hdrhistogram::Histogram;

pub fn workload_from_history(seg: &Segment) -> WorkloadSummary {
    let h = History::from_segment(seg);
    let v = checker::check(seg);
    let fig = |checker: &str, f: &str| {
        v.results.iter().find(|r| r.checker == checker).and_then(|r| r.figures.get(f)).and_then(|x| x.as_u64()).unwrap_or(0)
    };
    let Tally { acquire, release, errors, series, clients } = tally(&h);
    let measured_s = h.end_ns as f64 / 1e9;
    let acquired = acquire.len();
    WorkloadSummary {
        name: seg.meta.as_ref().map(|m| m.workload.clone()).unwrap_or_default(),
        phase_id: seg.meta.as_ref().map(|m| m.phase_id()).unwrap_or_default(),
        clients,
        keys: seg.meta.as_ref().map(|m| m.keys.len()).unwrap_or(0),
        seed: None,
        warmup_s: 0.0,
        measured_s: (measured_s * 1000.0).round() / 1000.0,
        hold: String::new(),
        duration_s: 0.0,
        wait_timeout_ms: 0,
        ttl_ms: seg.meta.as_ref().map_or(0, |m| m.ttl_ms),
        think: String::new(),
        key_dist: String::new(),
        repeat: 0,
        settled_after_s: None,
        anomalies: Vec::new(),
        ops_per_sec: if measured_s > 0.0 { (acquired as f64 / measured_s * 10.0).round() / 10.0 } else { 0.0 },
        acquired,
        acquire_latency_us: Percentiles::of(&acquire),
        service_latency_us: Percentiles::of(&acquire),
        release_latency_us: Percentiles::of(&release),
        handoff_latency_us: Percentiles::default(),
        fairness_jain: None,
        fifo_violations: None,
        driver_lag_ms: LagMs::default(),
        open_loop: None,
        first_keys: Vec::new(),
        timeseries: timeseries(&series),
        errors,
        error_kinds: Default::default(),
        // Every operation of the history, warm-up included (it records no warm-up).
        errors_window: None,
        timeouts: 0,
        retired_clients: 0,
        sections: h.sections.len() as u64,
        counts: crate::judgement::SafetyCounts {
            overlaps: fig("mutual-exclusion", "overlaps"),
            lost_updates: fig("lost-updates", "lost_updates"),
            stale_tokens: fig("fencing", "rejected"),
            lost_updates_fenced: fig("fencing", "lost_updates_fenced"),
            rejected: fig("fencing", "rejected"),
            stale_refused: Some(fig("fencing", "stale_refused")),
            legit_refused: fig("fencing", "legit_refused"),
            token_inversions: fig("fencing", "token_inversions"),
        },
        entered_expired: h.sections.iter().filter(|s| s.lease_lost).count() as u64,
        timeout_latency_us: Percentiles::default(),
        error_latency_us: Percentiles::default(),
        cancelled: 0,
        in_flight_at_end: 0,
        exposure: exposure(&h),
        busiest_key_exposure: None,
        windows: None,
        choreographed: seg.meta.as_ref().is_some_and(|m| m.choreographed),
        expectation: None,
        availability: None,
        checks: crate::judgement::briefs(&v),
        validity: Some(v.valid),
        verdict: None,
        nemesis: Vec::new(),
        server_cpu_us_per_acq: None,
        dlbench_cpu_us_per_acq: None,
        server_counters_per_acq: Default::default(),
        harness_peak_rss_mb: None,
    }
}

/// Mean over the segment's keys of the fraction of its time some section was inside.
fn exposure(h: &crate::checker::History) -> Option<f64> {
    if h.sections.is_empty() || h.end_ns == 0 {
        return None;
    }
    let mut by_key: std::collections::BTreeMap<u32, Vec<(u64, u64)>> = Default::default();
    for s in &h.sections {
        by_key.entry(s.key).or_default().push((s.enter, s.exit));
    }
    let mut busy = 0u64;
    for v in by_key.values_mut() {
        v.sort_unstable();
        let (mut a, mut b) = v[0];
        for &(s, e) in v.iter().skip(1) {
            if s > b {
                busy += b - a;
                (a, b) = (s, e);
            } else {
                b = b.max(e);
            }
        }
        busy += b - a;
    }
    Some(busy as f64 / (by_key.len() as f64 * h.end_ns as f64))
}

/// What a history's operations add up to: acquire and release latencies, failures, the
/// per-second series (grants, failures, grant latencies) and how many clients took part.
struct Tally {
    acquire: Histogram<u64>,
    release: Histogram<u64>,
    errors: u64,
    series: Vec<(u64, u64, Histogram<u64>)>,
    clients: usize,
}

fn tally(h: &History) -> Tally {
    let mut acquire = new_histogram();
    let mut release = new_histogram();
    let mut errors = 0u64;
    let seconds = (h.end_ns / 1_000_000_000 + 1) as usize;
    let mut series: Vec<(u64, u64, Histogram<u64>)> = Vec::new();
    let mut clients = std::collections::BTreeSet::new();
    for o in &h.ops {
        clients.insert(o.p);
        let Some(c) = o.complete_ns else { continue };
        let lat = std::time::Duration::from_nanos(c.saturating_sub(o.invoke_ns));
        let sec = ((c / 1_000_000_000) as usize).min(seconds.saturating_sub(1));
        while series.len() <= sec {
            series.push((0, 0, new_histogram()));
        }
        match (o.f, o.outcome) {
            (Op::Acquire, Outcome::Ok) => {
                acquire.saturating_record(us(lat));
                series[sec].0 += 1;
                series[sec].2.saturating_record(us(lat));
            }
            (Op::Release, Outcome::Ok) => release.saturating_record(us(lat)),
            (_, Outcome::Fail | Outcome::Info) => {
                errors += 1;
                series[sec].1 += 1;
            }
            _ => {}
        }
    }
    Tally { acquire, release, errors, series, clients: clients.len() }
}

/// The per-second series from the tally's seconds.
fn timeseries(series: &[(u64, u64, Histogram<u64>)]) -> Vec<TimePoint> {
    let q = |h: &Histogram<u64>, x: f64| if h.is_empty() { 0 } else { h.value_at_quantile(x) };
    series
        .iter()
        .enumerate()
        .map(|(t, (ok, failed, h))| TimePoint {
            t: t as u32,
            ok: *ok,
            failed: *failed,
            timeouts: 0,
            p50_us: q(h, 0.5),
            p99_us: q(h, 0.99),
            max_us: if h.is_empty() { 0 } else { h.max() },
            backlog: None,
        })
        .collect()
}
