//! The failures lock users report (issue trackers of etcd's `concurrency`, Curator, kazoo,
//! Redisson, redis-py, PgBouncer), each reproduced on the servers and measured: the
//! catalogue's U entries. Unlike S1-S10 they yield figures, not only a verdict: a [`Hit`] per
//! backend and case, the cell of the report's "what users hit" table, with every event
//! behind it kept as evidence (a JSON file in the result directory).
//!
//! - U1: how late a holder learns its lock is gone (cut off from the servers; not extended).
//! - U2: a `dlbench lock` holder, which keeps its lock alive itself, starved or paused.
//! - U3: 1,000 locks kept alive at once: losses, renewals, server CPU per 1,000.
//! - U4: Redlock's quorum eroded by node restarts, with and without fsync and the delay.
//! - U5: grants that reach a slow client with no validity left.
//! - U6: session advisory locks through PgBouncer's transaction pooling, and the safe setups.
//! - U7: the cost of waiting: client requests and server CPU per waiter, 1 to 1,000 waiters.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::stage::Ctx;
use crate::summary::scenario::Hit;

mod erosion;
mod herd;
mod keepalive;
mod notice;
pub mod pgbouncer;
mod slow_grant;
mod starved;

/// A hit and its evidence (written by the command next to summary.json).
pub type Measurement = (Hit, Value);

/// The sizes of the scaling entries (`scenario --waiters`, `--locks`).
#[derive(Debug, Clone)]
pub struct Sizes {
    /// U7's numbers of waiters.
    pub waiters: Vec<usize>,
    /// U3's number of locks kept alive at once.
    pub locks: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes { waiters: herd::HERD.to_vec(), locks: keepalive::SCALE }
    }
}

/// Every event of one measurement, with its time from the measurement's start.
struct Log {
    t0: Instant,
    events: Mutex<Vec<Value>>,
}

impl Log {
    fn new() -> Self {
        Log { t0: Instant::now(), events: Mutex::new(Vec::new()) }
    }
    fn at(&self, what: impl Into<String>) {
        self.at_time(Instant::now(), what)
    }
    fn at_time(&self, t: Instant, what: impl Into<String>) {
        let ms = signed_s(self.t0, t) * 1000.0;
        self.events.lock().unwrap().push(json!({ "at_ms": (ms * 10.0).round() / 10.0, "event": what.into() }));
    }
    fn evidence(&self, about: Value) -> Value {
        json!({ "about": about, "events": self.events.lock().unwrap().clone() })
    }
}

/// `t - origin` in seconds, negative when `t` came first.
fn signed_s(origin: Instant, t: Instant) -> f64 {
    match t.checked_duration_since(origin) {
        Some(d) => d.as_secs_f64(),
        None => -(origin - t).as_secs_f64(),
    }
}

fn hit(ctx: &Ctx, entry: &str, case: &str) -> Hit {
    Hit {
        entry: entry.into(),
        title: crate::catalogue::find(entry).map(|s| s.title.to_string()).unwrap_or_default(),
        backend: ctx.kind.name().into(),
        case: case.into(),
        ..Hit::default()
    }
}

/// The successes of `results`, and each failure's message.
fn split<T, E: std::fmt::Display>(results: Vec<Result<T, E>>) -> (Vec<T>, Vec<String>) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok(x) => ok.push(x),
            Err(e) => failed.push(e.to_string()),
        }
    }
    (ok, failed)
}

/// CPU time (ms) used so far by the servers `pids` and every process they started (the
/// cost probe's accounting, `cost::groups_cpu_us`); 0 when none is running.
fn server_cpu_ms(pids: &[i32]) -> f64 {
    crate::cost::groups_cpu_us(pids).map_or(0.0, |us| us / 1000.0)
}

/// The open-file limit, raised (1,000 waiters with their proxies need tens of thousands of
/// descriptors): to 65,536 where permitted (root may raise the hard limit), else to the
/// hard limit. Returns the limit in effect.
fn raise_nofile() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        let want = r.rlim_max.max(65_536);
        for lim in [libc::rlimit { rlim_cur: want, rlim_max: want }, libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max }] {
            if lim.rlim_cur <= r.rlim_cur {
                break;
            }
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                r = lim;
                break;
            }
        }
    }
    r.rlim_cur as u64
}

/// Client reads at the proxies and server CPU (ms) over `d`.
async fn window(net: &crate::nemesis::net::Net, pids: &[i32], d: Duration) -> (f64, f64) {
    let (r, _, c) = window_bytes(net, pids, d).await;
    (r, c)
}

/// Client reads, client bytes and server CPU (ms) over `d`.
async fn window_bytes(net: &crate::nemesis::net::Net, pids: &[i32], d: Duration) -> (f64, f64, f64) {
    let (r0, b0) = net.client_traffic();
    let c0 = server_cpu_ms(pids);
    tokio::time::sleep(d).await;
    let (r1, b1) = net.client_traffic();
    ((r1 - r0) as f64, (b1 - b0) as f64, server_cpu_ms(pids) - c0)
}

/// Run U entry `id` on the context's backend: its cases one after another, a measurement
/// each.
pub async fn run(ctx: &Ctx, id: &str, sizes: &Sizes) -> anyhow::Result<Vec<Measurement>> {
    let mut hits = Vec::new();
    match id {
        "U1" => {
            for loss in notice::losses(ctx.backend.capabilities().expiry) {
                hits.push(notice::notice(ctx, loss).await?);
            }
        }
        "U2" => {
            for (case, how) in starved::STARVES {
                hits.push(starved::starved_holder(ctx, case, how).await?);
            }
        }
        "U3" => hits.push(keepalive::keepalive_scale(ctx, sizes.locks).await?),
        "U4" => {
            for (case, how) in erosion::EROSIONS {
                hits.push(erosion::erosion(ctx, case, how).await?);
            }
        }
        "U5" => {
            for (case, delay) in slow_grant::SLOW_REPLIES {
                hits.push(slow_grant::slow_grant(ctx, case, delay).await?);
            }
        }
        "U6" => {
            for (case, mode, xact, trouble) in pgbouncer::poolings(ctx.kind) {
                hits.push(pgbouncer::pgbouncer(ctx, case, mode, xact, trouble).await?);
            }
        }
        "U7" => hits.push(herd::herd(ctx, &sizes.waiters).await?),
        other => anyhow::bail!("no scenario {other}"),
    }
    Ok(hits)
}
