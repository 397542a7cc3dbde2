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
/// and for NATS the server that leads the stream of the bucket of `lock_ttl`.
pub async fn leader(kind: BackendKind, endpoints: &[String], names: &[String], password: Option<&str>, within: Duration, lock_ttl: Duration) -> Option<usize> {
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
                if let Ok(name) = nats::leader_name(ep, password, within, lock_ttl).await {
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

/// What a server's smallest request got: an answer in so many ms; no answer (refused,
/// reset or silent past the bound: the node is down, stopped or cut off); or a reply that
/// says nothing about the node (it closed without answering, as a ZooKeeper without the
/// four-letter words does, or no probe speaks its protocol).
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    Answered(f64),
    Unreachable(String),
    Unclear(String),
}

/// Send a server its smallest request (see [`round_trip`]) and say what came back.
pub async fn reach(addr: &str, kind: BackendKind, within: Duration) -> Reach {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask: &[u8] = match kind.server() {
        BackendKind::Redis | BackendKind::Redlock => b"PING\r\n",
        BackendKind::Etcd => b"GET /health HTTP/1.1\r\nHost: etcd\r\n\r\n",
        BackendKind::Zookeeper => b"srvr",
        // SSLRequest: the server answers one byte, S or N.
        BackendKind::Postgres => &[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f],
        // MariaDB and NATS speak first: the time from connecting to their greeting.
        BackendKind::Mariadb | BackendKind::Nats => b"",
        _ => return Reach::Unclear(format!("no probe for {kind}")),
    };
    let go = async {
        let before = std::time::Instant::now();
        let mut c = match tokio::net::TcpStream::connect(addr).await {
            Ok(c) => c,
            Err(e) => return Reach::Unreachable(e.to_string()),
        };
        // A server that speaks first is timed from the connect.
        let t0 = if ask.is_empty() { before } else { std::time::Instant::now() };
        if let Err(e) = c.write_all(ask).await {
            return Reach::Unreachable(e.to_string());
        }
        let mut b = [0u8; 1];
        match c.read(&mut b).await {
            Ok(1) => Reach::Answered(t0.elapsed().as_secs_f64() * 1e3),
            Ok(_) => Reach::Unclear("closed without an answer".to_string()),
            Err(e) => Reach::Unreachable(e.to_string()),
        }
    };
    tokio::time::timeout(within, go).await.unwrap_or_else(|_| Reach::Unreachable(format!("no answer in {} s", within.as_secs_f64())))
}

/// The time from sending a server its smallest request to the first byte of its answer, in
/// ms (the connection is opened first and not counted; MariaDB and NATS, which speak first,
/// from the connect to their greeting).
pub async fn round_trip(addr: &str, kind: BackendKind, within: Duration) -> Result<f64, String> {
    match reach(addr, kind, within).await {
        Reach::Answered(ms) => Ok(ms),
        Reach::Unreachable(e) | Reach::Unclear(e) => Err(e),
    }
}

/// Evidence of a `clock` fault on a Redis node at `addr`: the server's own `TIME`, asked a
/// few times (the shim moves it within 50 ms), at least 2 s off this machine's clock.
pub async fn clock_moved(addr: &str, password: Option<&str>, within: Duration) -> Option<crate::faultlog::Effect> {
    use crate::faultlog::Effect;
    let mut seen = None;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let reply = redis::redis_command(addr, "TIME", password, within).await.ok()?;
        let secs: i64 = reply.lines().map(str::trim).find(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs() as i64;
        let moved = secs - now;
        seen = Some(moved);
        if moved.abs() >= 2 {
            return Some(Effect::confirmed(format!("clock {moved:+} s by the server's TIME")));
        }
    }
    seen.map(|m| Effect::none(format!("NOT moved: the server's TIME is {m:+} s off")))
}

/// Evidence of a `failover` on the Redis node at `addr` that was promoted: its own
/// `INFO replication` says `role:master`.
pub async fn promoted(addr: &str, password: Option<&str>, within: Duration) -> Option<crate::faultlog::Effect> {
    use crate::faultlog::Effect;
    let info = redis::redis_command(addr, "INFO replication", password, within).await.ok()?;
    Some(if info.lines().any(|l| l.trim() == "role:master") { Effect::confirmed("role:master") } else { Effect::none("NOT promoted: still a replica") })
}
