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
//! leases on it report lost, and the next acquire reconnects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, Consistency, DistLock, Expiry, FencingToken, GrantedTtl,
    Lease, LeaseHandle, LockError, LostSender, LostSignal, WaitStyle,
};
use sqlx::mysql::{MySqlConnection, MySqlPool};
use sqlx::Connection;
use tokio::sync::Mutex;

use crate::{classify, MariaConfig};

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
        let pool = crate::open(&config, 2).await?;
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
        Capabilities {
            consistency: Consistency::Cp,
            // dlbench's sequence token (module docs), not a property of GET_LOCK.
            fencing: true,
            // The server queues waiters but documents no grant order.
            fifo: false,
            expiry: Expiry::Session,
            wait: WaitStyle::Watch,
            lock_delay: false,
        }
    }
    /// `GET_LOCK` has no TTL: the lock lives while its connection does.
    async fn granted_ttl(&self, _requested: Duration) -> Result<GrantedTtl, LockError> {
        Ok(GrantedTtl::None)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let c = GetLock { config: self.config.clone(), conn: Mutex::new(None) };
        {
            let mut slot = c.conn.lock().await;
            c.connected(&mut slot).await?;
        }
        Ok(Box::new(c))
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

/// One client's connection.
struct Conn {
    conn: MySqlConnection,
    /// Which connection this is: a lease taken on an earlier one died with it.
    generation: u64,
    /// Fires when this connection is dropped: every lock on it is gone.
    lost: LostSender,
}

struct GetLock {
    config: MariaConfig,
    conn: Mutex<Option<Conn>>,
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Errors after which the connection is unusable: anything but an error the server
/// answered with (which leaves the connection as it was).
fn connection_ended(e: &sqlx::Error) -> bool {
    !matches!(e, sqlx::Error::Database(_))
}

fn drop_conn(slot: &mut Option<Conn>, reason: &str) {
    if let Some(c) = slot.take() {
        c.lost.lose(reason);
    }
}

impl GetLock {
    /// The live connection, opened if there is none.
    async fn connected<'a>(&self, slot: &'a mut Option<Conn>) -> Result<&'a mut Conn, LockError> {
        if slot.is_none() {
            let options = self.config.options()?;
            let open = MySqlConnection::connect_with(&options);
            let conn = tokio::time::timeout(self.config.connect_timeout, open)
                .await
                .map_err(|_| LockError::Unavailable(format!("mariadb at {}: connect timed out", self.config.endpoint)))?
                .map_err(|e| classify(e, false, &self.config.endpoint))?;
            let (lost, _) = LostSignal::channel();
            *slot = Some(Conn { conn, generation: GENERATION.fetch_add(1, Ordering::Relaxed), lost });
        }
        Ok(slot.as_mut().expect("just opened"))
    }

    /// A statement's outcome as the lock's; a failure that ended the connection drops it
    /// (which frees every lock on it) and says so to the leases.
    fn settle<T>(
        &self,
        slot: &mut Option<Conn>,
        r: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
        writes: bool,
    ) -> Result<T, LockError> {
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if connection_ended(&e) {
                    drop_conn(slot, &format!("connection failed: {e}"));
                }
                Err(classify(e, writes, &self.config.endpoint))
            }
            Err(_) => {
                // Still in flight: closing the connection ends whatever it did.
                drop_conn(slot, "no reply in time; connection dropped");
                Err(self.config.no_reply(writes))
            }
        }
    }

    /// A scalar query on the live connection, bounded by `within`.
    async fn scalar<T>(&self, slot: &mut Option<Conn>, sql: &'static str, key: &str, arg: Option<f64>, within: Duration, writes: bool) -> Result<T, LockError>
    where
        T: Send + Unpin + for<'r> sqlx::Decode<'r, sqlx::MySql> + sqlx::Type<sqlx::MySql>,
    {
        let c = self.connected(slot).await?;
        let mut q = sqlx::query_scalar::<_, T>(sql).bind(key);
        if let Some(a) = arg {
            q = q.bind(a);
        }
        let r = tokio::time::timeout(within, q.fetch_one(&mut c.conn)).await;
        self.settle(slot, r, writes)
    }

    /// The lease's connection is the live one; a lease from an earlier connection died with it.
    fn live<'a>(slot: &'a mut Option<Conn>, lease: &Lease) -> Result<&'a mut Conn, LockError> {
        let generation = lease.handle.data::<u64>().copied();
        match slot.as_mut() {
            Some(c) if Some(c.generation) == generation => Ok(c),
            _ => Err(LockError::NotHeld(format!("{}: its connection ended", lease.key))),
        }
    }
}

#[async_trait]
impl DistLock for GetLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let mut slot = self.conn.lock().await;
        // The server gives up at the timeout; the client bound only catches a server that
        // stopped answering. Fractions of a second are honoured.
        let wait = opts.wait.as_secs_f64();
        let within = opts.wait + self.config.request_timeout;
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
        Ok(Lease {
            key: key.to_string(),
            token: Some(FencingToken(token as u64)),
            invoked_at,
            acquired_at: Instant::now(),
            // A session lock has no TTL: it lives with the connection, which answered at
            // the grant; the holder trusts it a TTL from then (however long it queued),
            // and `extend` checks again.
            valid_until: Instant::now() + opts.ttl,
            handle: LeaseHandle::new(format!("GET_LOCK {key}")).with_data(c.generation),
            lost: c.lost.subscribe(),
        })
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let mut slot = self.conn.lock().await;
        Self::live(&mut slot, &lease)?;
        let r: Option<i64> = self.scalar(&mut slot, UNLOCK, &lease.key, None, self.config.request_timeout, true).await?;
        if r == Some(1) {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: this connection does not hold it", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let mut slot = self.conn.lock().await;
        Self::live(&mut slot, lease)?;
        let checked = Instant::now();
        let held: i64 = self.scalar(&mut slot, HELD, &lease.key, None, self.config.request_timeout, false).await?;
        if held == 1 {
            lease.valid_until = checked + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: this connection does not hold it", lease.key)))
        }
    }

    async fn abandon(&self) {
        // Drop the socket without a goodbye, as a crashed process would.
        if let Some(c) = self.conn.lock().await.take() {
            c.lost.lose("abandoned");
            drop(c.conn);
        }
    }

    async fn close(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            c.lost.lose("client closed");
            let _ = tokio::time::timeout(self.config.request_timeout, c.conn.close()).await;
        }
    }
}
