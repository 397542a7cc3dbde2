//! What the layer between the bench and the servers costs on this target, measured once the
//! target is up and before the phases (issue 35): the round trip of each protocol's smallest
//! request to every node the run uses, idle and under load (`rtt.rs`), and the latency of a 4 KiB write +
//! fdatasync on each medium the servers' data is on, on the host's disk, and (compose) in a
//! container's writable layer (`fsync.rs`). The result is `summary.json`'s `target_costs`.
//!
//! Bounded and harmless: a few seconds in all, nothing written beyond a probe file that is
//! removed, and a figure that cannot be taken is recorded as not measured, with why; the
//! run goes on either way.

pub mod fsync;
pub mod rtt;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cluster::compose::ComposeTarget;
use crate::kind::BackendKind;
use crate::summary::medium::{DataOn, Figure, Fsync, LoadedRoundTrip, MediumKind, Path as Via, RoundTrip, TargetCosts};

/// Bound on one node's round trips, connecting included.
const NODE_BUDGET: Duration = Duration::from_secs(3);
/// Bound on all the round trips: nodes left when it runs out are recorded as not measured.
const RTT_BUDGET: Duration = Duration::from_secs(10);
/// Bound on one family's loaded round trip, connecting, warm-up and the window included.
const LOADED_BUDGET: Duration = Duration::from_secs(8);

/// Where one medium is timed.
pub enum Medium {
    /// A directory of this machine.
    Host(PathBuf),
    /// A directory inside a container (`docker exec`).
    Container { container: String, path: String, kind: MediumKind },
}

/// What to measure on one target.
pub struct Plan {
    /// Each server family with the endpoints the run's clients use.
    pub families: Vec<(BackendKind, Vec<String>)>,
    pub via: Via,
    pub password: Option<String>,
    /// One medium per kind (the figure is the kind's).
    pub media: Vec<Medium>,
    pub data_on: BTreeMap<String, DataOn>,
}

/// The local target: loopback (or dlbench's proxies), the servers' data under the runtime
/// directory on this machine's disk.
pub fn local_plan(t: &crate::cluster::local::LocalTarget, real: &[BackendKind]) -> Plan {
    let families: Vec<(BackendKind, Vec<String>)> =
        BackendKind::servers(real).into_iter().filter_map(|k| Some((k, t.endpoints().get(k)?.endpoints.clone()))).collect();
    let mut data_on = BTreeMap::new();
    let mut media = Vec::new();
    for (k, _) in &families {
        if let Some(n) = t.nodes_of(*k).first() {
            data_on.insert(k.name().to_string(), DataOn { kind: MediumKind::Host, path: n.data.display().to_string() });
            if media.is_empty() {
                media.push(Medium::Host(n.data.clone()));
            }
        }
    }
    let via = if t.net().is_some() { Via::LoopbackProxy } else { Via::Loopback };
    Plan { families, via, password: t.password().map(str::to_string), media, data_on }
}

/// The compose target: the bridge (by name inside the network, or through the published
/// ports), each family's data directory, a directory of the writable layer (`/var/tmp`),
/// and the host's disk where this process writes its results (`out`: inside the bench
/// container, a bind mount of the host's `./results`).
pub async fn compose_plan(t: &ComposeTarget, real: &[BackendKind], out: PathBuf) -> Plan {
    let families: Vec<(BackendKind, Vec<String>)> =
        BackendKind::servers(real).into_iter().filter_map(|k| Some((k, t.endpoints().get(k)?.endpoints.clone()))).collect();
    let via = if t.inside() { Via::ComposeNetwork } else { Via::PublishedPort };
    let mut data_on = BTreeMap::new();
    let mut media = vec![Medium::Host(out)];
    match t.data_dirs().await {
        Ok(dirs) => {
            for d in &dirs {
                data_on.insert(d.family.name().to_string(), DataOn { kind: d.kind, path: format!("{}:{}", d.container, d.path) });
            }
            if let Some(v) = dirs.iter().find(|d| d.kind == MediumKind::Volume) {
                media.push(Medium::Container { container: v.container.clone(), path: v.path.clone(), kind: MediumKind::Volume });
            }
            if let Some(first) = dirs.first() {
                media.push(Medium::Container { container: first.container.clone(), path: "/var/tmp".into(), kind: MediumKind::ContainerLayer });
            }
        }
        Err(e) => eprintln!("dlbench: target costs: cannot tell where the servers' data is: {e}"),
    }
    Plan { families, via, password: None, media, data_on }
}

/// Measure the plan: round trips node by node, then each medium, in sequence (parallel
/// writes would time each other's contention).
pub async fn measure(plan: Plan, compose: Option<&ComposeTarget>) -> TargetCosts {
    let started = Instant::now();
    let mut round_trips = Vec::new();
    for (k, eps) in &plan.families {
        for ep in eps {
            let left = RTT_BUDGET.saturating_sub(started.elapsed());
            let figure = if left.is_zero() {
                Figure::missing(format!("the round trips' budget ({}) ran out", crate::util::fmt_duration(RTT_BUDGET)))
            } else {
                rtt::node(*k, ep, plan.password.as_deref(), left.min(NODE_BUDGET)).await
            };
            round_trips.push(RoundTrip { service: k.name().to_string(), node: ep.clone(), via: plan.via, request: rtt::request(*k).to_string(), figure });
        }
    }
    let mut loaded = Vec::new();
    for (k, eps) in &plan.families {
        let l = rtt::loaded(*k, eps, plan.password.as_deref(), LOADED_BUDGET).await;
        loaded.push(LoadedRoundTrip {
            service: k.name().to_string(),
            nodes: eps.len(),
            connections_per_node: rtt::LOADED_CONNECTIONS,
            via: plan.via,
            request: rtt::request(*k).to_string(),
            per_second: l.per_second,
            figure: l.figure,
        });
    }
    let mut out = Vec::new();
    for m in plan.media {
        out.push(match m {
            Medium::Host(dir) => {
                let d = dir.clone();
                let figure = match tokio::time::timeout(fsync::BUDGET, tokio::task::spawn_blocking(move || fsync::host(&d))).await {
                    Ok(Ok(f)) => f,
                    Ok(Err(e)) => Figure::missing(format!("the timing task failed: {e}")),
                    Err(_) => Figure::missing(format!("{} writes took over {}", fsync::WARMUP + fsync::SAMPLES, crate::util::fmt_duration(fsync::BUDGET))),
                };
                Fsync { kind: MediumKind::Host, path: dir.display().to_string(), container: None, method: fsync::HOST_METHOD.into(), figure }
            }
            Medium::Container { container, path, kind } => {
                let figure = match compose {
                    Some(t) => match tokio::time::timeout(fsync::BUDGET, t.exec_sh(&container, &fsync::container_script(&path))).await {
                        Ok(Ok(o)) => fsync::dd_figure(&o),
                        Ok(Err(e)) => Figure::missing(e),
                        Err(_) => Figure::missing(format!("{} writes took over {}", fsync::WARMUP + fsync::SAMPLES, crate::util::fmt_duration(fsync::BUDGET))),
                    },
                    None => Figure::missing("no container target"),
                };
                Fsync { kind, path, container: Some(container), method: fsync::DD_METHOD.into(), figure }
            }
        });
    }
    let took_s = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0;
    TargetCosts { round_trips, loaded, fsync: out, data_on: plan.data_on, took_s }
}
