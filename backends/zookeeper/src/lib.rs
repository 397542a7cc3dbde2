//! ZooKeeper lock, node-compatible with Apache Curator's `InterProcessMutex`.
//!
//! Recipe (ZooKeeper "Locks" recipe, as Curator implements it):
//! - each client owns a ZooKeeper session; the lock NAME is a directory (`/NAME` when NAME
//!   has no leading slash), created as a container node when missing;
//! - a claim is an EPHEMERAL_SEQUENTIAL child `_c_<uuid>-lock-<10 digits>` (Curator's
//!   protected mode: after an error on create, the uuid finds our node if the create landed,
//!   so no orphan claim of a live session blocks everyone);
//! - children are sorted by the sequence after the last `lock-`; the lowest holds; a waiter
//!   watches only the next-lower node and looks again when it changes;
//! - a lost session loses the lock: the holder learns it from the session state (expired,
//!   or disconnected for a whole session timeout, as Curator's LOST);
//! - the fencing token is the claim's czxid (global, so it survives the directory being
//!   reaped and recreated, which would restart the sequence);
//! - reentrant, as `InterProcessMutex` is per thread: a client that holds NAME and acquires
//!   it again is granted the same claim with a hold count kept in the client (after one read
//!   that the claim is still its session's), and only the release that brings the count to
//!   zero deletes the node.

mod session;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{
    AcquireOptions, Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl,
    Lease, LeaseHandle, LockError, WaitStyle,
};
use tokio::sync::Mutex;
use zookeeper_client as zk;

use session::ZkSession;

const LOCK_NAME: &str = "lock-";

/// Where and how to reach ZooKeeper.
#[derive(Debug, Clone)]
pub struct ZkConfig {
    /// `host:port` endpoints of the ensemble.
    pub endpoints: Vec<String>,
    /// Bound on establishing a session.
    pub connect_timeout: Duration,
    /// Bound on any single request.
    pub request_timeout: Duration,
    /// `user:password` for digest auth.
    pub digest: Option<String>,
}

impl ZkConfig {
    pub fn new(endpoints: Vec<String>) -> Self {
        ZkConfig {
            endpoints,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            digest: None,
        }
    }
}

/// A ZooKeeper ensemble; each client opens its own session.
pub struct ZkBackend {
    config: ZkConfig,
}

impl ZkBackend {
    /// Check the ensemble answers by opening (and closing) one session.
    pub async fn connect(config: ZkConfig) -> Result<Self, LockError> {
        let probe = ZkSession::open(&config, Duration::from_secs(4), false).await?;
        drop(probe); // not detached: dropping it closes it
        Ok(ZkBackend { config })
    }
}

#[async_trait]
impl Backend for ZkBackend {
    fn name(&self) -> &'static str {
        "zookeeper"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::cp(Expiry::Session, WaitStyle::Watch).with_fifo()
    }
    /// A session opened with the requested timeout and closed: the timeout the server
    /// negotiated (held between its tickTime's minimum and maximum multiples) is what a
    /// holder's session gets.
    async fn granted_ttl(&self, requested: Duration) -> Result<GrantedTtl, LockError> {
        let s = ZkSession::open(&self.config, requested, false).await?;
        let ms = s.timeout.as_millis() as u64;
        s.close().await;
        Ok(GrantedTtl::Session { ms })
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        Ok(Box::new(ZkLock { config: self.config.clone(), session: Mutex::new(None), held: Default::default() }))
    }
    fn describe(&self) -> String {
        format!("zookeeper {}", self.config.endpoints.join(","))
    }
    // The session is the connection and the holder's identity (its ephemeral nodes): every
    // client has its own, whatever mode was asked.
    fn connections(&self) -> Option<Connections> {
        Some(Connections::PerClient)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        let dir = lock_dir(key)?;
        // A short session of its own, closed when done; `sync` first so the server we
        // read from has caught up with the leader.
        let s = ZkSession::open(&self.config, Duration::from_secs(4), false).await?;
        let rt = self.config.request_timeout;
        let listed = async {
            let client = s.client()?;
            match retrying(rt, || client.sync(&dir)).await.0 {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e),
            }
            match retrying(rt, || client.list_children(&dir)).await.0 {
                Ok(children) => Ok(children),
                Err(zk::Error::NoNode) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        }
        .await;
        s.close().await;
        Ok(listed.map_err(|e| map_err(e, false))?.into_iter().map(|c| format!("{dir}/{c}")).collect())
    }
}

struct ZkLock {
    config: ZkConfig,
    session: Mutex<Option<Arc<ZkSession>>>,
    /// The claims this client holds, by node path, with their hold counts (Curator's
    /// `threadData`): the reentrancy of `InterProcessMutex`.
    held: std::sync::Mutex<std::collections::HashMap<String, Held>>,
}

