//! Steady state and anomalies of one phase, read from its per-second series.
//!
//! **Settling.** The measured window's full seconds (the warm-up, and the last second when
//! it is partial, left out) are compared with the phase's steady rate, the median of the
//! window's second half. The phase has settled at the first second from which the mean rate
//! of [`SETTLE_SECONDS`] consecutive seconds is within [`SETTLE_TOLERANCE`] of that median.
//! The search is capped at half the window: a phase not settled by then "never settled".
//! Whatever its length (from [`MIN_SECONDS_TO_SLOW_START`] full seconds), a phase whose first
//! seconds ran under [`SLOW_START`] of the window's median rate has not settled before them:
//! a JVM warming up gives a first second of a tenth of the rate, which a 3-second mean over
//! a 5-second window (the default phase) can hide.
//! The histograms cover the whole measured window (they are not re-cut), so a phase that
//! settled late is flagged, with the seconds it took, and the cure is a longer `--warmup`.
//!
//! **Anomalies**, each a flag in the report:
//! - `zero-seconds`: full measured seconds with no acquisition at all in a phase that acquired;
//! - `max-over-p99`: the acquire maximum above [`MAX_OVER_P99`] times the p99 (and above
//!   [`MAX_FLOOR_US`], so microsecond jitter of the memory backend is not a flag);
//! - `stall`: no acquisition for longer than the workload's wait timeout, or one call that
//!   waited longer than the wait timeout (service latency, from the call);
//! - `unsettled` / `never-settled`: see above.
//!
//! **Fault windows.** In a phase with faults that took effect, a rate that falls while a
//! fault holds is the fault's effect (measured as availability), not warm-up and not an
//! anomaly. The seconds a fault touched, from its start to its heal, and the seconds after
//! the heal until the rate was back to [`SLOW_START`] of the steady rate, are left out of
//! every rate flag. The rest is judged: a slow start before the first fault (`unsettled`,
//! raise --warmup), a rate under [`SLOW_START`] of the steady rate after it had come back
//! (`unsettled`, outside the faults), seconds without an acquisition and stalls outside the
//! faults. The steady rate is the median of the seconds outside the faults.

use serde::{Deserialize, Serialize};

use crate::faultlog::NemesisEvent;
use crate::stats::{Percentiles, TimePoint};

pub const SETTLE_SECONDS: usize = 3;
pub const SETTLE_TOLERANCE: f64 = 0.25;
pub const MAX_OVER_P99: f64 = 10.0;
pub const MAX_FLOOR_US: u64 = 10_000;
/// Phases with fewer full measured seconds than this are judged for a slow start only.
pub const MIN_SECONDS_TO_JUDGE: usize = 6;
/// Phases with fewer full measured seconds than this are not judged for settling at all.
pub const MIN_SECONDS_TO_SLOW_START: usize = 3;
/// A leading second under this fraction of the window's median rate is a slow start.
pub const SLOW_START: f64 = 0.5;

/// One flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Anomaly {
    /// `zero-seconds`, `max-over-p99`, `stall`, `unsettled`, `never-settled`.
    pub kind: String,
    pub detail: String,
}

/// What [`assess`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// Seconds into the measured window at which the rate settled; None when it never did
    /// (or the window was too short to judge: then no `never-settled` flag either).
    pub settled_after_s: Option<f64>,
    pub anomalies: Vec<Anomaly>,
}

fn flag(kind: &str, detail: String) -> Anomaly {
    Anomaly { kind: kind.to_string(), detail }
}

use crate::stats::fmt_latency as fmt_ms;

