//! PostgreSQL advisory locks: the lock most PostgreSQL users reach for, held in the server's
//! own lock manager rather than in a table.
//!
//! Two designs, one per [`Scope`]:
//!
//! - **`pg-advisory`** ([`Scope::Session`]): `pg_advisory_lock(k)` on the client's own
//!   connection; the lock lives with that session until `pg_advisory_unlock(k)` or the session
//!   ends. A contended acquire waits *in the server* (the lock manager queues waiters and wakes
//!   the next one, no polling), bounded by `lock_timeout` = the acquire's wait; a wait of 0 is
//!   `pg_try_advisory_lock(k)`.
//! - **`pg-advisory-xact`** ([`Scope::Xact`]): `BEGIN; SELECT pg_advisory_xact_lock(k)`; the
//!   transaction stays open while the lock is held and COMMIT (or ROLLBACK, or the session's
//!   end) releases it. The session sets `idle_in_transaction_session_timeout` to the acquire's
//!   TTL, so the server itself ends a holder that stays silent that long: a server-enforced TTL,
//!   counted from the holder's last statement (extend sends one).
//!
//! **Key mapping.** A lock name becomes the bigint `hashtextextended(name, 0)`, computed by the
//! server (PostgreSQL 11+, the hash that hash partitioning keeps stable across versions), so
//! anyone with `psql` takes the same lock with
//! `SELECT pg_advisory_lock(hashtextextended('NAME', 0));` ([`psql_lock`]). Advisory locks are
//! per database, so both sides must connect to the same database. Two names whose 64-bit hashes
//! collide share one lock.
//!
//! **Fencing: added by dlbench, not part of advisory locks.** The acquiring statement takes
//! `nextval('dlbench_advisory_fence')` *after* the lock is granted (a materialized CTE, or a
//! CASE on the try form, orders the two), so the number is drawn while holding the lock and
//! successive holders of a key draw increasing numbers. A plain advisory lock has no token; a
//! `psql` holder draws none.
//!
//! **Expiry.** Session form: the lock goes when the server ends the session. A crashed client
//! process closes its socket and the server frees the lock at once; a client whose machine or
//! network died is noticed only by the server's TCP keepalives (`tcp_keepalives_idle` etc.,
//! hours by OS default) or `idle_session_timeout` if the DBA set one; a client that is alive
//! but stuck (paused, swapping) keeps the lock for as long as its connection stays up. Xact
//! form: additionally the TTL above.
//!
//! Each logical client is its own connection (the connection *is* the holder), so clients
//! never share one, whatever `Connections` asks. A connection that fails is dropped, which ends
//! the session and every lock on it; the leases on it report lost, and the next acquire
//! reconnects ([`dlbench_sql::session`]).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl, Lease, LockError, WaitStyle,
};
use dlbench_postgres::{classify, PgConfig, PgDialect};
use dlbench_sql::session::drop_session;
use dlbench_sql::SessionConn;
use sqlx::postgres::{PgPool, PgPoolOptions};

/// The statement a `psql` user runs to take the same session lock as dlbench's `name`.
pub fn psql_lock(name: &str) -> String {
    format!("SELECT pg_advisory_lock(hashtextextended('{}', 0));", name.replace('\'', "''"))
}

const FENCE: &str = "CREATE SEQUENCE IF NOT EXISTS dlbench_advisory_fence";

/// Session form, blocking: the lock, then a token drawn while holding it.
pub const SESSION_LOCK: &str = "WITH l AS MATERIALIZED (SELECT pg_advisory_lock(hashtextextended($1, 0)))
SELECT nextval('dlbench_advisory_fence') FROM l";
/// Session form, try once: a token only if the lock was taken (NULL otherwise).
pub const SESSION_TRY: &str = "SELECT CASE WHEN pg_try_advisory_lock(hashtextextended($1, 0))
THEN nextval('dlbench_advisory_fence') END";
const SESSION_UNLOCK: &str = "SELECT pg_advisory_unlock(hashtextextended($1, 0))";
const XACT_LOCK: &str = "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtextextended($1, 0)))
SELECT nextval('dlbench_advisory_fence') FROM l";
const XACT_TRY: &str = "SELECT CASE WHEN pg_try_advisory_xact_lock(hashtextextended($1, 0))
THEN nextval('dlbench_advisory_fence') END";

