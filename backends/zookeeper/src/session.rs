//! One ZooKeeper session and the task that turns its state into a lost-lock signal.

use std::sync::Mutex;
use std::time::Duration;

use dlbench_core::{LockError, LostSender, LostSignal};
use tokio::task::JoinHandle;
use zookeeper_client as zk;

use crate::ZkConfig;

pub(crate) struct ZkSession {
    /// Our handle on the session; taken out when the session is stopped or closed, so that
    /// its heartbeats end even while a lease still points at this session.
    client: Mutex<Option<zk::Client>>,
    /// Whether dropping the client leaves the session to expire (a lock client) or closes it
    /// (a short-lived helper session).
    detached: bool,
    /// The session timeout the server negotiated.
    pub timeout: Duration,
    pub lost: LostSender,
    watcher: JoinHandle<()>,
    /// What closing needs: the ensemble, credentials and the bound on one request.
    cluster: String,
    digest: Option<String>,
    request_timeout: Duration,
}

impl ZkSession {
    /// Open a session. A `detached` one outlives its client: dropping it stops heartbeats
    /// without telling the server, so `abandon` behaves like a crash (the server expires the
    /// session); [`ZkSession::close`] ends it explicitly. A session that is not detached
    /// closes when its client is dropped.
    pub async fn open(config: &ZkConfig, session_timeout: Duration, detached: bool) -> Result<Self, LockError> {
        let cluster = config.endpoints.join(",");
        let mut connector = zk::Client::connector().with_session_timeout(session_timeout);
        if detached {
            connector = connector.with_detached();
        }
        if let Some(d) = &config.digest {
            connector = connector.with_auth("digest", d.as_bytes());
        }
        let client = tokio::time::timeout(config.connect_timeout, connector.connect(&cluster))
            .await
            .map_err(|_| LockError::Unavailable(format!("zookeeper at {cluster}: no session within {:?}", config.connect_timeout)))?
            .map_err(|e| match e {
                zk::Error::AuthFailed => LockError::Config(format!("zookeeper at {cluster}: authentication failed")),
                e => LockError::Unavailable(format!("zookeeper at {cluster}: {e}")),
            })?;
        let timeout = client.session_timeout();
        let (lost, _) = LostSignal::channel();
        let watcher = tokio::spawn(watch_state(client.state_watcher(), timeout, lost.clone()));
        Ok(ZkSession {
            client: Mutex::new(Some(client)),
            detached,
            timeout,
            lost,
            watcher,
            cluster,
            digest: config.digest.clone(),
            request_timeout: config.request_timeout,
        })
    }

    /// The client, while the session is in use; `ClientClosed` once stopped or closed.
    pub fn client(&self) -> Result<zk::Client, zk::Error> {
        self.client.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or(zk::Error::ClientClosed)
    }

    fn take_client(&self) -> Option<zk::Client> {
        self.client.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Stop using the session without ending it: heartbeats stop (once requests in flight
    /// are done), and our locks survive on the server until it expires the session.
    pub fn stop(&self) {
        self.watcher.abort();
        self.lost.lose("session abandoned by its client");
        drop(self.take_client());
    }

    /// End the session on the server now, which deletes its ephemeral claims, within the
    /// request timeout (after that the session is left to expire).
    ///
    /// zookeeper-client sends CloseSession only when the last handle of a client that is not
    /// detached is dropped, and has no explicit close. So a detached session is closed by
    /// letting its client go, reattaching to the same session with a client that is not
    /// detached, and dropping that one.
    pub async fn close(&self) {
        self.watcher.abort();
        self.lost.lose("session closed by its client");
        let Some(client) = self.take_client() else { return };
        let session = client.session().clone();
        let mut old = client.state_watcher();
        drop(client);
        let detached = self.detached;
        let ended = tokio::time::timeout(self.request_timeout, async {
            // Wait until the old client has let go of its connection: two clients on one
            // session would take it from each other.
            terminated(&mut old).await;
            if !detached {
                return; // dropping it sent CloseSession, and the server answered
            }
            let mut connector = zk::Client::connector().with_session(session).with_session_timeout(self.timeout);
            if let Some(d) = &self.digest {
                connector = connector.with_auth("digest", d.as_bytes());
            }
            match connector.connect(&self.cluster).await {
                Ok(closer) => {
                    let mut st = closer.state_watcher();
                    drop(closer); // the last handle of an attached client: CloseSession
                    terminated(&mut st).await;
                }
                // Expired already: nothing left to end.
                Err(e) => tracing::debug!("zookeeper: reattaching to close the session: {e}"),
            }
        })
        .await;
        if ended.is_err() {
            tracing::debug!("zookeeper: session not closed within {:?}; it will expire", self.request_timeout);
        }
    }
}

/// Wait for a terminal state (closed, expired, auth failed).
async fn terminated(states: &mut zk::StateWatcher) {
    while !states.peek_state().is_terminated() {
        states.changed().await;
    }
}

impl Drop for ZkSession {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Curator's LOST: expired, closed, or disconnected for a whole session timeout (after which
/// the ensemble has expired the session even if we have not heard so).
async fn watch_state(mut states: zk::StateWatcher, timeout: Duration, lost: LostSender) {
    let mut disconnected_since: Option<tokio::time::Instant> = None;
    loop {
        let state = match disconnected_since {
            None => states.changed().await,
            Some(since) => match tokio::time::timeout_at(since + timeout, states.changed()).await {
                Ok(s) => s,
                Err(_) => {
                    lost.lose("disconnected for a whole session timeout");
                    return;
                }
            },
        };
        match state {
            zk::SessionState::Expired => return lost.lose("session expired"),
            zk::SessionState::Closed => return lost.lose("session closed"),
            zk::SessionState::AuthFailed => return lost.lose("authentication failed"),
            zk::SessionState::Disconnected => {
                disconnected_since.get_or_insert_with(tokio::time::Instant::now);
            }
            _ => disconnected_since = None,
        }
    }
}
