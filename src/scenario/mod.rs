//! The failure-scenario catalogue (references.md, S1-S10): each entry says how to cause it,
//! what to expect without and with fencing, and checks the observation against that.
//!
//! S1-S7 are choreographed ([`scripts`]): a holder, a next client, and one fault placed
//! exactly where it hurts. S8-S10 run the hot-key load with a nemesis. One run measures both
//! sides of fencing (the resource keeps a plain and a fenced register), so every entry
//! reports `fencing off` and `fencing on`.

mod actor;
pub mod command;
pub mod scripts;
pub mod users;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connect::{self, Timeouts};
use crate::driver::{self, PhaseOutputs, PhaseResult};
use crate::history::HistoryWriter;
use crate::kind::BackendKind;
use crate::nemesis::{FaultSpec, Nemesis};
use crate::stats::Totals;
use crate::cluster::local::{LocalTarget, TargetOptions};
use crate::judgement::{Availability, WEAK_EXPOSURE};
use crate::workload::Workload;
use scripts::{Ctx, Forget, Observed, Stall};

pub use crate::summary::scenario::{Expect, Outcome};

/// How long after a fault heals a service is expected to grant the lock again: the figure a
/// recovery time is reported against, and what the quiet tail of a nemesis entry is sized
/// by. It is not part of the verdict: a recovery time is a timing, and on a shared machine
/// (two leader kills in ten seconds, a 3 s session lost during the election, a loaded CI
/// host) ZooKeeper's measured 4-12 s; what the verdict asks is that the service came back.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(10);

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

/// How long the holder stalls in the fixed-length cases of S1 and S6, and the lock-delay
/// the next client keeps in the lock-delay cases: the stall ends 3 s after the session
/// (3 s TTL) can have expired, well before expiry plus the delay.
pub const FIXED_STALL: Duration = Duration::from_secs(6);
pub const LOCK_DELAY: Duration = Duration::from_secs(6);

/// The cases of S1 and S6 on a backend: (name, timing, expected without, with fencing). On
/// a design with Chubby's lock-delay they show what it buys and what it does not: a
/// fixed-length stall without and with the delay, and a stall that outlasts the delay.
fn stall_cases(id: &str, kind: BackendKind) -> Vec<(&'static str, scripts::Timing, Expect, Expect)> {
    let plain = scripts::Timing::default();
    // A session advisory lock (and GET_LOCK) has no TTL: the server keeps it while the
    // paused holder's connection stays open, so the next client waits instead of getting in.
    if id == "S1" && matches!(kind, BackendKind::PgAdvisory | BackendKind::MariadbGetLock) {
        return vec![("", plain, Expect::NoViolation, Expect::NoViolation)];
    }
    let mut v = vec![("", plain, Expect::Violation, Expect::Rejected)];
    if kind.lock_delay() {
        let fixed = scripts::Timing { stall_for: Some(FIXED_STALL), lock_delay: Duration::ZERO };
        v.push(("stall 6 s", fixed, Expect::Violation, Expect::Rejected));
        v.push(("stall 6 s, lock-delay 6 s", scripts::Timing { lock_delay: LOCK_DELAY, ..fixed }, Expect::NoViolation, Expect::NoViolation));
        v.push(("lock-delay 6 s, stall outlasting it", scripts::Timing { lock_delay: LOCK_DELAY, ..plain }, Expect::Violation, Expect::Rejected));
    }
    v
}

