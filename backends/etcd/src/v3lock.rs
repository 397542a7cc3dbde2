//! The server-side recipe: etcd's v3lock service (`Lock` / `Unlock` RPCs).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{AcquireOptions, DistLock, Lease, LeaseHandle, LockError};
use etcd_client::Client;

use crate::error::{definite, maybe_written, retrying, write_failed};
use crate::mutex::{Claim, EtcdLock};

/// The server-side recipe: one `Lock` RPC waits in the member for the lock (the member runs
/// `concurrency.Mutex` on our lease) and one `Unlock` RPC deletes the claim. The session and
/// its lease are the client recipe's.
pub(crate) struct V3Lock {
    pub(crate) lock: EtcdLock,
    /// The channel `Lock` calls wait on (no request timeout).
    pub(crate) waiting: Client,
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
        let r = self.lock.get(&lease.handle.id).await.map_err(|e| definite(e, &self.lock.config))?;
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

