//! The conformance suite on every backend, and interop with official clients, on real
//! servers started by dlbench's local target.

use crate::support;

use std::time::Duration;

use dlbench::kind::BackendKind;
use dlbench_core::conformance_tests;

conformance_tests!(
    conformance_postgres,
    make = support::backend(BackendKind::Postgres).await,
    dead = support::dead(BackendKind::Postgres),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_pg_advisory,
    make = support::backend(BackendKind::PgAdvisory).await,
    dead = support::dead(BackendKind::PgAdvisory),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_pg_advisory_xact,
    make = support::backend(BackendKind::PgAdvisoryXact).await,
    dead = support::dead(BackendKind::PgAdvisoryXact),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_mariadb,
    make = support::backend(BackendKind::Mariadb).await,
    dead = support::dead(BackendKind::Mariadb),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_mariadb_get_lock,
    make = support::backend(BackendKind::MariadbGetLock).await,
    dead = support::dead(BackendKind::MariadbGetLock),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_redis,
    make = support::backend(BackendKind::Redis).await,
    dead = support::dead(BackendKind::Redis),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_redisson,
    make = support::backend(BackendKind::Redisson).await,
    dead = support::dead(BackendKind::Redisson),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_redlock,
    make = support::backend(BackendKind::Redlock).await,
    dead = support::dead(BackendKind::Redlock),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_zookeeper,
    make = support::backend(BackendKind::Zookeeper).await,
    dead = support::dead(BackendKind::Zookeeper),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_etcd,
    make = support::backend(BackendKind::Etcd).await,
    dead = support::dead(BackendKind::Etcd),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_etcd_v3lock,
    make = support::backend(BackendKind::EtcdV3lock).await,
    dead = support::dead(BackendKind::EtcdV3lock),
    ttl = Duration::from_secs(2)
);
conformance_tests!(
    conformance_nats,
    make = support::backend(BackendKind::Nats).await,
    dead = support::dead(BackendKind::Nats),
    ttl = Duration::from_secs(2)
);

mod interop {
    use super::*;
    use dlbench_core::AcquireOptions;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    fn etcdctl(ep: &str) -> Command {
        let mut c = Command::new("etcdctl");
        c.env("ETCDCTL_API", "3").arg("--endpoints").arg(ep);
        c
    }

    fn etcd_endpoint() -> String {
        support::endpoints().etcd.as_ref().unwrap().endpoints[0].clone()
    }

    /// Wait until some client holds a claim under NAME/ (etcdctl prints nothing before).
    fn wait_for_claim(ep: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = etcdctl(ep).args(["get", "--prefix", "--keys-only", &format!("{name}/")]).output().unwrap();
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "etcdctl never took {name}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Both etcd designs: the client-side recipe and the server's lock service.
    const ETCD_DESIGNS: [BackendKind; 2] = [BackendKind::Etcd, BackendKind::EtcdV3lock];

    /// While `etcdctl lock NAME -- sleep 3` holds NAME, dlbench cannot take it; afterwards it can.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcdctl_holds_dlbench_waits() {
        for kind in ETCD_DESIGNS {
            etcdctl_holds(kind).await;
        }
    }

    async fn etcdctl_holds(kind: BackendKind) {
        let ep = etcd_endpoint();
        let name = dlbench_core::conformance::unique_key("etcdctl-holds");
        let mut holder = etcdctl(&ep).args(["lock", &name, "--", "sleep", "3"]).stdout(Stdio::null()).spawn().unwrap();
        wait_for_claim(&ep, &name);
        let backend = support::backend(kind).await;
        let client = backend.client().await.unwrap();
        let opts = AcquireOptions::default().with_ttl(Duration::from_secs(10));
        let r = client.acquire(&name, &opts.clone().with_wait(Duration::from_millis(500))).await;
        assert!(matches!(r, Err(ref e) if e.is_contention()), "{kind}: dlbench took a lock etcdctl holds: {r:?}");
        let lease = client.acquire(&name, &opts.with_wait(Duration::from_secs(30))).await.expect("after etcdctl exits");
        let status = holder.wait().unwrap();
        assert!(status.success(), "etcdctl lock failed: {status}");
        client.release(lease).await.unwrap();
        client.close().await;
    }

