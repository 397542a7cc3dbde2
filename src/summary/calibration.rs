//! `summary.json`'s `calibration` section: what `dlbench calibrate` measured (the harness
//! beside reference tools, primitive costs, hand-off bounds). Data only; `report` renders it.

use serde::{Deserialize, Serialize};

/// `summary.json`'s `calibration` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Calibration {
    /// Concurrent connections (clients) in every rate measurement.
    pub connections: usize,
    /// Length of each rate measurement, in seconds.
    pub seconds: f64,
    pub side_by_side: Vec<SideBySide>,
    pub primitive_cost: Vec<PrimitiveCost>,
    pub efficiency: Vec<Efficiency>,
    /// `calibrate --peers`: interleaved repeats per backend x workload x official client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerComparison>,
    /// `calibrate --peers`: runs per side per row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<usize>,
}

/// The harness against a reference tool doing the same work on the same server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideBySide {
    pub backend: String,
    pub work: String,
    pub dlbench_per_sec: f64,
    pub reference: String,
    pub reference_per_sec: f64,
    /// dlbench / reference.
    pub ratio: f64,
}

/// A backend's primitive against its lock cycle, uncontended (each client its own key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrimitiveCost {
    pub backend: String,
    pub primitive: String,
    pub primitive_per_sec: f64,
    pub lock_cycle_per_sec: f64,
    /// primitive rate / lock cycle rate: what one acquire + release costs in primitives.
    pub primitives_per_cycle: f64,
}

/// The hot-key hand-off rate against the bound its protocol sets: the sum of the terms on a
/// hand-off's critical path (from one holder's acquire returning to the next one's), each
/// measured on its own, unloaded. Every term is a least cost (a best-case gap counts 0), so
/// the sum is a floor on the time a hand-off takes and its inverse a ceiling on the rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Efficiency {
    pub backend: String,
    /// The critical path, term by term, summed into the bound.
    pub critical_path: Vec<BoundTerm>,
    /// Figures measured beside the path and not summed into it: the polling locks' expected
    /// retry gap and the releaser's own next attempt, the release's latency under the
    /// hot-key load (where the difference between bound and achieved goes).
    pub beside: Vec<BoundTerm>,
    /// Sum of `critical_path`.
    pub critical_path_us: f64,
    /// 1e6 / critical_path_us.
    pub bound_per_sec: f64,
    /// Acquisitions per second on one hot key, acquire then release at once.
    pub handoff_per_sec: f64,
    /// handoff / bound.
    pub efficiency: f64,
    pub note: String,
    /// The same hot-key hand-offs as they happened, grant after grant: who won each and
    /// where its time went (where the rest between bound and achieved goes, measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoffs: Option<Handoffs>,
}

/// The hot-key hand-offs as measured in the efficiency run: each grant against the one
/// before it (grants ordered by when their acquire returned, in one process's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Handoffs {
    /// Consecutive grant pairs seen.
    pub count: u64,
    /// Median µs from one grant returning to the next: a hand-off as it took.
    pub median_us: f64,
    /// Share of hand-offs won by the client that had just released: at hold 0 its own next
    /// attempt (release, then acquire: two round trips for a polling lock).
    pub to_releaser_share: f64,
    /// Median µs of a hand-off won by the releaser itself (None: none was).
    pub to_releaser_median_us: Option<f64>,
    /// Median µs of a hand-off won by a waiting client (None: none was): the release, the
    /// waiter noticing it (its next poll, or the notification and the recipe's reads), and
    /// its winning request.
    pub to_waiter_median_us: Option<f64>,
    /// The harness's own time on the path, median µs per hand-off: from a grant returning to
    /// its release being called, and for a hand-off to the releaser from its release
    /// returning to its next acquire being called.
    pub harness_median_us: f64,
    /// The harness's time summed over all hand-offs, as a share of their summed time.
    pub harness_share: f64,
}

/// One lock cycle of the efficiency run, as the client saw it (µs since the run began).
#[derive(Debug, Clone, Copy)]
pub struct Cycle {
    pub client: usize,
    pub acquire_called: f64,
    pub granted: f64,
    pub release_called: f64,
    pub released: f64,
}

impl Handoffs {
    /// The hand-offs between consecutive grants; None with fewer than two cycles.
    pub fn of(mut cycles: Vec<Cycle>) -> Option<Handoffs> {
        cycles.sort_by(|a, b| a.granted.total_cmp(&b.granted));
        let (mut all, mut own, mut other, mut harness) = (vec![], vec![], vec![], vec![]);
        let (mut total, mut harness_total) = (0.0, 0.0);
        for w in cycles.windows(2) {
            let (prev, next) = (w[0], w[1]);
            let took = next.granted - prev.granted;
            let mut h = (prev.release_called - prev.granted).max(0.0);
            if next.client == prev.client {
                own.push(took);
                h += (next.acquire_called - prev.released).max(0.0);
            } else {
                other.push(took);
            }
            all.push(took);
            harness.push(h);
            total += took;
            harness_total += h;
        }
        if all.is_empty() {
            return None;
        }
        Some(Handoffs {
            count: all.len() as u64,
            median_us: median(&mut all)?,
            to_releaser_share: own.len() as f64 / all.len() as f64,
            to_releaser_median_us: median(&mut own),
            to_waiter_median_us: median(&mut other),
            harness_median_us: median(&mut harness)?,
            harness_share: if total > 0.0 { harness_total / total } else { 0.0 },
        })
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

/// One measured term of a hand-off bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BoundTerm {
    /// What the term is, e.g. "watch event after the delete was sent".
    pub what: String,
    /// How many times it lies on the path.
    pub times: u32,
    /// One occurrence, µs (median of serial samples).
    pub us: f64,
}

impl BoundTerm {
    pub fn new(what: impl Into<String>, times: u32, us: f64) -> Self {
        BoundTerm { what: what.into(), times, us }
    }

