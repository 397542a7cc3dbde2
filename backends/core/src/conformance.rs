//! The conformance suite: one body, run against every backend on real servers.
//!
//! Each case is an `async fn` taking the backend under test; [`conformance_tests!`] stamps
//! them out as `#[tokio::test]`s for one backend so the test output names every
//! (backend, case) pair. Bounds on time are generous and only catch hangs: this suite
//! asserts behaviour, and timings belong in the benchmark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{AcquireOptions, Backend, Expiry, FencingToken, LockError, Resource};

/// A key no other test on the same servers uses.
pub fn unique_key(case: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("dlbench-conf-{case}-{}-{nanos:x}-{n}", std::process::id())
}

fn opts(ttl_s: u64, wait: Duration) -> AcquireOptions {
    AcquireOptions::default()
        .with_ttl(Duration::from_secs(ttl_s))
        .with_wait(wait)
        .with_retry_interval(Duration::from_millis(2))
}

/// `clients` clients each run `rounds` critical sections on one key; the resource must see
/// no overlap and no lost update, and, for backends that claim fencing, no stale token in
/// the order the sections actually ran.
pub async fn mutual_exclusion(backend: Arc<dyn Backend>, clients: usize, rounds: usize) {
    assert!(clients >= 8, "the suite promises 8+ concurrent clients");
    let key = unique_key("mutex");
    let resource = Arc::new(Resource::new(1));
    let fencing = backend.capabilities().fencing;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let backend = backend.clone();
        let resource = resource.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let client = backend.client().await.unwrap_or_else(|e| panic!("client {c}: {e}"));
            let mut done = 0;
            while done < rounds {
                let lease = match client.acquire(&key, &opts(10, Duration::from_secs(30))).await {
                    Ok(l) => l,
                    Err(LockError::Timeout(_)) => continue,
                    Err(e) => panic!("client {c} acquire: {e}"),
                };
                if fencing {
                    assert!(lease.token.is_some(), "a fencing backend returned no token");
                }
                {
                    let mut s = resource.enter(0, lease.token);
                    // A real await inside the section so other tasks get to run.
                    s.read_sleep_write(Duration::from_millis(1)).await;
                }
                client.release(lease).await.unwrap_or_else(|e| panic!("client {c} release: {e}"));
                done += 1;
            }
            client.close().await;
        }));
    }
    for t in tasks {
        t.await.expect("client task panicked");
    }
    let st = resource.stats();
    assert_eq!(st.total.sections, (clients * rounds) as u64);
    assert_eq!(st.total.overlaps, 0, "two holders were inside at once: {st:?}");
    assert_eq!(st.total.lost_updates, 0, "lost updates: {st:?}");
    assert_eq!(st.counter_sum, (clients * rounds) as u64);
    if fencing {
        assert_eq!(st.total.stale_tokens, 0, "fencing tokens went backwards under contention: {st:?}");
    }
}

