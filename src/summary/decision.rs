//! The decision table: one row per backend, the answer first. Speed from the phases without
//! faults (each figure under its workload's name, never pooled across workloads), and safety,
//! availability, recovery and the class from the phases under faults, each word the
//! judgement's ([`crate::judgement`]) as the phase's verdict carries it. The renderers
//! (terminal, summary.md, the page) only lay it out.

use crate::judgement::{self, Verdict};
use crate::stats::{fmt_pct_cell, Quantile};

use super::{BackendSummary, Summary, WorkloadSummary};

/// The table, its columns named, the faults its fault cells stand for.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The workloads measured without faults, in run order: one speed column each.
    pub speed: Vec<String>,
    /// The faults the fault cells were measured under, and the TTL those phases used.
    pub faults: Vec<String>,
    pub fault_ttl_ms: Option<u64>,
    pub rows: Vec<DecisionRow>,
}

#[derive(Debug, Clone)]
pub struct DecisionRow {
    pub backend: String,
    /// Nodes on its target and, where it keeps nothing on disk, "RAM".
    pub nodes: String,
    /// Acquisitions a second per speed workload ("-" where it did not run).
    pub speed: Vec<String>,
    /// p99 acquire latency of the first speed workload, ms.
    pub p99_ms: String,
    /// The fault phases' cells; None where no fault took effect.
    pub faults: Option<FaultCells>,
    /// One sentence: the verdict under faults with its fencing and evidence, or why not, and
    /// the flag that measures what is missing.
    pub sentence: String,
}

#[derive(Debug, Clone)]
pub struct FaultCells {
    pub safety: String,
    pub availability: String,
    pub recovery: String,
    pub class: String,
}

/// The command that measures safety, availability and the class when a run had no fault.
pub const RUN_FOR_FAULTS: &str = "dlbench run --preset answer (or --nemesis kill:leader)";

fn nodes(b: &BackendSummary) -> String {
    let kind = crate::durability::design_of(&b.name).parse::<crate::kind::BackendKind>().ok();
    let n = kind.map_or("?".to_string(), |k| k.nodes().to_string());
    let ram = b.durability.as_ref().is_some_and(|d| d.label.contains("no persistence"));
    if ram { format!("{n} RAM") } else { n.to_string() }
}

/// Under faults that took effect (a scenario's script has none: `fault_tally`).
fn faulted(w: &WorkloadSummary) -> bool {
    !w.faults_applied().is_empty()
}

/// The verdict of a backend's fault phases: the one, or the worst of several.
fn fault_verdict(b: &BackendSummary) -> Option<(&WorkloadSummary, &Verdict)> {
    b.workloads
        .iter()
        .filter(|w| faulted(w))
        .filter_map(|w| w.verdict.as_ref().map(|v| (w, v)))
        .max_by_key(|(_, v)| (v.valid, v.safety.violation_rank()))
}

fn evidence(v: &Verdict) -> String {
    match v.exposure {
        Some(e) => format!("evidence {} (holders inside {})", v.evidence, judgement::percent(e)),
        None => format!("evidence {}", v.evidence),
    }
}

