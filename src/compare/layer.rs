//! When the two sides ran on different targets (compose against local, say) and both
//! recorded their target's costs (`summary.json`'s `target_costs`), what part of each
//! backend x workload's difference those costs explain: the requests an acquisition waits
//! for in sequence times the round-trip difference, plus the fsyncs it waits for times the
//! fsync difference, against the observed difference in time per acquisition.
//!
//! The requests and fsyncs per acquisition are *stated* from each recipe's code (the
//! uncontended path: one acquire and its release), not measured: a waiter's extra reads
//! and watches under contention are not counted, so on a hot key the estimate is a floor.
//! A replicated write (etcd's raft, ZooKeeper's zab) also waits for one round to a peer,
//! priced here at the client round trip's difference (the peers share the client's network:
//! the bridge on compose, loopback locally). A figure one side did not measure leaves the
//! share unstated: the note says "not measured", never a number built on a guess.
//!
//! The round trip priced is the loaded one where both sides recorded it (eight connections
//! to every node at once, as a run's clients load the path), the idle one otherwise (runs
//! from before it): on two busy cores a bridge costs more per packet than its idle round
//! trip shows. A fan-out round (Redlock) waits for the slowest of its nodes: priced at the
//! loaded p90 (the slowest of five draws sits near the 87th percentile).

use crate::summary::medium::TargetCosts;
use crate::summary::{Summary, WorkloadSummary};
use crate::stats::fmt_micros;

/// What one acquisition and its release wait for, in sequence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recipe {
    /// Requests from the client, one after the other.
    pub requests: f64,
    /// Rounds from the leader to its peers before a write is acknowledged.
    pub replication: f64,
    /// fsyncs on the acknowledging path (commits that wait for the disk).
    pub fsyncs: f64,
    /// Each request goes to every node at once and waits for all (Redlock): a round costs
    /// the slowest node's round trip.
    pub fan_out: bool,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// The recipe of a backend, by its name in summary.json.
pub fn recipe(backend: &str) -> Option<Recipe> {
    let r = |requests, replication, fsyncs, fan_out, source| Some(Recipe { requests, replication, fsyncs, fan_out, source });
    match backend {
        // The fenced SET script, then the compare-and-delete script.
        "redis" | "redisson" => r(2.0, 0.0, 0.0, false, "backends/redis/src/node.rs: acquire script, release script; no persistence"),
        "redlock" => r(2.0, 0.0, 0.0, true, "backends/redlock/src/lib.rs: SET NX PX to the five nodes at once, then the release script to all five"),
        // The session's lease is reused; enqueue txn (put), release txn (delete): two raft writes.
        "etcd" => r(2.0, 2.0, 2.0, false, "backends/etcd/src/mutex.rs: enqueue txn and release txn, each a raft write"),
        "etcd-v3lock" => r(2.0, 2.0, 2.0, false, "backends/etcd/src/v3lock.rs: Lock and Unlock RPCs, each a raft write"),
        // create (ephemeral sequential), getChildren, delete: two quorum writes.
        "zookeeper" => r(3.0, 2.0, 2.0, false, "backends/zookeeper/src/lib.rs: create, getChildren, delete; two quorum writes"),
        "postgres" => r(2.0, 0.0, 2.0, false, "backends/postgres/src/lib.rs: the upsert and the release UPDATE, each a commit"),
        "mariadb" => r(2.0, 0.0, 2.0, false, "backends/mariadb/src/lib.rs: the claim and the release statements, each an InnoDB commit"),
        "pg-advisory" => r(2.0, 0.0, 0.0, false, "backends/pg-advisory/src/lib.rs: pg_advisory_lock, pg_advisory_unlock; no commit waits"),
        "pg-advisory-xact" => r(3.0, 0.0, 0.0, false, "backends/pg-advisory/src/lib.rs: BEGIN, pg_advisory_xact_lock, COMMIT; no write to flush"),
        "mariadb-get-lock" => r(2.0, 0.0, 0.0, false, "backends/mariadb/src/get_lock.rs: GET_LOCK, RELEASE_LOCK"),
        _ => None,
    }
}

