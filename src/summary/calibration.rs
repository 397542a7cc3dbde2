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
