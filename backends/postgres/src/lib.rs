//! PostgreSQL lock table (ShedLock's shape), with a fencing counter bumped under the lock.
//!
//! Recipe: one row per lock name, `lock_until` computed from the DATABASE clock. Acquire is
//! one statement: insert the row, or take it over if its `lock_until` has passed; release
//! ends our hold only if we are still the owner; extend moves `lock_until` only if we are.
//!
//! Reentrant by the owner check in the row, the classic reentrant database lock: the owner
//! is the client (one id for all its acquires), so the holder's second acquire finds its
//! own live row, counts `holds` up and keeps the token; a release counts down, and only the
//! last one frees the row.
//!
//! Fencing: `token` is a column of the row incremented by the acquiring statement itself, so
//! it is assigned while holding the row lock, in commit order. A sequence would not do:
//! `nextval()` runs before the insert waits on the conflicting row, so tokens from a sequence
//! reach the table out of order under contention. Rows are never deleted (release sets
//! `lock_until` to the past), so the counter never restarts.
//!
//! A contended acquire polls after a jittered delay.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, Consistency, DistLock, Expiry, FencingToken, Lease,
    LeaseHandle, LockError, LostSignal, WaitStyle,
};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS dlbench_locks (
    name text PRIMARY KEY,
    lock_until timestamptz NOT NULL,
    locked_at timestamptz NOT NULL,
    locked_by text NOT NULL,
    token bigint NOT NULL,
    holds integer NOT NULL DEFAULT 1
)";

/// A table made before `holds` existed gains it (every live row then counts one hold).
const ADD_HOLDS: &str = "ALTER TABLE dlbench_locks ADD COLUMN IF NOT EXISTS holds integer NOT NULL DEFAULT 1";

/// Take the lock: $1 name, $2 TTL in seconds, $3 owner; returns the fencing token. A row
/// whose time has passed is taken over (one hold, the token counted up); our own live row
/// is entered again (one more hold, the same token, its time not shortened).
pub const ACQUIRE: &str = "INSERT INTO dlbench_locks AS l (name, lock_until, locked_at, locked_by, token, holds)
VALUES ($1, now() + make_interval(secs => $2), now(), $3, 1, 1)
ON CONFLICT (name) DO UPDATE
    SET lock_until = GREATEST(l.lock_until, EXCLUDED.lock_until),
        locked_at = CASE WHEN l.lock_until > now() THEN l.locked_at ELSE EXCLUDED.locked_at END,
        locked_by = EXCLUDED.locked_by,
        token = CASE WHEN l.lock_until > now() THEN l.token ELSE l.token + 1 END,
        holds = CASE WHEN l.lock_until > now() THEN l.holds + 1 ELSE 1 END
    WHERE l.lock_until <= now() OR l.locked_by = EXCLUDED.locked_by
RETURNING token";

/// Give one hold back: $1 name, $2 owner; the last one frees the row.
pub const RELEASE: &str = "UPDATE dlbench_locks SET holds = holds - 1,
    lock_until = CASE WHEN holds > 1 THEN lock_until ELSE '-infinity' END,
    locked_by = CASE WHEN holds > 1 THEN locked_by ELSE '' END
WHERE name = $1 AND locked_by = $2 AND lock_until > now()";

/// Live claims on a lock: $1 name. Rows stay after release (the token lives in them), so
/// only a row whose `lock_until` has not passed is a claim.
const CLAIMS: &str = "SELECT locked_by FROM dlbench_locks WHERE name = $1 AND lock_until > now()";

const EXTEND: &str = "UPDATE dlbench_locks SET lock_until = now() + make_interval(secs => $3)
WHERE name = $1 AND locked_by = $2 AND lock_until > now()";

/// Where and how to reach PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `host:port`.
    pub endpoint: String,
    pub user: String,
    pub password: Option<String>,
    pub database: String,
    /// Connections shared by all clients of this backend in `Shared` mode (and by `claims`).
    pub pool_size: u32,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// TLS: required, and the server verified against the CA (`sslmode=verify-ca`).
    pub tls: Option<dlbench_core::TlsPem>,
}

