//! Check the checkers: locks broken on purpose, driven through the real chain — the driver,
//! the resource, the streamed history, the offline checkers and the verdict — must each be
//! caught by the checker named for the breakage and turn the verdict `unsafe` (or `fencing
//! broken`), while the correct lock under the same workload stays valid.
//!
//! The broken locks wrap the in-process reference lock (`dlbench-memory`), so the suite runs
//! in seconds with no server: the servers are not under test here, the judging is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dlbench::checker::Validity;
use dlbench::driver::{run_phase, PhaseOutputs};
use dlbench::history::HistoryWriter;
use dlbench::judgement::{FencingMode, Verdict};
use dlbench::workload::{Dist, Workload};
use dlbench_core::{AcquireOptions, Backend, Capabilities, DistLock, FencingToken, Lease, LeaseHandle, LockError, LostSignal};
use dlbench_memory::MemoryBackend;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    /// The correct lock.
    None,
    /// Every third acquire is granted at once, whoever holds the key.
    GrantTwice,
    /// Release frees the key whoever holds it (a `DEL` without the token check).
    ReleaseOthers,
    /// The server lets the lock go after a 250th of the TTL the holder was promised.
    ExpireEarly,
    /// Successive holders share tokens (token / 2).
    RepeatTokens,
    /// Every fifth grant gets a token below the one before (a counter reset).
    RegressTokens,
    /// Every fourth acquire takes the lock and reports a definite failure.
    FailButTook,
}

struct Mutant {
    inner: MemoryBackend,
    m: Mutation,
    /// Every how many releases one stalls past the TTL before it runs (0 = never): a client
    /// paused between leaving its section and releasing, the same for every lock.
    stall_every: u64,
    /// Acquires and releases so far, over all clients.
    counts: Arc<[AtomicU64; 2]>,
}

#[async_trait]
impl Backend for Mutant {
    fn name(&self) -> &'static str {
        "mutant"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn client(&self) -> Result<Box<dyn DistLock>, LockError> {
        Ok(Box::new(MutantClient {
            inner: self.inner.client().await?,
            backend: self.inner.clone(),
            m: self.m,
            stall_every: self.stall_every,
            counts: self.counts.clone(),
            last_ttl: Mutex::new(Duration::ZERO),
        }))
    }
    fn describe(&self) -> String {
        format!("memory with mutation {:?}", self.m)
    }
    async fn claims(&self, key: &str) -> Result<Vec<String>, LockError> {
        self.inner.claims(key).await
    }
}

struct MutantClient {
    inner: Box<dyn DistLock>,
    backend: MemoryBackend,
    m: Mutation,
    stall_every: u64,
    counts: Arc<[AtomicU64; 2]>,
    last_ttl: Mutex<Duration>,
}

