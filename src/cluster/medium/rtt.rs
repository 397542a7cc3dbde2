//! The round trip of each protocol's smallest request, on connections already open: what a
//! lock's every request pays for the path between bench and server, with nothing of the lock
//! in it. Each family's own client crate (the one its backends use).
//!
//! Two figures. Idle: one connection per node, requests in sequence (the path's latency).
//! Loaded: [`LOADED_CONNECTIONS`] connections to every node of the family at once for
//! [`LOADED_WINDOW`], as a
//! run's clients load it (the path's cost per packet when the CPUs are busy: on two cores a
//! Docker bridge and its veth pairs cost CPU that loopback does not, which an idle round
//! trip does not show).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kind::BackendKind;
use crate::summary::medium::Figure;

/// Requests sent and not timed first (connection set-up, prepared statements, caches).
pub const WARMUP: usize = 20;
/// Requests timed per node.
pub const SAMPLES: usize = 200;
/// Connections per node in the loaded figure (redis-benchmark's `-c` of the hand measure
/// in docs/docker.md), and how long they all send at once: a fixed window, not a fixed
/// count, so a slow path (24 ZooKeeper sessions through published ports on a busy CI
/// host) gives fewer samples instead of no figure.
pub const LOADED_CONNECTIONS: usize = 8;
pub const LOADED_WINDOW: Duration = Duration::from_secs(1);

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

/// One open connection of a family's client, able to send its smallest request.
enum Conn {
    Redis(redis::aio::MultiplexedConnection),
    Etcd(etcd_client::KvClient),
    Zookeeper(zookeeper_client::Client),
    Postgres(sqlx::PgConnection),
    Mariadb(sqlx::MySqlConnection),
}

impl Conn {
    async fn open(kind: BackendKind, ep: &str, password: Option<&str>, within: Duration) -> Result<Conn, String> {
        use sqlx::ConnectOptions;
        let e = |e: &dyn std::fmt::Display| e.to_string();
        Ok(match kind.server() {
            BackendKind::Redis | BackendKind::Redlock => {
                let mut info = redis::IntoConnectionInfo::into_connection_info(format!("redis://{ep}/")).map_err(|x| e(&x))?;
                if let Some(p) = password {
                    let s = info.redis_settings().clone().set_password(p.to_string());
                    info = info.set_redis_settings(s);
                }
                let client = redis::Client::open(info).map_err(|x| e(&x))?;
                Conn::Redis(client.get_multiplexed_async_connection().await.map_err(|x| e(&x))?)
            }
            BackendKind::Etcd => {
                let mut opts = etcd_client::ConnectOptions::new().with_connect_timeout(within).with_timeout(within);
                if let Some(pw) = password {
                    opts = opts.with_user("root", pw);
                }
                Conn::Etcd(etcd_client::Client::connect([format!("http://{ep}")], Some(opts)).await.map_err(|x| e(&x))?.kv_client())
            }
            // Not a four-letter word on a fresh connection: a request on an open session.
            BackendKind::Zookeeper => Conn::Zookeeper(
                zookeeper_client::Client::connector().with_session_timeout(Duration::from_secs(10)).connect(ep).await.map_err(|x| e(&x))?,
            ),
            BackendKind::Postgres => {
                let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "5432"));
                let mut o = sqlx::postgres::PgConnectOptions::new().host(host).port(port.parse().unwrap_or(5432)).username("postgres").database("postgres");
                if let Some(pw) = password {
                    o = o.password(pw);
                }
                Conn::Postgres(o.connect().await.map_err(|x| e(&x))?)
            }
            BackendKind::Mariadb => {
                use crate::cluster::local::mariadb::{DATABASE, USER};
                let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "3306"));
                let o = sqlx::mysql::MySqlConnectOptions::new().host(host).port(port.parse().unwrap_or(3306)).username(USER).database(DATABASE);
                Conn::Mariadb(o.connect().await.map_err(|x| e(&x))?)
            }
            k => return Err(format!("{k} has no server")),
        })
    }

    /// One request, answered.
    async fn once(&mut self) -> Result<(), String> {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        match self {
            Conn::Redis(c) => redis::cmd("PING").query_async::<String>(c).await.map(drop).map_err(|x| e(&x)),
            Conn::Etcd(kv) => {
                kv.get("dlbench-round-trip-missing-key", Some(etcd_client::GetOptions::new().with_serializable())).await.map(drop).map_err(|x| e(&x))
            }
            Conn::Zookeeper(c) => c.check_stat("/dlbench-round-trip-missing-path").await.map(drop).map_err(|x| e(&x)),
            Conn::Postgres(c) => sqlx::query("SELECT 1").execute(c).await.map(drop).map_err(|x| e(&x)),
            Conn::Mariadb(c) => sqlx::query("SELECT 1").execute(c).await.map(drop).map_err(|x| e(&x)),
        }
    }

    /// Timed requests (µs each) until `until`; the first error ends it.
    async fn timed_until(&mut self, until: Instant) -> Result<Vec<f64>, String> {
        let mut samples = Vec::new();
        while Instant::now() < until {
            let t = Instant::now();
            self.once().await?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(samples)
    }

    /// `warmup` untimed requests, then `n` timed ones (µs each); the first error ends it.
    async fn timed(&mut self, warmup: usize, n: usize) -> Result<Vec<f64>, String> {
        for _ in 0..warmup {
            self.once().await?;
        }
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.once().await?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(samples)
    }
}

