//! The nemesis: faults with inverses, applied to the local target's nodes.
//!
//! Every fault is recorded when it starts and when its inverse ends it, in the history and
//! in the run's list of events, and every run ends healed: all nodes running and resumed,
//! all links open, all clocks back, each cluster healthy again.
//!
//! | fault | what it does | inverse |
//! |---|---|---|
//! | `kill` | SIGKILL the node's process group | start it again (same data) |
//! | `pause` | SIGSTOP | SIGCONT |
//! | `partition` | cut the node-to-node links between the targets and the rest | heal |
//! | `isolate` | cut the targets from their peers and from clients | heal |
//! | `delay` | hold every byte to and from the targets for 100 ms | heal |
//! | `clock` | move the targets' wall clocks 30 s ahead (Redlock nodes, under the clock shim) | set them back |
//! | `failover` | kill the Redis primary, promote its replica, send clients to it | restart the old primary as a replica |
//! | `power-loss` | SIGKILL the node and cut the power under its data directory: every write it had not synced is lost (local target, `dlbench-faultfs`) | mount the directory again (what was durable), restart |
//!
//! Targets: `random` (one node, the default), `leader` (etcd, ZooKeeper; others fall back
//! to random), `follower` (a node that does not lead), `minority`, `majority`, `all`;
//! written `kill:leader`.

pub mod clock;
mod faults;
pub mod net;
pub mod nfdelay;
pub mod procnet;

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::history::{HistoryWriter, Record};
use crate::kind::BackendKind;
pub use faults::{capabilities, Faults, NodeRef};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    Kill,
    Pause,
    Partition,
    Isolate,
    Delay,
    Clock,
    Failover,
    #[serde(rename = "power-loss")]
    PowerLoss,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Targeting {
    Random,
    Leader,
    /// A random node that does not lead.
    Follower,
    Minority,
    Majority,
    All,
}

/// One fault of a schedule, as written on the command line (`kill:leader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub target: Targeting,
}

impl std::fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = serde_json::to_value(self.kind).unwrap();
        let t = serde_json::to_value(self.target).unwrap();
        if self.target == Targeting::Random {
            write!(f, "{}", k.as_str().unwrap())
        } else {
            write!(f, "{}:{}", k.as_str().unwrap(), t.as_str().unwrap())
        }
    }
}

impl FromStr for FaultSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (k, t) = s.split_once(':').unwrap_or((s, "random"));
        let kind = match k.trim() {
            "kill" => FaultKind::Kill,
            "pause" => FaultKind::Pause,
            "partition" => FaultKind::Partition,
            "isolate" => FaultKind::Isolate,
            "delay" => FaultKind::Delay,
            "clock" => FaultKind::Clock,
            "failover" => FaultKind::Failover,
            "power-loss" => FaultKind::PowerLoss,
            other => {
                return Err(format!(
                    "unknown fault {other:?}: use kill, pause, partition, isolate, delay, clock, failover or power-loss"
                ))
            }
        };
        let target = match t.trim() {
            "random" => Targeting::Random,
            "leader" => Targeting::Leader,
            "follower" => Targeting::Follower,
            "minority" => Targeting::Minority,
            "majority" => Targeting::Majority,
            "all" => Targeting::All,
            other => return Err(format!("unknown target {other:?} in {s:?}: use random, leader, follower, minority, majority or all")),
        };
        Ok(FaultSpec { kind, target })
    }
}

/// Parse `kill,pause:leader,partition`.
pub fn parse_schedule(s: &str) -> Result<Vec<FaultSpec>, String> {
    s.split(',').filter(|x| !x.trim().is_empty()).map(str::parse).collect()
}

/// A fault starting or ending, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NemesisEvent {
    pub backend: String,
    pub workload: String,
    pub f: String,
    /// `start` or `end`.
    pub phase: String,
    pub targets: Vec<String>,
    /// Milliseconds since the phase started.
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A record of a fault shown to have done nothing: an end whose probe found the network
/// unharmed ("checked: NOT dropped ...", "checked: NOT held ..."), a start whose check found
/// the node untouched ("checked: NOT in effect: ..."), or a start refused as having nothing
/// to act on ("no effect: ...").
pub fn no_effect(detail: &str) -> bool {
    detail.starts_with("checked: NOT") || detail.contains("; checked: NOT") || detail.starts_with("no effect")
}

