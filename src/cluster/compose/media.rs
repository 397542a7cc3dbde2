//! Where each compose server keeps its data, and timing fsync inside its container: for
//! `cluster::medium`, which records what the container layer costs.

use super::docker::docker;
use super::ComposeTarget;
use crate::kind::BackendKind;
use crate::summary::medium::MediumKind;

/// One server family's data directory in its first container, and what holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct DataDir {
    pub family: BackendKind,
    pub container: String,
    pub path: String,
    pub kind: MediumKind,
}

/// The data directory the family's image writes to (docker/*/entrypoint.sh, the compose
/// command's `--data-dir` / `--dir` when it names one).
fn data_path(family: BackendKind, c: &serde_json::Value) -> String {
    let args: Vec<&str> = ["Entrypoint", "Cmd"].iter().flat_map(|k| c["Config"][*k].as_array().into_iter().flatten()).filter_map(|a| a.as_str()).collect();
    let after = |flag: &str| args.windows(2).find(|w| w[0] == flag).map(|w| w[1].to_string());
    match family {
        BackendKind::Etcd => after("--data-dir").unwrap_or_else(|| "/var/lib/etcd/data".into()),
        BackendKind::Zookeeper => "/var/lib/zookeeper/data".into(),
        BackendKind::Postgres => "/var/lib/postgresql/dlbench".into(),
        BackendKind::Mariadb => "/var/lib/mysql-dlbench".into(),
        // Redis writes to its working directory unless told otherwise (and these run
        // without persistence: nothing of a lock reaches the disk).
        _ => after("--dir").unwrap_or_else(|| c["Config"]["WorkingDir"].as_str().filter(|w| !w.is_empty()).unwrap_or("/").to_string()),
    }
}

/// What holds `path` in the container: the mount whose destination is its longest prefix.
pub fn medium_of(path: &str, mounts: &serde_json::Value) -> MediumKind {
    let under = |dest: &str| path == dest || path.starts_with(&format!("{}/", dest.trim_end_matches('/'))) || dest == "/";
    let best = mounts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["Destination"].as_str().is_some_and(under))
        .max_by_key(|m| m["Destination"].as_str().map(str::len).unwrap_or(0));
    match best.and_then(|m| m["Type"].as_str()) {
        Some("volume") => MediumKind::Volume,
        Some("bind") => MediumKind::Host,
        _ => MediumKind::ContainerLayer,
    }
}

impl ComposeTarget {
    /// Each server family's data directory (in its first container) and its medium.
    pub async fn data_dirs(&self) -> Result<Vec<DataDir>, String> {
        let mut firsts: Vec<(BackendKind, String)> = Vec::new();
        for s in self.services.iter().filter(|s| !s.replica) {
            if !firsts.iter().any(|(k, _)| *k == s.backend) {
                firsts.push((s.backend, s.container.clone()));
            }
        }
        let mut args = vec!["inspect"];
        args.extend(firsts.iter().map(|(_, c)| c.as_str()));
        let all: Vec<serde_json::Value> = serde_json::from_str(&docker(&args).await?).map_err(|e| format!("docker inspect: {e}"))?;
        Ok(firsts
            .iter()
            .zip(&all)
            .map(|((family, container), c)| {
                let path = data_path(*family, c);
                DataDir { family: *family, container: container.clone(), kind: medium_of(&path, &c["Mounts"]), path }
            })
            .collect())
    }

    /// Run `script` in `container` (sh), its stdout.
    pub async fn exec_sh(&self, container: &str, script: &str) -> Result<String, String> {
        docker(&["exec", container, "sh", "-c", script]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_mount_prefix_decides() {
        let mounts = serde_json::json!([
            {"Type": "volume", "Destination": "/var/lib/postgresql/dlbench"},
            {"Type": "bind", "Destination": "/results"},
        ]);
        assert_eq!(medium_of("/var/lib/postgresql/dlbench", &mounts), MediumKind::Volume);
        assert_eq!(medium_of("/var/lib/postgresql/dlbench/pg_wal", &mounts), MediumKind::Volume);
        // A sibling whose name starts the same is not under the mount.
        assert_eq!(medium_of("/var/lib/postgresql/dlbench2", &mounts), MediumKind::ContainerLayer);
        assert_eq!(medium_of("/results/x", &mounts), MediumKind::Host);
        assert_eq!(medium_of("/var/tmp", &serde_json::Value::Null), MediumKind::ContainerLayer);
    }

    #[test]
    fn data_paths_follow_the_command() {
        let c = serde_json::json!({"Config": {"Entrypoint": ["etcd"], "Cmd": ["--name", "etcd1", "--data-dir", "/data/etcd"]}});
        assert_eq!(data_path(BackendKind::Etcd, &c), "/data/etcd");
        let c = serde_json::json!({"Config": {"Entrypoint": ["redis-server", "--save", ""], "Cmd": null, "WorkingDir": ""}});
        assert_eq!(data_path(BackendKind::Redis, &c), "/");
        let c = serde_json::json!({"Config": {"Entrypoint": ["redis-server"], "Cmd": ["--dir", "/data"]}});
        assert_eq!(data_path(BackendKind::Redlock, &c), "/data");
    }
}