/// One node's idle round trip, within `budget` (connecting included).
pub async fn node(kind: BackendKind, ep: &str, password: Option<&str>, budget: Duration) -> Figure {
    let run = async { Conn::open(kind, ep, password, budget).await?.timed(WARMUP, SAMPLES).await };
    match tokio::time::timeout(budget, run).await {
        Ok(Ok(samples)) => Figure::of(&samples),
        Ok(Err(e)) => Figure::missing(format!("{ep}: {e}")),
        Err(_) => Figure::missing(format!("{ep}: {} requests did not finish within {}", WARMUP + SAMPLES, crate::util::fmt_duration(budget))),
    }
}

/// The family's loaded round trip: every latency of [`LOADED_CONNECTIONS`] connections to
/// each of `eps` sending at once, and the requests per second they carried together.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub figure: Figure,
    pub per_second: Option<f64>,
}

/// Open every connection first, warm each up, then time them all from one start (a
/// barrier) for [`LOADED_WINDOW`], so the rate is of the loaded path only.
pub async fn loaded(kind: BackendKind, eps: &[String], password: Option<&str>, budget: Duration) -> Loaded {
    let total = eps.len() * LOADED_CONNECTIONS;
    // Shorter in the README test mode only (DLBENCH_TIME_SCALE).
    let window = crate::timescale::scale_window(LOADED_WINDOW);
    let run = async {
        let barrier = Arc::new(tokio::sync::Barrier::new(total));
        let mut set = tokio::task::JoinSet::new();
        for ep in eps {
            for _ in 0..LOADED_CONNECTIONS {
                let (ep, pw, b) = (ep.clone(), password.map(str::to_string), barrier.clone());
                set.spawn(async move {
                    let opened = Conn::open(kind, &ep, pw.as_deref(), budget).await;
                    let warm = match opened {
                        Ok(mut c) => c.timed(WARMUP, 0).await.map(|_| c),
                        Err(e) => Err(e),
                    };
                    // Every task reaches the barrier, failed or not, so none waits forever.
                    b.wait().await;
                    let start = Instant::now();
                    let samples = warm?.timed_until(start + window).await.map_err(|e| format!("{ep}: {e}"))?;
                    Ok::<_, String>((start, Instant::now(), samples))
                });
            }
        }
        let (mut first, mut last, mut all) = (None::<Instant>, None::<Instant>, Vec::new());
        while let Some(r) = set.join_next().await {
            let (s, e, samples) = r.map_err(|e| e.to_string())??;
            first = Some(first.map_or(s, |f| f.min(s)));
            last = Some(last.map_or(e, |l| l.max(e)));
            all.extend(samples);
        }
        let wall = match (first, last) {
            (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
            _ => 0.0,
        };
        Ok::<_, String>((all, wall))
    };
    match tokio::time::timeout(budget, run).await {
        Ok(Ok((samples, wall))) if wall > 0.0 => {
            let n = samples.len() as f64;
            Loaded { figure: Figure::of(&samples), per_second: Some((n / wall).round()) }
        }
        Ok(Ok(_)) => Loaded { figure: Figure::missing("no request was timed"), per_second: None },
        Ok(Err(e)) => Loaded { figure: Figure::missing(e), per_second: None },
        Err(_) => Loaded {
            figure: Figure::missing(format!("{total} connections did not finish within {}", crate::util::fmt_duration(budget))),
            per_second: None,
        },
    }
}