/// A waiter blocked behind a holder gets the lock once the holder releases.
pub async fn release_admits_waiter(backend: Arc<dyn Backend>) {
    let key = unique_key("handoff");
    let a = backend.client().await.expect("client a");
    let b = backend.client().await.expect("client b");
    let la = a.acquire(&key, &opts(10, Duration::from_secs(5))).await.expect("a acquires a free lock");
    let waiter = {
        let key = key.clone();
        tokio::spawn(async move {
            let r = b.acquire(&key, &opts(10, Duration::from_secs(30))).await;
            (b, r)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b acquired while a still held the lock");
    a.release(la).await.expect("a releases");
    let (b, r) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("b still waiting 30 s after release")
        .expect("b task");
    let lb = r.expect("b acquires after a released");
    b.release(lb).await.expect("b releases");
    a.close().await;
    b.close().await;
}

/// A holder that vanishes without releasing loses the lock to TTL or session expiry.
pub async fn abandoned_lock_expires(backend: Arc<dyn Backend>, ttl: Duration) {
    let ttl = Duration::from_secs(ttl.as_secs().max(1));
    let after = crate::probe::expiry(&backend, &unique_key("abandon"), ttl).await.unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
    eprintln!("expiry {}: {after:?} (TTL {ttl:?})", backend.name());
}

/// Tokens strictly increase across successive holders, each from a different client.
pub async fn fencing_tokens_increase(backend: Arc<dyn Backend>) {
    let key = unique_key("fence");
    if !backend.capabilities().fencing {
        // The claim is the thing under test: a backend without it must say so by returning
        // no token rather than an unordered one.
        let c = backend.client().await.expect("client");
        let l = c.acquire(&key, &opts(10, Duration::from_secs(5))).await.expect("acquire");
        assert!(l.token.is_none(), "{} claims no fencing but returned a token", backend.name());
        c.release(l).await.expect("release");
        c.close().await;
        return;
    }
    let mut last: Option<FencingToken> = None;
    for i in 0..6 {
        let c = backend.client().await.expect("client");
        let l = c.acquire(&key, &opts(10, Duration::from_secs(5))).await.expect("acquire");
        let t = l.token.expect("fencing backend returned no token");
        if let Some(prev) = last {
            assert!(t > prev, "holder {i} got token {t} after {prev}");
        }
        last = Some(t);
        c.release(l).await.expect("release");
        c.close().await;
    }
}

/// A contended acquire with a wait timeout fails definitely in bounded time and leaves
/// nothing behind that would block the next client.
pub async fn wait_timeout_is_definite(backend: Arc<dyn Backend>) {
    let key = unique_key("timeout");
    let a = backend.client().await.expect("client a");
    let b = backend.client().await.expect("client b");
    let la = a.acquire(&key, &opts(10, Duration::from_secs(5))).await.expect("a acquires");
    let wait = Duration::from_millis(500);
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), b.acquire(&key, &opts(10, wait)))
        .await
        .expect("acquire with a 500 ms wait did not return within 20 s");
    match r {
        Err(e) => assert!(e.is_definite() && e.is_contention(), "expected a definite timeout, got {e}"),
        Ok(_) => panic!("b acquired a lock a holds"),
    }
    assert!(started.elapsed() >= wait, "gave up before its wait timeout");
    let try_once = b.acquire(&key, &opts(10, Duration::ZERO)).await;
    assert!(matches!(try_once, Err(ref e) if e.is_definite() && e.is_contention()), "try-once: {try_once:?}");
    a.release(la).await.expect("a releases");
    // b's withdrawn claims must not queue c behind them.
    let c = backend.client().await.expect("client c");
    let lc = c
        .acquire(&key, &opts(10, Duration::from_secs(5)))
        .await
        .expect("c must get the lock once a released; did b leave a claim behind?");
    c.release(lc).await.expect("c releases");
    for x in [a, b, c] {
        x.close().await;
    }
}

pub use crate::probe::Reentrancy;

/// The holder acquires its own lock again and the outcome is measured ([`crate::probe`]);
/// whatever it was, once the holder has released everything the lock must be free for
/// another client.
pub async fn reentrancy(backend: Arc<dyn Backend>) -> Reentrancy {
    let measured = crate::probe::reentrancy(&backend, &unique_key("reentrant")).await.unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
    eprintln!("reentrancy {}: {measured:?}", backend.name());
    measured
}

/// What a release or an extend was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    Ok,
    NotHeld,
    /// Another error, by kind.
    Errors(&'static str),
}

impl Told {
    fn of(r: Result<(), LockError>) -> Told {
        match r {
            Ok(()) => Told::Ok,
            Err(LockError::NotHeld(_)) => Told::NotHeld,
            Err(e) => Told::Errors(e.kind()),
        }
    }
}

/// The ownership surprises lock users report, measured (issue trackers: etcd #10756,
/// redlock-rb #36): who may release a lock, and what a holder whose TTL ran out is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// Another client releases the holder's lease (as passing a lock object to another
    /// thread or process would): what it was told, and whether the lock was then free.
    pub release_by_other: Told,
    pub freed_by_other: bool,
    /// A holder extends, and another (on another key) releases, after its TTL passed
    /// untouched with nobody else taking the lock.
    pub extend_after_ttl: Told,
    pub release_after_ttl: Told,
}

/// Measure [`Ownership`]; `ttl` is short (the holders sit it out). Whatever the outcomes,
/// a "not held" answer must not have freed the holder's lock, and afterwards every key
/// must be free for a fresh client.
pub async fn ownership(backend: Arc<dyn Backend>, ttl: Duration) -> Ownership {
    let name = backend.name();
    let (k1, k2, k3) = (unique_key("own-other"), unique_key("own-extend"), unique_key("own-release"));
    let a = backend.client().await.expect("client a");
    let b = backend.client().await.expect("client b");
    let c = backend.client().await.expect("client c");
    let short = AcquireOptions::default().with_ttl(ttl).with_wait(Duration::from_secs(5)).with_retry_interval(Duration::from_millis(2));

    let la = a.acquire(&k1, &opts(30, Duration::from_secs(5))).await.expect("a acquires a free lock");
    let release_by_other = Told::of(b.release(la.clone()).await);
    let probe = c.acquire(&k1, &opts(30, Duration::ZERO)).await;
    let freed_by_other = probe.is_ok();
    if let Ok(l) = probe {
        c.release(l).await.expect("c releases");
    }
    assert!(
        !(release_by_other == Told::NotHeld && freed_by_other),
        "{name}: another client's release was told 'not held' yet freed the holder's lock"
    );
    let _ = a.release(la).await;

    // Two holders, one key each (pg-advisory-xact holds one key per client).
    let mut l2 = a.acquire(&k2, &short).await.expect("a acquires a second key");
    let l3 = b.acquire(&k3, &short).await.expect("b acquires a third key");
    tokio::time::sleep(ttl + Duration::from_secs(1)).await;
    let extend_after_ttl = Told::of(a.extend(&mut l2, Duration::from_secs(10)).await);
    let release_after_ttl = Told::of(b.release(l3).await);
    let _ = a.release(l2).await;

    for k in [&k1, &k2, &k3] {
        let l = c
            .acquire(k, &opts(10, Duration::from_secs(15)))
            .await
            .unwrap_or_else(|e| panic!("{name}: {k} is not free after its holder let go: {e}"));
        c.release(l).await.expect("c releases");
    }
    for x in [a, b, c] {
        x.close().await;
    }
    let o = Ownership { release_by_other, freed_by_other, extend_after_ttl, release_after_ttl };
    eprintln!("ownership {name}: {o:?}");
    o
}