impl PgConfig {
    pub fn new(endpoint: impl Into<String>) -> Self {
        PgConfig {
            endpoint: endpoint.into(),
            user: "postgres".into(),
            password: None,
            database: "postgres".into(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            tls: None,
        }
    }

    /// The client's connect options (also used by the advisory-lock backends).
    pub fn options(&self) -> Result<PgConnectOptions, LockError> {
        let (host, port) = self
            .endpoint
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| LockError::Config(format!("postgres endpoint {:?} is not host:port", self.endpoint)))?;
        let mut o = PgConnectOptions::new()
            .host(host)
            .port(port)
            .username(&self.user)
            .database(&self.database)
            .application_name("dlbench");
        if let Some(p) = &self.password {
            o = o.password(p);
        }
        if let Some(t) = &self.tls {
            o = o.ssl_mode(sqlx::postgres::PgSslMode::VerifyCa);
            if let Some(ca) = &t.ca {
                o = o.ssl_root_cert_from_pem(ca.clone());
            }
            if let Some((cert, key)) = &t.identity {
                o = o.ssl_client_cert_from_pem(cert).ssl_client_key_from_pem(key);
            }
        }
        Ok(o)
    }
}

/// A PostgreSQL server holding the lock table.
pub struct PgBackend {
    pool: PgPool,
    config: PgConfig,
    connections: Connections,
}

/// Map a client error to the lock's error: `may_have_written` when the statement may have
/// reached the server, so a lost connection leaves the outcome unknown.
pub fn classify(e: sqlx::Error, may_have_written: bool, endpoint: &str) -> LockError {
    let msg = format!("postgres at {endpoint}: {e}");
    match &e {
        sqlx::Error::Database(db) => {
            // 28P01 invalid password, 28000 invalid authorization, 3D000 no such database.
            let code = db.code().unwrap_or_default();
            if code.starts_with("28") || code == "3D000" {
                LockError::Config(format!("postgres at {endpoint}: {}", db.message()))
            } else {
                // The statement failed, so its transaction rolled back.
                LockError::Unavailable(msg)
            }
        }
        // A connection that could not even be opened carried no statement.
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => LockError::Unavailable(msg),
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed if may_have_written => {
            LockError::Indeterminate(msg)
        }
        sqlx::Error::Configuration(_) | sqlx::Error::Tls(_) => LockError::Config(msg),
        _ => LockError::Unavailable(msg),
    }
}

impl PgBackend {
    pub async fn connect(config: PgConfig) -> Result<Self, LockError> {
        Self::connect_with(config, Connections::default()).await
    }

