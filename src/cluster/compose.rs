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

/// Set in the compose file's bench service: dlbench runs in a container on the project
/// network.
pub const INSIDE_VAR: &str = "DLBENCH_COMPOSE_INSIDE";

fn inside() -> bool {
    std::env::var(INSIDE_VAR).is_ok_and(|v| v == "1")
}

/// Inside the bench container: its own container (Docker sets the hostname to the id).
fn own_container() -> Result<String, String> {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).map_err(|e| format!("cannot read /etc/hostname: {e}"))
}

/// Inside the bench container: the compose project it belongs to, from its own labels.
async fn own_project() -> Result<String, String> {
    let host = own_container()?;
    let p = docker(&["inspect", "--format", "{{index .Config.Labels \"com.docker.compose.project\"}}", &host]).await?;
    let p = p.trim().to_string();
    if p.is_empty() {
        return Err(format!("{INSIDE_VAR}=1, but container {} has no compose project label: run it as `docker compose run --rm bench ...`", host));
    }
    Ok(p)
}

/// Run `script` in the container with `$dev` set to its network interface (the one its
/// default route uses), for tc.
async fn in_container(container: &str, script: &str) -> Result<String, String> {
    let full = format!("dev=$(ip -o -4 route show to default | awk '{{print $5; exit}}'); [ -n \"$dev\" ] || dev=eth0; {script}");
    docker(&["exec", container, "sh", "-c", &full]).await.map_err(|e| {
        if e.contains("not found") {
            format!("{e} (the image has no tc: rebuild it, `docker compose build`, which installs iproute2)")
        } else if e.contains("Operation not permitted") {
            format!("{e} (tc needs cap_add: [NET_ADMIN], as docker-compose.yml gives every server)")
        } else {
            e
        }
    })
}

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
        let names = docker(&["ps", "-a", "--filter", &format!("label=com.docker.compose.project={project}"), "--format", "{{.Names}}"])
            .await
            .map_err(anyhow::Error::msg)?;
        let names: Vec<&str> = names.lines().filter(|l| !l.trim().is_empty()).collect();
        if names.is_empty() {
            anyhow::bail!("no containers of compose project {project:?}: start them with `docker compose up -d` (or docker-compose up -d) in the repository (docs/docker.md)");
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
            let network = c["NetworkSettings"]["Networks"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default();
            let clock_file = c["Config"]["Env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str()?.strip_prefix("DLBENCH_CLOCK_FILE="))
                .next()
                .map(str::to_string);
            if inside {
                // By name on the project network: no published port, no proxy.
                let endpoint = format!("{service}:{port}");
                services.push(Service { index: 0, backend, service, container, endpoint, network, replica, clock_file });
                continue;
            }
            let binding = &c["HostConfig"]["PortBindings"][format!("{port}/tcp")][0];
            let host_port = binding["HostPort"].as_str().unwrap_or_default();
            let host_ip = binding["HostIp"].as_str().unwrap_or_default();
            if host_port.is_empty() {
                anyhow::bail!("compose service {service} does not publish port {port}");
            }
            if host_ip != "127.0.0.1" {
                anyhow::bail!("compose service {service} publishes port {port} on {host_ip:?}: dlbench only talks to 127.0.0.1 (publish it as \"127.0.0.1:{host_port}:{port}\")");
            }
            services.push(Service { index: 0, backend, service, container, endpoint: format!("127.0.0.1:{host_port}"), network, replica, clock_file });
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
            endpoints.set(k, Section::own_servers(k, eps));
        }
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

    /// Delay sidecars of this project left by a dlbench that did not get to heal (killed):
    /// found by their label, which only this code sets, and removed.
    async fn remove_stale_delayers(&self) {
        let Ok(ids) = docker(&["ps", "-aq", "--filter", &format!("label={DELAYER_LABEL}={}", self.project)]).await else { return };
        for id in ids.lines().filter(|l| !l.trim().is_empty()) {
            tracing::warn!("removing a delay sidecar left by an earlier run: {id}");
            let _ = docker(&["rm", "-f", id.trim()]).await;
        }
    }

    /// Start the delay sidecar in `s`'s network namespace and wait until its rules hold.
    async fn start_delayer(&self, s: &Service, d: Duration) -> Result<(), String> {
        let image = self.delay_image.as_ref().map_err(|e| e.clone())?;
        let name = format!("{}-delay", s.container);
        let _ = docker(&["rm", "-f", &name]).await;
        let label = format!("{DELAYER_LABEL}={}", self.project);
        let net = format!("container:{}", s.container);
        let ms = format!("{}ms", d.as_millis());
        docker(&[
            "run", "-d", "--name", &name, "--label", &label, "--network", &net, "--cap-add", "NET_ADMIN", "--entrypoint", "dlbench", image,
            "delay-node", "--delay", &ms, "--max", "30m",
        ])
        .await?;
        self.delayers.lock().unwrap().push(name.clone());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let logs = match tokio::process::Command::new("docker").args(["logs", &name]).output().await {
                Ok(o) => format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
                Err(e) => e.to_string(),
            };
            if logs.contains(crate::nemesis::nfdelay::READY) {
                return Ok(());
            }
            let state = docker(&["inspect", "--format", "{{.State.Running}}", &name]).await.unwrap_or_default();
            if state.trim() == "false" || Instant::now() > deadline {
                return Err(format!("the delay sidecar for {} did not start: {}", s.service, logs.trim().lines().last().unwrap_or("no output")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A container's address on its project network, now (a restart may change it).
    async fn ip(&self, s: &Service) -> Result<String, String> {
        let f = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", s.network);
        let ip = docker(&["inspect", "--format", &f, &s.container]).await?.trim().to_string();
        if ip.is_empty() || ip == "<no value>" {
            return Err(format!("{} has no address on network {}", s.service, s.network));
        }
        Ok(ip)
    }

    /// Drop every packet `s` sends to `to`: u32 filters send them to an htb class whose
    /// queue holds nothing (pfifo limit 0). Not `action drop`, which needs act_gact, nor a
    /// prio qdisc: kernels without those modules (this project's CI machine) have htb.
    async fn drop_to(&self, s: &Service, to: &[String]) -> Result<(), String> {
        let mut script = String::from(
            "tc qdisc replace dev \"$dev\" root handle 1: htb default 10 2>/dev/null \
             && tc class add dev \"$dev\" parent 1: classid 1:10 htb rate 10gbit 2>/dev/null \
             && tc class add dev \"$dev\" parent 1: classid 1:20 htb rate 10gbit 2>/dev/null \
             && tc qdisc add dev \"$dev\" parent 1:20 handle 20: pfifo limit 0",
        );
        for ip in to {
            script.push_str(&format!(" && tc filter add dev \"$dev\" parent 1: protocol ip prio 1 u32 match ip dst {ip}/32 flowid 1:20"));
        }
        self.shaped.lock().unwrap().push(s.index);
        in_container(&s.container, &script).await.map(|_| ())
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

    /// Reconnect `s` to its network under exactly `aliases`.
    async fn connect_as(&self, s: &Service, aliases: &[&str]) -> Result<(), String> {
        let mut args = vec!["network", "connect"];
        for a in aliases {
            args.extend(["--alias", a]);
        }
        args.extend([s.network.as_str(), s.container.as_str()]);
        docker(&args).await.map(|_| ())
    }

    async fn rename(&self, s: &Service, aliases: &[&str]) -> Result<(), String> {
        docker(&["network", "disconnect", &s.network, &s.container]).await?;
        self.connect_as(s, aliases).await
    }

    /// After a failover, the compose file's roles and names again: the `redis` service the
    /// primary under its own name, the replica under its own, replicating from it. The data
    /// written on the promoted replica is not carried back (the run is over).
    async fn unswap(&self) -> Result<(), String> {
        if self.primary.lock().unwrap().is_none() {
            return Ok(());
        }
        let (home, replica) = self.redis_pair()?;
        retry_redis_cli(&home.container, "REPLICAOF NO ONE").await?;
        self.rename(&home, &[&home.service]).await?;
        self.rename(&replica, &[&replica.service]).await?;
        retry_redis_cli(&replica.container, &format!("REPLICAOF {} 6379", home.service)).await?;
        *self.primary.lock().unwrap() = None;
        Ok(())
    }

    /// The compose file's Redis primary (`redis`) and replica (`redis-replica`).
    fn redis_pair(&self) -> Result<(Service, Service), String> {
        let k = BackendKind::Redis;
        let home = self.of(k).into_iter().find(|s| !s.replica).ok_or("no redis primary")?.clone();
        let replica = self.of(k).into_iter().find(|s| s.replica).ok_or("no redis replica")?.clone();
        Ok((home, replica))
    }

    /// The names a Redis container answers to in a role: the primary is also `redis`
    /// (what clients resolve); the compose file's `redis`, while a replica, is `redis-old`.
    fn redis_aliases(&self, s: &Service, primary: bool, home: &Service) -> Vec<String> {
        match (s.index == home.index, primary) {
            (true, true) => vec![home.service.clone()],
            (true, false) => vec![format!("{}-old", home.service)],
            (false, true) => vec![s.service.clone(), home.service.clone()],
            (false, false) => vec![s.service.clone()],
        }
    }
}

async fn redis_cli(container: &str, command: &str) -> Result<String, String> {
    let mut args = vec!["exec", container, "redis-cli"];
    args.extend(command.split_whitespace());
    let out = docker(&args).await?;
    if out.starts_with("ERR") || out.contains("(error)") {
        return Err(format!("{container}: redis-cli {command}: {}", out.trim()));
    }
    Ok(out)
}

/// A container just started needs a moment before redis-server listens: retry, bounded.
async fn retry_redis_cli(container: &str, command: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match redis_cli(container, command).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Set on every delay sidecar, with the compose project as its value.
const DELAYER_LABEL: &str = "dlbench.delay-sidecar-of";

/// The image the delay sidecar runs from: inside, the bench container's own image; on the
/// host, the bench image `docker compose --profile bench build` makes.
async fn delay_image(inside: bool) -> Result<String, String> {
    const HOW: &str = "the compose delay fault runs `dlbench delay-node` from the bench image: build it with `docker compose --profile bench build` (after `cargo build --release`)";
    if inside {
        return docker(&["inspect", "--format", "{{.Image}}", &own_container()?]).await.map(|s| s.trim().to_string()).map_err(|e| format!("{e} ({HOW})"));
    }
    docker(&["image", "inspect", "--format", "{{.Id}}", BENCH_IMAGE]).await.map(|s| s.trim().to_string()).map_err(|_| format!("no image {BENCH_IMAGE}: {HOW}"))
}

/// The bench service's image (docker-compose.yml).
const BENCH_IMAGE: &str = "dlbench/bench:bookworm";

/// The time from sending a server its smallest request to the first byte of its answer, in
/// ms (the connection is opened first and not counted; MariaDB, which speaks first, from
/// the connect to its greeting).
async fn round_trip(addr: &str, kind: BackendKind, within: Duration) -> Result<f64, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask: &[u8] = match kind.server() {
        BackendKind::Redis | BackendKind::Redlock => b"PING\r\n",
        BackendKind::Etcd => b"GET /health HTTP/1.1\r\nHost: etcd\r\n\r\n",
        BackendKind::Zookeeper => b"srvr",
        // SSLRequest: the server answers one byte, S or N.
        BackendKind::Postgres => &[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f],
        // MariaDB speaks first: the time from connecting to its greeting's first byte.
        BackendKind::Mariadb => b"",
        _ => return Err(format!("no probe for {kind}")),
    };
    let go = async {
        let before = Instant::now();
        let mut c = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        // A server that speaks first is timed from the connect.
        let t0 = if ask.is_empty() { before } else { Instant::now() };
        c.write_all(ask).await.map_err(|e| e.to_string())?;
        let mut b = [0u8; 1];
        match c.read(&mut b).await {
            Ok(1) => Ok(t0.elapsed().as_secs_f64() * 1e3),
            Ok(_) => Err("closed without an answer".to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    tokio::time::timeout(within, go).await.map_err(|_| format!("no answer in {} s", within.as_secs_f64()))?
}

fn node_ref(s: &Service) -> NodeRef {
    NodeRef { index: s.index, name: s.service.clone() }
}

#[async_trait]
impl Faults for ComposeTarget {
    fn nodes(&self, kind: BackendKind) -> Vec<NodeRef> {
        self.of(kind).into_iter().filter(|s| !s.replica).map(node_ref).collect()
    }

    fn cannot(&self, kind: BackendKind, fault: FaultKind) -> Option<String> {
        match fault {
            FaultKind::Kill | FaultKind::Pause | FaultKind::Isolate | FaultKind::Partition => None,
            FaultKind::Delay => self.delay_image.as_ref().err().cloned(),
            FaultKind::Clock => (!self.of(kind).iter().any(|s| s.clock_file.is_some()))
                .then(|| format!("no {kind} service runs under the clock shim (docker-compose.yml preloads it into the redlock services)")),
            FaultKind::Failover if kind.server() != BackendKind::Redis => Some(format!("{kind} has no replica to fail over to")),
            FaultKind::Failover if !self.of(kind).iter().any(|s| s.replica) => {
                Some("no redis-replica service is running: start it with `docker compose --profile replica up -d`".into())
            }
            FaultKind::Failover if !self.inside => Some(
                "a compose failover moves the name `redis` to the replica, which only the bench inside the network resolves (the host's published port stays on the old primary): run `docker compose run --rm bench ...`".into(),
            ),
            FaultKind::Failover => None,
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

    async fn observe(&self, kind: FaultKind, n: &NodeRef) -> Option<String> {
        // Docker's own record of the container: killed is exited, paused is paused.
        let want = match kind {
            FaultKind::Kill => "exited",
            FaultKind::Pause => "paused",
            _ => return None,
        };
        let status = docker(&["inspect", "-f", "{{.State.Status}}", &self.by_ref(n).container]).await.ok()?;
        let status = status.trim();
        Some(if status == want { format!("container {status}") } else { format!("NOT {want}: container {status}") })
    }

    async fn cut(&self, targets: &[NodeRef], rest: &[NodeRef], isolate: bool) -> Result<(), String> {
        if !isolate {
            // Partition: the two sides drop each other's packets; clients reach both.
            let mut ips = std::collections::HashMap::new();
            for n in targets.iter().chain(rest) {
                ips.insert(n.index, self.ip(self.by_ref(n)).await?);
            }
            let side = |ns: &[NodeRef]| ns.iter().map(|n| ips[&n.index].clone()).collect::<Vec<_>>();
            for n in targets {
                self.drop_to(self.by_ref(n), &side(rest)).await?;
            }
            for n in rest {
                self.drop_to(self.by_ref(n), &side(targets)).await?;
            }
            return Ok(());
        }
        for n in targets {
            let s = self.by_ref(n);
            docker(&["network", "disconnect", &s.network, &s.container]).await?;
            self.disconnected.lock().unwrap().push(n.index);
        }
        Ok(())
    }

    async fn slow(&self, targets: &[NodeRef], d: Duration) -> Result<(), String> {
        for n in targets {
            self.start_delayer(self.by_ref(n), d).await?;
        }
        Ok(())
    }

    async fn evidence(&self, kind: FaultKind, targets: &[NodeRef], rest: &[NodeRef], d: Duration) -> Option<String> {
        let t = self.by_ref(targets.first()?);
        match kind {
            FaultKind::Partition => {
                // From inside the cut node, a connection to a node on the other side: its SYN
                // must go unanswered. And clients must still reach the cut node.
                let r = self.by_ref(rest.first()?);
                let ip = self.ip(r).await.ok()?;
                let port = classify(&r.service)?.1;
                let probe = format!("timeout 1.5 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' 2>/dev/null && echo open || echo closed");
                let seen = docker(&["exec", &t.container, "bash", "-c", &probe]).await.ok()?;
                let client = round_trip(&t.endpoint, t.backend, Duration::from_secs(2)).await;
                let cut = if seen.trim() == "closed" { format!("dropped: {} → {}:{port} unanswered for 1.5 s", t.service, r.service) } else { format!("NOT dropped: {} reached {}:{port}", t.service, r.service) };
                let reach = match client {
                    Ok(ms) => format!("clients still reach {} ({ms:.0} ms to answer)", t.service),
                    Err(e) => format!("clients do not reach {} ({e})", t.service),
                };
                Some(format!("{cut}; {reach}"))
            }
            FaultKind::Isolate => Some(match round_trip(&t.endpoint, t.backend, Duration::from_secs(2)).await {
                Ok(ms) => format!("NOT cut off: {} answered a client in {ms:.0} ms", t.service),
                Err(e) => format!("cut off: a client cannot reach {} ({e})", t.service),
            }),
            FaultKind::Delay => {
                // A request and its answer cross the delayed node's interface once each, so
                // the round trip takes at least two delays. Not the TCP handshake: from the
                // host, Docker's port proxy completes that itself.
                let want = 2.0 * d.as_secs_f64() * 1e3;
                Some(match round_trip(&t.endpoint, t.backend, Duration::from_secs(10)).await {
                    Ok(ms) if ms >= 0.9 * want => format!("held: a request to {} took {ms:.0} ms to answer (2 × {} ms expected)", t.service, d.as_millis()),
                    Ok(ms) => format!("NOT held: a request to {} took {ms:.0} ms to answer (2 × {} ms expected)", t.service, d.as_millis()),
                    Err(e) => format!("unknown: no answer from {} ({e})", t.service),
                })
            }
            _ => None,
        }
    }

    /// Kill the primary, promote the replica (`REPLICAOF NO ONE`) and give it the name
    /// `redis` on the project network, so clients that reconnect reach it, as a Sentinel
    /// or a DNS failover would send them.
    async fn failover(&self, kind: BackendKind) -> Result<(NodeRef, NodeRef), String> {
        if let Some(why) = self.cannot(kind, FaultKind::Failover) {
            return Err(why);
        }
        // The primary now: the compose file's, or the one an earlier failover promoted
        // (whose fault has ended, so the other is back, replicating from it).
        let (home, replica) = self.redis_pair()?;
        let now = self.primary.lock().unwrap().unwrap_or(home.index);
        let (old, new) = if now == home.index { (home.clone(), replica) } else { (replica, home.clone()) };
        docker(&["kill", "--signal", "KILL", &old.container]).await?;
        redis_cli(&new.container, "REPLICAOF NO ONE").await?;
        let names = self.redis_aliases(&new, true, &home);
        self.rename(&new, &names.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        *self.primary.lock().unwrap() = Some(new.index);
        Ok((node_ref(&old), node_ref(&new)))
    }

    /// The old primary comes back (empty: it was killed), under a name of its own, as a
    /// replica of the new one; clients stay on the new primary until heal_all.
    async fn undo_failover(&self, old: &NodeRef, _new: &NodeRef) -> Result<(), String> {
        let old = self.by_ref(old).clone();
        let (home, _) = self.redis_pair()?;
        // Off the network before it starts, so it never answers to `redis` beside the new
        // primary; then back under its replica names.
        let _ = docker(&["network", "disconnect", &old.network, &old.container]).await;
        docker(&["start", &old.container]).await?;
        let names = self.redis_aliases(&old, false, &home);
        self.connect_as(&old, &names.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        // `redis` is the new primary's name now.
        retry_redis_cli(&old.container, &format!("REPLICAOF {} 6379", home.service)).await
    }

    async fn shift_clock(&self, n: &NodeRef, ms: i64) -> Result<(), String> {
        let s = self.by_ref(n);
        let f = s.clock_file.as_ref().ok_or_else(|| format!("{} does not run under the clock shim", s.service))?;
        docker(&["exec", &s.container, "sh", "-c", &format!("echo {ms} > {f}.tmp && mv {f}.tmp {f}")]).await.map(|_| ())
    }

    async fn heal_network(&self) -> Result<(), String> {
        let delayers: Vec<String> = std::mem::take(&mut *self.delayers.lock().unwrap());
        for name in delayers {
            // SIGTERM: the sidecar lets its held packets go and removes its rules.
            let _ = docker(&["stop", "-t", "10", &name]).await;
            let _ = docker(&["rm", "-f", &name]).await;
        }
        let mut shaped: Vec<usize> = std::mem::take(&mut *self.shaped.lock().unwrap());
        shaped.sort_unstable();
        shaped.dedup();
        for i in shaped {
            let s = &self.services[i];
            // A container restarted since has a fresh network namespace, and no qdisc.
            let _ = in_container(&s.container, "tc qdisc del dev \"$dev\" root 2>/dev/null || true").await;
        }
        let cut: Vec<usize> = std::mem::take(&mut *self.disconnected.lock().unwrap());
        for i in cut {
            let s = &self.services[i];
            // Back under its service name, which its peers resolve.
            docker(&["network", "connect", "--alias", &s.service, &s.network, &s.container]).await?;
        }
        Ok(())
    }

    async fn heal_all(&self, kind: BackendKind) -> Result<(), String> {
        // Running and resumed first: tc and the clock file need `docker exec`.
        for s in self.of(kind) {
            let state = docker(&["inspect", "--format", "{{.State.Running}} {{.State.Paused}}", &s.container]).await?;
            match state.trim() {
                "true true" => drop(docker(&["unpause", &s.container]).await?),
                "false false" => drop(docker(&["start", &s.container]).await?),
                _ => {}
            }
        }
        self.heal_network().await?;
        if kind.server() == BackendKind::Redis {
            self.unswap().await?;
        }
        for s in self.of(kind).into_iter().filter(|s| s.clock_file.is_some()) {
            self.shift_clock(&node_ref(s), 0).await?;
        }
        self.wait_healthy(kind).await
    }
}
