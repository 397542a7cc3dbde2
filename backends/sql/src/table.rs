//! The lease-table lock (ShedLock's shape), once for every SQL dialect.
//!
//! One row per lock name, `lock_until` computed from the DATABASE clock. An acquire attempt
//! writes the row only if it is free (or, where the dialect is reentrant, already ours); a
//! release or an extend touches the row only while we still own it, and says `NotHeld` when
//! no row was affected. A contended acquire polls after a jittered delay
//! ([`dlbench_core::poll`]). The fencing token is a column of the row, counted up by the
//! granting statement itself; rows are never deleted, so the counter never restarts.
//!
//! What differs per server is in [`Table`]: the statements, how one attempt is made, and
//! whether the owner is the client (reentrant) or each acquire.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, Lease, LeaseHandle, LockError, WaitStyle,
};
use sqlx::Pool;

use crate::{open, Dialect, SqlConfig};

/// The lock table's statements in one dialect.
#[async_trait]
pub trait Table: Dialect {
    /// One owner id per client (`true`): the holder's second acquire finds its own live row
    /// and enters again, the classic reentrant database lock. `false`: a fresh owner per
    /// acquire, so a second acquire waits like anyone else's.
    const OWNER_PER_CLIENT: bool;

    /// What a client remembers between its acquires (MariaDB: the rows it has seen exist).
    type Memo: Default + Send + Sync;

    /// Make the table (or bring it up to date).
    async fn create(pool: &Pool<Self::Db>) -> Result<(), sqlx::Error>;

    /// One attempt to take `key` for `owner` for `ttl`: the fencing token if granted.
    async fn attempt(lock: &TableLock<Self>, key: &str, ttl: Duration, owner: &str) -> Result<Option<u64>, LockError>;

    /// Give one hold of `key` back if `owner` still holds it: the rows affected.
    async fn release(pool: &Pool<Self::Db>, key: &str, owner: &str) -> Result<u64, sqlx::Error>;

    /// Move `key`'s expiry to `ttl` from now if `owner` still holds it: the rows affected.
    async fn extend(pool: &Pool<Self::Db>, key: &str, owner: &str, ttl: Duration) -> Result<u64, sqlx::Error>;

    /// The owners of the live rows of `key`.
    async fn claims(pool: &Pool<Self::Db>, key: &str) -> Result<Vec<String>, sqlx::Error>;
}

/// A server holding the lock table.
pub struct TableBackend<D: Table> {
    pool: Pool<D::Db>,
    config: SqlConfig<D>,
    connections: Connections,
}

impl<D: Table> TableBackend<D> {
    pub async fn connect(config: SqlConfig<D>) -> Result<Self, LockError> {
        Self::connect_with(config, Connections::default()).await
    }

    /// As [`Self::connect`]; in `PerClient` mode each client opens a connection of its own
    /// (a pool of one, so a connection the server dropped is replaced), as each process
    /// would; in `Shared` mode clients share a pool of `pool_size`.
    pub async fn connect_with(config: SqlConfig<D>, connections: Connections) -> Result<Self, LockError> {
        let pool = open(&config, config.pool_size).await?;
        D::create(&pool).await.map_err(|e| config.classify(e, false))?;
        Ok(TableBackend { pool, config, connections })
    }

    pub fn pool(&self) -> &Pool<D::Db> {
        &self.pool
    }
}

/// A fresh owner id for `locked_by`.
fn new_owner() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[async_trait]
impl<D: Table> Backend for TableBackend<D> {
    fn name(&self) -> &'static str {
        D::NAME
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::cp(Expiry::Ttl, WaitStyle::Poll)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let pool = self.connections.pick(&self.pool, || open(&self.config, 1)).await?;
        let own = self.connections == Connections::PerClient;
        let owner = D::OWNER_PER_CLIENT.then(new_owner);
        Ok(Box::new(TableLock { pool, config: self.config.clone(), owner, own, memo: D::Memo::default() }))
    }
    fn describe(&self) -> String {
        format!("{} {}/{}", D::NAME, self.config.endpoint, self.config.database)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let owners = tokio::time::timeout(self.config.request_timeout, D::claims(&self.pool, key))
            .await
            .map_err(|_| self.config.no_reply(false))?
            .map_err(|e| self.config.classify(e, false))?;
        Ok(owners.into_iter().map(|o| format!("dlbench_locks row {key:?} locked_by {o}")).collect())
    }
}

/// One client of the lock table.
pub struct TableLock<D: Table> {
    pool: Pool<D::Db>,
    config: SqlConfig<D>,
    /// This client's id in `locked_by`, the same for all its acquires, when the dialect's
    /// owner is the client ([`Table::OWNER_PER_CLIENT`]).
    owner: Option<String>,
    /// The pool is this client's alone (`PerClient`): close ends its connection.
    own: bool,
    memo: D::Memo,
}

impl<D: Table> TableLock<D> {
    pub fn pool(&self) -> &Pool<D::Db> {
        &self.pool
    }

    pub fn memo(&self) -> &D::Memo {
        &self.memo
    }

    /// A writing statement bounded by the request timeout: no reply in time is an unknown
    /// outcome.
    pub async fn bounded<T>(&self, f: impl std::future::Future<Output = Result<T, sqlx::Error>>) -> Result<T, LockError> {
        match tokio::time::timeout(self.config.request_timeout, f).await {
            Ok(r) => r.map_err(|e| self.config.classify(e, true)),
            Err(_) => Err(self.config.no_reply(true)),
        }
    }

    /// An update of a row we must still own: one row affected, or `NotHeld`.
    async fn owned(&self, key: &str, f: impl std::future::Future<Output = Result<u64, sqlx::Error>>) -> Result<(), LockError> {
        if self.bounded(f).await? == 1 {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{key}: not ours or expired")))
        }
    }
}

#[async_trait]
impl<D: Table> DistLock for TableLock<D> {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let owner = self.owner.clone().unwrap_or_else(new_owner);
        let (token, attempt_at) = dlbench_core::poll(opts, invoked_at, || D::attempt(self, key, opts.ttl, &owner)).await?;
        Ok(Lease::granted(key, Some(token), invoked_at, attempt_at + opts.ttl, LeaseHandle::new(owner)))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        self.owned(&lease.key, D::release(&self.pool, &lease.key, &lease.handle.id)).await
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        self.owned(&lease.key, D::extend(&self.pool, &lease.key, &lease.handle.id, ttl)).await?;
        lease.valid_until = sent + ttl;
        Ok(())
    }

    // A crashed process's connection just drops (with this client); its rows expire by TTL.
    async fn abandon(&self) {}

    async fn close(&self) {
        if self.own {
            self.pool.close().await;
        }
    }
}