struct Held {
    count: u32,
    czxid: i64,
    session: std::sync::Weak<ZkSession>,
}

/// `/NAME` for a bare NAME; NAME itself when it is already a path.
pub fn lock_dir(name: &str) -> Result<String, LockError> {
    let dir = if name.starts_with('/') { name.to_string() } else { format!("/{name}") };
    if dir.len() < 2 || dir.ends_with('/') || dir.contains("//") {
        return Err(LockError::Config(format!("{name:?} is not a valid ZooKeeper lock path")));
    }
    Ok(dir)
}

/// The sequence after the last `lock-`, Curator's sort key.
fn sequence_of(child: &str) -> Option<i64> {
    let i = child.rfind(LOCK_NAME)?;
    child[i + LOCK_NAME.len()..].parse().ok()
}

fn map_err(e: zk::Error, may_have_written: bool) -> LockError {
    use zk::Error as E;
    match e {
        E::SessionExpired | E::ClientClosed => LockError::SessionLost(e.to_string()),
        E::NoAuth | E::AuthFailed | E::InvalidAcl | E::BadArguments(_) => LockError::Config(e.to_string()),
        E::ConnectionLoss | E::Timeout | E::UnexpectedError(_) | E::Custom(_) if may_have_written => {
            LockError::Indeterminate(e.to_string())
        }
        _ => LockError::Unavailable(e.to_string()),
    }
}

/// Run `f` again while it fails with a connection loss (the client reconnects to another
/// server and the session lives on, so the request can be repeated), until `within` passes.
/// The second value tells whether an attempt was repeated: a delete repeated after a lost
/// reply may find its node already gone.
async fn retrying<T, Fut>(within: Duration, mut f: impl FnMut() -> Fut) -> (Result<T, zk::Error>, bool)
where
    Fut: std::future::Future<Output = Result<T, zk::Error>>,
{
    let deadline = Instant::now() + within;
    let mut repeated = false;
    loop {
        match tokio::time::timeout_at(deadline.into(), f()).await {
            Ok(Err(zk::Error::ConnectionLoss)) if Instant::now() + Duration::from_millis(50) < deadline => {
                repeated = true;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(r) => return (r, repeated),
            Err(_) => return (Err(zk::Error::ConnectionLoss), repeated),
        }
    }
}

impl ZkLock {
    async fn session(&self, ttl: Duration) -> Result<Arc<ZkSession>, LockError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            if !s.lost.is_lost() {
                return Ok(s.clone());
            }
        }
        let s = Arc::new(ZkSession::open(&self.config, ttl, true).await?);
        *guard = Some(s.clone());
        Ok(s)
    }

    /// Create our protected claim; after any error, look for it by its uuid before
    /// deciding it does not exist.
    async fn claim(&self, s: &ZkSession, dir: &str) -> Result<(String, i64), LockError> {
        let prefix = format!("{dir}/_c_{}-{LOCK_NAME}", uuid::Uuid::new_v4());
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let client = s.client().map_err(|e| map_err(e, false))?;
        let rt = self.config.request_timeout;
        let mut made_dir = false;
        loop {
            let r = tokio::time::timeout(rt, client.create(&prefix, b"", &ephemeral)).await;
            match r {
                Ok(Ok((stat, seq))) => return Ok((format!("{prefix}{seq}"), stat.czxid)),
                Ok(Err(zk::Error::NoNode)) if !made_dir => {
                    // The directory is a container node: whether or not a lost create of it
                    // landed, it holds no claim, so any failure here is definite.
                    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
                    match tokio::time::timeout(rt, client.mkdir(dir, &container)).await {
                        Ok(Ok(())) | Ok(Err(zk::Error::NodeExists)) => made_dir = true,
                        Ok(Err(e)) => return Err(map_err(e, false)),
                        Err(_) => return Err(LockError::Unavailable(format!("creating {dir}: no answer within {rt:?}"))),
                    }
                }
                Ok(Err(e @ (zk::Error::NoNode | zk::Error::NoAuth | zk::Error::SessionExpired | zk::Error::NoChildrenForEphemerals))) => {
                    return Err(map_err(e, false))
                }
                other => {
                    let why = match other {
                        Ok(Err(e)) => e.to_string(),
                        _ => "create timed out".to_string(),
                    };
                    return match self.find_own(s, dir, &prefix).await {
                        Ok(Some(found)) => Ok(found),
                        Ok(None) => Err(LockError::Unavailable(format!("create failed ({why}); no claim of ours exists"))),
                        Err(e) => {
                            // Cannot tell whether the claim exists: drop the session so
                            // that, if it does, it goes with it.
                            s.stop();
                            Err(LockError::Indeterminate(format!("create failed ({why}); lookup failed ({e})")))
                        }
                    };
                }
            }
        }
    }

    async fn find_own(&self, s: &ZkSession, dir: &str, prefix: &str) -> Result<Option<(String, i64)>, zk::Error> {
        let name = &prefix[dir.len() + 1..];
        let client = s.client()?;
        // Reads are served by whichever server we are connected to, which may lag behind
        // the leader and not have our create yet: a listing without it would leave an orphan
        // claim of our live session blocking the lock. `sync` makes that server catch up
        // with the leader first.
        retrying(self.config.request_timeout, || client.sync(dir)).await.0?;
        let children = retrying(self.config.request_timeout, || client.list_children(dir)).await.0?;
        let Some(child) = children.into_iter().find(|c| c.starts_with(name)) else { return Ok(None) };
        let path = format!("{dir}/{child}");
        match retrying(self.config.request_timeout, || client.check_stat(&path)).await.0? {
            Some(stat) => Ok(Some((path, stat.czxid))),
            None => Ok(None),
        }
    }

    /// Wait until our claim is the lowest: Ok(Some(when the listing that showed it was
    /// asked for)), the instant from which the session is known alive; Ok(None) if our
    /// claim disappeared.
    async fn wait_turn(&self, s: &ZkSession, dir: &str, me: &str, try_once: bool) -> Result<Option<Instant>, LockError> {
        let my_name = &me[dir.len() + 1..];
        let my_seq = sequence_of(my_name).ok_or_else(|| LockError::Config(format!("bad claim name {my_name}")))?;
        let client = s.client().map_err(|e| map_err(e, false))?;
        let mut lost = s.lost.subscribe();
        loop {
            let asked = Instant::now();
            let children = retrying(self.config.request_timeout, || client.list_children(dir)).await.0.map_err(|e| map_err(e, false))?;
            let mut ours = false;
            let mut predecessor: Option<(i64, String)> = None;
            for c in children {
                let Some(seq) = sequence_of(&c) else { continue };
                if c == my_name {
                    ours = true;
                } else if seq < my_seq && predecessor.as_ref().is_none_or(|(p, _)| seq > *p) {
                    predecessor = Some((seq, c));
                }
            }
            if !ours {
                return Ok(None);
            }
            let Some((_, pred)) = predecessor else { return Ok(Some(asked)) };
            if try_once {
                return Err(LockError::Busy);
            }
            let path = format!("{dir}/{pred}");
            let (stat, watcher) = retrying(self.config.request_timeout, || client.check_and_watch_stat(&path))
                .await
                .0
                .map_err(|e| map_err(e, false))?;
            if stat.is_none() {
                continue;
            }
            tokio::select! {
                reason = lost.lost() => return Err(LockError::SessionLost(reason)),
                _ = watcher.changed() => {}
            }
        }
    }

    /// Delete our claim, or end the session if we cannot.
    async fn withdraw(&self, s: &ZkSession, path: &str) -> Result<(), ()> {
        let Ok(client) = s.client() else { return Err(()) };
        match retrying(self.config.request_timeout, || client.delete(path, None)).await.0 {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            _ => {
                s.stop();
                Err(())
            }
        }
    }
}

