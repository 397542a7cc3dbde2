//! Durability as a plan setting (`run --durability`): three levels, and the server settings
//! behind each level for every server family on the local target, with the one-line label
//! the plan and the report print beside a verdict ("redis (appendfsync everysec)").
//!
//! `default` is what the local target always ran with, so runs without the flag do not
//! change. Settings are written as the server names them (`appendfsync`, `synchronous_commit`,
//! `innodb_flush_log_at_trx_commit`, `forceSync`); each server's file in `cluster/local`
//! puts them on its command line or in its configuration. Families with one level (etcd 3.4,
//! nats-server 2.9.10, memory) say so instead of pretending: every level is the same settings.
//! A basic: it imports only `kind`.

use std::fmt;

use crate::kind::BackendKind;

/// How hard the servers try to keep an acknowledged write across a power loss.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// The local target's settings as they always were (Redis keeps nothing on disk; the
    /// databases and ZooKeeper run with their servers' defaults).
    #[default]
    Default,
    /// Every acknowledged write is on disk first (fsync per write or commit).
    Strict,
    /// Writes reach the disk within about a second, or at the server's next flush.
    Relaxed,
}

impl Durability {
    pub const ALL: [Durability; 3] = [Durability::Default, Durability::Strict, Durability::Relaxed];

    pub fn name(self) -> &'static str {
        match self {
            Durability::Default => "default",
            Durability::Strict => "strict",
            Durability::Relaxed => "relaxed",
        }
    }

    pub fn is_default(&self) -> bool {
        *self == Durability::Default
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The server settings of one level for one design.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub level: Durability,
    /// (name, value) as the server names each setting, in the order they are applied; empty
    /// where the level keeps the server's own defaults.
    pub options: Vec<(&'static str, &'static str)>,
    /// One line for the plan and the report: the design and what its servers do with a write.
    pub label: String,
    /// The family has one level here: every level is these same settings.
    pub one_level: bool,
    /// How strict, to order a family's levels (higher: more writes on disk before the
    /// acknowledgement); equal where two levels are the same settings.
    pub strictness: u8,
}

impl Settings {
    /// "name=value" for each option (what summary.json records).
    pub fn texts(&self) -> Vec<String> {
        self.options.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    pub fn record(&self) -> Recorded {
        Recorded { level: Some(self.level), settings: self.texts(), label: self.label.clone() }
    }
}

/// The durability a backend ran with, as summary.json records it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Recorded {
    /// The level the plan set (local target); absent where the settings were found on
    /// servers dlbench does not start (compose, external).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Durability>,
    /// "name=value" as the server names each setting: set by the level, or read back.
    pub settings: Vec<String>,
    /// The one line shown beside the verdict, e.g. "redis (appendfsync everysec)".
    pub label: String,
}

/// The server settings of `level` for design `kind` on the local target.
pub fn settings(kind: BackendKind, level: Durability) -> Settings {
    use Durability::*;
    let name = kind.name();
    let (options, what, strictness): (Vec<(&'static str, &'static str)>, &str, u8) = match (kind.server(), level) {
        (BackendKind::Redis | BackendKind::Redlock, Default) => {
            (vec![("save", ""), ("appendonly", "no")], "no persistence: appendonly no, save \"\", nothing on disk", 0)
        }
        (BackendKind::Redis | BackendKind::Redlock, Strict) => {
            (vec![("save", ""), ("appendonly", "yes"), ("appendfsync", "always")], "appendonly yes, appendfsync always", 2)
        }
        (BackendKind::Redis | BackendKind::Redlock, Relaxed) => {
            (vec![("save", ""), ("appendonly", "yes"), ("appendfsync", "everysec")], "appendonly yes, appendfsync everysec", 1)
        }
        (BackendKind::Postgres, Default) => (vec![], "synchronous_commit on, fsync on: the server's defaults", 1),
        (BackendKind::Postgres, Strict) => (vec![("synchronous_commit", "on"), ("fsync", "on")], "synchronous_commit on, fsync on", 1),
        (BackendKind::Postgres, Relaxed) => (vec![("synchronous_commit", "off")], "synchronous_commit off", 0),
        (BackendKind::Mariadb, Default) => {
            (vec![], "innodb_flush_log_at_trx_commit 1: the server's default; no binary log", 1)
        }
        (BackendKind::Mariadb, Strict) => (vec![("innodb_flush_log_at_trx_commit", "1")], "innodb_flush_log_at_trx_commit 1; no binary log", 1),
        (BackendKind::Mariadb, Relaxed) => (vec![("innodb_flush_log_at_trx_commit", "2")], "innodb_flush_log_at_trx_commit 2", 0),
        (BackendKind::Zookeeper, Default) => (vec![], "forceSync yes: the server's default", 1),
        (BackendKind::Zookeeper, Strict) => (vec![("forceSync", "yes")], "forceSync yes", 1),
        (BackendKind::Zookeeper, Relaxed) => (vec![("forceSync", "no")], "forceSync no", 0),
        (BackendKind::Etcd, _) => (vec![], "fsync on every commit; one level: etcd 3.4 has no --unsafe-no-fsync", 1),
        (BackendKind::Nats, _) => {
            (vec![], "JetStream's own periodic flush; one level: nats-server 2.9.10 refuses sync_interval", 0)
        }
        (_, _) => (vec![], "in-process, nothing on disk; one level", 0),
    };
    let one_level = matches!(kind.server(), BackendKind::Etcd | BackendKind::Nats | BackendKind::Memory);
    Settings { level, options, label: format!("{name} ({what})"), one_level, strictness }
}