/// Each fault start of `events` with the end that heals it (the next end of the same fault
/// on the same targets), or None when it was never healed.
fn starts_and_heals(events: &[NemesisEvent]) -> impl Iterator<Item = (&NemesisEvent, Option<&NemesisEvent>)> {
    events.iter().enumerate().filter(|(_, e)| e.phase == "start").map(|(i, e)| {
        (e, events[i + 1..].iter().find(|x| x.f == e.f && x.phase == "end" && x.targets == e.targets))
    })
}

/// The faults of `events` that took effect, as (fault, start ms, heal ms or None when never
/// healed): a start its own check showed doing nothing, or whose heal's probe did, opens no
/// window (as [`effects`] counts them).
pub fn took_effect_spans(events: &[NemesisEvent]) -> Vec<(&str, u64, Option<u64>)> {
    starts_and_heals(events)
        .filter(|(e, end)| !no_effect(&e.detail) && !end.is_some_and(|x| no_effect(&x.detail)))
        .map(|(e, end)| (e.f.as_str(), e.at_ms, end.map(|x| x.at_ms)))
        .collect()
}

/// Which fault starts of `events` took effect, by name, and which were shown to do nothing:
/// a start counts unless its own check, or the probe in the end that heals it, found it had
/// no effect ([`no_effect`]).
pub fn effects(events: &[NemesisEvent], counts: impl Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let (mut took, mut none) = (Vec::<String>::new(), Vec::<String>::new());
    for (e, end) in starts_and_heals(events) {
        if !counts(&e.f) {
            continue;
        }
        let list = if no_effect(&e.detail) || end.is_some_and(|x| no_effect(&x.detail)) { &mut none } else { &mut took };
        if !list.contains(&e.f) {
            list.push(e.f.clone());
        }
    }
    // Refused as having nothing to act on (a partition of one node): no effect, not skipped.
    for e in events.iter().filter(|e| e.phase == "skipped" && no_effect(&e.detail) && counts(&e.f)) {
        if !none.contains(&e.f) {
            none.push(e.f.clone());
        }
    }
    none.retain(|f| !took.contains(f));
    (took, none)
}

/// A fault in force and how to undo it.
pub struct ActiveFault {
    pub spec: FaultSpec,
    pub nodes: Vec<NodeRef>,
    /// For a failover: (old primary, new primary).
    failover: Option<(NodeRef, NodeRef)>,
    /// The target's probe of a network fault, running while it holds (see
    /// [`Faults::evidence`]); its answer goes into the end record.
    probe: Option<tokio::task::JoinHandle<Option<String>>>,
}

/// Applies faults to one backend's nodes through a target's [`Faults`], recording each.
pub struct Nemesis {
    pub target: Arc<dyn Faults>,
    pub backend: BackendKind,
    workload: String,
    epoch: Instant,
    history: Option<HistoryWriter>,
    events: Mutex<Vec<NemesisEvent>>,
}

/// How far a `clock` fault moves a clock, and how much a `delay` fault holds.
pub const CLOCK_JUMP_MS: i64 = 30_000;
pub const DELAY: Duration = Duration::from_millis(100);

impl Nemesis {
    pub fn new(target: Arc<dyn Faults>, backend: BackendKind, workload: &str, epoch: Instant, history: Option<HistoryWriter>) -> Self {
        Nemesis { target, backend, workload: workload.into(), epoch, history, events: Mutex::default() }
    }

    pub fn events(&self) -> Vec<NemesisEvent> {
        self.events.lock().unwrap().clone()
    }

    fn record(&self, f: &str, phase: &str, nodes: &[NodeRef], detail: String) {
        let ns = self.epoch.elapsed().as_nanos() as u64;
        let targets: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        tracing::info!("nemesis {f} {phase} {targets:?} {detail}");
        if let Some(h) = &self.history {
            h.record(&Record::Nemesis { f: f.into(), phase: phase.into(), targets: targets.clone(), ns, detail: detail.clone() });
        }
        self.events.lock().unwrap().push(NemesisEvent {
            backend: self.backend.name().into(),
            workload: self.workload.clone(),
            f: f.into(),
            phase: phase.into(),
            targets,
            at_ms: ns / 1_000_000,
            detail,
        });
    }

