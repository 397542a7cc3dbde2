//! NATS JetStream key-value lock, the recipe NATS users write by hand (there is no lock
//! API in the server or the clients).
//!
//! Recipe:
//! - one KV bucket, three replicas (file storage, so a stream replica survives a restart),
//!   `history = 1`: each key keeps only its newest message;
//! - acquire = KV *create*: publish the holder's token to `$KV.<bucket>.<key>` with the
//!   header `Nats-Expected-Last-Subject-Sequence: 0` (the subject has no message); any
//!   message there is a holder, and the lock is busy;
//! - renew = publish again expecting the last revision we wrote (a KV *update*);
//! - release = erase our own message by its sequence (a stream message delete), so the key
//!   is empty again. Not the textbook KV delete marker: the create after a marker must
//!   expect the marker's sequence, and a 2.9 cluster checks a non-zero expected sequence
//!   only before proposing the write, so waiters racing over one marker all win
//!   (nats-server #4320; measured here as hundreds of overlaps, see docs/locks.md);
//! - the fencing token is the revision the create got: the stream sequence, which grows
//!   across every key of the bucket, so successive holders of one key get larger tokens;
//! - a contended acquire polls after a jittered retry interval, like redis-py;
//! - expiry is the bucket's `max_age`: a lock whose holder vanished is dropped by the
//!   stream that long after its last write. Per-message TTL (`Nats-TTL`) came in server
//!   2.11 and Debian ships 2.9, so the TTL is the bucket's, fixed when the bucket is made,
//!   whatever an acquire asks for. The bucket's name carries it, so two backends with
//!   different TTLs never share a bucket, and `granted_ttl` reports it. A holder's lease
//!   is valid for the shorter of the asked TTL and the bucket's.

pub mod admin;
mod lock;

use std::time::Duration;

use async_nats::jetstream::kv::Store;
use async_nats::jetstream::stream::{self, DiscardPolicy, LastRawMessageErrorKind, StorageType};
use async_nats::jetstream::Context;
use async_trait::async_trait;
use dlbench_core::{Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl, LockError, WaitStyle};

use lock::{Last, NatsLock};

/// How to reach the cluster and which bucket the locks live in.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// `host:port` of each server; the client picks one and fails over to the others.
    pub endpoints: Vec<String>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// The bucket's `max_age`: how long a lock outlives its holder's last write.
    pub lock_ttl: Duration,
    /// Stream replicas of the bucket (3 on a three-node cluster).
    pub replicas: usize,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl NatsConfig {
    pub fn new(endpoints: Vec<String>) -> Self {
        NatsConfig {
            endpoints,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            lock_ttl: DEFAULT_LOCK_TTL,
            replicas: 3,
            user: None,
            password: None,
        }
    }

    /// The bucket for this TTL: `dlbench-kvlock-<ms>ms`.
    pub fn bucket(&self) -> String {
        format!("dlbench-kvlock-{}ms", self.lock_ttl.as_millis())
    }
}

/// A test hook, and nothing else: when set to 1, acquire, renew and release write without
/// the expected-revision header (a plain put or delete), so every acquire "wins" and a
/// release deletes whoever holds the key. The tests set it to show that the conformance
/// suite and a run's verdict catch a lock that skips the compare; no shipped workflow
/// sets it.
pub const SKIP_REVISION_CHECK: &str = "DLBENCH_TEST_HOOK_NATS_SKIP_REVISION_CHECK";

/// The workloads' default TTL (10 s), so the default run's locks expire as the others do.
pub const DEFAULT_LOCK_TTL: Duration = Duration::from_secs(10);

/// Connect to the cluster (bounded by the connect timeout) with one JetStream context.
async fn open(cfg: &NatsConfig) -> Result<Context, LockError> {
    let urls: Vec<String> = cfg.endpoints.iter().map(|e| format!("nats://{e}")).collect();
    let mut opts = async_nats::ConnectOptions::new()
        .connection_timeout(cfg.connect_timeout)
        .request_timeout(Some(cfg.request_timeout))
        .name("dlbench");
    if let (Some(u), Some(p)) = (&cfg.user, &cfg.password) {
        opts = opts.user_and_password(u.clone(), p.clone());
    }
    let addrs: Vec<async_nats::ServerAddr> = urls
        .iter()
        .map(|u| u.parse().map_err(|e| LockError::Config(format!("bad nats endpoint {u:?}: {e}"))))
        .collect::<Result<_, _>>()?;
    let client = tokio::time::timeout(cfg.connect_timeout, opts.connect(addrs))
        .await
        .map_err(|_| LockError::Unavailable(format!("nats at {}: connect timed out", cfg.endpoints.join(","))))?
        .map_err(|e| LockError::Unavailable(format!("nats at {}: {e}", cfg.endpoints.join(","))))?;
    let mut js = async_nats::jetstream::new(client);
    js.set_timeout(cfg.request_timeout);
    Ok(js)
}

