//! The container-layer notes: the arithmetic on doctored pairs whose answer is known, the
//! wording, and the cases where no share may be printed.

use super::layer::{estimate, notes, per_acquisition_us, recipe, side_costs};
use super::*;
use crate::judgement::FencingMode;
use crate::summary::medium::{DataOn, Figure, Fsync, LoadedRoundTrip, MediumKind, Path as Via, RoundTrip, TargetCosts};
use crate::summary::{BackendSummary, Summary, WorkloadSummary};

fn pct() -> serde_json::Value {
    serde_json::json!({"count": 10, "mean": 100.0, "p50": 100, "p90": 500, "p99": 1000, "p999": 2000, "p9999": 2000, "max": 2000})
}

/// One etcd hot-key phase (8 clients, 1 key) at `ops` per second on `target`, with `costs`.
fn run(target: &str, ops: f64, costs: Option<TargetCosts>) -> Summary {
    let mut s = Summary::begin("r", target, FencingMode::Both, vec![]);
    let mut b = BackendSummary::empty("etcd", None);
    let w: WorkloadSummary = serde_json::from_value(serde_json::json!({
        "name": "hot-key", "clients": 8, "keys": 1, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
        "ops_per_sec": ops, "acquired": 1, "acquire_latency_us": pct(), "service_latency_us": pct(),
        "release_latency_us": pct(), "handoff_latency_us": pct(), "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
        "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
        "sections": 0, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
    }))
    .unwrap();
    b.workloads.push(w);
    s.backends.push(b);
    s.target_costs = costs;
    s
}

/// etcd's three nodes at `rtt` µs over `via`, its data on `kind` at `fsync` µs (None: not measured).
fn costs(via: Via, rtt: f64, kind: MediumKind, fsync: Option<f64>) -> TargetCosts {
    let round_trips = (0..3)
        .map(|i| RoundTrip { service: "etcd".into(), node: format!("n{i}"), via, request: "Range".into(), figure: Figure { n: 200, median_us: Some(rtt), p90_us: Some(rtt), not_measured: None } })
        .collect();
    let figure = match fsync {
        Some(f) => Figure { n: 100, median_us: Some(f), p90_us: Some(f), not_measured: None },
        None => Figure::missing("docker exec: no such container"),
    };
    TargetCosts {
        round_trips,
        loaded: vec![],
        fsync: vec![Fsync { kind, path: "/d".into(), container: None, method: "m".into(), figure }],
        data_on: [("etcd".to_string(), DataOn { kind, path: "/d".into() })].into(),
        took_s: 1.0,
    }
}

fn local() -> TargetCosts {
    costs(Via::Loopback, 50.0, MediumKind::Host, Some(1000.0))
}

#[test]
fn a_difference_made_of_the_measured_costs_is_explained_in_full() {
    // etcd sends 2 requests + 2 replication rounds and waits for 2 fsyncs per acquisition:
    // 4 x (150 - 50) + 2 x (1500 - 1000) = 1400 µs. Local: 1000 µs per acquisition (one at a
    // time on the hot key); compose: 2400 µs, all of it the measured costs.
    let compose = costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0));
    let n = notes(&run("local", 1000.0, Some(local())), &run("compose", 1e6 / 2400.0, Some(compose)));
    assert_eq!(n.len(), 1, "{n:?}");
    let n = &n[0];
    assert!(n.contains("1.40 ms more per acquisition on compose (new) than on local (base) (2.40 ms vs 1.00 ms, 1 at a time)"), "{n}");
    assert!(n.contains("explain ~1.40 ms (100%)"), "{n}");
    assert!(n.contains("round trip 150 µs (compose network) vs 50 µs (loopback) x 2 requests + 2 replication rounds = 400 µs"), "{n}");
    assert!(n.contains("fsync 1.50 ms (volume) vs 1.00 ms (host) x 2 = 1.00 ms"), "{n}");
    assert!(n.contains("backends/etcd/src/mutex.rs"), "the numbers' source is named: {n}");
}

