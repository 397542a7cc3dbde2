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
//! A contended acquire polls after a jittered delay. The recipe's code is `dlbench-sql`'s
//! [`dlbench_sql::table`]; this crate is its PostgreSQL dialect.

use std::time::Duration;

use async_trait::async_trait;
use dlbench_core::LockError;
use dlbench_sql::{Dialect, SqlConfig, Table, TableLock};
use sqlx::postgres::{PgConnectOptions, PgPool};

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
pub type PgConfig = SqlConfig<PgDialect>;

/// A PostgreSQL server holding the lock table.
pub type PgBackend = dlbench_sql::TableBackend<PgDialect>;

/// PostgreSQL's side of the SQL backends (also the advisory-lock backends').
#[derive(Debug, Clone, Copy)]
pub struct PgDialect;

/// Map a client error to the lock's error: `may_have_written` when the statement may have
/// reached the server, so a lost connection leaves the outcome unknown.
pub fn classify(e: sqlx::Error, may_have_written: bool, endpoint: &str) -> LockError {
    dlbench_sql::classify::<PgDialect>(e, may_have_written, endpoint)
}

impl Dialect for PgDialect {
    type Db = sqlx::Postgres;
    const NAME: &'static str = "postgres";
    const USER: &'static str = "postgres";
    const DATABASE: &'static str = "postgres";
    const HOLDER: &'static str = "session";

    fn options(config: &PgConfig, host: &str, port: u16) -> PgConnectOptions {
        let mut o = PgConnectOptions::new()
            .host(host)
            .port(port)
            .username(&config.user)
            .database(&config.database)
            .application_name("dlbench");
        if let Some(p) = &config.password {
            o = o.password(p);
        }
        if let Some(t) = &config.tls {
            o = o.ssl_mode(sqlx::postgres::PgSslMode::VerifyCa);
            if let Some(ca) = &t.ca {
                o = o.ssl_root_cert_from_pem(ca.clone());
            }
            if let Some((cert, key)) = &t.identity {
                o = o.ssl_client_cert_from_pem(cert).ssl_client_key_from_pem(key);
            }
        }
        o
    }

    /// 28P01 invalid password, 28000 invalid authorization, 3D000 no such database.
    fn denied(db: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
        let code = db.code().unwrap_or_default();
        code.starts_with("28") || code == "3D000"
    }

    /// Connection failures, and the server ending the session (57P0x shutdown or
    /// termination, 25P03 idle-in-transaction timeout, 08xxx connection exceptions).
    fn session_ended(e: &sqlx::Error) -> bool {
        match e {
            sqlx::Error::Database(d) => {
                let code = d.code().unwrap_or_default();
                code.starts_with("57P") || code.starts_with("08") || code == "25P03"
            }
            _ => true,
        }
    }
}

#[async_trait]
impl Table for PgDialect {
    const OWNER_PER_CLIENT: bool = true;
    type Memo = ();

    async fn create(pool: &PgPool) -> Result<(), sqlx::Error> {
        for q in [CREATE, ADD_HOLDS] {
            sqlx::query(q).execute(pool).await?;
        }
        Ok(())
    }

    async fn attempt(lock: &TableLock<Self>, key: &str, ttl: Duration, owner: &str) -> Result<Option<u64>, LockError> {
        let q = sqlx::query_scalar::<_, i64>(ACQUIRE).bind(key).bind(ttl.as_secs_f64()).bind(owner).fetch_optional(lock.pool());
        Ok(lock.bounded(q).await?.map(|token| token as u64))
    }

    async fn release(pool: &PgPool, key: &str, owner: &str) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(RELEASE).bind(key).bind(owner).execute(pool).await?.rows_affected())
    }

    async fn extend(pool: &PgPool, key: &str, owner: &str, ttl: Duration) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(EXTEND).bind(key).bind(owner).bind(ttl.as_secs_f64()).execute(pool).await?.rows_affected())
    }

    async fn claims(pool: &PgPool, key: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar::<_, String>(CLAIMS).bind(key).fetch_all(pool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_endpoint_errors_name_postgres() {
        let c = PgConfig::new("db.example:5433");
        assert_eq!((c.user.as_str(), c.database.as_str(), c.pool_size), ("postgres", "postgres", 16));
        assert!(c.options().is_ok());
        let e = PgConfig::new("no-port").options().unwrap_err();
        assert_eq!(e, LockError::Config("postgres endpoint \"no-port\" is not host:port".into()));
        assert_eq!(c.no_reply(true), LockError::Indeterminate("postgres at db.example:5433: no reply in time".into()));
        assert_eq!(c.no_reply(false), LockError::Unavailable("postgres at db.example:5433: no reply in time".into()));
    }

    #[test]
    fn a_refused_connection_is_unavailable_and_a_cut_one_unknown_only_after_a_write() {
        let refused = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let reset = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(matches!(classify(refused(), true, "h:1"), LockError::Unavailable(_)));
        assert!(matches!(classify(reset(), true, "h:1"), LockError::Indeterminate(_)));
        assert!(matches!(classify(reset(), false, "h:1"), LockError::Unavailable(_)));
    }
}