/// The cases of an entry on a backend, with what each expects (without, with fencing).
fn cases(id: &str, kind: BackendKind, has_tokens: bool) -> Vec<(&'static str, Expect, Expect)> {
    if is_measurement(id) {
        return Vec::new();
    }
    let fenced = |v: Expect| if has_tokens || v == Expect::NoViolation { v } else { Expect::Violation };
    match id {
        "S1" | "S6" => stall_cases(id, kind).into_iter().map(|(c, _, off, on)| (c, off, fenced(on))).collect(),
        "S2" | "S3" => vec![("", Expect::Violation, fenced(Expect::Rejected))],
        // The promoted replica missed the holder's INCR too: its counter hands the next
        // holder the token the old holder has, so fencing refuses the new, legitimate holder.
        "S5" => vec![("", Expect::Violation, fenced(Expect::FencingBroken))],
        "J1" => vec![
            ("process pause", Expect::Violation, fenced(Expect::Rejected)),
            ("partition", Expect::Violation, fenced(Expect::Rejected)),
        ],
        "S4" => vec![
            ("restart at once", Expect::Violation, fenced(Expect::Rejected)),
            ("restart after a TTL", Expect::NoViolation, Expect::NoViolation),
        ],
        "S7" => vec![("", Expect::MustFail, Expect::MustFail)],
        // A paused follower stalls the clients attached to it (their requests wait on it until
        // it resumes or their timeouts move them): on a hot key, a FIFO queue stalls behind
        // them. Measured here as a grant rate near zero during the pause; the entry asks for
        // no violation and recovery, and reports the rate.
        _ => vec![("", Expect::Recovers, Expect::Recovers)],
    }
}

/// Did the observation meet the expectation? Every branch can say no.
pub fn judge(expect: Expect, fenced: bool, o: &Observed, availability: Option<&Availability>) -> (bool, String) {
    let r = &o.resource.total;
    let lost = if fenced { r.lost_updates_fenced } else { r.lost_updates };
    let overlap_txt = format!("{} overlap(s), {} lost update(s)", r.overlaps, lost);
    let clean = r.overlaps == 0 && lost == 0;
    let applied = o.nemesis.iter().any(|e| e.phase == "start");
    let exposure = o.resource.exposure().unwrap_or(0.0);
    match expect {
        Expect::Violation => (!clean, overlap_txt),
        Expect::NoViolation => (clean, overlap_txt),
        Expect::Rejected => {
            let stale = r.stale_refused();
            let ok = stale > 0 && lost == 0 && r.legit_refused == 0 && r.token_inversions == 0;
            let mut txt = format!("{stale} stale write(s) refused, {lost} lost update(s)");
            if r.legit_refused > 0 || r.token_inversions > 0 {
                txt.push_str(&format!(", tokens out of order: {} legitimate refused, {} inversion(s)", r.legit_refused, r.token_inversions));
            }
            (ok, txt)
        }
        Expect::FencingBroken => (
            r.legit_refused > 0 || r.token_inversions > 0,
            format!(
                "{} legitimate write(s) refused, {} token inversion(s), {} stale write(s) refused",
                r.legit_refused,
                r.token_inversions,
                r.stale_refused()
            ),
        ),
        Expect::MustFail => {
            let left = match &o.leftovers {
                Some(Ok(v)) if v.is_empty() => Ok(()),
                Some(Ok(v)) => Err(format!("left on the servers: {}", v.join(", "))),
                Some(Err(e)) => Err(format!("could not read the servers: {e}")),
                None => Err("the servers were not read".to_string()),
            };
            match (o.expired_waiter_acquired, left) {
                (Some(false), Ok(())) => (true, "the expired waiter's acquire failed; nothing left behind".into()),
                (Some(false), Err(e)) => (false, format!("the expired waiter's acquire failed, but {e}")),
                (Some(true), _) => (false, "the expired waiter was told it holds the lock".into()),
                (None, _) => (false, "not observed".into()),
            }
        }
        Expect::Recovers => {
            let Some(a) = availability else { return (false, format!("{overlap_txt}; no availability measured")) };
            // Every condition is checked and every failed one said.
            let mut failed = Vec::new();
            if !clean {
                failed.push("a violation".to_string());
            }
            if !applied {
                failed.push("the fault was never applied".to_string());
            }
            if exposure < WEAK_EXPOSURE {
                failed.push(format!("weak evidence: holders inside {} of the time", crate::judgement::percent(exposure)));
            }
            let bound = RECOVERY_BOUND.as_millis() as u64;
            let rec = if !a.recovered {
                failed.push("no grant after a heal".to_string());
                format!("NOT recovered ({} ms after a heal, to the end)", a.recovery_ms)
            } else if a.recovery_ms > bound {
                format!("recovered {} ms after the heal (slower than the {bound} ms expected)", a.recovery_ms)
            } else {
                format!("recovered {} ms after the heal (expected within {bound} ms)", a.recovery_ms)
            };
            let mut txt = format!(
                "{overlap_txt}; {rec}; grant rate during the fault {} of normal",
                a.ratio.map_or("unknown".into(), |r| format!("{:.0}%", r * 100.0))
            );
            if !failed.is_empty() {
                txt.push_str(&format!(" -- {}", failed.join(", ")));
            }
            (failed.is_empty(), txt)
        }
    }
}