    async fn pick(&self, t: Targeting) -> Vec<NodeRef> {
        let mut nodes = self.target.nodes(self.backend);
        nodes.shuffle(&mut rand::rng());
        let n = nodes.len();
        match t {
            Targeting::Leader => match self.target.leader(self.backend).await {
                Some(l) => vec![l],
                None => nodes.into_iter().take(1).collect(),
            },
            Targeting::Follower => {
                let leader = self.target.leader(self.backend).await.map(|l| l.index);
                nodes.into_iter().filter(|n| Some(n.index) != leader).take(1).collect()
            }
            Targeting::Random => nodes.into_iter().take(1).collect(),
            Targeting::Minority => nodes.into_iter().take(((n.max(1) - 1) / 2).max(1)).collect(),
            Targeting::Majority => nodes.into_iter().take(n / 2 + 1).collect(),
            Targeting::All => nodes,
        }
    }

    /// Start a fault. Faults the target cannot inject on this backend say so in the error.
    pub async fn start(&self, spec: FaultSpec) -> Result<ActiveFault, String> {
        if let Some(why) = self.target.cannot(self.backend, spec.kind) {
            return Err(why);
        }
        let all = self.target.nodes(self.backend);
        let mut fault = ActiveFault { spec, nodes: Vec::new(), failover: None, probe: None };
        let name = spec.to_string();
        let mut detail = String::new();
        match spec.kind {
            FaultKind::Kill | FaultKind::Pause | FaultKind::PowerLoss => {
                fault.nodes = self.pick(spec.target).await;
                for n in &fault.nodes {
                    match spec.kind {
                        FaultKind::Kill => self.target.kill(n).await?,
                        FaultKind::Pause => self.target.pause(n).await?,
                        _ => self.target.power_loss(n).await?,
                    }
                }
                detail = self.observed(spec.kind, &fault.nodes).await;
            }
            FaultKind::Partition | FaultKind::Isolate => {
                if let (FaultKind::Partition, Some(why)) = (spec.kind, self.backend.nothing_to_partition()) {
                    return Err(format!("no effect: {why}"));
                }
                fault.nodes = self.pick(spec.target).await;
                let rest: Vec<NodeRef> = all.iter().filter(|n| !fault.nodes.contains(n)).cloned().collect();
                if rest.is_empty() && spec.kind == FaultKind::Partition {
                    return Err("no effect: no other node to cut the targets off from".into());
                }
                self.target.cut(&fault.nodes, &rest, spec.kind == FaultKind::Isolate).await?;
            }
            FaultKind::Delay => {
                fault.nodes = self.pick(spec.target).await;
                self.target.slow(&fault.nodes, DELAY).await?;
                detail = format!("{} ms", DELAY.as_millis());
            }
            FaultKind::Clock => {
                fault.nodes = self.pick(spec.target).await;
                for n in &fault.nodes {
                    self.target.shift_clock(n, CLOCK_JUMP_MS).await?;
                }
                detail = format!("+{CLOCK_JUMP_MS} ms{}", self.observed(spec.kind, &fault.nodes).await.replacen("checked:", "; checked:", 1));
            }
            FaultKind::Failover => {
                let (old, new) = self.target.failover(self.backend).await?;
                detail = format!("promoted {}{}", new.name, self.observed(spec.kind, std::slice::from_ref(&new)).await.replacen("checked:", "; checked:", 1));
                fault.nodes = vec![old.clone()];
                fault.failover = Some((old, new));
            }
        }
        self.record(&name, "start", &fault.nodes, detail);
        if matches!(spec.kind, FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay) {
            let (target, kind, nodes) = (self.target.clone(), spec.kind, fault.nodes.clone());
            let rest: Vec<NodeRef> = all.into_iter().filter(|n| !nodes.contains(n)).collect();
            fault.probe = Some(tokio::spawn(async move { target.evidence(kind, &nodes, &rest, DELAY).await }));
        }
        Ok(fault)
    }

    /// What the target saw of a node fault on `nodes`, as "checked: ..." for the start
    /// record ("checked: NOT ..." when any node shows it did nothing), or empty.
    async fn observed(&self, kind: FaultKind, nodes: &[NodeRef]) -> String {
        let mut seen = Vec::new();
        for n in nodes {
            if let Some(e) = self.target.observe(kind, n).await {
                seen.push((n.name.clone(), e));
            }
        }
        if seen.is_empty() {
            return String::new();
        }
        let not = seen.iter().any(|(_, e)| e.starts_with("NOT"));
        let list = seen.iter().map(|(n, e)| format!("{n} {e}")).collect::<Vec<_>>().join(", ");
        if not { format!("checked: NOT in effect: {list}") } else { format!("checked: {list}") }
    }

