//! `dlbench soak`: every backend for a long time under a nemesis that cycles through every
//! fault the target supports, judged on what hours expose and minutes do not: the harness's
//! memory and file descriptors must stay flat (a leak is a slope), every fault must heal, the
//! history must be complete and checked. Lock safety is reported as in `run` but does not
//! decide a soak's exit status: a Redis lock losing its claim on a kill is the lock's
//! property, not the harness's.

use crate::faultlog::{Mark, NemesisEvent};
use crate::summary::usage::UsageSummary;
use crate::summary::Summary;
use crate::summary::soak::{SoakGoal, SoakOutcome};

/// Judge a finished run as a soak.
pub fn judge_summary(summary: &Summary, r: Option<&UsageSummary>, goal: SoakGoal) -> SoakOutcome {
    let events: Vec<&NemesisEvent> = summary.backends.iter().flat_map(|b| b.workloads.iter()).flat_map(|w| w.nemesis.iter()).collect();
    let checked = !summary.backends.is_empty() && summary.backends.iter().all(|b| b.failure.is_none() && b.verdict.is_some());
    judge(&events, summary.complete, checked, r, goal)
}

/// Judge a soak from its fault events, whether it completed and whether every history was
/// checked, and its resource figures.
pub fn judge(events: &[&NemesisEvent], complete: bool, checked: bool, r: Option<&UsageSummary>, goal: SoakGoal) -> SoakOutcome {
    let (mut started, mut ended) = (0u64, 0u64);
    for e in events {
        match e.phase {
            Mark::Start => started += 1,
            Mark::End => ended += 1,
            Mark::Skipped => {}
        }
    }
    let span_h = r.map(|r| ((r.seconds - r.warmup_s) / 3600.0).max(0.0)).unwrap_or(0.0);
    let rss_growth_pct = r.and_then(|r| r.harness_rss_mb.growth_pct_per_hour).map(|g| (g * span_h * 100.0).round() / 100.0);
    let fd_growth = r.and_then(|r| r.harness_fds.growth_per_hour).map(|g| (g * span_h * 100.0).round() / 100.0);
    let mut failures = Vec::new();
    match rss_growth_pct {
        None => failures.push("too few resource samples after the warm-up to measure memory growth".to_string()),
        Some(g) if g > goal.max_rss_growth_pct => {
            failures.push(format!("harness memory grew {g:.1}% after the warm-up (goal: under {}%)", goal.max_rss_growth_pct))
        }
        _ => {}
    }
    if let Some(g) = fd_growth.filter(|g| *g > goal.max_fd_growth) {
        failures.push(format!("open file descriptors grew by {g:.1} after the warm-up (goal: under {})", goal.max_fd_growth));
    }
    if started == 0 {
        failures.push("no fault was applied".into());
    }
    if ended < started {
        failures.push(format!("{} of {started} faults never healed", started - ended));
    }
    if !complete {
        failures.push("the run did not complete".into());
    }
    if !checked {
        failures.push("not every backend's history was checked".into());
    }
    SoakOutcome {
        goal: Some(goal),
        rss_growth_pct,
        fd_growth,
        faults_applied: started,
        faults_healed: ended,
        complete,
        checked,
        passed: failures.is_empty(),
        failures,
    }
}

/// One line for the terminal.
pub fn line(o: &SoakOutcome, r: Option<&UsageSummary>) -> String {
    let rss = r.map(|r| format!("harness RSS {:.0} -> {:.0} MiB (peak {:.0})", r.harness_rss_mb.first, r.harness_rss_mb.last, r.harness_rss_mb.peak)).unwrap_or_default();
    let fds = r.map(|r| format!("fds {:.0}-{:.0}", r.harness_fds.min_after_warmup, r.harness_fds.max_after_warmup)).unwrap_or_default();
    let growth = o.rss_growth_pct.map(|g| format!("growth after warm-up {g:+.1}%")).unwrap_or_else(|| "growth not measured".into());
    let head = if o.passed { "soak: passed" } else { "soak: FAILED" };
    let mut s = format!("{head}: {rss}, {growth}, {fds}, {}/{} faults healed", o.faults_healed, o.faults_applied);
    for f in &o.failures {
        s.push_str(&format!("\n  - {f}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::trend;
    use crate::summary::usage::UsageSummary;

    fn resources(rss: &[(f64, f64)], fds: &[(f64, f64)]) -> UsageSummary {
        UsageSummary {
            samples: rss.len() as u64,
            seconds: 3600.0,
            warmup_s: 300.0,
            harness_rss_mb: trend(rss, 300.0),
            harness_fds: trend(fds, 300.0),
            harness_heap_mb: None,
            servers_mb: Default::default(),
        }
    }

    #[test]
    fn a_leak_or_a_missing_heal_fails_the_soak() {
        let flat: Vec<(f64, f64)> = (0..3600).map(|t| (t as f64, 50.0)).collect();
        let leak: Vec<(f64, f64)> = (0..3600).map(|t| (t as f64, 50.0 + t as f64 / 360.0)).collect();
        let fds: Vec<(f64, f64)> = (0..3600).map(|t| (t as f64, 40.0)).collect();
        let more_fds: Vec<(f64, f64)> = (0..3600).map(|t| (t as f64, 40.0 + (t / 300) as f64)).collect();
        let ev = |phase: Mark| NemesisEvent::new("kill", phase, &[], 0, crate::faultlog::Effect::confirmed("process gone"));
        let g = SoakGoal::default();
        let (start, end) = (ev(Mark::Start), ev(Mark::End));
        let ok = resources(&flat, &fds);
        // No fault applied: not a soak.
        let o = judge(&[], true, true, Some(&ok), g);
        assert!(!o.passed && o.failures.iter().any(|f| f.contains("no fault")), "{o:?}");
        let o = judge(&[&start, &end, &start], true, true, Some(&ok), g);
        assert!(!o.passed && o.failures.iter().any(|f| f.contains("never healed")), "{o:?}");
        let o = judge(&[&start, &end], true, true, Some(&ok), g);
        assert!(o.passed, "{o:?}");
        assert_eq!(o.rss_growth_pct, Some(0.0));
        let o = judge(&[&start, &end], false, true, Some(&ok), g);
        assert!(!o.passed, "an interrupted soak does not pass");
        let o = judge(&[&start, &end], true, false, Some(&ok), g);
        assert!(!o.passed, "an unchecked soak does not pass");
        // 10 MB an hour on 50-60 MB: about 15% over the 55 minutes after the warm-up.
        let o = judge(&[&start, &end], true, true, Some(&resources(&leak, &fds)), g);
        assert!(!o.passed && o.rss_growth_pct.unwrap() > 10.0, "{o:?}");
        // One descriptor more every 5 minutes.
        let o = judge(&[&start, &end], true, true, Some(&resources(&flat, &more_fds)), g);
        assert!(!o.passed && o.fd_growth.unwrap() > 5.0, "{o:?}");
    }
}
