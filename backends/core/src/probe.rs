//! Two of the four properties a distributed lock is judged by, measured on a live backend
//! without asserting anything: what a second acquire by the holder does (reentrancy), and
//! how long a holder that vanished blocks the next client (expiry). The conformance suite
//! asserts on these measurements; `dlbench run --properties` reports them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{AcquireOptions, Backend, LockError};

/// What a second acquire by the current holder did (measured on the servers, never
/// declared per backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reentrancy {
    /// Granted again. `counted`: after releasing the first lease another client still finds
    /// the lock held (a hold count); otherwise the first release freed it under the second.
    Granted { counted: bool },
    /// Waited out its wait: the holder blocks itself until its own lock goes.
    Blocks,
    /// Refused at once, with this error kind.
    Errors(&'static str),
}

impl std::fmt::Display for Reentrancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reentrancy::Granted { counted: true } => f.write_str("granted, with a hold count"),
            Reentrancy::Granted { counted: false } => f.write_str("granted, without a count (the first release frees it)"),
            Reentrancy::Blocks => f.write_str("blocks until the wait runs out"),
            Reentrancy::Errors(kind) => write!(f, "refused ({kind})"),
        }
    }
}

fn opts(ttl: Duration, wait: Duration) -> AcquireOptions {
    AcquireOptions::default().with_ttl(ttl).with_wait(wait).with_retry_interval(Duration::from_millis(2))
}

fn say(what: &str) -> impl Fn(LockError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The holder acquires its own lock on `key` again (500 ms wait) and the outcome is
/// measured. `Err` when the probe could not run, or when, after the holder released
/// everything, the lock was not free for another client: a lock the probe left held.
pub async fn reentrancy(backend: &Arc<dyn Backend>, key: &str) -> Result<Reentrancy, String> {
    let long = Duration::from_secs(10);
    let a = backend.client().await.map_err(say("client a"))?;
    let b = backend.client().await.map_err(say("client b"))?;
    let first = a.acquire(key, &opts(long, Duration::from_secs(5))).await.map_err(say("the holder's first acquire"))?;
    let measured = match a.acquire(key, &opts(long, Duration::from_millis(500))).await {
        Ok(second) => {
            let _ = a.release(first).await;
            let probe = b.acquire(key, &opts(long, Duration::ZERO)).await;
            let counted = matches!(probe, Err(ref e) if e.is_contention());
            if let Ok(l) = probe {
                b.release(l).await.map_err(say("another client's release"))?;
            }
            // Not held any more when the first release freed it: that is the measurement.
            let _ = a.release(second).await;
            Reentrancy::Granted { counted }
        }
        Err(LockError::Timeout(_)) => {
            a.release(first).await.map_err(say("the holder's release"))?;
            Reentrancy::Blocks
        }
        Err(e) => {
            a.release(first).await.map_err(say("the holder's release"))?;
            Reentrancy::Errors(e.kind())
        }
    };
    let lb = b
        .acquire(key, &opts(long, long))
        .await
        .map_err(|e| format!("after {measured:?} and the holder's releases, the lock is not free: {e}"))?;
    b.release(lb).await.map_err(say("another client's release"))?;
    a.close().await;
    b.close().await;
    Ok(measured)
}

/// A holder of `key` (TTL `ttl`) vanishes without releasing (`abandon`: no more
/// keep-alives, its connection dropped where the lock lives on one); returns the time from
/// then to the next client's grant: the TTL, session timeout or connection end at work.
pub async fn expiry(backend: &Arc<dyn Backend>, key: &str, ttl: Duration) -> Result<Duration, String> {
    let a = backend.client().await.map_err(say("client a"))?;
    let b = backend.client().await.map_err(say("client b"))?;
    let _held = a.acquire(key, &opts(ttl, Duration::from_secs(5))).await.map_err(say("the holder's acquire"))?;
    let gone = Instant::now();
    a.abandon().await;
    let l = b
        .acquire(key, &opts(ttl, ttl * 4 + Duration::from_secs(10)))
        .await
        .map_err(|e| format!("the next client never got the lock after the holder vanished ({:?}): {e}", gone.elapsed()))?;
    let after = gone.elapsed();
    b.release(l).await.map_err(say("the next client's release"))?;
    b.close().await;
    Ok(after)
}
