//! P1 and J2: the power is lost under a holder (issue 36). A holder acquires and its grant
//! is acknowledged; at once (tens of milliseconds later, well before any server's periodic
//! flush) every node of the backend loses power together (`dlbench-faultfs` drops what
//! the server had not synced); the nodes restart on what was durable; a fresh client asks
//! for the lock, its wait bounded so that it ends while the first holder's lease is still
//! valid and the holder is still inside its critical section. Granted: the grant did not
//! survive (and the resource sees two holders). Refused: it did.
//!
//! What each backend and server setting is expected to do, with the published source for
//! it, is [`expectation`].

use crate::faultlog::Mark;
use std::time::{Duration, Instant};

use dlbench_core::Lease;

use super::stage::{opts, Ctx, Observed, Stage};
use crate::durability::Durability;
use crate::judgement::{Expect, Expected, PowerSeen};
use crate::kind::BackendKind;

/// The holder's TTL: long enough for every backend's nodes (three ZooKeeper or NATS
/// servers recovering their logs) to restart and answer while the holder's lease is valid.
pub const TTL: Duration = Duration::from_secs(15);

/// The longest the next client waits; it never waits past the holder's lease less
/// [`MARGIN`].
pub const NEXT_WAIT: Duration = Duration::from_secs(3);
pub const MARGIN: Duration = Duration::from_secs(1);

const REDIS_NONE: Expected = Expected {
    expect: Expect::LockLost,
    setting: "no persistence (appendonly no, save \"\")",
    source: "antirez, Is Redlock safe? (2016); Kleppmann, How to do distributed locking (2016)",
    finding: "a Redis node that restarts without persistence has forgotten every lock it granted",
};
const SESSION: Expected = Expected {
    expect: Expect::LockLost,
    setting: "any (the lock lives in a server session)",
    source: "PostgreSQL docs, advisory locks; MariaDB docs, GET_LOCK",
    finding: "the lock is held by a server session, in memory: a server restart ends every session and frees it",
};
const SYNCED: &str = "synced before the grant is acknowledged: the grant survives a power loss";

/// What `kind` is expected to do at durability `level` (`crate::durability` sets the servers).
pub fn expectation(kind: BackendKind, level: Durability) -> Expected {
    use BackendKind as K;
    let relaxed = level == Durability::Relaxed;
    match kind {
        K::Redis | K::Redisson | K::Redlock => match level {
            Durability::Default => REDIS_NONE,
            Durability::Strict => Expected {
                expect: Expect::LockHeld,
                setting: "appendonly yes, appendfsync always",
                source: "Redis docs, persistence (AOF, appendfsync always)",
                finding: "every write is fsynced before it is acknowledged: nothing acknowledged is lost",
            },
            Durability::Relaxed => Expected {
                expect: Expect::MayLoseLock,
                setting: "appendonly yes, appendfsync everysec",
                source: "Redis docs, persistence (AOF, appendfsync everysec)",
                finding: "fsync every second: a crash can lose the last second of writes",
            },
        },
        K::PgAdvisory | K::PgAdvisoryXact | K::MariadbGetLock => SESSION,
        K::Postgres if relaxed => Expected {
            expect: Expect::MayLoseLock,
            setting: "synchronous_commit = off",
            source: "PostgreSQL docs, asynchronous commit (wal_writer_delay)",
            finding: "a crash can lose the commits of the last few hundred milliseconds (up to three times wal_writer_delay, 200 ms)",
        },
        K::Postgres => Expected {
            expect: Expect::LockHeld,
            setting: "synchronous_commit = on",
            source: "PostgreSQL docs, WAL reliability and synchronous_commit",
            finding: SYNCED,
        },
        K::Mariadb if relaxed => Expected {
            expect: Expect::MayLoseLock,
            setting: "innodb_flush_log_at_trx_commit = 2",
            source: "MariaDB docs, innodb_flush_log_at_trx_commit",
            finding: "the log is written at each commit and flushed about once a second: up to a second of commits can be lost",
        },
        K::Mariadb => Expected {
            expect: Expect::LockHeld,
            setting: "innodb_flush_log_at_trx_commit = 1",
            source: "MariaDB docs, innodb_flush_log_at_trx_commit",
            finding: SYNCED,
        },
        K::Zookeeper if relaxed => Expected {
            expect: Expect::LockLost,
            setting: "forceSync = no",
            source: "ZooKeeper administrator's guide, forceSync",
            finding: "without forceSync the transaction log is not synced: everything since the last flush is lost",
        },
        K::Zookeeper => Expected {
            expect: Expect::LockHeld,
            setting: "forceSync = yes",
            source: "ZooKeeper administrator's guide, forceSync",
            finding: "the transaction log is fsynced before a write is acknowledged",
        },
        K::Etcd | K::EtcdV3lock => Expected {
            expect: Expect::LockHeld,
            setting: "WAL fsync on every commit (3.4 has no setting to skip it)",
            source: "etcd docs, persistent storage and the WAL; --unsafe-no-fsync only from 3.5",
            finding: SYNCED,
        },
        K::Nats => Expected {
            expect: Expect::LockLost,
            setting: "JetStream's own periodic flush (2.9.10 refuses sync_interval; 2.12.1 defaults it to 2 min)",
            source: "Jepsen, NATS 2.12.1 (December 2025)",
            finding: JEPSEN_NATS,
        },
        K::Memory => Expected { expect: Expect::LockLost, setting: "in memory", source: "", finding: "" },
    }
}

