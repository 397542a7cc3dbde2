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

use crate::faultlog::{Effect, Mark, NemesisEvent, Side};
use crate::history::{HistoryWriter, Record};
use crate::kind::BackendKind;
pub use faults::{capabilities, skipped_where, Faults, NodeRef};

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

impl FaultKind {
    /// The name a schedule writes (`kill`, `power-loss`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Isolate => "isolate",
            FaultKind::Delay => "delay",
            FaultKind::Clock => "clock",
            FaultKind::Failover => "failover",
            FaultKind::PowerLoss => "power-loss",
        }
    }
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

/// Every fault by the name the command line gives it, in the order help and errors list
/// them: the one list the parser accepts, so `run --help` cannot drift from it.
pub const FAULT_NAMES: &[(&str, FaultKind)] = &[
    ("kill", FaultKind::Kill),
    ("pause", FaultKind::Pause),
    ("partition", FaultKind::Partition),
    ("isolate", FaultKind::Isolate),
    ("delay", FaultKind::Delay),
    ("clock", FaultKind::Clock),
    ("failover", FaultKind::Failover),
    ("power-loss", FaultKind::PowerLoss),
];

/// Every target by its name after the colon (`kill:leader`), the default first.
pub const TARGET_NAMES: &[(&str, Targeting)] = &[
    ("random", Targeting::Random),
    ("leader", Targeting::Leader),
    ("follower", Targeting::Follower),
    ("minority", Targeting::Minority),
    ("majority", Targeting::Majority),
    ("all", Targeting::All),
];

/// `a, b, c or d`, for help and errors.
pub fn either<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_string()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

impl FromStr for FaultSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (k, t) = s.split_once(':').unwrap_or((s, "random"));
        let Some(&(_, kind)) = FAULT_NAMES.iter().find(|(n, _)| *n == k.trim()) else {
            return Err(format!("unknown fault {:?}: use {}", k.trim(), either(FAULT_NAMES.iter().map(|f| f.0))));
        };
        let Some(&(_, target)) = TARGET_NAMES.iter().find(|(n, _)| *n == t.trim()) else {
            return Err(format!("unknown target {:?} in {s:?}: use {}", t.trim(), either(TARGET_NAMES.iter().map(|f| f.0))));
        };
        Ok(FaultSpec { kind, target })
    }
}

/// Parse `kill,pause:leader,partition`.
pub fn parse_schedule(s: &str) -> Result<Vec<FaultSpec>, String> {
    s.split(',').filter(|x| !x.trim().is_empty()).map(str::parse).collect()
}

/// A fault in force and how to undo it.
pub struct ActiveFault {
    pub spec: FaultSpec,
    pub nodes: Vec<NodeRef>,
    /// For a failover: (old primary, new primary).
    failover: Option<(NodeRef, NodeRef)>,
    /// The target's probe of a network fault, running while it holds (see
    /// [`Faults::evidence`]); its answer goes into the end record.
    probe: Option<tokio::task::JoinHandle<Option<Effect>>>,
    /// The node hit in place of the one the spec names, and why.
    stand_in: Option<String>,
}

/// Applies faults to one backend's nodes through a target's [`Faults`], recording each.
pub struct Nemesis {
    pub target: Arc<dyn Faults>,
    pub backend: BackendKind,
    /// The TTL the phase's locks ask for: for NATS it names the bucket whose stream leader
    /// `:leader` and `:follower` are told from.
    lock_ttl: Duration,
    workload: String,
    epoch: Instant,
    history: Option<HistoryWriter>,
    events: Mutex<Vec<NemesisEvent>>,
}

/// How far past the phase's fault stop a fault may run, at most, rather than be dropped.
const START_SLACK: Duration = Duration::from_secs(1);

/// How far a `clock` fault moves a clock, and how much a `delay` fault holds.
pub const CLOCK_JUMP_MS: i64 = 30_000;
pub const DELAY: Duration = Duration::from_millis(100);

