//! What a target offers the nemesis: its nodes, and how to break and mend them.
//!
//! The local target does it with process signals, its TCP proxies and the clock shim; the
//! compose target with `docker kill/start/pause/unpause` and `docker network
//! disconnect/connect`; an external target with the commands its endpoints file names. A
//! fault a target cannot inject is refused up front with the reason.

use std::time::Duration;

use async_trait::async_trait;

use super::FaultKind;
use crate::faultlog::Effect;
use crate::kind::BackendKind;

/// A node as the nemesis sees it: an index unique within the target, and a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub index: usize,
    pub name: String,
}

fn unsupported(what: &str) -> Result<(), String> {
    Err(format!("this target cannot {what}"))
}

#[async_trait]
pub trait Faults: Send + Sync {
    /// The backend's client-facing nodes.
    fn nodes(&self, kind: BackendKind) -> Vec<NodeRef>;
    /// Why `fault` cannot be injected on `kind`, if it cannot.
    fn cannot(&self, kind: BackendKind, fault: FaultKind) -> Option<String>;
    /// The node that leads `kind`'s cluster, if it has one and it answers. NATS keeps a
    /// bucket per lock TTL, each a stream with a leader of its own: `lock_ttl` (the TTL the
    /// locks of the phase ask for) names the one the locks go through.
    async fn leader(&self, kind: BackendKind, lock_ttl: Duration) -> Option<NodeRef>;
    async fn kill(&self, n: &NodeRef) -> Result<(), String>;
    async fn start(&self, n: &NodeRef) -> Result<(), String>;
    /// SIGKILL and cut the power under the node's data: its unsynced writes are lost. Its
    /// inverse is `start` (which mounts the data again first). Only the local target has it.
    async fn power_loss(&self, n: &NodeRef) -> Result<(), String> {
        Err(format!("{}: power loss needs the local target", n.name))
    }
    async fn pause(&self, n: &NodeRef) -> Result<(), String>;
    async fn resume(&self, n: &NodeRef) -> Result<(), String>;
    /// Cut `targets` off from `rest`; with `isolate`, from clients too.
    async fn cut(&self, targets: &[NodeRef], rest: &[NodeRef], isolate: bool) -> Result<(), String>;
    async fn slow(&self, _targets: &[NodeRef], _d: Duration) -> Result<(), String> {
        unsupported("delay traffic")
    }
    async fn heal_network(&self) -> Result<(), String>;
    async fn shift_clock(&self, _n: &NodeRef, _ms: i64) -> Result<(), String> {
        unsupported("move a clock")
    }
    /// Kill the primary, promote the replica, send clients to it: (old, new).
    async fn failover(&self, _kind: BackendKind) -> Result<(NodeRef, NodeRef), String> {
        unsupported("fail over").map(|_| unreachable!())
    }
    async fn undo_failover(&self, _old: &NodeRef, _new: &NodeRef) -> Result<(), String> {
        unsupported("fail back")
    }
    /// Whether a network fault now in force does what it says, seen from outside it: traffic
    /// the cut or the delay really held back (a proxy's count, a probe through it, the
    /// servers' own view), as the fault's effect (`NoEffect` when nothing was held). None
    /// where the target has no such probe (the fault is then unchecked, never applied).
    /// Runs while the fault holds, beside the workload, and returns before it is healed.
    async fn evidence(&self, _kind: FaultKind, _targets: &[NodeRef], _rest: &[NodeRef], _d: Duration) -> Option<Effect> {
        None
    }
    /// Evidence that a node fault now in force took effect on `n`, for its start record:
    /// "process gone", "pid 4242 stopped (state T)", "clock +30 s by the server's TIME",
    /// "role:master" (`Confirmed`); `NoEffect` when it shows the fault did nothing (the fault
    /// then never counts as applied). None where the target cannot tell.
    async fn observe(&self, _kind: FaultKind, _n: &NodeRef) -> Option<Effect> {
        None
    }
    /// Everything of `kind` back (running, resumed, connected, clocks back), then healthy.
    async fn heal_all(&self, kind: BackendKind) -> Result<(), String>;
}

/// Which of the faults a target can inject on `kinds`, for the message a run prints: the
/// faults it can inject on at least one of them, and of the faults `asked` those it can
/// inject on none, each with the reason (a fault nobody asked for is no news).
pub fn capabilities(f: &dyn Faults, kinds: &[BackendKind], asked: &[FaultKind]) -> (Vec<String>, Vec<String>) {
    let (mut can, mut cannot) = (Vec::new(), Vec::new());
    for &(name, k) in super::FAULT_NAMES {
        let reasons: Vec<String> = kinds.iter().filter_map(|b| f.cannot(*b, k).map(|r| format!("{b}: {r}"))).collect();
        if reasons.len() < kinds.len() {
            can.push(name.to_string());
        } else if asked.contains(&k) {
            cannot.push(format!("{name} ({})", reasons.first().cloned().unwrap_or_default()));
        }
    }
    (can, cannot)
}

/// The faults asked for that some (not all) of `kinds` will skip, one line per fault and
/// reason: "partition is skipped on redis, postgres: it runs on one server, with no link
/// between nodes to cut". The same skips the nemesis records (`Nemesis::start`), said
/// before the run rather than only in summary.json and the page.
pub fn skipped_where(f: &dyn Faults, kinds: &[BackendKind], asked: &[FaultKind]) -> Vec<String> {
    let mut lines = Vec::new();
    for &(name, k) in super::FAULT_NAMES.iter().filter(|(_, k)| asked.contains(k)) {
        let why = |b: BackendKind| {
            f.cannot(b, k).or_else(|| (k == FaultKind::Partition).then(|| b.nothing_to_partition().map(str::to_string)).flatten())
        };
        let skips: Vec<(BackendKind, String)> = kinds.iter().filter_map(|b| why(*b).map(|w| (*b, w))).collect();
        if skips.len() == kinds.len() {
            continue; // Injected nowhere: refused, or listed as cannot inject.
        }
        let mut reasons: Vec<&String> = skips.iter().map(|s| &s.1).collect();
        reasons.dedup();
        for r in reasons {
            let on: Vec<String> = skips.iter().filter(|s| &s.1 == r).map(|s| s.0.to_string()).collect();
            lines.push(format!("{name} is skipped on {}: {r}", on.join(", ")));
        }
    }
    lines
}