/// Judge one phase: its series (t counts from the phase start, warm-up included), its
/// warm-up, the acquire and service latency over the measured window, its wait timeout, and
/// its nemesis events (the seconds of faults that took effect are not judged for the rate).
pub fn assess(series: &[TimePoint], warmup_s: f64, acquire: &Percentiles, service: &Percentiles, wait_timeout_ms: u64, faults: &[NemesisEvent]) -> Assessment {
    let mut out = Assessment::default();
    let start = warmup_s.ceil() as u32;
    let mut window: Vec<&TimePoint> = series.iter().filter(|p| p.t >= start).collect();
    // The last point is the stub up to the stop: not a full second.
    if window.len() > 1 {
        window.pop();
    }
    let acquired: u64 = window.iter().map(|p| p.ok).sum();
    let spans = fault_spans(faults);
    let excused = excused_seconds(&window, &spans);
    let judged: Vec<&TimePoint> = window.iter().copied().filter(|p| !excused.contains(&p.t)).collect();

    if acquired > 0 {
        out.anomalies.extend(idle_flags(&judged, service, wait_timeout_ms));
    }
    if acquire.count > 0 && acquire.max > MAX_FLOOR_US && acquire.max as f64 > acquire.p99 as f64 * MAX_OVER_P99 {
        out.anomalies.push(flag(
            "max-over-p99",
            format!("max acquire latency {} is {:.0}x the p99 ({})", fmt_ms(acquire.max), acquire.max as f64 / acquire.p99.max(1) as f64, fmt_ms(acquire.p99)),
        ));
    }

    let rates: Vec<f64> = judged.iter().map(|p| p.ok as f64).collect();
    if rates.len() < MIN_SECONDS_TO_SLOW_START || acquired == 0 {
        out.settled_after_s = if acquired == 0 { None } else { Some(0.0) };
        return out;
    }
    if spans.is_empty() {
        settling(&rates, &mut out);
    } else {
        settling_around_faults(&window, &judged, &excused, &mut out);
    }
    out
}

/// The faults that took effect, as (name, start ms, heal ms; `u64::MAX` when never healed)
/// from the phase start: a start its own check showed doing nothing, or whose heal's probe
/// did, opens no window (as `nemesis::effects` counts them).
pub fn fault_spans(events: &[NemesisEvent]) -> Vec<(String, u64, u64)> {
    crate::faultlog::windows(events).into_iter().filter(|w| !w.effect.is_none()).map(|w| (w.fault, w.start, w.heal.unwrap_or(u64::MAX))).collect()
}

/// The window's seconds the rate is not judged in: those a fault touched, and after each
/// heal those until the rate was back: first every second without an acquisition (the
/// availability's recovery time), then every second under [`SLOW_START`] of the median of
/// the seconds left.
fn excused_seconds(window: &[&TimePoint], spans: &[(String, u64, u64)]) -> Vec<u32> {
    let touched = |t: u32| spans.iter().any(|(_, a, b)| (t as u64) * 1000 < *b && (t as u64 + 1) * 1000 > *a);
    let mut excused: Vec<u32> = window.iter().map(|p| p.t).filter(|t| touched(*t)).collect();
    // In order, so a recovery that takes several seconds is followed through them.
    let follow = |excused: &mut Vec<u32>, down: &dyn Fn(&TimePoint) -> bool| {
        for i in 1..window.len() {
            if !excused.contains(&window[i].t) && excused.contains(&window[i - 1].t) && down(window[i]) {
                excused.push(window[i].t);
            }
        }
    };
    follow(&mut excused, &|p| p.ok == 0);
    let mut rest: Vec<f64> = window.iter().filter(|p| !excused.contains(&p.t)).map(|p| p.ok as f64).collect();
    if rest.is_empty() {
        return excused;
    }
    rest.sort_by(|a, b| a.total_cmp(b));
    let steady = rest[rest.len() / 2];
    follow(&mut excused, &|p| (p.ok as f64) < SLOW_START * steady);
    excused
}

