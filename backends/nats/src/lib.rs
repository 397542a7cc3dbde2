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
//!   2.11 and Debian ships 2.9, so the TTL is the bucket's, fixed when the bucket is made.
//!   So there is a bucket per TTL: an acquire asking for a TTL takes its lock in that TTL's
//!   bucket (`dlbench-kvlock-<ms>ms`, made on first use, or by `granted_ttl` before a
//!   phase), and a lock expires after the TTL asked. A renewal asking another TTL cannot
//!   move the lock to another bucket: the lease is then valid for the shorter of the two.

pub mod admin;
mod lock;

use std::time::Duration;

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
    /// The TTL of the bucket made at connect (so a cluster without JetStream is refused
    /// then, not at the first acquire). An acquire takes its lock in the bucket of the TTL
    /// it asks for, whatever this is.
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

    /// The bucket made at connect: [`bucket_name`] of `lock_ttl`.
    pub fn bucket(&self) -> String {
        bucket_name(self.lock_ttl)
    }
}

/// The bucket whose `max_age` is `ttl`, where locks asking for `ttl` live:
/// `dlbench-kvlock-<ms>ms`. A target's leader lookup for `kill:leader` asks for the leader
/// of this bucket's stream, for the TTL the plan's locks use.
pub fn bucket_name(ttl: Duration) -> String {
    format!("dlbench-kvlock-{}ms", ttl.as_millis())
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

/// The lock bucket of `ttl`, made if absent (an identical bucket made by another client is
/// fine), once it has a stream leader. The stream is made here as async-nats's
/// `create_key_value` would make it, not by that call: it first reads the account's
/// JetStream info, whose reply from a 2.9 server lacks fields (`reserved_memory`) the 0.52
/// client requires.
async fn make_bucket(js: &Context, cfg: &NatsConfig, ttl: Duration) -> Result<(), LockError> {
    let name = bucket_name(ttl);
    let stream = stream::Config {
        name: format!("KV_{name}"),
        description: Some("dlbench locks".into()),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age: ttl,
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
    let failed = match tokio::time::timeout(within, js.get_or_create_stream(stream)).await {
        Err(_) => format!("nats: bucket {name} not made within {within:?}"),
        Ok(Err(e)) => format!("nats: bucket {name}: {e}"),
        Ok(Ok(_)) => return leader_elected(js, &name, within).await,
    };
    // Two clients making one bucket at the same moment (two `dlbench lock` processes, two
    // tests on fresh servers): a 2.9 cluster makes it for one and lets the other's request
    // time out. The bucket is there when its stream is, with a leader.
    leader_elected(js, &name, within).await.map_err(|_| LockError::Unavailable(failed))
}

/// The buckets known to exist, by TTL in milliseconds, shared by a backend's clients so
/// only the first acquire of a TTL (or `granted_ttl` before it) makes its bucket.
#[derive(Default)]
pub(crate) struct Buckets {
    known: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// Held while a bucket is made, so clients arriving together make it once.
    making: tokio::sync::Mutex<()>,
}

impl Buckets {
    /// The bucket of `ttl`, made through `js` first if it is not known to exist.
    pub(crate) async fn ensure(&self, js: &Context, cfg: &NatsConfig, ttl: Duration) -> Result<Bucket, LockError> {
        let ms = ttl.as_millis() as u64;
        if !self.known.lock().unwrap().contains(&ms) {
            let _one = self.making.lock().await;
            if !self.known.lock().unwrap().contains(&ms) {
                make_bucket(js, cfg, ttl).await?;
                self.known.lock().unwrap().insert(ms);
            }
        }
        Bucket::of(js, ttl).await
    }

    /// A bucket found missing (its stream gone: a cluster that lost its data): the next
    /// acquire of its TTL makes it again.
    pub(crate) fn forget(&self, ttl: Duration) {
        self.known.lock().unwrap().remove(&(ttl.as_millis() as u64));
    }

    fn ttls(&self) -> Vec<Duration> {
        self.known.lock().unwrap().iter().map(|ms| Duration::from_millis(*ms)).collect()
    }
}

/// One TTL's bucket as a client uses it: its name (the subjects' prefix), its stream (reads
/// and erasures, through the client's own connection) and its max age.
#[derive(Clone)]
pub(crate) struct Bucket {
    pub(crate) name: String,
    pub(crate) stream: async_nats::jetstream::stream::Stream<()>,
    pub(crate) ttl: Duration,
}

impl Bucket {
    /// A handle, without a request (the bucket is known to exist).
    async fn of(js: &Context, ttl: Duration) -> Result<Bucket, LockError> {
        let name = bucket_name(ttl);
        let stream = js.get_stream_no_info(format!("KV_{name}")).await.map_err(|e| LockError::Config(format!("nats: bucket {name}: {e}")))?;
        Ok(Bucket { name, stream, ttl })
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

/// A connected NATS cluster: the backend's own connection, and the buckets its clients know.
pub struct NatsBackend {
    /// `claims`, `granted_ttl`, and every client in `Shared` mode.
    js: Context,
    cfg: NatsConfig,
    connections: Connections,
    buckets: std::sync::Arc<Buckets>,
}

impl NatsBackend {
    pub async fn connect(cfg: NatsConfig) -> Result<Self, LockError> {
        Self::connect_with(cfg, Connections::default()).await
    }

    /// Connect and make the bucket of `cfg.lock_ttl`; in `PerClient` mode each client opens
    /// a connection of its own.
    pub async fn connect_with(cfg: NatsConfig, connections: Connections) -> Result<Self, LockError> {
        let js = open(&cfg).await?;
        let buckets = std::sync::Arc::new(Buckets::default());
        buckets.ensure(&js, &cfg, cfg.lock_ttl).await?;
        Ok(NatsBackend { js, cfg, connections, buckets })
    }

    fn lock(&self, js: Context) -> NatsLock {
        NatsLock::new(js, self.buckets.clone(), self.cfg.clone())
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
        let js = self.connections.pick(&self.js, || open(&self.cfg)).await?;
        Ok(Box::new(self.lock(js)))
    }
    fn describe(&self) -> String {
        format!("nats {} (a bucket per TTL, dlbench-kvlock-<ttl>ms, {} replicas)", self.cfg.endpoints.join(","), self.cfg.replicas)
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    /// The TTL asked, as the max age of its bucket, made now (before a phase's load, so
    /// no measured acquire pays for making it).
    async fn granted_ttl(&self, requested: Duration) -> Result<GrantedTtl, LockError> {
        let b = self.buckets.ensure(&self.js, &self.cfg, requested).await?;
        Ok(GrantedTtl::Lock { ms: b.ttl.as_millis() as u64 })
    }
    /// The key's holder in every bucket this backend knows.
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let l = self.lock(self.js.clone());
        let mut out = Vec::new();
        for ttl in self.buckets.ttls() {
            let b = Bucket::of(&self.js, ttl).await?;
            if let Last::Held(rev) = l.last(&b, key).await? {
                out.push(format!("{}.{} (revision {rev})", b.name, lock::kv_key(key)));
            }
        }
        Ok(out)
    }
}

/// Reading the newest message of a subject from the stream leader: "none" is an answer.
fn read_error(e: async_nats::jetstream::stream::LastRawMessageError) -> Option<LockError> {
    match e.kind() {
        LastRawMessageErrorKind::NoMessageFound => None,
        _ => Some(LockError::Unavailable(format!("nats: read: {e}"))),
    }
}
