//! `--durability` reaches the servers: the local target started at a level runs with its
//! settings, read back from the servers themselves (Redis `CONFIG GET`, PostgreSQL `SHOW`,
//! MariaDB `@@GLOBAL`) through the same probe that records a compose or external target's.
//! ZooKeeper's `forceSync` is not readable over its protocol (the `conf` word is not on the
//! whitelist), which the probe says rather than guess.

use std::time::Duration;

use dlbench::cluster::found;
use dlbench::cluster::local::{LocalTarget, TargetOptions};
use dlbench::durability::Durability;
use dlbench::kind::BackendKind;

async fn found_settings(t: &LocalTarget, kind: BackendKind) -> Vec<String> {
    found::durability(kind, &t.direct_endpoints(), t.password(), Duration::from_secs(5)).await.settings
}

async fn started(name: &str, kinds: &[BackendKind], level: Durability) -> LocalTarget {
    let dir = crate::common::scratch(name);
    LocalTarget::start(&dir, kinds, TargetOptions { durability: level, ..Default::default() }).await.expect("local servers start")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_servers_run_with_the_levels_settings() {
    let _p = crate::common::heavy();
    let mut t = started("durability-strict", &[BackendKind::Redis, BackendKind::Postgres], Durability::Strict).await;
    let redis = found_settings(&t, BackendKind::Redis).await;
    assert!(redis.contains(&"appendonly=yes".into()) && redis.contains(&"appendfsync=always".into()), "{redis:?}");
    let pg = found_settings(&t, BackendKind::Postgres).await;
    assert!(pg.contains(&"synchronous_commit=on".into()) && pg.contains(&"fsync=on".into()), "{pg:?}");
    t.stop();
    let mut t = started("durability-relaxed", &[BackendKind::Redlock, BackendKind::Postgres, BackendKind::Mariadb], Durability::Relaxed).await;
    let redlock = found_settings(&t, BackendKind::Redlock).await;
    assert!(redlock.contains(&"appendonly=yes".into()) && redlock.contains(&"appendfsync=everysec".into()), "{redlock:?}");
    let pg = found_settings(&t, BackendKind::Postgres).await;
    assert!(pg.contains(&"synchronous_commit=off".into()), "{pg:?}");
    let maria = found_settings(&t, BackendKind::Mariadb).await;
    assert!(maria.contains(&"innodb_flush_log_at_trx_commit=2".into()), "{maria:?}");
    t.stop();
    // The default level is what the local target always ran: nothing on disk for Redis.
    let mut t = started("durability-default", &[BackendKind::Redis], Durability::Default).await;
    let redis = found_settings(&t, BackendKind::Redis).await;
    assert!(redis.contains(&"appendonly=no".into()) && redis.contains(&"save=".into()), "{redis:?}");
    t.stop();
}
