//! `GET_LOCK`: MySQL's and MariaDB's named user-level lock, held by a connection.
//!
//! `GET_LOCK(name, timeout)` on the client's own connection: a contended acquire waits *in the
//! server* (the metadata lock manager wakes the next waiter, no polling) for up to `timeout`
//! seconds (fractions allowed), 0 tries once. The lock lives with the connection until
//! `RELEASE_LOCK(name)` or the connection ends. The name is the lock name as is, so anyone
//! with the `mariadb` client takes the same lock with `SELECT GET_LOCK('NAME', 10);`
//! ([`mariadb_lock`]). Named locks are server-wide, not per database. MySQL caps names at 64
//! characters; MariaDB does not.
//!
//! **Reentrant by the server**: since MariaDB 10.0.2 (MySQL 5.7) a connection that holds a
//! name gets it again at once, counted; it is free after as many `RELEASE_LOCK`s.
//!
//! **Fencing: added by dlbench, not part of GET_LOCK.** The acquiring statement is
//! `SELECT IF(GET_LOCK(?, ?) = 1, NEXTVAL(dlbench_get_lock_fence), NULL)`: `IF` evaluates only
//! the branch chosen, after the lock is granted, so successive holders draw increasing numbers
//! (MariaDB 10.3+ sequences). A `mariadb` client holder draws none.
//!
//! **Expiry.** The lock goes when the server ends the connection: at once when a crashed
//! process's socket closes; for a client whose machine or network died, only when the
//! server's `wait_timeout` (8 h by default) or TCP keepalive notices; a client alive but stuck
//! keeps it. There is no TTL.
//!
//! Each logical client is its own connection (the connection *is* the holder), whatever
//! `Connections` asks. A connection that fails is dropped, which frees every lock on it; the
//! leases on it report lost, and the next acquire reconnects ([`dlbench_sql::session`]).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl, Lease, LockError, WaitStyle,
};
use dlbench_sql::{SessionConn, Slot};
use sqlx::mysql::MySqlPool;

use crate::{classify, MariaConfig, MariaDialect};

/// The statement a `mariadb` client user runs to take the same lock as dlbench's `name`.
pub fn mariadb_lock(name: &str) -> String {
    format!("SELECT GET_LOCK('{}', 10);", name.replace('\\', "\\\\").replace('\'', "''"))
}

const FENCE: &str = "CREATE SEQUENCE IF NOT EXISTS dlbench_get_lock_fence";

/// The lock, waiting up to ? seconds, then a token drawn while holding it (NULL if not granted).
pub const LOCK: &str = "SELECT CAST(IF(GET_LOCK(?, ?) = 1, NEXTVAL(dlbench_get_lock_fence), NULL) AS SIGNED)";
/// 1 released, 0 held by another connection, NULL not held by anyone.
const UNLOCK: &str = "SELECT CAST(RELEASE_LOCK(?) AS SIGNED)";
/// Whether this connection holds ?.
const HELD: &str = "SELECT CAST(COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), 0) AS SIGNED)";
/// The holder's connection id, and the connections waiting in GET_LOCK for ?.
const HOLDER: &str = "SELECT CAST(IS_USED_LOCK(?) AS SIGNED)";
const WAITERS: &str = "SELECT CAST(ID AS SIGNED) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE 'SELECT IF(GET_LOCK(%' ORDER BY ID";

/// A MariaDB server whose named locks hold the locks.
pub struct GetLockBackend {
    /// For `claims` only; the locks live on each client's own connection.
    pool: MySqlPool,
    config: MariaConfig,
}

impl GetLockBackend {
    pub async fn connect(config: MariaConfig) -> Result<Self, LockError> {
        let pool = dlbench_sql::open(&config, 2).await?;
        sqlx::query(FENCE).execute(&pool).await.map_err(|e| classify(e, false, &config.endpoint))?;
        Ok(GetLockBackend { pool, config })
    }
}