    /// A waiter is granted after waiting longer than one request may take: the server's
    /// `Lock` call waits out the holder, and must not be cut by the request timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_longer_than_the_request_timeout_is_granted() {
        let t = dlbench::connect::Timeouts { connect: Duration::from_secs(3), request: Duration::from_secs(1) };
        for kind in ETCD_DESIGNS {
            let backend = dlbench::connect::connect(kind, support::endpoints(), t, None).await.unwrap();
            let name = dlbench_core::conformance::unique_key("long-wait");
            let (a, b) = (backend.client().await.unwrap(), backend.client().await.unwrap());
            let held = a.acquire(&name, &AcquireOptions::default()).await.unwrap();
            let waiter = {
                let name = name.clone();
                tokio::spawn(async move {
                    let r = b.acquire(&name, &AcquireOptions::default().with_wait(Duration::from_secs(20))).await;
                    (b, r)
                })
            };
            tokio::time::sleep(Duration::from_millis(2500)).await;
            a.release(held).await.unwrap();
            let (b, r) = waiter.await.unwrap();
            let lease = r.unwrap_or_else(|e| panic!("{kind}: a 2.5 s wait with 1 s requests failed: {e}"));
            b.release(lease).await.unwrap();
            a.close().await;
            b.close().await;
        }
    }

    /// While dlbench holds NAME, `etcdctl lock NAME` waits; it gets the lock once released.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dlbench_holds_etcdctl_waits() {
        for kind in ETCD_DESIGNS {
            dlbench_holds(kind).await;
        }
    }

    async fn dlbench_holds(kind: BackendKind) {
        let ep = etcd_endpoint();
        let name = dlbench_core::conformance::unique_key("dlbench-holds");
        let backend = support::backend(kind).await;
        let client = backend.client().await.unwrap();
        let lease = client.acquire(&name, &AcquireOptions::default()).await.unwrap();
        let mut waiter = etcdctl(&ep).args(["lock", &name, "--", "true"]).stdout(Stdio::null()).spawn().unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(waiter.try_wait().unwrap().is_none(), "etcdctl lock returned while dlbench held {name}");
        client.release(lease).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = waiter.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "etcdctl still waiting 20 s after release");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success());
        client.close().await;
    }

    /// The ZooKeeper claim is named as Curator names it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zookeeper_nodes_are_curator_nodes() {
        let name = dlbench_core::conformance::unique_key("curator");
        let backend = support::backend(BackendKind::Zookeeper).await;
        let client = backend.client().await.unwrap();
        let lease = client.acquire(&name, &AcquireOptions::default()).await.unwrap();
        let node = lease.handle.id.clone();
        let prefix = format!("/{name}/_c_");
        assert!(node.starts_with(&prefix), "{node} is not under {prefix}");
        let tail = &node[prefix.len()..];
        let (uuid, seq) = tail.split_once("-lock-").expect("Curator's -lock- separator");
        assert_eq!(uuid.len(), 36, "uuid part {uuid}");
        assert!(seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()), "sequence {seq}");
        client.release(lease).await.unwrap();
        client.close().await;
    }
}

/// The Redisson-protocol lock: its hold count, and its wire layout (the hash, the owner
/// field, the unlock channel) read and driven with `redis-cli`, as a Redisson client on the
/// same server would see and use it.
mod redisson {
    use super::*;
    use dlbench_core::conformance::{reentrancy, Reentrancy};
    use dlbench_core::AcquireOptions;
    use std::process::Command;
    use std::time::Instant;

