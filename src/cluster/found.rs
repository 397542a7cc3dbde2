//! The durability settings a compose or external target's servers run with, read back from
//! them (dlbench does not set them there): Redis `CONFIG GET`, PostgreSQL `SHOW`, MariaDB
//! `@@GLOBAL`, ZooKeeper's `conf` four-letter word where it is allowed. etcd 3.4 and
//! nats-server 2.9.10 have one level, so nothing to read. A setting that cannot be read is
//! recorded as "not readable" with the reason, never guessed.

use std::time::Duration;

use crate::cluster::local::{mariadb, postgres, redis, zookeeper};
use crate::durability::{self, Durability, Recorded};
use crate::endpoints::Endpoints;
use crate::kind::BackendKind;

/// What design `kind`'s servers (the first node of its section) run with.
pub async fn durability(kind: BackendKind, e: &Endpoints, password: Option<&str>, within: Duration) -> Recorded {
    let name = kind.name();
    let Some(section) = e.get(kind.server()) else {
        return Recorded { level: None, settings: vec![], label: format!("{name} (no endpoints)") };
    };
    if section.tls.is_some() {
        return Recorded { level: None, settings: vec![], label: format!("{name} (not readable: the probes do not speak TLS)") };
    }
    let ep = section.endpoints.first().cloned().unwrap_or_default();
    let read: Vec<(&str, Result<String, String>)> = match kind.server() {
        BackendKind::Redis | BackendKind::Redlock => {
            let mut v = Vec::new();
            for s in ["appendonly", "appendfsync", "save"] {
                v.push((s, redis::config_get(&ep, s, password, within).await));
            }
            v
        }
        BackendKind::Postgres => {
            let mut v = Vec::new();
            for s in ["synchronous_commit", "fsync"] {
                v.push((s, postgres::show(&ep, password, s, within).await));
            }
            v
        }
        BackendKind::Mariadb => {
            let user = section.user.clone().unwrap_or_else(|| mariadb::USER.to_string());
            let mut v = Vec::new();
            for s in ["innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin"] {
                v.push((s, mariadb::variable(&ep, &user, password, s, within).await));
            }
            v
        }
        BackendKind::Zookeeper => vec![("forceSync", zk_force_sync(&ep, within).await)],
        // One level: the label says what it is.
        _ => return Recorded { level: None, ..durability::settings(kind, Durability::Default).record() },
    };
    let settings: Vec<String> = read.iter().filter_map(|(k, v)| v.as_ref().ok().map(|v| format!("{k}={v}"))).collect();
    let words: Vec<String> = read
        .iter()
        .map(|(k, v)| match v {
            Ok(v) => format!("{k} {}", if v.is_empty() { "\"\"" } else { v }),
            Err(e) => format!("{k} not readable: {e}"),
        })
        .collect();
    Recorded { level: None, settings, label: format!("{name} ({}; found on the servers)", words.join(", ")) }
}

/// ZooKeeper's `forceSync`, if its `conf` word is allowed and shows it.
async fn zk_force_sync(ep: &str, within: Duration) -> Result<String, String> {
    let out = zookeeper::four_letter(ep, "conf", within).await?;
    if out.contains("not in the whitelist") || out.contains("not executed") {
        return Err("the conf four-letter word is not allowed (4lw.commands.whitelist)".into());
    }
    out.lines()
        .find_map(|l| l.trim().strip_prefix("forceSync=").map(str::to_string))
        .ok_or_else(|| "conf does not show forceSync".into())
}
