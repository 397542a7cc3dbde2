//! The backend names dlbench knows, and parsing them from the command line.

use std::fmt;
use std::str::FromStr;

/// A lock backend by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    Postgres,
    /// PostgreSQL session-scoped advisory locks (`pg_advisory_lock`), on the postgres server.
    PgAdvisory,
    /// PostgreSQL transaction-scoped advisory locks (`pg_advisory_xact_lock`).
    PgAdvisoryXact,
    /// The unique-index lock table on MariaDB's InnoDB (the database row lock on a second
    /// database).
    Mariadb,
    /// MariaDB's named locks (`GET_LOCK`), on the mariadb server.
    MariadbGetLock,
    Redis,
    /// The Redis lock with a hold count and pub/sub wake-ups (Redisson's `RLock` protocol),
    /// on the redis server.
    Redisson,
    Redlock,
    Zookeeper,
    Etcd,
    /// etcd's server-side lock service (the v3lock `Lock` / `Unlock` RPCs), on the etcd
    /// servers.
    EtcdV3lock,
    /// A NATS JetStream key-value bucket (create-if-absent, revision compare), on its own
    /// three-server cluster.
    Nats,
    Memory,
}

impl BackendKind {
    /// The five server families `dlbench run` measures by default, each with its textbook
    /// recipe (the other designs add about 40 s).
    pub const REAL: [BackendKind; 5] =
        [BackendKind::Postgres, BackendKind::Redis, BackendKind::Redlock, BackendKind::Zookeeper, BackendKind::Etcd];

    /// Every server family: what a target can start and what an endpoints file has a
    /// section for (MariaDB and NATS beside the default five).
    pub const SERVERS: [BackendKind; 7] = [
        BackendKind::Postgres,
        BackendKind::Mariadb,
        BackendKind::Redis,
        BackendKind::Redlock,
        BackendKind::Zookeeper,
        BackendKind::Etcd,
        BackendKind::Nats,
    ];

    /// Every design on real servers (`--backends all`), each beside its family in the order
    /// the table lists them: database, Redis, consensus.
    pub const ALL: [BackendKind; 12] = [
        BackendKind::Postgres,
        BackendKind::PgAdvisory,
        BackendKind::PgAdvisoryXact,
        BackendKind::Mariadb,
        BackendKind::MariadbGetLock,
        BackendKind::Redis,
        BackendKind::Redisson,
        BackendKind::Redlock,
        BackendKind::Zookeeper,
        BackendKind::Etcd,
        BackendKind::EtcdV3lock,
        BackendKind::Nats,
    ];

    /// The server family this design runs on: its servers, endpoints section and faults.
    pub fn server(self) -> BackendKind {
        match self {
            BackendKind::PgAdvisory | BackendKind::PgAdvisoryXact => BackendKind::Postgres,
            BackendKind::EtcdV3lock => BackendKind::Etcd,
            BackendKind::MariadbGetLock => BackendKind::Mariadb,
            BackendKind::Redisson => BackendKind::Redis,
            k => k,
        }
    }

    /// The server families `kinds` run on, each once, in order.
    pub fn servers(kinds: &[BackendKind]) -> Vec<BackendKind> {
        let mut out: Vec<BackendKind> = Vec::new();
        for k in kinds {
            if !out.contains(&k.server()) {
                out.push(k.server());
            }
        }
        out
    }

    /// The families tables group designs under, in the order they list them.
    pub const FAMILIES: [&'static str; 4] = ["database", "Redis", "consensus", "reference"];

    /// The family the table groups a design under: what kind of system holds the lock.
    pub fn family(self) -> &'static str {
        Self::FAMILIES[match self {
            BackendKind::Postgres | BackendKind::PgAdvisory | BackendKind::PgAdvisoryXact => 0,
            BackendKind::Mariadb | BackendKind::MariadbGetLock => 0,
            BackendKind::Redis | BackendKind::Redisson | BackendKind::Redlock => 1,
            BackendKind::Zookeeper | BackendKind::Etcd | BackendKind::EtcdV3lock | BackendKind::Nats => 2,
            BackendKind::Memory => 3,
        }]
    }