#[async_trait]
impl Backend for GetLockBackend {
    fn name(&self) -> &'static str {
        "mariadb-get-lock"
    }
    fn capabilities(&self) -> Capabilities {
        // Fenced by dlbench's sequence token (module docs), not a property of GET_LOCK; not
        // FIFO: the server queues waiters but documents no grant order.
        Capabilities::cp(Expiry::Session, WaitStyle::Watch)
    }
    /// `GET_LOCK` has no TTL: the lock lives while its connection does.
    async fn granted_ttl(&self, _requested: Duration) -> Result<GrantedTtl, LockError> {
        Ok(GrantedTtl::None)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        Ok(Box::new(GetLock { session: SessionConn::open(self.config.clone()).await? }))
    }
    fn describe(&self) -> String {
        format!("mariadb-get-lock {}", self.config.endpoint)
    }
    fn connections(&self) -> Option<Connections> {
        Some(Connections::PerClient)
    }
    /// The holder, by connection id; and every connection waiting in dlbench's GET_LOCK
    /// statement (the server does not say for which name, so on a server shared by several
    /// locks these are all of them).
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let ep = &self.config.endpoint;
        let q = async {
            let holder = sqlx::query_scalar::<_, Option<i64>>(HOLDER).bind(key).fetch_one(&self.pool).await?;
            let waiters = sqlx::query_scalar::<_, i64>(WAITERS).fetch_all(&self.pool).await?;
            Ok::<_, sqlx::Error>((holder, waiters))
        };
        let (holder, waiters) = tokio::time::timeout(self.config.request_timeout, q)
            .await
            .map_err(|_| self.config.no_reply(false))?
            .map_err(|e| classify(e, false, ep))?;
        let mut out: Vec<String> = holder.map(|id| format!("named lock {key:?} held by connection {id}")).into_iter().collect();
        out.extend(waiters.into_iter().map(|id| format!("connection {id} waiting in GET_LOCK")));
        Ok(out)
    }
}

/// One client: its own connection.
struct GetLock {
    session: SessionConn<MariaDialect, ()>,
}

impl GetLock {
    fn config(&self) -> &MariaConfig {
        self.session.config()
    }

    /// A scalar query on the live connection, bounded by `within`.
    async fn scalar<T>(&self, slot: &mut Slot<MariaDialect, ()>, sql: &'static str, key: &str, arg: Option<f64>, within: Duration, writes: bool) -> Result<T, LockError>
    where
        T: Send + Unpin + for<'r> sqlx::Decode<'r, sqlx::MySql> + sqlx::Type<sqlx::MySql>,
    {
        let c = self.session.connected(slot).await?;
        let mut q = sqlx::query_scalar::<_, T>(sql).bind(key);
        if let Some(a) = arg {
            q = q.bind(a);
        }
        let r = tokio::time::timeout(within, q.fetch_one(&mut c.conn)).await;
        self.session.settle(slot, r, writes)
    }
}

#[async_trait]
impl DistLock for GetLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let mut slot = self.session.lock().await;
        // The server gives up at the timeout; the client bound only catches a server that
        // stopped answering. Fractions of a second are honoured.
        let wait = opts.wait.as_secs_f64();
        let within = opts.wait + self.config().request_timeout;
        let token = match self.scalar::<Option<i64>>(&mut slot, LOCK, key, Some(wait), within, true).await {
            // The connection had ended (the server restarted): nothing was held on it, so
            // once more on a new one.
            Err(e) if slot.is_none() && !matches!(e, LockError::Config(_) | LockError::Indeterminate(_)) => {
                self.scalar::<Option<i64>>(&mut slot, LOCK, key, Some(wait), within, true).await?
            }
            r => r?,
        };
        let Some(token) = token else {
            return Err(if opts.wait.is_zero() { LockError::Busy } else { LockError::Timeout(opts.wait) });
        };
        let c = slot.as_mut().expect("a granted lock has its connection");
        Ok(c.lease(key, token, invoked_at, opts.ttl, format!("GET_LOCK {key}")))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let mut slot = self.session.lock().await;
        SessionConn::live(&mut slot, &lease)?;
        let r: Option<i64> = self.scalar(&mut slot, UNLOCK, &lease.key, None, self.config().request_timeout, true).await?;
        if r == Some(1) {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: this connection does not hold it", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let mut slot = self.session.lock().await;
        SessionConn::live(&mut slot, lease)?;
        let checked = Instant::now();
        let held: i64 = self.scalar(&mut slot, HELD, &lease.key, None, self.config().request_timeout, false).await?;
        if held == 1 {
            lease.valid_until = checked + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: this connection does not hold it", lease.key)))
        }
    }

    async fn abandon(&self) {
        self.session.abandon().await
    }

    async fn close(&self) {
        self.session.close().await
    }
}