/// pg_locks shows a bigint advisory key as its high half in `classid`, its low half in
/// `objid`, and `objsubid` 1; only this database's locks are ours.
macro_rules! key_match {
    () => {
        "locktype = 'advisory' AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)"
    };
}
/// Every session's claim on $1: (pid, granted).
const CLAIMS: &str = concat!("SELECT pid, granted FROM pg_locks WHERE ", key_match!(), " ORDER BY pid");
/// How many times this session holds $1.
const HELD: &str = concat!("SELECT count(*) FROM pg_locks WHERE ", key_match!(), " AND granted AND pid = pg_backend_pid()");

/// Which form of advisory lock a backend takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `pg_advisory_lock`: held by the session until unlocked or the session ends.
    Session,
    /// `pg_advisory_xact_lock`: held by an open transaction until COMMIT or ROLLBACK.
    Xact,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Session => "pg-advisory",
            Scope::Xact => "pg-advisory-xact",
        }
    }
}

/// A PostgreSQL server whose lock manager holds the locks.
pub struct AdvisoryBackend {
    scope: Scope,
    /// For `claims` only; the locks live on each client's own connection.
    pool: PgPool,
    config: PgConfig,
}

impl AdvisoryBackend {
    pub async fn connect(config: PgConfig, scope: Scope) -> Result<Self, LockError> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(config.connect_timeout)
            .connect_with(config.options()?);
        let pool = tokio::time::timeout(config.connect_timeout * 2, pool)
            .await
            .map_err(|_| config.connect_timed_out())?
            .map_err(|e| classify(e, false, &config.endpoint))?;
        // Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog (23505): the
        // other creator won, which is all we need.
        if let Err(e) = sqlx::query(FENCE).execute(&pool).await {
            let raced = matches!(&e, sqlx::Error::Database(d) if d.code().as_deref() == Some("23505"));
            if !raced {
                return Err(classify(e, false, &config.endpoint));
            }
        }
        Ok(AdvisoryBackend { scope, pool, config })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Backend for AdvisoryBackend {
    fn name(&self) -> &'static str {
        self.scope.name()
    }
    fn capabilities(&self) -> Capabilities {
        // Fenced by dlbench's sequence token (module docs), not a property of advisory locks.
        // Not FIFO: the lock manager queues waiters, but PostgreSQL does not document the
        // grant order as a promise (deadlock checks may reorder the queue).
        let expiry = match self.scope {
            Scope::Session => Expiry::Session,
            Scope::Xact => Expiry::Ttl,
        };
        Capabilities::cp(expiry, WaitStyle::Watch)
    }
    /// A session-level advisory lock has no TTL: it lives while its connection does. The
    /// transaction-level one ends with its transaction, which the server ends
    /// `idle_in_transaction_session_timeout` (the TTL, to the millisecond) after it idles.
    async fn granted_ttl(&self, requested: Duration) -> Result<GrantedTtl, LockError> {
        Ok(match self.scope {
            Scope::Session => GrantedTtl::None,
            Scope::Xact => GrantedTtl::Lock { ms: requested.as_millis() as u64 },
        })
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        Ok(Box::new(AdvisoryLock { scope: self.scope, session: SessionConn::open(self.config.clone()).await? }))
    }
    fn describe(&self) -> String {
        format!("{} {}/{}", self.scope.name(), self.config.endpoint, self.config.database)
    }
    fn connections(&self) -> Option<Connections> {
        Some(Connections::PerClient)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let q = sqlx::query_as::<_, (i32, bool)>(CLAIMS).bind(key).fetch_all(&self.pool);
        let rows = tokio::time::timeout(self.config.request_timeout, q)
            .await
            .map_err(|_| self.config.no_reply(false))?
            .map_err(|e| classify(e, false, &self.config.endpoint))?;
        Ok(rows
            .into_iter()
            .map(|(pid, granted)| {
                format!("advisory lock {key:?} pid {pid} {}", if granted { "granted" } else { "waiting" })
            })
            .collect())
    }
}

/// What a client keeps beside its session's connection.
#[derive(Default)]
struct State {
    /// The session's `lock_timeout` and `idle_in_transaction_session_timeout` as last set
    /// (ms), so each is set only when the asked value changes.
    lock_timeout_ms: Option<u64>,
    idle_tx_ms: Option<u64>,
    /// Xact form: the key the open transaction holds and how many times it was acquired.
    holding: Option<(String, usize)>,
}

type Slot = dlbench_sql::Slot<PgDialect, State>;

struct AdvisoryLock {
    scope: Scope,
    session: SessionConn<PgDialect, State>,
}

/// Milliseconds for a PostgreSQL timeout setting: at least 1, since 0 disables it, and at
/// most the setting's maximum (INT_MAX ms, about 24 days).
fn millis(d: Duration) -> u64 {
    d.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as u64
}