fn row(b: &BackendSummary, speed: &[String]) -> DecisionRow {
    let calm = |name: &str| b.workloads.iter().find(|w| w.name == name && !faulted(w) && !w.choreographed);
    let speed_cells = speed.iter().map(|n| calm(n).map_or("-".into(), |w| format!("{:.0}", w.ops_per_sec))).collect();
    let p99_ms = speed.first().and_then(|n| calm(n)).map_or("-".into(), |w| fmt_pct_cell(&w.acquire_latency_us, Quantile::P99));
    if let Some(f) = &b.failure {
        return DecisionRow { backend: b.name.clone(), nodes: nodes(b), speed: speed_cells, p99_ms, faults: None, sentence: format!("{}: failed: {f}", b.name) };
    }
    let (faults, sentence) = match fault_verdict(b) {
        Some((w, v)) => {
            let observed = match &v.class_observed {
                Some(c) if v.contradiction => format!("{c}!"),
                Some(c) => c.to_string(),
                None => "?".into(),
            };
            let cells = FaultCells {
                safety: v.safety.to_string(),
                availability: v.grant_ratio.map_or("-".into(), |r| format!("{:.0}%", r * 100.0)),
                recovery: v.recovery_cell(),
                class: format!("{} -> {observed}", v.class_claimed),
            };
            let mut s = format!("{} ({}): {}; fencing {}; {}", b.name, w.name, v.headline, v.fencing, evidence(v));
            if v.class_observed.is_none() {
                s.push_str(&format!("; class {}", v.class_note.as_deref().unwrap_or(judgement::NOT_TESTED)));
            }
            if let Some(r) = v.recovery.as_deref().filter(|r| !r.starts_with("recovered in")) {
                s.push_str(&format!("; {r}"));
            }
            // What would earn the missing word.
            if v.evidence == judgement::words::Strength::Weak {
                s.push_str(&format!("; to earn it, hold the lock longer (--hold {}) or use the answer plan ({RUN_FOR_FAULTS})", crate::util::fmt_duration(crate::phase::ANSWER_HOLD)));
            }
            (Some(cells), s)
        }
        None => {
            let quiet = b.verdict.as_ref().map_or_else(|| judgement::NO_VERDICT.to_string(), |v| v.headline.clone());
            (None, format!("{}: {quiet}; no fault took effect, so safety under faults, availability and the class are not measured: run {RUN_FOR_FAULTS}", b.name))
        }
    };
    DecisionRow { backend: b.name.clone(), nodes: nodes(b), speed: speed_cells, p99_ms, faults, sentence }
}

impl Summary {
    /// The decision table, backends grouped by family as every table of the run.
    pub fn decision(&self) -> Decision {
        let backends = self.by_family();
        let mut speed: Vec<String> = Vec::new();
        let mut faults: Vec<String> = Vec::new();
        let mut fault_ttl_ms = None;
        for w in backends.iter().flat_map(|b| &b.workloads).filter(|w| !w.choreographed) {
            if faulted(w) {
                for f in w.faults_applied() {
                    if !faults.contains(&f) {
                        faults.push(f);
                    }
                }
                fault_ttl_ms.get_or_insert(w.ttl_ms);
            } else if !speed.contains(&w.name) {
                speed.push(w.name.clone());
            }
        }
        let rows = backends.iter().map(|b| row(b, &speed)).collect();
        Decision { speed, faults, fault_ttl_ms, rows }
    }
}

impl Decision {
    /// The column heads, in order.
    pub fn header(&self) -> Vec<String> {
        let mut h = vec!["backend".to_string(), "nodes".into()];
        h.extend(self.speed.iter().cloned());
        h.extend(["p99 ms", "safety", "avail", "recovery", "CP/AP"].map(String::from));
        h
    }

    /// Each row's cells under [`Decision::header`].
    pub fn cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| {
                let mut c = vec![r.backend.clone(), r.nodes.clone()];
                c.extend(r.speed.iter().cloned());
                c.push(r.p99_ms.clone());
                match &r.faults {
                    Some(f) => c.extend([f.safety.clone(), f.availability.clone(), f.recovery.clone(), f.class.clone()]),
                    None => c.extend(["not measured", "-", "-", "-"].map(String::from)),
                }
                c
            })
            .collect()
    }

    /// What the columns mean, in one paragraph.
    pub fn caption(&self) -> String {
        let speed = if self.speed.is_empty() {
            "No phase ran without faults.".to_string()
        } else {
            format!("Speed without faults: acquisitions a second under {} and the p99 acquire latency of {}.", self.speed.join(", "), self.speed[0])
        };
        let faults = if self.faults.is_empty() {
            format!("No fault took effect: safety, availability and the class need faults ({RUN_FOR_FAULTS}).")
        } else {
            format!(
                "Under faults ({}{}), each in its own window: safety at the resource, the grant rate during the faults against the rate without them (avail), the slowest recovery after a heal, the class claimed -> observed (! where they disagree).",
                self.faults.join(", "),
                self.fault_ttl_ms.map(|t| format!("; TTL {}", crate::util::fmt_duration(std::time::Duration::from_millis(t)))).unwrap_or_default()
            )
        };
        format!("{speed} {faults} RAM: nothing on disk.")
    }
}
