//! What a target offers the nemesis: its nodes, and how to break and mend them.
//!
//! The local target does it with process signals, its TCP proxies and the clock shim; the
//! compose target with `docker kill/start/pause/unpause` and `docker network
//! disconnect/connect`; an external target with the commands its endpoints file names. A
//! fault a target cannot inject is refused up front with the reason.

use std::time::Duration;

use async_trait::async_trait;

use super::FaultKind;
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
    /// The node that leads `kind`'s cluster, if it has one and it answers.
    async fn leader(&self, kind: BackendKind) -> Option<NodeRef>;
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
    /// Whether a network fault now in force does what it says, seen from outside it: a probe
    /// through the cut or the delay, described for the fault's end record ("dropped ...",
    /// "held ..."; "NOT ..." when the probe got through unharmed). None where the target
    /// has no such probe. Runs while the fault holds, beside the workload.
    async fn evidence(&self, _kind: FaultKind, _targets: &[NodeRef], _rest: &[NodeRef], _d: Duration) -> Option<String> {
        None
    }
    /// Evidence that a node fault now in force took effect on `n`, for its start record:
    /// "process gone", "pid 4242 stopped (state T)", "clock +30.0 s by the server's TIME",
    /// "role:master"; "NOT ..." when it shows the fault did nothing (the fault then counts as
    /// no effect, never as applied). None where the target cannot tell.
    async fn observe(&self, _kind: FaultKind, _n: &NodeRef) -> Option<String> {
        None
    }
    /// Everything of `kind` back (running, resumed, connected, clocks back), then healthy.
    async fn heal_all(&self, kind: BackendKind) -> Result<(), String>;
}

/// Which of the faults a target can inject on `kinds`, for the message a run prints.
pub fn capabilities(f: &dyn Faults, kinds: &[BackendKind]) -> (Vec<String>, Vec<String>) {
    use FaultKind::*;
    let (mut can, mut cannot) = (Vec::new(), Vec::new());
    for k in [Kill, Pause, Partition, Isolate, Delay, Clock, Failover, PowerLoss] {
        let name = serde_json::to_value(k).unwrap().as_str().unwrap().to_string();
        let reasons: Vec<String> = kinds.iter().filter_map(|b| f.cannot(*b, k).map(|r| format!("{b}: {r}"))).collect();
        if reasons.len() < kinds.len() {
            can.push(name);
        } else {
            cannot.push(format!("{name} ({})", reasons.first().cloned().unwrap_or_default()));
        }
    }
    (can, cannot)
}