/// Claims `key` still has on the servers, polled until there are none or `within` passes.
async fn claims_left(backend: &dyn Backend, key: &str, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let left = backend.claims(key).await.unwrap_or_else(|e| panic!("claims({key}): {e}"));
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two clients take turns on a key (one holding, one queued behind it), release, and close:
/// afterwards the servers hold no claim on the key. `claims` must see the claims while they
/// exist, or the final check would prove nothing. A session backend's client also closes
/// while still holding a third lock: closing ends the session, so its claim must go at once,
/// long before the session's TTL would expire it.
pub async fn nothing_left_behind(backend: Arc<dyn Backend>) {
    let key = unique_key("leftover");
    // Far longer than the bound below: a claim that goes only by expiry fails the check.
    let ttl = 30;
    let bound = Duration::from_secs(10);
    assert!(backend.claims(&key).await.expect("claims on a fresh key").is_empty(), "a fresh key has claims");
    let a = backend.client().await.expect("client a");
    let b = backend.client().await.expect("client b");
    let la = a.acquire(&key, &opts(ttl, Duration::from_secs(5))).await.expect("a acquires a free lock");
    let held = backend.claims(&key).await.expect("claims while held");
    assert!(!held.is_empty(), "{}: claims() shows nothing while a holds {key}", backend.name());
    let waiter = {
        let key = key.clone();
        tokio::spawn(async move {
            let r = b.acquire(&key, &opts(ttl, Duration::from_secs(30))).await;
            (b, r)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.release(la).await.expect("a releases");
    let (b, r) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("b still waiting 30 s after release")
        .expect("b task");
    let lb = r.expect("b acquires after a released");
    b.release(lb).await.expect("b releases");
    a.close().await;
    b.close().await;
    let left = claims_left(backend.as_ref(), &key, bound).await;
    assert!(left.is_empty(), "{}: left behind on {key} after release and close: {left:?}", backend.name());

    if backend.capabilities().expiry == Expiry::Session {
        let key = unique_key("leftover-close");
        let c = backend.client().await.expect("client c");
        let _held = c.acquire(&key, &opts(ttl, Duration::from_secs(5))).await.expect("c acquires");
        assert!(!backend.claims(&key).await.expect("claims while held").is_empty(), "claims() shows nothing while c holds {key}");
        let started = Instant::now();
        c.close().await;
        let left = claims_left(backend.as_ref(), &key, bound).await;
        assert!(
            left.is_empty(),
            "{}: {key} still claimed {:?} after its holder closed its session (TTL {ttl} s): {left:?}",
            backend.name(),
            started.elapsed()
        );
    }
}

/// Pointed at a port nobody listens on, connecting or acquiring errors within `bound`.
pub async fn unreachable_fails_fast<F>(connect: F, bound: Duration)
where
    F: std::future::Future<Output = Result<Arc<dyn Backend>, LockError>>,
{
    let started = Instant::now();
    let outcome = tokio::time::timeout(bound, async move {
        let backend = connect.await?;
        let client = backend.client().await?;
        client.acquire(&unique_key("unreachable"), &opts(10, Duration::from_secs(2))).await.map(|_| ())
    })
    .await;
    match outcome {
        Err(_) => panic!("no answer within {bound:?}: an unreachable server must not hang"),
        Ok(Ok(())) => panic!("acquired a lock from a server that does not exist"),
        Ok(Err(e)) => assert!(started.elapsed() <= bound, "error {e} came after {bound:?}"),
    }
}

/// Address of a loopback port with nothing listening (bound, then released).
pub fn dead_endpoint() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = l.local_addr().expect("addr");
    drop(l);
    a.to_string()
}

/// Stamp out the suite for one backend.
///
/// `$make` is an async expression yielding `Arc<dyn Backend>` for the servers under test;
/// `$dead` one yielding `Result<Arc<dyn Backend>, LockError>` pointed at a dead endpoint;
/// `$ttl` the TTL the expiry case uses.
#[macro_export]
macro_rules! conformance_tests {
    ($name:ident, make = $make:expr, dead = $dead:expr, ttl = $ttl:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance as c;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mutual_exclusion() {
                c::mutual_exclusion($make, 16, 30).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn release_admits_waiter() {
                c::release_admits_waiter($make).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn abandoned_lock_expires() {
                c::abandoned_lock_expires($make, $ttl).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fencing_tokens_increase() {
                c::fencing_tokens_increase($make).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wait_timeout_is_definite() {
                c::wait_timeout_is_definite($make).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn nothing_left_behind() {
                c::nothing_left_behind($make).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reentrancy() {
                c::reentrancy($make).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ownership() {
                c::ownership($make, $ttl).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn unreachable_fails_fast() {
                c::unreachable_fails_fast($dead, std::time::Duration::from_secs(20)).await
            }
        }
    };
}
