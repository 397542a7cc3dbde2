//! What dlbench's SQL lock backends share, written once for PostgreSQL and MariaDB.
//!
//! - [`Dialect`]: what differs between the two servers at the connection level: the name in
//!   messages, the default user and database, the connect options with TLS, which server
//!   errors are configuration errors, and which errors end a session. [`SqlConfig`] is where
//!   and how to reach one; [`classify`] maps a client error to the lock's error; [`open`] a
//!   pool.
//! - [`table`]: the lease-table lock (ShedLock's shape), generic over a [`table::Table`]
//!   dialect that holds the statements: `dlbench-postgres` and the `mariadb` backend of
//!   `dlbench-mariadb`.
//! - [`session`]: the connection a session lock lives on (PostgreSQL advisory locks,
//!   MariaDB `GET_LOCK`): its generation, the lost signal of the leases on it, how a failed
//!   statement drops it.

pub mod session;
pub mod table;

use std::marker::PhantomData;
use std::time::Duration;

use dlbench_core::LockError;
use sqlx::{Connection, Database, Pool};

pub use session::{Session, SessionConn, Slot};
pub use table::{Table, TableBackend, TableLock};

/// A connection's options in dialect `D`'s driver.
pub type Options<D> = <<<D as Dialect>::Db as Database>::Connection as Connection>::Options;

/// One connection in dialect `D`'s driver.
pub type Conn<D> = <<D as Dialect>::Db as Database>::Connection;

/// What one SQL server differs in, below the lock recipes.
pub trait Dialect: Send + Sync + Sized + Clone + std::fmt::Debug + 'static {
    type Db: Database;
    /// The server's name in messages and descriptions: `postgres`, `mariadb`.
    const NAME: &'static str;
    /// The defaults of [`SqlConfig::new`].
    const USER: &'static str;
    const DATABASE: &'static str;
    /// What holds a session lock, in "its ... ended": `session` or `connection`.
    const HOLDER: &'static str;

    /// The connect options for `host:port`, with the config's credentials and TLS.
    fn options(config: &SqlConfig<Self>, host: &str, port: u16) -> Options<Self>;

    /// A server error that says the configuration is wrong (credentials, no such database).
    fn denied(db: &(dyn sqlx::error::DatabaseError + 'static)) -> bool;

    /// Errors after which a session connection is gone or unusable.
    fn session_ended(e: &sqlx::Error) -> bool;
}

/// Where and how to reach one SQL server.
#[derive(Debug, Clone)]
pub struct SqlConfig<D> {
    /// `host:port`.
    pub endpoint: String,
    pub user: String,
    pub password: Option<String>,
    pub database: String,
    /// Connections shared by all clients of this backend in `Shared` mode (and by `claims`).
    pub pool_size: u32,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// TLS: required, and the server verified against the CA (PostgreSQL's `sslmode=verify-ca`,
    /// MariaDB's `VERIFY_CA`).
    pub tls: Option<dlbench_core::TlsPem>,
    dialect: PhantomData<D>,
}

impl<D: Dialect> SqlConfig<D> {
    pub fn new(endpoint: impl Into<String>) -> Self {
        SqlConfig {
            endpoint: endpoint.into(),
            user: D::USER.into(),
            password: None,
            database: D::DATABASE.into(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            tls: None,
            dialect: PhantomData,
        }
    }

    /// The client's connect options (also used by the session-lock backends).
    pub fn options(&self) -> Result<Options<D>, LockError> {
        let (host, port) = self
            .endpoint
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| LockError::Config(format!("{} endpoint {:?} is not host:port", D::NAME, self.endpoint)))?;
        Ok(D::options(self, host, port))
    }

    /// A request that got no reply within the request timeout: of unknown outcome if it
    /// `writes`.
    pub fn no_reply(&self, writes: bool) -> LockError {
        let m = format!("{} at {}: no reply in time", D::NAME, self.endpoint);
        if writes {
            LockError::Indeterminate(m)
        } else {
            LockError::Unavailable(m)
        }
    }

    /// A connection that was not open within the connect bound.
    pub fn connect_timed_out(&self) -> LockError {
        LockError::Unavailable(format!("{} at {}: connect timed out", D::NAME, self.endpoint))
    }

    /// [`classify`] for this server.
    pub fn classify(&self, e: sqlx::Error, may_have_written: bool) -> LockError {
        classify::<D>(e, may_have_written, &self.endpoint)
    }
}

/// Map a client error to the lock's error: `may_have_written` when the statement may have
/// reached the server, so a lost connection leaves the outcome unknown.
pub fn classify<D: Dialect>(e: sqlx::Error, may_have_written: bool, endpoint: &str) -> LockError {
    let msg = format!("{} at {endpoint}: {e}", D::NAME);
    match &e {
        sqlx::Error::Database(db) => {
            if D::denied(db.as_ref()) {
                LockError::Config(format!("{} at {endpoint}: {}", D::NAME, db.message()))
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

/// A pool of up to `size` connections, the first opened now, within the connect bound.
pub async fn open<D: Dialect>(config: &SqlConfig<D>, size: u32) -> Result<Pool<D::Db>, LockError> {
    let pool = sqlx::pool::PoolOptions::<D::Db>::new()
        .max_connections(size.max(1))
        .acquire_timeout(config.connect_timeout)
        // sqlx pings every connection it hands out by default: one extra round trip per
        // statement, which halved the lock-cycle rate against pgbench (dlbench calibrate).
        // A dead connection now fails its statement instead, which the lock reports as
        // an error, and the pool drops it.
        .test_before_acquire(false)
        .connect_with(config.options()?);
    tokio::time::timeout(config.connect_timeout * 2, pool)
        .await
        .map_err(|_| config.connect_timed_out())?
        .map_err(|e| config.classify(e, false))
}