/// Which nodes a fault's target picks on a backend, and the stand-in's note where the target
/// means nothing there ("redlock-2: Redlock has no leader").
pub struct Aim {
    pub nodes: Vec<NodeRef>,
    pub stand_in: Option<String>,
}

/// Why a fault's target has no meaning on a backend, known before anything starts (so a
/// run over that backend alone refuses it): a leader where nothing leads, a follower where
/// one node serves.
pub fn meaningless(t: Targeting, kind: BackendKind, nodes: usize) -> Option<String> {
    match t {
        Targeting::Leader if !kind.has_leader() => Some(format!("{kind} has no leader ({})", kind.why_no_leader())),
        Targeting::Follower if nodes < 2 => Some(format!("{kind} runs on one node, so it has no follower")),
        Targeting::Follower if !kind.has_leader() => Some(format!("{kind} has no leader, so no follower either ({})", kind.why_no_leader())),
        _ => None,
    }
}

impl Nemesis {
    pub fn new(target: Arc<dyn Faults>, backend: BackendKind, lock_ttl: Duration, workload: &str, epoch: Instant, history: Option<HistoryWriter>) -> Self {
        Nemesis { target, backend, lock_ttl, workload: workload.into(), epoch, history, events: Mutex::default() }
    }

    pub fn events(&self) -> Vec<NemesisEvent> {
        self.events.lock().unwrap().clone()
    }

    fn record(&self, f: &str, mark: Mark, nodes: &[NodeRef], detail: String, effect: Effect, stand_in: Option<String>) {
        let ns = self.epoch.elapsed().as_nanos() as u64;
        let targets: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        tracing::info!("nemesis {f} {mark:?} {targets:?} {detail} {effect:?}");
        let side = Some(Side::Servers);
        if let Some(h) = &self.history {
            h.record(&Record::Nemesis {
                f: f.into(),
                phase: mark,
                targets: targets.clone(),
                ns,
                detail: detail.clone(),
                effect: Some(effect.clone()),
                side,
                stand_in: stand_in.clone(),
            });
        }
        self.events.lock().unwrap().push(NemesisEvent {
            backend: self.backend.name().into(),
            workload: self.workload.clone(),
            f: f.into(),
            phase: mark,
            targets,
            at_ms: ns / 1_000_000,
            detail,
            effect: Some(effect),
            side,
            stand_in,
        });
    }

    /// The nodes `t` picks. A leader or follower that cannot be found, or that the backend
    /// does not have, is stood in for by a random node, and the aim says so: a label never
    /// claims a leader was hit when it was not.
    async fn pick(&self, t: Targeting) -> Aim {
        let mut nodes = self.target.nodes(self.backend);
        nodes.shuffle(&mut rand::rng());
        let n = nodes.len();
        let random = |nodes: Vec<NodeRef>, why: String| {
            let node: Vec<NodeRef> = nodes.into_iter().take(1).collect();
            let stand_in = node.first().map(|x| format!("{}: {why}", x.name));
            Aim { nodes: node, stand_in }
        };
        let plain = |nodes: Vec<NodeRef>| Aim { nodes, stand_in: None };
        if let Some(why) = meaningless(t, self.backend, n) {
            return random(nodes, why);
        }
        match t {
            // The one server of a single-node design is what a leader fault means there.
            Targeting::Leader if self.backend.single_node() => plain(nodes.into_iter().take(1).collect()),
            Targeting::Leader => match self.target.leader(self.backend, self.lock_ttl).await {
                Some(l) => plain(vec![l]),
                None => random(nodes, "no leader found (random node)".into()),
            },
            Targeting::Follower => match self.target.leader(self.backend, self.lock_ttl).await.map(|l| l.index) {
                Some(leader) => plain(nodes.into_iter().filter(|n| n.index != leader).take(1).collect()),
                None => random(nodes, "no leader found (random node)".into()),
            },
            Targeting::Random => plain(nodes.into_iter().take(1).collect()),
            Targeting::Minority => plain(nodes.into_iter().take(((n.max(1) - 1) / 2).max(1)).collect()),
            Targeting::Majority => plain(nodes.into_iter().take(n / 2 + 1).collect()),
            Targeting::All => plain(nodes),
        }
    }

