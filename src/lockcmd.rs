//! `dlbench lock`: hold a lock while a command runs, like `etcdctl lock NAME -- CMD`.
//!
//! NAME is used verbatim as the etcd lock name, the Redis key and (with a leading `/` added
//! when missing) the ZooKeeper lock directory, so other clients of the same recipe contend
//! with it. While the command runs the lock is kept: session backends by their keep-alive,
//! TTL backends by extending every third of the TTL. If the lock is lost the command is
//! stopped and dlbench exits 1; otherwise it exits with the command's status.

use std::path::Path;
use std::time::Duration;

use dlbench_core::AcquireOptions;

use crate::connect::{self, Timeouts};
use crate::endpoints::Endpoints;
use crate::kind::BackendKind;

pub struct LockArgs<'a> {
    pub endpoints: &'a Path,
    pub backend: BackendKind,
    pub name: &'a str,
    pub ttl: Duration,
    pub wait: Option<Duration>,
    pub command: &'a [String],
}

pub async fn lock(a: LockArgs<'_>) -> anyhow::Result<i32> {
    let (program, args) = a.command.split_first().ok_or_else(|| anyhow::anyhow!("no command given after --"))?;
    let endpoints = Endpoints::load(a.endpoints)?;
    let backend = connect::connect(a.backend, &endpoints, Timeouts::default(), None)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.backend))?;
    let client = backend.client().await.map_err(|e| anyhow::anyhow!("{}: {e}", a.backend))?;
    // No --wait means wait as long as it takes, as etcdctl does.
    let wait = a.wait.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    let opts = AcquireOptions::default().with_ttl(a.ttl).with_wait(wait).with_retry_interval(Duration::from_millis(50));
    let mut lease = client
        .acquire(a.name, &opts)
        .await
        .map_err(|e| anyhow::anyhow!("cannot acquire {:?} on {}: {e}", a.name, a.backend))?;

    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).env("DLBENCH_LOCK_NAME", a.name).env("DLBENCH_LOCK_BACKEND", a.backend.name());
    if let Some(t) = lease.token {
        cmd.env("DLBENCH_LOCK_TOKEN", t.to_string());
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = client.release(lease).await;
            anyhow::bail!("cannot run {program}: {e}");
        }
    };
    let mut lost = lease.lost.clone();
    let mut refresh = tokio::time::interval((a.ttl / 3).max(Duration::from_millis(100)));
    refresh.tick().await;
    let status = loop {
        tokio::select! {
            s = child.wait() => break Some(s?),
            reason = lost.lost() => {
                eprintln!("dlbench lock: lost {:?}: {reason}; stopping the command", a.name);
                break None;
            }
            _ = refresh.tick() => {
                if let Err(e) = client.extend(&mut lease, a.ttl).await {
                    eprintln!("dlbench lock: could not keep {:?}: {e}; stopping the command", a.name);
                    break None;
                }
            }
            // Ctrl-C reaches the command too (same terminal); we wait for it to finish.
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    let Some(status) = status else {
        if let Some(pid) = child.id() {
            // SAFETY: signalling our own child by the PID we spawned.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        let _ = child.wait().await;
        client.close().await;
        return Ok(1);
    };
    if let Err(e) = client.release(lease).await {
        eprintln!("dlbench lock: release of {:?} failed: {e}", a.name);
    }
    client.close().await;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