impl ZkLock {
    /// A second acquire of a lock this client holds: the same claim, its count raised, once
    /// a read shows the node is still our session's (another client may have deleted it, or
    /// the session may have been lost); otherwise the stale entry goes and the acquire
    /// proceeds as a first one.
    async fn reenter(&self, s: &Arc<ZkSession>, key: &str, dir: &str, invoked_at: Instant) -> Result<Option<Lease>, LockError> {
        let mine: Vec<(String, i64)> = {
            let held = self.held.lock().unwrap();
            held.iter()
                .filter(|(p, h)| p.starts_with(&format!("{dir}/")) && h.session.upgrade().is_some_and(|hs| Arc::ptr_eq(&hs, s)))
                .map(|(p, h)| (p.clone(), h.czxid))
                .collect()
        };
        let Some((path, czxid)) = mine.into_iter().next() else { return Ok(None) };
        let client = s.client().map_err(|e| map_err(e, false))?;
        let stat = retrying(self.config.request_timeout, || client.check_stat(&path)).await.0.map_err(|e| map_err(e, false))?;
        let ours = matches!(stat, Some(st) if st.ephemeral_owner == client.session_id().0 && st.czxid == czxid);
        let mut held = self.held.lock().unwrap();
        if !ours {
            held.remove(&path);
            return Ok(None);
        }
        let Some(h) = held.get_mut(&path) else { return Ok(None) };
        h.count += 1;
        let handle = LeaseHandle::new(path).with_data(Claim { session: Arc::downgrade(s) });
        Ok(Some(Lease::granted(key, Some(czxid as u64), invoked_at, invoked_at + s.timeout, handle).with_lost(s.lost.subscribe())))
    }
}