    /// Start a fault. Faults the target cannot inject on this backend say so in the error;
    /// one with nothing to act on says so as its effect (`Err` with a `NoEffect`).
    pub async fn start(&self, spec: FaultSpec) -> Result<ActiveFault, (String, Effect)> {
        if let Some(why) = self.target.cannot(self.backend, spec.kind) {
            return Err((why.clone(), Effect::unchecked(why)));
        }
        let failed = |e: String| (e.clone(), Effect::unchecked(e));
        let all = self.target.nodes(self.backend);
        let mut fault = ActiveFault { spec, nodes: Vec::new(), failover: None, probe: None, stand_in: None };
        let name = spec.to_string();
        let mut detail = String::new();
        let effect;
        match spec.kind {
            FaultKind::Kill | FaultKind::Pause | FaultKind::PowerLoss => {
                let aim = self.pick(spec.target).await;
                (fault.nodes, fault.stand_in) = (aim.nodes, aim.stand_in);
                for n in &fault.nodes {
                    match spec.kind {
                        FaultKind::Kill => self.target.kill(n).await.map_err(failed)?,
                        FaultKind::Pause => self.target.pause(n).await.map_err(failed)?,
                        _ => self.target.power_loss(n).await.map_err(failed)?,
                    }
                }
                effect = self.observed(spec.kind, &fault.nodes).await;
            }
            FaultKind::Partition | FaultKind::Isolate => {
                if let (FaultKind::Partition, Some(why)) = (spec.kind, self.backend.nothing_to_partition()) {
                    return Err((format!("no effect: {why}"), Effect::none(why)));
                }
                let aim = self.pick(spec.target).await;
                (fault.nodes, fault.stand_in) = (aim.nodes, aim.stand_in);
                let rest: Vec<NodeRef> = all.iter().filter(|n| !fault.nodes.contains(n)).cloned().collect();
                if rest.is_empty() && spec.kind == FaultKind::Partition {
                    let why = "no other node to cut the targets off from";
                    return Err((format!("no effect: {why}"), Effect::none(why)));
                }
                self.target.cut(&fault.nodes, &rest, spec.kind == FaultKind::Isolate).await.map_err(failed)?;
                effect = Effect::unchecked("judged when it heals (what the cut held back)");
            }
            FaultKind::Delay => {
                let aim = self.pick(spec.target).await;
                (fault.nodes, fault.stand_in) = (aim.nodes, aim.stand_in);
                self.target.slow(&fault.nodes, DELAY).await.map_err(failed)?;
                detail = format!("{} ms", DELAY.as_millis());
                effect = Effect::unchecked("judged when it heals (what the delay held)");
            }
            FaultKind::Clock => {
                let aim = self.pick(spec.target).await;
                (fault.nodes, fault.stand_in) = (aim.nodes, aim.stand_in);
                for n in &fault.nodes {
                    self.target.shift_clock(n, CLOCK_JUMP_MS).await.map_err(failed)?;
                }
                detail = format!("+{CLOCK_JUMP_MS} ms");
                effect = self.observed(spec.kind, &fault.nodes).await;
            }
            FaultKind::Failover => {
                let (old, new) = self.target.failover(self.backend).await.map_err(failed)?;
                detail = format!("promoted {}", new.name);
                effect = self.observed(spec.kind, std::slice::from_ref(&new)).await;
                fault.nodes = vec![old.clone()];
                fault.failover = Some((old, new));
            }
        }
        let detail = [detail, effect.detail()].into_iter().filter(|d| !d.is_empty()).collect::<Vec<_>>().join("; ");
        self.record(&name, Mark::Start, &fault.nodes, detail, effect, fault.stand_in.clone());
        if matches!(spec.kind, FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay) {
            let (target, kind, nodes) = (self.target.clone(), spec.kind, fault.nodes.clone());
            let rest: Vec<NodeRef> = all.into_iter().filter(|n| !nodes.contains(n)).collect();
            fault.probe = Some(tokio::spawn(async move { target.evidence(kind, &nodes, &rest, DELAY).await }));
        }
        Ok(fault)
    }

