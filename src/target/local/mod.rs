//! The `local` target, the embedded default: dlbench starts real servers itself.
//!
//! Topology: etcd x3, ZooKeeper x3 (an ensemble), Redis x1, Redis x5 for Redlock,
//! PostgreSQL x1. Every server binds 127.0.0.1 on ports claimed for this run (see
//! [`ports`]), keeps its data and log under `<run dir>/servers/<node>/`, and is
//! health-checked before load starts. [`process`] guarantees each is stopped on exit,
//! Ctrl-C and panic.

pub mod bins;
mod etcd;
mod postgres;
pub mod ports;
pub mod process;
mod redis;
mod zookeeper;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::endpoints::{Endpoints, Section};
use crate::kind::BackendKind;
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

/// A node before it is started.
pub struct NodePlan {
    pub spec: Spec,
    pub client_addr: String,
    pub data: PathBuf,
}

/// One server of the target, restartable by the nemesis.
pub struct Node {
    pub backend: BackendKind,
    pub name: String,
    pub client_addr: String,
    pub spec: Spec,
    pub data: PathBuf,
    process: Mutex<Option<Arc<Process>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.client_addr)
    }
}

impl Node {
    fn new(backend: BackendKind, plan: NodePlan) -> Arc<Node> {
        Arc::new(Node {
            backend,
            name: plan.spec.name.clone(),
            client_addr: plan.client_addr,
            spec: plan.spec,
            data: plan.data,
            process: Mutex::new(None),
        })
    }

    /// Start (or restart) the server process.
    pub fn start(&self) -> Result<(), TargetError> {
        let p = Process::start(self.spec.clone())
            .map_err(|e| TargetError::Setup(format!("start {} ({}): {e}", self.name, self.spec.program.display())))?;
        *self.process.lock().unwrap() = Some(p);
        Ok(())
    }

    pub fn process(&self) -> Option<Arc<Process>> {
        self.process.lock().unwrap().clone()
    }

    pub fn is_running(&self) -> bool {
        self.process().is_some_and(|p| p.is_running())
    }

    pub fn pid(&self) -> Option<i32> {
        self.process().filter(|p| p.is_running()).map(|p| p.pid)
    }

