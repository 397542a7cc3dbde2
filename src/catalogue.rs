//! The failure-scenario catalogue as data (references.md, S1-S10, J1, P1, J2, U1-U7): each entry's id,
//! title, where it applies and the published finding it reproduces. A leaf the runner
//! (`crate::scenario`) and the readers (`crate::report`) both stand on; how each entry is
//! caused and judged lives in `crate::scenario`.

use crate::kind::BackendKind;

/// A published finding an entry reproduces: where, and what it found.
#[derive(Debug, Clone, Copy)]
pub struct Published {
    pub source: &'static str,
    pub finding: &'static str,
}

/// One catalogue entry.
pub struct Scenario {
    pub id: &'static str,
    pub title: &'static str,
    pub applies: fn(BackendKind) -> bool,
    /// Where it applies and why, said for each backend it does not apply to.
    pub scope: &'static str,
    pub published: Option<Published>,
}

fn any(k: BackendKind) -> bool {
    k != BackendKind::Memory
}
fn sessions(k: BackendKind) -> bool {
    matches!(k, BackendKind::Etcd | BackendKind::Zookeeper)
}
const SESSIONS: &str = "etcd and ZooKeeper only: a session kept alive by heartbeats that the servers expire while its client is cut off (a PostgreSQL session lives as long as its connection, which a cut that holds bytes keeps open)";
const QUORUM: &str = "etcd and ZooKeeper only: a quorum with a leader and followers";
const ANY: &str = "every backend with servers";

const KLEPPMANN: &str = "Kleppmann, How to do distributed locking (2016)";
const JEPSEN_ETCD: &str = "Jepsen, etcd 3.4.3 (2020)";

