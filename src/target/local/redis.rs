//! Redis nodes: one primary for the single-instance lock, five independent ones for Redlock.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::Spec;
use super::NodePlan;

/// No persistence: these are lock servers, and a restart that loses keys is exactly the
/// Redlock hazard scenario S4 is about.
pub fn spec(bin: &Path, dir: &Path, name: &str, port: u16) -> std::io::Result<NodePlan> {
    let home = dir.join(name);
    let data = home.join("data");
    std::fs::create_dir_all(&data)?;
    let spec = Spec::new(name, bin, home.join("log")).args([
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
    Ok(NodePlan { spec, client_addr: format!("127.0.0.1:{port}"), data })
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
