//! etcd revision lock, compatible with `etcdctl lock` and Go's `concurrency.Mutex`.
//!
//! Recipe (client/v3/concurrency in etcd):
//! - each client owns a lease (its session), kept alive while it waits and while it holds;
//! - the claim is the key `<name>/<lease id in lower-case hex>`, empty value, on that lease;
//! - one transaction puts the claim if absent and reads the oldest claim under `<name>/`;
//!   the claim with the lowest CreateRevision holds the lock;
//! - a waiter watches only the newest claim older than its own until it is deleted, then
//!   looks again; when none is left it re-reads its own key, and a missing key means the
//!   session expired while waiting: an error, never "acquired" (etcd #11456);
//! - the fencing token is the claim's CreateRevision.
//!
//! One deliberate difference from the Go client: the watch on the predecessor starts at the
//! current revision, followed by one read that covers the gap since we found it. Go starts
//! the watch at the revision of that read; both see every delete, but a watch starting at a
//! past revision is "unsynced" in etcd and served only by its 100 ms catch-up loop, which
//! caps a hot key at about ten hand-offs per second per waiter.

mod session;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl,
    Lease, LeaseHandle, LockError, WaitStyle,
};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, SortOrder,
    SortTarget, Txn, TxnOp, TxnOpResponse, WatchFilterType, WatchOptions,
};
use tokio::sync::Mutex;

use session::Session;

/// Where and how to reach etcd.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// `host:port` or `http://host:port` client endpoints.
    pub endpoints: Vec<String>,
    /// Bound on establishing a connection.
    pub connect_timeout: Duration,
    /// Bound on any single request.
    pub request_timeout: Duration,
    /// User name and password, when auth is on.
    pub user: Option<(String, String)>,
    /// TLS: endpoints are reached over `https://`, verified with this CA.
    pub tls: Option<dlbench_core::TlsPem>,
}

impl EtcdConfig {
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdConfig {
            endpoints,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            user: None,
            tls: None,
        }
    }
}

/// Where the lock recipe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recipe {
    /// In the client: the `concurrency.Mutex` protocol over KV transactions and watches.
    #[default]
    Client,
    /// In the server: etcd's v3lock service (`Lock` / `Unlock` RPCs), which runs the same
    /// `Mutex` inside the member that receives the call (`etcdctl lock` uses it too).
    Server,
}

/// A connected etcd cluster.
pub struct EtcdBackend {
    /// The backend's own channel: `claims`, and every client in `Shared` mode.
    client: Client,
    config: EtcdConfig,
    connections: Connections,
    recipe: Recipe,
}

impl EtcdBackend {
    pub async fn connect(config: EtcdConfig) -> Result<Self, LockError> {
        Self::connect_with(config, Connections::default()).await
    }

    /// As [`Self::connect`]; in `PerClient` mode each client opens a gRPC channel of its own
    /// (as each process using `clientv3` would), beside its own session lease.
    pub async fn connect_with(config: EtcdConfig, connections: Connections) -> Result<Self, LockError> {
        let client = open(&config).await?;
        Ok(EtcdBackend { client, config, connections, recipe: Recipe::Client })
    }

    /// The same cluster, the lock taken by etcd's server-side lock service instead.
    pub fn with_recipe(mut self, recipe: Recipe) -> Self {
        self.recipe = recipe;
        self
    }

    pub fn client_handle(&self) -> Client {
        self.client.clone()
    }
}

/// Open a channel to the cluster and prove an etcd answers on it, within the connect bound.
async fn open(config: &EtcdConfig) -> Result<Client, LockError> {
    open_bounded(config, Some(config.request_timeout)).await
}

