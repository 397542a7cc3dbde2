use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::LockError;

/// A number that grows with every successive holder of a lock, so a protected resource can
/// reject a write from a holder that has been superseded (Kleppmann's fencing token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// CP backends keep one copy of the truth behind a quorum or a single primary; AP ones
/// (Redlock) grant from independent nodes and can disagree under faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    Cp,
    Ap,
}

/// What frees a lock whose holder disappeared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expiry {
    /// A TTL set at acquisition and extended explicitly (Redis, Redlock, PostgreSQL).
    Ttl,
    /// A session or lease kept alive by heartbeats (etcd lease, ZooKeeper session).
    Session,
    /// Nothing: an abandoned lock stays held (not used by any shipped backend).
    None,
}

/// How a contended acquire waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitStyle {
    /// The server notifies the next waiter (etcd watch, ZooKeeper watch).
    Watch,
    /// The client retries after a delay (Redis, Redlock, PostgreSQL).
    Poll,
    /// In-process wake-up (the memory reference backend).
    Notify,
}

/// What a backend promises, so the harness and the report never hard-code it per name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    pub consistency: Consistency,
    /// Tokens strictly increase across successive holders of one key.
    pub fencing: bool,
    /// Waiters are granted in arrival order.
    pub fifo: bool,
    pub expiry: Expiry,
    pub wait: WaitStyle,
    /// Honours [`AcquireOptions::lock_delay`] (Chubby's lock-delay).
    pub lock_delay: bool,
}

impl Capabilities {
    /// What most backends promise: consistent (CP), fenced, not FIFO, no lock-delay; with
    /// `expiry` and `wait` as given. The builders below add the rest.
    pub const fn cp(expiry: Expiry, wait: WaitStyle) -> Self {
        Capabilities { consistency: Consistency::Cp, fencing: true, fifo: false, expiry, wait, lock_delay: false }
    }

    /// Waiters are granted in arrival order.
    pub const fn with_fifo(mut self) -> Self {
        self.fifo = true;
        self
    }

    /// Whether [`AcquireOptions::lock_delay`] is honoured.
    pub const fn with_lock_delay(mut self, honoured: bool) -> Self {
        self.lock_delay = honoured;
        self
    }
}

/// The TTL a server actually grants for a requested one: what bounds how long a lock taken by
/// an acquire of unknown outcome can stay held after its client is gone. The checkers use it,
/// not the requested TTL, because servers round it and enforce a minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "of", rename_all = "lowercase")]
pub enum GrantedTtl {
    /// The lock's own TTL, as the server keeps it (Redis `PX`, a lease-table row's interval:
    /// exactly the request, in milliseconds).
    Lock { ms: u64 },
    /// The session's: the lock lives as long as a session the server expires this long after
    /// its last heartbeat (etcd's lease TTL, rounded up to whole seconds and raised to the
    /// server's minimum; ZooKeeper's session timeout as negotiated).
    Session { ms: u64 },
    /// No TTL at all: the lock lives as long as the holder's connection (PostgreSQL advisory
    /// locks, MariaDB `GET_LOCK`); the server frees it when it sees the connection close.
    None,
}

impl GrantedTtl {
    /// The window in milliseconds, `None` when there is none.
    pub fn ms(self) -> Option<u64> {
        match self {
            GrantedTtl::Lock { ms } | GrantedTtl::Session { ms } => Some(ms),
            GrantedTtl::None => None,
        }
    }
}

/// How a backend's logical clients reach the servers.
///
/// `PerClient` is how N application processes would: each client opens its own connection
/// (and, where the recipe has one, its own session or lease), so "8 clients" means 8
/// connections on every backend. `Shared` multiplexes every client over one connection per
/// server (one gRPC channel, one Redis connection per node, one PostgreSQL pool), as one
/// process with many threads would. ZooKeeper's session *is* its connection and the holder's
/// identity, so its clients are per-client in both modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Connections {
    #[default]
    PerClient,
    Shared,
}

impl std::str::FromStr for Connections {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "per-client" => Ok(Connections::PerClient),
            "shared" => Ok(Connections::Shared),
            _ => Err(format!("{s:?} is not a connection mode: use per-client or shared")),
        }
    }
}

impl Connections {
    /// The connection a new client uses: in `Shared` mode a clone of the backend's `shared`
    /// one, in `PerClient` mode one that `open` opens for this client alone.
    pub async fn pick<T, F, Fut>(self, shared: &T, open: F) -> Result<T, LockError>
    where
        T: Clone,
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, LockError>>,
    {
        match self {
            Connections::Shared => Ok(shared.clone()),
            Connections::PerClient => open().await,
        }
    }
}