    fn cli(args: &[&str]) -> String {
        let ep = support::endpoints().redis.as_ref().unwrap().endpoints[0].clone();
        let (host, port) = ep.rsplit_once(':').unwrap();
        let out = Command::new("redis-cli").args(["-h", host, "-p", port, "--raw"]).args(args).output().unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Measured, not declared: the holder acquiring again is granted and counted (another
    /// client still finds it held after one release), where the plain Redis recipe blocks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_holder_acquires_again_and_is_counted() {
        assert_eq!(reentrancy(support::backend(BackendKind::Redisson).await).await, Reentrancy::Granted { counted: true });
        assert_eq!(reentrancy(support::backend(BackendKind::Redis).await).await, Reentrancy::Blocks);
    }

    /// The lock is a hash at NAME whose one field, `<id>:<thread>`, holds the count; a
    /// waiter subscribes to `redisson_lock__channel:{NAME}` and is woken by the release's
    /// message, long before the holder's TTL or its own wait would have run out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_layout_and_the_wake_up_are_redissons() {
        let backend = support::backend(BackendKind::Redisson).await;
        let name = dlbench_core::conformance::unique_key("redisson-wire");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let a = backend.client().await.unwrap();
        let opts = AcquireOptions::default().with_ttl(Duration::from_secs(30));
        let first = a.acquire(&name, &opts).await.unwrap();
        let second = a.acquire(&name, &opts).await.unwrap();
        let c = backend.client().await.unwrap();
        let waiter = waits(c, &name);
        let fields = cli(&["HGETALL", &name]);
        let lines: Vec<&str> = fields.lines().collect();
        assert_eq!(lines.len(), 2, "one owner field: {fields}");
        assert!(lines[0].ends_with(":1") && lines[1] == "2", "owner <id>:<thread> with hold count 2: {fields}");
        assert_eq!(first.token, second.token, "a re-entry is the same hold, with its token");
        a.release(second).await.unwrap();
        assert_eq!(cli(&["HGET", &name, lines[0]]), "1", "one release of two leaves it held");
        subscribed(&channel).await;
        assert!(!waiter.is_finished(), "granted while the holder still held one count");
        let first_token = first.token.unwrap();
        a.release(first).await.unwrap();
        let (token, waited, c) = waiter.await.unwrap();
        let token = token.unwrap_or_else(|e| panic!("the waiter was not granted after the last release: {e}"));
        assert!(waited < Duration::from_secs(15), "woken by the release's message, not by its wait running out: {waited:?}");
        assert!(token > first_token, "the next hold has a higher token");
        c.close().await;
        let _ = cli(&["DEL", &name]);

        // A foreign owner (as a Redisson client writes it) with a 30 s TTL; a dlbench waiter
        // with a 20 s wait subscribes; the foreign holder lets go by DEL + PUBLISH.
        cli(&["HSET", &name, "6f1c2d3e-redisson-instance:42", "1"]);
        cli(&["PEXPIRE", &name, "30000"]);
        let b = backend.client().await.unwrap();
        let waiter = waits(b, &name);
        subscribed(&channel).await;
        cli(&["DEL", &name]);
        assert_eq!(cli(&["PUBLISH", &channel, "0"]), "1", "one subscriber hears the release");
        let (token, waited, b) = waiter.await.unwrap();
        assert!(token.is_ok(), "the waiter was not granted: {token:?}");
        assert!(waited < Duration::from_secs(15), "woken by the message, not by its wait running out: {waited:?}");
        assert_eq!(cli(&["PUBSUB", "NUMSUB", &channel]).lines().nth(1), Some("0"), "unsubscribed once granted");
        let _ = cli(&["DEL", &name]);
        a.close().await;
        b.close().await;
    }

