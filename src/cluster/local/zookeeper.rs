//! ZooKeeper x3: an ensemble on loopback, run straight from the Debian package's jars.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::Spec;
use super::NodePlan;

pub struct ZkPorts {
    pub client: u16,
    pub quorum: u16,
    pub election: u16,
    /// When peers talk through proxies: where the others reach this member's quorum and
    /// election ports.
    pub fronts: Option<(u16, u16)>,
}

/// tickTime 500 ms: sessions may be as short as 1 s (2 ticks), which the expiry tests and
/// short-TTL workloads need; maxSessionTimeout is raised so long-hold workloads fit.
/// Each member's own config names its real ports for itself and the proxies for the others,
/// so every member-to-member connection goes through the proxy of its destination.
/// `durability`: (setting, value) lines added as they are (`forceSync`).
fn config(data: &Path, me: usize, all: &[ZkPorts], durability: &[(&str, &str)]) -> String {
    let mine = &all[me];
    let mut cfg = format!(
        "tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\nminSessionTimeout=1000\nmaxSessionTimeout=120000\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr,ruok,mntr\nstandaloneEnabled=false\nreconfigEnabled=false\n",
        data.display(),
        mine.client
    );
    for (k, v) in durability {
        cfg.push_str(&format!("{k}={v}\n"));
    }
    for (i, p) in all.iter().enumerate() {
        let (q, e) = if i == me { (p.quorum, p.election) } else { p.fronts.unwrap_or((p.quorum, p.election)) };
        cfg.push_str(&format!("server.{}=127.0.0.1:{q}:{e}\n", i + 1));
    }
    cfg
}

/// Data and configuration go under `dir` (the runtime directory), logs under `logs`.
pub fn specs(java: &Path, classpath: &str, dir: &Path, logs: &Path, ports: &[ZkPorts], durability: &[(&str, &str)]) -> std::io::Result<Vec<NodePlan>> {
    let mut out = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let name = format!("zookeeper-{}", i + 1);
        let home = dir.join(&name);
        let data = home.join("data");
        std::fs::create_dir_all(&data)?;
        std::fs::write(data.join("myid"), format!("{}\n", i + 1))?;
        let cfg_path = home.join("zoo.cfg");
        std::fs::write(&cfg_path, config(&data, i, ports, durability))?;
        let log_dir = logs.join(&name);
        let spec = Spec::new(&name, java, log_dir.join("log")).args([
            "-Xmx256m".to_string(),
            "-XX:+UseSerialGC".into(),
            "-XX:-UsePerfData".into(),
            "-Dzookeeper.admin.enableServer=false".into(),
            format!("-Dzookeeper.log.dir={}", log_dir.display()),
            "-cp".into(),
            classpath.to_string(),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
            cfg_path.display().to_string(),
        ]);
        out.push(NodePlan { spec, client_addr: format!("127.0.0.1:{}", p.client), data, clock_file: None });
    }
    Ok(out)
}

/// Send a four-letter word and read the whole answer.
/// `within` bounds the whole exchange (the run's `--connect-timeout`).
pub async fn four_letter(ep: &str, word: &str, within: Duration) -> Result<String, String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        s.write_all(word.as_bytes()).await.map_err(|e| format!("{ep}: {e}"))?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.map_err(|e| format!("{ep}: {e}"))?;
        Ok::<_, String>(out)
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer to {word}"))?
}

/// Healthy when every member serves and reports a role (a quorum formed).
pub async fn healthy(endpoints: &[String], within: Duration) -> Result<(), String> {
    let mut leaders = 0;
    for ep in endpoints {
        let out = four_letter(ep, "srvr", within).await?;
        if out.contains("Mode: leader") {
            leaders += 1;
        } else if !out.contains("Mode: follower") {
            return Err(format!("{ep}: not serving yet"));
        }
    }
    if leaders == 1 {
        Ok(())
    } else {
        Err(format!("{leaders} leaders"))
    }
}

pub async fn version(ep: &str, within: Duration) -> Result<String, String> {
    let out = four_letter(ep, "srvr", within).await?;
    let v = out
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .ok_or("no version line")?
        .trim();
    // "3.8.0-${mvngit.commit.id}, built on ..." (Debian's build leaves the placeholder):
    // up to the comma, without an unfilled placeholder.
    let v = v.split(',').next().unwrap_or(v).trim();
    Ok(v.split("-${").next().unwrap_or(v).to_string())
}
