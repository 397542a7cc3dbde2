//! The Redis lock with a hold count and pub/sub wake-ups: the protocol of Redisson's `RLock`.
//!
//! The lock is a hash at NAME with one field, the owner (`<client id>:<thread>`, as Redisson
//! names it), whose value is the hold count. Each step is one script, so the check and the
//! change are one atomic step on the server:
//!
//! - acquire: a missing key is created with our field at 1 and the TTL; our own field is
//!   incremented (the holder acquires again: reentrant, counted) and the TTL renewed; any
//!   other owner's hash answers with its remaining TTL;
//! - release: our field decremented; at 0 the key is deleted and `0` published on
//!   `redisson_lock__channel:{NAME}`; above 0 the TTL is renewed and the lock stays held;
//! - extend (Redisson's watchdog renewal): the TTL pushed only while our field exists.
//!
//! A contended acquire subscribes to the channel before it tries again, then waits for a
//! message or for the holder's remaining TTL, whichever comes first, as Redisson's
//! `tryLock(wait, lease)` does: the message wakes every waiter at once (no queue), and the
//! TTL bound means a lost message, or a holder that died without releasing, only delays.
//!
//! The key, field and channel names are Redisson's, so a Redisson client and dlbench
//! contend on one lock. Fencing is dlbench's, as in the plain Redis recipe: the first grant
//! of a hold INCRs `{NAME}:fence` in the same script; a re-entry reports the hold's token.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, Lease, LeaseHandle,
    LockError, WaitStyle,
};
use futures::StreamExt;
use redis::Script;
use tokio::sync::watch;

use crate::node::{fence_key, random_token, NodeConfig, RedisNode};

/// Create, or re-enter our own hold; else the holder's remaining TTL. Returns
/// `{hold count, fencing token}` when held (count 0: someone else holds, token = its PTTL).
const ACQUIRE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {n, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1])}";

/// Count our hold down; at 0 delete and publish. -1: not ours (expired or taken over).
const RELEASE: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[2], -1)
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return n
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[3])
return 0";

/// Push the TTL while our field exists (Redisson's renewExpiration).
const EXTEND: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 0";

/// Redisson's unlock channel for a lock name (its `prefixName`: the name in braces unless it
/// has a hash tag of its own).
pub fn channel(key: &str) -> String {
    if key.contains('{') {
        format!("redisson_lock__channel:{key}")
    } else {
        format!("redisson_lock__channel:{{{key}}}")
    }
}

/// Redisson's `UNLOCK_MESSAGE`.
const UNLOCK_MESSAGE: i64 = 0;

/// One pub/sub connection and the channels subscribed on it, shared by the acquires of one
/// client (per-client mode) or of every client (shared mode), as one Redisson instance
/// shares its pub/sub connection among its threads. Opened on the first contended acquire;
/// reopened after it breaks.
struct Hub {
    cfg: NodeConfig,
    live: tokio::sync::Mutex<Option<Live>>,
}