/// As [`open`]; `request_timeout` bounds every call on the channel (none: the caller bounds
/// its own calls, as a `Lock` RPC that waits out a contended lock must be).
async fn open_bounded(config: &EtcdConfig, request_timeout: Option<Duration>) -> Result<Client, LockError> {
    let endpoints: Vec<String> = config
        .endpoints
        .iter()
        .map(|e| match (e.split_once("://"), &config.tls) {
            (Some((_, rest)), Some(_)) => format!("https://{rest}"),
            (Some(_), None) => e.clone(),
            (None, Some(_)) => format!("https://{e}"),
            (None, None) => format!("http://{e}"),
        })
        .collect();
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(config.connect_timeout)
        .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
    if let Some(t) = request_timeout {
        opts = opts.with_timeout(t);
    }
    if let Some((u, p)) = &config.user {
        opts = opts.with_user(u.clone(), p.clone());
    }
    if let Some(t) = &config.tls {
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &t.ca {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &t.identity {
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        opts = opts.with_tls(tls);
    }
    // The channel may come up before the server has said a word (a silent listener
    // accepts TCP); one Status call proves an etcd answers, all within the connect bound.
    let connect = async {
        let mut client = Client::connect(endpoints, Some(opts)).await?;
        client.status().await?;
        Ok::<_, etcd_client::Error>(client)
    };
    let client = tokio::time::timeout(config.connect_timeout, connect)
        .await
        .map_err(|_| {
            LockError::Unavailable(format!(
                "etcd at {}: no answer within {:?}",
                config.endpoints.join(","),
                config.connect_timeout
            ))
        })?
        .map_err(|e| definite(e, config))?;
    Ok(client)
}

#[async_trait]
impl Backend for EtcdBackend {
    fn name(&self) -> &'static str {
        match self.recipe {
            Recipe::Client => "etcd",
            Recipe::Server => "etcd-v3lock",
        }
    }
    fn capabilities(&self) -> Capabilities {
        // The waiter-side lock-delay lives in the client recipe; v3lock's waiting happens
        // inside the member.
        Capabilities::cp(Expiry::Session, WaitStyle::Watch).with_fifo().with_lock_delay(self.recipe == Recipe::Client)
    }
    /// A lease granted and revoked at once: the TTL the server answers is the one it keeps
    /// (rounded up to seconds, raised to its minimum of about 1.5 election timeouts).
    async fn granted_ttl(&self, requested: Duration) -> Result<GrantedTtl, LockError> {
        let mut leases = self.client.lease_client();
        let granted = tokio::time::timeout(self.config.request_timeout, leases.grant(session::lease_secs(requested), None))
            .await
            .map_err(|_| LockError::Unavailable(format!("etcd: no lease granted within {:?}", self.config.request_timeout)))?
            .map_err(|e| definite(e, &self.config))?;
        let _ = tokio::time::timeout(self.config.request_timeout, leases.revoke(granted.id())).await;
        Ok(GrantedTtl::Session { ms: granted.ttl().max(1) as u64 * 1000 })
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        let client = self.connections.pick(&self.client, || open(&self.config)).await?;
        let lock = EtcdLock { client, config: self.config.clone(), session: Mutex::new(None) };
        Ok(match self.recipe {
            Recipe::Client => Box::new(lock),
            // A `Lock` call lasts as long as the lock is held by others: it gets a channel
            // of its own with no request timeout (the acquire's wait bounds it), whatever
            // `connections` says.
            Recipe::Server => Box::new(V3Lock { waiting: open_bounded(&self.config, None).await?, lock }),
        })
    }
    fn describe(&self) -> String {
        format!("{} {}", self.name(), self.config.endpoints.join(","))
    }
    fn connections(&self) -> Option<Connections> {
        Some(self.connections)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let kv = self.client.kv_client();
        let pfx = format!("{key}/");
        let (r, _) = retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let pfx = pfx.clone();
            async move { kv.get(pfx, Some(GetOptions::new().with_prefix().with_keys_only())).await }
        })
        .await;
        let r = r.map_err(|e| definite(e, &self.config))?;
        Ok(r.kvs().iter().map(|kv| String::from_utf8_lossy(kv.key()).into_owned()).collect())
    }
}

/// One logical client: one etcd lease, shared by every lock this client takes.
struct EtcdLock {
    client: Client,
    config: EtcdConfig,
    session: Mutex<Option<Arc<Session>>>,
}

/// What a held etcd lock needs to be released.
struct Claim {
    lease_id: i64,
    create_revision: i64,
}

