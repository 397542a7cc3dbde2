//! MariaDB (and MySQL) locks: the database row lock on InnoDB, and the server's named locks.
//!
//! Two designs on one server, as PostgreSQL has its table lock and its advisory locks:
//!
//! - **`mariadb`** ([`TableBackend`]): the unique-index recipe (ShedLock's MySQL shape) on an
//!   InnoDB table, so the database row lock is measured on more than one database. One row per
//!   lock name; `lock_until` comes from the DATABASE clock (`UTC_TIMESTAMP(6)`). MySQL has no
//!   `INSERT ... ON CONFLICT ... WHERE`, so acquire is the UPDATE that takes an expired row
//!   (`WHERE lock_until <= now`), and only when the client has not yet seen the row, first an
//!   `INSERT IGNORE` that creates it held. Each statement decides alone under InnoDB's row
//!   lock, so a grant is one atomic step either way. Release and extend touch the row only
//!   while we still own it.
//! - **`mariadb-get-lock`** ([`get_lock::GetLockBackend`]): `GET_LOCK(name, timeout)` on the
//!   client's own connection, MySQL's named user-level lock: see [`get_lock`].
//!
//! **Fencing.** Table: the `token` column is bumped by the granting UPDATE itself
//! (`token = LAST_INSERT_ID(token + 1)`, so the new value comes back in the statement's OK
//! packet without a second round trip), in commit order under the row lock; rows are never
//! deleted, so the counter never restarts. GET_LOCK: dlbench draws `NEXTVAL` of a sequence
//! after the grant, in the granting statement (see [`get_lock`]).
//!
//! A contended table acquire polls after a jittered delay; GET_LOCK waits in the server.

pub mod get_lock;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, Consistency, DistLock, Expiry, FencingToken, Lease,
    LeaseHandle, LockError, LostSignal, WaitStyle,
};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use tokio::sync::Mutex;

pub use get_lock::GetLockBackend;

/// Binary collation: names compare byte for byte, as PostgreSQL's `text` key does.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS dlbench_locks (
    name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    lock_until DATETIME(6) NOT NULL,
    locked_at DATETIME(6) NOT NULL,
    locked_by CHAR(32) NOT NULL,
    token BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB";

/// Take an expired row: ? TTL in µs, ? owner, ? name. The token comes back as the
/// statement's last-insert id. Assignments run left to right, each seeing the ones before.
pub const TAKE: &str = "UPDATE dlbench_locks
SET token = LAST_INSERT_ID(token + 1), locked_at = UTC_TIMESTAMP(6),
    lock_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, locked_by = ?
WHERE name = ? AND lock_until <= UTC_TIMESTAMP(6)";

/// Create the row held, token 1: ? name, ? TTL in µs, ? owner. Nothing if the row exists.
pub const CREATE_HELD: &str = "INSERT IGNORE INTO dlbench_locks (name, lock_until, locked_at, locked_by, token)
VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), ?, 1)";

/// Give the lock back: ? name, ? owner.
pub const RELEASE: &str = "UPDATE dlbench_locks SET lock_until = '1970-01-01 00:00:01', locked_by = ''
WHERE name = ? AND locked_by = ? AND lock_until > UTC_TIMESTAMP(6)";

const EXTEND: &str = "UPDATE dlbench_locks SET lock_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND locked_by = ? AND lock_until > UTC_TIMESTAMP(6)";

/// Live claims: rows stay after release (the token lives in them), so only a row whose
/// `lock_until` has not passed is a claim.
const CLAIMS: &str = "SELECT locked_by FROM dlbench_locks WHERE name = ? AND lock_until > UTC_TIMESTAMP(6)";

/// Where and how to reach MariaDB.
#[derive(Debug, Clone)]
pub struct MariaConfig {
    /// `host:port`.
    pub endpoint: String,
    pub user: String,
    pub password: Option<String>,
    pub database: String,
    /// Connections shared by all clients in `Shared` mode (and by `claims`).
    pub pool_size: u32,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// TLS: required, and the server verified against the CA (`VERIFY_CA`).
    pub tls: Option<dlbench_core::TlsPem>,
}

