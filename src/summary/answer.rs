//! The model's facts for the answer at a glance ([`judgement::matrix`]): each phase's verdict
//! and its fault windows as judged, its workload and rate.

use crate::judgement::matrix::{self, BackendFacts, Matrix, PhaseFacts};

use super::{Summary, WorkloadSummary};

fn phase(w: &WorkloadSummary) -> Option<PhaseFacts> {
    Some(PhaseFacts {
        workload: w.name.clone(),
        verdict: w.verdict.clone()?,
        windows: w.windows.clone(),
        ops_per_sec: w.ops_per_sec,
        choreographed: w.choreographed,
        overlaps: w.counts.overlaps,
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