    /// Undo a fault.
    pub async fn end(&self, mut fault: ActiveFault) -> Result<(), String> {
        let name = fault.spec.to_string();
        // The probe finishes while the fault still holds (it is bounded by its own timeouts).
        let checked = match fault.probe.take() {
            Some(p) => p.await.ok().flatten().map(|e| format!("checked: {e}")).unwrap_or_default(),
            None => String::new(),
        };
        match fault.spec.kind {
            // A power loss's inverse, the remount, comes with the start (the node's layer).
            FaultKind::Kill | FaultKind::PowerLoss => {
                for n in &fault.nodes {
                    self.target.start(n).await?;
                }
            }
            FaultKind::Pause => {
                for n in &fault.nodes {
                    self.target.resume(n).await?;
                }
            }
            FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay => self.target.heal_network().await?,
            FaultKind::Clock => {
                for n in &fault.nodes {
                    self.target.shift_clock(n, 0).await?;
                }
            }
            FaultKind::Failover => {
                if let Some((old, new)) = &fault.failover {
                    self.target.undo_failover(old, new).await?;
                }
            }
        }
        self.record(&name, "end", &fault.nodes, checked);
        Ok(())
    }

    /// Put everything of this backend back and wait until the cluster is healthy.
    pub async fn heal_all(&self) -> Result<(), String> {
        self.target.heal_all(self.backend).await
    }

    /// Run `schedule` round-robin until `stop`: every `interval`, start the next fault and
    /// end it half an interval later. Ends healed.
    pub async fn run(&self, schedule: &[FaultSpec], interval: Duration, stop: tokio_util::sync::CancellationToken) -> Result<(), String> {
        let mut i = 0;
        let quiet = interval / 2;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(quiet) => {}
                _ = stop.cancelled() => break,
            }
            let spec = schedule[i % schedule.len()];
            i += 1;
            let fault = match self.start(spec).await {
                Ok(f) => f,
                Err(e) => {
                    if !no_effect(&e) {
                        tracing::warn!("nemesis: {spec} on {}: {e}", self.backend);
                    }
                    self.record(&spec.to_string(), "skipped", &[], e);
                    continue;
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(interval - quiet) => {}
                _ = stop.cancelled() => {}
            }
            self.end(fault).await?;
            if stop.is_cancelled() {
                break;
            }
        }
        self.heal_all().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(f: &str, phase: &str, detail: &str) -> NemesisEvent {
        NemesisEvent { backend: "etcd".into(), workload: "w".into(), f: f.into(), phase: phase.into(), targets: vec!["etcd-1".into()], at_ms: 0, detail: detail.into() }
    }

    /// A fault counts as applied only with evidence: a start whose check found the node
    /// untouched, an end whose probe found the network unharmed, and a start refused as
    /// having nothing to act on are "no effect"; one effective start of a name outweighs
    /// an ineffective one.
    #[test]
    fn only_faults_with_evidence_count_as_applied() {
        let events = vec![
            ev("kill", "start", "checked: etcd-1 process gone"),
            ev("kill", "end", ""),
            ev("pause", "start", "checked: NOT in effect: etcd-1 stopped"),
            ev("pause", "end", ""),
            ev("partition", "start", ""),
            ev("partition", "end", "checked: NOT dropped: the probe got through"),
            ev("clock", "start", "+30000 ms; checked: NOT in effect: redis-1 moved: the server's TIME is +0 s off"),
            ev("clock", "end", ""),
            ev("isolate", "skipped", "no effect: nothing to cut"),
            ev("delay", "start", ""),
            ev("delay", "end", "checked: held 100 ms"),
        ];
        let (took, none) = effects(&events, |_| true);
        assert_eq!(took, vec!["kill", "delay"]);
        assert_eq!(none, vec!["pause", "partition", "clock", "isolate"]);
        let mut again = events.clone();
        again.push(ev("pause", "start", "checked: etcd-1 pid 7 stopped (state T)"));
        assert!(effects(&again, |_| true).0.contains(&"pause".to_string()));
    }
}
