//! The connection a session lock lives on (PostgreSQL advisory locks, MariaDB `GET_LOCK`).
//!
//! Each logical client is its own connection (the connection *is* the holder). A connection
//! that fails is dropped, which ends the session and every lock on it: the leases taken on it
//! report lost (their [`dlbench_core::LostSignal`] fires), a lease from an earlier connection
//! is told apart by its generation, and the next acquire reconnects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dlbench_core::{Lease, LeaseHandle, LockError, LostSender, LostSignal};
use sqlx::Connection;
use tokio::sync::{Mutex, MutexGuard};

use crate::{Conn, Dialect, SqlConfig};

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// One client's session: its connection, and what the recipe keeps beside it (`X`).
pub struct Session<D: Dialect, X> {
    pub conn: Conn<D>,
    /// Which connection this is: a lease taken on an earlier one died with it.
    generation: u64,
    /// Fires when this connection is dropped: every lock on it is gone.
    lost: LostSender,
    /// The recipe's own state for this session (pg-advisory: its settings, its transaction).
    pub state: X,
}

/// A client's session, or none while it is not connected.
pub type Slot<D, X> = Option<Session<D, X>>;

impl<D: Dialect, X> Session<D, X> {
    /// The lease of a lock granted on this session now, with `token`. A session lock has no
    /// TTL: it lives with the connection, which answered at the grant; the holder trusts it
    /// a TTL from then (however long it queued), and `extend` checks again.
    pub fn lease(&self, key: &str, token: i64, invoked_at: Instant, ttl: Duration, id: String) -> Lease {
        Lease::granted(key, Some(token as u64), invoked_at, Instant::now() + ttl, LeaseHandle::new(id).with_data(self.generation))
            .with_lost(self.lost.subscribe())
    }
}

/// Drop the session, if there is one, saying why to the leases on it.
pub fn drop_session<D: Dialect, X>(slot: &mut Slot<D, X>, reason: &str) {
    if let Some(c) = slot.take() {
        c.lost.lose(reason);
    }
}

/// A client's connection slot: opened on demand, dropped when a statement ends the session.
pub struct SessionConn<D: Dialect, X> {
    config: SqlConfig<D>,
    slot: Mutex<Slot<D, X>>,
}

impl<D: Dialect, X: Default + Send> SessionConn<D, X> {
    pub fn new(config: SqlConfig<D>) -> Self {
        SessionConn { config, slot: Mutex::new(None) }
    }

    /// A client connected now (so a server that is down fails the client, not its first acquire).
    pub async fn open(config: SqlConfig<D>) -> Result<Self, LockError> {
        let c = Self::new(config);
        {
            let mut slot = c.slot.lock().await;
            c.connected(&mut slot).await?;
        }
        Ok(c)
    }

    pub fn config(&self) -> &SqlConfig<D> {
        &self.config
    }

    /// The slot, held for one operation.
    pub async fn lock(&self) -> MutexGuard<'_, Slot<D, X>> {
        self.slot.lock().await
    }

    /// The live connection, opened if there is none.
    pub async fn connected<'a>(&self, slot: &'a mut Slot<D, X>) -> Result<&'a mut Session<D, X>, LockError> {
        if slot.is_none() {
            let options = self.config.options()?;
            let open = Conn::<D>::connect_with(&options);
            let conn = tokio::time::timeout(self.config.connect_timeout, open)
                .await
                .map_err(|_| self.config.connect_timed_out())?
                .map_err(|e| self.config.classify(e, false))?;
            let (lost, _) = LostSignal::channel();
            *slot = Some(Session { conn, generation: GENERATION.fetch_add(1, Ordering::Relaxed), lost, state: X::default() });
        }
        Ok(slot.as_mut().expect("just opened"))
    }

    /// A statement's outcome as the lock's; a failure that ended the session drops the
    /// connection (which frees every lock on it) and says so to the leases.
    pub fn settle<T>(
        &self,
        slot: &mut Slot<D, X>,
        r: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
        writes: bool,
    ) -> Result<T, LockError> {
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if D::session_ended(&e) {
                    drop_session(slot, &format!("connection failed: {e}"));
                }
                Err(self.config.classify(e, writes))
            }
            Err(_) => {
                // The statement is still in flight: the connection is unusable, and closing
                // it ends the session, so whatever the statement did is undone.
                drop_session(slot, "no reply in time; connection dropped");
                Err(self.config.no_reply(writes))
            }
        }
    }

    /// The lease's connection is the live one; a lease from an earlier connection died with it.
    pub fn live<'a>(slot: &'a mut Slot<D, X>, lease: &Lease) -> Result<&'a mut Session<D, X>, LockError> {
        let generation = lease.handle.data::<u64>().copied();
        match slot.as_mut() {
            Some(c) if Some(c.generation) == generation => Ok(c),
            _ => Err(LockError::NotHeld(format!("{}: its {} ended", lease.key, D::HOLDER))),
        }
    }

    /// Drop the socket without a goodbye, as a crashed process would: the server ends the
    /// session (and frees its locks) once it notices.
    pub async fn abandon(&self) {
        if let Some(c) = self.slot.lock().await.take() {
            c.lost.lose("abandoned");
            drop(c.conn);
        }
    }

    /// End the session cleanly, which frees its locks.
    pub async fn close(&self) {
        if let Some(c) = self.slot.lock().await.take() {
            c.lost.lose("client closed");
            let _ = tokio::time::timeout(self.config.request_timeout, c.conn.close()).await;
        }
    }
}