pub const CATALOGUE: &[Scenario] = &[
    Scenario {
        id: "S1",
        title: "holder pauses longer than its TTL or session",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: KLEPPMANN,
            finding: "a pause longer than the lease lets a second client in: the update is lost without fencing; a token checked by the storage refuses the stale write; Redlock has no token",
        }),
    },
    Scenario {
        id: "S2",
        title: "holder's write is delayed past its release",
        applies: any,
        scope: ANY,
        published: Some(Published { source: KLEPPMANN, finding: "a write delayed in the network lands after the next holder's: lost without fencing, refused with it" }),
    },
    Scenario {
        id: "S3",
        title: "one Redlock node's clock jumps forward",
        applies: |k| k == BackendKind::Redlock,
        scope: "Redlock only: the clock of one of its independent nodes",
        published: Some(Published { source: KLEPPMANN, finding: "Redlock depends on clocks: a node whose clock jumps expires the key early and two clients hold the lock; no token to fence with" }),
    },
    Scenario {
        id: "S4",
        title: "a Redlock node restarts empty (at once, and after a TTL)",
        applies: |k| k == BackendKind::Redlock,
        scope: "Redlock only: one of its independent nodes restarting empty",
        published: Some(Published {
            source: "Redis docs, Distributed Locks with Redis (Redlock), safety and persistence",
            finding: "a node restarting empty within the TTL can vote again and grant twice; delaying the restart past the TTL prevents it",
        }),
    },
    Scenario {
        id: "S5",
        title: "Redis primary fails over before replicating",
        applies: |k| k.server() == BackendKind::Redis,
        scope: "the single-primary Redis designs (redis, redisson) only: an asynchronous replica promoted",
        published: Some(Published {
            source: "Redis docs, replication (asynchronous) and the Redlock page",
            finding: "a primary that fails before replicating the SET lets the promoted replica grant the same lock again",
        }),
    },
    Scenario {
        id: "S6",
        title: "holder partitioned from the quorum",
        applies: sessions,
        scope: SESSIONS,
        published: Some(Published { source: JEPSEN_ETCD, finding: "a holder cut off from the quorum loses its lease and keeps writing: lost updates; the revision as a fencing token refuses them" }),
    },
    Scenario {
        id: "S7",
        title: "session expires while waiting in the queue",
        applies: sessions,
        scope: SESSIONS,
        published: Some(Published { source: "etcd issue #11456 (fixed by #11408)", finding: "a waiter whose session expired in the queue was told it holds the lock; it must get an error" }),
    },
    Scenario { id: "S8", title: "leader killed", applies: sessions, scope: QUORUM, published: None },
    Scenario { id: "S9", title: "a follower paused", applies: sessions, scope: QUORUM, published: None },
    Scenario {
        id: "S10",
        title: "the database server killed and restarted",
        applies: |k| k.family() == "database",
        scope: "the database designs (PostgreSQL and MariaDB) only",
        published: None,
    },
    Scenario {
        id: "J1",
        title: "etcd lock with a 2 s lease, holder paused and partitioned (Jepsen's setup)",
        applies: |k| k == BackendKind::Etcd,
        scope: "etcd only: Jepsen's etcd setup",
        published: Some(Published {
            source: JEPSEN_ETCD,
            finding: "etcd locks are not mutually exclusive under process pauses and partitions: lost updates with a 2 s lease; fencing by the key's revision refuses them",
        }),
    },
    Scenario {
        id: "P1",
        title: "power loss under a holder",
        applies: any,
        scope: "every backend with servers: the power lost on every node of the backend at once (its one server, Redlock's five, a quorum's three), right after a grant",
        // Each backend's setting has its own published expectation (`crate::scenario::power`).
        published: None,
    },
    Scenario {
        id: "J2",
        title: "NATS JetStream under a power failure across nodes (Jepsen's finding)",
        applies: |k| k == BackendKind::Nats,
        scope: "nats only: Jepsen's NATS analysis",
        published: Some(Published {
            source: "Jepsen, NATS 2.12.1 (December 2025)",
            finding: "JetStream lost acknowledged writes and split brain under a power failure across nodes (or one OS crash with a partition or pause): by default it flushes to disk only every two minutes",
        }),
    },
    Scenario {
        id: "U1",
        title: "the holder learns late that its lock is gone",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: "etcd #6127, Curator #985 and #727, kazoo #565, Redisson #4698",
            finding: "lock holders are told late or never that the server let their lock go: etcd's Mutex has no notice, Curator and kazoo leave it to a connection listener, Redisson only logs a failed watchdog renewal",
        }),
    },
    Scenario {
        id: "U2",
        title: "a holder that keeps its lock alive itself, starved of CPU or paused",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: "Redisson #2665 and #5698; etcd #13156; ZooKeeper sessions lost to GC pauses (dCache #5253)",
            finding: "a watchdog or keep-alive starved of CPU or stopped by a pause misses its renewals: the lock expires while its holder still works under it",
        }),
    },
    Scenario {
        id: "U3",
        title: "1,000 locks kept alive at once",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: "etcd #11886 and #9911",
            finding: "with tens of thousands of leases (40,000-60,000 in #11886) keep-alives stop renewing and leases expire under their holders; 14,000 clients' keep-alives backlog the leader (#9911)",
        }),
    },
    Scenario {
        id: "U4",
        title: "Redlock nodes restart one after another within a TTL",
        applies: |k| k == BackendKind::Redlock,
        scope: "Redlock only: its five independent nodes restarting",
        published: Some(Published {
            source: "Redis docs, Distributed Locks with Redis: performance, crash recovery and fsync; Kleppmann (2016)",
            finding: "nodes that restart without the key let a second client gather a majority while the first still holds the lock; fsync=always or keeping a crashed node down longer than the TTL prevents it",
        }),
    },
    Scenario {
        id: "U5",
        title: "a slow client's grant arrives with no validity left",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: "etcd #9921 and #11456",
            finding: "a waiter was answered 'locked' after its lease had already expired: the grant must be checked against the lease before it is used",
        }),
    },
    Scenario {
        id: "U6",
        title: "advisory locks behind PgBouncer's transaction pooling",
        applies: |k| matches!(k, BackendKind::PgAdvisory | BackendKind::PgAdvisoryXact),
        scope: "the PostgreSQL advisory-lock designs only (pg-advisory: the session lock under transaction and session pooling; pg-advisory-xact: the transaction lock under transaction pooling); needs pgbouncer",
        published: Some(Published {
            source: "PgBouncer features page (session-level advisory locks: never in transaction pooling); pgbouncer #102; authentik #23876",
            finding: "a session advisory lock taken through transaction pooling lives on a server connection other clients share: they are granted it too, its unlock runs elsewhere, and it strands",
        }),
    },
    Scenario {
        id: "U7",
        title: "the cost of waiting: 1 to 1,000 waiters on a hot key",
        applies: any,
        scope: ANY,
        published: Some(Published {
            source: "ZooKeeper recipes (the herd effect); Discourse #17886; Redisson #5632; Consul #7523",
            finding: "polling waiters load the server in proportion to their number and all retry at each release; a watch on the predecessor wakes one waiter per release",
        }),
    },
];

/// The "what users hit" entries: figures per backend, not expected-against-observed rows.
pub fn is_measurement(id: &str) -> bool {
    id.starts_with('U')
}

pub fn find(id: &str) -> Option<&'static Scenario> {
    CATALOGUE.iter().find(|s| s.id.eq_ignore_ascii_case(id))
}
