//! The model's facts for the answer at a glance ([`judgement::matrix`]): each phase's verdict,
//! the windows of the faults that took effect in it, and its grants per second.

use crate::judgement::matrix::{self, BackendFacts, FaultWindow, Matrix, PhaseFacts};

use super::{Summary, WorkloadSummary};

/// The windows of the faults that took effect in a phase: a start paired with the end that
/// heals it (or the phase's end), leaving out faults of the holder, skipped ones and any
/// start or end shown to have done nothing.
pub fn applied_windows(w: &WorkloadSummary) -> Vec<FaultWindow> {
    let applied = w.faults_applied();
    let phase_end_ms = w.timeseries.iter().map(|p| u64::from(p.t) + 1).max().unwrap_or(0) * 1000;
    crate::nemesis::took_effect_spans(&w.nemesis)
        .into_iter()
        .filter(|(f, _, _)| applied.iter().any(|a| a == f))
        .map(|(f, start_ms, end)| FaultWindow { fault: f.to_string(), start_ms, end_ms: end.unwrap_or(phase_end_ms.max(start_ms)) })
        .collect()
}

fn phase(w: &WorkloadSummary) -> Option<PhaseFacts> {
    let verdict = w.verdict.clone()?;
    let len = w.timeseries.iter().map(|p| p.t as usize + 1).max().unwrap_or(0);
    let mut grants = vec![0; len];
    for p in &w.timeseries {
        grants[p.t as usize] = p.ok;
    }
    Some(PhaseFacts {
        verdict,
        windows: applied_windows(w),
        grants,
        overlaps: w.counts.overlaps,
        lost_updates: w.counts.lost_updates,
        availability: w.availability.clone(),
    })
}

impl Summary {
    /// The answer at a glance: every backend under every condition it ran in.
    pub fn matrix(&self) -> Matrix {
        let facts: Vec<BackendFacts> = self
            .backends
            .iter()
            .map(|b| BackendFacts { name: b.name.clone(), failure: b.failure.clone(), phases: b.workloads.iter().filter_map(phase).collect() })
            .collect();
        matrix::matrix(&facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::NemesisEvent;

    fn event(f: &str, phase: &str, at_ms: u64, detail: &str) -> NemesisEvent {
        NemesisEvent { backend: "etcd".into(), workload: "hot-key".into(), f: f.into(), phase: phase.into(), targets: vec!["etcd-1".into()], at_ms, detail: detail.into() }
    }

    fn workload(nemesis: Vec<NemesisEvent>) -> WorkloadSummary {
        let pct = serde_json::json!({"count": 10, "mean": 100.0, "p50": 100, "p90": 500, "p99": 900, "p999": 900, "p9999": 900, "max": 900});
        let mut w: WorkloadSummary = serde_json::from_value(serde_json::json!({
            "name": "hot-key", "clients": 4, "keys": 1, "seed": null, "warmup_s": 0.0, "measured_s": 6.0,
            "ops_per_sec": 10.0, "acquired": 60, "acquire_latency_us": pct, "service_latency_us": pct,
            "release_latency_us": pct, "handoff_latency_us": pct, "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
            "first_keys": [], "timeseries": (0..6).map(|t| serde_json::json!({"t": t, "ok": 10, "failed": 0, "timeouts": 0, "p50_us": 1, "p99_us": 1, "max_us": 1})).collect::<Vec<_>>(),
            "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
            "sections": 60, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
        }))
        .unwrap();
        w.nemesis = nemesis;
        w
    }

    /// A partition the probe showed did nothing gets no window, so no column; a kill that
    /// took effect does.
    #[test]
    fn only_faults_that_took_effect_make_windows() {
        let w = workload(vec![
            event("kill", "start", 1000, ""),
            event("kill", "end", 2500, ""),
            event("partition", "start", 3000, ""),
            event("partition", "end", 4000, "checked: NOT dropped: traffic flowed"),
            event("client-pause", "start", 4000, ""),
        ]);
        assert_eq!(applied_windows(&w), [FaultWindow { fault: "kill".into(), start_ms: 1000, end_ms: 2500 }]);
    }
}