/// One side's figures for one backend: the round trip (with its path) and the fsync of the
/// medium its data is on, or why not.
#[derive(Debug, Clone, PartialEq)]
pub struct SideCosts {
    pub rtt_us: Result<f64, String>,
    /// The round trip under load, µs, the requests per second carried and the connections
    /// per node; `None` when the run did not record it (older runs).
    pub loaded: Option<Result<(f64, f64, usize), String>>,
    pub via: String,
    pub fsync_us: Result<f64, String>,
    pub medium: String,
}

/// `backend`'s figures in `t`.
pub fn side_costs(t: &TargetCosts, backend: &str, fan_out: bool) -> SideCosts {
    let family = backend.parse::<crate::kind::BackendKind>().map(|k| k.server().name().to_string()).unwrap_or_else(|_| backend.to_string());
    let nodes = t.round_trips_of(&family);
    let via = nodes.first().map(|r| r.via.words().to_string()).unwrap_or_default();
    let rtt_us = if nodes.is_empty() {
        Err(format!("no {family} round trip recorded"))
    } else if let Some(r) = nodes.iter().find(|r| r.figure.median_us.is_none()) {
        Err(r.figure.not_measured.clone().unwrap_or_else(|| format!("{} not measured", r.node)))
    } else {
        let mut m: Vec<f64> = nodes.iter().filter_map(|r| r.figure.median_us).collect();
        m.sort_by(|a, b| a.total_cmp(b));
        Ok(if fan_out { m[m.len() - 1] } else { m[(m.len() - 1) / 2] })
    };
    let loaded = t.loaded_of(&family).map(|l| {
        let us = if fan_out { l.figure.p90_us } else { l.figure.median_us };
        match (us, l.per_second) {
            (Some(us), Some(rate)) => Ok((us, rate, l.connections_per_node)),
            _ => Err(l.figure.not_measured.clone().unwrap_or_else(|| "not measured".into())),
        }
    });
    let (fsync_us, medium) = match t.fsync_of(&family) {
        Some(f) => (f.figure.median_us.ok_or_else(|| f.figure.not_measured.clone().unwrap_or_else(|| "not measured".into())), f.kind.words().to_string()),
        None => (Err(format!("where {family}'s data is, or its medium's fsync, was not recorded")), String::new()),
    };
    SideCosts { rtt_us, loaded, via, fsync_us, medium }
}

/// The estimate: its named parts and, when every part needed was measured, its total.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub parts: Vec<String>,
    pub total_us: Option<f64>,
}

/// What the recipe's waits cost more on `new` than on `base`.
pub fn estimate(r: &Recipe, base: &SideCosts, new: &SideCosts) -> Estimate {
    let mut parts = Vec::new();
    let mut total = Some(0.0);
    let sequential = r.requests + r.replication;
    if sequential > 0.0 {
        let what = if r.replication > 0.0 {
            format!("{} requests + {} replication rounds", r.requests, r.replication)
        } else if r.fan_out {
            format!("{} rounds to every node at once, each as slow as the slowest", r.requests)
        } else {
            format!("{} requests", r.requests)
        };
        match (&base.loaded, &new.loaded) {
            (Some(Ok((b, br, bc))), Some(Ok((n, nr, nc)))) => {
                let d = sequential * (n - b);
                let at = if r.fan_out { "p90, the slowest of the nodes" } else { "median" };
                parts.push(format!(
                    "round trip under load ({} connections to each node at once, {at}) {} ({}, {} req/s) vs {} ({}, {} req/s) x {what} = {}",
                    if bc == nc { nc.to_string() } else { format!("{nc} vs {bc}") },
                    us(*n),
                    new.via,
                    rate(*nr),
                    us(*b),
                    base.via,
                    rate(*br),
                    signed(d)
                ));
                total = total.map(|t| t + d);
                if let (Ok(bi), Ok(ni)) = (&base.rtt_us, &new.rtt_us) {
                    parts.push(format!("idle round trip {} vs {} (not added: the loaded one includes it)", us(*ni), us(*bi)));
                }
                return with_fsync(r, base, new, parts, total);
            }
            (Some(Err(e)), _) | (_, Some(Err(e))) => parts.push(format!("round trip under load: not measured ({e}); the idle one priced instead")),
            _ => {}
        }
        match (&base.rtt_us, &new.rtt_us) {
            (Ok(b), Ok(n)) => {
                let d = sequential * (n - b);
                parts.push(format!("round trip {} ({}) vs {} ({}) x {what} = {}", us(*n), new.via, us(*b), base.via, signed(d)));
                total = total.map(|t| t + d);
            }
            (b, n) => {
                parts.push(format!("round trip x {what}: not measured ({})", why(b, n)));
                total = None;
            }
        }
    }
    with_fsync(r, base, new, parts, total)
}