#[test]
fn a_difference_the_costs_do_not_share_is_explained_near_zero() {
    // The same round trip and fsync on both sides, half the rate: nothing of it explained.
    let same = costs(Via::ComposeNetwork, 50.0, MediumKind::Volume, Some(1000.0));
    let n = notes(&run("local", 1000.0, Some(local())), &run("compose", 500.0, Some(same)));
    assert!(n[0].contains("1.00 ms more per acquisition") && n[0].contains("explain ~0 µs (0%)"), "{}", n[0]);
}

#[test]
fn a_missing_figure_says_not_measured_and_states_no_share() {
    let compose = costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, None);
    let n = notes(&run("local", 1000.0, Some(local())), &run("compose", 400.0, Some(compose)));
    let n = &n[0];
    assert!(n.contains("fsync x 2: not measured (new: docker exec: no such container)"), "{n}");
    assert!(n.contains("share not stated"), "{n}");
    assert!(!n.contains('%'), "no share where a figure is missing: {n}");
    // The round trip, measured on both sides, is still named.
    assert!(n.contains("round trip 150 µs"), "{n}");
}

#[test]
fn no_note_on_the_same_target_or_without_the_section() {
    let compose = costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0));
    assert!(notes(&run("local", 1000.0, Some(local())), &run("local", 500.0, Some(local()))).is_empty());
    assert!(notes(&run("local", 1000.0, None), &run("compose", 500.0, Some(compose))).is_empty());
}

#[test]
fn the_note_reaches_the_comparison_text() {
    let compose = costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0));
    let c = compare_checked(&run("local", 1000.0, Some(local())), &run("compose", 1e6 / 2400.0, Some(compose)), &thresholds(&[]).unwrap(), true).unwrap();
    assert_eq!(c.target_costs.len(), 1);
    let t = text(&c);
    assert!(t.contains("Target costs: etcd · hot-key (8 clients, 1 key(s))"), "{t}");
}

#[test]
fn redlock_waits_for_its_slowest_node_and_arithmetic_holds() {
    let r = recipe("redlock").unwrap();
    let mut t = costs(Via::Loopback, 50.0, MediumKind::Host, Some(1.0));
    for (i, rt) in t.round_trips.iter_mut().enumerate() {
        rt.service = "redlock".into();
        rt.figure.median_us = Some(50.0 + 100.0 * i as f64);
    }
    let s = side_costs(&t, "redlock", r.fan_out);
    assert_eq!(s.rtt_us, Ok(250.0), "a fan-out round is as slow as the slowest node");
    let etcd = side_costs(&t, "etcd", false);
    assert!(etcd.rtt_us.is_err(), "no etcd round trips in this record: {etcd:?}");
    let base = side_costs(&costs(Via::Loopback, 50.0, MediumKind::Host, Some(1.0)), "etcd", false);
    let e = estimate(&recipe("etcd").unwrap(), &base, &base);
    assert_eq!(e.total_us, Some(0.0));
    assert_eq!(per_acquisition_us(8, 1, 1000.0), Some(1000.0));
    assert_eq!(per_acquisition_us(8, 64, 1000.0), Some(8000.0), "eight at a time when keys outnumber clients");
    assert_eq!(per_acquisition_us(8, 1, 0.0), None);
    assert!(recipe("memory").is_none(), "no note for the in-process reference");
}

/// `t` with a loaded round trip for `service`: `us` median, `p90` and `rate` req/s.
fn with_loaded(mut t: TargetCosts, service: &str, nodes: usize, us: f64, p90: f64, rate: Option<f64>) -> TargetCosts {
    let figure = match rate {
        Some(_) => Figure { n: 800, median_us: Some(us), p90_us: Some(p90), not_measured: None },
        None => Figure::missing("8 connections did not finish within 5 s"),
    };
    let via = t.round_trips[0].via;
    t.loaded.push(LoadedRoundTrip { service: service.into(), nodes, connections_per_node: 8, via, request: "Range".into(), per_second: rate, figure });
    t
}

