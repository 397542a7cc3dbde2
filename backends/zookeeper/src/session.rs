//! One ZooKeeper session and the task that turns its state into a lost-lock signal.

use std::time::Duration;

use dlbench_core::{LockError, LostSender, LostSignal};
use tokio::task::JoinHandle;
use zookeeper_client as zk;

use crate::ZkConfig;

pub(crate) struct ZkSession {
    pub client: zk::Client,
    /// The session timeout the server negotiated.
    pub timeout: Duration,
    pub lost: LostSender,
    watcher: JoinHandle<()>,
}

impl ZkSession {
    pub async fn open(config: &ZkConfig, session_timeout: Duration) -> Result<Self, LockError> {
        let cluster = config.endpoints.join(",");
        // Detached: dropping the client does not close the session, so `abandon` behaves
        // like a crash (the server expires the session).
        let mut connector = zk::Client::connector()
            .with_session_timeout(session_timeout)
            .with_detached();
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
        Ok(ZkSession { client, timeout, lost, watcher })
    }

    /// Stop using the session; our locks may survive on the server until it expires it.
    pub fn stop(&self) {
        self.watcher.abort();
        self.lost.lose("session abandoned by its client");
    }

    /// Stop using the session after its claims were released. The client is detached, so
    /// the server ends the session at its timeout rather than at once; by then it owns
    /// nothing.
    pub fn close(&self) {
        self.watcher.abort();
        self.lost.lose("session closed by its client");
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
