//! The network faults' machinery: tc in the server containers (partition), the delay
//! sidecar (delay), each container's address, and the round trip that shows a fault holds.

use std::time::{Duration, Instant};

use super::docker::{docker, in_container, own_container};
use super::{ComposeTarget, Service};

impl ComposeTarget {
    /// Delay sidecars of this project left by a dlbench that did not get to heal (killed):
    /// found by their label, which only this code sets, and removed.
    pub(super) async fn remove_stale_delayers(&self) {
        let Ok(ids) = docker(&["ps", "-aq", "--filter", &format!("label={DELAYER_LABEL}={}", self.project)]).await else { return };
        for id in ids.lines().filter(|l| !l.trim().is_empty()) {
            tracing::warn!("removing a delay sidecar left by an earlier run: {id}");
            let _ = docker(&["rm", "-f", id.trim()]).await;
        }
    }

    /// Start the delay sidecar in `s`'s network namespace and wait until its rules hold.
    pub(super) async fn start_delayer(&self, s: &Service, d: Duration) -> Result<(), String> {
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
    pub(super) async fn ip(&self, s: &Service) -> Result<String, String> {
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
    pub(super) async fn drop_to(&self, s: &Service, to: &[String]) -> Result<(), String> {
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
}

/// Set on every delay sidecar, with the compose project as its value.
const DELAYER_LABEL: &str = "dlbench.delay-sidecar-of";

/// The image the delay sidecar runs from: inside, the bench container's own image; on the
/// host, the bench image `docker compose --profile bench build` makes.
pub(super) async fn delay_image(inside: bool) -> Result<String, String> {
    const HOW: &str = "the compose delay fault runs `dlbench delay-node` from the bench image: build it with `docker compose --profile bench build` (after `cargo build --release`)";
    if inside {
        return docker(&["inspect", "--format", "{{.Image}}", &own_container()?]).await.map(|s| s.trim().to_string()).map_err(|e| format!("{e} ({HOW})"));
    }
    docker(&["image", "inspect", "--format", "{{.Id}}", BENCH_IMAGE]).await.map(|s| s.trim().to_string()).map_err(|_| format!("no image {BENCH_IMAGE}: {HOW}"))
}

/// The bench service's image (docker-compose.yml).
const BENCH_IMAGE: &str = "dlbench/bench:bookworm";