impl fmt::Display for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Connections::PerClient => "per-client",
            Connections::Shared => "shared",
        })
    }
}

/// Per-acquire settings.
#[derive(Debug, Clone)]
pub struct AcquireOptions {
    /// How long the lock survives without its holder (lease TTL, session timeout, key expiry).
    pub ttl: Duration,
    /// How long to wait for a contended lock. `Duration::ZERO` means try once.
    pub wait: Duration,
    /// Delay between attempts for polling backends (jittered by the backend).
    pub retry_interval: Duration,
    /// Chubby's lock-delay: once a holder's session is lost (not released), the lock stays
    /// unavailable this long, so an unfenced old holder's in-flight writes drain before
    /// anyone else enters. `ZERO` (the default) is off. Only backends whose
    /// [`Capabilities::lock_delay`] is true honour it; callers must refuse it elsewhere.
    pub lock_delay: Duration,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        AcquireOptions {
            ttl: Duration::from_secs(10),
            wait: Duration::from_secs(10),
            retry_interval: Duration::from_millis(5),
            lock_delay: Duration::ZERO,
        }
    }
}

impl AcquireOptions {
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
    pub fn with_retry_interval(mut self, d: Duration) -> Self {
        self.retry_interval = d;
        self
    }
    pub fn with_lock_delay(mut self, d: Duration) -> Self {
        self.lock_delay = d;
        self
    }
}

/// Fires once when the holder learns its lock is gone (session expired, lease revoked,
/// keep-alive failed). Backends without such knowledge (Redis) never fire it; the holder
/// must rely on `Lease::valid_until`.
#[derive(Clone, Debug)]
pub struct LostSignal(Option<watch::Receiver<Option<String>>>);

/// The backend's side of a [`LostSignal`]. Clones fire the same signal.
#[derive(Debug, Clone)]
pub struct LostSender(Arc<watch::Sender<Option<String>>>);

impl LostSignal {
    pub fn never() -> Self {
        LostSignal(None)
    }

    pub fn channel() -> (LostSender, LostSignal) {
        let (tx, rx) = watch::channel(None);
        (LostSender(Arc::new(tx)), LostSignal(Some(rx)))
    }

    pub fn is_lost(&self) -> bool {
        self.0.as_ref().is_some_and(|rx| rx.borrow().is_some())
    }

    /// Why the lock was lost, if it was.
    pub fn reason(&self) -> Option<String> {
        self.0.as_ref().and_then(|rx| rx.borrow().clone())
    }

    /// Resolves when the lock is lost; never resolves for backends without the signal.
    pub async fn lost(&mut self) -> String {
        match &mut self.0 {
            None => std::future::pending().await,
            Some(rx) => match rx.wait_for(|v| v.is_some()).await {
                Ok(v) => v.clone().unwrap_or_default(),
                // The backend dropped its sender: the session task is gone, so is the lock.
                Err(_) => "session task ended".to_string(),
            },
        }
    }
}

impl LostSender {
    pub fn lose(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.0.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(reason);
                true
            } else {
                false
            }
        });
    }

    pub fn is_lost(&self) -> bool {
        self.0.borrow().is_some()
    }

    pub fn subscribe(&self) -> LostSignal {
        LostSignal(Some(self.0.subscribe()))
    }
}

/// Backend-private state a lease carries back to `release` / `extend`.
#[derive(Clone, Default)]
pub struct LeaseHandle {
    /// What identifies this holder on the server: the etcd key, the ZooKeeper node path, the
    /// Redis token, the PostgreSQL owner.
    pub id: String,
    pub data: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseHandle").field("id", &self.id).finish()
    }
}

impl LeaseHandle {
    pub fn new(id: impl Into<String>) -> Self {
        LeaseHandle { id: id.into(), data: None }
    }
    pub fn with_data<T: Any + Send + Sync>(mut self, data: T) -> Self {
        self.data = Some(Arc::new(data));
        self
    }
    pub fn data<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.data.as_deref().and_then(|d| d.downcast_ref())
    }
}

/// A held lock.
#[derive(Debug, Clone)]
pub struct Lease {
    pub key: String,
    pub token: Option<FencingToken>,
    /// When the acquire was invoked. Validity counts from here, not from the reply, because
    /// the server may have started the TTL as soon as the request arrived.
    pub invoked_at: Instant,
    /// When the lock was confirmed to this client.
    pub acquired_at: Instant,
    /// Until when the holder may believe it holds the lock without hearing from the server.
    /// Session backends move it forward with each successful keep-alive; see `lost`.
    pub valid_until: Instant,
    pub handle: LeaseHandle,
    pub lost: LostSignal,
}