/// The estimate's fsync part, added to the round trips' `parts` and `total`.
fn with_fsync(r: &Recipe, base: &SideCosts, new: &SideCosts, mut parts: Vec<String>, mut total: Option<f64>) -> Estimate {
    if r.fsyncs > 0.0 {
        match (&base.fsync_us, &new.fsync_us) {
            (Ok(b), Ok(n)) => {
                let d = r.fsyncs * (n - b);
                parts.push(format!("fsync {} ({}) vs {} ({}) x {} = {}", us(*n), new.medium, us(*b), base.medium, r.fsyncs, signed(d)));
                total = total.map(|t| t + d);
            }
            (b, n) => {
                parts.push(format!("fsync x {}: not measured ({})", r.fsyncs, why(b, n)));
                total = None;
            }
        }
    }
    Estimate { parts, total_us: total }
}

fn why(b: &Result<f64, String>, n: &Result<f64, String>) -> String {
    let mut w = Vec::new();
    if let Err(e) = b {
        w.push(format!("base: {e}"));
    }
    if let Err(e) = n {
        w.push(format!("new: {e}"));
    }
    w.join("; ")
}

fn us(v: f64) -> String {
    fmt_micros(v)
}

fn rate(v: f64) -> String {
    if v >= 1000.0 { format!("{:.1}k", v / 1000.0) } else { format!("{v:.0}") }
}

fn signed(v: f64) -> String {
    if v < 0.0 { format!("-{}", us(-v)) } else { us(v) }
}

/// Time per acquisition per holder slot, µs: `min(clients, keys)` acquisitions can be under
/// way at once (one at a time on a hot key), so each takes that many over the rate.
pub fn per_acquisition_us(clients: usize, keys: usize, ops_per_sec: f64) -> Option<f64> {
    (ops_per_sec > 0.0).then(|| clients.min(keys).max(1) as f64 / ops_per_sec * 1e6)
}

/// The note for one backend x workload, from each side's median rate over its samples.
pub fn note(backend: &str, w: &WorkloadSummary, ops: (f64, f64), targets: (&str, &str), costs: (&TargetCosts, &TargetCosts)) -> Option<String> {
    let r = recipe(backend)?;
    let head = format!("{backend} · {} ({} clients, {} key(s))", w.name, w.clients, w.keys);
    let (Some(tb), Some(tn)) = (per_acquisition_us(w.clients, w.keys, ops.0), per_acquisition_us(w.clients, w.keys, ops.1)) else {
        return Some(format!("{head}: no acquisitions on one side, nothing to explain"));
    };
    let slots = w.clients.min(w.keys).max(1);
    let observed = tn - tb;
    let (sb, sn) = (side_costs(costs.0, backend, r.fan_out), side_costs(costs.1, backend, r.fan_out));
    let e = estimate(&r, &sb, &sn);
    let diff = format!(
        "{} {} per acquisition on {} (new) than on {} (base) ({} vs {}, {slots} at a time)",
        us(observed.abs()),
        if observed >= 0.0 { "more" } else { "less" },
        targets.1,
        targets.0,
        us(tn),
        us(tb)
    );
    let share = match e.total_us {
        Some(t) if observed.abs() < 1.0 => format!("the measured costs come to {}, against no difference", signed(t)),
        Some(t) => format!("the measured costs explain ~{} ({:.0}%)", signed(t), t / observed * 100.0),
        None => "share not stated: a figure was not measured".to_string(),
    };
    Some(format!("{head}: {diff}{}; {share}: {}; per acquisition as {}", capacity(&sb, &sn, ops), e.parts.join("; "), r.source))
}

