//! Where and how to reach etcd, and opening a channel to it.

use std::time::Duration;

use dlbench_core::LockError;
use etcd_client::{Client, ConnectOptions};

use crate::error::definite;

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

/// Open a channel to the cluster and prove an etcd answers on it, within the connect bound.
pub(crate) async fn open(config: &EtcdConfig) -> Result<Client, LockError> {
    open_bounded(config, Some(config.request_timeout)).await
}

/// As [`open`]; `request_timeout` bounds every call on the channel (none: the caller bounds
/// its own calls, as a `Lock` RPC that waits out a contended lock must be).
pub(crate) async fn open_bounded(config: &EtcdConfig, request_timeout: Option<Duration>) -> Result<Client, LockError> {
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