    /// What the target saw of a node fault on `nodes`: confirmed when every node shows it,
    /// no effect when any node shows it did nothing, unchecked where the target cannot tell.
    async fn observed(&self, kind: FaultKind, nodes: &[NodeRef]) -> Effect {
        let mut seen = Vec::new();
        for n in nodes {
            match self.target.observe(kind, n).await {
                Some(e) => seen.push((n.name.clone(), e)),
                None => return Effect::unchecked(format!("the target cannot tell whether {} took effect on {}", kind.name(), n.name)),
            }
        }
        if seen.is_empty() {
            return Effect::unchecked("no node was hit");
        }
        let words = |e: &Effect| match e {
            Effect::Confirmed { what } => what.clone(),
            Effect::NoEffect { why } | Effect::Unchecked { why } => why.clone(),
        };
        let list = |pick: &dyn Fn(&Effect) -> bool| {
            seen.iter().filter(|(_, e)| pick(e)).map(|(n, e)| format!("{n} {}", words(e))).collect::<Vec<_>>().join(", ")
        };
        if seen.iter().any(|(_, e)| e.is_none()) {
            Effect::none(format!("NOT in effect: {}", list(&|e| e.is_none())))
        } else if seen.iter().all(|(_, e)| e.is_confirmed()) {
            Effect::confirmed(list(&|_| true))
        } else {
            Effect::unchecked(list(&|e| !e.is_confirmed()))
        }
    }

    /// Undo a fault.
    pub async fn end(&self, mut fault: ActiveFault) -> Result<(), String> {
        let name = fault.spec.to_string();
        // The probe finishes while the fault still holds (it is bounded by its own timeouts).
        let effect = match fault.probe.take() {
            Some(p) => p.await.ok().flatten().unwrap_or_else(|| Effect::unchecked("the target has no probe of this fault")),
            None => Effect::unchecked("judged at its start"),
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
        // A start's own check stands for the whole fault; an end carries only a probe's.
        let (detail, effect) = match (fault.spec.kind, effect) {
            (FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay, e) => (e.detail(), e),
            (_, e) => (String::new(), e),
        };
        self.record(&name, Mark::End, &fault.nodes, detail, effect, fault.stand_in.take());
        Ok(())
    }

    /// Put everything of this backend back and wait until the cluster is healthy.
    pub async fn heal_all(&self) -> Result<(), String> {
        self.target.heal_all(self.backend).await
    }

    /// Run `schedule` round-robin until `stop`: half an interval of quiet, then the next fault
    /// for half an interval, then its heal and at least `room` of quiet (the time the backend
    /// needs to grant again: its election and the TTL it grants), so that each fault is
    /// judged in a window of its own and its recovery is not blamed on the next. Ends healed.
    /// Faults start only while each can hold its full time before `until` (when `stop` is
    /// due to fire): a fault cut short by the phase's end would be a different fault.
    pub async fn run(&self, schedule: &[FaultSpec], interval: Duration, room: Duration, stop: tokio_util::sync::CancellationToken, until: Instant) -> Result<(), String> {
        let mut i = 0;
        let hold = interval / 2;
        let mut quiet = interval - hold;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(quiet) => {}
                _ = stop.cancelled() => break,
            }
            quiet = (interval - hold).max(room);
            // The plan fits each fault with its room; the starts and heals themselves take
            // time (a restart waits for health), so allow a little past the plan rather than
            // drop the last fault it promised.
            if Instant::now() + hold > until + START_SLACK {
                break;
            }
            let spec = schedule[i % schedule.len()];
            i += 1;
            let fault = match self.start(spec).await {
                Ok(f) => f,
                Err((e, effect)) => {
                    if !effect.is_none() {
                        tracing::warn!("nemesis: {spec} on {}: {e}", self.backend);
                    }
                    self.record(&spec.to_string(), Mark::Skipped, &[], e, effect, None);
                    continue;
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(hold) => {}
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