struct Live {
    sink: redis::aio::PubSubSink,
    /// Channel -> (acquires waiting on it, wake-up counter). Read by the reader task.
    channels: Arc<Mutex<HashMap<String, (usize, watch::Sender<u64>)>>>,
    alive: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Hub {
    fn new(cfg: NodeConfig) -> Self {
        Hub { cfg, live: tokio::sync::Mutex::new(None) }
    }

    /// Subscribe to `channel` (once per connection however many acquires wait on it); the
    /// receiver changes on every message, and when the connection breaks.
    async fn subscribe(&self, channel: &str) -> Result<watch::Receiver<u64>, LockError> {
        let mut live = self.live.lock().await;
        if !live.as_ref().is_some_and(|l| l.alive.load(Ordering::Relaxed)) {
            *live = Some(self.open().await?);
        }
        let l = live.as_mut().expect("opened above");
        let (first, rx) = {
            let mut ch = l.channels.lock().unwrap();
            let e = ch.entry(channel.to_string()).or_insert_with(|| (0, watch::channel(0).0));
            e.0 += 1;
            (e.0 == 1, e.1.subscribe())
        };
        if first {
            let sent = tokio::time::timeout(self.cfg.request_timeout, l.sink.subscribe(channel)).await;
            if !matches!(sent, Ok(Ok(()))) {
                l.alive.store(false, Ordering::Relaxed);
                l.channels.lock().unwrap().remove(channel);
                return Err(LockError::Unavailable(format!("redis at {}: SUBSCRIBE {channel} failed", self.cfg.endpoint)));
            }
        }
        Ok(rx)
    }

    /// One acquire stops waiting on `channel`; the last one unsubscribes.
    async fn unsubscribe(&self, channel: &str) {
        let mut live = self.live.lock().await;
        let Some(l) = live.as_mut() else { return };
        let last = {
            let mut ch = l.channels.lock().unwrap();
            match ch.get_mut(channel) {
                Some(e) if e.0 > 1 => {
                    e.0 -= 1;
                    false
                }
                Some(_) => {
                    ch.remove(channel);
                    true
                }
                None => false,
            }
        };
        if last && l.alive.load(Ordering::Relaxed) {
            let _ = tokio::time::timeout(self.cfg.request_timeout, l.sink.unsubscribe(channel)).await;
        }
    }

    async fn open(&self) -> Result<Live, LockError> {
        let ps = tokio::time::timeout(self.cfg.connect_timeout, RedisNode::pubsub(&self.cfg))
            .await
            .map_err(|_| LockError::Unavailable(format!("redis at {}: pub/sub connect timed out", self.cfg.endpoint)))??;
        let (sink, mut stream) = ps.split();
        let channels: Arc<Mutex<HashMap<String, (usize, watch::Sender<u64>)>>> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (c2, a2) = (channels.clone(), alive.clone());
        let reader = tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                if let Some(e) = c2.lock().unwrap().get(msg.get_channel_name()) {
                    e.1.send_modify(|n| *n += 1);
                }
            }
            // The connection broke: wake every waiter so it tries (and subscribes) again.
            a2.store(false, Ordering::Relaxed);
            for e in c2.lock().unwrap().values() {
                e.1.send_modify(|n| *n += 1);
            }
        });
        Ok(Live { sink, channels, alive, reader })
    }
}

/// The Redisson-protocol lock on one Redis primary.
pub struct RedissonBackend {
    node: RedisNode,
    cfg: NodeConfig,
    connections: Connections,
    /// Shared mode's one pub/sub connection.
    hub: Arc<Hub>,
    scripts: Arc<Scripts>,
}

struct Scripts {
    acquire: Script,
    release: Script,
    extend: Script,
}

impl RedissonBackend {
    pub async fn connect_with(cfg: NodeConfig, connections: Connections) -> Result<Self, LockError> {
        Ok(RedissonBackend {
            node: RedisNode::connect(&cfg).await?,
            hub: Arc::new(Hub::new(cfg.clone())),
            cfg,
            connections,
            scripts: Arc::new(Scripts { acquire: Script::new(ACQUIRE), release: Script::new(RELEASE), extend: Script::new(EXTEND) }),
        })
    }
}

#[async_trait]
impl Backend for RedissonBackend {
    fn name(&self) -> &'static str {
        "redisson"
    }
    fn capabilities(&self) -> Capabilities {
        // The release's message wakes the waiters (all of them: they race for it).
        Capabilities::cp(Expiry::Ttl, WaitStyle::Watch)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let node = self.connections.pick(&self.node, || RedisNode::connect(&self.cfg)).await?;
        let hub = self.connections.pick(&self.hub, || async { Ok(Arc::new(Hub::new(self.cfg.clone()))) }).await?;
        // Redisson's owner is `<instance UUID>:<thread id>`; a dlbench client is one thread
        // of its own instance.
        let owner = format!("{}:1", random_token());
        Ok(Box::new(RedissonLock { node, hub, owner, scripts: self.scripts.clone() }))
    }
    fn describe(&self) -> String {
        format!("redisson {}", self.node.endpoint)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        Ok(if self.node.exists(key).await? { vec![key.to_string()] } else { Vec::new() })
    }
}