/// The name a backend's results go under: the design's, or `design@level` when a run
/// measures several levels (each level is then a backend of its own in summary.json).
pub fn keyed(design: &str, level: Option<Durability>) -> String {
    match level {
        Some(l) => format!("{design}@{l}"),
        None => design.to_string(),
    }
}

/// The design a result name is of: `redis` for `redis@strict` and for `redis`.
pub fn design_of(name: &str) -> &str {
    name.split_once('@').map_or(name, |(d, _)| d)
}

/// `--durability` as given: one level or several, each once, in the order given.
pub fn parse_levels(s: &str) -> Result<Vec<Durability>, String> {
    use clap::ValueEnum;
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let l = Durability::from_str(part, true).map_err(|_| format!("--durability {part}: not a level (default, strict, relaxed)"))?;
        if out.contains(&l) {
            return Err(format!("--durability names {l} twice"));
        }
        out.push(l);
    }
    if out.is_empty() {
        return Err("--durability names no level (default, strict, relaxed)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendKind as K;
    use Durability::*;

    fn opts(k: BackendKind, l: Durability) -> Vec<String> {
        settings(k, l).texts()
    }

    #[test]
    fn every_redis_protocol_design_gets_the_aof_settings() {
        for k in [K::Redis, K::Redisson, K::Redlock] {
            assert_eq!(opts(k, Default), ["save=", "appendonly=no"], "{k}");
            assert_eq!(opts(k, Strict), ["save=", "appendonly=yes", "appendfsync=always"], "{k}");
            assert_eq!(opts(k, Relaxed), ["save=", "appendonly=yes", "appendfsync=everysec"], "{k}");
            assert!(settings(k, Default).label.contains("nothing on disk"), "{k}");
            assert!(!settings(k, Strict).one_level);
        }
        assert_eq!(settings(K::Redis, Relaxed).label, "redis (appendonly yes, appendfsync everysec)");
    }

    #[test]
    fn databases_and_zookeeper_map_to_their_commit_settings() {
        for k in [K::Postgres, K::PgAdvisory, K::PgAdvisoryXact] {
            assert_eq!(opts(k, Default), Vec::<String>::new(), "{k}: default keeps the server's own");
            assert_eq!(opts(k, Strict), ["synchronous_commit=on", "fsync=on"]);
            assert_eq!(opts(k, Relaxed), ["synchronous_commit=off"]);
        }
        for k in [K::Mariadb, K::MariadbGetLock] {
            assert_eq!(opts(k, Default), Vec::<String>::new());
            assert_eq!(opts(k, Strict), ["innodb_flush_log_at_trx_commit=1"]);
            assert_eq!(opts(k, Relaxed), ["innodb_flush_log_at_trx_commit=2"]);
        }
        assert_eq!(opts(K::Zookeeper, Default), Vec::<String>::new());
        assert_eq!(opts(K::Zookeeper, Strict), ["forceSync=yes"]);
        assert_eq!(opts(K::Zookeeper, Relaxed), ["forceSync=no"]);
        // Relaxed is the least strict wherever the family has levels.
        for k in [K::Redis, K::Postgres, K::Mariadb, K::Zookeeper] {
            assert!(settings(k, Relaxed).strictness < settings(k, Strict).strictness, "{k}");
        }
    }

    #[test]
    fn etcd_and_nats_have_one_level_and_say_so() {
        for k in [K::Etcd, K::EtcdV3lock, K::Nats] {
            let all: Vec<Settings> = Durability::ALL.iter().map(|&l| settings(k, l)).collect();
            assert!(all.iter().all(|s| s.one_level && s.options == all[0].options && s.label == all[0].label), "{k}");
            assert!(all[0].label.contains("one level"), "{k}: {}", all[0].label);
        }
        assert!(!settings(K::Zookeeper, Relaxed).one_level);
    }

    #[test]
    fn keyed_names_round_trip_to_their_design() {
        assert_eq!(keyed("redis", Some(Strict)), "redis@strict");
        assert_eq!(keyed("redis", None), "redis");
        assert_eq!(design_of("pg-advisory@relaxed"), "pg-advisory");
        assert_eq!(design_of("etcd"), "etcd");
    }

    #[test]
    fn levels_parse_once_each() {
        assert_eq!(parse_levels("relaxed,strict").unwrap(), vec![Relaxed, Strict]);
        assert_eq!(parse_levels("default").unwrap(), vec![Default]);
        assert!(parse_levels("strict,strict").is_err());
        assert!(parse_levels("fast").unwrap_err().contains("not a level"));
        assert!(parse_levels("").is_err());
    }
}