const JEPSEN_NATS: &str = "by default JetStream flushes to disk only every two minutes: acknowledged writes are lost when every node loses power";

/// Every node of the backend loses power at once; returns (the evidence per node, the bytes
/// dropped in all, or why the cut did not take effect).
async fn cut_all(ctx: &Ctx) -> (Vec<String>, Result<u64, String>) {
    let nodes = ctx.nodes();
    let cuts = nodes.iter().map(|n| {
        let n = n.clone();
        tokio::task::spawn_blocking(move || (n.power_loss(), n.pid(), n.layer.as_ref().is_some_and(|l| l.mounted())))
    });
    let mut details = Vec::new();
    let mut total: Result<u64, String> = Ok(0);
    for (n, r) in nodes.iter().zip(futures::future::join_all(cuts).await) {
        let r = r.map_err(|e| e.to_string()).and_then(|(acc, pid, mounted)| {
            let acc = acc?;
            match (pid, mounted, dropped_bytes(&acc)) {
                (Some(pid), _, _) => Err(format!("NOT killed: pid {pid} still runs")),
                (None, true, _) => Err(format!("NOT cut: {} is still mounted", n.data.display())),
                (None, false, None) => Err(format!("NOT cut: the layer says {acc:?}")),
                (None, false, Some(b)) => Ok((b, acc)),
            }
        });
        match r {
            Ok((b, acc)) => {
                details.push(format!("{}: process gone; {}", n.name, acc.trim_start_matches("faultfs: ")));
                total = total.map(|t| t + b);
            }
            Err(e) => {
                details.push(format!("{}: {e}", n.name));
                if total.is_ok() {
                    total = Err(format!("{}: {e}", n.name));
                }
            }
        }
    }
    (details, total)
}

