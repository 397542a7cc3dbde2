//! The nemesis's handles on the local target: signals to process groups, the TCP proxies,
//! the clock shim's offset files, and a replica to promote.

use std::time::Duration;

use async_trait::async_trait;

use super::{redis_command, LocalTarget, Node};
use crate::kind::BackendKind;
use crate::faultlog::Effect;
use crate::nemesis::net::{Held, Side};
use crate::nemesis::{clock, FaultKind, Faults, NodeRef};

/// How long a network fault's probe watches the proxies for traffic the rule held back:
/// peers heartbeat and clients ask many times a second, so a cut that stopped nothing in
/// this long stopped nothing the lock depends on.
const EVIDENCE_WAIT: Duration = Duration::from_secs(2);

impl LocalTarget {
    fn node(&self, n: &NodeRef) -> &Node {
        &self.nodes()[n.index]
    }
}

fn node_ref(n: &Node) -> NodeRef {
    NodeRef { index: n.index, name: n.name.clone() }
}

#[async_trait]
impl Faults for LocalTarget {
    fn nodes(&self, kind: BackendKind) -> Vec<NodeRef> {
        self.nodes_of(kind).iter().filter(|n| !n.replica).map(|n| node_ref(n)).collect()
    }

    fn cannot(&self, kind: BackendKind, fault: FaultKind) -> Option<String> {
        let nodes = self.nodes_of(kind);
        match fault {
            FaultKind::Kill | FaultKind::Pause => None,
            FaultKind::PowerLoss => (!nodes.iter().any(|n| n.layer.is_some()))
                .then(|| format!("no {kind} node runs on the power-loss layer (the local target mounts it when --nemesis has power-loss)")),
            FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay => {
                self.net().is_none().then(|| "network faults need the local target started with proxies".into())
            }
            FaultKind::Clock => (!nodes.iter().any(|n| n.clock_file.is_some()))
                .then(|| format!("no {kind} node runs under the clock shim (Redlock nodes do, when clock faults are asked for)")),
            FaultKind::Failover => (!nodes.iter().any(|n| n.replica)).then(|| format!("{kind} has no replica to fail over to")),
        }
    }

    async fn leader(&self, kind: BackendKind, lock_ttl: Duration) -> Option<NodeRef> {
        self.leader_node(kind, lock_ttl).await.map(|n| node_ref(&n))
    }

    async fn kill(&self, n: &NodeRef) -> Result<(), String> {
        self.node(n).kill();
        Ok(())
    }

    async fn power_loss(&self, n: &NodeRef) -> Result<(), String> {
        let node = self.nodes()[n.index].clone();
        // Waits on processes and the unmount: off the async threads.
        let account = tokio::task::spawn_blocking(move || node.power_loss()).await.map_err(|e| e.to_string())??;
        tracing::info!("{}: {account}", n.name);
        Ok(())
    }

    async fn start(&self, n: &NodeRef) -> Result<(), String> {
        self.node(n).start().map_err(|e| e.to_string())
    }

    async fn pause(&self, n: &NodeRef) -> Result<(), String> {
        if self.node(n).pause() {
            Ok(())
        } else {
            Err(format!("{} is not running", n.name))
        }
    }

    async fn resume(&self, n: &NodeRef) -> Result<(), String> {
        self.node(n).resume();
        Ok(())
    }

    async fn cut(&self, targets: &[NodeRef], rest: &[NodeRef], isolate: bool) -> Result<(), String> {
        let net = self.net().ok_or("no proxies")?;
        let t: Vec<usize> = targets.iter().map(|n| n.index).collect();
        let r: Vec<usize> = rest.iter().map(|n| n.index).collect();
        if isolate {
            for &i in &t {
                net.isolate(i, &r);
            }
        } else {
            net.split(&t, &r);
        }
        Ok(())
    }

    async fn slow(&self, targets: &[NodeRef], d: Duration) -> Result<(), String> {
        let net = self.net().ok_or("no proxies")?;
        for n in targets {
            net.slow(n.index, d);
        }
        Ok(())
    }

    async fn heal_network(&self) -> Result<(), String> {
        if let Some(net) = self.net() {
            net.heal();
        }
        Ok(())
    }

    async fn shift_clock(&self, n: &NodeRef, ms: i64) -> Result<(), String> {
        let f = self.node(n).clock_file.as_ref().ok_or_else(|| format!("{} does not run under the clock shim", n.name))?;
        clock::set_offset(f, ms).map_err(|e| e.to_string())
    }

    async fn failover(&self, kind: BackendKind) -> Result<(NodeRef, NodeRef), String> {
        let nodes = self.nodes_of(kind);
        let replica = nodes.iter().find(|n| n.replica).cloned().ok_or_else(|| format!("{kind} has no replica to fail over to"))?;
        let primary = nodes.iter().find(|n| !n.replica).cloned().ok_or("no primary")?;
        primary.kill();
        redis_command(&replica.real_addr, "REPLICAOF NO ONE", self.password(), self.connect_timeout()).await?;
        self.retarget(primary.index, &replica);
        Ok((node_ref(&primary), node_ref(&replica)))
    }

