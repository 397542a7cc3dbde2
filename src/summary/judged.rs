//! The model asks the judgement: each phase's fault tally and measurements, the checks
//! attached by phase id, each phase's windows and verdict, and the backend's verdict over
//! its phases (a scenario's choreography apart, answering to its expectation).

use crate::checker::SegmentVerdict;
use crate::judgement::{self, Availability, FencingMode, Measured};

use super::{BackendSummary, WorkloadSummary};

impl WorkloadSummary {
    /// What the phase's log says of its server-side faults: applied (seen to take effect),
    /// shown to do nothing, unchecked, skipped. Faults of the holder (a paused or cut-off
    /// client, a delayed write) break every lease lock by design and say nothing of the
    /// service's class; a scenario's choreography is judged by its expectation: neither is
    /// counted here.
    pub fn fault_tally(&self) -> crate::faultlog::Tally {
        if self.choreographed {
            return crate::faultlog::Tally::default();
        }
        crate::faultlog::tally(&self.nemesis)
    }

    /// What the phase ran under, as a backend's verdict lists it: a scenario's entry, the
    /// faults that took effect, or "no fault".
    pub fn condition(&self) -> String {
        match (&self.expectation, self.faults_applied()) {
            (Some(e), _) => e.entry.clone(),
            (None, f) if f.is_empty() => "no fault".into(),
            (None, f) => f.join(", "),
        }
    }

    /// Faults of the lock service that took effect in this phase, by name.
    pub fn faults_applied(&self) -> Vec<String> {
        self.fault_tally().applied
    }

    /// Faults of the service that started but were shown to have done nothing.
    pub fn faults_no_effect(&self) -> Vec<String> {
        self.fault_tally().no_effect
    }

    /// Faults the target could not apply in this phase.
    pub fn faults_skipped(&self) -> Vec<String> {
        self.fault_tally().skipped
    }

    fn measured(&self, has_tokens: bool, claimed: &str, unchecked: Option<&str>) -> Measured {
        let t = self.fault_tally();
        Measured {
            sections: self.sections,
            availability_missing: unchecked.map(str::to_string),
            faults_no_effect: t.no_effect,
            faults_unchecked: t.unchecked,
            counts: self.counts.clone(),
            has_tokens,
            checks: self.checks.clone(),
            availability: self.availability.clone(),
            claimed: claimed.to_string(),
            faults_applied: t.applied,
            faults_skipped: t.skipped,
            exposure: self.exposure,
            windows: self.windows.iter().cloned().collect(),
            expectation: self.expectation.clone(),
            // A scenario's choreography is judged by its expectation alone.
            unscripted: self.choreographed.then(|| Box::new(Measured { claimed: claimed.to_string(), has_tokens, ..Measured::default() })),
        }
    }
}

