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
}

impl Section {
    pub fn new(endpoints: Vec<String>) -> Self {
        Section { endpoints, ..Default::default() }
    }
}

/// Every backend's servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redlock: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<Section>,
}

impl Endpoints {
    pub fn get(&self, kind: BackendKind) -> Option<&Section> {
        match kind {
            BackendKind::Postgres => self.postgres.as_ref(),
            BackendKind::Redis => self.redis.as_ref(),
            BackendKind::Redlock => self.redlock.as_ref(),
            BackendKind::Zookeeper => self.zookeeper.as_ref(),
            BackendKind::Etcd => self.etcd.as_ref(),
            BackendKind::Memory => None,
        }
    }

    pub fn set(&mut self, kind: BackendKind, section: Section) {
        let slot = match kind {
            BackendKind::Postgres => &mut self.postgres,
            BackendKind::Redis => &mut self.redis,
            BackendKind::Redlock => &mut self.redlock,
            BackendKind::Zookeeper => &mut self.zookeeper,
            BackendKind::Etcd => &mut self.etcd,
            BackendKind::Memory => return,
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
        for kind in BackendKind::REAL {
            if let Some(s) = e.get(kind) {
                if s.endpoints.is_empty() {
                    anyhow::bail!("endpoints file {}: [{kind}] lists no endpoints", path.display());
                }
                for ep in &s.endpoints {
                    crate::util::check_host_port(ep)
                        .map_err(|m| anyhow::anyhow!("endpoints file {}: [{kind}] {m}", path.display()))?;
                }
            }
        }
        Ok(e)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("endpoints serialize")
    }
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
    fn a_typo_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("dlbench-ep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(&p, "[etcd]\nendpoint = [\"127.0.0.1:1\"]\n").unwrap();
        let err = Endpoints::load(&p).unwrap_err().to_string();
        assert!(err.contains("endpoint") && !err.contains('\n'), "{err}");
    }
}
