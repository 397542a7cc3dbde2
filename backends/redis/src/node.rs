//! One Redis server and the lock primitives both Redis recipes share: `SET NX PX`, the
//! compare-and-delete release and the compare-and-extend, each by script so the compare
//! and the change are one atomic step on the server.

use std::time::Duration;

use dlbench_core::LockError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

/// SET the key to our token if absent, with a TTL; in the same script, INCR the companion
/// counter so the fencing token is taken atomically with the lock.
const ACQUIRE_FENCED: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false";

/// Delete the key only if it still holds our token (redis-py's LUA_RELEASE_SCRIPT shape).
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

/// Push the expiry only if the key still holds our token.
const EXTEND: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0";

/// The companion counter for `key`'s fencing tokens. The hash tag puts it in the same
/// cluster slot as `key` (for keys without braces of their own).
pub fn fence_key(key: &str) -> String {
    format!("{{{key}}}:fence")
}

/// Connection settings for one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `host:port`.
    pub endpoint: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// TLS (`rediss://`): CA and optional client certificate.
    pub tls: Option<dlbench_core::TlsPem>,
}

impl NodeConfig {
    pub fn new(endpoint: impl Into<String>) -> Self {
        NodeConfig {
            endpoint: endpoint.into(),
            username: None,
            password: None,
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(2),
            tls: None,
        }
    }
}

/// A connected Redis node. Clones share the connection (it is multiplexed and reconnects
/// by itself after the server comes back).
#[derive(Clone)]
pub struct RedisNode {
    pub endpoint: String,
    conn: ConnectionManager,
    timeout: Duration,
    scripts: std::sync::Arc<Scripts>,
}

struct Scripts {
    acquire_fenced: Script,
    release: Script,
    extend: Script,
}

fn classify(endpoint: &str, e: redis::RedisError, may_have_written: bool) -> LockError {
    let msg = format!("redis at {endpoint}: {e}");
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.kind(), redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm))
    {
        return LockError::Config(format!("redis at {endpoint}: authentication or permission refused"));
    }
    if e.is_connection_refusal() || !may_have_written || !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped()) {
        LockError::Unavailable(msg)
    } else {
        LockError::Indeterminate(msg)
    }
}

impl RedisNode {
    /// Connect now: fails when the node does not answer within the connect timeout.
    pub async fn connect(cfg: &NodeConfig) -> Result<Self, LockError> {
        let (client, mcfg) = Self::client(cfg)?;
        let conn = tokio::time::timeout(cfg.connect_timeout, ConnectionManager::new_with_config(client, mcfg))
            .await
            .map_err(|_| LockError::Unavailable(format!("redis at {}: connect timed out", cfg.endpoint)))?
            .map_err(|e| classify(&cfg.endpoint, e, false))?;
        Ok(Self::with_conn(cfg, conn))
    }

    /// A connection opened on first use, as redis-py's pool does: a client of several nodes
    /// (Redlock) can start while a minority of them is down, and each command that finds its
    /// node unreachable fails on its own.
    pub fn connect_lazy(cfg: &NodeConfig) -> Result<Self, LockError> {
        let (client, mcfg) = Self::client(cfg)?;
        let conn = ConnectionManager::new_lazy_with_config(client, mcfg).map_err(|e| classify(&cfg.endpoint, e, false))?;
        Ok(Self::with_conn(cfg, conn))
    }

