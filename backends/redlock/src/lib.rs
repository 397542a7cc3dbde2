//! Redlock: one lock across N independent Redis primaries (N = 5 here).
//!
//! Recipe (the Redis distributed-lock page, as redlock-py and Redisson implement it):
//! - t1 = now; `SET key token NX PX ttl` on every node in parallel, each bounded by a small
//!   per-node timeout so a dead node costs milliseconds, not the TTL;
//! - success needs a majority (N/2 + 1) AND elapsed < ttl; the holder may then believe it
//!   holds the lock for validity = ttl - elapsed - drift, drift = ttl * 1% + 2 ms;
//! - on failure release on ALL nodes (a node that timed out may have set the key), then
//!   retry after a random delay.
//!
//! Redlock has no fencing token: the nodes share no counter, and the largest of per-node
//! counters over a quorum is not monotonic (two quorums overlap in one node that may have
//! lost its data). The capabilities say so and leases carry no token. Safety rests on
//! bounded clock drift and on nodes not restarting empty within a TTL.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, Consistency, DistLock, Expiry, Lease, LeaseHandle,
    LockError, WaitStyle,
};
use dlbench_core::jittered_sleep;
use dlbench_redis::{node::random_token, NodeConfig, RedisNode};
use futures::future::join_all;

/// Redlock settings beyond the nodes themselves.
#[derive(Debug, Clone)]
pub struct RedlockConfig {
    pub nodes: Vec<NodeConfig>,
    /// Bound on one node's SET; `None` picks ttl/100 clamped to [10 ms, 200 ms].
    pub node_timeout: Option<Duration>,
}

impl RedlockConfig {
    pub fn new(endpoints: &[String]) -> Self {
        RedlockConfig { nodes: endpoints.iter().map(NodeConfig::new).collect(), node_timeout: None }
    }
}

/// A set of independent Redis primaries.
pub struct RedlockBackend {
    /// The backend's own connections: `claims`, and every client in `Shared` mode.
    nodes: Vec<RedisNode>,
    configs: Vec<NodeConfig>,
    node_timeout: Option<Duration>,
    connections: Connections,
}

impl RedlockBackend {
    /// Connect to every node; all must answer at start-up so a typo is not mistaken for a
    /// fault the algorithm tolerates.
    pub async fn connect(cfg: RedlockConfig) -> Result<Self, LockError> {
        Self::connect_with(cfg, Connections::default()).await
    }

    /// As [`Self::connect`]; in `PerClient` mode each client opens its own connection to
    /// every node, on first use, so a client started while a minority is down still works.
    pub async fn connect_with(cfg: RedlockConfig, connections: Connections) -> Result<Self, LockError> {
        if cfg.nodes.len() < 3 {
            return Err(LockError::Config(format!("redlock needs at least 3 nodes, got {}", cfg.nodes.len())));
        }
        let conns = join_all(cfg.nodes.iter().map(RedisNode::connect)).await;
        let nodes = conns.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(RedlockBackend { nodes, configs: cfg.nodes, node_timeout: cfg.node_timeout, connections })
    }

    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    pub fn nodes(&self) -> &[RedisNode] {
        &self.nodes
    }
}

#[async_trait]
impl Backend for RedlockBackend {
    fn name(&self) -> &'static str {
        "redlock"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { consistency: Consistency::Ap, fencing: false, ..Capabilities::cp(Expiry::Ttl, WaitStyle::Poll) }
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let nodes = self
            .connections
            .pick(&self.nodes, || async { self.configs.iter().map(RedisNode::connect_lazy).collect::<Result<_, _>>() })
            .await?;
        Ok(Box::new(Redlock { nodes, node_timeout: self.node_timeout }))
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    fn describe(&self) -> String {
        let eps: Vec<&str> = self.nodes.iter().map(|n| n.endpoint.as_str()).collect();
        format!("redlock {}", eps.join(","))
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let found = join_all(self.nodes.iter().map(|n| n.exists(key))).await;
        let mut out = Vec::new();
        for (n, f) in self.nodes.iter().zip(found) {
            if f? {
                out.push(format!("{} {key}", n.endpoint));
            }
        }
        Ok(out)
    }
}

struct Redlock {
    nodes: Vec<RedisNode>,
    node_timeout: Option<Duration>,
}

/// The per-node bound for a TTL: ttl/100 clamped to [10 ms, 200 ms], unless configured.
fn per_node_timeout(configured: Option<Duration>, ttl: Duration) -> Duration {
    configured.unwrap_or_else(|| (ttl / 100).clamp(Duration::from_millis(10), Duration::from_millis(200)))
}

/// Redlock's clock-drift allowance for `ttl`: 1% plus 2 ms.
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Until when a holder may trust a lock that a majority set (or extended) to `ttl` in a
/// round that started at `t1` and took `elapsed`: `None` when no validity is left.
///
/// The keys were set no earlier than `t1`, so they live at least until `t1 + ttl` (less the
/// drift allowance). Redlock's "validity = ttl - elapsed - drift" is the same instant counted
/// from the end of the round (`t1 + elapsed`), so it must not be added to `t1`.
fn valid_until(t1: Instant, elapsed: Duration, ttl: Duration) -> Option<Instant> {
    let drift = drift(ttl);
    (elapsed + drift < ttl).then(|| t1 + ttl - drift)
}

/// What a Redlock lease carries back to release and extend.
struct Claim {
    /// The per-node bound its acquire used, so release costs milliseconds per dead node.
    per_node: Duration,
}

/// How one round went.
enum Round {
    /// Won, valid until the instant given.
    Won(Instant),
    /// Lost; `contended` when some node answered that the key was taken.
    Lost { contended: bool, last_error: Option<LockError> },
}

