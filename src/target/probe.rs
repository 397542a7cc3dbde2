//! Asking servers, wherever they run, whether they are healthy, who leads, and which
//! version they are: shared by the local, compose and external targets.

use std::collections::BTreeMap;

use crate::endpoints::Endpoints;
use crate::kind::BackendKind;
use crate::target::local::{etcd, postgres, redis, zookeeper};

/// Healthy when every endpoint of `kind` answers as a member of a working cluster.
/// `password` is the cluster's, when it has auth on (etcd's root, Redis, PostgreSQL's
/// postgres user).
pub async fn healthy(kind: BackendKind, endpoints: &[String], password: Option<&str>) -> Result<(), String> {
    match kind {
        BackendKind::Etcd => etcd::healthy(endpoints, password).await,
        BackendKind::Zookeeper => zookeeper::healthy(endpoints).await,
        BackendKind::Redis | BackendKind::Redlock => redis::healthy(endpoints, password).await,
        BackendKind::Postgres => postgres::healthy(endpoints, password).await,
        BackendKind::Memory => Ok(()),
    }
}

/// The endpoint (index into `endpoints`) of the node that leads, for etcd and ZooKeeper.
pub async fn leader(kind: BackendKind, endpoints: &[String], names: &[String], password: Option<&str>) -> Option<usize> {
    match kind {
        BackendKind::Etcd => {
            for ep in endpoints {
                if let Ok(name) = etcd::leader_name(ep, password).await {
                    return names.iter().position(|n| *n == name);
                }
            }
            None
        }
        BackendKind::Zookeeper => {
            for (i, ep) in endpoints.iter().enumerate() {
                if zookeeper::four_letter(ep, "srvr").await.is_ok_and(|o| o.contains("Mode: leader")) {
                    return Some(i);
                }
            }
            None
        }
        _ => None,
    }
}

/// Each backend's server version, asked of its first endpoint.
pub async fn versions(e: &Endpoints, password: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for k in BackendKind::REAL {
        let Some(ep) = e.get(k).and_then(|s| s.endpoints.first()) else { continue };
        let v = match k {
            BackendKind::Etcd => etcd::version(ep, password).await,
            BackendKind::Zookeeper => zookeeper::version(ep).await,
            BackendKind::Redis | BackendKind::Redlock => redis::version(ep, password).await,
            BackendKind::Postgres => postgres::version(ep, password).await,
            BackendKind::Memory => continue,
        };
        out.insert(k.name().to_string(), v.unwrap_or_else(|e| format!("unknown ({e})")));
    }
    out
}