/// Settling in a phase with faults: the seconds before the first fault for a slow start,
/// and every judged second after it for a rate that fell outside the faults.
fn settling_around_faults(window: &[&TimePoint], judged: &[&TimePoint], excused: &[u32], out: &mut Assessment) {
    let mut sorted: Vec<f64> = judged.iter().map(|p| p.ok as f64).collect();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let steady = sorted[sorted.len() / 2];
    let low = |p: &&TimePoint| (p.ok as f64) < SLOW_START * steady;
    let before: Vec<&TimePoint> = window.iter().copied().take_while(|p| !excused.contains(&p.t)).collect();
    let lead = before.iter().take_while(|p| low(p)).count();
    out.settled_after_s = Some(lead as f64);
    if lead > 0 {
        out.anomalies.push(flag(
            "unsettled",
            format!("the first {lead} s of the measured window, before any fault, ran under {:.0}% of the rate outside the faults ({steady:.0}/s); those seconds are in the figures: raise --warmup", SLOW_START * 100.0),
        ));
    }
    let later: Vec<u32> = judged.iter().skip(lead).filter(|p| low(p)).map(|p| p.t).collect();
    if !later.is_empty() {
        out.anomalies.push(flag(
            "unsettled",
            format!(
                "the rate fell under {:.0}% of its rate outside the faults ({steady:.0}/s) outside every fault window and its recovery (t = {} s from the phase start)",
                SLOW_START * 100.0,
                later.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
}

/// `zero-seconds` and `stall`, for a window that acquired something.
fn idle_flags(window: &[&TimePoint], service: &Percentiles, wait_timeout_ms: u64) -> Vec<Anomaly> {
    let mut flags = Vec::new();
    let zero: Vec<u32> = window.iter().filter(|p| p.ok == 0).map(|p| p.t).collect();
    if !zero.is_empty() {
        flags.push(flag(
            "zero-seconds",
            format!("{} second(s) with no acquisition (t = {} s from the phase start)", zero.len(), zero.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")),
        ));
    }
    let mut run = 0u64;
    let mut longest = 0u64;
    let mut last: Option<u32> = None;
    for p in window {
        // Seconds left out (a fault's) break a run: it counts consecutive judged seconds.
        let follows = last.is_some_and(|l| l + 1 == p.t);
        run = if p.ok == 0 { if follows { run + 1 } else { 1 } } else { 0 };
        last = Some(p.t);
        longest = longest.max(run);
    }
    if wait_timeout_ms > 0 && longest * 1000 > wait_timeout_ms {
        flags.push(flag("stall", format!("{longest} s in a row without an acquisition, longer than the wait timeout ({wait_timeout_ms} ms)")));
    } else if wait_timeout_ms > 0 && service.max > wait_timeout_ms * 1000 + wait_timeout_ms * 100 + 50_000 {
        flags.push(flag("stall", format!("a call waited {}, longer than the wait timeout ({wait_timeout_ms} ms)", fmt_ms(service.max))));
    }
    flags
}

/// When the rate settled, and the `unsettled` / `never-settled` flag: for a window of at
/// least [`MIN_SECONDS_TO_SLOW_START`] full seconds that acquired something.
fn settling(rates: &[f64], out: &mut Assessment) {
    // A slow start: leading seconds under SLOW_START of the window's median. It needs only
    // a few seconds, so the default run's 5-second phases are judged too (the 3-second-mean
    // test below needs MIN_SECONDS_TO_JUDGE, and its second-half median is easily moved by
    // one noisy second of a short window).
    let mut sorted = rates.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let whole = sorted[sorted.len() / 2];
    let lead = rates.iter().take_while(|&&r| r < SLOW_START * whole).count();
    let lead = if lead == rates.len() { 0 } else { lead };
    if rates.len() < MIN_SECONDS_TO_JUDGE {
        out.settled_after_s = Some(lead as f64);
        if lead > 0 {
            out.anomalies.push(flag(
                "unsettled",
                format!("the first {lead} s of the measured window ran under {:.0}% of its median rate ({whole:.0}/s); those seconds are in the figures: raise --warmup", SLOW_START * 100.0),
            ));
        }
        return;
    }
    let mut tail: Vec<f64> = rates[rates.len() / 2..].to_vec();
    tail.sort_by(|a, b| a.total_cmp(b));
    let median = tail[tail.len() / 2];
    let cap = rates.len() / 2;
    let settled = (0..=cap).find(|&i| {
        let w = &rates[i..(i + SETTLE_SECONDS).min(rates.len())];
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        (mean - median).abs() <= SETTLE_TOLERANCE * median.max(1.0)
    });
    let settled = settled.map(|i| i.max(lead));
    match settled {
        Some(0) => out.settled_after_s = Some(0.0),
        Some(i) => {
            out.settled_after_s = Some(i as f64);
            out.anomalies.push(flag(
                "unsettled",
                format!("the rate settled only {i} s into the measured window (steady {median:.0}/s); those seconds are in the figures: raise --warmup"),
            ));
        }
        None => {
            out.settled_after_s = None;
            out.anomalies.push(flag(
                "never-settled",
                format!("the rate never settled within the first {cap} s of the measured window (steady {median:.0}/s, within ±{:.0}%)", SETTLE_TOLERANCE * 100.0),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(ok: &[u64]) -> Vec<TimePoint> {
        ok.iter()
            .enumerate()
            .map(|(t, &ok)| TimePoint { t: t as u32, ok, failed: 0, timeouts: 0, p50_us: 100, p99_us: 1000, max_us: 2000, backlog: None })
            .collect()
    }

    fn lat(p99: u64, max: u64) -> Percentiles {
        Percentiles { count: 1000, p50: p99 / 4, p99, max, ..Percentiles::default() }
    }

    #[test]
    fn a_steady_phase_has_no_flag() {
        let a = assess(&series(&[500, 510, 490, 505, 495, 500, 502, 498, 120]), 0.0, &lat(2000, 5000), &lat(2000, 5000), 5000, &[]);
        assert_eq!(a.anomalies, vec![], "{a:?}");
        assert_eq!(a.settled_after_s, Some(0.0));
    }

    /// The zookeeper case: a JVM warming up, a second with nothing acquired, a max 30x p99.
    #[test]
    fn a_warming_phase_is_flagged() {
        let a = assess(&series(&[40, 0, 90, 300, 480, 500, 510, 495, 505, 500, 498, 502, 30]), 0.0, &lat(60_000, 1_900_000), &lat(60_000, 1_900_000), 5000, &[]);
        let kinds: Vec<&str> = a.anomalies.iter().map(|a| a.kind.as_str()).collect();
        assert!(kinds.contains(&"zero-seconds"), "{a:?}");
        assert!(kinds.contains(&"max-over-p99"), "{a:?}");
        assert!(kinds.contains(&"unsettled"), "{a:?}");
        assert!(a.settled_after_s.unwrap() >= 2.0, "{a:?}");
    }

    /// Measured on a real ZooKeeper started fresh (`--backends zookeeper --warmup 0s
    /// --duration 6s`): hot-key seconds 3, 31, 37, 41, 28 (and a partial one). The 3-second
    /// mean of the start (24) is within 25% of the second half's median (28): only the
    /// slow-start test sees it.
    #[test]
    fn a_short_phase_with_a_jvm_start_is_flagged() {
        let a = assess(&series(&[3, 31, 37, 41, 28, 13]), 0.0, &lat(1_690_000, 1_691_000), &lat(1_690_000, 1_691_000), 10_000, &[]);
        assert!(a.anomalies.iter().any(|a| a.kind == "unsettled" && a.detail.contains("first 1 s")), "{a:?}");
        assert_eq!(a.settled_after_s, Some(1.0));
        let steady = assess(&series(&[34, 48, 43, 44, 44, 46]), 0.0, &lat(500_000, 516_000), &lat(500_000, 516_000), 10_000, &[]);
        assert_eq!(steady.anomalies, vec![], "{steady:?}");
        assert_eq!(steady.settled_after_s, Some(0.0));
    }

    #[test]
    fn warmup_seconds_are_not_judged_and_a_stall_is_named() {
        // Zero in the warm-up (t 0-1) is fine; four zero seconds later, with a 2 s wait timeout, is a stall.
        let a = assess(&series(&[0, 0, 500, 500, 0, 0, 0, 0, 500, 500, 500, 500, 500, 500, 10]), 2.0, &lat(2000, 3000), &lat(2000, 3000), 2000, &[]);
        let kinds: Vec<&str> = a.anomalies.iter().map(|a| a.kind.as_str()).collect();
        assert!(kinds.contains(&"stall") && kinds.contains(&"zero-seconds"), "{a:?}");
        assert!(a.anomalies[0].detail.contains("t = 4, 5, 6, 7"), "{a:?}");
    }

    #[test]
    fn never_settling_is_said() {
        let a = assess(&series(&[10, 1000, 10, 1000, 10, 1000, 10, 1000, 10, 1000, 10, 1000, 5]), 0.0, &lat(2000, 3000), &lat(2000, 3000), 5000, &[]);
        assert!(a.anomalies.iter().any(|a| a.kind == "never-settled"), "{a:?}");
        assert_eq!(a.settled_after_s, None);
    }

    fn fault(f: &str, from_ms: u64, to_ms: u64) -> Vec<NemesisEvent> {
        use crate::faultlog::{Effect, Mark};
        let e = |phase: Mark, at_ms: u64| NemesisEvent::new(f, phase, &["etcd-1"], at_ms, Effect::confirmed("etcd-1 process gone"));
        vec![e(Mark::Start, from_ms), e(Mark::End, to_ms)]
    }

    /// The case: a fault run whose rate dropped to nothing while the leader was
    /// killed got "never-settled" / "unsettled ... raise --warmup". The dip inside the fault
    /// window (and the second of recovery after the heal) is the fault's, not an anomaly.
    #[test]
    fn a_rate_that_falls_inside_a_fault_window_is_not_an_anomaly() {
        let ok = [220, 230, 225, 0, 0, 0, 40, 221, 219, 223, 0, 0, 230, 225, 224, 10];
        let faults: Vec<NemesisEvent> = [fault("kill:leader", 3_000, 6_000), fault("pause", 10_000, 11_900)].concat();
        let a = assess(&series(&ok), 0.0, &lat(2000, 5000), &lat(2000, 5000), 1000, &faults);
        assert_eq!(a.anomalies, vec![], "{a:?}");
        assert_eq!(a.settled_after_s, Some(0.0));
        // The same series without its fault log is flagged, as it should be.
        let blind = assess(&series(&ok), 0.0, &lat(2000, 5000), &lat(2000, 5000), 1000, &[]);
        assert!(blind.anomalies.iter().any(|a| a.kind == "zero-seconds"), "{blind:?}");
        assert!(blind.anomalies.iter().any(|a| a.kind == "stall"), "{blind:?}");
    }

    /// Measured (postgres, `--nemesis kill:leader,pause,partition --nemesis-interval 3s`,
    /// warm-up 1 s): no acquisition from the kill until 5 s after the pause healed. The
    /// seconds after the heal without an acquisition are its recovery (the availability's
    /// figure), not "zero-seconds".
    #[test]
    fn a_slow_recovery_after_a_heal_is_the_faults() {
        let faults: Vec<NemesisEvent> = [fault("kill:leader", 2_543, 4_067), fault("pause", 5_569, 7_070)].concat();
        let a = assess(&series(&[28, 14, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]), 1.0, &lat(2000, 5000), &lat(2000, 5000), 5000, &faults);
        assert_eq!(a.anomalies, vec![], "{a:?}");
    }

    /// A fault shown to have done nothing opens no window: its seconds are judged.
    #[test]
    fn a_fault_without_effect_excuses_nothing() {
        let ok = [220, 230, 225, 0, 0, 0, 221, 219, 223, 230, 225, 224, 10];
        let mut faults = fault("partition", 3_000, 6_000);
        faults[1].effect = Some(crate::faultlog::Effect::none("NOT dropped any traffic"));
        let a = assess(&series(&ok), 0.0, &lat(2000, 5000), &lat(2000, 5000), 1000, &faults);
        assert!(a.anomalies.iter().any(|a| a.kind == "zero-seconds"), "{a:?}");
    }

    /// Outside the faults the rate is still judged: a slow start before the first fault
    /// blames warm-up, a drop well after a heal is flagged as outside the faults.
    #[test]
    fn an_unsettled_rate_outside_the_faults_is_still_flagged() {
        let faults = fault("kill:leader", 4_000, 6_000);
        let slow = assess(&series(&[20, 60, 220, 230, 0, 0, 225, 221, 219, 223, 230, 225, 10]), 0.0, &lat(2000, 5000), &lat(2000, 5000), 5000, &faults);
        let u: Vec<&Anomaly> = slow.anomalies.iter().filter(|a| a.kind == "unsettled").collect();
        assert_eq!(u.len(), 1, "{slow:?}");
        assert!(u[0].detail.contains("first 2 s") && u[0].detail.contains("before any fault") && u[0].detail.contains("raise --warmup"), "{u:?}");
        let later = assess(&series(&[220, 230, 225, 220, 0, 0, 225, 221, 219, 60, 50, 225, 10]), 0.0, &lat(2000, 5000), &lat(2000, 5000), 5000, &faults);
        let u: Vec<&Anomaly> = later.anomalies.iter().filter(|a| a.kind == "unsettled").collect();
        assert_eq!(u.len(), 1, "{later:?}");
        assert!(u[0].detail.contains("outside every fault window") && u[0].detail.contains("t = 9, 10 s") && !u[0].detail.contains("warmup"), "{u:?}");
    }
}
