//! Redis nodes: one primary for the single-instance lock, five independent ones for Redlock.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::Spec;
use super::NodePlan;

/// Persistence as `durability` sets it (`crate::durability::settings`): by default none,
/// as these are lock servers and a restart that loses keys is exactly the Redlock hazard
/// scenario S4 is about; `appendonly yes` with `appendfsync always` or `everysec` at the
/// strict and relaxed levels. `durability`: (option, value) pairs.
/// `replica_of`: the primary's address, for a replica. `shim`: run under the clock shim.
/// `password`: require it (written to a private config file, never on the command line).
/// Data and the config file go under `dir` (the runtime directory, removed at stop), the
/// log under `logs`.
#[allow(clippy::too_many_arguments)]
pub fn spec(
    bin: &Path,
    dir: &Path,
    logs: &Path,
    name: &str,
    port: u16,
    replica_of: Option<&str>,
    shim: Option<&Path>,
    password: Option<&str>,
    durability: &[(&str, &str)],
) -> std::io::Result<NodePlan> {
    let home = dir.join(name);
    let data = home.join("data");
    std::fs::create_dir_all(&data)?;
    let mut spec = Spec::new(name, bin, logs.join(name).join("log"));
    if let Some(pw) = password {
        // The config file must come first on redis-server's command line.
        let conf = home.join("auth.conf");
        write_private(&conf, &format!("requirepass \"{pw}\"\nmasterauth \"{pw}\"\n"))?;
        spec = spec.arg(conf);
    }
    let mut spec = spec.args([
        "--port".to_string(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
    ]);
    for (k, v) in durability {
        spec = spec.args([format!("--{k}"), v.to_string()]);
    }
    let mut spec = spec.args([
        "--dir".to_string(),
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

/// Write a file only its owner can read (secrets).
pub(crate) fn write_private(p: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(p)?;
    f.write_all(text.as_bytes())
}

/// Read one RESP reply (enough of it for status, error and bulk replies).
async fn reply(s: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut buf = vec![0u8; 16384];
    let n = s.read(&mut buf).await?;
    Ok(String::from_utf8_lossy(&buf[..n]).to_string())
}

/// Send one command (inline protocol), authenticating first when a password is given,
/// and return the raw reply. The password never appears in an error.
/// `within` bounds the whole exchange (the run's `--connect-timeout`).
pub async fn command_auth(ep: &str, cmd: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        if let Some(pw) = password {
            let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{pw}\r\n", pw.len());
            s.write_all(auth.as_bytes()).await.map_err(|e| format!("{ep}: {e}"))?;
            let r = reply(&mut s).await.map_err(|e| format!("{ep}: {e}"))?;
            if !r.starts_with("+OK") {
                return Err(format!("{ep}: authentication refused"));
            }
        }
        s.write_all(format!("{cmd}\r\n").as_bytes()).await.map_err(|e| format!("{ep}: {e}"))?;
        reply(&mut s).await.map_err(|e| format!("{ep}: {e}"))
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer to {cmd}"))?
}

pub async fn ping(ep: &str, password: Option<&str>, within: Duration) -> Result<(), String> {
    let r = command_auth(ep, "PING", password, within).await?;
    if r.starts_with("+PONG") {
        Ok(())
    } else {
        Err(format!("{ep}: {}", r.trim()))
    }
}

pub async fn healthy(endpoints: &[String], password: Option<&str>, within: Duration) -> Result<(), String> {
    for ep in endpoints {
        ping(ep, password, within).await?;
    }
    Ok(())
}

/// A replica is healthy once its link to the primary is up.
pub async fn replica_linked(ep: &str, password: Option<&str>, within: Duration) -> Result<(), String> {
    let info = command_auth(ep, "INFO replication", password, within).await?;
    if info.contains("master_link_status:up") || info.contains("role:master") {
        Ok(())
    } else {
        Err(format!("{ep}: replication link not up"))
    }
}

pub async fn version(ep: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let text = command_auth(ep, "INFO server", password, within).await?;
    text.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| format!("{ep}: no redis_version in INFO"))
}

/// One configuration parameter's value (`CONFIG GET name`; the reply is the array
/// `[name, value]`).
pub async fn config_get(ep: &str, name: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let r = command_auth(ep, &format!("CONFIG GET {name}"), password, within).await?;
    if r.starts_with('-') {
        return Err(format!("{ep}: CONFIG GET {name}: {}", r.trim()));
    }
    // *2 $len name $len value: the value is the fifth line.
    r.split("\r\n").nth(4).map(str::to_string).ok_or_else(|| format!("{ep}: CONFIG GET {name}: no value in {:?}", r.trim()))
}

/// Send one command to a Redis server (admin actions of the nemesis).
pub async fn redis_command(ep: &str, cmd: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    let reply = command_auth(ep, cmd, password, within).await?;
    if reply.starts_with('-') {
        return Err(format!("{ep}: {cmd}: {}", reply.trim()));
    }
    Ok(reply)
}
