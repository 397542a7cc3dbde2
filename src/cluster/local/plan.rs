//! The local target's first stage: which nodes each server family gets, on which claimed
//! ports, with what configuration, before anything runs.

use std::path::Path;

use super::bins::Binaries;
use super::ports::PortClaims;
use super::{etcd, mariadb, nats, postgres, redis, zookeeper, NodePlan, TargetError, TargetOptions};
use crate::kind::BackendKind;

/// A node planned, with its place in the target.
pub(super) struct Planned {
    pub backend: BackendKind,
    pub plan: NodePlan,
    /// A Redis replica rather than a client-facing node.
    pub replica: bool,
    /// Peer proxies: (front port, real port).
    pub peers: Vec<(u16, u16)>,
}

impl Planned {
    /// A client-facing node with no peer proxies.
    fn node(backend: BackendKind, plan: NodePlan) -> Planned {
        Planned { backend, plan, replica: false, peers: vec![] }
    }
}

/// What every family's plan is made from.
pub(super) struct Layout<'a> {
    pub bins: &'a Binaries,
    /// The runtime directory: data, configuration, secrets.
    pub rt: &'a Path,
    /// `<run dir>/servers`: logs and data links.
    pub dir: &'a Path,
    pub options: &'a TargetOptions,
    /// etcd's initial cluster token.
    pub token: &'a str,
    /// The clock shim, when the Redlock nodes run under it.
    pub shim: Option<&'a Path>,
}

/// `kind`'s server settings at the plan's durability level.
fn durability(options: &TargetOptions, kind: BackendKind) -> Vec<(&'static str, &'static str)> {
    crate::durability::settings(kind, options.durability).options
}

fn io(e: std::io::Error) -> TargetError {
    TargetError::Setup(e.to_string())
}

fn claim(ports: &mut PortClaims, n: usize) -> Result<Vec<u16>, TargetError> {
    ports.claim_n(n).map_err(io)
}