#[async_trait]
impl DistLock for MutantClient {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        *self.last_ttl.lock().unwrap() = opts.ttl;
        let n = self.counts[0].fetch_add(1, Ordering::Relaxed) + 1;
        match self.m {
            Mutation::GrantTwice if n % 3 == 0 => {
                let now = Instant::now();
                return Ok(Lease {
                    key: key.to_string(),
                    token: Some(FencingToken(1_000_000 + n)),
                    invoked_at: now,
                    acquired_at: now,
                    valid_until: now + opts.ttl,
                    handle: LeaseHandle::new("phantom"),
                    lost: LostSignal::never(),
                });
            }
            Mutation::ExpireEarly => {
                let short = opts.clone().with_ttl(opts.ttl / 250);
                let mut lease = self.inner.acquire(key, &short).await?;
                lease.valid_until = lease.invoked_at + opts.ttl; // what the holder is told
                return Ok(lease);
            }
            Mutation::FailButTook if n % 4 == 0 => {
                // The grant happened; the reply says it did not.
                let _held = self.inner.acquire(key, opts).await?;
                return Err(LockError::Unavailable("mutant: reported failure for an acquire that took effect".into()));
            }
            _ => {}
        }
        let mut lease = self.inner.acquire(key, opts).await?;
        let t = lease.token.map(|t| t.0).unwrap_or(0);
        lease.token = match self.m {
            Mutation::RepeatTokens => Some(FencingToken(t / 2)),
            Mutation::RegressTokens if t % 5 == 0 => Some(FencingToken(t.saturating_sub(3))),
            _ => lease.token,
        };
        Ok(lease)
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let n = self.counts[1].fetch_add(1, Ordering::Relaxed) + 1;
        if self.stall_every > 0 && n % self.stall_every == 0 {
            let ttl = *self.last_ttl.lock().unwrap();
            tokio::time::sleep(ttl * 3 / 2).await;
        }
        if lease.handle.id == "phantom" {
            return Ok(());
        }
        if self.m == Mutation::ReleaseOthers {
            self.backend.release_whoever_holds(&lease.key);
            return Ok(());
        }
        self.inner.release(lease).await
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn abandon(&self) {
        self.inner.abandon().await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// A workload, by name: what each mutation needs to be seen, the same for the correct lock.
fn workload(name: &str) -> (Workload, u64) {
    let base = Workload {
        name: name.into(),
        warmup: Duration::ZERO,
        duration: Duration::from_millis(1500),
        seed: Some(7),
        retry_interval: Duration::from_millis(1),
        ..Workload::default()
    };
    match name {
        // Four clients on one key, holders inside for most of the time.
        "contended" => (
            Workload { clients: 4, keys: 1, hold: Dist::Fixed(Duration::from_millis(5)), ttl: Duration::from_millis(500), wait_timeout: Duration::from_secs(2), ..base },
            0,
        ),
        // Every fourth release comes after a pause longer than the TTL.
        "stalled-release" => (
            Workload { clients: 3, keys: 1, hold: Dist::Fixed(Duration::from_millis(20)), ttl: Duration::from_millis(100), wait_timeout: Duration::from_secs(2), ..base },
            4,
        ),
        // Three clients on one key, holds short, waits shorter than the TTL: a holder the
        // history does not know keeps all three waiting past their wait.
        "waiters" => (
            Workload { clients: 3, keys: 1, hold: Dist::Fixed(Duration::from_millis(1)), ttl: Duration::from_millis(600), wait_timeout: Duration::from_millis(150), ..base },
            0,
        ),
        // Eight clients queue on one key longer than the TTL: a waiter's lease runs from its
        // grant, not from its invoke. Every regressed token (the 5th grant on) goes to a
        // waiter that queued at least four holds of 100 ms, past the 300 ms TTL (with a
        // 500 ms TTL the first round's early waiters were inside it, and a lease counted from
        // the invoke went unnoticed). A hold keeps 200 ms inside its TTL, so a loaded machine
        // does not turn it into an overlap (holds of 150 ms in a 200 ms TTL did once, under
        // CI's image builds).
        "queued" => (
            Workload { clients: 8, keys: 1, hold: Dist::Fixed(Duration::from_millis(100)), ttl: Duration::from_millis(300), wait_timeout: Duration::from_secs(3), ..base },
            0,
        ),
        // One client alone on its key: a correct lock never reports it contended.
        "alone" => (
            Workload { clients: 1, keys: 1, hold: Dist::Fixed(Duration::from_millis(1)), ttl: Duration::from_millis(400), wait_timeout: Duration::from_millis(100), ..base },
            0,
        ),
        other => panic!("no workload {other}"),
    }
}

struct Judged {
    verdict: Verdict,
    checks: Vec<(String, Validity, String)>,
}

impl Judged {
    fn check(&self, name: &str) -> Validity {
        self.checks.iter().find(|c| c.0 == name).unwrap_or_else(|| panic!("no checker {name}: {:?}", self.checks)).1
    }
}

/// Drive `m` through workload `w` and judge it as `dlbench run` does.
async fn judge(m: Mutation, w: &str, mode: FencingMode) -> Judged {
    let (w, stall_every) = workload(w);
    let dir = std::env::temp_dir().join(format!("dlbench-mutation-{}-{:?}-{}", std::process::id(), m, w.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("history.jsonl");
    let history = HistoryWriter::create(&path).unwrap();
    let backend: Arc<dyn Backend> = Arc::new(Mutant { inner: MemoryBackend::new(), m, stall_every, counts: Arc::default() });
    let out = PhaseOutputs { history: Some((history.clone(), "mutant".into())), ..Default::default() };
    let phase = run_phase(backend.clone(), &w, "mutation", &CancellationToken::new(), out).await.unwrap();
    history.close().unwrap();
    let verdicts = dlbench::checker::check_file(&path).unwrap();
    let mut b = dlbench::summarize::backend("mutant", serde_json::to_value(backend.capabilities()).ok(), &[phase]);
    b.attach_checks(&verdicts, mode);
    let _ = std::fs::remove_dir_all(&dir);
    let checks = b.workloads[0].checks.iter().map(|c| (c.checker.to_string(), c.valid, c.message.clone())).collect();
    Judged { verdict: b.verdict.unwrap(), checks }
}

fn assert_caught(j: &Judged, checker: &str, safety: &str) {
    assert_eq!(j.check(checker), Validity::Invalid, "{checker} must catch it: {:?}", j.checks);
    assert_eq!(j.verdict.safety, safety, "{}", j.verdict.summary);
    assert_eq!(j.verdict.valid, Validity::Invalid, "{}", j.verdict.summary);
}

fn assert_clean(j: &Judged) {
    for (name, v, msg) in &j.checks {
        assert_eq!(*v, Validity::Valid, "the correct lock: {name} says {v}: {msg}");
    }
    assert_eq!((j.verdict.safety.as_str(), j.verdict.valid), ("safe", Validity::Valid), "{}", j.verdict.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correct_lock_is_never_flagged() {
    for w in ["contended", "stalled-release", "alone", "waiters", "queued"] {
        for mode in [FencingMode::Off, FencingMode::On, FencingMode::Both] {
            let j = judge(Mutation::None, w, mode).await;
            assert_clean(&j);
            assert_eq!(j.verdict.evidence, "strong", "{w}: holders are exposed: {}", j.verdict.summary);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granting_twice_is_caught_by_mutual_exclusion_and_lost_updates() {
    let j = judge(Mutation::GrantTwice, "contended", FencingMode::Off).await;
    assert_caught(&j, "mutual-exclusion", "unsafe");
    assert_eq!(j.check("lost-updates"), Validity::Invalid, "{:?}", j.checks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_another_holders_lock_is_caught_by_mutual_exclusion() {
    let j = judge(Mutation::ReleaseOthers, "stalled-release", FencingMode::Off).await;
    assert_caught(&j, "mutual-exclusion", "unsafe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_early_is_caught_by_mutual_exclusion() {
    let j = judge(Mutation::ExpireEarly, "contended", FencingMode::Off).await;
    assert_caught(&j, "mutual-exclusion", "unsafe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_tokens_break_fencing() {
    let j = judge(Mutation::RepeatTokens, "contended", FencingMode::On).await;
    assert_caught(&j, "fencing", "fencing broken");
    assert!(j.verdict.fencing.starts_with("broken"), "{}", j.verdict.fencing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regressing_tokens_break_fencing() {
    let j = judge(Mutation::RegressTokens, "contended", FencingMode::On).await;
    assert_caught(&j, "fencing", "fencing broken");
    assert!(j.verdict.fencing.contains("legitimate write(s) refused"), "{}", j.verdict.fencing);
}

/// A failure that took the lock is a finding of its own, not two holders: the run fails and
/// its headline says why, while the safety word stays what the resource counted.
fn assert_found(j: &Judged) {
    assert_eq!(j.check("contention"), Validity::Invalid, "contention must catch it: {:?}", j.checks);
    assert_eq!(j.verdict.valid, Validity::Invalid, "{}", j.verdict.summary);
    assert!(j.verdict.headline.contains("failed acquire took effect"), "{}", j.verdict.headline);
    assert!(!j.verdict.findings.is_empty(), "{:?}", j.verdict);
    assert!(!j.verdict.safety.as_str().contains("unsafe"), "no two holders were seen: {}", j.verdict.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_that_took_effect_is_caught_by_the_contention_checker() {
    let j = judge(Mutation::FailButTook, "alone", FencingMode::Both).await;
    assert_found(&j);
}

/// The same hidden holder among several waiters: refused by it together, the waiters must
/// not explain each other's refusals (the checker once let any acquire in flight explain
/// one, and saw nothing here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_holder_among_several_waiters_is_caught() {
    let j = judge(Mutation::FailButTook, "waiters", FencingMode::Both).await;
    assert_found(&j);
}

/// A token regression on a waiter that queued longer than the TTL is an inversion by a
/// legitimate holder, not a stale write refused: its lease runs from the grant. (Measured
/// from the invoke, as etcd's and ZooKeeper's leases once were, every such waiter entered
/// "lease lost" and the regression read "safe with fencing".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_regression_on_a_queued_waiter_breaks_fencing() {
    let j = judge(Mutation::RegressTokens, "queued", FencingMode::On).await;
    assert_caught(&j, "fencing", "fencing broken");
    assert!(j.verdict.fencing.contains("legitimate write(s) refused"), "{}", j.verdict.fencing);
}

/// Checks are paired with phases by phase id, not by position: when an earlier phase's
/// history segment is missing (a scenario stage that failed after opening it), a later
/// phase's checks must not slide onto it. Here the first phase is the correct lock, the
/// second grants twice, and only the second's segment is judged: paired by position, the
/// correct phase would carry the broken one's "unsafe".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_segment_does_not_shift_another_phases_checks() {
    let dir = std::env::temp_dir().join(format!("dlbench-mutation-{}-shifted", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("history.jsonl");
    let history = HistoryWriter::create(&path).unwrap();
    let mut phases = Vec::new();
    for (name, m) in [("first", Mutation::None), ("second", Mutation::GrantTwice)] {
        let (mut w, stall_every) = workload("contended");
        w.name = name.into();
        let backend: Arc<dyn Backend> = Arc::new(Mutant { inner: MemoryBackend::new(), m, stall_every, counts: Arc::default() });
        let out = PhaseOutputs { history: Some((history.clone(), "mutant".into())), ..Default::default() };
        phases.push(run_phase(backend, &w, "shifted", &CancellationToken::new(), out).await.unwrap());
    }
    history.close().unwrap();
    let mut verdicts = dlbench::checker::check_file(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(verdicts.len(), 2);
    assert_eq!(verdicts[1].valid, Validity::Invalid, "the second phase grants twice");
    verdicts.remove(0);
    let caps = MemoryBackend::new().capabilities();
    let mut b = dlbench::summarize::backend("mutant", serde_json::to_value(caps).ok(), &phases);
    b.attach_checks(&verdicts, FencingMode::Off);
    let (first, second) = (&b.workloads[0], &b.workloads[1]);
    assert!(first.checks.is_empty(), "the first phase has no segment, so no checks: {:?}", first.checks);
    let v1 = first.verdict.as_ref().unwrap();
    assert_ne!(v1.safety, "unsafe", "{}", v1.summary);
    assert_eq!(first.validity, None, "no segment, no checker validity");
    let v2 = second.verdict.as_ref().unwrap();
    assert_eq!((v2.safety.as_str(), v2.valid), ("unsafe", Validity::Invalid), "{}", v2.summary);
}