    /// A waiter on NAME with a 20 s wait: its token, how long it waited, its client.
    fn waits(c: Box<dyn dlbench_core::DistLock>, name: &str) -> tokio::task::JoinHandle<(Result<dlbench_core::FencingToken, dlbench_core::LockError>, Duration, Box<dyn dlbench_core::DistLock>)> {
        let name = name.to_string();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = c.acquire(&name, &AcquireOptions::default().with_ttl(Duration::from_secs(10)).with_wait(Duration::from_secs(20))).await;
            (r.map(|l| l.token.expect("fenced")), started.elapsed(), c)
        })
    }

    /// Until one client listens on `channel`.
    async fn subscribed(channel: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while cli(&["PUBSUB", "NUMSUB", channel]).lines().nth(1) != Some("1") {
            assert!(Instant::now() < deadline, "the waiter never subscribed to {channel}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The advisory designs against `psql`, PostgreSQL's own client, on the documented key
/// mapping (`hashtextextended(name, 0)`), and what each design does with a silent holder.
mod advisory {
    use super::*;
    use std::process::Command;
    use dlbench_core::{AcquireOptions, LockError};

    const DESIGNS: [BackendKind; 2] = [BackendKind::PgAdvisory, BackendKind::PgAdvisoryXact];

    /// psql on the test server, as a user would run it: unaligned, tuples only.
    fn psql() -> Command {
        let ep = support::endpoints().postgres.as_ref().unwrap().endpoints[0].clone();
        let (host, port) = ep.rsplit_once(':').unwrap();
        let mut c = Command::new("psql");
        c.args(["-h", host, "-p", port, "-U", "postgres", "-d", "postgres", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"]);
        c
    }

    /// The `postgres` design's row, as psql reads it, is reentrant by its owner check: the
    /// holder's second acquire counts `holds` up under the same token; one release leaves
    /// the row held (another client is refused), the last frees it for the next token.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lock_row_counts_the_holders_reentries() {
        let name = dlbench_core::conformance::unique_key("reentry");
        let backend = support::backend(BackendKind::Postgres).await;
        let (a, b) = (backend.client().await.unwrap(), backend.client().await.unwrap());
        let o = AcquireOptions::default().with_ttl(Duration::from_secs(60)).with_wait(Duration::from_millis(300));
        let row = |what: &str| {
            let out = psql().args(["-c", &format!("SELECT {what} FROM dlbench_locks WHERE name = '{name}'")]).output().unwrap();
            assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let first = a.acquire(&name, &o).await.unwrap();
        let token = first.token.unwrap().0;
        let second = a.acquire(&name, &o).await.unwrap();
        assert_eq!(second.token.unwrap().0, token, "a re-entry keeps the token");
        assert_eq!(row("holds"), "2");
        assert_eq!(row("locked_by"), first.handle.id);
        a.release(first).await.unwrap();
        assert_eq!(row("holds"), "1");
        let probe = b.acquire(&name, &o.clone().with_wait(Duration::ZERO)).await;
        assert!(matches!(probe, Err(ref e) if e.is_contention()), "held after one of two releases: {probe:?}");
        a.release(second).await.unwrap();
        assert_eq!(row("lock_until < now()"), "t", "free after the last release");
        let l = b.acquire(&name, &o).await.unwrap();
        assert_eq!(l.token.unwrap().0, token + 1, "the next holder's token");
        b.release(l).await.unwrap();
        a.close().await;
        b.close().await;
    }

    fn psql_try(name: &str) -> String {
        let sql = format!("SELECT pg_try_advisory_lock(hashtextextended('{name}', 0))");
        let out = psql().args(["-c", &sql]).output().unwrap();
        assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// While a psql session holds NAME (taken with the statement dlbench documents), neither
    /// design can take it, try-once or waiting; once psql unlocks, both can.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn psql_holds_dlbench_waits() {
        for kind in DESIGNS {
            let name = dlbench_core::conformance::unique_key("psql-holds");
            let mut holder = support::SqlSession::open(psql());
            holder.run(&dlbench_pg_advisory::psql_lock(&name));
            let backend = support::backend(kind).await;
            assert!(!backend.claims(&name).await.unwrap().is_empty(), "{kind}: claims() misses psql's lock");
            let client = backend.client().await.unwrap();
            let opts = AcquireOptions::default().with_ttl(Duration::from_secs(10));
            let r = client.acquire(&name, &opts.clone().with_wait(Duration::ZERO)).await;
            assert!(matches!(r, Err(LockError::Busy)), "{kind}: try-once on a lock psql holds: {r:?}");
            let r = client.acquire(&name, &opts.clone().with_wait(Duration::from_millis(500))).await;
            assert!(matches!(r, Err(LockError::Timeout(_))), "{kind}: waiting on a lock psql holds: {r:?}");
            holder.run(&format!("SELECT pg_advisory_unlock(hashtextextended('{name}', 0));"));
            let lease = client.acquire(&name, &opts.with_wait(Duration::from_secs(10))).await.expect("after psql unlocked");
            client.release(lease).await.unwrap();
            holder.quit();
            client.close().await;
        }
    }

    /// While dlbench holds NAME, psql's try-lock on `hashtextextended(NAME, 0)` is refused and
    /// its waiting lock times out; after the release psql gets it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dlbench_holds_psql_waits() {
        for kind in DESIGNS {
            let name = dlbench_core::conformance::unique_key("advisory-holds");
            let backend = support::backend(kind).await;
            let client = backend.client().await.unwrap();
            let lease = client.acquire(&name, &AcquireOptions::default()).await.unwrap();
            assert_eq!(psql_try(&name), "f", "{kind}: psql took a lock dlbench holds");
            let sql = format!("SET lock_timeout = '300ms'; SELECT pg_advisory_lock(hashtextextended('{name}', 0))");
            let out = psql().args(["-c", &sql]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && err.contains("lock timeout"), "{kind}: psql's waiting lock: {err}");
            client.release(lease).await.unwrap();
            assert_eq!(psql_try(&name), "t", "{kind}: psql cannot take the lock dlbench released");
            client.close().await;
        }
    }

    /// A holder that stays silent past its TTL: the transaction form's server ends its session
    /// (idle_in_transaction_session_timeout) and the next client gets the lock; the session
    /// form has no TTL, so the lock stays with the open connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn silent_holder_past_its_ttl() {
        let ttl = Duration::from_secs(1);
        for kind in DESIGNS {
            let name = dlbench_core::conformance::unique_key("silent");
            let backend = support::backend(kind).await;
            let a = backend.client().await.unwrap();
            let b = backend.client().await.unwrap();
            let opts = AcquireOptions::default().with_ttl(ttl);
            let la = a.acquire(&name, &opts.clone().with_wait(Duration::from_secs(5))).await.unwrap();
            let r = b.acquire(&name, &opts.clone().with_wait(ttl * 3)).await;
            match kind {
                BackendKind::PgAdvisoryXact => {
                    let lb = r.unwrap_or_else(|e| panic!("{kind}: the silent holder's lock never expired: {e}"));
                    let gone = a.release(la).await;
                    assert!(matches!(gone, Err(LockError::NotHeld(_))), "{kind}: the expired holder's release: {gone:?}");
                    b.release(lb).await.unwrap();
                }
                _ => {
                    assert!(matches!(r, Err(LockError::Timeout(_))), "{kind}: a live session's lock was taken: {r:?}");
                    a.release(la).await.expect("the session still holds its lock");
                }
            }
            a.close().await;
            b.close().await;
        }
    }
}

/// `GET_LOCK` against the `mariadb` command-line client holding the same name, and the
/// table lock's layout as the `mariadb` client reads it.
mod mariadb {
    use super::*;
    use std::process::Command;
    use dlbench_core::{AcquireOptions, LockError};

    /// The mariadb client on the test server, as a user would run it: batch, no column names.
    fn cli() -> Command {
        let s = support::endpoints().mariadb.as_ref().unwrap();
        let (host, port) = s.endpoints[0].rsplit_once(':').unwrap();
        let mut c = Command::new("mariadb");
        c.args(["-h", host, "-P", port, "-u", s.user.as_deref().unwrap(), "-D", s.database.as_deref().unwrap(), "-N", "-B", "--unbuffered"]);
        c
    }

    fn one(sql: &str) -> String {
        let out = cli().args(["-e", sql]).output().unwrap();
        assert!(out.status.success(), "mariadb: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// While a mariadb client session holds NAME (with the statement dlbench documents),
    /// dlbench cannot take it, try-once or waiting, and claims() names the client's
    /// connection; once the client releases, dlbench gets it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mariadb_client_holds_dlbench_waits() {
        let name = dlbench_core::conformance::unique_key("cli-holds");
        let mut holder = support::SqlSession::open(cli());
        assert_eq!(holder.run(&dlbench_mariadb::get_lock::mariadb_lock(&name)), vec!["1"]);
        let id = holder.run("SELECT CONNECTION_ID();");
        let backend = support::backend(BackendKind::MariadbGetLock).await;
        let claims = backend.claims(&name).await.unwrap();
        assert!(claims.iter().any(|c| c.contains(&format!("connection {}", id[0]))), "claims() misses the client's lock: {claims:?}");
        let client = backend.client().await.unwrap();
        let opts = AcquireOptions::default();
        let r = client.acquire(&name, &opts.clone().with_wait(Duration::ZERO)).await;
        assert!(matches!(r, Err(LockError::Busy)), "try-once on a lock the client holds: {r:?}");
        let r = client.acquire(&name, &opts.clone().with_wait(Duration::from_millis(400))).await;
        assert!(matches!(r, Err(LockError::Timeout(_))), "waiting on a lock the client holds: {r:?}");
        assert_eq!(holder.run(&format!("SELECT RELEASE_LOCK('{name}');")), vec!["1"]);
        let lease = client.acquire(&name, &opts.with_wait(Duration::from_secs(10))).await.expect("after the client released");
        client.release(lease).await.unwrap();
        holder.quit();
        client.close().await;
    }

    /// While dlbench holds NAME, the client's GET_LOCK on the same name times out (0) and
    /// IS_USED_LOCK names a connection; a waiting client is woken by dlbench's release.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dlbench_holds_mariadb_client_waits() {
        let name = dlbench_core::conformance::unique_key("get-lock-holds");
        let backend = support::backend(BackendKind::MariadbGetLock).await;
        let client = backend.client().await.unwrap();
        let lease = client.acquire(&name, &AcquireOptions::default()).await.unwrap();
        assert_eq!(one(&format!("SELECT GET_LOCK('{name}', 0.3)")), "0", "the client took a lock dlbench holds");
        assert_ne!(one(&format!("SELECT IS_USED_LOCK('{name}')")), "NULL");
        let mut waiter = support::SqlSession::open(cli());
        let started = std::time::Instant::now();
        let release = {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                client.release(lease).await.unwrap();
                client.close().await;
            })
        };
        // Blocks in the server until dlbench's release: granted well before its 20 s.
        assert_eq!(waiter.run(&format!("SELECT GET_LOCK('{name}', 20);")), vec!["1"]);
        assert!(started.elapsed() < Duration::from_secs(15), "the waiting client was not woken by the release");
        release.await.unwrap();
        waiter.quit();
    }

    /// The table design's row, as the mariadb client reads it: held with the holder's owner
    /// and a token that grows by one per grant, `lock_until` from the server's clock.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_table_row_is_the_lock() {
        let name = dlbench_core::conformance::unique_key("row");
        let backend = support::backend(BackendKind::Mariadb).await;
        let client = backend.client().await.unwrap();
        let opts = AcquireOptions::default().with_ttl(Duration::from_secs(60));
        let row = |what: &str| one(&format!("SELECT {what} FROM dlbench_locks WHERE name = '{name}'"));
        let a = client.acquire(&name, &opts).await.unwrap();
        assert_eq!(row("token"), a.token.unwrap().to_string());
        assert_eq!(row("locked_by"), a.handle.id);
        assert_eq!(row("TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), lock_until) BETWEEN 50 AND 60"), "1");
        client.release(a).await.unwrap();
        assert_eq!(row("lock_until <= UTC_TIMESTAMP(6)"), "1", "released row still live");
        // Again and again on the same connection (the prepared statement re-executed): each
        // grant's token is the row's, one up, as the OK packet's last-insert id carries it.
        for n in 2..=4 {
            let b = client.acquire(&name, &opts).await.unwrap();
            assert_eq!(row("token"), b.token.unwrap().to_string());
            assert_eq!(b.token.unwrap().0, n, "grant {n}'s token");
            client.release(b).await.unwrap();
        }
        client.close().await;
    }
}