/// The target options the chosen entries need.
pub fn target_options(ids: &[&str]) -> TargetOptions {
    TargetOptions { proxies: true, clock_shim: ids.contains(&"S3"), redis_replica: ids.contains(&"S5"), password: None, connect_timeout: None }
}

/// S8-S10: the hot-key load with faults from a nemesis.
async fn with_nemesis(
    ctx: &Ctx,
    id: &str,
    fault: &str,
    cancel: &CancellationToken,
) -> anyhow::Result<(PhaseResult, Observed)> {
    let w = Workload {
        name: id.to_string(),
        clients: 8,
        keys: 1,
        // Faults in the first half; the second half, longer than the recovery bound, shows
        // whether and when the service came back.
        duration: RECOVERY_BOUND * 2 + Duration::from_secs(8),
        warmup: Duration::from_secs(1),
        seed: Some(1),
        // Holders inside long enough for a second holder to be seen.
        hold: crate::workload::Dist::Fixed(crate::run::FAULT_HOLD),
        // A claim orphaned by the fault (a holder whose release could not reach the servers)
        // blocks the key until its lease or session expires: the choreographed scenarios'
        // short TTL lets the service recover within the phase.
        ttl: scripts::TTL,
        ..Workload::default()
    };
    let target = ctx.target.clone();
    let kind = ctx.kind;
    let history = ctx.history.clone();
    let spec: FaultSpec = fault.parse().map_err(anyhow::Error::msg)?;
    let name = id.to_string();
    let runner: driver::FaultRunner = Box::new(move |epoch, stop| {
        Box::pin(async move {
            let n = Nemesis::new(target, kind, &name, epoch, Some(history));
            n.run(&[spec], Duration::from_secs(8), stop).await.map_err(anyhow::Error::msg)?;
            Ok(n.events())
        })
    });
    let out = PhaseOutputs {
        history: Some((ctx.history.clone(), kind.name().into())),
        faults: Some(runner),
        quiet_tail: Some(RECOVERY_BOUND + Duration::from_secs(4)),
        ..Default::default()
    };
    let p = driver::run_phase(ctx.backend.clone(), &w, &ctx.run_id, cancel, out).await?;
    let o = Observed { phase: p.phase.clone(), ..Observed::of(p.resource.clone(), p.measured, p.nemesis.clone()) };
    Ok((p, o))
}

/// The result of one entry on one backend: its phase (for the summary) and its cases.
pub struct EntryResult {
    pub capabilities: dlbench_core::Capabilities,
    pub phases: Vec<PhaseResult>,
    pub observed: Vec<(String, Observed)>,
    /// The U entries' measurements, each with its evidence.
    pub hits: Vec<users::Measured>,
}

