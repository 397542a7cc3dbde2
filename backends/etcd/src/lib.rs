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

mod config;
mod error;
mod mutex;
mod session;
mod v3lock;

use std::time::Duration;

use async_trait::async_trait;
use dlbench_core::{Backend, Capabilities, Connections, DistLock, Expiry, GrantedTtl, LockError, WaitStyle};
use etcd_client::{Client, GetOptions};
use tokio::sync::Mutex;

pub use config::{EtcdConfig, Recipe};
use config::{open, open_bounded};
use error::{definite, retrying};
use mutex::EtcdLock;
use v3lock::V3Lock;

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

