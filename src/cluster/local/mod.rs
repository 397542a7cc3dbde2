//! The `local` target, the embedded default: dlbench starts real servers itself.
//!
//! Topology: etcd x3, ZooKeeper x3 (an ensemble), Redis x1, Redis x5 for Redlock,
//! PostgreSQL x1, MariaDB x1 and NATS x3 (a JetStream cluster) when asked for. Every server binds 127.0.0.1 on ports claimed for this run (see
//! [`ports`]), keeps its data in a runtime directory every server user can enter (see
//! [`runtime`]; linked from `<run dir>/servers/<node>/data`) and its log in
//! `<run dir>/servers/<node>/log`, and is health-checked before load starts. [`process`] guarantees each is stopped on exit,
//! Ctrl-C and panic. With [`TargetOptions`], client and peer links go through the
//! nemesis's proxies, Redlock nodes run under the clock shim, and Redis gets a replica.

pub mod bins;
pub(crate) mod etcd;
mod faults;
mod plan;
#[cfg(test)]
mod parity;
pub mod mariadb;
pub(crate) mod nats;
pub(crate) mod postgres;
pub mod ports;
pub mod power;
pub mod process;
pub(crate) mod redis;
pub use redis::redis_command;
pub mod runtime;
pub(crate) mod zookeeper;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::endpoints::{Endpoints, Section};
use crate::kind::BackendKind;
use crate::nemesis::net::{Net, NodeId};
use process::{Process, Spec};

/// How long a cluster may take to become healthy.
const HEALTH_DEADLINE: Duration = Duration::from_secs(90);

/// Why the local target could not start.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    MissingBinary(#[from] bins::Missing),
    #[error("{0}")]
    Setup(String),
    #[error("{backend} did not become healthy: {detail}")]
    Unhealthy { backend: BackendKind, detail: String },
}

/// What the target needs beyond plain servers, for faults.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TargetOptions {
    /// Route client traffic, and etcd and ZooKeeper peer traffic, through fault-injecting
    /// proxies (partitions, delays, failover).
    pub proxies: bool,
    /// Start the Redlock nodes under the clock shim (wall-clock jumps).
    pub clock_shim: bool,
    /// Start a replica of the single Redis primary (failover).
    pub redis_replica: bool,
    /// Put each node's data directory on the power-loss layer (`power-loss`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub power_loss: bool,
    /// The servers' durability settings (`run --durability`); `default` is what the local
    /// target always ran with.
    #[serde(skip_serializing_if = "crate::durability::Durability::is_default")]
    pub durability: crate::durability::Durability,
    /// Require this password: Redis (`requirepass`), PostgreSQL's `postgres` user, etcd's
    /// `root` user with auth on. Never written to results.
    #[serde(skip)]
    pub password: Option<String>,
    /// Bound on each health check, version probe and admin command (`--connect-timeout`);
    /// `None` is the 5 s default of [`crate::connect::Timeouts`].
    #[serde(skip)]
    pub connect_timeout: Option<Duration>,
}

/// A node before it is started.
pub struct NodePlan {
    pub spec: Spec,
    pub client_addr: String,
    pub data: PathBuf,
    pub clock_file: Option<PathBuf>,
}

/// One server of the target, restartable by the nemesis.
pub struct Node {
    pub index: NodeId,
    pub backend: BackendKind,
    pub name: String,
    /// Where clients connect: the node's proxy when proxies are on.
    pub client_addr: String,
    /// The server's own client port (health checks and admin commands use it).
    pub real_addr: String,
    pub spec: Spec,
    pub data: PathBuf,
    /// The clock shim's offset file, when the node runs under it.
    pub clock_file: Option<PathBuf>,
    /// A Redis replica rather than a client-facing node.
    pub replica: bool,
    process: Mutex<Option<Arc<Process>>>,
    /// Arguments added after the spec's on the next starts (a Redis node restarted with
    /// persistence on, say); empty by default.
    extra_args: Mutex<Vec<std::ffi::OsString>>,
    paused: AtomicBool,
    net: Option<Arc<Net>>,
    /// The power-loss layer under `data`, when the plan has `power-loss`.
    pub layer: Option<power::Layer>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.real_addr)
    }
}

