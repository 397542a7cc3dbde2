//! The `compose` target: the services of `docker-compose.yml`, found through Docker by their
//! compose labels, health-waited, and broken and mended with `docker` commands.
//!
//! Two places to run from: the host, through the ports the services publish on 127.0.0.1,
//! or the compose file's `bench` service (DLBENCH_COMPOSE_INSIDE=1), on the project network,
//! by service name, with no port proxy between client and server. The faults are the same
//! from both: `docker kill`/`start`, `pause`/`unpause`, `network disconnect` (isolate),
//! `tc` in the server containers (`partition`: drop packets between the two sides, clients
//! still reach both), a sidecar from the bench image in the node's network namespace
//! (`delay`: `dlbench delay-node` holds its packets in a netfilter queue, see
//! [`crate::nemesis::nfdelay`]; this machine's kernel has no netem), and the clock shim the
//! redlock services preload (`clock`: `docker exec` writes the offset file). While a
//! partition or delay holds, a probe through it checks that it does what it says, and the
//! fault's end record says what the probe saw.
//!
//! Service names map to backends: `etcd*` etcd, `zk*` ZooKeeper, `redis` Redis (and
//! `redis-replica`, its replica), `redlock*` Redlock, `postgres` PostgreSQL, `mariadb` MariaDB. Every published
//! port must be bound to 127.0.0.1.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::endpoints::{Endpoints, Section};
use crate::kind::BackendKind;
use crate::nemesis::NodeRef;
use crate::cluster::probe;

mod docker;
mod faults;
pub mod media;
mod network;
mod redis;

use docker::{docker, inside, own_project};
use network::delay_image;

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
    /// The clock shim's offset file inside the container (DLBENCH_CLOCK_FILE), if any.
    clock_file: Option<String>,
}

pub struct ComposeTarget {
    project: String,
    services: Vec<Service>,
    endpoints: Endpoints,
    /// Containers the nemesis disconnected, to reconnect on heal.
    disconnected: Mutex<Vec<usize>>,
    /// Containers the nemesis gave a tc qdisc (delay, partition), to clear on heal.
    shaped: Mutex<Vec<usize>>,
    /// Running inside the project network (the bench service).
    inside: bool,
    /// The image the delay sidecar runs from (the bench image), or why there is none.
    delay_image: Result<String, String>,
    /// Delay sidecars running now (container names), to stop on heal.
    delayers: Mutex<Vec<String>>,
    /// After a failover, the service index of the Redis primary now (the compose file's
    /// `redis` until then), until heal_all puts the roles and names back.
    primary: Mutex<Option<usize>>,
    /// Bound on each probe of a service (`--connect-timeout`).
    within: Duration,
}

/// Set in the compose file's bench service: dlbench runs in a container on the project
/// network.
pub const INSIDE_VAR: &str = "DLBENCH_COMPOSE_INSIDE";

fn classify(service: &str) -> Option<(BackendKind, u16, bool)> {
    Some(match service {
        s if s.starts_with("etcd") => (BackendKind::Etcd, 2379, false),
        s if s.starts_with("zk") || s.starts_with("zookeeper") => (BackendKind::Zookeeper, 2181, false),
        "redis-replica" => (BackendKind::Redis, 6379, true),
        "redis" => (BackendKind::Redis, 6379, false),
        s if s.starts_with("redlock") => (BackendKind::Redlock, 6379, false),
        s if s.starts_with("postgres") => (BackendKind::Postgres, 5432, false),
        s if s.starts_with("mariadb") => (BackendKind::Mariadb, 3306, false),
        _ => return None,
    })
}

