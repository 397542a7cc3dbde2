//! In-process reference backend.
//!
//! It exists to test the harness itself (driver, resource, checkers) at speeds no server
//! reaches, and as the model the real backends are compared against. It is never a stand-in
//! for a real server. It keeps the same contract: a FIFO queue per key with direct hand-off
//! (the releasing client cannot barge back in ahead of a waiter), TTL expiry (a waiter at
//! the head of the queue takes over from an expired holder), a per-key fencing counter, and
//! `abandon` that leaves the lock to expire. A stall can be injected to test
//! coordinated-omission correction.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, DistLock, Expiry, Lease,
    LeaseHandle, LockError, WaitStyle,
};
use tokio::sync::oneshot;

#[derive(Default)]
struct KeyState {
    holder: Option<Holder>,
    tokens: u64,
    queue: VecDeque<Waiter>,
}

struct Holder {
    owner: u64,
    expires: Instant,
}

struct Waiter {
    ticket: u64,
    owner: u64,
    ttl: Duration,
    /// The token and the instant of the grant, from which the holder's TTL runs.
    grant: oneshot::Sender<(u64, Instant)>,
}

impl KeyState {
    fn free(&self, now: Instant) -> bool {
        self.holder.as_ref().is_none_or(|h| h.expires <= now)
    }

    /// While the lock is free (or its holder expired), hand it to the oldest live waiter.
    fn promote(&mut self, now: Instant) {
        while self.free(now) {
            let Some(w) = self.queue.pop_front() else {
                self.holder = None;
                return;
            };
            self.tokens += 1;
            if w.grant.send((self.tokens, now)).is_ok() {
                self.holder = Some(Holder { owner: w.owner, expires: now + w.ttl });
            }
        }
    }
}

#[derive(Default)]
struct Shared {
    keys: Mutex<HashMap<String, KeyState>>,
    next_id: AtomicU64,
    /// Acquires that start before this instant wait until it (a stalled server).
    stall_until: Mutex<Option<Instant>>,
    /// The test hook [`SLOW_HOOK`]: extra time every acquire takes.
    slow: Option<Duration>,
}

/// A test and bench hook, and nothing else: when this variable holds a duration in
/// microseconds, every acquire of the memory backend first sleeps that long. It stands for a
/// slowed build in `scripts/gate-check.sh`, which shows that `compare` catches a real
/// slow-down; no shipped workflow sets it.
pub const SLOW_HOOK: &str = "DLBENCH_TEST_HOOK_MEMORY_ACQUIRE_DELAY_US";

/// The memory backend. Clones share state.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

impl MemoryBackend {
    pub fn new() -> Self {
        let slow = std::env::var(SLOW_HOOK).ok().and_then(|v| v.parse::<u64>().ok()).filter(|&us| us > 0).map(Duration::from_micros);
        if let Some(d) = slow {
            eprintln!("dlbench: test hook {SLOW_HOOK} is set: every memory acquire sleeps {} µs first", d.as_micros());
        }
        MemoryBackend { shared: Arc::new(Shared { slow, ..Shared::default() }) }
    }

    /// Free `key` whoever holds it, as a release that does not check its owner would (a
    /// `DEL` without the token compare). For the suite that checks the checkers with locks
    /// broken on purpose; nothing else calls it.
    pub fn release_whoever_holds(&self, key: &str) {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        if let Some(st) = keys.get_mut(key) {
            st.holder = None;
            st.promote(now);
        }
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
        Capabilities::cp(Expiry::Ttl, WaitStyle::Notify).with_fifo()
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let owner = self.shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Box::new(MemoryClient { shared: self.shared.clone(), owner }))
    }
    fn describe(&self) -> String {
        "memory (in-process reference)".into()
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let now = Instant::now();
        let keys = self.shared.keys.lock().unwrap();
        let Some(st) = keys.get(key) else { return Ok(Vec::new()) };
        let holder = st.holder.iter().filter(|h| h.expires > now).map(|h| format!("{key}: held by client {}", h.owner));
        let queued = st.queue.iter().filter(|w| !w.grant.is_closed()).map(|w| format!("{key}: queued client {}", w.owner));
        Ok(holder.chain(queued).collect())
    }
}

