//! Turn an endpoints section into a connected [`Backend`].

use std::sync::Arc;
use std::time::Duration;

use dlbench_core::{Backend, Connections, LockError};

use crate::endpoints::{Endpoints, Section};
use crate::kind::BackendKind;

/// Client-side bounds that apply to every backend.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: Duration::from_secs(5), request: Duration::from_secs(5) }
    }
}

/// Read a password from the environment variable the section names. The value never
/// leaves this function except into the client library.
fn password(kind: BackendKind, s: &Section) -> Result<Option<String>, LockError> {
    match &s.password_env {
        None => Ok(None),
        Some(var) => std::env::var(var).map(Some).map_err(|_| {
            LockError::Config(format!("[{kind}] password_env names {var}, which is not set in the environment"))
        }),
    }
}

/// Read the section's TLS files. ZooKeeper takes digest auth (`user` + `password_env`),
/// not TLS, here.
fn tls(kind: BackendKind, s: &Section) -> Result<Option<dlbench_core::TlsPem>, LockError> {
    let Some(t) = &s.tls else { return Ok(None) };
    if kind == BackendKind::Zookeeper {
        return Err(LockError::Config(
            "[zookeeper.tls] is not supported; ZooKeeper takes digest auth (user + password_env)".into(),
        ));
    }
    // redis-rs asks rustls for the process-wide provider; installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let files = dlbench_core::TlsFiles { ca: t.ca.clone(), cert: t.cert.clone(), key: t.key.clone() };
    files.read(&kind.to_string()).map(Some)
}

/// Connect to `kind` at the servers `endpoints` lists, each client on its own connection.
pub async fn connect(
    kind: BackendKind,
    endpoints: &Endpoints,
    t: Timeouts,
    memory: Option<&dlbench_memory::MemoryBackend>,
) -> Result<Arc<dyn Backend>, LockError> {
    connect_with(kind, endpoints, t, Connections::default(), memory).await
}

/// As [`connect`], with the clients' connections per client or shared.
pub async fn connect_with(
    kind: BackendKind,
    endpoints: &Endpoints,
    t: Timeouts,
    connections: Connections,
    memory: Option<&dlbench_memory::MemoryBackend>,
) -> Result<Arc<dyn Backend>, LockError> {
    if kind == BackendKind::Memory {
        return Ok(Arc::new(memory.cloned().unwrap_or_default()));
    }
    let s = endpoints
        .get(kind)
        .ok_or_else(|| LockError::Config(format!("no [{}] section in the endpoints", kind.server())))?;
    let pw = password(kind.server(), s)?;
    let tls = tls(kind.server(), s)?;
    Ok(match kind {
        BackendKind::Etcd | BackendKind::EtcdV3lock => etcd(kind, s, t, pw, tls, connections).await?,
        BackendKind::Zookeeper => {
            let mut c = dlbench_zookeeper::ZkConfig::new(s.endpoints.clone());
            c.connect_timeout = t.connect;
            c.request_timeout = t.request;
            if let (Some(u), Some(p)) = (&s.user, pw) {
                c.digest = Some(format!("{u}:{p}"));
            }
            Arc::new(dlbench_zookeeper::ZkBackend::connect(c).await?)
        }
        BackendKind::Redis | BackendKind::Redisson | BackendKind::Redlock => redis(kind, s, t, pw, tls, connections).await?,
        BackendKind::Postgres => {
            Arc::new(dlbench_postgres::PgBackend::connect_with(pg_config(s, t, pw, tls), connections).await?)
        }
        BackendKind::PgAdvisory | BackendKind::PgAdvisoryXact => {
            let scope = if kind == BackendKind::PgAdvisory {
                dlbench_pg_advisory::Scope::Session
            } else {
                dlbench_pg_advisory::Scope::Xact
            };
            // Each client is its own session whatever `connections` asks: the session holds the lock.
            Arc::new(dlbench_pg_advisory::AdvisoryBackend::connect(pg_config(s, t, pw, tls), scope).await?)
        }
        BackendKind::Mariadb | BackendKind::MariadbGetLock => mariadb(kind, s, t, pw, tls, connections).await?,
        BackendKind::Nats => {
            if tls.is_some() {
                return Err(LockError::Config("[nats.tls] is not supported yet; connect without TLS".into()));
            }
            let mut c = dlbench_nats::NatsConfig::new(s.endpoints.clone());
            c.connect_timeout = t.connect;
            c.request_timeout = t.request;
            if let (Some(u), Some(p)) = (&s.user, pw) {
                c.user = Some(u.clone());
                c.password = Some(p);
            }
            Arc::new(dlbench_nats::NatsBackend::connect_with(c, connections).await?)
        }
        BackendKind::Memory => unreachable!(),
    })
}

