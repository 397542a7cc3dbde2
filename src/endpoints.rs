//! The endpoints file: where each backend's servers are.
//!
//! `dlbench up --endpoints FILE` writes it; `dlbench lock` and (later) the `external`
//! target read it. One TOML section per backend, each listing `host:port` endpoints:
//!
//! ```toml
//! [etcd]
//! endpoints = ["127.0.0.1:23791", "127.0.0.1:23792", "127.0.0.1:23793"]
//!
//! [postgres]
//! endpoints = ["127.0.0.1:25432"]
//! user = "postgres"
//! database = "postgres"
//! ```
//!
//! Secrets never appear in the file: a section names the environment variable that holds a
//! password (`password_env`), and dlbench reads it at connect time.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::kind::BackendKind;

/// One backend's servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub endpoints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Name of the environment variable holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// TLS for etcd, Redis and PostgreSQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
    /// Commands the nemesis may run against an external cluster, one per endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultCommands>,
}

/// TLS material, as file paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// CA certificate (PEM) to verify the servers with.
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate and key (PEM), for servers that ask for one.
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

/// Shell commands (run with `sh -c`) that inject a fault on one node and undo it, each list
/// holding one command per endpoint, in the order of `endpoints`. A fault is available only
/// with its inverse: `kill` with `start`, `pause` with `resume`, `isolate` with `heal`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultCommands {
    #[serde(default)]
    pub kill: Vec<String>,
    #[serde(default)]
    pub start: Vec<String>,
    #[serde(default)]
    pub pause: Vec<String>,
    #[serde(default)]
    pub resume: Vec<String>,
    #[serde(default)]
    pub isolate: Vec<String>,
    #[serde(default)]
    pub heal: Vec<String>,
}

impl Section {
    pub fn new(endpoints: Vec<String>) -> Self {
        Section { endpoints, ..Default::default() }
    }

    /// `kind`'s section on servers dlbench set up itself (the local target, the compose
    /// services): the login they were created with, where the family has one.
    pub fn own_servers(kind: BackendKind, endpoints: Vec<String>) -> Self {
        let login = match kind.server() {
            BackendKind::Postgres => Some(("postgres", "postgres")),
            BackendKind::Mariadb => Some((crate::cluster::local::mariadb::USER, crate::cluster::local::mariadb::DATABASE)),
            _ => None,
        };
        let (user, database) = login.map(|(u, d)| (Some(u.to_string()), Some(d.to_string()))).unwrap_or_default();
        Section { endpoints, user, database, ..Default::default() }
    }
}

/// Every backend's servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mariadb: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redlock: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats: Option<Section>,
}

impl Endpoints {
    /// The section of `kind`'s server family (the advisory designs read `[postgres]`,
    /// `mariadb-get-lock` reads `[mariadb]`).
    pub fn get(&self, kind: BackendKind) -> Option<&Section> {
        match kind.server() {
            BackendKind::Postgres => self.postgres.as_ref(),
            BackendKind::Mariadb => self.mariadb.as_ref(),
            BackendKind::Redis => self.redis.as_ref(),
            BackendKind::Redlock => self.redlock.as_ref(),
            BackendKind::Zookeeper => self.zookeeper.as_ref(),
            BackendKind::Etcd => self.etcd.as_ref(),
            BackendKind::Nats => self.nats.as_ref(),
            _ => None,
        }
    }