mod redlock_faults {
    use super::*;
    use dlbench::connect::{self, Timeouts};
    use dlbench::cluster::local::LocalTarget;
    use dlbench_core::{AcquireOptions, LockError};
    use std::time::Instant;

    /// A paused (SIGSTOPped) Redlock node costs a release its per-node bound, not the request
    /// timeout; when no node answers in time, the release's outcome is unknown.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn release_waits_a_paused_node_only_its_per_node_bound() {
        let dir = std::env::temp_dir().join(format!("dlbench-test-redlock-paused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let target = LocalTarget::start(&dir, &[BackendKind::Redlock], Default::default()).await.expect("start the Redlock nodes");
        // A request timeout far above the per-node bound (100 ms for a 10 s TTL).
        let t = Timeouts { connect: Duration::from_secs(5), request: Duration::from_secs(20) };
        let backend = connect::connect(BackendKind::Redlock, target.endpoints(), t, None).await.expect("connect");
        let client = backend.client().await.expect("client");
        let nodes = target.nodes_of(BackendKind::Redlock);
        let opts = AcquireOptions::default().with_ttl(Duration::from_secs(10)).with_wait(Duration::from_secs(5));

        // One node paused: the other four delete, the release succeeds.
        let lease = client.acquire(&dlbench_core::conformance::unique_key("redlock-paused-1"), &opts).await.expect("acquire");
        assert!(nodes[0].pause(), "pause node 0");
        let started = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(60), client.release(lease)).await;
        let took = started.elapsed();
        nodes[0].resume();
        assert!(matches!(r, Ok(Ok(()))), "release with 4 of 5 nodes answering: {r:?}");
        assert!(took < Duration::from_secs(5), "release took {took:?} with one node paused (request timeout 20 s)");

        // Every node paused: nobody confirms, so the release may or may not have happened.
        let lease = client.acquire(&dlbench_core::conformance::unique_key("redlock-paused-all"), &opts).await.expect("acquire");
        for n in &nodes {
            assert!(n.pause(), "pause {n:?}");
        }
        let started = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(60), client.release(lease)).await;
        let took = started.elapsed();
        for n in &nodes {
            n.resume();
        }
        assert!(matches!(r, Ok(Err(LockError::Indeterminate(_)))), "release with no node answering: {r:?}");
        assert!(took < Duration::from_secs(5), "release took {took:?} with every node paused (request timeout 20 s)");
        client.close().await;
        drop(target);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The reentrant forms of the recipes: Curator's `InterProcessMutex` (per thread there, per
/// client here) and the owner check in the PostgreSQL row. The holder acquiring again is
/// granted and counted (another client still finds it held after one release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_and_the_postgres_row_are_reentrant() {
    use dlbench_core::conformance::{reentrancy, Reentrancy};
    for kind in [BackendKind::Zookeeper, BackendKind::Postgres] {
        assert_eq!(reentrancy(support::backend(kind).await).await, Reentrancy::Granted { counted: true }, "{kind}");
    }
}