/// Private lease data.
/// Weak, so a lease kept by its caller does not keep an abandoned session alive.
struct Claim {
    session: std::sync::Weak<ZkSession>,
}

impl Claim {
    fn session(&self) -> Result<Arc<ZkSession>, LockError> {
        self.session.upgrade().ok_or_else(|| LockError::NotHeld("the session that held this lock is gone".into()))
    }
}

#[async_trait]
impl DistLock for ZkLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let dir = lock_dir(key)?;
        let s = self.session(opts.ttl).await?;
        if let Some(lease) = self.reenter(&s, key, &dir, invoked_at).await? {
            return Ok(lease);
        }
        let (path, czxid) = self.claim(&s, &dir).await?;
        let try_once = opts.wait.is_zero();
        let waited = tokio::time::timeout_at((invoked_at + opts.wait.max(self.config.request_timeout)).into(), async {
            if try_once {
                self.wait_turn(&s, &dir, &path, true).await
            } else {
                tokio::time::timeout_at((invoked_at + opts.wait).into(), self.wait_turn(&s, &dir, &path, false))
                    .await
                    .unwrap_or(Err(LockError::Timeout(opts.wait)))
            }
        })
        .await
        .unwrap_or(Err(LockError::Timeout(opts.wait)));
        if let Ok(Some(_)) = waited {
            self.held.lock().unwrap().insert(path.clone(), Held { count: 1, czxid, session: Arc::downgrade(&s) });
        }
        match waited {
            // The session lives a negotiated timeout past the last answer it had, however
            // long the claim queued: measured from the grant, not from the invoke.
            Ok(Some(asked)) => {
                let handle = LeaseHandle::new(path).with_data(Claim { session: Arc::downgrade(&s) });
                Ok(Lease::granted(key, Some(czxid as u64), invoked_at, asked + s.timeout, handle).with_lost(s.lost.subscribe()))
            }
            Ok(None) => Err(LockError::SessionLost("our lock node vanished while waiting: session expired".into())),
            Err(e @ LockError::SessionLost(_)) => Err(e),
            Err(e) => match self.withdraw(&s, &path).await {
                Ok(()) => Err(e),
                // The claim may stay until the session expires, and become the holder
                // meanwhile: nobody can say this acquire had no effect.
                Err(()) => Err(LockError::Indeterminate(format!("{e}; claim withdrawal failed, session ended"))),
            },
        }
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not a ZooKeeper lease".into()))?;
        {
            let mut held = self.held.lock().unwrap();
            match held.get_mut(&lease.handle.id) {
                // An inner hold: the node stays for the outer one.
                Some(h) if h.count > 1 => {
                    h.count -= 1;
                    return Ok(());
                }
                Some(_) => {
                    held.remove(&lease.handle.id);
                }
                None => {}
            }
        }
        let session = claim.session()?;
        let client = session.client().map_err(|e| map_err(e, true))?;
        // Curator's guaranteed delete, within the request timeout: repeat while the
        // connection is lost; a repeat that finds the node gone means an earlier try took.
        let (r, repeated) = retrying(self.config.request_timeout, || client.delete(&lease.handle.id, None)).await;
        match r {
            Ok(()) => Ok(()),
            Err(zk::Error::NoNode) if repeated => Ok(()),
            Err(zk::Error::NoNode) => Err(LockError::NotHeld(format!("{} is gone", lease.handle.id))),
            Err(e) => Err(map_err(e, true)),
        }
    }

    async fn extend(&self, lease: &mut Lease, _ttl: Duration) -> Result<(), LockError> {
        // The session's heartbeats keep the claim; confirm it is still ours.
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not a ZooKeeper lease".into()))?;
        let checked = Instant::now();
        let session = claim.session()?;
        let client = session.client().map_err(|e| map_err(e, false))?;
        let stat = retrying(self.config.request_timeout, || client.check_stat(&lease.handle.id))
            .await
            .0
            .map_err(|e| map_err(e, false))?;
        match stat {
            Some(st) if st.ephemeral_owner == client.session_id().0 => {
                lease.valid_until = checked + session.timeout;
                Ok(())
            }
            _ => Err(LockError::NotHeld(lease.handle.id.clone())),
        }
    }

    async fn abandon(&self) {
        // Drop the session without closing it: the server expires it after its timeout,
        // as it would for a crashed process.
        self.held.lock().unwrap().clear();
        if let Some(s) = self.session.lock().await.take() {
            s.stop();
        }
    }

    async fn close(&self) {
        // End the session on the server now, so its claims go with it at once.
        self.held.lock().unwrap().clear();
        let s = self.session.lock().await.take();
        if let Some(s) = s {
            s.close().await;
        }
    }
}