    /// Why a `partition` (cutting the links between a backend's nodes) cannot touch this
    /// design, or None where its nodes talk to each other (a consensus cluster).
    pub fn nothing_to_partition(self) -> Option<&'static str> {
        match self {
            BackendKind::Zookeeper | BackendKind::Etcd | BackendKind::EtcdV3lock | BackendKind::Nats => None,
            BackendKind::Redlock => Some("Redlock's five nodes never talk to each other, so no link between them carries the lock"),
            BackendKind::Memory => Some("the memory backend has no nodes"),
            _ => Some("it runs on one server, with no link between nodes to cut"),
        }
    }

    /// Whether one node of this design's servers leads: an elected leader (etcd, ZooKeeper,
    /// the NATS stream's), or the one server a single-node design runs on. Redlock's nodes
    /// are independent and equal: none leads.
    pub fn has_leader(self) -> bool {
        !matches!(self.server(), BackendKind::Redlock | BackendKind::Memory)
    }

    /// Why no node leads, where none does.
    pub fn why_no_leader(self) -> &'static str {
        match self.server() {
            BackendKind::Redlock => "its nodes are independent and equal",
            BackendKind::Memory => "it has no nodes",
            _ => "",
        }
    }

    /// What the servers need after a fault heals, besides the TTL, before they grant again:
    /// a leader election and a killed member's restart (etcd, ZooKeeper, NATS), a restart with
    /// its crash recovery (PostgreSQL, MariaDB), a restart (Redis). Measured on the local
    /// target with room to spare; the nemesis leaves at least this plus the TTL after every
    /// heal, and recovery is judged only past it.
    pub fn recovery_allowance(self) -> std::time::Duration {
        std::time::Duration::from_secs(match self.server() {
            BackendKind::Etcd => 3,
            BackendKind::Zookeeper => 6,
            BackendKind::Nats => 4,
            BackendKind::Postgres => 4,
            BackendKind::Mariadb => 6,
            BackendKind::Redis | BackendKind::Redlock => 2,
            _ => 0,
        })
    }

    /// The TTL the servers will grant for `ttl`, as known before they start (the run asks
    /// them when each phase opens, `Backend::granted_ttl`): etcd grants whole seconds, at
    /// least 2 (1.5 election timeouts); ZooKeeper negotiates within the local target's 1-120 s;
    /// session advisory locks and `GET_LOCK` have none.
    pub fn granted_ttl_estimate(self, ttl: std::time::Duration) -> Option<std::time::Duration> {
        use std::time::Duration;
        match self {
            BackendKind::PgAdvisory | BackendKind::MariadbGetLock => None,
            BackendKind::Etcd | BackendKind::EtcdV3lock => Some(Duration::from_secs(ttl.as_secs_f64().ceil().max(2.0) as u64)),
            BackendKind::Zookeeper => Some(ttl.clamp(Duration::from_secs(1), Duration::from_secs(120))),
            _ => Some(ttl),
        }
    }

    /// The room after a heal a phase with TTL `ttl` must leave: the granted TTL (a holder
    /// whose session the fault took keeps the lock that long) and the recovery allowance.
    pub fn recovery_room(self, ttl: std::time::Duration) -> std::time::Duration {
        self.granted_ttl_estimate(ttl).unwrap_or_default() + self.recovery_allowance()
    }

    /// The nodes of its servers on the local and compose targets.
    pub fn nodes(self) -> usize {
        match self.server() {
            BackendKind::Redlock => 5,
            BackendKind::Zookeeper | BackendKind::Etcd | BackendKind::Nats => 3,
            _ => 1,
        }
    }

    /// Whether the design's servers are one node, which is then its leader.
    pub fn single_node(self) -> bool {
        matches!(self.server(), BackendKind::Postgres | BackendKind::Mariadb | BackendKind::Redis)
    }

    /// The designs that honour Chubby's lock-delay (`AcquireOptions::lock_delay`), known
    /// before connecting so bad input is refused first; each backend's
    /// `Capabilities::lock_delay` says the same (a conformance test holds them together).
    pub fn lock_delay(self) -> bool {
        self == BackendKind::Etcd
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Postgres => "postgres",
            BackendKind::PgAdvisory => "pg-advisory",
            BackendKind::PgAdvisoryXact => "pg-advisory-xact",
            BackendKind::Mariadb => "mariadb",
            BackendKind::MariadbGetLock => "mariadb-get-lock",
            BackendKind::Redis => "redis",
            BackendKind::Redisson => "redisson",
            BackendKind::Redlock => "redlock",
            BackendKind::Zookeeper => "zookeeper",
            BackendKind::Etcd => "etcd",
            BackendKind::EtcdV3lock => "etcd-v3lock",
            BackendKind::Nats => "nats",
            BackendKind::Memory => "memory",
        }
    }

    pub fn all_names() -> String {
        let mut v: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
        v.push("memory");
        v.join(", ")
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" | "pg" => Ok(BackendKind::Postgres),
            "pg-advisory" => Ok(BackendKind::PgAdvisory),
            "pg-advisory-xact" => Ok(BackendKind::PgAdvisoryXact),
            "mariadb" | "mysql" => Ok(BackendKind::Mariadb),
            "mariadb-get-lock" => Ok(BackendKind::MariadbGetLock),
            "redis" => Ok(BackendKind::Redis),
            "redisson" => Ok(BackendKind::Redisson),
            "redlock" => Ok(BackendKind::Redlock),
            "zookeeper" | "zk" => Ok(BackendKind::Zookeeper),
            "etcd" => Ok(BackendKind::Etcd),
            "etcd-v3lock" => Ok(BackendKind::EtcdV3lock),
            "nats" => Ok(BackendKind::Nats),
            "memory" => Ok(BackendKind::Memory),
            other => Err(format!("unknown backend {other:?}; valid backends: {}", Self::all_names())),
        }
    }
}

