//! The `compose` target: the services of `docker-compose.yml`, found through Docker by their
//! compose labels, health-waited, and broken and mended with `docker` commands.
//!
//! Service names map to backends: `etcd*` etcd, `zk*` ZooKeeper, `redis` Redis (and
//! `redis-replica`, its replica), `redlock*` Redlock, `postgres` PostgreSQL. Every published
//! port must be bound to 127.0.0.1.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::endpoints::{Endpoints, Section};
use crate::kind::BackendKind;
use crate::nemesis::{FaultKind, Faults, NodeRef};
use crate::cluster::probe;

/// The compose project dlbench looks for (docker-compose.yml's .env sets it).
pub const DEFAULT_PROJECT: &str = "dlbench";

#[derive(Debug, Clone)]
struct Service {
    index: usize,
    backend: BackendKind,
    service: String,
    container: String,
    endpoint: String,
    network: String,
    replica: bool,
}

pub struct ComposeTarget {
    project: String,
    services: Vec<Service>,
    endpoints: Endpoints,
    /// Containers the nemesis disconnected, to reconnect on heal.
    disconnected: Mutex<Vec<usize>>,
    /// Bound on each probe of a service (`--connect-timeout`).
    within: Duration,
}

async fn docker(args: &[&str]) -> Result<String, String> {
    let out = tokio::time::timeout(Duration::from_secs(60), tokio::process::Command::new("docker").args(args).output())
        .await
        .map_err(|_| format!("docker {} did not finish within 60 s", args.join(" ")))?
        .map_err(|e| format!("cannot run docker: {e} (install Docker Engine)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("docker {}: {}", args.join(" "), err.lines().next().unwrap_or("").trim()))
    }
}

fn classify(service: &str) -> Option<(BackendKind, u16, bool)> {
    Some(match service {
        s if s.starts_with("etcd") => (BackendKind::Etcd, 2379, false),
        s if s.starts_with("zk") || s.starts_with("zookeeper") => (BackendKind::Zookeeper, 2181, false),
        "redis-replica" => (BackendKind::Redis, 6379, true),
        "redis" => (BackendKind::Redis, 6379, false),
        s if s.starts_with("redlock") => (BackendKind::Redlock, 6379, false),
        s if s.starts_with("postgres") => (BackendKind::Postgres, 5432, false),
        _ => return None,
    })
}

impl ComposeTarget {
    /// Find the project's services for `backends` and wait until they are healthy.
    /// `within` bounds each probe of a service (the run's `--connect-timeout`).
    pub async fn discover(project: &str, backends: &[BackendKind], within: Duration) -> anyhow::Result<ComposeTarget> {
        let names = docker(&["ps", "-a", "--filter", &format!("label=com.docker.compose.project={project}"), "--format", "{{.Names}}"])
            .await
            .map_err(anyhow::Error::msg)?;
        let names: Vec<&str> = names.lines().filter(|l| !l.trim().is_empty()).collect();
        if names.is_empty() {
            anyhow::bail!("no containers of compose project {project:?}: start them with `docker compose up -d` (or docker-compose up -d) in the repository (README: Docker)");
        }
        let mut args = vec!["inspect"];
        args.extend(names.iter().copied());
        let info: Vec<serde_json::Value> = serde_json::from_str(&docker(&args).await.map_err(anyhow::Error::msg)?)?;
        let mut services = Vec::new();
        for c in &info {
            let service = c["Config"]["Labels"]["com.docker.compose.service"].as_str().unwrap_or_default().to_string();
            let Some((backend, port, replica)) = classify(&service) else { continue };
            if !backends.contains(&backend) {
                continue;
            }
            let container = c["Name"].as_str().unwrap_or_default().trim_start_matches('/').to_string();
            let binding = &c["HostConfig"]["PortBindings"][format!("{port}/tcp")][0];
            let host_port = binding["HostPort"].as_str().unwrap_or_default();
            let host_ip = binding["HostIp"].as_str().unwrap_or_default();
            if host_port.is_empty() {
                anyhow::bail!("compose service {service} does not publish port {port}");
            }
            if host_ip != "127.0.0.1" {
                anyhow::bail!("compose service {service} publishes port {port} on {host_ip:?}: dlbench only talks to 127.0.0.1 (publish it as \"127.0.0.1:{host_port}:{port}\")");
            }
            let network = c["NetworkSettings"]["Networks"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default();
            services.push(Service { index: 0, backend, service, container, endpoint: format!("127.0.0.1:{host_port}"), network, replica });
        }
        services.sort_by(|a, b| (a.backend, a.replica, &a.service).cmp(&(b.backend, b.replica, &b.service)));
        for (i, s) in services.iter_mut().enumerate() {
            s.index = i;
        }
        let mut endpoints = Endpoints::default();
        for &k in backends {
            let eps: Vec<String> = services.iter().filter(|s| s.backend == k && !s.replica).map(|s| s.endpoint.clone()).collect();
            if eps.is_empty() {
                anyhow::bail!("compose project {project:?} has no {k} service running: `docker compose up -d` starts them all");
            }
            let mut sec = Section::new(eps);
            if k == BackendKind::Postgres {
                sec.user = Some("postgres".into());
                sec.database = Some("postgres".into());
            }
            endpoints.set(k, sec);
        }
        let t = ComposeTarget { project: project.to_string(), services, endpoints, disconnected: Mutex::default(), within };
        for &k in backends {
            t.wait_healthy(k).await.map_err(anyhow::Error::msg)?;
        }
        Ok(t)
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    fn of(&self, k: BackendKind) -> Vec<&Service> {
        self.services.iter().filter(|s| s.backend == k).collect()
    }

    /// Wait (up to 2 minutes) until the containers run, Docker calls them healthy, and they
    /// answer as a working cluster.
    pub async fn wait_healthy(&self, k: BackendKind) -> Result<(), String> {
        let started = Instant::now();
        let names: Vec<&str> = self.of(k).iter().map(|s| s.container.as_str()).collect();
        loop {
            let mut args = vec!["inspect", "--format", "{{.State.Running}} {{.State.Paused}} {{if .State.Health}}{{.State.Health.Status}}{{else}}healthy{{end}}"];
            args.extend(names.iter().copied());
            let states = docker(&args).await?;
            let containers_ok = states.lines().all(|l| l.trim() == "true false healthy");
            let eps: Vec<String> = self.of(k).iter().filter(|s| !s.replica).map(|s| s.endpoint.clone()).collect();
            let last = if containers_ok { probe::healthy(k, &eps, None, self.within).await } else { Err(format!("containers not healthy yet: {}", states.replace('\n', "; "))) };
            match last {
                Ok(()) => return Ok(()),
                Err(e) if started.elapsed() > Duration::from_secs(120) => return Err(format!("{k} on compose not healthy after 120 s: {e}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    fn by_ref(&self, n: &NodeRef) -> &Service {
        &self.services[n.index]
    }
}

fn node_ref(s: &Service) -> NodeRef {
    NodeRef { index: s.index, name: s.service.clone() }
}

#[async_trait]
impl Faults for ComposeTarget {
    fn nodes(&self, kind: BackendKind) -> Vec<NodeRef> {
        self.of(kind).into_iter().filter(|s| !s.replica).map(node_ref).collect()
    }

    fn cannot(&self, _kind: BackendKind, fault: FaultKind) -> Option<String> {
        match fault {
            FaultKind::Kill | FaultKind::Pause | FaultKind::Isolate => None,
            FaultKind::Partition => Some("on compose a partition cuts a node off entirely (docker network disconnect): use isolate".into()),
            FaultKind::Delay => Some("traffic delay is not available on compose".into()),
            FaultKind::Clock => Some("clock faults are not available on compose".into()),
            FaultKind::Failover => Some("failover is not available on compose".into()),
        }
    }

    async fn leader(&self, kind: BackendKind) -> Option<NodeRef> {
        let nodes: Vec<&Service> = self.of(kind).into_iter().filter(|s| !s.replica).collect();
        let eps: Vec<String> = nodes.iter().map(|s| s.endpoint.clone()).collect();
        let names: Vec<String> = nodes.iter().map(|s| s.service.clone()).collect();
        probe::leader(kind, &eps, &names, None, self.within).await.map(|i| node_ref(nodes[i]))
    }

    async fn kill(&self, n: &NodeRef) -> Result<(), String> {
        docker(&["kill", "--signal", "KILL", &self.by_ref(n).container]).await.map(|_| ())
    }

    async fn start(&self, n: &NodeRef) -> Result<(), String> {
        docker(&["start", &self.by_ref(n).container]).await.map(|_| ())
    }

    async fn pause(&self, n: &NodeRef) -> Result<(), String> {
        docker(&["pause", &self.by_ref(n).container]).await.map(|_| ())
    }

    async fn resume(&self, n: &NodeRef) -> Result<(), String> {
        docker(&["unpause", &self.by_ref(n).container]).await.map(|_| ())
    }

    async fn cut(&self, targets: &[NodeRef], _rest: &[NodeRef], _isolate: bool) -> Result<(), String> {
        for n in targets {
            let s = self.by_ref(n);
            docker(&["network", "disconnect", &s.network, &s.container]).await?;
            self.disconnected.lock().unwrap().push(n.index);
        }
        Ok(())
    }

    async fn heal_network(&self) -> Result<(), String> {
        let cut: Vec<usize> = std::mem::take(&mut *self.disconnected.lock().unwrap());
        for i in cut {
            let s = &self.services[i];
            // Back under its service name, which its peers resolve.
            docker(&["network", "connect", "--alias", &s.service, &s.network, &s.container]).await?;
        }
        Ok(())
    }

    async fn heal_all(&self, kind: BackendKind) -> Result<(), String> {
        self.heal_network().await?;
        for s in self.of(kind) {
            let state = docker(&["inspect", "--format", "{{.State.Running}} {{.State.Paused}}", &s.container]).await?;
            match state.trim() {
                "true true" => drop(docker(&["unpause", &s.container]).await?),
                "false false" => drop(docker(&["start", &s.container]).await?),
                _ => {}
            }
        }
        self.wait_healthy(kind).await
    }
}