/// True when the request cannot have reached a server that acted on it: refused as invalid
/// or unauthorized, or never sent because no connection could be made.
///
/// `Unavailable` alone says little: etcd answers it for "etcdserver: request timed out",
/// "leader changed" and the like after a write may have been applied, so only an
/// `Unavailable` that comes from failing to connect is definite.
fn is_definite(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => match s.code() {
            Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument | Code::FailedPrecondition
            | Code::ResourceExhausted => true,
            Code::Unavailable => never_connected(s),
            _ => false,
        },
        etcd_client::Error::TransportError(_)
        | etcd_client::Error::IoError(_)
        | etcd_client::Error::InvalidArgs(_)
        | etcd_client::Error::InvalidUri(_) => true,
        _ => false,
    }
}

/// The status says the client could not connect, so the request never left: tonic wraps
/// connect failures in [`tonic::ConnectError`] (kept as the status's source) and names them
/// "tcp connect error" / "error trying to connect" / "connection refused".
fn never_connected(s: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(s);
    while let Some(e) = source {
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        source = e.source();
    }
    let m = s.message().to_ascii_lowercase();
    ["tcp connect error", "error trying to connect", "connection refused"].iter().any(|p| m.contains(p))
}

/// Map an error from a request that changes nothing (or whose change was undone).
fn definite(e: etcd_client::Error, config: &EtcdConfig) -> LockError {
    match &e {
        etcd_client::Error::GRpcStatus(s)
            if matches!(s.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied)
                || s.message().contains("authentication failed") =>
        {
            LockError::Config(format!("etcd at {}: {}", config.endpoints.join(","), s.message()))
        }
        _ => LockError::Unavailable(format!("etcd at {}: {e}", config.endpoints.join(","))),
    }
}

/// Map an error from a request that may have written.
fn maybe_written(e: etcd_client::Error, config: &EtcdConfig) -> LockError {
    if is_definite(&e) {
        definite(e, config)
    } else {
        LockError::Indeterminate(format!("etcd at {}: {e}", config.endpoints.join(",")))
    }
}

/// Errors another attempt may not meet: the endpoint refused or dropped the connection,
/// the member has no leader or just lost it, the stream was cut. etcd-client keeps routing
/// to a dead endpoint until it comes back, so a request is retried until `within` has
/// passed. Every request this backend repeats is safe to repeat (reads, the claim
/// transaction that finds its own key, deletes guarded by the create revision).
fn retryable(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            Code::Unavailable | Code::Cancelled | Code::Unknown | Code::Aborted | Code::Internal | Code::DeadlineExceeded
        ),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) | etcd_client::Error::WatchError(_) => true,
        _ => false,
    }
}

/// What the attempts of a [`retrying`] call tell beyond the last result.
#[derive(Debug, Clone, Copy, Default)]
struct Attempts {
    /// More than one attempt was made.
    repeated: bool,
    /// An attempt before the last one failed in a way that may have been applied.
    uncertain: bool,
}

/// Run `f` until it succeeds, fails in a way that is not [`retryable`], or `within` passes
/// (then a deadline-exceeded error, whose outcome is unknown). [`Attempts`] tells whether an
/// attempt was repeated, so an idempotent write can tell "done by my first try" from "never
/// done", and whether an earlier attempt may have been applied, so a last error that is
/// definite on its own (a refused connection) is not mistaken for "nothing happened".
async fn retrying<T, Fut>(within: Duration, mut f: impl FnMut() -> Fut) -> (Result<T, etcd_client::Error>, Attempts)
where
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + within;
    let mut attempts = Attempts::default();
    loop {
        match tokio::time::timeout_at(deadline.into(), f()).await {
            Ok(Ok(v)) => return (Ok(v), attempts),
            Ok(Err(e)) if retryable(&e) && Instant::now() + Duration::from_millis(50) < deadline => {
                tracing::debug!("etcd: retrying after {e}");
                attempts.repeated = true;
                attempts.uncertain |= !is_definite(&e);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(e)) => return (Err(e), attempts),
            Err(_) => {
                return (Err(etcd_client::Error::GRpcStatus(tonic::Status::deadline_exceeded(format!("no answer within {within:?}")))), attempts)
            }
        }
    }
}

/// Map the last error of a retried write: unknown if any attempt may have been applied.
fn write_failed(e: etcd_client::Error, attempts: Attempts, config: &EtcdConfig) -> LockError {
    if attempts.uncertain {
        LockError::Indeterminate(format!("etcd at {}: {e} (an earlier attempt may have been applied)", config.endpoints.join(",")))
    } else {
        maybe_written(e, config)
    }
}

