//! The nemesis's [`Faults`] on compose: `docker` commands, tc, the delay sidecar, the clock
//! shim's offset file and the Redis failover, with a probe that each took effect.

use std::time::Duration;

use async_trait::async_trait;

use super::docker::{docker, in_container};
use crate::cluster::probe::round_trip;
use super::redis::{redis_cli, retry_redis_cli};
use super::{classify, ComposeTarget, Service};
use crate::cluster::probe;
use crate::kind::BackendKind;
use crate::faultlog::Effect;
use crate::nemesis::{FaultKind, Faults, NodeRef};

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
            FaultKind::PowerLoss => Some("power loss needs the local target (dlbench-faultfs under each data directory)".into()),
        }
    }

    async fn leader(&self, kind: BackendKind, lock_ttl: Duration) -> Option<NodeRef> {
        let nodes: Vec<&Service> = self.of(kind).into_iter().filter(|s| !s.replica).collect();
        let eps: Vec<String> = nodes.iter().map(|s| s.endpoint.clone()).collect();
        let names: Vec<String> = nodes.iter().map(|s| s.service.clone()).collect();
        probe::leader(kind, &eps, &names, None, self.within, lock_ttl).await.map(|i| node_ref(nodes[i]))
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

    async fn observe(&self, kind: FaultKind, n: &NodeRef) -> Option<Effect> {
        // Docker's own record of the container: killed is exited, paused is paused.
        let want = match kind {
            FaultKind::Kill => "exited",
            FaultKind::Pause => "paused",
            // The servers' own view, as on the local target (the project's Redis has no
            // password).
            FaultKind::Clock => return crate::cluster::probe::clock_moved(&self.by_ref(n).endpoint, None, Duration::from_secs(5)).await,
            FaultKind::Failover => return crate::cluster::probe::promoted(&self.by_ref(n).endpoint, None, Duration::from_secs(5)).await,
            _ => return None,
        };
        let status = docker(&["inspect", "-f", "{{.State.Status}}", &self.by_ref(n).container]).await.ok()?;
        let status = status.trim();
        Some(if status == want { Effect::confirmed(format!("container {status}")) } else { Effect::none(format!("NOT {want}: container {status}")) })
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

    async fn evidence(&self, kind: FaultKind, targets: &[NodeRef], rest: &[NodeRef], d: Duration) -> Option<Effect> {
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
                let reach = match client {
                    Ok(ms) => format!("clients still reach {} ({ms:.0} ms to answer)", t.service),
                    Err(e) => format!("clients do not reach {} ({e})", t.service),
                };
                Some(if seen.trim() == "closed" {
                    Effect::confirmed(format!("dropped: {} → {}:{port} unanswered for 1.5 s; {reach}", t.service, r.service))
                } else {
                    Effect::none(format!("NOT dropped: {} reached {}:{port}; {reach}", t.service, r.service))
                })
            }
            FaultKind::Isolate => Some(match round_trip(&t.endpoint, t.backend, Duration::from_secs(2)).await {
                Ok(ms) => Effect::none(format!("NOT cut off: {} answered a client in {ms:.0} ms", t.service)),
                Err(e) => Effect::confirmed(format!("cut off: a client cannot reach {} ({e})", t.service)),
            }),
            FaultKind::Delay => {
                // A request and its answer cross the delayed node's interface once each, so
                // the round trip takes at least two delays. Not the TCP handshake: from the
                // host, Docker's port proxy completes that itself.
                let want = 2.0 * d.as_secs_f64() * 1e3;
                Some(match round_trip(&t.endpoint, t.backend, Duration::from_secs(10)).await {
                    Ok(ms) if ms >= 0.9 * want => Effect::confirmed(format!("held: a request to {} took {ms:.0} ms to answer (2 × {} ms expected)", t.service, d.as_millis())),
                    Ok(ms) => Effect::none(format!("NOT held: a request to {} took {ms:.0} ms to answer (2 × {} ms expected)", t.service, d.as_millis())),
                    Err(e) => Effect::unchecked(format!("no answer from {} ({e})", t.service)),
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
