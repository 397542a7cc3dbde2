//! The contract every dlbench lock backend implements, and the suite that checks it.
//!
//! - [`Backend`] is a connected lock service; [`Backend::client`] opens one logical client (its
//!   own session, lease or owner identity), which implements [`DistLock`].
//! - [`Lease`] is what a successful acquire returns: the key, the fencing token where the backend
//!   has one, and a signal that fires when the holder learns the lock was lost.
//! - [`LockError`] separates definite failures (the lock was not taken) from indeterminate ones
//!   (it may have been taken), because the history and the checkers must tell them apart.
//! - [`Resource`] is the thing a lock protects: it counts overlapping holders, lost updates on a
//!   read-sleep-write counter, and stale fencing tokens, measured where the damage would happen.
//! - [`conformance`] is one test body run against every backend on real servers.
//!
//! The trait lives here, not in the harness, so that backends do not depend on the harness that
//! depends on them.

pub mod conformance;
mod error;
mod lock;
mod resource;
mod tls;

pub mod probe;
pub use error::LockError;
pub use lock::{
    AcquireOptions, Backend, Capabilities, Connections, Consistency, DistLock, Expiry, FencingToken, GrantedTtl, Lease,
    LeaseHandle, LostSender, LostSignal, WaitStyle,
};
pub use resource::{CellStats, Resource, ResourceStats, Section, SectionRecord};
pub use tls::{TlsFiles, TlsPem};

/// Sleep about `base` (uniform in [base/2, 3*base/2]) so polling clients do not retry in
/// lockstep. Used by the polling backends between attempts.
pub async fn jittered_sleep(base: std::time::Duration) {
    let nanos = base.as_nanos() as u64;
    let d = if nanos == 0 { 0 } else { nanos / 2 + rand::random_range(0..=nanos) };
    tokio::time::sleep(std::time::Duration::from_nanos(d)).await;
}

/// The acquire loop every polling recipe shares (redis-py's, ShedLock's on PostgreSQL and
/// MariaDB): try; until `opts.wait` from `invoked_at` runs out, sleep a jittered
/// `retry_interval` and try again. `attempt` answers `Some` when granted; the grant comes
/// back with the instant its attempt was sent, from which its validity counts. A wait of
/// zero tries once and is `Busy`; a wait that runs out is `Timeout`.
pub async fn poll<T, F, Fut>(opts: &AcquireOptions, invoked_at: std::time::Instant, mut attempt: F) -> Result<(T, std::time::Instant), LockError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, LockError>>,
{
    let deadline = invoked_at + opts.wait;
    loop {
        let attempt_at = std::time::Instant::now();
        if let Some(granted) = attempt().await? {
            return Ok((granted, attempt_at));
        }
        if opts.wait.is_zero() {
            return Err(LockError::Busy);
        }
        if std::time::Instant::now() >= deadline {
            return Err(LockError::Timeout(opts.wait));
        }
        tokio::select! {
            _ = jittered_sleep(opts.retry_interval) => {}
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
    }
}