/// A retried release found our key gone: an earlier attempt deleted it, or the lease expired
/// and took it. The lease's remaining TTL (-1 once it is gone) tells them apart.
fn gone_on_retry(lease_ttl: Result<i64, etcd_client::Error>, key: &str, lease_id: i64, config: &EtcdConfig) -> Result<(), LockError> {
    match lease_ttl {
        Ok(ttl) if ttl >= 0 => Ok(()),
        Ok(_) => Err(LockError::NotHeld(format!("{key}: lease {lease_id:x} expired"))),
        Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound || s.message().contains("lease not found") => {
            Err(LockError::NotHeld(format!("{key}: lease {lease_id:x} expired")))
        }
        Err(e) => Err(LockError::Indeterminate(format!(
            "etcd at {}: {key} gone after a retried release, lease state unknown: {e}",
            config.endpoints.join(",")
        ))),
    }
}

fn first_kv(r: &TxnOpResponse) -> Option<&etcd_client::KeyValue> {
    match r {
        TxnOpResponse::Get(g) => g.kvs().first(),
        _ => None,
    }
}

fn first_kv_rev(r: &TxnOpResponse) -> Option<i64> {
    first_kv(r).map(|kv| kv.create_revision())
}

impl EtcdLock {
    /// The current session, or a new one when there is none or it was lost.
    async fn session(&self, ttl: Duration) -> Result<Arc<Session>, LockError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            if !s.lost.is_lost() {
                return Ok(s.clone());
            }
        }
        let s = Arc::new(Session::start(self.client.clone(), ttl, &self.config).await?);
        *guard = Some(s.clone());
        Ok(s)
    }

    /// Withdraw our claim; if that fails, end the session so the claim expires with it and
    /// never silently turns into a lock nobody knows it holds.
    async fn withdraw(&self, session: &Session, my_key: &str, my_rev: i64) -> Result<(), ()> {
        let txn = Txn::new()
            .when([Compare::create_revision(my_key, CompareOp::Equal, my_rev)])
            .and_then([TxnOp::delete(my_key, None)]);
        let kv = self.client.kv_client();
        match retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await
        .0
        {
            Ok(_) => Ok(()),
            Err(_) => {
                session.stop();
                Err(())
            }
        }
    }

    /// Wait until no claim under `pfx` is older than ours (Go's `waitDeletes`). Returns the
    /// lease of each predecessor seen to go and when we saw it go, for the lock-delay.
    async fn wait_predecessors(&self, pfx: &str, my_rev: i64, session: &Session, owner: Option<(i64, i64)>) -> Result<Vec<(i64, Instant)>, LockError> {
        let kv = self.client.kv_client();
        let watch = self.client.watch_client();
        let rt = self.config.request_timeout;
        let get = |key: Vec<u8>, opts: Option<GetOptions>| {
            let kv = kv.clone();
            retrying(rt, move || {
                let mut kv = kv.clone();
                let (key, opts) = (key.clone(), opts.clone());
                async move { kv.get(key, opts).await }
            })
        };
        let mut lost = session.lost.subscribe();
        // (lease, create revision) of each older claim met, and those seen gone. A claim
        // never comes back under the same create revision, so one not found is gone.
        let mut seen: Vec<(i64, i64)> = owner.into_iter().collect();
        let mut gone: Vec<(i64, Instant)> = Vec::new();
        let mut note_gone = |seen: &[(i64, i64)], current: Option<i64>| {
            for &(lease, rev) in seen {
                if Some(rev) != current && !gone.iter().any(|(l, _)| *l == lease) {
                    gone.push((lease, Instant::now()));
                }
            }
        };
        loop {
            let opts = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Descend)
                .with_max_create_revision(my_rev - 1)
                .with_limit(1);
            let resp = get(pfx.as_bytes().to_vec(), Some(opts)).await.0.map_err(|e| definite(e, &self.config))?;
            let Some(pred) = resp.kvs().first() else {
                note_gone(&seen, None);
                return Ok(gone);
            };
            note_gone(&seen, Some(pred.create_revision()));
            if !seen.iter().any(|&(_, r)| r == pred.create_revision()) {
                seen.push((pred.lease(), pred.create_revision()));
            }
            let pred_key = pred.key().to_vec();
            let pred_rev = pred.create_revision();
            let seen_at = resp.header().map(|h| h.revision()).unwrap_or(0);
            // Watch from "now", then close the gap between our read and the watch's start
            // with one more read. (Go starts the watch at the read's revision instead; etcd
            // serves such a past-revision watch from its 100 ms catch-up loop, which caps
            // hand-offs at about ten per second.)
            let wopts = WatchOptions::new().with_filters([WatchFilterType::NoPut]);
            let mut stream = retrying(rt, || {
                let mut watch = watch.clone();
                let (k, o) = (pred_key.clone(), wopts.clone());
                async move { watch.watch(k, Some(o)).await }
            })
            .await
            .0
            .map_err(|e| definite(e, &self.config))?;
            let created = tokio::select! {
                reason = lost.lost() => return Err(LockError::SessionLost(reason)),
                m = stream.message() => m.map_err(|e| definite(e, &self.config))?,
            };
            let Some(created) = created else { continue };
            let watching_from = created.header().map(|h| h.revision()).unwrap_or(i64::MAX);
            if watching_from > seen_at {
                let now = get(pred_key.clone(), None).await.0.map_err(|e| definite(e, &self.config))?;
                if now.kvs().first().map(|kv| kv.create_revision()) != Some(pred_rev) {
                    continue; // deleted in the gap: look again
                }
            }
            loop {
                tokio::select! {
                    reason = lost.lost() => return Err(LockError::SessionLost(reason)),
                    msg = stream.message() => match msg {
                        Ok(Some(r)) => {
                            if r.canceled() || r.events().iter().any(|ev| ev.event_type() == EventType::Delete) {
                                break; // deleted, or the watch was cancelled: look again
                            }
                        }
                        Ok(None) | Err(_) => break, // stream ended: look again
                    }
                }
            }
        }
    }
}