#[test]
fn the_loaded_round_trip_is_priced_where_both_sides_have_it() {
    // Idle 150 vs 50 µs would explain 4 x 100 = 400 µs; under load 400 vs 200 µs explains
    // 4 x 200 = 800 µs, plus 2 x 500 µs of fsync: 1.80 ms of the 1.80 ms observed.
    let base = with_loaded(local(), "etcd", 3, 200.0, 300.0, Some(40000.0));
    let compose = with_loaded(costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0)), "etcd", 3, 400.0, 900.0, Some(20000.0));
    let n = notes(&run("local", 1000.0, Some(base.clone())), &run("compose", 1e6 / 2800.0, Some(compose.clone())));
    let n = &n[0];
    assert!(n.contains("explain ~1.80 ms (100%)"), "{n}");
    assert!(n.contains("round trip under load (8 connections to each node at once, median) 400 µs (compose network, 20.0k req/s) vs 200 µs (loopback, 40.0k req/s) x 2 requests + 2 replication rounds = 800 µs"), "{n}");
    assert!(n.contains("idle round trip 150 µs vs 50 µs (not added"), "{n}");
    // A fan-out round is priced at the loaded p90 (the slowest node).
    let r = recipe("redlock").unwrap();
    let mut t = with_loaded(local(), "redlock", 5, 100.0, 250.0, Some(50000.0));
    t.round_trips.iter_mut().for_each(|rt| rt.service = "redlock".into());
    assert_eq!(side_costs(&t, "redlock", r.fan_out).loaded, Some(Ok((250.0, 50000.0, 8))));
    // Loaded on one side only: the idle figure is priced, and the note says why.
    let failed = with_loaded(costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0)), "etcd", 3, 0.0, 0.0, None);
    let n = notes(&run("local", 1000.0, Some(base)), &run("compose", 1e6 / 2400.0, Some(failed)));
    assert!(n[0].contains("round trip under load: not measured (8 connections did not finish within 5 s); the idle one priced instead"), "{}", n[0]);
    assert!(n[0].contains("explain ~1.40 ms (100%)"), "{}", n[0]);
    // Neither side recorded it (older runs): the idle figure, with no word about load.
    let n = notes(&run("local", 1000.0, Some(local())), &run("compose", 1e6 / 2400.0, Some(costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0)))));
    assert!(!n[0].contains("under load"), "{}", n[0]);
}

#[test]
fn the_capacity_reading_sets_the_paths_rate_ratio_beside_the_locks() {
    // The path carried 20k req/s on compose against 40k locally (0.50x).
    let base = with_loaded(local(), "etcd", 3, 200.0, 300.0, Some(40000.0));
    let compose = with_loaded(costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0)), "etcd", 3, 400.0, 900.0, Some(20000.0));
    let note = |ops: f64, c: &TargetCosts| notes(&run("local", 1000.0, Some(base.clone())), &run("compose", ops, Some(c.clone())))[0].clone();
    // The lock at 0.36x, below the path's 0.50x: the path covers 0.50 of the 0.64 drop.
    let n = note(1e6 / 2800.0, &compose);
    assert!(n.contains("; capacity: under load the path carried 20.0k vs 40.0k req/s (0.50x), the lock acquired at 0.36x: the path's capacity covers 78% of the drop (0.50 of 0.64), the rest is not explained by it; the measured costs explain"), "{n}");
    // The lock at 0.70x, above the path's: covered; it comes before the latency sum.
    let n = note(700.0, &compose);
    assert!(n.contains("the lock acquired at 0.70x: a lock bound by the path alone would acquire at 0.50x: the path's capacity covers the drop;"), "{n}");
    assert!(n.find("capacity:").unwrap() < n.find("the measured costs explain").unwrap(), "the capacity reading first: {n}");
    // Compose faster than local: nothing to explain, never a share.
    let n = note(1200.0, &compose);
    assert!(n.contains("the lock acquired at 1.20x: no drop to explain"), "{n}");
    // No loaded figure on one side: no capacity reading (never a ratio built on a guess).
    let n = note(500.0, &costs(Via::ComposeNetwork, 150.0, MediumKind::Volume, Some(1500.0)));
    assert!(!n.contains("capacity"), "{n}");
}