impl Lease {
    /// A lock granted now (`acquired_at` is this call's instant), valid until `valid_until`,
    /// with no lost signal; a backend that has one adds it with [`Lease::with_lost`].
    pub fn granted(key: &str, token: Option<u64>, invoked_at: Instant, valid_until: Instant, handle: LeaseHandle) -> Lease {
        Lease {
            key: key.to_string(),
            token: token.map(FencingToken),
            invoked_at,
            acquired_at: Instant::now(),
            valid_until,
            handle,
            lost: LostSignal::never(),
        }
    }

    /// The same lease, with the signal that fires when the holder learns it lost the lock.
    pub fn with_lost(mut self, lost: LostSignal) -> Lease {
        self.lost = lost;
        self
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_lost() || Instant::now() >= self.valid_until
    }
}

/// One logical lock client: its own session, lease or owner identity.
#[async_trait]
pub trait DistLock: Send + Sync {
    /// Take `key`, waiting up to `opts.wait`.
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError>;

    /// Give the lock up. Releasing a lock that is no longer ours is `NotHeld`, never a
    /// delete of someone else's claim.
    async fn release(&self, lease: Lease) -> Result<(), LockError>;

    /// Push the expiry of a TTL lock to `ttl` from now, only if we still hold it. Session
    /// backends keep their lease alive on their own and only check ownership here.
    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError>;

    /// Disappear without releasing: stop heartbeats and drop connections, as a crashed
    /// process would. Locks held are freed only by TTL or session expiry.
    async fn abandon(&self);

    /// Close cleanly: end the session (which frees session-bound locks) and connections.
    async fn close(&self);
}

/// A lock service, connected and ready to hand out clients.
#[async_trait]
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;
    fn capabilities(&self) -> Capabilities;
    /// Open one logical client with its own session (where the recipe has sessions).
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError>;
    /// A one-line description of where this backend points, without credentials.
    fn describe(&self) -> String;

    /// How its clients reach the servers, as in effect (ZooKeeper is per-client whatever was
    /// asked); `None` for an in-process backend with no connection at all.
    fn connections(&self) -> Option<Connections> {
        None
    }

    /// What the servers hold for lock `key` right now: every client's claim (held or queued)
    /// as the server names it (etcd keys under `key/`, ZooKeeper children of the lock
    /// directory, the Redis key, the PostgreSQL row, the Redlock key on each node that has it).
    /// For checks that nothing is left behind.
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError>;

    /// What the servers grant for a requested lock TTL (see [`GrantedTtl`]). The default is a
    /// lock TTL kept to the millisecond, as `PX` and an interval column keep it; backends whose
    /// server rounds, negotiates or has no TTL ask it or say so.
    async fn granted_ttl(&self, requested: Duration) -> Result<GrantedTtl, LockError> {
        Ok(GrantedTtl::Lock { ms: requested.as_millis() as u64 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_cp_is_the_common_case_and_the_builders_add_to_it() {
        let c = Capabilities::cp(Expiry::Ttl, WaitStyle::Poll);
        assert_eq!(
            c,
            Capabilities { consistency: Consistency::Cp, fencing: true, fifo: false, expiry: Expiry::Ttl, wait: WaitStyle::Poll, lock_delay: false }
        );
        let c = c.with_fifo().with_lock_delay(true);
        assert!(c.fifo && c.lock_delay);
    }

    #[tokio::test]
    async fn pick_shares_or_opens() {
        let open = || async { Ok::<_, LockError>(2) };
        assert_eq!(Connections::Shared.pick(&1, open).await, Ok(1));
        assert_eq!(Connections::PerClient.pick(&1, open).await, Ok(2));
    }

    #[test]
    fn a_granted_lease_has_no_lost_signal_until_given_one() {
        let now = Instant::now();
        let l = Lease::granted("k", Some(3), now, now + Duration::from_secs(1), LeaseHandle::new("me"));
        assert_eq!((l.key.as_str(), l.token, l.handle.id.as_str()), ("k", Some(FencingToken(3)), "me"));
        assert!(l.acquired_at >= now && !l.lost.is_lost());
        let (tx, rx) = LostSignal::channel();
        let l = l.with_lost(rx);
        tx.lose("gone");
        assert!(l.is_lost());
    }
}
