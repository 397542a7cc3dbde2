//! An etcd lease kept alive in the background: the client's session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlbench_core::{LockError, LostSender, LostSignal};
use etcd_client::Client;
use tokio::task::JoinHandle;

use crate::error::{definite, retryable};
use crate::EtcdConfig;

pub(crate) struct Session {
    pub lease_id: i64,
    /// The TTL the server granted (etcd rounds to seconds and enforces a minimum).
    pub ttl: Duration,
    pub lost: LostSender,
    /// When the last keep-alive the server confirmed was sent (at first, the grant's
    /// request): the lease lives at least a TTL past it.
    confirmed: Arc<Mutex<Instant>>,
    task: JoinHandle<()>,
}

/// The whole seconds a lease is asked for: etcd's TTLs are seconds, so a TTL is rounded up
/// (the server may raise it further, to its minimum).
pub fn lease_secs(ttl: Duration) -> i64 {
    ttl.as_secs_f64().ceil().max(1.0) as i64
}

impl Session {
    /// Grant a lease, retrying on endpoints that refuse until the request timeout passes
    /// (etcd-client keeps trying a dead endpoint, so one refusal says little).
    pub async fn start(client: Client, ttl: Duration, config: &EtcdConfig) -> Result<Session, LockError> {
        let secs = lease_secs(ttl);
        let deadline = Instant::now() + config.request_timeout;
        let mut leases = client.lease_client();
        let mut sent;
        let granted = loop {
            sent = Instant::now();
            let attempt = tokio::time::timeout_at(deadline.into(), leases.grant(secs, None)).await;
            match attempt {
                Ok(Ok(g)) => break g,
                // A grant that may have been applied only leaves a lease nobody uses, which
                // expires by itself: any transient failure is worth another try.
                Ok(Err(e)) if retryable(&e) && Instant::now() < deadline => {
                    tracing::debug!("etcd lease grant failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(Err(e)) => return Err(definite(e, config)),
                Err(_) => {
                    return Err(LockError::Unavailable(format!(
                        "etcd at {}: no lease granted within {:?}",
                        config.endpoints.join(","),
                        config.request_timeout
                    )))
                }
            }
        };
        let ttl = Duration::from_secs(granted.ttl().max(1) as u64);
        let (lost, _) = LostSignal::channel();
        let confirmed = Arc::new(Mutex::new(sent));
        let task = tokio::spawn(keep_alive(client, granted.id(), ttl, lost.clone(), confirmed.clone()));
        Ok(Session { lease_id: granted.id(), ttl, lost, confirmed, task })
    }

    /// Until when a holder on this session may believe it holds its lock: a granted TTL past
    /// the last confirmed keep-alive, however long the acquire queued before its grant.
    pub fn valid_until(&self) -> Instant {
        *self.confirmed.lock().unwrap() + self.ttl
    }

    /// Stop keeping the lease alive; it expires on the server after its TTL.
    pub fn stop(&self) {
        self.task.abort();
        self.lost.lose("session stopped by its client");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Refresh the lease every third of its TTL; declare it lost when the server says it has
/// expired or when no refresh has been confirmed for a whole TTL.
async fn keep_alive(client: Client, id: i64, ttl: Duration, lost: LostSender, shared: Arc<Mutex<Instant>>) {
    let interval = (ttl / 3).max(Duration::from_millis(100));
    let mut confirmed = *shared.lock().unwrap();
    let mut leases = client.lease_client();
    loop {
        let give_up = confirmed + ttl;
        let opened = tokio::time::timeout_at(give_up.into(), leases.keep_alive(id)).await;
        let (mut keeper, mut stream) = match opened {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                tracing::debug!("etcd keep-alive stream for {id:x} failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                if Instant::now() >= give_up {
                    lost.lose("no keep-alive confirmed for a whole TTL");
                    return;
                }
                continue;
            }
            Err(_) => {
                lost.lose("no keep-alive confirmed for a whole TTL");
                return;
            }
        };
        loop {
            let sent = Instant::now();
            if keeper.keep_alive().await.is_err() {
                break;
            }
            match tokio::time::timeout_at((confirmed + ttl).into(), stream.message()).await {
                Ok(Ok(Some(r))) if r.ttl() > 0 => {
                    confirmed = sent;
                    *shared.lock().unwrap() = sent;
                }
                Ok(Ok(Some(_))) => {
                    lost.lose("lease expired on the server");
                    return;
                }
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_) => {
                    lost.lose("no keep-alive confirmed for a whole TTL");
                    return;
                }
            }
            tokio::time::sleep(interval).await;
        }
        if Instant::now() >= confirmed + ttl {
            lost.lose("no keep-alive confirmed for a whole TTL");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
