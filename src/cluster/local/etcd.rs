//! etcd x3: a static-bootstrap cluster on loopback.

use std::path::Path;
use std::time::Duration;

use super::process::Spec;
use super::NodePlan;

pub struct EtcdPorts {
    pub client: u16,
    pub peer: u16,
    /// When peers talk through proxies: the port members are told to reach this one at.
    pub peer_front: Option<u16>,
}

/// One spec per member; `ports[i]` are member i's client and peer ports. Data goes under
/// `dir` (the runtime directory), the log under `logs`.
pub fn specs(bin: &Path, dir: &Path, logs: &Path, ports: &[EtcdPorts], token: &str) -> Vec<NodePlan> {
    let advertised = |p: &EtcdPorts| p.peer_front.unwrap_or(p.peer);
    let cluster: Vec<String> =
        ports.iter().enumerate().map(|(i, p)| format!("etcd-{}=http://127.0.0.1:{}", i + 1, advertised(p))).collect();
    let cluster = cluster.join(",");
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = format!("etcd-{}", i + 1);
            let home = dir.join(&name);
            let client = format!("http://127.0.0.1:{}", p.client);
            let peer = format!("http://127.0.0.1:{}", p.peer);
            let advertise_peer = format!("http://127.0.0.1:{}", advertised(p));
            let spec = Spec::new(&name, bin, logs.join(&name).join("log")).args([
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                home.join("data").display().to_string(),
                "--listen-client-urls".into(),
                client.clone(),
                "--advertise-client-urls".into(),
                client,
                "--listen-peer-urls".into(),
                peer,
                "--initial-advertise-peer-urls".into(),
                advertise_peer,
                "--initial-cluster".into(),
                cluster.clone(),
                "--initial-cluster-token".into(),
                token.to_string(),
                "--initial-cluster-state".into(),
                "new".into(),
                "--logger".into(),
                "zap".into(),
                "--log-outputs".into(),
                "stderr".into(),
            ]);
            NodePlan { spec, client_addr: format!("127.0.0.1:{}", p.client), data: home.join("data"), clock_file: None }
        })
        .collect()
}

/// A client of one member; as `root` when the cluster has auth on. `within` bounds the
/// connection and each request (the run's `--connect-timeout`).
async fn client(ep: &str, password: Option<&str>, within: Duration) -> Result<etcd_client::Client, String> {
    let mut opts = etcd_client::ConnectOptions::new().with_connect_timeout(within).with_timeout(within);
    if let Some(pw) = password {
        opts = opts.with_user("root", pw);
    }
    etcd_client::Client::connect([format!("http://{ep}")], Some(opts)).await.map_err(|e| format!("{ep}: {e}"))
}

/// Turn auth on: a `root` user with `password`, holding the root role.
pub async fn enable_auth(ep: &str, password: &str, within: Duration) -> Result<(), String> {
    let mut c = client(ep, None, within).await?;
    c.user_add("root", password, None).await.map_err(|e| format!("{ep}: add user root: {e}"))?;
    c.user_grant_role("root", "root").await.map_err(|e| format!("{ep}: grant root: {e}"))?;
    c.auth_enable().await.map_err(|e| format!("{ep}: enable auth: {e}"))?;
    Ok(())
}

/// Healthy when every member answers `status` and all name the same leader.
pub async fn healthy(endpoints: &[String], password: Option<&str>, within: Duration) -> Result<(), String> {
    let mut leaders = Vec::new();
    for ep in endpoints {
        let mut c = client(ep, password, within).await?;
        let st = c.status().await.map_err(|e| format!("{ep}: {e}"))?;
        if st.leader() == 0 {
            return Err(format!("{ep}: no leader yet"));
        }
        leaders.push(st.leader());
    }
    leaders.dedup();
    if leaders.len() == 1 {
        Ok(())
    } else {
        Err("members disagree on the leader".into())
    }
}

pub async fn version(ep: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let mut c = client(ep, password, within).await?;
    Ok(c.status().await.map_err(|e| e.to_string())?.version().to_string())
}

/// The name of the member that leads, as `ep` sees it.
pub async fn leader_name(ep: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let mut c = client(ep, password, within).await?;
    let leader = c.status().await.map_err(|e| e.to_string())?.leader();
    if leader == 0 {
        return Err("no leader".into());
    }
    let members = c.member_list().await.map_err(|e| e.to_string())?;
    members
        .members()
        .iter()
        .find(|m| m.id() == leader)
        .map(|m| m.name().to_string())
        .ok_or_else(|| "leader not in member list".into())
}