impl MariaConfig {
    pub fn new(endpoint: impl Into<String>) -> Self {
        MariaConfig {
            endpoint: endpoint.into(),
            user: "dlbench".into(),
            password: None,
            database: "dlbench".into(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            tls: None,
        }
    }

    pub fn options(&self) -> Result<MySqlConnectOptions, LockError> {
        let (host, port) = self
            .endpoint
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| LockError::Config(format!("mariadb endpoint {:?} is not host:port", self.endpoint)))?;
        let mut o = MySqlConnectOptions::new().host(host).port(port).username(&self.user).database(&self.database);
        if let Some(p) = &self.password {
            o = o.password(p);
        }
        match &self.tls {
            Some(t) => {
                o = o.ssl_mode(sqlx::mysql::MySqlSslMode::VerifyCa);
                if let Some(ca) = &t.ca {
                    o = o.ssl_ca_from_pem(ca.clone());
                }
                if let Some((cert, key)) = &t.identity {
                    o = o.ssl_client_cert_from_pem(cert).ssl_client_key_from_pem(key);
                }
            }
            // Loopback servers without TLS: do not try and fall back on every connect.
            None => o = o.ssl_mode(sqlx::mysql::MySqlSslMode::Disabled),
        }
        Ok(o)
    }

    fn no_reply(&self, writes: bool) -> LockError {
        let m = format!("mariadb at {}: no reply in time", self.endpoint);
        if writes {
            LockError::Indeterminate(m)
        } else {
            LockError::Unavailable(m)
        }
    }
}

/// Map a client error to the lock's error: `may_have_written` when the statement may have
/// reached the server, so a lost connection leaves the outcome unknown.
pub fn classify(e: sqlx::Error, may_have_written: bool, endpoint: &str) -> LockError {
    let msg = format!("mariadb at {endpoint}: {e}");
    match &e {
        sqlx::Error::Database(db) => {
            // SQLSTATE 28000 access denied (1045); 1049 unknown database; 1044 no access to it.
            let number = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().map(|m| m.number()).unwrap_or(0);
            if db.code().is_some_and(|c| c.starts_with("28")) || matches!(number, 1044 | 1045 | 1049) {
                LockError::Config(format!("mariadb at {endpoint}: {}", db.message()))
            } else {
                LockError::Unavailable(msg)
            }
        }
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => LockError::Unavailable(msg),
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed if may_have_written => {
            LockError::Indeterminate(msg)
        }
        sqlx::Error::Configuration(_) | sqlx::Error::Tls(_) => LockError::Config(msg),
        _ => LockError::Unavailable(msg),
    }
}

/// A pool of up to `size` connections, the first opened now, within the connect bound.
async fn open(config: &MariaConfig, size: u32) -> Result<MySqlPool, LockError> {
    let pool = MySqlPoolOptions::new()
        .max_connections(size.max(1))
        .acquire_timeout(config.connect_timeout)
        // As for PostgreSQL: no ping before each statement (one round trip per statement).
        .test_before_acquire(false)
        .connect_with(config.options()?);
    tokio::time::timeout(config.connect_timeout * 2, pool)
        .await
        .map_err(|_| LockError::Unavailable(format!("mariadb at {}: connect timed out", config.endpoint)))?
        .map_err(|e| classify(e, false, &config.endpoint))
}

/// Microseconds for `INTERVAL ? MICROSECOND`.
fn micros(d: Duration) -> i64 {
    d.as_micros().min(i64::MAX as u128) as i64
}

/// The lock table on an InnoDB server.
pub struct TableBackend {
    pool: MySqlPool,
    config: MariaConfig,
    connections: Connections,
}

impl TableBackend {
    /// In `PerClient` mode each client opens a connection of its own (a pool of one), as each
    /// process would; in `Shared` mode clients share a pool of `pool_size`.
    pub async fn connect_with(config: MariaConfig, connections: Connections) -> Result<Self, LockError> {
        let pool = open(&config, config.pool_size).await?;
        sqlx::query(CREATE).execute(&pool).await.map_err(|e| classify(e, false, &config.endpoint))?;
        Ok(TableBackend { pool, config, connections })
    }

    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }
}

