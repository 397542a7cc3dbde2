//! The `external` target: clusters the user runs, named in an endpoints file. dlbench starts
//! and stops nothing there; the nemesis acts only through commands the file names, one per
//! node for each fault and its inverse, and says which faults it can and cannot inject.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use crate::endpoints::{Endpoints, FaultCommands};
use crate::faultlog::Effect;
use crate::kind::BackendKind;
use crate::nemesis::{FaultKind, Faults, NodeRef};
use crate::cluster::probe;

pub struct ExternalTarget {
    endpoints: Endpoints,
    /// Each backend's password, read from the environment variable its section names.
    passwords: std::collections::HashMap<BackendKind, String>,
    /// (backend, endpoint index) per node index.
    nodes: Vec<(BackendKind, usize)>,
    /// Nodes the nemesis killed, paused or isolated, to undo on heal.
    killed: Mutex<HashSet<usize>>,
    paused: Mutex<HashSet<usize>>,
    isolated: Mutex<HashSet<usize>>,
    /// The run's `--connect-timeout`, bounding every probe.
    timeouts: crate::connect::Timeouts,
}

/// Run one fault command, bounded; its output stays out of logs and results (it may
/// carry anything).
async fn run(cmd: &str) -> Result<(), String> {
    let out = tokio::time::timeout(Duration::from_secs(60), tokio::process::Command::new("sh").arg("-c").arg(cmd).output())
        .await
        .map_err(|_| "a fault command did not finish within 60 s".to_string())?
        .map_err(|e| format!("cannot run a fault command: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("a fault command exited with {}", out.status))
    }
}

impl ExternalTarget {
    pub fn new(endpoints: Endpoints, backends: &[BackendKind], timeouts: crate::connect::Timeouts) -> anyhow::Result<ExternalTarget> {
        // Nodes and passwords are per server family (the advisory designs use postgres's).
        let backends = &BackendKind::servers(backends)[..];
        let mut nodes = Vec::new();
        for &k in backends {
            let s = endpoints.get(k).ok_or_else(|| anyhow::anyhow!("the endpoints file has no [{k}] section; add it or drop {k} from --backends"))?;
            for i in 0..s.endpoints.len() {
                nodes.push((k, i));
            }
        }
        let mut passwords = std::collections::HashMap::new();
        for &k in backends {
            if let Some(var) = endpoints.get(k).and_then(|s| s.password_env.clone()) {
                let pw = std::env::var(&var)
                    .map_err(|_| anyhow::anyhow!("[{k}] password_env names {var}, which is not set in the environment"))?;
                passwords.insert(k, pw);
            }
        }
        Ok(ExternalTarget { endpoints, passwords, nodes, killed: Mutex::default(), paused: Mutex::default(), isolated: Mutex::default(), timeouts })
    }

    /// The password of `kind`'s server family, if its section names one.
    pub fn password(&self, kind: BackendKind) -> Option<&str> {
        self.passwords.get(&kind.server()).map(String::as_str)
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    pub async fn versions(&self, within: Duration) -> Result<std::collections::BTreeMap<String, String>, String> {
        // Each backend's version with its own password (they may differ).
        let mut out = std::collections::BTreeMap::new();
        for k in BackendKind::SERVERS {
            if let Some(s) = self.endpoints.get(k) {
                if s.tls.is_some() {
                    // The probes speak plain TCP; over TLS only the client library connects.
                    out.insert(k.to_string(), "unknown (not probed over TLS)".into());
                    continue;
                }
                let mut one = Endpoints::default();
                one.set(k, s.clone());
                out.extend(probe::versions(&one, self.passwords.get(&k).map(String::as_str), within).await?);
            }
        }
        Ok(out)
    }

    /// Every node answers: the plain-TCP probe, or over TLS a client connection.
    async fn healthy(&self, kind: BackendKind, eps: &[String]) -> Result<(), String> {
        if self.endpoints.get(kind).is_some_and(|s| s.tls.is_some()) {
            return crate::connect::connect(kind, &self.endpoints, self.timeouts, None).await.map(drop).map_err(|e| e.to_string());
        }
        probe::healthy(kind, eps, self.passwords.get(&kind.server()).map(String::as_str), self.timeouts.connect).await
    }

    fn commands(&self, k: BackendKind) -> FaultCommands {
        self.endpoints.get(k).and_then(|s| s.faults.clone()).unwrap_or_default()
    }

    fn command(&self, n: &NodeRef, pick: impl Fn(&FaultCommands) -> &Vec<String>) -> Result<String, String> {
        let (k, i) = self.nodes[n.index];
        pick(&self.commands(k)).get(i).cloned().ok_or_else(|| format!("no command for {} in the endpoints file", n.name))
    }

    fn name(k: BackendKind, i: usize) -> String {
        format!("{k}-{}", i + 1)
    }

    /// Whether node `n` stopped answering a client after a kill, pause or isolate: the
    /// evidence, seen from the bench, that the user's command did what it says. Polled for a
    /// little while (a service manager may take a moment to stop the process). None where
    /// the probe cannot tell: a TLS section (a plain request proves nothing there), or a
    /// server that closes without answering even when up.
    async fn stopped_answering(&self, n: &NodeRef, what: &str) -> Option<Effect> {
        let (k, i) = self.nodes[n.index];
        let section = self.endpoints.get(k)?;
        if section.tls.is_some() {
            return None;
        }
        let addr = section.endpoints.get(i)?.clone();
        let deadline = std::time::Instant::now() + STOP_WAIT;
        loop {
            match probe::reach(&addr, k, Duration::from_millis(1500)).await {
                probe::Reach::Unreachable(e) => return Some(Effect::confirmed(format!("{} does not answer a client ({e})", n.name))),
                probe::Reach::Unclear(e) => return Some(Effect::unchecked(format!("{} cannot be probed ({e})", n.name))),
                probe::Reach::Answered(ms) if std::time::Instant::now() >= deadline => {
                    return Some(Effect::none(format!("NOT {what}: {} still answered a client in {ms:.0} ms, {} s after the command", n.name, STOP_WAIT.as_secs())));
                }
                probe::Reach::Answered(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// How long a node may keep answering after the fault command before the fault counts as
/// having had no effect.
const STOP_WAIT: Duration = Duration::from_secs(3);

#[async_trait]
impl Faults for ExternalTarget {
    fn nodes(&self, kind: BackendKind) -> Vec<NodeRef> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| *k == kind.server())
            .map(|(idx, (k, i))| NodeRef { index: idx, name: Self::name(*k, *i) })
            .collect()
    }

    fn cannot(&self, kind: BackendKind, fault: FaultKind) -> Option<String> {
        let c = self.commands(kind);
        let missing = |what: &str| Some(format!("the endpoints file names no [{kind}.faults] {what} commands"));
        match fault {
            FaultKind::Kill if c.kill.is_empty() => missing("kill/start"),
            FaultKind::Pause if c.pause.is_empty() => missing("pause/resume"),
            FaultKind::Isolate if c.isolate.is_empty() => missing("isolate/heal"),
            FaultKind::Kill | FaultKind::Pause | FaultKind::Isolate => None,
            FaultKind::Partition => Some("an external target can isolate a node (isolate/heal commands), not split peers".into()),
            FaultKind::Delay | FaultKind::Clock | FaultKind::Failover | FaultKind::PowerLoss => Some("not available on an external target".into()),
        }
    }

    async fn leader(&self, kind: BackendKind, lock_ttl: Duration) -> Option<NodeRef> {
        let section = self.endpoints.get(kind)?;
        if section.tls.is_some() {
            return None; // not probed over TLS: the nemesis picks a node instead
        }
        let eps = section.endpoints.clone();
        let nodes = self.nodes(kind);
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        probe::leader(kind, &eps, &names, self.passwords.get(&kind.server()).map(String::as_str), self.timeouts.connect, lock_ttl).await.map(|i| nodes[i].clone())
    }

    async fn kill(&self, n: &NodeRef) -> Result<(), String> {
        run(&self.command(n, |c| &c.kill)?).await?;
        self.killed.lock().unwrap().insert(n.index);
        Ok(())
    }

    async fn start(&self, n: &NodeRef) -> Result<(), String> {
        run(&self.command(n, |c| &c.start)?).await?;
        self.killed.lock().unwrap().remove(&n.index);
        Ok(())
    }

    async fn pause(&self, n: &NodeRef) -> Result<(), String> {
        run(&self.command(n, |c| &c.pause)?).await?;
        self.paused.lock().unwrap().insert(n.index);
        Ok(())
    }

    async fn resume(&self, n: &NodeRef) -> Result<(), String> {
        run(&self.command(n, |c| &c.resume)?).await?;
        self.paused.lock().unwrap().remove(&n.index);
        Ok(())
    }

    async fn cut(&self, targets: &[NodeRef], _rest: &[NodeRef], _isolate: bool) -> Result<(), String> {
        for n in targets {
            run(&self.command(n, |c| &c.isolate)?).await?;
            self.isolated.lock().unwrap().insert(n.index);
        }
        Ok(())
    }

    async fn observe(&self, kind: FaultKind, n: &NodeRef) -> Option<Effect> {
        match kind {
            FaultKind::Kill => self.stopped_answering(n, "killed").await,
            FaultKind::Pause => self.stopped_answering(n, "paused").await,
            _ => None,
        }
    }

    async fn evidence(&self, kind: FaultKind, targets: &[NodeRef], _rest: &[NodeRef], _d: Duration) -> Option<Effect> {
        match kind {
            // An external isolate cuts a node off from everyone, the bench's clients included.
            FaultKind::Isolate => {
                let mut seen = Vec::new();
                for n in targets {
                    seen.push(self.stopped_answering(n, "cut off").await?);
                }
                seen.into_iter().reduce(|a, b| a.and(b))
            }
            _ => None,
        }
    }

    async fn heal_network(&self) -> Result<(), String> {
        let cut: Vec<usize> = self.isolated.lock().unwrap().drain().collect();
        for i in cut {
            let (k, j) = self.nodes[i];
            run(&self.command(&NodeRef { index: i, name: Self::name(k, j) }, |c| &c.heal)?).await?;
        }
        Ok(())
    }

    async fn heal_all(&self, kind: BackendKind) -> Result<(), String> {
        self.heal_network().await?;
        for n in self.nodes(kind) {
            if self.paused.lock().unwrap().contains(&n.index) {
                self.resume(&n).await?;
            }
            if self.killed.lock().unwrap().contains(&n.index) {
                self.start(&n).await?;
            }
        }
        // Wait (bounded) until the cluster answers again.
        let eps = self.endpoints.get(kind).map(|s| s.endpoints.clone()).unwrap_or_default();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            match self.healthy(kind, &eps).await {
                Ok(()) => return Ok(()),
                Err(e) if std::time::Instant::now() > deadline => return Err(format!("{kind} not healthy after healing: {e}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}