impl EtcdLock {
    /// Chubby's lock-delay, on the waiter's side: if a predecessor we saw go was taken by
    /// its lease ending (session lost, not a release: a released claim's lease lives on
    /// with its session), keep our claim and wait until `delay` has passed since we saw it
    /// go, so the lost holder's in-flight writes land first. Our own claim stays in the
    /// queue meanwhile, so nobody behind us gets in either.
    async fn lock_delay(&self, gone: &[(i64, Instant)], delay: Duration, session: &Session) -> Result<(), LockError> {
        let leases = self.client.lease_client();
        let mut until: Option<Instant> = None;
        for &(lease, at) in gone {
            if lease == 0 {
                continue;
            }
            let (ttl, _) = retrying(self.config.request_timeout, || {
                let mut leases = leases.clone();
                async move { leases.time_to_live(lease, None).await }
            })
            .await;
            let lost = match ttl {
                Ok(r) => r.ttl() < 0,
                Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => true,
                // Unknown: assume the worst, as the delay is there for safety.
                Err(_) => true,
            };
            if lost {
                tracing::debug!("etcd lock-delay: predecessor's lease {lease:x} is gone; waiting {delay:?}");
                until = until.max(Some(at + delay));
            }
        }
        if let Some(until) = until {
            let mut lost = session.lost.subscribe();
            tokio::select! {
                reason = lost.lost() => return Err(LockError::SessionLost(reason)),
                _ = tokio::time::sleep_until(until.into()) => {}
            }
        }
        Ok(())
    }
}