impl Redlock {
    fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    async fn round(&self, key: &str, token: &str, ttl: Duration, per_node: Duration) -> Round {
        let t1 = Instant::now();
        let results = join_all(self.nodes.iter().map(|n| n.set_nx_px_within(key, token, ttl, per_node))).await;
        let elapsed = t1.elapsed();
        let won = results.iter().filter(|r| matches!(r, Ok(true))).count();
        if won >= self.quorum() {
            if let Some(until) = valid_until(t1, elapsed, ttl) {
                return Round::Won(until);
            }
        }
        let contended = results.iter().any(|r| matches!(r, Ok(false)));
        let last_error = results.into_iter().filter_map(Result::err).last();
        self.release_all(key, token, per_node).await;
        Round::Lost { contended, last_error }
    }

    /// Compare-and-delete on every node, each bounded by `per_node` (a paused node must not
    /// hold a release up for the request timeout); how many deleted, and whether every node
    /// answered in time.
    async fn release_all(&self, key: &str, token: &str, per_node: Duration) -> (usize, bool) {
        let r = join_all(self.nodes.iter().map(|n| n.compare_delete_within(key, token, per_node))).await;
        (r.iter().filter(|x| matches!(x, Ok(true))).count(), r.iter().all(Result::is_ok))
    }
}

#[async_trait]
impl DistLock for Redlock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let deadline = invoked_at + opts.wait;
        let token = random_token();
        let per_node = per_node_timeout(self.node_timeout, opts.ttl);
        loop {
            match self.round(key, &token, opts.ttl, per_node).await {
                Round::Won(valid_until) => {
                    return Ok(Lease::granted(key, None, invoked_at, valid_until, LeaseHandle::new(token).with_data(Claim { per_node })))
                }
                Round::Lost { contended, last_error } => {
                    let done = opts.wait.is_zero() || Instant::now() >= deadline;
                    if done {
                        return Err(match (contended, last_error) {
                            (true, _) if opts.wait.is_zero() => LockError::Busy,
                            (true, _) => LockError::Timeout(opts.wait),
                            (false, Some(e)) => LockError::Unavailable(format!("no quorum: {e}")),
                            (false, None) => LockError::Timeout(opts.wait),
                        });
                    }
                }
            }
            tokio::select! {
                _ = jittered_sleep(opts.retry_interval) => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not a Redlock lease".into()))?;
        // A node that did not answer within its bound counts as not answered: if no node
        // confirmed, the outcome stays unknown.
        let (deleted, all_answered) = self.release_all(&lease.key, &lease.handle.id, claim.per_node).await;
        if deleted > 0 {
            Ok(())
        } else if all_answered {
            Err(LockError::NotHeld(format!("{} holds our token on no node", lease.key)))
        } else {
            Err(LockError::Indeterminate(format!("{}: no node confirmed the release", lease.key)))
        }
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        // Bounded per node as an acquire with this TTL would be, so one paused node costs
        // milliseconds of the new validity rather than the request timeout.
        let per_node = per_node_timeout(self.node_timeout, ttl);
        let t1 = Instant::now();
        let r = join_all(self.nodes.iter().map(|n| n.compare_pexpire_within(&lease.key, &lease.handle.id, ttl, per_node))).await;
        let ok = r.iter().filter(|x| matches!(x, Ok(true))).count();
        let until = valid_until(t1, t1.elapsed(), ttl);
        if let (true, Some(until)) = (ok >= self.quorum(), until) {
            lease.valid_until = until;
            Ok(())
        } else {
            Err(LockError::NotHeld(format!("{}: extended on {ok} of {} nodes", lease.key, self.nodes.len())))
        }
    }

    async fn abandon(&self) {}

    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_counts_from_the_start_of_the_round() {
        let t1 = Instant::now();
        let ttl = Duration::from_secs(10);
        let drift = Duration::from_millis(102);
        // However long the round took, the keys were set after t1 and live until t1 + ttl.
        for elapsed in [Duration::ZERO, Duration::from_millis(5), Duration::from_secs(3)] {
            assert_eq!(valid_until(t1, elapsed, ttl), Some(t1 + ttl - drift), "elapsed {elapsed:?}");
        }
        // The documented validity (ttl - elapsed - drift) counts from the end of the round.
        let elapsed = Duration::from_secs(3);
        assert_eq!(valid_until(t1, elapsed, ttl), Some(t1 + elapsed + (ttl - elapsed - drift)));
    }

    #[test]
    fn no_validity_once_the_round_used_the_ttl_up() {
        let t1 = Instant::now();
        let ttl = Duration::from_secs(1);
        // drift = 12 ms: a round of 988 ms or more leaves nothing.
        assert_eq!(valid_until(t1, Duration::from_millis(988), ttl), None);
        assert_eq!(valid_until(t1, Duration::from_secs(2), ttl), None);
        assert_eq!(valid_until(t1, Duration::from_millis(987), ttl), Some(t1 + ttl - Duration::from_millis(12)));
    }

    #[test]
    fn per_node_bound_follows_the_ttl_within_its_clamp() {
        assert_eq!(per_node_timeout(None, Duration::from_secs(10)), Duration::from_millis(100));
        assert_eq!(per_node_timeout(None, Duration::from_millis(500)), Duration::from_millis(10));
        assert_eq!(per_node_timeout(None, Duration::from_secs(60)), Duration::from_millis(200));
        assert_eq!(per_node_timeout(Some(Duration::from_millis(50)), Duration::from_secs(60)), Duration::from_millis(50));
    }
}