/// Run entry `id` on `kind`. Ends with every node of the backend healed and healthy.
pub async fn run_entry(
    target: &Arc<LocalTarget>,
    kind: BackendKind,
    id: &str,
    history: &HistoryWriter,
    run_id: &str,
    groups: &Arc<AtomicU32>,
    sizes: &users::Sizes,
    cancel: &CancellationToken,
) -> anyhow::Result<EntryResult> {
    let backend = connect::connect(kind, target.endpoints(), Timeouts::default(), None).await?;
    let ctx = Ctx {
        target: target.clone(),
        kind,
        backend,
        history: history.clone(),
        run_id: run_id.to_string(),
        groups: groups.clone(),
    };
    let mut phases = Vec::new();
    let mut observed = Vec::new();
    let mut hits = Vec::new();
    // One scripted phase: its case name (empty for a single-case entry), its history segment
    // and workload name, what it observed.
    let mut push = |case: &str, name: &str, o: Observed| {
        let w = Workload { name: name.to_string(), clients: 2, keys: 1, ttl: scripts::TTL, warmup: Duration::ZERO, ..Workload::default() };
        let totals: Totals = o.recorder.totals();
        let mut p = PhaseResult::scripted(w, totals, o.elapsed, o.resource.clone(), o.nemesis.clone());
        p.phase = o.phase.clone();
        phases.push(p);
        observed.push((case.to_string(), o));
    };
    match id {
        "S1" | "S6" => {
            let stall = if id == "S1" { Stall::Pause } else { Stall::Partition };
            for (case, timing, _, _) in stall_cases(id, kind) {
                let name = if case.is_empty() { id.to_string() } else { format!("{id}-{}", case.replace([' ', ','], "-").replace("--", "-")) };
                push(case, &name, scripts::stalled_holder(&ctx, &name, stall, scripts::TTL, timing).await?);
            }
        }
        "J1" => {
            // Jepsen's lease: 2 s.
            let ttl = Duration::from_secs(2);
            for (case, stall) in [("process pause", Stall::Pause), ("partition", Stall::Partition)] {
                let name = format!("J1-{}", case.replace(' ', "-"));
                push(case, &name, scripts::stalled_holder(&ctx, &name, stall, ttl, scripts::Timing::default()).await?);
            }
        }
        "S2" => push("", id, scripts::delayed_write(&ctx, id).await?),
        "S3" => push("", id, scripts::redlock_forget(&ctx, id, Forget::ClockJump).await?),
        "S4" => {
            for (case, how) in [("restart at once", Forget::RestartNow), ("restart after a TTL", Forget::RestartAfterTtl)] {
                let name = format!("S4-{}", case.replace(' ', "-"));
                push(case, &name, scripts::redlock_forget(&ctx, &name, how).await?);
            }
        }
        "S5" => push("", id, scripts::failover(&ctx, id).await?),
        "S7" => push("", id, scripts::expired_waiter(&ctx, id).await?),
        "S8" | "S9" | "S10" => {
            let fault = match id {
                "S8" => "kill:leader",
                "S9" => "pause:follower",
                _ => "kill",
            };
            let (p, o) = with_nemesis(&ctx, id, fault, cancel).await?;
            phases.push(p);
            observed.push((String::new(), o));
        }
        "U1" => {
            for loss in users::losses(ctx.backend.capabilities().expiry) {
                hits.push(users::notice(&ctx, loss).await?);
            }
        }
        "U6" => {
            for (case, mode, xact, trouble) in users::poolings(kind) {
                hits.push(users::pgbouncer(&ctx, case, mode, xact, trouble).await?);
            }
        }
        "U2" => {
            for (case, how) in users::STARVES {
                hits.push(users::starved_holder(&ctx, case, how).await?);
            }
        }
        "U3" => hits.push(users::keepalive_scale(&ctx, sizes.locks).await?),
        "U4" => {
            for (case, how) in users::EROSIONS {
                hits.push(users::erosion(&ctx, case, how).await?);
            }
        }
        "U5" => {
            for (case, delay) in users::SLOW_REPLIES {
                hits.push(users::slow_grant(&ctx, case, delay).await?);
            }
        }
        "U7" => hits.push(users::herd(&ctx, &sizes.waiters).await?),
        other => anyhow::bail!("no scenario {other}"),
    }
    // Every entry ends healed: nodes running and resumed, links open, clocks back, healthy.
    let nem = Nemesis::new(target.clone(), kind, id, std::time::Instant::now(), None);
    nem.heal_all().await.map_err(anyhow::Error::msg)?;
    Ok(EntryResult { capabilities: ctx.backend.capabilities(), phases, observed, hits })
}