#[async_trait]
impl DistLock for EtcdLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let deadline = invoked_at + opts.wait;
        tracing::debug!("etcd acquire {key}: session");
        let session = self.session(opts.ttl).await?;
        tracing::debug!("etcd acquire {key}: txn with lease {:x}", session.lease_id);
        let pfx = format!("{key}/");
        let my_key = format!("{pfx}{:x}", session.lease_id);
        let first_create = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let txn = Txn::new()
            .when([Compare::create_revision(my_key.as_str(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(my_key.as_str(), "", Some(PutOptions::new().with_lease(session.lease_id))),
                TxnOp::get(pfx.as_str(), Some(first_create.clone())),
            ])
            .or_else([TxnOp::get(my_key.as_str(), None), TxnOp::get(pfx.as_str(), Some(first_create))]);
        let kv = self.client.kv_client();
        let rt = self.config.request_timeout;
        // Retrying is safe: if an earlier attempt created our key, the retry finds it (the
        // else branch) and carries on with it.
        let (resp, attempts) = retrying(rt, || {
            let mut kv = kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await;
        let resp = resp.map_err(|e| {
            // An attempt may have created our claim ("leader changed" does not say whether
            // the write was applied): end the session so such a claim expires with it
            // instead of blocking everyone behind a lock nobody knows it holds.
            session.stop();
            write_failed(e, attempts, &self.config)
        })?;
        let ops = resp.op_responses();
        let my_rev = if resp.succeeded() {
            resp.header().map(|h| h.revision()).unwrap_or(0)
        } else {
            ops.first().and_then(first_kv_rev).ok_or_else(|| LockError::SessionLost("own key vanished".into()))?
        };
        let owner_rev = ops.get(1).and_then(first_kv_rev);
        let held_now = owner_rev.is_none() || owner_rev == Some(my_rev);
        if !held_now {
            if opts.wait.is_zero() {
                return match self.withdraw(&session, &my_key, my_rev).await {
                    Ok(()) => Err(LockError::Busy),
                    // The claim may stay until the lease expires, and become the holder
                    // meanwhile: nobody can say this acquire had no effect.
                    Err(()) => Err(LockError::Indeterminate("could not withdraw claim; session ended".into())),
                };
            }
            tracing::debug!("etcd acquire {key}: waiting behind rev {my_rev}");
            let owner = ops.get(1).and_then(first_kv).map(|kv| (kv.lease(), kv.create_revision()));
            let wait_and_delay = async {
                let gone = self.wait_predecessors(&pfx, my_rev, &session, owner).await?;
                if !opts.lock_delay.is_zero() {
                    self.lock_delay(&gone, opts.lock_delay, &session).await?;
                }
                Ok(())
            };
            let waited = tokio::time::timeout_at(deadline.into(), wait_and_delay).await;
            tracing::debug!("etcd acquire {key}: waited: {:?}", waited.as_ref().map(|r| r.as_ref().err()));
            let failure = match waited {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(LockError::Timeout(opts.wait)),
            };
            if let Some(err) = failure {
                if matches!(err, LockError::SessionLost(_)) {
                    return Err(err);
                }
                return match self.withdraw(&session, &my_key, my_rev).await {
                    Ok(()) => Err(err),
                    Err(()) => Err(LockError::Indeterminate(format!("{err}; claim withdrawal failed, session ended"))),
                };
            }
            // Make sure the session did not expire while we waited: the key must still be ours.
            tracing::debug!("etcd acquire {key}: re-reading own key");
            let check = retrying(rt, || {
                let mut kv = kv.clone();
                let k = my_key.clone();
                async move { kv.get(k, None).await }
            })
            .await
            .0;
            tracing::debug!("etcd acquire {key}: re-read done");
            match check {
                Ok(r) if r.kvs().first().map(|kv| kv.create_revision()) == Some(my_rev) => {}
                Ok(_) => return Err(LockError::SessionLost("lock key gone after waiting: session expired".into())),
                Err(e) => {
                    return Err(match self.withdraw(&session, &my_key, my_rev).await {
                        Ok(()) => definite(e, &self.config),
                        Err(()) => LockError::Indeterminate(format!("{e}; claim withdrawal failed, session ended")),
                    });
                }
            }
        }
        let handle = LeaseHandle::new(my_key).with_data(Claim { lease_id: session.lease_id, create_revision: my_rev });
        Ok(Lease::granted(key, Some(my_rev as u64), invoked_at, session.valid_until(), handle).with_lost(session.lost.subscribe()))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not an etcd lease".into()))?;
        // Compare the create revision so a retried release never deletes a newer claim of
        // the same lease (etcd #22082).
        let txn = Txn::new()
            .when([Compare::create_revision(lease.handle.id.as_str(), CompareOp::Equal, claim.create_revision)])
            .and_then([TxnOp::delete(lease.handle.id.as_str(), None)]);
        let kv = self.client.kv_client();
        let (resp, attempts) = retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await;
        let resp = resp.map_err(|e| write_failed(e, attempts, &self.config))?;
        if resp.succeeded() {
            Ok(())
        } else if attempts.repeated {
            // Gone: deleted by an earlier attempt whose reply we lost, or by the lease
            // expiring (then we did not hold it to the end). Ask the lease.
            let leases = self.client.lease_client();
            let (ttl, _) = retrying(self.config.request_timeout, || {
                let mut leases = leases.clone();
                async move { leases.time_to_live(claim.lease_id, None).await }
            })
            .await;
            gone_on_retry(ttl.map(|r| r.ttl()), &lease.handle.id, claim.lease_id, &self.config)
        } else {
            Err(LockError::NotHeld(format!("{} (lease {:x}) no longer exists", lease.handle.id, claim.lease_id)))
        }
    }

    async fn extend(&self, lease: &mut Lease, _ttl: Duration) -> Result<(), LockError> {
        // The session's keep-alive extends the lease; here we only confirm we still own it.
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not an etcd lease".into()))?;
        let checked_at = Instant::now();
        let kv = self.client.kv_client();
        let id = lease.handle.id.clone();
        let r = retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let id = id.clone();
            async move { kv.get(id, None).await }
        })
        .await
        .0
        .map_err(|e| definite(e, &self.config))?;
        if r.kvs().first().map(|kv| kv.create_revision()) == Some(claim.create_revision) {
            let ttl = self.session.lock().await.as_ref().map(|s| s.ttl).unwrap_or_default();
            lease.valid_until = checked_at + ttl;
            Ok(())
        } else {
            Err(LockError::NotHeld(lease.handle.id.clone()))
        }
    }

    async fn abandon(&self) {
        if let Some(s) = self.session.lock().await.take() {
            s.stop();
        }
    }

    async fn close(&self) {
        if let Some(s) = self.session.lock().await.take() {
            s.stop();
            let _ = tokio::time::timeout(self.config.request_timeout, self.client.lease_client().revoke(s.lease_id)).await;
        }
    }
}