/// The lock bucket, made if absent (an identical bucket made by another client is fine).
/// The stream is made here as async-nats's `create_key_value` would make it, not by that
/// call: it first reads the account's JetStream info, whose reply from a 2.9 server lacks
/// fields (`reserved_memory`) the 0.52 client requires.
async fn bucket(js: &Context, cfg: &NatsConfig) -> Result<Store, LockError> {
    let name = cfg.bucket();
    let stream = stream::Config {
        name: format!("KV_{name}"),
        description: Some("dlbench locks".into()),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age: cfg.lock_ttl,
        storage: StorageType::File,
        num_replicas: cfg.replicas,
        discard: DiscardPolicy::New,
        allow_rollup: true,
        // A release erases its own message by sequence (see `lock`).
        deny_delete: false,
        allow_direct: true,
        ..Default::default()
    };
    let within = cfg.request_timeout * 2;
    let unavailable = |e: &dyn std::fmt::Display| LockError::Unavailable(format!("nats: bucket {name}: {e}"));
    match tokio::time::timeout(within, js.get_or_create_stream(stream)).await {
        Err(_) => return Err(LockError::Unavailable(format!("nats: bucket {name} not made within {within:?}"))),
        Ok(Err(e)) => return Err(unavailable(&e)),
        Ok(Ok(_)) => {}
    }
    leader_elected(js, &name, within).await?;
    match tokio::time::timeout(within, js.get_key_value(name.clone())).await {
        Err(_) => Err(LockError::Unavailable(format!("nats: bucket {name} not opened within {within:?}"))),
        Ok(r) => r.map_err(|e| unavailable(&e)),
    }
}

/// Wait until the bucket's stream has a leader: a stream just made answers its first
/// publishes with "no responders" until its replicas elect one.
async fn leader_elected(js: &Context, name: &str, within: Duration) -> Result<(), LockError> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Ok(Ok(mut st)) = tokio::time::timeout(within, js.get_stream(format!("KV_{name}"))).await {
            if let Ok(Ok(info)) = tokio::time::timeout(within, st.info()).await {
                if info.cluster.as_ref().and_then(|c| c.leader.as_deref()).is_some_and(|l| !l.is_empty()) {
                    return Ok(());
                }
            }
        }
        if std::time::Instant::now() >= deadline {
            return Err(LockError::Unavailable(format!("nats: bucket {name} has no stream leader after {within:?}")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connection with the lock bucket open on it.
#[derive(Clone)]
struct Conn {
    js: Context,
    store: Store,
}

impl Conn {
    async fn open(cfg: &NatsConfig) -> Result<Conn, LockError> {
        let js = open(cfg).await?;
        let store = bucket(&js, cfg).await?;
        Ok(Conn { js, store })
    }
}

/// A connected NATS cluster and its lock bucket.
pub struct NatsBackend {
    /// The backend's own connection: `claims`, and every client in `Shared` mode.
    conn: Conn,
    cfg: NatsConfig,
    connections: Connections,
}

impl NatsBackend {
    pub async fn connect(cfg: NatsConfig) -> Result<Self, LockError> {
        Self::connect_with(cfg, Connections::default()).await
    }

    /// Connect; in `PerClient` mode each client opens a connection of its own.
    pub async fn connect_with(cfg: NatsConfig, connections: Connections) -> Result<Self, LockError> {
        Ok(NatsBackend { conn: Conn::open(&cfg).await?, cfg, connections })
    }
}

#[async_trait]
impl Backend for NatsBackend {
    fn name(&self) -> &'static str {
        "nats"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::cp(Expiry::Ttl, WaitStyle::Poll)
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let conn = self.connections.pick(&self.conn, || Conn::open(&self.cfg)).await?;
        Ok(Box::new(NatsLock::new(conn.js, conn.store, self.cfg.clone())))
    }
    fn describe(&self) -> String {
        format!("nats {} (bucket {}, {} replicas)", self.cfg.endpoints.join(","), self.cfg.bucket(), self.cfg.replicas)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    /// The bucket's max age, whatever was asked: the server 2.9 has no per-key TTL.
    async fn granted_ttl(&self, _requested: Duration) -> Result<GrantedTtl, LockError> {
        Ok(GrantedTtl::Lock { ms: self.cfg.lock_ttl.as_millis() as u64 })
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let l = NatsLock::new(self.conn.js.clone(), self.conn.store.clone(), self.cfg.clone());
        Ok(match l.last(key).await? {
            Last::Held(rev) => vec![format!("{} (revision {rev})", lock::kv_key(key))],
            Last::Free(_) => Vec::new(),
        })
    }
}

/// Reading the newest message of a subject from the stream leader: "none" is an answer.
fn read_error(e: async_nats::jetstream::stream::LastRawMessageError) -> Option<LockError> {
    match e.kind() {
        LastRawMessageErrorKind::NoMessageFound => None,
        _ => Some(LockError::Unavailable(format!("nats: read: {e}"))),
    }
}