impl AdvisoryLock {
    fn config(&self) -> &PgConfig {
        self.session.config()
    }

    /// Run one statement that returns nothing, bounded by the request timeout.
    async fn exec(&self, slot: &mut Slot, sql: &'static str) -> Result<(), LockError> {
        let c = self.session.connected(slot).await?;
        let r = tokio::time::timeout(self.config().request_timeout, sqlx::raw_sql(sql).execute(&mut c.conn)).await;
        self.session.settle(slot, r, true).map(|_| ())
    }

    /// Set a session timeout setting unless it already has that value.
    async fn set_timeout(&self, slot: &mut Slot, which: Setting, ms: u64) -> Result<(), LockError> {
        let c = self.session.connected(slot).await?;
        let current = match which {
            Setting::LockTimeout => &mut c.state.lock_timeout_ms,
            Setting::IdleInTransaction => &mut c.state.idle_tx_ms,
        };
        if *current == Some(ms) {
            return Ok(());
        }
        let q = sqlx::query("SELECT set_config($1, $2, false)")
            .bind(which.name())
            .bind(format!("{ms}ms"))
            .execute(&mut c.conn);
        let r = tokio::time::timeout(self.config().request_timeout, q).await;
        self.session.settle(slot, r, false)?;
        if let Some(c) = slot.as_mut() {
            match which {
                Setting::LockTimeout => c.state.lock_timeout_ms = Some(ms),
                Setting::IdleInTransaction => c.state.idle_tx_ms = Some(ms),
            }
        }
        Ok(())
    }

    /// Whether this session holds `key` (granted), per pg_locks.
    async fn holds(&self, slot: &mut Slot, key: &str) -> Result<bool, LockError> {
        let c = self.session.connected(slot).await?;
        let q = sqlx::query_scalar::<_, i64>(HELD).bind(key).fetch_one(&mut c.conn);
        let r = tokio::time::timeout(self.config().request_timeout, q).await;
        self.session.settle(slot, r, false).map(|n| n > 0)
    }

    /// Everything before the locking statement: the session's timeouts, and for the
    /// transaction form the transaction (or a savepoint in the one that holds `key`).
    /// Returns whether the acquire is nested in a held transaction.
    async fn prepare(&self, slot: &mut Slot, key: &str, opts: &AcquireOptions) -> Result<bool, LockError> {
        if !opts.wait.is_zero() {
            self.set_timeout(slot, Setting::LockTimeout, millis(opts.wait)).await?;
        }
        if self.scope == Scope::Session {
            return Ok(false);
        }
        match self.session.connected(slot).await?.state.holding.clone() {
            None => {
                self.set_timeout(slot, Setting::IdleInTransaction, millis(opts.ttl)).await?;
                self.exec(slot, "BEGIN").await?;
                Ok(false)
            }
            // COMMIT releases every lock of the transaction at once, so one client cannot
            // hold two keys apart; the same key again is the server's to answer.
            Some((held, _)) if held != key => Err(LockError::Config(format!(
                "pg-advisory-xact: this client's transaction holds {held:?}; one key per client"
            ))),
            Some(_) => {
                // A failed statement would abort the transaction that holds the lock.
                self.exec(slot, "SAVEPOINT dlbench_again").await?;
                Ok(true)
            }
        }
    }

    /// Take the lock once (try) or wait in the server up to `wait`; `Ok(None)` when busy.
    async fn take(&self, slot: &mut Slot, key: &str, wait: Duration) -> Result<Option<i64>, LockError> {
        let (lock, try_once) = match self.scope {
            Scope::Session => (SESSION_LOCK, SESSION_TRY),
            Scope::Xact => (XACT_LOCK, XACT_TRY),
        };
        let c = self.session.connected(slot).await?;
        let r = if wait.is_zero() {
            let q = sqlx::query_scalar::<_, Option<i64>>(try_once).bind(key).fetch_one(&mut c.conn);
            tokio::time::timeout(self.config().request_timeout, q).await
        } else {
            // The server gives up at lock_timeout; the client bound only catches a server
            // that stopped answering.
            let q = sqlx::query_scalar::<_, i64>(lock).bind(key).fetch_one(&mut c.conn);
            tokio::time::timeout(wait + self.config().request_timeout, async { q.await.map(Some) }).await
        };
        match r {
            // 55P03 lock_not_available: lock_timeout passed, our wait withdrawn.
            Ok(Err(sqlx::Error::Database(d))) if d.code().as_deref() == Some("55P03") => {
                Err(LockError::Timeout(wait))
            }
            r => self.session.settle(slot, r, true),
        }
    }
}

