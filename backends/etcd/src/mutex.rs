//! The client-side recipe: Go's `concurrency.Mutex` over KV transactions and watches (see
//! the crate docs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench_core::{AcquireOptions, DistLock, Lease, LeaseHandle, LockError, LostSignal};
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, GetResponse, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, TxnResponse,
    WatchFilterType, WatchOptions, WatchStream,
};
use tokio::sync::Mutex;

use crate::error::{definite, gone_on_retry, retrying, write_failed, Attempts};
use crate::session::Session;
use crate::EtcdConfig;

/// One logical client: one etcd lease, shared by every lock this client takes.
pub(crate) struct EtcdLock {
    pub(crate) client: Client,
    pub(crate) config: EtcdConfig,
    pub(crate) session: Mutex<Option<Arc<Session>>>,
}

/// What a held etcd lock needs to be released.
pub(crate) struct Claim {
    pub(crate) lease_id: i64,
    pub(crate) create_revision: i64,
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
    /// One transaction, retried within the request timeout (see [`retrying`]).
    async fn txn(&self, txn: Txn) -> (Result<TxnResponse, etcd_client::Error>, Attempts) {
        let kv = self.client.kv_client();
        retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await
    }

    /// Read one key, retried within the request timeout.
    pub(crate) async fn get(&self, key: &str) -> Result<GetResponse, etcd_client::Error> {
        let kv = self.client.kv_client();
        retrying(self.config.request_timeout, || {
            let mut kv = kv.clone();
            let key = key.to_string();
            async move { kv.get(key, None).await }
        })
        .await
        .0
    }

    /// The current session, or a new one when there is none or it was lost.
    pub(crate) async fn session(&self, ttl: Duration) -> Result<Arc<Session>, LockError> {
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
        match self.txn(txn).await.0 {
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
            until_deleted(&mut stream, &mut lost).await?;
        }
    }
}

/// Follow a watch on a predecessor until it reports the key deleted, is cancelled or ends
/// (the caller then looks again); `SessionLost` if our session goes meanwhile.
async fn until_deleted(stream: &mut WatchStream, lost: &mut LostSignal) -> Result<(), LockError> {
    loop {
        tokio::select! {
            reason = lost.lost() => return Err(LockError::SessionLost(reason)),
            msg = stream.message() => match msg {
                Ok(Some(r)) => {
                    if r.canceled() || r.events().iter().any(|ev| ev.event_type() == EventType::Delete) {
                        return Ok(()); // deleted, or the watch was cancelled: look again
                    }
                }
                Ok(None) | Err(_) => return Ok(()), // stream ended: look again
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

/// Our place in a lock's queue, as the claiming transaction found it.
struct Queued {
    /// `<name>/`: every claim on the lock.
    pfx: String,
    /// Our claim's key and create revision.
    my_key: String,
    my_rev: i64,
    /// The oldest claim (lease, create revision): the holder, perhaps us; `None` when none.
    owner: Option<(i64, i64)>,
}

impl EtcdLock {
    /// Put our claim on `key` if absent, in one transaction that also reads the oldest claim.
    async fn enqueue(&self, key: &str, session: &Session) -> Result<Queued, LockError> {
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
        // Retrying is safe: if an earlier attempt created our key, the retry finds it (the
        // else branch) and carries on with it.
        let (resp, attempts) = self.txn(txn).await;
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
        let owner = ops.get(1).and_then(first_kv).map(|kv| (kv.lease(), kv.create_revision()));
        Ok(Queued { pfx, my_key, my_rev, owner })
    }

    /// Wait, until `deadline`, for every older claim to go (and the lock-delay, if asked),
    /// then check our claim survived the wait. On failure the claim is withdrawn.
    async fn wait_turn(&self, key: &str, q: &Queued, opts: &AcquireOptions, deadline: Instant, session: &Session) -> Result<(), LockError> {
        let my_rev = q.my_rev;
        tracing::debug!("etcd acquire {key}: waiting behind rev {my_rev}");
        let wait_and_delay = async {
            let gone = self.wait_predecessors(&q.pfx, my_rev, session, q.owner).await?;
            if !opts.lock_delay.is_zero() {
                self.lock_delay(&gone, opts.lock_delay, session).await?;
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
            return match self.withdraw(session, &q.my_key, my_rev).await {
                Ok(()) => Err(err),
                Err(()) => Err(LockError::Indeterminate(format!("{err}; claim withdrawal failed, session ended"))),
            };
        }
        // Make sure the session did not expire while we waited: the key must still be ours.
        tracing::debug!("etcd acquire {key}: re-reading own key");
        let check = self.get(&q.my_key).await;
        tracing::debug!("etcd acquire {key}: re-read done");
        match check {
            Ok(r) if r.kvs().first().map(|kv| kv.create_revision()) == Some(my_rev) => Ok(()),
            Ok(_) => Err(LockError::SessionLost("lock key gone after waiting: session expired".into())),
            Err(e) => Err(match self.withdraw(session, &q.my_key, my_rev).await {
                Ok(()) => definite(e, &self.config),
                Err(()) => LockError::Indeterminate(format!("{e}; claim withdrawal failed, session ended")),
            }),
        }
    }
}

#[async_trait]
impl DistLock for EtcdLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let deadline = invoked_at + opts.wait;
        tracing::debug!("etcd acquire {key}: session");
        let session = self.session(opts.ttl).await?;
        let q = self.enqueue(key, &session).await?;
        let held_now = q.owner.is_none_or(|(_, rev)| rev == q.my_rev);
        if !held_now {
            if opts.wait.is_zero() {
                return match self.withdraw(&session, &q.my_key, q.my_rev).await {
                    Ok(()) => Err(LockError::Busy),
                    // The claim may stay until the lease expires, and become the holder
                    // meanwhile: nobody can say this acquire had no effect.
                    Err(()) => Err(LockError::Indeterminate("could not withdraw claim; session ended".into())),
                };
            }
            self.wait_turn(key, &q, opts, deadline, &session).await?;
        }
        let handle = LeaseHandle::new(q.my_key).with_data(Claim { lease_id: session.lease_id, create_revision: q.my_rev });
        Ok(Lease::granted(key, Some(q.my_rev as u64), invoked_at, session.valid_until(), handle).with_lost(session.lost.subscribe()))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let claim = lease.handle.data::<Claim>().ok_or_else(|| LockError::Config("not an etcd lease".into()))?;
        // Compare the create revision so a retried release never deletes a newer claim of
        // the same lease (etcd #22082).
        let txn = Txn::new()
            .when([Compare::create_revision(lease.handle.id.as_str(), CompareOp::Equal, claim.create_revision)])
            .and_then([TxnOp::delete(lease.handle.id.as_str(), None)]);
        let (resp, attempts) = self.txn(txn).await;
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
        let r = self.get(&lease.handle.id).await.map_err(|e| definite(e, &self.config))?;
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