    /// "2 x read 1185" or "read 1185".
    pub fn label(&self) -> String {
        if self.times == 1 { format!("{} {:.0}", self.what, self.us) } else { format!("{} x {} {:.0}", self.times, self.what, self.us) }
    }
}

impl Efficiency {
    /// The bound from its terms and the achieved hot-key rate.
    pub fn new(backend: &str, critical_path: Vec<BoundTerm>, beside: Vec<BoundTerm>, handoff_per_sec: f64, note: &str) -> Self {
        let us: f64 = critical_path.iter().map(|t| t.times as f64 * t.us).sum();
        let bound = if us > 0.0 { 1e6 / us } else { f64::INFINITY };
        Efficiency {
            backend: backend.to_string(),
            critical_path,
            beside,
            critical_path_us: us,
            bound_per_sec: bound,
            handoff_per_sec,
            efficiency: handoff_per_sec / bound,
            note: note.to_string(),
            handoffs: None,
        }
    }

    /// The path as one line: "release → event 2735 + 2 x read 1185 = 5105 µs".
    pub fn path_line(&self) -> String {
        let terms: Vec<String> = self.critical_path.iter().map(BoundTerm::label).collect();
        format!("{} = {:.0} µs", terms.join(" + "), self.critical_path_us)
    }

    pub fn beside_line(&self) -> String {
        self.beside.iter().map(BoundTerm::label).collect::<Vec<_>>().join("; ")
    }
}

/// dlbench beside the official client of one recipe (`calibrate --peers`): the same
/// workload, servers and concurrency, run interleaved (dlbench, peer, dlbench, peer, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeerComparison {
    pub backend: String,
    /// The dlbench workload both sides ran (`hot-key`, `many-keys`).
    pub workload: String,
    /// The peer program (`peers/`): `redis-py`, `pottery`, `kazoo`, `curator`, `etcd-go`.
    pub peer: String,
    /// The client and its version, as the peer program reports it.
    pub client: String,
    /// How the peer drives its client (the documented usage chosen).
    pub usage: String,
    /// Concurrent clients on each side: each its own connection and session.
    pub clients: usize,
    /// Keys the clients choose from, uniformly.
    pub keys: usize,
    /// dlbench's acquisitions per second, one per repeat, in run order.
    pub dlbench_per_sec: Vec<f64>,
    /// The peer's acquisitions per second, one per repeat, each run right after the
    /// dlbench run of the same index.
    pub peer_per_sec: Vec<f64>,
    /// dlbench / peer, per repeat.
    pub ratios: Vec<f64>,
    pub ratio_median: f64,
    pub ratio_min: f64,
    pub ratio_max: f64,
    /// Median over repeats of each side's p99 acquire latency, µs.
    pub dlbench_p99_us: Option<f64>,
    pub peer_p99_us: Option<f64>,
    /// Acquires the peer reported as failed (timeouts, errors), over all repeats.
    pub peer_errors: u64,
}

impl PeerComparison {
    /// Median and range of the finite values; none when there are none.
    pub fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
        let mut v: Vec<f64> = values.iter().copied().filter(|r| r.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let m = v.len() / 2;
        let median = if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 };
        Some((median, v[0], v[v.len() - 1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_inverse_of_its_terms_and_the_rest_is_listed_beside() {
        let e = Efficiency::new(
            "etcd",
            vec![BoundTerm::new("delete sent -> watch event", 1, 2000.0), BoundTerm::new("range read", 2, 1000.0)],
            vec![BoundTerm::new("delete's reply", 1, 1800.0)],
            100.0,
            "",
        );
        assert_eq!(e.critical_path_us, 4000.0);
        assert_eq!(e.bound_per_sec, 250.0);
        assert_eq!(e.efficiency, 0.4);
        assert_eq!(e.path_line(), "delete sent -> watch event 2000 + 2 x range read 1000 = 4000 µs");
        assert_eq!(e.beside_line(), "delete's reply 1800");
    }

    #[test]
    fn hand_offs_are_split_by_who_won_and_the_harness_time_is_counted() {
        let c = |client, acquire_called, granted, release_called, released| Cycle { client, acquire_called, granted, release_called, released };
        // Given out of order: sorted by grant. 0 -> 0 (the releaser again), 0 -> 1 (a waiter), 1 -> 2.
        let h = Handoffs::of(vec![
            c(1, 50.0, 400.0, 401.0, 450.0),
            c(0, 0.0, 100.0, 102.0, 150.0),
            c(2, 60.0, 700.0, 700.0, 750.0),
            c(0, 153.0, 250.0, 250.0, 300.0),
        ])
        .unwrap();
        assert_eq!(h.count, 3);
        assert_eq!(h.to_releaser_share, 1.0 / 3.0);
        assert_eq!(h.to_releaser_median_us, Some(150.0));
        // 250 -> 400 and 400 -> 700.
        assert_eq!(h.to_waiter_median_us, Some(300.0));
        // 2 + 3 (to the releaser), 0, 1.
        assert_eq!(h.harness_median_us, 1.0);
        assert_eq!(h.harness_share, 6.0 / 600.0);
        assert_eq!(Handoffs::of(vec![c(0, 0.0, 1.0, 1.0, 2.0)]), None);
    }
}
