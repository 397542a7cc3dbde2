//! Redis failover on compose: the primary and replica swap roles and the name `redis`
//! moves with the primary, then everything goes back as the compose file has it.

use std::time::{Duration, Instant};

use super::docker::docker;
use super::{ComposeTarget, Service};
use crate::kind::BackendKind;

impl ComposeTarget {
    /// Reconnect `s` to its network under exactly `aliases`.
    pub(super) async fn connect_as(&self, s: &Service, aliases: &[&str]) -> Result<(), String> {
        let mut args = vec!["network", "connect"];
        for a in aliases {
            args.extend(["--alias", a]);
        }
        args.extend([s.network.as_str(), s.container.as_str()]);
        docker(&args).await.map(|_| ())
    }

    pub(super) async fn rename(&self, s: &Service, aliases: &[&str]) -> Result<(), String> {
        docker(&["network", "disconnect", &s.network, &s.container]).await?;
        self.connect_as(s, aliases).await
    }

    /// After a failover, the compose file's roles and names again: the `redis` service the
    /// primary under its own name, the replica under its own, replicating from it. The data
    /// written on the promoted replica is not carried back (the run is over).
    pub(super) async fn unswap(&self) -> Result<(), String> {
        if self.primary.lock().unwrap().is_none() {
            return Ok(());
        }
        let (home, replica) = self.redis_pair()?;
        retry_redis_cli(&home.container, "REPLICAOF NO ONE").await?;
        self.rename(&home, &[&home.service]).await?;
        self.rename(&replica, &[&replica.service]).await?;
        retry_redis_cli(&replica.container, &format!("REPLICAOF {} 6379", home.service)).await?;
        *self.primary.lock().unwrap() = None;
        Ok(())
    }

    /// The compose file's Redis primary (`redis`) and replica (`redis-replica`).
    pub(super) fn redis_pair(&self) -> Result<(Service, Service), String> {
        let k = BackendKind::Redis;
        let home = self.of(k).into_iter().find(|s| !s.replica).ok_or("no redis primary")?.clone();
        let replica = self.of(k).into_iter().find(|s| s.replica).ok_or("no redis replica")?.clone();
        Ok((home, replica))
    }

    /// The names a Redis container answers to in a role: the primary is also `redis`
    /// (what clients resolve); the compose file's `redis`, while a replica, is `redis-old`.
    pub(super) fn redis_aliases(&self, s: &Service, primary: bool, home: &Service) -> Vec<String> {
        match (s.index == home.index, primary) {
            (true, true) => vec![home.service.clone()],
            (true, false) => vec![format!("{}-old", home.service)],
            (false, true) => vec![s.service.clone(), home.service.clone()],
            (false, false) => vec![s.service.clone()],
        }
    }
}

pub(super) async fn redis_cli(container: &str, command: &str) -> Result<String, String> {
    let mut args = vec!["exec", container, "redis-cli"];
    args.extend(command.split_whitespace());
    let out = docker(&args).await?;
    if out.starts_with("ERR") || out.contains("(error)") {
        return Err(format!("{container}: redis-cli {command}: {}", out.trim()));
    }
    Ok(out)
}

/// A container just started needs a moment before redis-server listens: retry, bounded.
pub(super) async fn retry_redis_cli(container: &str, command: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match redis_cli(container, command).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