/// What each server grants for a requested TTL, asked of the server: etcd rounds 2.5 s up to
/// a whole 3 s lease; ZooKeeper raises a 100 ms session to its minimum (the local target's
/// `minSessionTimeout=1000`); Redis and the lease table keep the request to the millisecond,
/// and NATS as the max age of the bucket it makes for that TTL; session-level advisory locks
/// and `GET_LOCK` have no TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_says_the_ttl_it_grants() {
    use dlbench_core::GrantedTtl;
    let asked = Duration::from_millis(2500);
    let granted = |kind| async move { support::backend(kind).await.granted_ttl(asked).await.unwrap() };
    assert_eq!(granted(BackendKind::Etcd).await, GrantedTtl::Session { ms: 3000 });
    match support::backend(BackendKind::Zookeeper).await.granted_ttl(Duration::from_millis(100)).await.unwrap() {
        GrantedTtl::Session { ms } => assert_eq!(ms, 1000, "ZooKeeper negotiated {ms} ms for 100 ms"),
        other => panic!("zookeeper grants {other:?}"),
    }
    for kind in [BackendKind::Redis, BackendKind::Postgres, BackendKind::PgAdvisoryXact, BackendKind::Nats] {
        assert_eq!(granted(kind).await, GrantedTtl::Lock { ms: 2500 }, "{kind}");
    }
    for kind in [BackendKind::PgAdvisory, BackendKind::MariadbGetLock] {
        assert_eq!(granted(kind).await, GrantedTtl::None, "{kind}");
    }
}