/// The first reading of the loaded figure, for a lock bound by the CPUs rather than by one
/// chain of round trips (many clients on two cores: waits overlap, so the latency sum that
/// follows it over-prices, 1.3 to 6 times the gap in docs/docker.md's runs): the requests
/// per second the path carried under load on each side, as a ratio. A lock that did nothing
/// but cross the path would acquire at that ratio; one that also waits on its servers' own
/// work loses less. So where the lock's ratio is at or above the path's, the path's measured
/// capacity covers the whole drop; where below, it covers its share and the rest is named as
/// not explained. Empty unless both sides measured it.
fn capacity(base: &SideCosts, new: &SideCosts, ops: (f64, f64)) -> String {
    let (Some(Ok((_, br, _))), Some(Ok((_, nr, _)))) = (&base.loaded, &new.loaded) else { return String::new() };
    if *br <= 0.0 || ops.0 <= 0.0 {
        return String::new();
    }
    let (path, lock) = (nr / br, ops.1 / ops.0);
    let head = format!("; capacity: under load the path carried {} vs {} req/s ({path:.2}x), the lock acquired at {lock:.2}x", rate(*nr), rate(*br));
    let verdict = if lock >= 1.0 {
        "no drop to explain".to_string()
    } else if path >= 1.0 {
        "the path lost nothing: it explains none of the drop".to_string()
    } else if lock >= path {
        format!("a lock bound by the path alone would acquire at {path:.2}x: the path's capacity covers the drop")
    } else {
        format!("the path's capacity covers {:.0}% of the drop ({:.2} of {:.2}), the rest is not explained by it", (1.0 - path) / (1.0 - lock) * 100.0, 1.0 - path, 1.0 - lock)
    };
    format!("{head}: {verdict}")
}

/// One note per backend x workload measured on both sides, when the targets differ and both
/// sides recorded their costs; none otherwise.
pub fn notes(base: &Summary, new: &Summary) -> Vec<String> {
    let (Some(cb), Some(cn)) = (&base.target_costs, &new.target_costs) else { return Vec::new() };
    if base.target == new.target {
        return Vec::new();
    }
    let new_rates = rates(new);
    let mut out = Vec::new();
    for (k, w, ops) in rates(base) {
        let Some((_, _, nops)) = new_rates.iter().find(|x| x.0 == k) else { continue };
        let median = crate::stats::samples::median;
        out.extend(note(&k.0, w, (median(&ops), median(nops)), (&base.target, &new.target), (cb, cn)));
    }
    out
}

/// Each phase (backend, workload, clients) of a side, its first sample and every sample's rate.
fn rates(s: &Summary) -> Vec<((String, String, usize), &WorkloadSummary, Vec<f64>)> {
    let mut v: Vec<((String, String, usize), &WorkloadSummary, Vec<f64>)> = Vec::new();
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        for w in &b.workloads {
            let k = (b.name.clone(), w.name.clone(), w.clients);
            match v.iter_mut().find(|x| x.0 == k) {
                Some(x) => x.2.push(w.ops_per_sec),
                None => v.push((k, w, vec![w.ops_per_sec])),
            }
        }
    }
    v
}