#[async_trait]
impl Backend for TableBackend {
    fn name(&self) -> &'static str {
        "mariadb"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { consistency: Consistency::Cp, fencing: true, fifo: false, expiry: Expiry::Ttl, wait: WaitStyle::Poll, lock_delay: false }
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let pool = match self.connections {
            Connections::Shared => self.pool.clone(),
            Connections::PerClient => open(&self.config, 1).await?,
        };
        let own = self.connections == Connections::PerClient;
        Ok(Box::new(TableLock { pool, config: self.config.clone(), own, rows: Mutex::new(HashSet::new()) }))
    }
    fn describe(&self) -> String {
        format!("mariadb {}/{}", self.config.endpoint, self.config.database)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let q = sqlx::query_scalar::<_, String>(CLAIMS).bind(key).fetch_all(&self.pool);
        let owners = tokio::time::timeout(self.config.request_timeout, q)
            .await
            .map_err(|_| self.config.no_reply(false))?
            .map_err(|e| classify(e, false, &self.config.endpoint))?;
        Ok(owners.into_iter().map(|o| format!("dlbench_locks row {key:?} locked_by {o}")).collect())
    }
}

struct TableLock {
    pool: MySqlPool,
    config: MariaConfig,
    own: bool,
    /// Lock names whose row this client has seen exist: for those a failed take means held,
    /// and the INSERT is skipped (rows are never deleted).
    rows: Mutex<HashSet<String>>,
}

impl TableLock {
    async fn bounded<T>(&self, f: impl std::future::Future<Output = Result<T, sqlx::Error>>) -> Result<T, LockError> {
        match tokio::time::timeout(self.config.request_timeout, f).await {
            Ok(r) => r.map_err(|e| classify(e, true, &self.config.endpoint)),
            Err(_) => Err(self.config.no_reply(true)),
        }
    }

    /// One attempt: the token if granted.
    async fn attempt(&self, key: &str, ttl: i64, owner: &str) -> Result<Option<u64>, LockError> {
        let known = self.rows.lock().await.contains(key);
        if !known {
            let q = sqlx::query(CREATE_HELD).bind(key).bind(ttl).bind(owner).execute(&self.pool);
            let r = self.bounded(q).await?;
            self.rows.lock().await.insert(key.to_string());
            if r.rows_affected() == 1 {
                return Ok(Some(1));
            }
        }
        let q = sqlx::query(TAKE).bind(ttl).bind(owner).bind(key).execute(&self.pool);
        let r = self.bounded(q).await?;
        Ok((r.rows_affected() == 1).then(|| r.last_insert_id()))
    }
}

#[async_trait]
impl DistLock for TableLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let owner = format!("{:032x}", rand::random::<u128>());
        let ttl = micros(opts.ttl);
        let (token, attempt_at) = dlbench_core::poll(opts, invoked_at, || self.attempt(key, ttl, &owner)).await?;
        Ok(Lease {
            key: key.to_string(),
            token: Some(FencingToken(token)),
            invoked_at,
            acquired_at: Instant::now(),
            valid_until: attempt_at + opts.ttl,
            handle: LeaseHandle::new(owner),
            lost: LostSignal::never(),
        })
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let q = sqlx::query(RELEASE).bind(&lease.key).bind(&lease.handle.id).execute(&self.pool);
        if self.bounded(q).await?.rows_affected() == 1 {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: not ours or expired", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        let q = sqlx::query(EXTEND).bind(micros(ttl)).bind(&lease.key).bind(&lease.handle.id).execute(&self.pool);
        if self.bounded(q).await?.rows_affected() == 1 {
            lease.valid_until = sent + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: not ours or expired", lease.key)))
        }
    }

    // A crashed process's connection just drops; its rows expire by TTL.
    async fn abandon(&self) {}

    async fn close(&self) {
        if self.own {
            self.pool.close().await;
        }
    }
}