/// Chubby's lock-delay on the designs that offer it (etcd's client recipe).
mod lock_delay {
    use super::*;
    use dlbench_core::{conformance::unique_key, AcquireOptions};
    use std::time::Instant;

    /// What `dlbench lock` checks before connecting agrees with what each backend says.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_kind_and_the_backend_agree() {
        for kind in BackendKind::ALL.into_iter().filter(|k| *k != BackendKind::Memory) {
            let caps = support::backend(kind).await.capabilities();
            assert_eq!(caps.lock_delay, kind.lock_delay(), "{kind}");
        }
    }

    /// A waiter queued behind a holder whose session is lost (abandoned: keep-alives stop,
    /// the lease expires on the servers) enters no sooner than the delay after; behind a
    /// holder that releases, it enters at once. A lower bound and a generous upper one: the
    /// delay is a sleep, so a slow machine only lengthens the first and the hand-off takes
    /// milliseconds, not the 6 s delay.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waits_after_a_lost_session_not_after_a_release() {
        let delay = Duration::from_secs(6);
        let backend = support::backend(BackendKind::Etcd).await;
        let o = AcquireOptions::default().with_ttl(Duration::from_secs(2)).with_wait(Duration::from_secs(30));
        for lost in [true, false] {
            let key = unique_key("lock-delay");
            let a = backend.client().await.unwrap();
            let held = a.acquire(&key, &o).await.unwrap();
            let b = backend.client().await.unwrap();
            let waiter = {
                let (key, o) = (key.clone(), o.clone().with_lock_delay(delay));
                tokio::spawn(async move {
                    let r = b.acquire(&key, &o).await.map(|l| (Instant::now(), l));
                    (b, r)
                })
            };
            // Let the waiter queue behind the holder first.
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(!waiter.is_finished(), "the waiter got in while the lock was held");
            let gone_at = Instant::now();
            if lost {
                a.abandon().await;
            } else {
                a.release(held).await.unwrap();
            }
            let (b, r) = waiter.await.unwrap();
            let (granted_at, l) = r.unwrap_or_else(|e| panic!("lost={lost}: the waiter never got the lock: {e}"));
            let after = granted_at - gone_at;
            if lost {
                assert!(after >= delay, "granted {after:?} after the holder's session stopped, under the {delay:?} lock-delay");
            } else {
                assert!(after < delay, "granted {after:?} after a release: the lock-delay applied to a released lock");
            }
            b.release(l).await.unwrap();
            a.close().await;
            b.close().await;
        }
    }
}