/// Judge an entry's observations against the catalogue, on both sides of fencing.
pub fn judge_entry(
    id: &str,
    kind: BackendKind,
    has_tokens: bool,
    observed: &[(String, Observed)],
    availability: &[Option<Availability>],
    healed: bool,
) -> Vec<Outcome> {
    let title = find(id).map(|s| s.title).unwrap_or("");
    let mut out = Vec::new();
    for ((case, off, on), ((_, o), a)) in cases(id, kind, has_tokens).into_iter().zip(observed.iter().zip(availability)) {
        for (fencing, expect) in [("off", off), ("on", on)] {
            let (ok, observed) = judge(expect, fencing == "on", o, a.as_ref());
            let r = &o.resource.total;
            out.push(Outcome {
                scenario: id.to_string(),
                case: case.to_string(),
                backend: kind.name().to_string(),
                title: title.to_string(),
                fencing: fencing.to_string(),
                expected: expect,
                observed,
                ok: ok && healed,
                overlaps: r.overlaps,
                lost_updates: if fencing == "on" { r.lost_updates_fenced } else { r.lost_updates },
                rejected: if fencing == "on" { r.rejected } else { 0 },
                availability: a.clone(),
                notes: o.notes.clone(),
                healed,
                published: find(id).and_then(|s| s.published).map(|p| p.finding.to_string()),
                source: find(id).and_then(|s| s.published).map(|p| p.source.to_string()),
            });
        }
    }
    out
}

