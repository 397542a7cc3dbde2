//! The compose images run the servers with the local target's settings (issue 35): the same
//! durability (Redis without persistence), the same JVM heap and collector and the same
//! ZooKeeper configuration, the same etcd flags. Only addresses, ports and paths may differ,
//! so a compose / local ratio measures the container layer and not a setting.
//!
//! Read from the files the images are built from (docker/, docker-compose.yml) against the
//! specs the local target starts its servers with.

use std::collections::BTreeSet;
use std::path::Path;

use super::{etcd, redis, zookeeper};

const ZK_ENTRYPOINT: &str = include_str!("../../../docker/zookeeper/entrypoint.sh");
const REDIS_DOCKERFILE: &str = include_str!("../../../docker/redis/Dockerfile");
const COMPOSE_FILE: &str = include_str!("../../../docker-compose.yml");

/// A scratch directory for the specs (they create their data directories), removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("dlbench-parity-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn args(plan: &super::NodePlan) -> Vec<String> {
    plan.spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

/// `key=value` lines of a ZooKeeper config, without the ones that name addresses or paths.
fn zk_settings<'a>(lines: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    const PLACE: [&str; 5] = ["dataDir", "clientPort", "clientPortAddress", "quorumListenOnAllIPs", "server."];
    lines
        .map(str::trim)
        .filter(|l| l.contains('=') && !l.starts_with('#') && !l.starts_with("echo") && !l.starts_with("for "))
        .filter(|l| !PLACE.iter().any(|p| l.starts_with(p)))
        .map(str::to_string)
        .collect()
}

#[test]
fn zookeeper_in_compose_runs_the_local_config_and_jvm() {
    let dir = Scratch::new("zk");
    let ports: Vec<zookeeper::ZkPorts> = (0..3).map(|i| zookeeper::ZkPorts { client: 2181 + i, quorum: 2888 + i, election: 3888 + i, fronts: None }).collect();
    let plans = zookeeper::specs(Path::new("/usr/bin/java"), "zk.jar", dir.path(), dir.path(), &ports, &[]).unwrap();
    let cfg = std::fs::read_to_string(dir.path().join("zookeeper-1/zoo.cfg")).unwrap();
    let heredoc = ZK_ENTRYPOINT.split("<<CFG").nth(1).and_then(|s| s.split("\nCFG").next()).expect("the entrypoint's config heredoc");
    assert_eq!(zk_settings(cfg.lines()), zk_settings(heredoc.lines()), "ZooKeeper settings differ between local (left) and docker/zookeeper/entrypoint.sh (right)");
    let exec = ZK_ENTRYPOINT.lines().skip_while(|l| !l.starts_with("exec java")).take(3).collect::<Vec<_>>().join(" ");
    for flag in args(&plans[0]).iter().filter(|a| a.starts_with("-X") || a.starts_with("-Dzookeeper.admin")) {
        assert!(exec.split_whitespace().any(|w| w == flag), "the local JVM flag {flag} is not on the compose entrypoint's java line: {exec}");
    }
}

#[test]
fn redis_in_compose_has_the_local_persistence() {
    let default_redis = crate::durability::settings(crate::kind::BackendKind::Redis, crate::durability::Durability::Default).options;
    let dir = Scratch::new("redis");
    let plan = redis::spec(Path::new("/usr/bin/redis-server"), dir.path(), dir.path(), "redis-1", 6379, None, None, None, &default_redis).unwrap();
    let local = args(&plan);
    let entry = REDIS_DOCKERFILE.lines().find(|l| l.starts_with("ENTRYPOINT")).expect("docker/redis/Dockerfile's ENTRYPOINT");
    let compose: Vec<String> = serde_json::from_str(entry.trim_start_matches("ENTRYPOINT").trim()).expect("ENTRYPOINT in exec form");
    for opt in ["--save", "--appendonly", "--appendfsync", "--maxmemory"] {
        let value = |v: &[String]| v.iter().position(|a| a == opt).map(|i| v[i + 1].clone());
        assert_eq!(value(&local), value(&compose), "redis {opt}: local {:?}, compose {:?}", value(&local), value(&compose));
    }
}

#[test]
fn etcd_in_compose_has_the_local_flags() {
    let dir = Scratch::new("etcd");
    let ports = [etcd::EtcdPorts { client: 2379, peer: 2380, peer_front: None }];
    let plans = etcd::specs(Path::new("/usr/bin/etcd"), dir.path(), dir.path(), &ports, "t");
    // Flags that name where a member is, who its peers are, or where it logs.
    const PLACE: [&str; 11] = [
        "--name", "--data-dir", "--listen-client-urls", "--advertise-client-urls", "--listen-peer-urls",
        "--initial-advertise-peer-urls", "--initial-cluster", "--initial-cluster-token", "--initial-cluster-state", "--logger", "--log-outputs",
    ];
    let flags = |v: Vec<String>| -> BTreeSet<String> { v.into_iter().filter(|a| a.starts_with("--") && !PLACE.contains(&a.as_str())).collect() };
    let local = flags(args(&plans[0]));
    // etcd1's command, over the lines it spans up to its closing bracket.
    let from = COMPOSE_FILE.find("command: [--name, etcd1").expect("etcd1's command in docker-compose.yml");
    let line = &COMPOSE_FILE[from..from + COMPOSE_FILE[from..].find(']').unwrap()];
    let compose = flags(line.split(|c| c == '[' || c == ',' || c == ']').map(|w| w.trim().to_string()).collect());
    assert_eq!(local, compose, "etcd flags beyond addresses and paths: local (left), docker-compose.yml (right)");
}