#[derive(Clone, Copy)]
enum Setting {
    LockTimeout,
    IdleInTransaction,
}

impl Setting {
    fn name(self) -> &'static str {
        match self {
            Setting::LockTimeout => "lock_timeout",
            Setting::IdleInTransaction => "idle_in_transaction_session_timeout",
        }
    }
}

#[async_trait]
impl DistLock for AdvisoryLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let mut slot = self.session.lock().await;
        let nested = match self.prepare(&mut slot, key, opts).await {
            // The session had ended (the server restarted, or ended an idle transaction):
            // nothing was held on it, so once more on a new connection.
            Err(e) if slot.is_none() && !matches!(e, LockError::Config(_)) => self.prepare(&mut slot, key, opts).await?,
            r => r?,
        };
        let r = self.take(&mut slot, key, opts.wait).await;
        if self.scope == Scope::Xact && slot.is_some() && !matches!(r, Ok(Some(_))) {
            let undo = if nested { "ROLLBACK TO SAVEPOINT dlbench_again" } else { "ROLLBACK" };
            // A set_config inside the transaction is undone with it.
            if let Some(c) = slot.as_mut() {
                c.state.idle_tx_ms = None;
                c.state.lock_timeout_ms = None;
            }
            self.exec(&mut slot, undo).await?;
        }
        let token = match r? {
            Some(t) => t,
            None => return Err(LockError::Busy),
        };
        let c = slot.as_mut().expect("a granted lock has its connection");
        if self.scope == Scope::Xact {
            let count = c.state.holding.as_ref().map_or(0, |(_, n)| *n);
            c.state.holding = Some((key.to_string(), count + 1));
        }
        Ok(c.lease(key, token, invoked_at, opts.ttl, format!("{} {key}", self.scope.name())))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let mut slot = self.session.lock().await;
        let c = SessionConn::live(&mut slot, &lease)?;
        match self.scope {
            Scope::Session => {
                let q = sqlx::query_scalar::<_, bool>(SESSION_UNLOCK).bind(&lease.key).fetch_one(&mut c.conn);
                let r = tokio::time::timeout(self.config().request_timeout, q).await;
                if self.session.settle(&mut slot, r, true)? {
                    Ok(())
                } else {
                    Err(LockError::NotHeld(format!("{}: this session does not hold it", lease.key)))
                }
            }
            Scope::Xact => {
                let n = match &mut c.state.holding {
                    Some((k, n)) if *k == lease.key => {
                        *n -= 1;
                        *n
                    }
                    _ => return Err(LockError::NotHeld(format!("{}: its transaction ended", lease.key))),
                };
                if n > 0 {
                    return Ok(());
                }
                c.state.holding = None;
                let r = tokio::time::timeout(self.config().request_timeout, sqlx::raw_sql("COMMIT").execute(&mut c.conn)).await;
                if let Ok(Err(sqlx::Error::Database(d))) = &r {
                    if d.code().as_deref() == Some("25P03") {
                        // The server ended the idle transaction: the TTL passed before release.
                        drop_session(&mut slot, "idle_in_transaction_session_timeout ended the session");
                        return Err(LockError::NotHeld(format!("{}: {}", lease.key, d.message())));
                    }
                }
                self.session.settle(&mut slot, r, true).map(|_| ())
            }
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let mut slot = self.session.lock().await;
        SessionConn::live(&mut slot, lease)?;
        let checked = Instant::now();
        let held = async {
            if self.scope == Scope::Xact {
                // Inside the transaction, so it is undone if the transaction is rolled back;
                // committed with the release otherwise.
                self.set_timeout(&mut slot, Setting::IdleInTransaction, millis(ttl)).await?;
            }
            // The statement itself restarts the server's idle clock (xact form).
            self.holds(&mut slot, &lease.key).await
        }
        .await;
        let held = match held {
            // The session is gone (the server ended the idle transaction past its TTL, or the
            // connection failed and was dropped, which ends it): so is every lock on it.
            Err(e) if slot.is_none() && !matches!(e, LockError::Config(_)) => {
                return Err(LockError::NotHeld(format!("{}: its session ended ({e})", lease.key)));
            }
            r => r?,
        };
        if held {
            lease.valid_until = checked + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: this session does not hold it", lease.key)))
        }
    }

    async fn abandon(&self) {
        self.session.abandon().await
    }

    async fn close(&self) {
        self.session.close().await
    }
}
