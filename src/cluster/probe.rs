//! Asking servers, wherever they run, whether they are healthy, who leads, and which
//! version they are: shared by the local, compose and external targets.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::endpoints::Endpoints;
use crate::kind::BackendKind;
use crate::cluster::local::etcd;
use crate::cluster::local::mariadb;
use crate::cluster::local::nats;
use crate::cluster::local::postgres;
use crate::cluster::local::redis;
use crate::cluster::local::zookeeper;

/// Healthy when every endpoint of `kind` answers as a member of a working cluster.
/// `password` is the cluster's, when it has auth on (etcd's root, Redis, PostgreSQL's
/// postgres user).
/// `within` bounds each exchange with a server (the run's `--connect-timeout`).
pub async fn healthy(kind: BackendKind, endpoints: &[String], password: Option<&str>, within: Duration) -> Result<(), String> {
    match kind.server() {
        BackendKind::Etcd => etcd::healthy(endpoints, password, within).await,
        BackendKind::Zookeeper => zookeeper::healthy(endpoints, within).await,
        BackendKind::Redis | BackendKind::Redlock => redis::healthy(endpoints, password, within).await,
        BackendKind::Postgres => postgres::healthy(endpoints, password, within).await,
        BackendKind::Mariadb => mariadb::healthy(endpoints, within).await,
        BackendKind::Nats => nats::healthy(endpoints, password, within).await,
        _ => Ok(()),
    }
}

/// The endpoint (index into `endpoints`) of the node that leads, for etcd and ZooKeeper,
/// and for NATS the server that leads the lock bucket's stream.
pub async fn leader(kind: BackendKind, endpoints: &[String], names: &[String], password: Option<&str>, within: Duration) -> Option<usize> {
    match kind.server() {
        BackendKind::Etcd => {
            for ep in endpoints {
                if let Ok(name) = etcd::leader_name(ep, password, within).await {
                    return names.iter().position(|n| *n == name);
                }
            }
            None
        }
        BackendKind::Zookeeper => {
            for (i, ep) in endpoints.iter().enumerate() {
                if zookeeper::four_letter(ep, "srvr", within).await.is_ok_and(|o| o.contains("Mode: leader")) {
                    return Some(i);
                }
            }
            None
        }
        BackendKind::Nats => {
            for ep in endpoints {
                if let Ok(name) = nats::leader_name(ep, password, within).await {
                    return names.iter().position(|n| *n == name);
                }
            }
            None
        }
        _ => None,
    }
}

/// Each backend's server version, asked of its first endpoint.
///
/// A server that refuses is recorded as "unknown (why)"; one that stays silent past `within`
/// is an error, so a silent endpoint ends the run within the connect timeout instead of
/// hanging it.
pub async fn versions(e: &Endpoints, password: Option<&str>, within: Duration) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for k in BackendKind::SERVERS {
        let Some(ep) = e.get(k).and_then(|s| s.endpoints.first()) else { continue };
        let ask = async {
            match k {
                BackendKind::Etcd => etcd::version(ep, password, within).await,
                BackendKind::Zookeeper => zookeeper::version(ep, within).await,
                BackendKind::Redis | BackendKind::Redlock => redis::version(ep, password, within).await,
                BackendKind::Postgres => postgres::version(ep, password, within).await,
                BackendKind::Mariadb => mariadb::version(ep, within).await,
                BackendKind::Nats => nats::version(ep, password, within).await,
                _ => Err(String::new()),
            }
        };
        let silent = || format!("[{k}] {ep} accepted a connection but did not answer within {}", crate::util::fmt_duration(within));
        let v = tokio::time::timeout(within, ask).await.map_err(|_| silent())?;
        // The probes bound each exchange by the same `within` and say "no answer": the same
        // silence, reported in the same words.
        if v.as_ref().is_err_and(|e| e.contains("no answer")) {
            return Err(silent());
        }
        out.insert(k.name().to_string(), v.unwrap_or_else(|e| format!("unknown ({e})")));
    }
    Ok(out)
}