/// Parse `a,b,c`, `all` (every design on real servers) or `default` (the five server
/// families' own recipes, what `dlbench run` measures when not told).
pub fn parse_list(s: &str) -> Result<Vec<BackendKind>, String> {
    match s.trim() {
        "all" => return Ok(BackendKind::ALL.to_vec()),
        "default" => return Ok(BackendKind::REAL.to_vec()),
        _ => {}
    }
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let k: BackendKind = part.parse()?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err(format!("no backend named; valid backends: {}", BackendKind::all_names()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_backend_names_the_valid_ones() {
        let e = parse_list("etcd,nosuch").unwrap_err();
        assert!(e.contains("nosuch") && e.contains("zookeeper") && e.contains("redlock"), "{e}");
    }

    #[test]
    fn all_means_every_design_and_default_the_five_families() {
        let v = parse_list("all").unwrap();
        assert_eq!(v.len(), 12);
        assert_eq!(v.last(), Some(&BackendKind::Nats), "nats sits with the consensus designs, last");
        assert!(!BackendKind::REAL.contains(&BackendKind::Nats), "nats is not one of the default five");
        assert!(!v.contains(&BackendKind::Memory));
        assert_eq!(v[1], BackendKind::PgAdvisory, "the advisory designs sit beside postgres");
        assert_eq!(parse_list("default").unwrap(), BackendKind::REAL.to_vec());
    }

    #[test]
    fn designs_run_on_their_family_s_servers() {
        let v = parse_list("pg-advisory-xact,redis,pg-advisory").unwrap();
        assert_eq!(BackendKind::servers(&v), vec![BackendKind::Postgres, BackendKind::Redis]);
        for k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>().unwrap(), k);
            assert!(BackendKind::SERVERS.contains(&k.server()));
        }
    }
}

/// The backends' names, comma-separated, as the messages print them.
pub fn names(v: &[BackendKind]) -> String {
    v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}