impl ComposeTarget {
    /// Find the project's services for `backends` and wait until they are healthy.
    /// `within` bounds each probe of a service (the run's `--connect-timeout`).
    pub async fn discover(project: &str, backends: &[BackendKind], within: Duration) -> anyhow::Result<ComposeTarget> {
        // The services of the designs asked for (the advisory designs use postgres's).
        let backends = &BackendKind::servers(backends)[..];
        let inside = inside();
        let own;
        let project = if inside {
            own = own_project().await.map_err(anyhow::Error::msg)?;
            own.as_str()
        } else {
            project
        };
        let mut services = Vec::new();
        for c in &containers(project).await? {
            services.extend(Service::from_container(c, backends, inside)?);
        }
        services.sort_by(|a, b| (a.backend, a.replica, &a.service).cmp(&(b.backend, b.replica, &b.service)));
        for (i, s) in services.iter_mut().enumerate() {
            s.index = i;
        }
        let endpoints = endpoints_of(project, backends, &services)?;
        let delay_image = delay_image(inside).await;
        let t = ComposeTarget {
            project: project.to_string(),
            services,
            endpoints,
            disconnected: Mutex::default(),
            shaped: Mutex::default(),
            inside,
            delay_image,
            delayers: Mutex::default(),
            primary: Mutex::default(),
            within,
        };
        t.remove_stale_delayers().await;
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

    /// Whether this run talks to the services from inside the project network.
    pub fn inside(&self) -> bool {
        self.inside
    }

    fn of(&self, k: BackendKind) -> Vec<&Service> {
        self.services.iter().filter(|s| s.backend == k.server()).collect()
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

/// `docker inspect` of every container of the compose project, running or not.
async fn containers(project: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let names = docker(&["ps", "-a", "--filter", &format!("label=com.docker.compose.project={project}"), "--format", "{{.Names}}"])
        .await
        .map_err(anyhow::Error::msg)?;
    let names: Vec<&str> = names.lines().filter(|l| !l.trim().is_empty()).collect();
    if names.is_empty() {
        anyhow::bail!("no containers of compose project {project:?}: start them with `docker compose up -d` (or docker-compose up -d) in the repository (docs/docker.md)");
    }
    let mut args = vec!["inspect"];
    args.extend(names.iter().copied());
    Ok(serde_json::from_str(&docker(&args).await.map_err(anyhow::Error::msg)?)?)
}

impl Service {
    /// The service a container (its `docker inspect`) runs, if it is a server of `backends`
    /// (index 0 until the services are sorted).
    fn from_container(c: &serde_json::Value, backends: &[BackendKind], inside: bool) -> anyhow::Result<Option<Service>> {
        let service = c["Config"]["Labels"]["com.docker.compose.service"].as_str().unwrap_or_default().to_string();
        let Some((backend, port, replica)) = classify(&service) else { return Ok(None) };
        if !backends.contains(&backend) {
            return Ok(None);
        }
        let container = c["Name"].as_str().unwrap_or_default().trim_start_matches('/').to_string();
        let network = c["NetworkSettings"]["Networks"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default();
        let clock_file = c["Config"]["Env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str()?.strip_prefix("DLBENCH_CLOCK_FILE="))
            .next()
            .map(str::to_string);
        let endpoint = if inside {
            // By name on the project network: no published port, no proxy.
            format!("{service}:{port}")
        } else {
            published(c, &service, port)?
        };
        Ok(Some(Service { index: 0, backend, service, container, endpoint, network, replica, clock_file }))
    }
}

/// The host address where a container publishes `port`, which must be bound to 127.0.0.1.
fn published(c: &serde_json::Value, service: &str, port: u16) -> anyhow::Result<String> {
    let binding = &c["HostConfig"]["PortBindings"][format!("{port}/tcp")][0];
    let host_port = binding["HostPort"].as_str().unwrap_or_default();
    let host_ip = binding["HostIp"].as_str().unwrap_or_default();
    if host_port.is_empty() {
        anyhow::bail!("compose service {service} does not publish port {port}");
    }
    if host_ip != "127.0.0.1" {
        anyhow::bail!("compose service {service} publishes port {port} on {host_ip:?}: dlbench only talks to 127.0.0.1 (publish it as \"127.0.0.1:{host_port}:{port}\")");
    }
    Ok(format!("127.0.0.1:{host_port}"))
}

/// Each backend's endpoints: its services, without the replicas. Every backend asked for
/// must have one.
fn endpoints_of(project: &str, backends: &[BackendKind], services: &[Service]) -> anyhow::Result<Endpoints> {
    let mut endpoints = Endpoints::default();
    for &k in backends {
        let eps: Vec<String> = services.iter().filter(|s| s.backend == k && !s.replica).map(|s| s.endpoint.clone()).collect();
        if eps.is_empty() {
            anyhow::bail!("compose project {project:?} has no {k} service running: `docker compose up -d` starts them all");
        }
        endpoints.set(k, Section::own_servers(k, eps));
    }
    Ok(endpoints)
}