struct RedissonLock {
    node: RedisNode,
    hub: Arc<Hub>,
    owner: String,
    scripts: Arc<Scripts>,
}

/// The TTL a hold was taken with: a release that leaves it held renews it for as long.
struct Held {
    ttl: Duration,
}

impl RedissonLock {
    /// One attempt: Ok((hold count, token)) when held, Err(holder's remaining TTL) when not.
    async fn attempt(&self, key: &str, ttl: Duration) -> Result<Result<(u64, u64), Duration>, LockError> {
        let mut inv = self.scripts.acquire.prepare_invoke();
        inv.key(key).key(fence_key(key)).arg(ttl.as_millis().max(1) as u64).arg(&self.owner);
        let mut conn = self.node.connection();
        let (n, v): (i64, i64) = self.node.bounded_call(inv.invoke_async(&mut conn), true).await?;
        Ok(if n > 0 { Ok((n as u64, v.max(0) as u64)) } else { Err(Duration::from_millis(v.max(1) as u64)) })
    }

    fn lease(&self, key: &str, token: u64, invoked_at: Instant, attempt_at: Instant, ttl: Duration) -> Lease {
        Lease::granted(key, Some(token), invoked_at, attempt_at + ttl, LeaseHandle::new(self.owner.clone()).with_data(Held { ttl }))
    }

    /// Wait for the lock while subscribed to its channel.
    async fn wait_for(&self, key: &str, opts: &AcquireOptions, invoked_at: Instant, mut rx: watch::Receiver<u64>) -> Result<Lease, LockError> {
        let deadline = invoked_at + opts.wait;
        loop {
            rx.borrow_and_update();
            let attempt_at = Instant::now();
            match self.attempt(key, opts.ttl).await? {
                Ok((_, token)) => return Ok(self.lease(key, token, invoked_at, attempt_at, opts.ttl)),
                Err(pttl) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(LockError::Timeout(opts.wait));
                    }
                    // A message since the attempt was sent ends the wait at once.
                    let until = (now + pttl).min(deadline);
                    let _ = tokio::time::timeout_at(until.into(), rx.changed()).await;
                }
            }
        }
    }
}

#[async_trait]
impl DistLock for RedissonLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let attempt_at = Instant::now();
        match self.attempt(key, opts.ttl).await? {
            Ok((_, token)) => return Ok(self.lease(key, token, invoked_at, attempt_at, opts.ttl)),
            Err(_) if opts.wait.is_zero() => return Err(LockError::Busy),
            Err(_) => {}
        }
        let ch = channel(key);
        let rx = self.hub.subscribe(&ch).await?;
        let got = self.wait_for(key, opts, invoked_at, rx).await;
        self.hub.unsubscribe(&ch).await;
        got
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let ttl = lease.handle.data::<Held>().map(|h| h.ttl).unwrap_or(Duration::from_secs(30));
        let mut inv = self.scripts.release.prepare_invoke();
        inv.key(&lease.key).key(channel(&lease.key)).arg(ttl.as_millis().max(1) as u64).arg(&lease.handle.id).arg(UNLOCK_MESSAGE);
        let mut conn = self.node.connection();
        let n: i64 = self.node.bounded_call(inv.invoke_async(&mut conn), true).await?;
        if n < 0 {
            Err(LockError::NotHeld(format!("{} no longer holds our field", lease.key)))
        } else {
            Ok(())
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        let mut inv = self.scripts.extend.prepare_invoke();
        inv.key(&lease.key).arg(ttl.as_millis().max(1) as u64).arg(&lease.handle.id);
        let mut conn = self.node.connection();
        let n: i64 = self.node.bounded_call(inv.invoke_async(&mut conn), true).await?;
        if n == 1 {
            lease.valid_until = sent + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{} no longer holds our field", lease.key)))
        }
    }

    async fn abandon(&self) {}

    async fn close(&self) {}
}