/// The server-side recipe: one `Lock` RPC waits in the member for the lock (the member runs
/// `concurrency.Mutex` on our lease) and one `Unlock` RPC deletes the claim. The session and
/// its lease are the client recipe's.
struct V3Lock {
    lock: EtcdLock,
    /// The channel `Lock` calls wait on (no request timeout).
    waiting: Client,
}

#[async_trait]
impl DistLock for V3Lock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let session = self.lock.session(opts.ttl).await?;
        let mut locks = self.waiting.lock_client();
        let call = locks.lock(key, Some(etcd_client::LockOptions::new().with_lease(session.lease_id)));
        // A try-lock has no RPC of its own: a short wait stands in for it.
        let wait = opts.wait.max(Duration::from_millis(50));
        let failed = |e: LockError| {
            // The member may go on to grant our claim after we stopped listening (a cancel
            // that does not reach it, or a grant already on its way back): a lock nobody
            // knows it holds. Ending the session revokes the lease and every claim on it.
            session.stop();
            e
        };
        let resp = match tokio::time::timeout(wait, call).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(failed(maybe_written(e, &self.lock.config))),
            Err(_) => {
                let revoked = tokio::time::timeout(self.lock.config.request_timeout, self.lock.client.lease_client().revoke(session.lease_id)).await;
                session.stop();
                return Err(match revoked {
                    Ok(Ok(_)) => LockError::Timeout(opts.wait),
                    _ => LockError::Indeterminate(format!("waited {:?} for the lock; its claim could not be revoked", opts.wait)),
                });
            }
        };
        let claim_key = String::from_utf8_lossy(resp.key()).into_owned();
        // The revision at which the member saw the lock held: it follows every earlier
        // holder's release, so it grows with each grant of the key, as a fencing token must.
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        let handle = LeaseHandle::new(claim_key).with_data(Claim { lease_id: session.lease_id, create_revision: rev });
        Ok(Lease::granted(key, Some(rev as u64), invoked_at, session.valid_until(), handle).with_lost(session.lost.subscribe()))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        // `Unlock` deletes the claim and says nothing of whether it was still there: a lock
        // lost to an expired lease is not reported here, unlike the client recipe's release.
        let locks = self.lock.client.lock_client();
        let id = lease.handle.id.clone();
        let (r, attempts) = retrying(self.lock.config.request_timeout, || {
            let mut locks = locks.clone();
            let id = id.clone();
            async move { locks.unlock(id).await }
        })
        .await;
        r.map(|_| ()).map_err(|e| write_failed(e, attempts, &self.lock.config))
    }

    async fn extend(&self, lease: &mut Lease, _ttl: Duration) -> Result<(), LockError> {
        // The session's keep-alive extends the lease; here we only confirm the claim exists.
        let checked_at = Instant::now();
        let kv = self.lock.client.kv_client();
        let id = lease.handle.id.clone();
        let r = retrying(self.lock.config.request_timeout, || {
            let mut kv = kv.clone();
            let id = id.clone();
            async move { kv.get(id, None).await }
        })
        .await
        .0
        .map_err(|e| definite(e, &self.lock.config))?;
        if r.kvs().is_empty() {
            return Err(LockError::NotHeld(lease.handle.id.clone()));
        }
        let ttl = self.lock.session.lock().await.as_ref().map(|s| s.ttl).unwrap_or_default();
        lease.valid_until = checked_at + ttl;
        Ok(())
    }

    async fn abandon(&self) {
        self.lock.abandon().await
    }

    async fn close(&self) {
        self.lock.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, msg: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg))
    }

    /// etcd's own Unavailable answers come after the request reached a member, which may
    /// have applied it.
    #[test]
    fn unavailable_from_the_server_is_not_definite() {
        for msg in ["etcdserver: request timed out", "etcdserver: leader changed", "etcdserver: no leader", ""] {
            let e = status(tonic::Code::Unavailable, msg);
            assert!(!is_definite(&e), "{msg:?} was taken as definite");
            assert!(matches!(maybe_written(e, &EtcdConfig::new(vec![])), LockError::Indeterminate(_)), "{msg:?}");
        }
    }

    /// Failing to connect at all means the request never left.
    #[test]
    fn failure_to_connect_is_definite() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let from_tonic = tonic::Status::from_error(Box::new(tonic::ConnectError(Box::new(refused))));
        assert_eq!(from_tonic.code(), tonic::Code::Unavailable);
        assert!(is_definite(&etcd_client::Error::GRpcStatus(from_tonic)));
        assert!(is_definite(&status(tonic::Code::Unavailable, "tcp connect error")));
        assert!(is_definite(&status(tonic::Code::Unavailable, "error trying to connect: Connection refused (os error 111)")));
        assert!(matches!(
            maybe_written(status(tonic::Code::Unavailable, "tcp connect error"), &EtcdConfig::new(vec![])),
            LockError::Unavailable(_)
        ));
    }

    /// A write whose last attempt could not connect, after one that timed out on the
    /// server, may still have been applied.
    #[test]
    fn retried_write_after_an_uncertain_attempt_is_indeterminate() {
        let cfg = EtcdConfig::new(vec![]);
        let e = status(tonic::Code::Unavailable, "tcp connect error");
        assert!(matches!(write_failed(e, Attempts { repeated: true, uncertain: true }, &cfg), LockError::Indeterminate(_)));
        let e = status(tonic::Code::Unavailable, "tcp connect error");
        assert!(matches!(write_failed(e, Attempts { repeated: true, uncertain: false }, &cfg), LockError::Unavailable(_)));
    }

    #[test]
    fn key_gone_on_retry_is_ours_only_while_the_lease_lives() {
        let cfg = EtcdConfig::new(vec![]);
        assert_eq!(gone_on_retry(Ok(7), "k/1", 1, &cfg), Ok(()));
        assert_eq!(gone_on_retry(Ok(0), "k/1", 1, &cfg), Ok(()));
        assert!(matches!(gone_on_retry(Ok(-1), "k/1", 1, &cfg), Err(LockError::NotHeld(_))));
        let not_found = Err(status(tonic::Code::NotFound, "etcdserver: requested lease not found"));
        assert!(matches!(gone_on_retry(not_found, "k/1", 1, &cfg), Err(LockError::NotHeld(_))));
        let timed_out = Err(status(tonic::Code::Unavailable, "etcdserver: request timed out"));
        assert!(matches!(gone_on_retry(timed_out, "k/1", 1, &cfg), Err(LockError::Indeterminate(_))));
    }
}
