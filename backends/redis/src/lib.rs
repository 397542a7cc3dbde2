//! Single-instance Redis lock, compatible with redis-py's `Lock`.
//!
//! Recipe: `SET key token NX PX ttl` with a random token per acquisition; release deletes the
//! key only if it still holds our token, extend pushes its TTL only if it does (both by
//! script). The key is NAME verbatim, as redis-py uses it, so both contend on one lock. A
//! contended acquire polls after a jittered delay (redis-py sleeps 0.1 s by default; the
//! delay here is the workload's retry interval).
//!
//! Fencing: the acquire script also INCRs a companion counter `{NAME}:fence` when, and only
//! when, the SET succeeded, so tokens follow acquisition order on this server. They do not
//! survive a failover to a replica that missed the INCR (scenario S5).

pub mod node;
pub mod redisson;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, Lease,
    LeaseHandle, LockError, WaitStyle,
};

pub use node::{NodeConfig, RedisNode};
pub use redisson::RedissonBackend;


/// One Redis primary.
pub struct RedisBackend {
    /// The backend's own connection: `claims`, and every client in `Shared` mode.
    node: RedisNode,
    cfg: NodeConfig,
    connections: Connections,
    /// The test hook [`SLOW_HOOK`]: extra time every acquire takes.
    slow: Option<std::time::Duration>,
}

/// A test and bench hook, and nothing else: when this variable holds a duration in
/// microseconds, every acquire of the Redis backend first sleeps that long. It stands for a
/// slowed build in `scripts/gate-check.sh BACKEND=redis`, which shows that `compare` catches
/// a real slow-down on a real server; no shipped workflow sets it.
pub const SLOW_HOOK: &str = "DLBENCH_TEST_HOOK_REDIS_ACQUIRE_DELAY_US";

impl RedisBackend {
    pub async fn connect(cfg: NodeConfig) -> Result<Self, LockError> {
        Self::connect_with(cfg, Connections::default()).await
    }

    /// Connect; in `PerClient` mode each [`Backend::client`] opens a connection of its own.
    pub async fn connect_with(cfg: NodeConfig, connections: Connections) -> Result<Self, LockError> {
        let slow = std::env::var(SLOW_HOOK).ok().and_then(|v| v.parse::<u64>().ok()).filter(|&us| us > 0).map(std::time::Duration::from_micros);
        if let Some(d) = slow {
            eprintln!("dlbench: test hook {SLOW_HOOK} is set: every redis acquire sleeps {} µs first", d.as_micros());
        }
        Ok(RedisBackend { node: RedisNode::connect(&cfg).await?, cfg, connections, slow })
    }

    pub fn node(&self) -> &RedisNode {
        &self.node
    }
}

#[async_trait]
impl Backend for RedisBackend {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::cp(Expiry::Ttl, WaitStyle::Poll)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let node = self.connections.pick(&self.node, || RedisNode::connect(&self.cfg)).await?;
        Ok(Box::new(RedisLock { node, slow: self.slow }))
    }
    fn describe(&self) -> String {
        format!("redis {}", self.node.endpoint)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        // The fencing counter `{key}:fence` outlives every holder by design; it is no claim.
        Ok(if self.node.exists(key).await? { vec![key.to_string()] } else { Vec::new() })
    }
}

struct RedisLock {
    node: RedisNode,
    slow: Option<std::time::Duration>,
}

#[async_trait]
impl DistLock for RedisLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        if let Some(d) = self.slow {
            tokio::time::sleep(d).await;
        }
        let token = node::random_token();
        let (fence, attempt_at) = dlbench_core::poll(opts, invoked_at, || self.node.set_nx_px_fenced(key, &token, opts.ttl)).await?;
        Ok(Lease::granted(key, Some(fence), invoked_at, attempt_at + opts.ttl, LeaseHandle::new(token)))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        if self.node.compare_delete(&lease.key, &lease.handle.id).await? {
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{} no longer holds our token", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        if self.node.compare_pexpire(&lease.key, &lease.handle.id, ttl).await? {
            lease.valid_until = sent + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{} no longer holds our token", lease.key)))
        }
    }

    async fn abandon(&self) {}

    async fn close(&self) {}
}