/// The observed-versus-expected table: per entry, the published finding it reproduces (if
/// any) and its source, then each backend and side of fencing, expected against observed.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let mut last: Option<&str> = None;
    // The case column as wide as its longest name, so the rows stay aligned.
    let width = outcomes.iter().map(|o| if o.case.is_empty() { 0 } else { o.case.chars().count() + 2 }).max().unwrap_or(0).max(22);
    for o in outcomes {
        if last != Some(o.scenario.as_str()) {
            last = Some(o.scenario.as_str());
            s.push_str(&format!("{} {}\n", o.scenario, o.title));
            if let (Some(p), Some(src)) = (&o.published, &o.source) {
                s.push_str(&format!("  published ({src}): {p}\n"));
            }
        }
        let name = if o.case.is_empty() { String::new() } else { format!("({})", o.case) };
        s.push_str(&format!(
            "  {:<width$} {:<9} fencing {:<3}  expected {:<30} observed {:<60} {}\n",
            name,
            o.backend,
            o.fencing,
            o.expected.to_string(),
            o.observed,
            if o.ok { "OK" } else if !o.healed { "NOT HEALED" } else { "CONTRADICTS" }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    //! Every judgment fails on an observation doctored to contradict it.
    use super::*;
    use dlbench_core::{CellStats, ResourceStats};

    fn obs(total: CellStats) -> Observed {
        let r = ResourceStats { total, keys: 1, elapsed_ns: 10_000_000_000, busy_ns: 5_000_000_000, busiest_key_ns: 5_000_000_000, counter_sum: 0 };
        let mut o = Observed::of(r, Duration::from_secs(10), Vec::new());
        o.nemesis.push(crate::nemesis::NemesisEvent {
            backend: String::new(),
            workload: String::new(),
            f: "kill".into(),
            phase: "start".into(),
            targets: vec![],
            at_ms: 1000,
            detail: String::new(),
        });
        o
    }
    fn avail(recovery_ms: u64, ratio: f64) -> Availability {
        Availability { recovery_ms, ratio: Some(ratio), recovered: true, ..Default::default() }
    }
    fn ok(expect: Expect, fenced: bool, o: &Observed, a: Option<&Availability>) -> bool {
        judge(expect, fenced, o, a).0
    }

    #[test]
    fn violation_needs_an_overlap_or_a_lost_update() {
        assert!(!ok(Expect::Violation, false, &obs(CellStats::default()), None));
        assert!(ok(Expect::Violation, false, &obs(CellStats { overlaps: 1, ..Default::default() }), None));
        assert!(ok(Expect::Violation, true, &obs(CellStats { lost_updates_fenced: 1, ..Default::default() }), None));
    }

    #[test]
    fn no_violation_fails_on_any_overlap_or_loss() {
        assert!(ok(Expect::NoViolation, false, &obs(CellStats::default()), None));
        assert!(!ok(Expect::NoViolation, false, &obs(CellStats { overlaps: 1, ..Default::default() }), None));
        assert!(!ok(Expect::NoViolation, true, &obs(CellStats { lost_updates_fenced: 1, ..Default::default() }), None));
    }

    #[test]
    fn rejected_needs_stale_refusals_and_no_broken_fencing() {
        let good = CellStats { overlaps: 1, lost_updates: 1, rejected: 1, ..Default::default() };
        assert!(ok(Expect::Rejected, true, &obs(good), None));
        assert!(!ok(Expect::Rejected, true, &obs(CellStats { overlaps: 1, lost_updates: 1, ..Default::default() }), None), "nothing refused");
        let legit = CellStats { rejected: 1, legit_refused: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(legit), None), "a legitimate holder refused");
        let inverted = CellStats { rejected: 2, token_inversions: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(inverted), None), "tokens went backwards");
        let lost = CellStats { rejected: 1, lost_updates_fenced: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(lost), None), "an update lost despite fencing");
    }

    #[test]
    fn fencing_broken_needs_a_refused_holder_or_an_inversion() {
        let caught = CellStats { overlaps: 1, lost_updates: 1, rejected: 1, ..Default::default() };
        assert!(!ok(Expect::FencingBroken, true, &obs(caught), None), "fencing that worked is not broken");
        assert!(ok(Expect::FencingBroken, true, &obs(CellStats { rejected: 1, legit_refused: 1, ..Default::default() }), None));
        assert!(ok(Expect::FencingBroken, true, &obs(CellStats { token_inversions: 1, ..Default::default() }), None));
    }

    #[test]
    fn must_fail_reads_the_servers() {
        let mut o = obs(CellStats::default());
        o.expired_waiter_acquired = Some(false);
        o.leftovers = Some(Ok(vec![]));
        assert!(ok(Expect::MustFail, false, &o, None));
        o.leftovers = Some(Ok(vec!["/lock/_c_x-lock-0000000003".into()]));
        let (good, why) = judge(Expect::MustFail, false, &o, None);
        assert!(!good && why.contains("_c_x-lock"), "{why}");
        o.leftovers = Some(Err("connection refused".into()));
        assert!(!ok(Expect::MustFail, false, &o, None), "servers unread is not 'nothing left'");
        o.leftovers = None;
        assert!(!ok(Expect::MustFail, false, &o, None));
        o.leftovers = Some(Ok(vec![]));
        o.expired_waiter_acquired = Some(true);
        assert!(!ok(Expect::MustFail, false, &o, None));
    }

    #[test]
    fn recovery_is_judged_after_the_heal_and_its_time_reported() {
        let o = obs(CellStats::default());
        assert!(ok(Expect::Recovers, false, &o, Some(&avail(1500, 0.2))));
        let (good, why) = judge(Expect::Recovers, false, &o, Some(&avail(RECOVERY_BOUND.as_millis() as u64 + 1, 0.2)));
        assert!(good && why.contains("slower than"), "a slow recovery is a recovery, said slow: {why}");
        assert!(!ok(Expect::Recovers, false, &o, None), "not measured");
        let never = Availability { recovered: false, ..avail(900, 0.0) };
        let (good, why) = judge(Expect::Recovers, false, &o, Some(&never));
        assert!(!good && why.contains("NOT recovered"), "no grant after the heal: {why}");
        let mut quiet = o.clone();
        quiet.nemesis.clear();
        assert!(!ok(Expect::Recovers, false, &quiet, Some(&avail(0, 1.0))), "no fault applied");
        let mut weak = o.clone();
        weak.resource.busy_ns = 10_000_000;
        assert!(!ok(Expect::Recovers, false, &weak, Some(&avail(0, 1.0))), "holders barely exposed");
        let violated = obs(CellStats { overlaps: 1, ..Default::default() });
        assert!(!ok(Expect::Recovers, false, &violated, Some(&avail(0, 1.0))));
    }
}
