//! In-process reference backend.
//!
//! It exists to test the harness itself (driver, resource, checkers) at speeds no server
//! reaches, and as the model the real backends are compared against. It is never a stand-in
//! for a real server. It keeps the same contract: FIFO-ish waiting through `Notify`, TTL
//! expiry checked on every acquire, a per-key fencing counter, and `abandon` that leaves the
//! lock to expire. A stall can be injected to test coordinated-omission correction.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Consistency, DistLock, Expiry, FencingToken, Lease,
    LeaseHandle, LockError, LostSignal, WaitStyle,
};
use tokio::sync::Notify;

#[derive(Default)]
struct KeyState {
    holder: Option<Holder>,
    tokens: u64,
    notify: Arc<Notify>,
}

struct Holder {
    owner: u64,
    expires: Instant,
}

#[derive(Default)]
struct Shared {
    keys: Mutex<HashMap<String, KeyState>>,
    next_owner: AtomicU64,
    /// Acquires that start before this instant wait until it (a stalled server).
    stall_until: Mutex<Option<Instant>>,
}

/// The memory backend. Clones share state.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

impl MemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// Make every acquire that arrives in the next `d` wait until `d` has passed, as a
    /// server in a GC pause would.
    pub fn stall_for(&self, d: Duration) {
        *self.shared.stall_until.lock().unwrap() = Some(Instant::now() + d);
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            consistency: Consistency::Cp,
            fencing: true,
            fifo: false,
            expiry: Expiry::Ttl,
            wait: WaitStyle::Notify,
        }
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let owner = self.shared.next_owner.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Box::new(MemoryClient { shared: self.shared.clone(), owner }))
    }
    fn describe(&self) -> String {
        "memory (in-process reference)".into()
    }
}

struct MemoryClient {
    shared: Arc<Shared>,
    owner: u64,
}

enum Attempt {
    Granted(u64),
    /// Held by someone else: wait for a notification or until the holder's expiry.
    Wait(Arc<Notify>, Instant),
}

impl MemoryClient {
    fn attempt(&self, key: &str, ttl: Duration) -> Attempt {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        let st = match keys.get_mut(key) {
            Some(st) => st,
            None => keys.entry(key.to_string()).or_default(),
        };
        match &st.holder {
            Some(h) if h.expires > now => Attempt::Wait(st.notify.clone(), h.expires),
            _ => {
                st.tokens += 1;
                st.holder = Some(Holder { owner: self.owner, expires: now + ttl });
                Attempt::Granted(st.tokens)
            }
        }
    }

    async fn stall(&self) {
        let until = *self.shared.stall_until.lock().unwrap();
        if let Some(until) = until {
            tokio::time::sleep_until(until.into()).await;
        }
    }
}

#[async_trait]
impl DistLock for MemoryClient {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        self.stall().await;
        let deadline = invoked_at + opts.wait;
        loop {
            match self.attempt(key, opts.ttl) {
                Attempt::Granted(token) => {
                    return Ok(Lease {
                        key: key.to_string(),
                        token: Some(FencingToken(token)),
                        invoked_at,
                        acquired_at: Instant::now(),
                        valid_until: invoked_at + opts.ttl,
                        handle: LeaseHandle::new(self.owner.to_string()),
                        lost: LostSignal::never(),
                    })
                }
                Attempt::Wait(notify, expires) => {
                    let now = Instant::now();
                    if opts.wait.is_zero() {
                        return Err(LockError::Busy);
                    }
                    if now >= deadline {
                        return Err(LockError::Timeout(opts.wait));
                    }
                    let until = deadline.min(expires);
                    let _ = tokio::time::timeout_at(until.into(), notify.notified()).await;
                }
            }
        }
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let mut keys = self.shared.keys.lock().unwrap();
        let st = keys.get_mut(&lease.key).ok_or_else(|| LockError::NotHeld(lease.key.clone()))?;
        match &st.holder {
            Some(h) if h.owner == self.owner && h.expires > Instant::now() => {
                st.holder = None;
                st.notify.notify_one();
                Ok(())
            }
            _ => Err(LockError::NotHeld(lease.key.clone())),
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        let st = keys.get_mut(&lease.key).ok_or_else(|| LockError::NotHeld(lease.key.clone()))?;
        match &mut st.holder {
            Some(h) if h.owner == self.owner && h.expires > now => {
                h.expires = now + ttl;
                lease.valid_until = now + ttl;
                Ok(())
            }
            _ => Err(LockError::NotHeld(lease.key.clone())),
        }
    }

    async fn abandon(&self) {}

    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn b() -> Arc<dyn Backend> {
        Arc::new(MemoryBackend::new())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mutual_exclusion() {
        dlbench_core::conformance::mutual_exclusion(b(), 16, 50).await
    }
    #[tokio::test]
    async fn release_admits_waiter() {
        dlbench_core::conformance::release_admits_waiter(b()).await
    }
    #[tokio::test]
    async fn abandoned_lock_expires() {
        dlbench_core::conformance::abandoned_lock_expires(b(), Duration::from_secs(1)).await
    }
    #[tokio::test]
    async fn fencing_tokens_increase() {
        dlbench_core::conformance::fencing_tokens_increase(b()).await
    }
    #[tokio::test]
    async fn wait_timeout_is_definite() {
        dlbench_core::conformance::wait_timeout_is_definite(b()).await
    }
}