    /// As [`Self::connect`]; in `PerClient` mode each client opens a connection of its own
    /// (a pool of one, so a connection the server dropped is replaced), as each process
    /// would; in `Shared` mode clients share a pool of `pool_size`.
    pub async fn connect_with(config: PgConfig, connections: Connections) -> Result<Self, LockError> {
        let pool = open(&config, config.pool_size).await?;
        for q in [CREATE, ADD_HOLDS] {
            sqlx::query(q).execute(&pool).await.map_err(|e| classify(e, false, &config.endpoint))?;
        }
        Ok(PgBackend { pool, config, connections })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// A pool of up to `size` connections, the first opened now, within the connect bound.
async fn open(config: &PgConfig, size: u32) -> Result<PgPool, LockError> {
    let pool = PgPoolOptions::new()
        .max_connections(size.max(1))
        .acquire_timeout(config.connect_timeout)
        // sqlx pings every connection it hands out by default: one extra round trip per
        // statement, which halved the lock-cycle rate against pgbench (dlbench calibrate).
        // A dead connection now fails its statement instead, which the lock reports as
        // an error, and the pool drops it.
        .test_before_acquire(false)
        .connect_with(config.options()?);
    let pool = tokio::time::timeout(config.connect_timeout * 2, pool)
        .await
        .map_err(|_| LockError::Unavailable(format!("postgres at {}: connect timed out", config.endpoint)))?
        .map_err(|e| classify(e, false, &config.endpoint))?;
    Ok(pool)
}

#[async_trait]
impl Backend for PgBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            consistency: Consistency::Cp,
            fencing: true,
            fifo: false,
            expiry: Expiry::Ttl,
            wait: WaitStyle::Poll,
            lock_delay: false,
        }
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let pool = match self.connections {
            Connections::Shared => self.pool.clone(),
            Connections::PerClient => open(&self.config, 1).await?,
        };
        let own = self.connections == Connections::PerClient;
        Ok(Box::new(PgLock { pool, config: self.config.clone(), owner: format!("{:032x}", rand::random::<u128>()), own }))
    }
    fn describe(&self) -> String {
        format!("postgres {}/{}", self.config.endpoint, self.config.database)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let q = sqlx::query_scalar::<_, String>(CLAIMS).bind(key).fetch_all(&self.pool);
        let owners = tokio::time::timeout(self.config.request_timeout, q)
            .await
            .map_err(|_| LockError::Unavailable(format!("postgres at {}: no reply in time", self.config.endpoint)))?
            .map_err(|e| classify(e, false, &self.config.endpoint))?;
        Ok(owners.into_iter().map(|o| format!("dlbench_locks row {key:?} locked_by {o}")).collect())
    }
}

struct PgLock {
    pool: PgPool,
    config: PgConfig,
    /// This client's id in `locked_by`, the same for all its acquires (the owner check that
    /// makes the lock reentrant).
    owner: String,
    /// The pool is this client's alone (`PerClient`): close ends its connection.
    own: bool,
}

impl PgLock {
    async fn bounded<T>(&self, f: impl std::future::Future<Output = Result<T, sqlx::Error>>, writes: bool) -> Result<T, LockError> {
        match tokio::time::timeout(self.config.request_timeout, f).await {
            Ok(r) => r.map_err(|e| classify(e, writes, &self.config.endpoint)),
            Err(_) if writes => Err(LockError::Indeterminate(format!("postgres at {}: no reply in time", self.config.endpoint))),
            Err(_) => Err(LockError::Unavailable(format!("postgres at {}: no reply in time", self.config.endpoint))),
        }
    }
}


#[async_trait]
impl DistLock for PgLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let owner = &self.owner;
        let ttl = opts.ttl.as_secs_f64();
        let attempt = || async {
            let q = sqlx::query_scalar::<_, i64>(ACQUIRE).bind(key).bind(ttl).bind(owner.as_str()).fetch_optional(&self.pool);
            self.bounded(q, true).await
        };
        let (token, attempt_at) = dlbench_core::poll(opts, invoked_at, attempt).await?;
        Ok(Lease {
            key: key.to_string(),
            token: Some(FencingToken(token as u64)),
            invoked_at,
            acquired_at: Instant::now(),
            valid_until: attempt_at + opts.ttl,
            handle: LeaseHandle::new(owner.clone()),
            lost: LostSignal::never(),
        })
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let q = sqlx::query(RELEASE).bind(&lease.key).bind(&lease.handle.id).execute(&self.pool);
        let r = self.bounded(q, true).await?;
        if r.rows_affected() == 1 {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: not ours or expired", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        let q = sqlx::query(EXTEND).bind(&lease.key).bind(&lease.handle.id).bind(ttl.as_secs_f64()).execute(&self.pool);
        let r = self.bounded(q, true).await?;
        if r.rows_affected() == 1 {
            lease.valid_until = sent + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: not ours or expired", lease.key)))
        }
    }

    // A crashed process's connection just drops (with this client); its rows expire by TTL.
    async fn abandon(&self) {}

    async fn close(&self) {
        if self.own {
            self.pool.close().await;
        }
    }
}
