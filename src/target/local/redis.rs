//! Redis nodes: one primary for the single-instance lock, five independent ones for Redlock.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::Spec;
use super::NodePlan;

/// No persistence: these are lock servers, and a restart that loses keys is exactly the
/// Redlock hazard scenario S4 is about.
/// `replica_of`: the primary's address, for a replica. `shim`: run under the clock shim.
pub fn spec(bin: &Path, dir: &Path, name: &str, port: u16, replica_of: Option<&str>, shim: Option<&Path>) -> std::io::Result<NodePlan> {
    let home = dir.join(name);
    let data = home.join("data");
    std::fs::create_dir_all(&data)?;
    let mut spec = Spec::new(name, bin, home.join("log")).args([
        "--port".to_string(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        "".into(),
        "--appendonly".into(),
        "no".into(),
        "--dir".into(),
        data.display().to_string(),
        "--daemonize".into(),
        "no".into(),
        "--logfile".into(),
        "".into(),
    ]);
    if let Some(primary) = replica_of {
        let (h, p) = primary.rsplit_once(':').unwrap_or((primary, "6379"));
        spec = spec.args(["--replicaof", h, p]);
    }
    let mut clock_file = None;
    if let Some(shim) = shim {
        let f = home.join("clock-offset-ms");
        crate::nemesis::clock::set_offset(&f, 0)?;
        spec.env.extend(crate::nemesis::clock::env(shim, &f));
        clock_file = Some(f);
    }
    Ok(NodePlan { spec, client_addr: format!("127.0.0.1:{port}"), data, clock_file })
}

pub async fn ping(ep: &str) -> Result<(), String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        s.write_all(b"PING\r\n").await.map_err(|e| format!("{ep}: {e}"))?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await.map_err(|e| format!("{ep}: {e}"))?;
        if buf[..n].starts_with(b"+PONG") {
            Ok(())
        } else {
            Err(format!("{ep}: {}", String::from_utf8_lossy(&buf[..n]).trim()))
        }
    };
    tokio::time::timeout(Duration::from_secs(2), fut).await.map_err(|_| format!("{ep}: no PONG"))?
}

pub async fn healthy(endpoints: &[String]) -> Result<(), String> {
    for ep in endpoints {
        ping(ep).await?;
    }
    Ok(())
}

/// Send one command (inline protocol) and return the raw reply.
pub async fn command(ep: &str, cmd: &str) -> Result<String, String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        s.write_all(format!("{cmd}\r\n").as_bytes()).await.map_err(|e| format!("{ep}: {e}"))?;
        let mut buf = vec![0u8; 16384];
        let n = s.read(&mut buf).await.map_err(|e| format!("{ep}: {e}"))?;
        Ok::<_, String>(String::from_utf8_lossy(&buf[..n]).to_string())
    };
    tokio::time::timeout(Duration::from_secs(2), fut).await.map_err(|_| format!("{ep}: no answer to {cmd}"))?
}

/// A replica is healthy once its link to the primary is up.
pub async fn replica_linked(ep: &str) -> Result<(), String> {
    let info = command(ep, "INFO replication").await?;
    if info.contains("master_link_status:up") || info.contains("role:master") {
        Ok(())
    } else {
        Err(format!("{ep}: replication link not up"))
    }
}

pub async fn version(ep: &str) -> Result<String, String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        s.write_all(b"INFO server\r\n").await.map_err(|e| format!("{ep}: {e}"))?;
        let mut buf = vec![0u8; 8192];
        let n = s.read(&mut buf).await.map_err(|e| format!("{ep}: {e}"))?;
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        text.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| format!("{ep}: no redis_version in INFO"))
    };
    tokio::time::timeout(Duration::from_secs(2), fut).await.map_err(|_| format!("{ep}: no INFO answer"))?
}
