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

/// The hot-key hand-off rate against the bound its primitives set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Efficiency {
    pub backend: String,
    pub release_write_us: f64,
    pub notification_us: f64,
    pub acquire_confirm_us: f64,
    /// 1e6 / (release write + notification + confirm).
    pub bound_per_sec: f64,
    /// Acquisitions per second on one hot key, acquire then release at once.
    pub handoff_per_sec: f64,
    /// handoff / bound.
    pub efficiency: f64,
    pub note: String,
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