impl Layout<'_> {
    /// Every node of `backends` (server families), in order.
    pub async fn plan(&self, backends: &[BackendKind], ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let mut planned = Vec::new();
        for &k in backends {
            planned.extend(match k {
                BackendKind::Etcd => self.etcd(ports)?,
                BackendKind::Zookeeper => self.zookeeper(ports)?,
                BackendKind::Redis => self.redis(ports)?,
                BackendKind::Redlock => self.redlock(ports)?,
                BackendKind::Postgres => self.postgres(ports).await?,
                BackendKind::Mariadb => self.mariadb(ports).await?,
                BackendKind::Nats => self.nats(ports)?,
                // Designs on another family's servers were mapped to it above.
                _ => vec![],
            });
        }
        Ok(planned)
    }

    fn etcd(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 9)?;
        let ports: Vec<etcd::EtcdPorts> = (0..3)
            .map(|i| etcd::EtcdPorts {
                client: p[3 * i],
                peer: p[3 * i + 1],
                peer_front: self.options.proxies.then_some(p[3 * i + 2]),
            })
            .collect();
        let plans = etcd::specs(self.bins.etcd.as_ref().unwrap(), self.rt, self.dir, &ports, self.token);
        Ok(plans
            .into_iter()
            .zip(&ports)
            .map(|(plan, pt)| {
                let peers = pt.peer_front.map(|f| vec![(f, pt.peer)]).unwrap_or_default();
                Planned { backend: BackendKind::Etcd, plan, replica: false, peers }
            })
            .collect())
    }

    fn nats(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 9)?;
        let ports: Vec<nats::NatsPorts> = (0..3)
            .map(|i| nats::NatsPorts { client: p[3 * i], route: p[3 * i + 1], route_front: self.options.proxies.then_some(p[3 * i + 2]) })
            .collect();
        let plans = nats::specs(self.bins.nats_server.as_ref().unwrap(), self.rt, self.dir, &ports).map_err(io)?;
        Ok(plans
            .into_iter()
            .zip(&ports)
            .map(|(plan, pt)| {
                let peers = pt.route_front.map(|f| vec![(f, pt.route)]).unwrap_or_default();
                Planned { backend: BackendKind::Nats, plan, replica: false, peers }
            })
            .collect())
    }

    fn zookeeper(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 15)?;
        let ports: Vec<zookeeper::ZkPorts> = (0..3)
            .map(|i| zookeeper::ZkPorts {
                client: p[5 * i],
                quorum: p[5 * i + 1],
                election: p[5 * i + 2],
                fronts: self.options.proxies.then_some((p[5 * i + 3], p[5 * i + 4])),
            })
            .collect();
        let plans = zookeeper::specs(self.bins.java.as_ref().unwrap(), self.bins.zookeeper_classpath.as_ref().unwrap(), self.rt, self.dir, &ports, &durability(self.options, BackendKind::Zookeeper))
            .map_err(io)?;
        Ok(plans
            .into_iter()
            .zip(&ports)
            .map(|(plan, pt)| {
                let peers = pt.fronts.map(|(q, e)| vec![(q, pt.quorum), (e, pt.election)]).unwrap_or_default();
                Planned { backend: BackendKind::Zookeeper, plan, replica: false, peers }
            })
            .collect())
    }

    fn redis(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 2)?;
        let bin = self.bins.redis_server.as_ref().unwrap();
        let pw = self.options.password.as_deref();
        let d = durability(self.options, BackendKind::Redis);
        let mut nodes = vec![Planned::node(BackendKind::Redis, redis::spec(bin, self.rt, self.dir, "redis-1", p[0], None, None, pw, &d).map_err(io)?)];
        if self.options.redis_replica {
            // Replicates through the primary's client proxy when there is one,
            // so a partition can cut replication.
            let primary = format!("127.0.0.1:{}", p[0]);
            let plan = redis::spec(bin, self.rt, self.dir, "redis-2", p[1], Some(&primary), None, pw, &d).map_err(io)?;
            nodes.push(Planned { backend: BackendKind::Redis, plan, replica: true, peers: vec![] });
        }
        Ok(nodes)
    }

    fn redlock(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 5)?;
        let mut nodes = Vec::new();
        let d = durability(self.options, BackendKind::Redlock);
        for (i, port) in p.iter().enumerate() {
            let name = format!("redlock-{}", i + 1);
            let plan = redis::spec(self.bins.redis_server.as_ref().unwrap(), self.rt, self.dir, &name, *port, None, self.shim, self.options.password.as_deref(), &d)
                .map_err(io)?;
            nodes.push(Planned::node(BackendKind::Redlock, plan));
        }
        Ok(nodes)
    }

    async fn postgres(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 1)?;
        let (initdb, pg, d, logs) = (self.bins.initdb.clone().unwrap(), self.bins.postgres.clone().unwrap(), self.rt.to_path_buf(), self.dir.to_path_buf());
        let pw = self.options.password.clone();
        let dur = durability(self.options, BackendKind::Postgres);
        let plan = tokio::task::spawn_blocking(move || postgres::prepare(&initdb, &pg, &d, &logs, p[0], pw.as_deref(), &dur))
            .await
            .map_err(|e| TargetError::Setup(e.to_string()))?
            .map_err(TargetError::Setup)?;
        Ok(vec![Planned::node(BackendKind::Postgres, plan)])
    }

    async fn mariadb(&self, ports: &mut PortClaims) -> Result<Vec<Planned>, TargetError> {
        let p = claim(ports, 1)?;
        let (install, server, d, logs) =
            (self.bins.mariadb_install_db.clone().unwrap(), self.bins.mariadbd.clone().unwrap(), self.rt.to_path_buf(), self.dir.to_path_buf());
        let pw = self.options.password.clone();
        let dur = durability(self.options, BackendKind::Mariadb);
        let plan = tokio::task::spawn_blocking(move || mariadb::prepare(&install, &server, &d, &logs, p[0], pw.as_deref(), &dur))
            .await
            .map_err(|e| TargetError::Setup(e.to_string()))?
            .map_err(TargetError::Setup)?;
        Ok(vec![Planned::node(BackendKind::Mariadb, plan)])
    }
}

/// The run directory keeps each node's log and a link to its data (left dangling at stop,
/// as the record of where the data was).
pub(super) fn link_data(dir: &Path, planned: &[Planned]) -> Result<(), TargetError> {
    for p in planned {
        let home = dir.join(&p.plan.spec.name);
        std::fs::create_dir_all(&home).map_err(io)?;
        let link = home.join("data");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&p.plan.data, &link).map_err(|e| TargetError::Setup(format!("link {}: {e}", link.display())))?;
    }
    Ok(())
}