    pub fn stop(&self, grace: Duration) {
        if let Some(p) = self.process.lock().unwrap().take() {
            p.stop(grace);
        }
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
    nodes: Vec<Arc<Node>>,
    endpoints: Endpoints,
    _ports: ports::PortClaims,
    stopped: bool,
}

impl LocalTarget {
    /// Check binaries, claim ports, start every server for `backends` under `dir`, and wait
    /// until each cluster is healthy. On any failure, everything started is stopped.
    pub async fn start(dir: &Path, backends: &[BackendKind]) -> Result<LocalTarget, TargetError> {
        let bins = bins::find(backends)?;
        let dir = dir.join("servers");
        std::fs::create_dir_all(&dir).map_err(|e| TargetError::Setup(format!("create {}: {e}", dir.display())))?;
        let mut ports = ports::PortClaims::new();
        let mut claim = |n: usize| ports.claim_n(n).map_err(|e| TargetError::Setup(e.to_string()));
        let io = |e: std::io::Error| TargetError::Setup(e.to_string());
        let token = format!("dlbench-{}-{}", std::process::id(), rand::random::<u32>());

        let mut groups: Vec<(BackendKind, Vec<Arc<Node>>)> = Vec::new();
        for &k in backends {
            let plans: Vec<NodePlan> = match k {
                BackendKind::Etcd => {
                    let p = claim(6)?;
                    let ports: Vec<etcd::EtcdPorts> =
                        (0..3).map(|i| etcd::EtcdPorts { client: p[2 * i], peer: p[2 * i + 1] }).collect();
                    etcd::specs(bins.etcd.as_ref().unwrap(), &dir, &ports, &token)
                }
                BackendKind::Zookeeper => {
                    let p = claim(9)?;
                    let ports: Vec<zookeeper::ZkPorts> = (0..3)
                        .map(|i| zookeeper::ZkPorts { client: p[3 * i], quorum: p[3 * i + 1], election: p[3 * i + 2] })
                        .collect();
                    zookeeper::specs(
                        bins.java.as_ref().unwrap(),
                        bins.zookeeper_classpath.as_ref().unwrap(),
                        &dir,
                        &ports,
                    )
                    .map_err(io)?
                }
                BackendKind::Redis => {
                    let p = claim(1)?;
                    vec![redis::spec(bins.redis_server.as_ref().unwrap(), &dir, "redis-1", p[0]).map_err(io)?]
                }
                BackendKind::Redlock => {
                    let p = claim(5)?;
                    (0..5)
                        .map(|i| redis::spec(bins.redis_server.as_ref().unwrap(), &dir, &format!("redlock-{}", i + 1), p[i]))
                        .collect::<Result<_, _>>()
                        .map_err(io)?
                }
                BackendKind::Postgres => {
                    let p = claim(1)?;
                    let (initdb, pg, d) = (bins.initdb.clone().unwrap(), bins.postgres.clone().unwrap(), dir.clone());
                    let plan = tokio::task::spawn_blocking(move || postgres::prepare(&initdb, &pg, &d, p[0]))
                        .await
                        .map_err(|e| TargetError::Setup(e.to_string()))?
                        .map_err(TargetError::Setup)?;
                    vec![plan]
                }
                BackendKind::Memory => continue,
            };
            groups.push((k, plans.into_iter().map(|p| Node::new(k, p)).collect()));
        }

        let mut target = LocalTarget {
            dir,
            nodes: groups.iter().flat_map(|(_, n)| n.iter().cloned()).collect(),
            endpoints: Endpoints::default(),
            _ports: ports,
            stopped: false,
        };
        for n in &target.nodes {
            n.start()?; // on error, Drop stops what already started
        }
        let waits = groups.iter().map(|(k, nodes)| wait_healthy(*k, nodes));
        for r in futures::future::join_all(waits).await {
            r?;
        }
        for (k, nodes) in &groups {
            let mut s = Section::new(nodes.iter().map(|n| n.client_addr.clone()).collect());
            if *k == BackendKind::Postgres {
                s.user = Some("postgres".into());
                s.database = Some("postgres".into());
            }
            target.endpoints.set(*k, s);
        }
        Ok(target)
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    pub fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    pub fn nodes_of(&self, k: BackendKind) -> Vec<Arc<Node>> {
        self.nodes.iter().filter(|n| n.backend == k).cloned().collect()
    }

    /// Each server's version, as the server reports it.
    pub async fn versions(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for k in BackendKind::REAL {
            let Some(node) = self.nodes.iter().find(|n| n.backend == k) else { continue };
            let ep = node.client_addr.as_str();
            let v = match k {
                BackendKind::Etcd => etcd::version(ep).await,
                BackendKind::Zookeeper => zookeeper::version(ep).await,
                BackendKind::Redis | BackendKind::Redlock => redis::version(ep).await,
                BackendKind::Postgres => postgres::version(ep).await,
                BackendKind::Memory => continue,
            };
            out.insert(k.name().to_string(), v.unwrap_or_else(|e| format!("unknown ({e})")));
        }
        out
    }

    /// Stop every server, then remove their data (logs stay).
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        std::thread::scope(|s| {
            for n in &self.nodes {
                s.spawn(|| n.stop(Duration::from_secs(5)));
            }
        });
        for n in &self.nodes {
            let _ = std::fs::remove_dir_all(&n.data);
        }
    }
}

impl Drop for LocalTarget {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn wait_healthy(kind: BackendKind, nodes: &[Arc<Node>]) -> Result<(), TargetError> {
    let eps: Vec<String> = nodes.iter().map(|n| n.client_addr.clone()).collect();
    let started = Instant::now();
    loop {
        for n in nodes {
            if !n.is_running() {
                return Err(TargetError::Unhealthy {
                    backend: kind,
                    detail: format!("{} exited during start-up (log {}: {})", n.name, n.spec.log.display(), n.log_tail()),
                });
            }
        }
        let r = match kind {
            BackendKind::Etcd => etcd::healthy(&eps).await,
            BackendKind::Zookeeper => zookeeper::healthy(&eps).await,
            BackendKind::Redis | BackendKind::Redlock => redis::healthy(&eps).await,
            BackendKind::Postgres => postgres::healthy(&eps).await,
            BackendKind::Memory => Ok(()),
        };
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
