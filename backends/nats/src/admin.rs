//! What a target asks one NATS server: is JetStream up, who leads the lock bucket, which
//! version. Over the client port, so it works wherever the servers run (local, compose,
//! external) without the monitoring port.

use std::time::Duration;

use async_nats::jetstream;

/// A user and a password, when the servers require them.
pub type Login<'a> = Option<(&'a str, &'a str)>;

/// A client of `ep` alone (servers it learns of are not added), bounded by `within`.
async fn one(ep: &str, login: Login<'_>, within: Duration) -> Result<async_nats::Client, String> {
    let mut opts = async_nats::ConnectOptions::new()
        .connection_timeout(within)
        .request_timeout(Some(within))
        .ignore_discovered_servers()
        .max_reconnects(1)
        .name("dlbench-probe");
    if let Some((user, password)) = login {
        opts = opts.user_and_password(user.to_string(), password.to_string());
    }
    tokio::time::timeout(within, opts.connect(format!("nats://{ep}")))
        .await
        .map_err(|_| format!("{ep}: no answer"))?
        .map_err(|e| format!("{ep}: {e}"))
}

/// Healthy when the server answers a JetStream account request without an error: it has
/// JetStream on and its cluster has a meta leader (a leaderless cluster answers with an
/// error). Read as JSON here: the 0.52 client's typed reply needs fields a 2.9 server lacks.
pub async fn healthy(ep: &str, login: Login<'_>, within: Duration) -> Result<(), String> {
    let c = one(ep, login, within).await?;
    let reply = tokio::time::timeout(within, c.request("$JS.API.INFO", "".into()))
        .await
        .map_err(|_| format!("{ep}: no answer"))?
        .map_err(|e| format!("{ep}: JetStream: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&reply.payload).map_err(|e| format!("{ep}: JetStream info: {e}"))?;
    match v.get("error") {
        None => Ok(()),
        Some(e) => Err(format!("{ep}: JetStream: {e}")),
    }
}

/// The server's version, from the INFO it greets clients with.
pub async fn version(ep: &str, login: Login<'_>, within: Duration) -> Result<String, String> {
    let c = one(ep, login, within).await?;
    Ok(c.server_info().version)
}

/// The name of the server that leads the stream behind `bucket` (where every lock write
/// is ordered), as `ep` reports it; an error when there is no such stream or no leader.
pub async fn bucket_leader(ep: &str, bucket: &str, login: Login<'_>, within: Duration) -> Result<String, String> {
    let c = one(ep, login, within).await?;
    let mut js = jetstream::new(c);
    js.set_timeout(within);
    let mut stream = js.get_stream(format!("KV_{bucket}")).await.map_err(|e| format!("{ep}: stream KV_{bucket}: {e}"))?;
    let info = stream.info().await.map_err(|e| format!("{ep}: stream KV_{bucket}: {e}"))?;
    info.cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("{ep}: stream KV_{bucket} has no leader"))
}
