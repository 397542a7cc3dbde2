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
//! A contended table acquire polls after a jittered delay; GET_LOCK waits in the server. The
//! table recipe's code is `dlbench-sql`'s [`dlbench_sql::table`], the GET_LOCK connection's
//! [`dlbench_sql::session`]; this crate is their MariaDB dialect.

pub mod get_lock;

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use dlbench_core::LockError;
use dlbench_sql::{Dialect, SqlConfig, Table, TableLock};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
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
pub type MariaConfig = SqlConfig<MariaDialect>;

/// The lock table on an InnoDB server.
pub type TableBackend = dlbench_sql::TableBackend<MariaDialect>;

/// MariaDB's (and MySQL's) side of the SQL backends.
#[derive(Debug, Clone, Copy)]
pub struct MariaDialect;

/// Map a client error to the lock's error: `may_have_written` when the statement may have
/// reached the server, so a lost connection leaves the outcome unknown.
pub fn classify(e: sqlx::Error, may_have_written: bool, endpoint: &str) -> LockError {
    dlbench_sql::classify::<MariaDialect>(e, may_have_written, endpoint)
}

/// Microseconds for `INTERVAL ? MICROSECOND`.
fn micros(d: Duration) -> i64 {
    d.as_micros().min(i64::MAX as u128) as i64
}

impl Dialect for MariaDialect {
    type Db = sqlx::MySql;
    const NAME: &'static str = "mariadb";
    const USER: &'static str = "dlbench";
    const DATABASE: &'static str = "dlbench";
    const HOLDER: &'static str = "connection";

    fn options(config: &MariaConfig, host: &str, port: u16) -> MySqlConnectOptions {
        let mut o = MySqlConnectOptions::new().host(host).port(port).username(&config.user).database(&config.database);
        if let Some(p) = &config.password {
            o = o.password(p);
        }
        match &config.tls {
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
        o
    }

    /// SQLSTATE 28000 access denied (1045); 1049 unknown database; 1044 no access to it.
    fn denied(db: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
        let number = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().map(|m| m.number()).unwrap_or(0);
        db.code().is_some_and(|c| c.starts_with("28")) || matches!(number, 1044 | 1045 | 1049)
    }

    /// Anything but an error the server answered with (which leaves the connection as it was).
    fn session_ended(e: &sqlx::Error) -> bool {
        !matches!(e, sqlx::Error::Database(_))
    }
}

#[async_trait]
impl Table for MariaDialect {
    const OWNER_PER_CLIENT: bool = false;
    /// Lock names whose row this client has seen exist: for those a failed take means held,
    /// and the INSERT is skipped (rows are never deleted).
    type Memo = Mutex<HashSet<String>>;

    async fn create(pool: &MySqlPool) -> Result<(), sqlx::Error> {
        sqlx::query(CREATE).execute(pool).await.map(|_| ())
    }

    async fn attempt(lock: &TableLock<Self>, key: &str, ttl: Duration, owner: &str) -> Result<Option<u64>, LockError> {
        let ttl = micros(ttl);
        let known = lock.memo().lock().await.contains(key);
        if !known {
            let q = sqlx::query(CREATE_HELD).bind(key).bind(ttl).bind(owner).execute(lock.pool());
            let r = lock.bounded(q).await?;
            lock.memo().lock().await.insert(key.to_string());
            if r.rows_affected() == 1 {
                return Ok(Some(1));
            }
        }
        let q = sqlx::query(TAKE).bind(ttl).bind(owner).bind(key).execute(lock.pool());
        let r = lock.bounded(q).await?;
        Ok((r.rows_affected() == 1).then(|| r.last_insert_id()))
    }

    async fn release(pool: &MySqlPool, key: &str, owner: &str) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(RELEASE).bind(key).bind(owner).execute(pool).await?.rows_affected())
    }

    async fn extend(pool: &MySqlPool, key: &str, owner: &str, ttl: Duration) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(EXTEND).bind(micros(ttl)).bind(key).bind(owner).execute(pool).await?.rows_affected())
    }

    async fn claims(pool: &MySqlPool, key: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar::<_, String>(CLAIMS).bind(key).fetch_all(pool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_endpoint_errors_name_mariadb() {
        let c = MariaConfig::new("db.example:3307");
        assert_eq!((c.user.as_str(), c.database.as_str(), c.pool_size), ("dlbench", "dlbench", 16));
        assert!(c.options().is_ok());
        let e = MariaConfig::new("no-port").options().unwrap_err();
        assert_eq!(e, LockError::Config("mariadb endpoint \"no-port\" is not host:port".into()));
        assert_eq!(c.no_reply(true), LockError::Indeterminate("mariadb at db.example:3307: no reply in time".into()));
        assert_eq!(c.connect_timed_out(), LockError::Unavailable("mariadb at db.example:3307: connect timed out".into()));
    }
}
