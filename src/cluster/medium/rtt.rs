//! The round trip of each protocol's smallest request, on one connection already open, in
//! sequence: what a lock's every request pays for the path between bench and server, with
//! nothing of the lock in it. Each family's own client crate (the one its backends use).

use std::time::{Duration, Instant};

use crate::kind::BackendKind;
use crate::summary::medium::Figure;

/// Requests sent and not timed first (connection set-up, prepared statements, caches).
pub const WARMUP: usize = 20;
/// Requests timed per node.
pub const SAMPLES: usize = 200;

/// The request each family is timed with, as the record names it.
pub fn request(kind: BackendKind) -> &'static str {
    match kind.server() {
        BackendKind::Redis | BackendKind::Redlock => "PING",
        // Serializable: the member answers from its own store, without asking the leader
        // (a linearizable read adds a quorum round, which is raft's cost, not the path's).
        BackendKind::Etcd => "Range on a missing key (serializable)",
        BackendKind::Zookeeper => "exists on a missing path",
        BackendKind::Postgres | BackendKind::Mariadb => "SELECT 1",
        _ => "",
    }
}

/// `SAMPLES` timed requests after `WARMUP` untimed ones; the first error ends it.
macro_rules! timed {
    ($req:expr) => {{
        let mut samples = Vec::with_capacity(SAMPLES);
        for i in 0..WARMUP + SAMPLES {
            let t = Instant::now();
            $req.await.map_err(|e| e.to_string())?;
            if i >= WARMUP {
                samples.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        samples
    }};
}

/// One node's round trip, within `budget` (connecting included).
pub async fn node(kind: BackendKind, ep: &str, password: Option<&str>, budget: Duration) -> Figure {
    let within = budget;
    let run = async {
        match kind.server() {
            BackendKind::Redis | BackendKind::Redlock => redis(ep, password).await,
            BackendKind::Etcd => etcd(ep, password, within).await,
            BackendKind::Zookeeper => zookeeper(ep).await,
            BackendKind::Postgres => postgres(ep, password).await,
            BackendKind::Mariadb => mariadb(ep).await,
            k => Err(format!("{k} has no server")),
        }
    };
    match tokio::time::timeout(budget, run).await {
        Ok(Ok(samples)) => Figure::of(&samples),
        Ok(Err(e)) => Figure::missing(format!("{ep}: {e}")),
        Err(_) => Figure::missing(format!("{ep}: {} requests did not finish within {}", WARMUP + SAMPLES, crate::util::fmt_duration(budget))),
    }
}

async fn redis(ep: &str, password: Option<&str>) -> Result<Vec<f64>, String> {
    let mut info = redis::IntoConnectionInfo::into_connection_info(format!("redis://{ep}/")).map_err(|e| e.to_string())?;
    if let Some(p) = password {
        let s = info.redis_settings().clone().set_password(p.to_string());
        info = info.set_redis_settings(s);
    }
    let client = redis::Client::open(info).map_err(|e| e.to_string())?;
    let mut c = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    Ok(timed!(redis::cmd("PING").query_async::<String>(&mut c)))
}

async fn etcd(ep: &str, password: Option<&str>, within: Duration) -> Result<Vec<f64>, String> {
    let mut opts = etcd_client::ConnectOptions::new().with_connect_timeout(within).with_timeout(within);
    if let Some(pw) = password {
        opts = opts.with_user("root", pw);
    }
    let c = etcd_client::Client::connect([format!("http://{ep}")], Some(opts)).await.map_err(|e| e.to_string())?;
    let mut kv = c.kv_client();
    let missing = "dlbench-round-trip-missing-key";
    Ok(timed!(kv.get(missing, Some(etcd_client::GetOptions::new().with_serializable()))))
}

async fn zookeeper(ep: &str) -> Result<Vec<f64>, String> {
    // Not a four-letter word on a fresh connection: a request on an open session.
    let c = zookeeper_client::Client::connector().with_session_timeout(Duration::from_secs(10)).connect(ep).await.map_err(|e| e.to_string())?;
    Ok(timed!(c.check_stat("/dlbench-round-trip-missing-path")))
}

async fn postgres(ep: &str, password: Option<&str>) -> Result<Vec<f64>, String> {
    use sqlx::ConnectOptions;
    let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "5432"));
    let mut o = sqlx::postgres::PgConnectOptions::new().host(host).port(port.parse().unwrap_or(5432)).username("postgres").database("postgres");
    if let Some(pw) = password {
        o = o.password(pw);
    }
    let mut c = o.connect().await.map_err(|e| e.to_string())?;
    Ok(timed!(sqlx::query("SELECT 1").execute(&mut c)))
}

async fn mariadb(ep: &str) -> Result<Vec<f64>, String> {
    use crate::cluster::local::mariadb::{DATABASE, USER};
    use sqlx::ConnectOptions;
    let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "3306"));
    let o = sqlx::mysql::MySqlConnectOptions::new().host(host).port(port.parse().unwrap_or(3306)).username(USER).database(DATABASE);
    let mut c = o.connect().await.map_err(|e| e.to_string())?;
    Ok(timed!(sqlx::query("SELECT 1").execute(&mut c)))
}