impl Node {
    /// Start (or restart) the server process.
    pub fn start(&self) -> Result<(), TargetError> {
        // The power comes back before the server does (a remount after a power loss).
        if let Some(layer) = &self.layer {
            layer.mount().map_err(TargetError::Setup)?;
        }
        let mut spec = self.spec.clone();
        spec.args.extend(self.extra_args.lock().unwrap().iter().cloned());
        let p = Process::start(spec)
            .map_err(|e| TargetError::Setup(format!("start {} ({}): {e}", self.name, self.spec.program.display())))?;
        if let Some(net) = &self.net {
            net.set_owner(p.pid, self.index);
        }
        *self.process.lock().unwrap() = Some(p);
        self.paused.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Arguments for the next starts, after the spec's (for Redis, a later `--option` wins
    /// over an earlier one). Takes effect at the next `start`.
    pub fn set_extra_args(&self, args: &[&str]) {
        *self.extra_args.lock().unwrap() = args.iter().map(|a| a.into()).collect();
    }

    pub fn process(&self) -> Option<Arc<Process>> {
        self.process.lock().unwrap().clone()
    }

    pub fn is_running(&self) -> bool {
        self.process().is_some_and(|p| p.is_running())
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn pid(&self) -> Option<i32> {
        self.process().filter(|p| p.is_running()).map(|p| p.pid)
    }

    /// SIGKILL, as a crash; the node stays down until `start`.
    pub fn kill(&self) {
        if let Some(p) = self.process() {
            p.kill();
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    /// SIGSTOP the node's process group.
    pub fn pause(&self) -> bool {
        let ok = self.process().is_some_and(|p| p.signal(libc::SIGSTOP));
        if ok {
            self.paused.store(true, Ordering::SeqCst);
        }
        ok
    }

    /// SIGCONT the node's process group.
    pub fn resume(&self) {
        if let Some(p) = self.process() {
            p.signal(libc::SIGCONT);
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    pub fn stop(&self, grace: Duration) {
        if let Some(p) = self.process.lock().unwrap().take() {
            p.stop(grace);
        }
        if let Some(layer) = &self.layer {
            layer.stop();
        }
    }

    /// SIGKILL, then the power cut under the data directory; returns the layer's account.
    pub fn power_loss(&self) -> Result<String, String> {
        let layer = self.layer.as_ref().ok_or_else(|| format!("{} has no power-loss layer", self.name))?;
        self.kill();
        layer.power_loss()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.spec.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

/// The running local target.
pub struct LocalTarget {
    pub dir: PathBuf,
    pub options: TargetOptions,
    nodes: Vec<Arc<Node>>,
    endpoints: Endpoints,
    ports: Mutex<ports::PortClaims>,
    net: Option<Arc<Net>>,
    /// Where each node's shared client proxy forwards (changed by a failover).
    client_backends: Vec<ClientSlot>,
    password: Option<String>,
    /// Bound on each exchange of a probe or admin command with a server.
    connect_timeout: Duration,
    /// The servers' data, configuration and secrets; removed at stop.
    runtime: Option<runtime::RuntimeDir>,
    stopped: bool,
}

/// Where a node's shared client proxy forwards, when it has one.
type ClientSlot = Option<Arc<Mutex<SocketAddr>>>;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Bind a claimed port for a proxy (the claim keeps other runs off it).
fn listener(port: u16) -> Result<tokio::net::TcpListener, TargetError> {
    let l = std::net::TcpListener::bind(addr(port)).map_err(|e| TargetError::Setup(format!("bind proxy port {port}: {e}")))?;
    l.set_nonblocking(true).map_err(|e| TargetError::Setup(e.to_string()))?;
    tokio::net::TcpListener::from_std(l).map_err(|e| TargetError::Setup(e.to_string()))
}

/// The clock shim installed in the runtime directory, when the options ask for it.
fn clock_shim(rt: &Path, options: &TargetOptions) -> Result<Option<PathBuf>, TargetError> {
    if !options.clock_shim {
        return Ok(None);
    }
    let s = crate::nemesis::clock::install(rt).map_err(|e| TargetError::Setup(e.to_string()))?;
    if s.is_none() {
        return Err(TargetError::Setup("clock faults need the clock shim, and this build has none (no C compiler at build time)".into()));
    }
    Ok(s)
}

/// The nodes of the plan, each behind its proxies when there is a `net`: one per node for
/// clients, plus the peer proxies. Returns the nodes and where each client proxy forwards.
/// `layer`: the power-loss layer's binary and the runtime directory its mounts are recorded in.
fn wire(planned: Vec<plan::Planned>, net: Option<&Arc<Net>>, ports: &mut ports::PortClaims, layer: Option<(&Path, &Path)>) -> Result<(Vec<Arc<Node>>, Vec<ClientSlot>), TargetError> {
    let mut nodes = Vec::new();
    let mut client_backends = Vec::new();
    let mut fronts = std::collections::HashMap::new();
    for (index, plan::Planned { backend: k, mut plan, replica, peers }) in planned.into_iter().enumerate() {
        let real_addr = plan.client_addr.clone();
        let mut client_addr = real_addr.clone();
        let mut backend_slot = None;
        if let Some(net) = net {
            let real: SocketAddr = real_addr.parse().expect("loopback address");
            let front = ports.claim().map_err(|e| TargetError::Setup(e.to_string()))?;
            let slot = Arc::new(Mutex::new(real));
            // The Redis primary's proxy also carries replication, so it tells nodes apart.
            net.spawn_proxy(listener(front)?, index, slot.clone(), 0, k == BackendKind::Redis);
            client_addr = format!("127.0.0.1:{front}");
            fronts.insert(real_addr.clone(), client_addr.clone());
            backend_slot = Some(slot);
            for (front, real) in peers {
                net.spawn_proxy(listener(front)?, index, Arc::new(Mutex::new(addr(real))), 0, true);
            }
        }
        if replica {
            // Point the replica at the primary's proxy rather than its real port.
            if let Some(i) = plan.spec.args.iter().position(|a| a == "--replicaof") {
                let primary = format!("127.0.0.1:{}", plan.spec.args[i + 2].to_string_lossy());
                if let Some(front) = fronts.get(&primary) {
                    plan.spec.args[i + 2] = front.rsplit_once(':').unwrap().1.into();
                }
            }
        }
        if layer.is_some() && k == BackendKind::Zookeeper {
            // ZooKeeper writes its first snapshot (the empty tree, at start) without an fsync
            // and refuses to start from a log without a snapshot: after a power loss on the
            // layer no node came back ("No snapshot found, but there are log entries").
            // Its logs here start at zxid 0 and are never purged, so the log alone is the
            // whole state: trust it, as ZooKeeper's own setting for this case allows.
            plan.spec.args.insert(0, "-Dzookeeper.snapshot.trust.empty=true".into());
        }
        client_backends.push(backend_slot);
        nodes.push(Arc::new(Node {
            index,
            backend: k,
            name: plan.spec.name.clone(),
            client_addr,
            real_addr,
            clock_file: plan.clock_file,
            replica,
            process: Mutex::new(None),
            extra_args: Mutex::new(Vec::new()),
            paused: AtomicBool::new(false),
            net: net.cloned(),
            layer: layer.map(|(bin, rt)| power::Layer::new(&plan.spec.name, &plan.data, &plan.spec.log, bin, rt)),
            spec: plan.spec,
            data: plan.data,
        }));
    }
    Ok((nodes, client_backends))
}

impl LocalTarget {
    /// Check binaries, claim ports, start every server for `backends` under `dir`, and wait
    /// until each cluster is healthy. On any failure, everything started is stopped.
    pub async fn start(dir: &Path, backends: &[BackendKind], options: TargetOptions) -> Result<LocalTarget, TargetError> {
        // The servers of the designs asked for (the advisory designs share postgres's).
        let backends = &BackendKind::servers(backends)[..];
        let bins = bins::find(backends)?;
        let run_id = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "run".into());
        let dir = dir.join("servers");
        std::fs::create_dir_all(&dir).map_err(|e| TargetError::Setup(format!("create {}: {e}", dir.display())))?;
        // Sweeps what dead runs left, then holds this run's; dropped (removed) on any error
        // below. The suffix keeps two targets of one run directory apart.
        let runtime = runtime::RuntimeDir::create(&format!("{run_id}-{:04x}", rand::random::<u16>())).map_err(TargetError::Setup)?;
        let rt = runtime.path.clone();
        let mut ports = ports::PortClaims::new();
        let token = format!("dlbench-{}-{}", std::process::id(), rand::random::<u32>());
        let net = options.proxies.then(Net::new);
        let shim = clock_shim(&rt, &options)?;
        let layout = plan::Layout { bins: &bins, rt: &rt, dir: &dir, options: &options, token: &token, shim: shim.as_deref() };
        let planned = layout.plan(backends, &mut ports).await?;
        plan::link_data(&dir, &planned)?;
        let layer_bin = if options.power_loss { Some(power::binary().map_err(TargetError::Setup)?) } else { None };
        let (nodes, client_backends) = wire(planned, net.as_ref(), &mut ports, layer_bin.as_deref().map(|b| (b, rt.as_path())))?;
        let mut target = LocalTarget {
            dir,
            nodes,
            endpoints: Endpoints::default(),
            ports: Mutex::new(ports),
            net,
            client_backends,
            password: options.password.clone(),
            runtime: Some(runtime),
            connect_timeout: options.connect_timeout.unwrap_or(crate::connect::Timeouts::default().connect),
            options,
            stopped: false,
        };
        for n in &target.nodes {
            n.start()?; // on error, Drop stops what already started
        }
        target.become_healthy(backends).await?;
        Ok(target)
    }

    /// Wait until every cluster of `backends` is healthy, switch etcd's auth on, and set the
    /// endpoints clients use.
    async fn become_healthy(&mut self, backends: &[BackendKind]) -> Result<(), TargetError> {
        let kinds: Vec<BackendKind> = backends.iter().copied().filter(|k| *k != BackendKind::Memory).collect();
        // etcd's auth is switched on once the cluster runs; until then it answers without.
        let pw = self.password.clone();
        let within = self.connect_timeout;
        let checks = kinds.iter().map(|&k| {
            let nodes = self.nodes_of(k);
            let pw = if k == BackendKind::Etcd { None } else { pw.clone() };
            async move { wait_healthy(k, &nodes, pw.as_deref(), within).await }
        });
        for r in futures::future::join_all(checks).await {
            r?;
        }
        if let (Some(pw), Some(n)) = (&pw, self.nodes.iter().find(|n| n.backend == BackendKind::Etcd)) {
            etcd::enable_auth(&n.real_addr, pw, within).await.map_err(|e| TargetError::Unhealthy { backend: BackendKind::Etcd, detail: e })?;
        }
        for k in kinds {
            self.endpoints.set(k, self.section(k, |n| n.client_addr.clone()));
        }
        Ok(())
    }

    fn section(&self, k: BackendKind, addr: impl Fn(&Node) -> String) -> Section {
        Section::own_servers(k, self.nodes.iter().filter(|n| n.backend == k && !n.replica).map(|n| addr(n)).collect())
    }

    /// Where clients connect.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The servers' own ports, bypassing any proxy.
    pub fn direct_endpoints(&self) -> Endpoints {
        let mut e = Endpoints::default();
        for k in BackendKind::SERVERS {
            if self.nodes.iter().any(|n| n.backend == k) {
                e.set(k, self.section(k, |n| n.real_addr.clone()));
            }
        }
        e
    }

    /// The password the servers require, if they were started with one.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    pub fn net(&self) -> Option<&Arc<Net>> {
        self.net.as_ref()
    }

    pub fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    /// The nodes of `k`'s server family.
    pub fn nodes_of(&self, k: BackendKind) -> Vec<Arc<Node>> {
        self.nodes.iter().filter(|n| n.backend == k.server()).cloned().collect()
    }

    /// Endpoints through a fresh set of proxies for client group `group`, so a fault can
    /// cut or freeze those clients alone.
    pub fn client_endpoints(&self, group: u32) -> Result<Endpoints, TargetError> {
        let net = self.net.as_ref().ok_or_else(|| TargetError::Setup("dedicated client links need proxies".into()))?;
        let mut e = Endpoints::default();
        for k in BackendKind::SERVERS {
            let nodes: Vec<&Arc<Node>> = self.nodes.iter().filter(|n| n.backend == k && !n.replica).collect();
            if nodes.is_empty() {
                continue;
            }
            let mut eps = Vec::new();
            for n in nodes {
                let port = self.ports.lock().unwrap().claim().map_err(|e| TargetError::Setup(e.to_string()))?;
                let slot = self.client_backends[n.index].clone().unwrap_or_else(|| Arc::new(Mutex::new(n.real_addr.parse().unwrap())));
                net.spawn_proxy(listener(port)?, n.index, slot, group, false);
                eps.push(format!("127.0.0.1:{port}"));
            }
            let mut s = self.section(k, |_| String::new());
            s.endpoints = eps;
            e.set(k, s);
        }
        Ok(e)
    }

    /// Send node `from`'s clients to node `to` instead (a failover's new primary).
    pub fn retarget(&self, from: NodeId, to: &Node) {
        if let Some(slot) = &self.client_backends[from] {
            *slot.lock().unwrap() = to.real_addr.parse().expect("loopback address");
        }
    }

    /// Wait until `kind`'s running cluster is healthy.
    pub async fn wait_healthy(&self, kind: BackendKind) -> Result<(), TargetError> {
        let nodes = self.nodes_of(kind);
        wait_healthy(kind.server(), &nodes, self.password.as_deref(), self.connect_timeout).await
    }

    /// Bound on each exchange of a probe or admin command with a server.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The node that currently leads `kind`'s cluster (etcd, ZooKeeper; for NATS the leader
    /// of the stream of `lock_ttl`'s bucket), if any answers.
    pub async fn leader_node(&self, kind: BackendKind, lock_ttl: Duration) -> Option<Arc<Node>> {
        let nodes: Vec<Arc<Node>> = self.nodes_of(kind).into_iter().filter(|n| n.is_running() && !n.is_paused()).collect();
        match kind.server() {
            BackendKind::Etcd => {
                for n in &nodes {
                    if let Ok(name) = etcd::leader_name(&n.real_addr, self.password.as_deref(), self.connect_timeout).await {
                        return self.nodes.iter().find(|x| x.name == name).cloned();
                    }
                }
                None
            }
            BackendKind::Zookeeper => {
                for n in &nodes {
                    if zookeeper::four_letter(&n.real_addr, "srvr", self.connect_timeout).await.is_ok_and(|o| o.contains("Mode: leader")) {
                        return Some(n.clone());
                    }
                }
                None
            }
            BackendKind::Nats => {
                for n in &nodes {
                    if let Ok(name) = nats::leader_name(&n.real_addr, self.password.as_deref(), self.connect_timeout, lock_ttl).await {
                        return self.nodes.iter().find(|x| x.name == name).cloned();
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Each server's version, as the server reports it.
    pub async fn versions(&self) -> BTreeMap<String, String> {
        // Our own servers, already health-checked: a silent one is recorded, not fatal.
        crate::cluster::probe::versions(&self.direct_endpoints(), self.password.as_deref(), self.connect_timeout)
            .await
            .unwrap_or_else(|e| BTreeMap::from([("error".to_string(), e)]))
    }

    /// Stop every server, then remove their data, configuration and secrets (logs stay).
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Some(net) = &self.net {
            net.shutdown();
        }
        std::thread::scope(|s| {
            for n in &self.nodes {
                s.spawn(|| n.stop(Duration::from_secs(5)));
            }
        });
        // The whole runtime directory goes: data, Redis's auth.conf, sockets, the shim.
        // The `data` links stay, dangling: they record where the data was.
        if let Some(mut rt) = self.runtime.take() {
            rt.remove();
        }
    }
}

impl Drop for LocalTarget {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn wait_healthy(kind: BackendKind, nodes: &[Arc<Node>], password: Option<&str>, within: Duration) -> Result<(), TargetError> {
    let eps: Vec<String> = nodes.iter().filter(|n| !n.replica).map(|n| n.real_addr.clone()).collect();
    let started = Instant::now();
    loop {
        for n in nodes {
            if !n.is_running() {
                return Err(TargetError::Unhealthy {
                    backend: kind,
                    detail: format!("{} is not running (log {}: {})", n.name, n.spec.log.display(), n.log_tail()),
                });
            }
        }
        let mut r = crate::cluster::probe::healthy(kind, &eps, password, within).await;
        for n in nodes.iter().filter(|n| n.replica) {
            if r.is_ok() {
                r = redis::replica_linked(&n.real_addr, password, within).await;
            }
        }
        let last = match r {
            Ok(()) => {
                tracing::info!("{kind} healthy after {:?}", started.elapsed());
                return Ok(());
            }
            Err(e) => e,
        };
        if started.elapsed() > HEALTH_DEADLINE {
            return Err(TargetError::Unhealthy { backend: kind, detail: format!("not healthy after {HEALTH_DEADLINE:?}: {last}") });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