/// N from the layer's "power loss: dropped N unsynced bytes in M files".
pub fn dropped_bytes(account: &str) -> Option<u64> {
    let rest = account.split("power loss: dropped ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The next client asks until it is granted, refused at the end of its wait, or the wait
/// (bounded by the holder's lease) runs out on errors. Returns the lease if granted.
async fn next_asks(st: &Stage<'_>, holder: &Lease, seen: &mut PowerSeen, restarted: Instant) -> anyhow::Result<()> {
    let end = holder.valid_until.checked_sub(MARGIN).unwrap_or(holder.valid_until).min(Instant::now() + NEXT_WAIT);
    if end <= Instant::now() + Duration::from_millis(200) {
        seen.answer = format!("not asked: the restart outlasted the holder's lease ({TTL:?})");
        return Ok(());
    }
    // Servers that did not come back answer nothing: said, not an error of the entry.
    let next = match st.ctx.dedicated().await {
        Ok((_, b)) => st.actor(1, "next", &b).await.map_err(anyhow::Error::from),
        Err(e) => Err(e),
    };
    let next = match next {
        Ok(n) => n,
        Err(e) => {
            seen.answer = format!("the next client could not connect: {e:#}");
            return Ok(());
        }
    };
    let mut last = String::new();
    let mut lease = None;
    while Instant::now() < end {
        let wait = end.saturating_duration_since(Instant::now());
        match next.acquire(&st.key, &opts(TTL, wait)).await {
            Ok(l) => {
                seen.granted = Some(true);
                seen.answer = format!("granted {} ms after the restart, token {:?}", restarted.elapsed().as_millis(), l.token.map(|t| t.0));
                lease = Some(l);
                break;
            }
            Err(e) if e.is_contention() => {
                seen.granted = Some(false);
                seen.answer = format!("refused after waiting {} ms", wait.as_millis());
                break;
            }
            Err(e) => {
                last = e.to_string();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if seen.granted.is_none() {
        seen.answer = format!("no grant and no refusal within the wait: {last}");
    }
    if let Some(l) = lease.take() {
        // Inside while the first holder still is: the resource sees the two holders.
        st.use_and_release(&next, l).await;
    }
    next.client.close().await;
    Ok(())
}

/// P1 / J2 on one backend: the power under the holder, on every node at once.
pub async fn under_holder(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let st = Stage::open(ctx, name, TTL, 2).await;
    let nodes = ctx.nodes();
    anyhow::ensure!(nodes.iter().all(|n| n.layer.is_some()), "{}'s nodes are not on the power-loss layer", ctx.kind);
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let targets: Vec<&str> = names.iter().map(String::as_str).collect();
    let (_, hb) = ctx.dedicated().await?;
    let holder = st.actor(0, "holder", &hb).await?;
    let lease = holder.acquire(&st.key, &opts(TTL, Duration::from_secs(10))).await?;
    let granted = Instant::now();
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    let (details, effect) = cut_all(ctx).await;
    let cut_ms = granted.elapsed().as_millis();
    st.event_with("power-loss:all", Mark::Start, &targets, &format!("checked: {}", details.join("; ")));
    st.note(format!("power cut on {} node(s) {cut_ms} ms after the grant was acknowledged", nodes.len()));
    for n in &nodes {
        n.start().map_err(|e| anyhow::anyhow!("restart {}: {e}", n.name))?;
    }
    let healthy = ctx.target.wait_healthy(ctx.kind).await;
    let restarted = Instant::now();
    st.event("power-loss:all", Mark::End, &targets);
    match healthy {
        Ok(()) => st.note(format!("restarted and healthy {} ms after the grant", granted.elapsed().as_millis())),
        Err(e) => st.note(format!("not healthy after the restart: {e}")),
    }
    let mut seen = PowerSeen { effect: Some(effect), granted: None, answer: String::new() };
    next_asks(&st, &lease, &mut seen, restarted).await?;
    // The first holder, still within its lease, finishes its work.
    sv.write_incremented();
    sv.exit();
    holder.section(sv.record());
    drop(sv);
    match holder.release(lease).await {
        Ok(()) => st.note("the first holder's release succeeded"),
        Err(e) => st.note(format!("the first holder's release: {e}")),
    }
    holder.client.abandon().await;
    let mut o = st.finish();
    o.power = Some(seen);
    Ok(o)
}

#[cfg(test)]
mod tests {
    //! The judgement fails on observations doctored to contradict each expectation.
    use super::*;
    use crate::judgement::{meets, Seen};

    fn judge(expect: Expect, p: &PowerSeen) -> (bool, String) {
        let seen = Seen {
            overlaps: u64::from(p.granted == Some(true)),
            lost_updates: 0,
            stale_refused: 0,
            legit_refused: 0,
            token_inversions: 0,
            fault_took_effect: true,
            exposure: 1.0,
            expired_waiter_acquired: None,
            leftovers: None,
            availability: None,
            recovery_bound_ms: 0,
            power: Some(p),
        };
        meets(expect, &seen)
    }
    fn seen(effect: Result<u64, &str>, granted: Option<bool>) -> PowerSeen {
        PowerSeen { effect: Some(effect.map_err(str::to_string)), granted, answer: "as doctored".into() }
    }

    #[test]
    fn a_lost_lock_needs_a_grant_and_an_effect() {
        assert!(judge(Expect::LockLost, &seen(Ok(4096), Some(true))).0);
        let (ok, why) = judge(Expect::LockLost, &seen(Ok(4096), Some(false)));
        assert!(!ok && why.starts_with("held"), "{why}");
        let (ok, why) = judge(Expect::LockLost, &seen(Ok(0), Some(false)));
        assert!(!ok && why.starts_with("no effect"), "nothing dropped and held is no effect: {why}");
        let (ok, why) = judge(Expect::LockLost, &seen(Err("NOT killed: pid 7 still runs"), Some(true)));
        assert!(!ok && why.starts_with("no effect"), "a cut that did not take effect: {why}");
        let (ok, why) = judge(Expect::LockLost, &seen(Ok(10), None));
        assert!(!ok && why.starts_with("no answer"), "{why}");
    }

    #[test]
    fn a_held_lock_fails_on_a_grant() {
        assert!(judge(Expect::LockHeld, &seen(Ok(0), Some(false))).0, "held with everything synced");
        let (ok, why) = judge(Expect::LockHeld, &seen(Ok(512), Some(true)));
        assert!(!ok && why.starts_with("LOST"), "{why}");
        assert!(!judge(Expect::LockHeld, &seen(Err("NOT cut"), Some(false))).0);
        assert!(!judge(Expect::LockHeld, &PowerSeen::default()).0, "never cut");
    }

    #[test]
    fn a_flush_race_accepts_either_and_says_which() {
        let (ok, why) = judge(Expect::MayLoseLock, &seen(Ok(100), Some(true)));
        assert!(ok && why.starts_with("LOST"), "{why}");
        let (ok, why) = judge(Expect::MayLoseLock, &seen(Ok(0), Some(false)));
        assert!(ok && why.starts_with("held"), "{why}");
        assert!(!judge(Expect::MayLoseLock, &seen(Err("NOT cut"), Some(true))).0);
        assert!(!judge(Expect::MayLoseLock, &seen(Ok(100), None)).0);
    }

    #[test]
    fn a_power_expectation_needs_a_power_observation() {
        let mut s = Seen {
            overlaps: 1,
            lost_updates: 0,
            stale_refused: 0,
            legit_refused: 0,
            token_inversions: 0,
            fault_took_effect: true,
            exposure: 1.0,
            expired_waiter_acquired: None,
            leftovers: None,
            availability: None,
            recovery_bound_ms: 0,
            power: None,
        };
        assert!(!meets(Expect::LockLost, &s).0);
        let p = seen(Ok(1), Some(true));
        s.power = Some(&p);
        assert!(!meets(Expect::NoViolation, &s).0, "the overlap of a lost lock is a violation");
    }

    #[test]
    fn the_layers_account_is_read() {
        assert_eq!(dropped_bytes("faultfs: power loss: dropped 4096 unsynced bytes in 2 files"), Some(4096));
        assert_eq!(dropped_bytes("faultfs: power loss: kept (wrong layer) 4096 unsynced bytes in 2 files"), None);
        assert_eq!(dropped_bytes("faultfs: stopped"), None);
    }
}