    async fn undo_failover(&self, old: &NodeRef, new: &NodeRef) -> Result<(), String> {
        // The old primary comes back empty, as a replica of the new one, and takes its role
        // back once it has caught up (below).
        self.node(old).start().map_err(|e| e.to_string())?;
        // A restarted redis-server needs a moment before it listens; retry the command
        // (bounded) instead of failing on the first refused connection.
        let (h, p) = self.node(new).real_addr.rsplit_once(':').unwrap();
        let cmd = format!("REPLICAOF {h} {p}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            match redis_command(&self.node(old).real_addr, &cmd, self.password(), self.connect_timeout()).await {
                Ok(_) => break,
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
        // Then fail back once it has the new primary's data, so the run ends with the roles
        // it started with: a second failover (another design on the same servers, or a
        // repeat) must again kill the primary, not the replica it has become.
        loop {
            let info = redis_command(&self.node(old).real_addr, "INFO replication", self.password(), self.connect_timeout()).await.unwrap_or_default();
            if info.lines().any(|l| l.trim() == "master_link_status:up") {
                break;
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!("{} did not catch up with {} within 15 s", old.name, new.name));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        redis_command(&self.node(old).real_addr, "REPLICAOF NO ONE", self.password(), self.connect_timeout()).await?;
        self.retarget(old.index, self.node(old));
        // The replica follows the primary through the primary's proxy, as at the start, so a
        // partition between the two (S5) can cut replication again.
        let (h, p) = self.node(old).client_addr.rsplit_once(':').unwrap();
        redis_command(&self.node(new).real_addr, &format!("REPLICAOF {h} {p}"), self.password(), self.connect_timeout()).await?;
        Ok(())
    }

    async fn evidence(&self, kind: FaultKind, targets: &[NodeRef], rest: &[NodeRef], _d: Duration) -> Option<Effect> {
        let net = self.net()?.clone();
        let t: Vec<usize> = targets.iter().map(|n| n.index).collect();
        let r: Vec<usize> = rest.iter().map(|n| n.index).collect();
        let names = |v: &[NodeRef]| v.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ");
        let (tn, rn) = (names(targets), names(rest));
        let node_in = |s: Side, set: &[usize]| matches!(s, Side::Node(x) if set.contains(&x));
        // What the rules held back on the links this fault cuts or slows; zero until some
        // client or peer really tried to cross them.
        let seen = |h: &Held| -> Option<String> {
            match kind {
                FaultKind::Partition => {
                    let (b, c) = h.cut_on(|s, n| (node_in(s, &t) && r.contains(&n)) || (node_in(s, &r) && t.contains(&n)));
                    (b + c > 0).then(|| format!("held {b} bytes and {c} connections between {tn} and {rn}"))
                }
                FaultKind::Isolate => {
                    let (b, c) = h.cut_on(|s, n| t.contains(&n) || node_in(s, &t));
                    (b + c > 0).then(|| format!("held {b} bytes and {c} connections to and from {tn}"))
                }
                FaultKind::Delay => {
                    let b = h.delayed_on(|s, n| t.contains(&n) || node_in(s, &t));
                    (b > 0).then(|| format!("held {b} bytes to and from {tn}"))
                }
                _ => None,
            }
        };
        if !matches!(kind, FaultKind::Partition | FaultKind::Isolate | FaultKind::Delay) {
            return None;
        }
        let deadline = std::time::Instant::now() + EVIDENCE_WAIT;
        loop {
            if let Some(what) = seen(&net.held()) {
                return Some(Effect::confirmed(what));
            }
            if std::time::Instant::now() >= deadline || net.is_healed() {
                return Some(Effect::none(format!("NOT held: no traffic to or from {tn} met the rule in {} s", EVIDENCE_WAIT.as_secs_f64())));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn observe(&self, kind: FaultKind, n: &NodeRef) -> Option<Effect> {
        let node = self.node(n);
        match kind {
            // The process group was killed and reaped: nothing of it runs.
            FaultKind::Kill => Some(match node.pid() {
                None => Effect::confirmed("process gone"),
                Some(pid) => Effect::none(format!("NOT killed: pid {pid} still runs")),
            }),
            // SIGSTOP is delivered asynchronously: look for the stopped state a while.
            FaultKind::Pause => {
                let pid = node.pid()?;
                let mut state = String::new();
                for _ in 0..20 {
                    state = proc_state(pid).unwrap_or_default();
                    if state == "T" || state == "t" {
                        return Some(Effect::confirmed(format!("pid {pid} stopped (state {state})")));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Some(Effect::none(format!("NOT stopped: pid {pid} in state {state}")))
            }
            FaultKind::Clock => crate::cluster::probe::clock_moved(&node.real_addr, self.password(), self.connect_timeout()).await,
            // The server was killed and reaped, the layer dropped what was unsynced and
            // unmounted: its own account, and the mount table, say so.
            FaultKind::PowerLoss => {
                let layer = node.layer.as_ref()?;
                let account = layer.last_line();
                Some(match (node.pid(), layer.mounted()) {
                    (Some(pid), _) => Effect::none(format!("NOT killed: pid {pid} still runs")),
                    (None, true) => Effect::none(format!("NOT cut: {} is still mounted", node.data.display())),
                    (None, false) if !account.contains("power loss:") => Effect::none(format!("NOT cut: the layer says {account:?}")),
                    (None, false) => Effect::confirmed(format!("process gone; {}", account.trim_start_matches("faultfs: "))),
                })
            }
            FaultKind::Failover => crate::cluster::probe::promoted(&node.real_addr, self.password(), self.connect_timeout()).await,
            _ => None,
        }
    }

    async fn heal_all(&self, kind: BackendKind) -> Result<(), String> {
        for n in self.nodes_of(kind) {
            if n.is_paused() {
                n.resume();
            }
            if !n.is_running() {
                n.start().map_err(|e| e.to_string())?;
            }
            if let Some(f) = &n.clock_file {
                let _ = clock::set_offset(f, 0);
            }
        }
        if let Some(net) = self.net() {
            net.heal();
        }
        self.wait_healthy(kind).await.map_err(|e| e.to_string())
    }
}

/// A process's state letter from /proc (R, S, D, T, t, Z, ...).
fn proc_state(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the state follows the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().next().map(str::to_string)
}