struct MemoryClient {
    shared: Arc<Shared>,
    owner: u64,
}

enum Attempt {
    Granted(u64, Instant),
    Busy,
    /// Queued: wait for the grant, or until the holder's expiry to look again.
    Queued(u64, oneshot::Receiver<(u64, Instant)>, Instant),
}

impl MemoryClient {
    fn attempt(&self, key: &str, ttl: Duration, may_wait: bool) -> Attempt {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        let st = match keys.get_mut(key) {
            Some(st) => st,
            None => keys.entry(key.to_string()).or_default(),
        };
        st.promote(now);
        if st.holder.is_none() {
            st.tokens += 1;
            st.holder = Some(Holder { owner: self.owner, expires: now + ttl });
            return Attempt::Granted(st.tokens, now);
        }
        if !may_wait {
            return Attempt::Busy;
        }
        let ticket = self.shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        st.queue.push_back(Waiter { ticket, owner: self.owner, ttl, grant: tx });
        let expires = st.holder.as_ref().map_or(now, |h| h.expires);
        Attempt::Queued(ticket, rx, expires)
    }

    /// After a wake-up by timer: promote past an expired holder, then report whether we
    /// were granted, and if not, leave the queue when `give_up`.
    fn recheck(&self, key: &str, ticket: u64, rx: &mut oneshot::Receiver<(u64, Instant)>, give_up: bool) -> Result<Option<(u64, Instant)>, Instant> {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        let st = keys.get_mut(key).expect("a queued key exists");
        st.promote(now);
        if let Ok(grant) = rx.try_recv() {
            return Ok(Some(grant));
        }
        if give_up {
            st.queue.retain(|w| w.ticket != ticket);
            return Ok(None);
        }
        Err(st.holder.as_ref().map_or(now, |h| h.expires))
    }

    async fn stall(&self) {
        if let Some(d) = self.shared.slow {
            tokio::time::sleep(d).await;
        }
        let until = *self.shared.stall_until.lock().unwrap();
        if let Some(until) = until {
            tokio::time::sleep_until(until.into()).await;
        }
    }

    fn lease(&self, key: &str, (token, granted_at): (u64, Instant), invoked_at: Instant, ttl: Duration) -> Lease {
        // The TTL runs from the grant, as the holder's expiry in the key's state does,
        // however long the acquire queued.
        Lease::granted(key, Some(token), invoked_at, granted_at + ttl, LeaseHandle::new(self.owner.to_string()))
    }
}

#[async_trait]
impl DistLock for MemoryClient {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        self.stall().await;
        let deadline = invoked_at + opts.wait;
        let (ticket, mut rx, mut expires) = match self.attempt(key, opts.ttl, !opts.wait.is_zero()) {
            Attempt::Granted(t, at) => return Ok(self.lease(key, (t, at), invoked_at, opts.ttl)),
            Attempt::Busy => return Err(LockError::Busy),
            Attempt::Queued(ticket, rx, expires) => (ticket, rx, expires),
        };
        loop {
            let until = deadline.min(expires);
            match tokio::time::timeout_at(until.into(), &mut rx).await {
                Ok(Ok(grant)) => return Ok(self.lease(key, grant, invoked_at, opts.ttl)),
                Ok(Err(_)) => unreachable!("the sender lives in the queue until it is used"),
                Err(_) => match self.recheck(key, ticket, &mut rx, Instant::now() >= deadline) {
                    Ok(Some(grant)) => return Ok(self.lease(key, grant, invoked_at, opts.ttl)),
                    Ok(None) => return Err(LockError::Timeout(opts.wait)),
                    Err(next) => expires = next.max(Instant::now() + Duration::from_millis(1)),
                },
            }
        }
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let now = Instant::now();
        let mut keys = self.shared.keys.lock().unwrap();
        let st = keys.get_mut(&lease.key).ok_or_else(|| LockError::NotHeld(lease.key.clone()))?;
        match &st.holder {
            Some(h) if h.owner == self.owner && h.expires > now => {
                st.holder = None;
                st.promote(now);
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
    #[tokio::test]
    async fn nothing_left_behind() {
        dlbench_core::conformance::nothing_left_behind(b()).await
    }
}