    fn client(cfg: &NodeConfig) -> Result<(redis::Client, ConnectionManagerConfig), LockError> {
        let scheme = if cfg.tls.is_some() { "rediss" } else { "redis" };
        let mut info = redis::IntoConnectionInfo::into_connection_info(format!("{scheme}://{}/", cfg.endpoint))
            .map_err(|e| LockError::Config(format!("bad redis endpoint {:?}: {e}", cfg.endpoint)))?;
        let mut redis_settings = info.redis_settings().clone();
        if let Some(u) = &cfg.username {
            redis_settings = redis_settings.set_username(u.clone());
        }
        if let Some(p) = &cfg.password {
            redis_settings = redis_settings.set_password(p.clone());
        }
        info = info.set_redis_settings(redis_settings);
        let client = match &cfg.tls {
            None => redis::Client::open(info),
            Some(t) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: t.identity.clone().map(|(client_cert, client_key)| redis::ClientTlsConfig { client_cert, client_key }),
                    root_cert: t.ca.clone(),
                },
            ),
        }
        .map_err(|e| LockError::Config(format!("redis at {}: {e}", cfg.endpoint)))?;
        let mcfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(cfg.connect_timeout))
            .set_response_timeout(Some(cfg.request_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        Ok((client, mcfg))
    }

    fn with_conn(cfg: &NodeConfig, conn: ConnectionManager) -> Self {
        RedisNode {
            endpoint: cfg.endpoint.clone(),
            conn,
            timeout: cfg.request_timeout,
            scripts: std::sync::Arc::new(Scripts {
                acquire_fenced: Script::new(ACQUIRE_FENCED),
                release: Script::new(RELEASE),
                extend: Script::new(EXTEND),
            }),
        }
    }

    async fn bounded<T>(&self, f: impl std::future::Future<Output = redis::RedisResult<T>>, writes: bool) -> Result<T, LockError> {
        self.bounded_within(f, writes, self.timeout).await
    }

    async fn bounded_within<T>(
        &self,
        f: impl std::future::Future<Output = redis::RedisResult<T>>,
        writes: bool,
        within: Duration,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(within, f).await {
            Ok(r) => r.map_err(|e| classify(&self.endpoint, e, writes)),
            Err(_) if writes => Err(LockError::Indeterminate(format!("redis at {}: no reply within {within:?}", self.endpoint))),
            Err(_) => Err(LockError::Unavailable(format!("redis at {}: no reply within {within:?}", self.endpoint))),
        }
    }

    /// Run one call within the request timeout; `writes`: a lost reply is an unknown outcome.
    pub async fn bounded_call<T>(&self, f: impl std::future::Future<Output = redis::RedisResult<T>>, writes: bool) -> Result<T, LockError> {
        self.bounded(f, writes).await
    }

    /// A new pub/sub connection to the node in `cfg` (not bounded: the caller bounds it).
    pub async fn pubsub(cfg: &NodeConfig) -> Result<redis::aio::PubSub, LockError> {
        let (client, _) = Self::client(cfg)?;
        client.get_async_pubsub().await.map_err(|e| classify(&cfg.endpoint, e, false))
    }

    /// `SET key token NX PX ttl`: true when we set it.
    pub async fn set_nx_px(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, LockError> {
        self.set_nx_px_within(key, token, ttl, self.timeout).await
    }

    /// As [`Self::set_nx_px`] with a per-call timeout (Redlock's per-node bound).
    pub async fn set_nx_px_within(&self, key: &str, token: &str, ttl: Duration, within: Duration) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(token).arg("NX").arg("PX").arg(ttl.as_millis().max(1) as u64);
        let f = cmd.query_async::<Option<String>>(&mut conn);
        match tokio::time::timeout(within, f).await {
            Ok(r) => r.map(|v| v.is_some()).map_err(|e| classify(&self.endpoint, e, true)),
            Err(_) => Err(LockError::Indeterminate(format!("redis at {}: no reply within {within:?}", self.endpoint))),
        }
    }

    /// SET NX PX and, only if it was set, INCR the fencing counter: the token, or None.
    pub async fn set_nx_px_fenced(&self, key: &str, token: &str, ttl: Duration) -> Result<Option<u64>, LockError> {
        let mut conn = self.conn.clone();
        let mut inv = self.scripts.acquire_fenced.prepare_invoke();
        inv.key(key).key(fence_key(key)).arg(token).arg(ttl.as_millis().max(1) as u64);
        self.bounded(inv.invoke_async::<Option<u64>>(&mut conn), true).await
    }

    /// Delete `key` if it still holds `token`: true when deleted.
    pub async fn compare_delete(&self, key: &str, token: &str) -> Result<bool, LockError> {
        self.compare_delete_within(key, token, self.timeout).await
    }

    /// As [`Self::compare_delete`] with a per-call timeout (Redlock's per-node bound); no
    /// reply in time is an unknown outcome.
    pub async fn compare_delete_within(&self, key: &str, token: &str, within: Duration) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let mut inv = self.scripts.release.prepare_invoke();
        inv.key(key).arg(token);
        self.bounded_within(inv.invoke_async::<i64>(&mut conn), true, within).await.map(|n| n == 1)
    }

    /// Set `key`'s TTL to `ttl` if it still holds `token`: true when extended.
    pub async fn compare_pexpire(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, LockError> {
        self.compare_pexpire_within(key, token, ttl, self.timeout).await
    }

    /// As [`Self::compare_pexpire`] with a per-call timeout (Redlock's per-node bound).
    pub async fn compare_pexpire_within(&self, key: &str, token: &str, ttl: Duration, within: Duration) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let mut inv = self.scripts.extend.prepare_invoke();
        inv.key(key).arg(token).arg(ttl.as_millis().max(1) as u64);
        self.bounded_within(inv.invoke_async::<i64>(&mut conn), true, within).await.map(|n| n == 1)
    }

    /// Whether `key` exists on this node (a read: a failure is definite).
    pub async fn exists(&self, key: &str) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        self.bounded(redis::cmd("EXISTS").arg(key).query_async::<i64>(&mut conn), false).await.map(|n| n > 0)
    }

    /// `INFO server` field `redis_version`.
    pub async fn version(&self) -> Result<String, LockError> {
        let mut conn = self.conn.clone();
        let info: String = self.bounded(redis::cmd("INFO").arg("server").query_async(&mut conn), false).await?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("unknown")
            .trim()
            .to_string())
    }

    /// A raw connection, for callers that measure primitives directly.
    pub fn connection(&self) -> ConnectionManager {
        self.conn.clone()
    }
}

/// A random hex token unique per acquisition (redis-py uses `uuid4().hex`).
pub fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}