/// etcd, with the client-side recipe (`etcd`) or the server's v3lock (`etcd-v3lock`).
async fn etcd(
    kind: BackendKind,
    s: &Section,
    t: Timeouts,
    pw: Option<String>,
    tls: Option<dlbench_core::TlsPem>,
    connections: Connections,
) -> Result<Arc<dyn Backend>, LockError> {
    let mut c = dlbench_etcd::EtcdConfig::new(s.endpoints.clone());
    c.connect_timeout = t.connect;
    c.request_timeout = t.request;
    if let (Some(u), Some(p)) = (&s.user, pw) {
        c.user = Some((u.clone(), p));
    }
    c.tls = tls;
    let recipe = if kind == BackendKind::Etcd { dlbench_etcd::Recipe::Client } else { dlbench_etcd::Recipe::Server };
    Ok(Arc::new(dlbench_etcd::EtcdBackend::connect_with(c, connections).await?.with_recipe(recipe)))
}

/// Redis (one node: `redis`, `redisson`) or Redlock (every node of the section).
async fn redis(
    kind: BackendKind,
    s: &Section,
    t: Timeouts,
    pw: Option<String>,
    tls: Option<dlbench_core::TlsPem>,
    connections: Connections,
) -> Result<Arc<dyn Backend>, LockError> {
    let nodes: Vec<dlbench_redis::NodeConfig> = s
        .endpoints
        .iter()
        .map(|e| {
            let mut n = dlbench_redis::NodeConfig::new(e.clone());
            n.connect_timeout = t.connect;
            n.request_timeout = t.request;
            n.username = s.user.clone();
            n.password = pw.clone();
            n.tls = tls.clone();
            n
        })
        .collect();
    Ok(if kind == BackendKind::Redis {
        let first = nodes.into_iter().next().expect("validated non-empty");
        Arc::new(dlbench_redis::RedisBackend::connect_with(first, connections).await?)
    } else if kind == BackendKind::Redisson {
        let first = nodes.into_iter().next().expect("validated non-empty");
        Arc::new(dlbench_redis::RedissonBackend::connect_with(first, connections).await?)
    } else {
        let cfg = dlbench_redlock::RedlockConfig { nodes, node_timeout: None };
        Arc::new(dlbench_redlock::RedlockBackend::connect_with(cfg, connections).await?)
    })
}

/// MariaDB's lease table (`mariadb`) or its `GET_LOCK` (`mariadb-get-lock`).
async fn mariadb(
    kind: BackendKind,
    s: &Section,
    t: Timeouts,
    pw: Option<String>,
    tls: Option<dlbench_core::TlsPem>,
    connections: Connections,
) -> Result<Arc<dyn Backend>, LockError> {
    let c: dlbench_mariadb::MariaConfig = sql_config(s, t, pw, tls);
    Ok(if kind == BackendKind::Mariadb {
        Arc::new(dlbench_mariadb::TableBackend::connect_with(c, connections).await?)
    } else {
        // Each client is its own connection whatever `connections` asks: it holds the lock.
        Arc::new(dlbench_mariadb::GetLockBackend::connect(c).await?)
    })
}

/// The PostgreSQL client settings of a `[postgres]` section.
fn pg_config(s: &Section, t: Timeouts, pw: Option<String>, tls: Option<dlbench_core::TlsPem>) -> dlbench_postgres::PgConfig {
    sql_config(s, t, pw, tls)
}

/// The SQL client settings of a `[postgres]` or `[mariadb]` section, in either dialect.
fn sql_config<D: dlbench_sql::Dialect>(s: &Section, t: Timeouts, pw: Option<String>, tls: Option<dlbench_core::TlsPem>) -> dlbench_sql::SqlConfig<D> {
    let mut c = dlbench_sql::SqlConfig::<D>::new(s.endpoints[0].clone());
    c.connect_timeout = t.connect;
    c.request_timeout = t.request;
    if let Some(u) = &s.user {
        c.user = u.clone();
    }
    if let Some(d) = &s.database {
        c.database = d.clone();
    }
    c.password = pw;
    c.tls = tls;
    c
}