    pub fn set(&mut self, kind: BackendKind, section: Section) {
        let slot = match kind.server() {
            BackendKind::Postgres => &mut self.postgres,
            BackendKind::Mariadb => &mut self.mariadb,
            BackendKind::Redis => &mut self.redis,
            BackendKind::Redlock => &mut self.redlock,
            BackendKind::Zookeeper => &mut self.zookeeper,
            BackendKind::Etcd => &mut self.etcd,
            BackendKind::Nats => &mut self.nats,
            _ => return,
        };
        *slot = Some(section);
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read endpoints file {}: {e}", path.display()))?;
        let e: Endpoints = toml::from_str(&text).map_err(|e| {
            let msg = e.message().replace('\n', " ");
            anyhow::anyhow!("endpoints file {} is not valid: {msg}", path.display())
        })?;
        for kind in BackendKind::SERVERS {
            if let Some(s) = e.get(kind) {
                if s.endpoints.is_empty() {
                    anyhow::bail!("endpoints file {}: [{kind}] lists no endpoints", path.display());
                }
                for ep in &s.endpoints {
                    crate::util::check_host_port(ep)
                        .map_err(|m| anyhow::anyhow!("endpoints file {}: [{kind}] {m}", path.display()))?;
                }
                if let Some(f) = &s.faults {
                    let n = s.endpoints.len();
                    for (name, list) in [("kill", &f.kill), ("start", &f.start), ("pause", &f.pause), ("resume", &f.resume), ("isolate", &f.isolate), ("heal", &f.heal)] {
                        if !list.is_empty() && list.len() != n {
                            anyhow::bail!("endpoints file {}: [{kind}.faults] {name} has {} command(s) for {n} endpoint(s): give one per endpoint", path.display(), list.len());
                        }
                    }
                    for (a, b) in [("kill", "start"), ("pause", "resume"), ("isolate", "heal")] {
                        let has = |x: &str| match x {
                            "kill" => !f.kill.is_empty(),
                            "start" => !f.start.is_empty(),
                            "pause" => !f.pause.is_empty(),
                            "resume" => !f.resume.is_empty(),
                            "isolate" => !f.isolate.is_empty(),
                            _ => !f.heal.is_empty(),
                        };
                        if has(a) != has(b) {
                            anyhow::bail!("endpoints file {}: [{kind}.faults] {a} needs {b} (every fault has its inverse)", path.display());
                        }
                    }
                }
            }
        }
        Ok(e)
    }

    /// Every endpoint is on loopback (127.0.0.0/8, localhost, ::1).
    pub fn non_loopback(&self) -> Vec<String> {
        let mut out = Vec::new();
        for k in BackendKind::SERVERS {
            for ep in self.get(k).map(|s| s.endpoints.as_slice()).unwrap_or_default() {
                let host = ep.rsplit_once(':').map(|(h, _)| h).unwrap_or(ep).trim_matches(['[', ']']);
                if !is_loopback(host) {
                    out.push(format!("[{k}] {ep}"));
                }
            }
        }
        out
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("endpoints serialize")
    }
}

/// A host (no port, no brackets) on loopback: `localhost`, 127.0.0.0/8 or ::1.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_toml() {
        let mut e = Endpoints::default();
        e.set(BackendKind::Etcd, Section::new(vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()]));
        e.set(BackendKind::Postgres, Section { user: Some("postgres".into()), ..Section::new(vec!["127.0.0.1:3".into()]) });
        let back: Endpoints = toml::from_str(&e.to_toml()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn fault_commands_need_one_per_endpoint_and_their_inverse() {
        let dir = std::env::temp_dir().join(format!("dlbench-ep2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.toml");
        std::fs::write(&p, "[redis]\nendpoints = [\"127.0.0.1:1\"]\n[redis.faults]\nkill = [\"true\"]\n").unwrap();
        let e = Endpoints::load(&p).unwrap_err().to_string();
        assert!(e.contains("kill needs start"), "{e}");
        std::fs::write(&p, "[redis]\nendpoints = [\"127.0.0.1:1\"]\n[redis.faults]\nkill = [\"a\", \"b\"]\nstart = [\"c\"]\n").unwrap();
        let e = Endpoints::load(&p).unwrap_err().to_string();
        assert!(e.contains("one per endpoint"), "{e}");
        std::fs::write(&p, "[redis]\nendpoints = [\"10.1.2.3:6379\"]\n").unwrap();
        assert_eq!(Endpoints::load(&p).unwrap().non_loopback(), vec!["[redis] 10.1.2.3:6379".to_string()]);
    }

    #[test]
    fn a_typo_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("dlbench-ep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(&p, "[etcd]\nendpoint = [\"127.0.0.1:1\"]\n").unwrap();
        let err = Endpoints::load(&p).unwrap_err().to_string();
        assert!(err.contains("endpoint") && !err.contains('\n'), "{err}");
    }
}