impl BackendSummary {
    /// Attach the checkers' verdicts (none when no history was kept) and derive each phase's
    /// verdict and the backend's. A phase takes the segment with its phase id; a phase whose
    /// segment is missing (its stage failed, the history was cut) gets no checks, never a
    /// neighbour's. Phases read back from a summary written before phase ids pair by position.
    pub fn attach_checks(&mut self, verdicts: &[SegmentVerdict], mode: FencingMode) {
        let has_tokens = self.capabilities.as_ref().and_then(|c| c["fencing"].as_bool()).unwrap_or(false);
        let claimed = self
            .capabilities
            .as_ref()
            .and_then(|c| c["consistency"].as_str())
            .map(|c| c.to_uppercase())
            .unwrap_or_else(|| "unknown".into());
        for (i, w) in self.workloads.iter_mut().enumerate() {
            let segment = if w.phase_id.is_empty() { verdicts.get(i) } else { verdicts.iter().find(|v| v.phase == w.phase_id) };
            if let Some(v) = segment {
                w.checks = judgement::briefs(v);
                w.validity = Some(v.valid);
                w.availability = v
                    .results
                    .iter()
                    .find(|r| r.checker == "availability")
                    .and_then(Availability::from_check)
                    .filter(|_| !w.faults_applied().is_empty());
            }
            let missing = match (segment.is_some(), verdicts.is_empty()) {
                (true, _) => None,
                (false, true) => Some("no history kept (--history off), so no availability check"),
                (false, false) => Some("this phase's history segment is missing, so no check"),
            };
            let m = w.measured(has_tokens, &claimed, missing);
            w.windows = segment.and_then(|v| v.windows.as_ref()).map(|seen| judgement::window::judge(seen, judgement::fenced(&m, mode)));
            let m = Measured { windows: w.windows.iter().cloned().collect(), ..m };
            w.verdict = Some(judgement::verdict(&m, mode));
        }
        self.validity = self.workloads.iter().filter_map(|w| w.validity).max();
        self.availability = Availability::combine(self.workloads.iter().filter_map(|w| w.availability.as_ref()));
        let m = self.measured(has_tokens, &claimed, verdicts.is_empty());
        let pooled = judgement::verdict(&m, mode);
        // Phases under different conditions: each condition's own words, not pooled ones.
        let mut parts: Vec<(String, &judgement::Verdict)> = Vec::new();
        for w in &self.workloads {
            let Some(v) = w.verdict.as_ref() else { continue };
            let condition = w.condition();
            match parts.iter_mut().find(|(c, _)| *c == condition) {
                Some(p) if (v.valid, v.safety.violation_rank()) > (p.1.valid, p.1.safety.violation_rank()) => p.1 = v,
                Some(_) => {}
                None => parts.push((condition, v)),
            }
        }
        let listed = judgement::listed(pooled, &parts);
        self.verdict = Some(listed);
    }

    /// The backend's measurements: every phase's counts and checks, evidence as weak as the
    /// weakest phase, every phase's windows; a scenario's choreographies carry their
    /// expectations, and the axes and the class read the phases that are not one.
    fn measured(&self, has_tokens: bool, claimed: &str, no_history: bool) -> Measured {
        let pooled = |ws: &[&WorkloadSummary]| {
            let tallies: Vec<crate::faultlog::Tally> = ws.iter().map(|w| w.fault_tally()).collect();
            let applied = dedup(tallies.iter().flat_map(|t| t.applied.clone()));
            Measured {
                counts: ws.iter().map(|w| &w.counts).sum(),
                has_tokens,
                sections: ws.iter().map(|w| w.sections).sum(),
                checks: ws.iter().flat_map(|w| w.checks.clone()).collect(),
                availability: Availability::combine(ws.iter().filter_map(|w| w.availability.as_ref())),
                availability_missing: Some(
                    if no_history { "no history kept (--history off), so no availability check" } else { "no phase had an availability check" }.to_string(),
                ),
                faults_no_effect: dedup(tallies.iter().flat_map(|t| t.no_effect.clone())).into_iter().filter(|f| !applied.contains(f)).collect(),
                faults_unchecked: dedup(tallies.iter().flat_map(|t| t.unchecked.clone())).into_iter().filter(|f| !applied.contains(f)).collect(),
                claimed: claimed.to_string(),
                faults_skipped: dedup(tallies.iter().flat_map(|t| t.skipped.clone())),
                faults_applied: applied,
                exposure: ws.iter().filter(|w| w.sections > 0).filter_map(|w| w.exposure).reduce(f64::min),
                windows: ws.iter().filter_map(|w| w.windows.clone()).collect(),
                expectation: None,
                unscripted: None,
            }
        };
        let all: Vec<&WorkloadSummary> = self.workloads.iter().collect();
        let mut m = pooled(&all);
        let scripted: Vec<&WorkloadSummary> = all.iter().copied().filter(|w| w.choreographed).collect();
        if !scripted.is_empty() {
            let free: Vec<&WorkloadSummary> = all.iter().copied().filter(|w| !w.choreographed).collect();
            m.unscripted = Some(Box::new(pooled(&free)));
            m.expectation = judgement::Expectation::all(scripted.iter().filter_map(|w| w.expectation.as_ref()));
        }
        m
    }

}

fn dedup(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

