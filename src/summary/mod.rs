//! The result-set model: what a run measured, per backend and per workload, as written to
//! `summary.json`, with its sections (calibration, scenarios, resources, soak) in the
//! submodules. Renderers (`report`: the tables, Markdown, HTML, plots; `compare`) read these
//! types; nothing here renders, and nothing here imports a renderer.

pub mod answer;
pub mod decision;
mod judged;
pub mod calibration;
pub mod medium;
pub mod usage;
pub mod scaling;
pub mod scenario;
pub mod soak;
pub mod steady;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use hdrhistogram::Histogram;

use crate::checker::{SegmentVerdict, Validity};
use crate::faultlog::NemesisEvent;
use crate::stats::{Percentiles, TimePoint};
use crate::judgement::{self, Availability, CheckBrief, FencingMode, SafetyCounts, Verdict};

pub const SCHEMA_VERSION: u32 = 1;

/// `errors_window` of a workload whose `errors` count the measured window (warm-up excluded).
pub const ERRORS_WINDOW_MEASURED: &str = "measured";

/// The JSON Schema of `summary.json`, as committed in `schema/summary.schema.json`.
pub fn json_schema() -> String {
    let mut s = serde_json::to_string_pretty(&schemars::schema_for!(Summary)).expect("schema serializes");
    s.push('\n');
    s
}

/// Milliseconds at a few quantiles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LagMs {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl LagMs {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LagMs::default();
        }
        let ms = |us: u64| (us as f64 / 10.0).round() / 100.0;
        LagMs { p50: ms(h.value_at_quantile(0.5)), p99: ms(h.value_at_quantile(0.99)), max: ms(h.max()) }
    }
}

/// Open-loop figures: what was scheduled and what the driver managed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenLoop {
    pub target_rate: f64,
    /// Operations due in the measured window, and those that completed (any outcome).
    pub scheduled: u64,
    pub completed: u64,
    /// How late a free client started a due operation: the driver's own lag.
    pub schedule_lag_ms: LagMs,
    /// Operations due that no client had started: at the end, and the most at any second.
    #[serde(default)]
    pub backlog_at_end: u64,
    #[serde(default)]
    pub backlog_max: u64,
    /// True when the driver could not keep the schedule: too few clients, or a starved
    /// driver. Latency then still counts from the intended start, so it stays honest.
    pub behind_schedule: bool,
}

/// One second of the time series, labelled with its workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesPoint {
    pub workload: String,
    #[serde(flatten)]
    pub point: TimePoint,
}

/// One workload phase on one backend.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadSummary {
    pub name: String,
    /// The phase's identity in the history (backend and first key): its checks are the
    /// segment with the same id, never another phase's by position.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase_id: String,
    pub clients: usize,
    pub keys: usize,
    pub seed: Option<u64>,
    pub warmup_s: f64,
    pub measured_s: f64,
    /// The plan's hold and duration (what `compare` checks both sides agree on).
    #[serde(default)]
    pub hold: String,
    #[serde(default)]
    pub duration_s: f64,
    #[serde(default)]
    pub wait_timeout_ms: u64,
    /// The plan's TTL, think time and key distribution (what `compare` also checks both
    /// sides agree on); absent from summaries written before they were recorded.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub ttl_ms: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub think: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_dist: String,
    /// Which repetition this is (`run --repeat N`: 0..N, interleaved across backends).
    #[serde(default)]
    pub repeat: u32,
    /// Seconds into the measured window at which the rate settled (see `summary::steady`);
    /// absent when it never did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_after_s: Option<f64>,
    /// Flags: seconds without an acquisition, a max far above the p99, a stall longer than
    /// the wait timeout, a rate that settled late or never (see `summary::steady`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomalies: Vec<steady::Anomaly>,
    pub ops_per_sec: f64,
    pub acquired: u64,
    /// From the intended start in open loop, from the call in closed loop.
    pub acquire_latency_us: Percentiles,
    /// From the call (equal to acquire latency in closed loop).
    pub service_latency_us: Percentiles,
    pub release_latency_us: Percentiles,
    pub handoff_latency_us: Percentiles,
    /// Acquires that ended in contention (wait timeout, busy), until they did (from the
    /// intended start in open loop): failures in a series of their own, never dropped.
    #[serde(default)]
    pub timeout_latency_us: Percentiles,
    /// Acquires that failed otherwise, until they did.
    #[serde(default)]
    pub error_latency_us: Percentiles,
    /// Jain's index over acquisitions per client (1 = perfectly even).
    pub fairness_jain: Option<f64>,
    /// Grants out of arrival order, for backends that promise FIFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo_violations: Option<u64>,
    pub driver_lag_ms: LagMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// The first keys (indices) chosen by the first clients: the same seed gives the same.
    pub first_keys: Vec<Vec<u32>>,
    pub timeseries: Vec<TimePoint>,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Which window `errors` and `error_kinds` count: [`ERRORS_WINDOW_MEASURED`], the one
    /// `acquired`, `timeouts` and the rates count (warm-up excluded). Absent where they count
    /// the whole phase, warm-up included: summaries written before issue 54, and figures
    /// rebuilt from the history of an interrupted run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_window: Option<String>,
    pub timeouts: u64,
    /// Acquires cut short by an interrupt or the drain bound (not errors of the lock).
    #[serde(default)]
    pub cancelled: u64,
    /// Acquires in flight when the phase's time was up (counted as they finished).
    #[serde(default)]
    pub in_flight_at_end: u64,
    pub retired_clients: u64,
    pub sections: u64,
    /// Overlaps, lost updates, stale tokens, refusals (with `stale_refused` always set).
    #[serde(flatten)]
    pub counts: SafetyCounts,
    /// Sections whose holder's lease was already lost when they entered.
    #[serde(default)]
    pub entered_expired: u64,
    /// Mean over keys of the fraction of wall time some holder was inside a section: how
    /// likely a second holder would have been seen. Below 20% the evidence is weak.
    #[serde(default)]
    pub exposure: Option<f64>,
    /// The same fraction on the busiest key.
    #[serde(default)]
    pub busiest_key_exposure: Option<f64>,
    /// Availability during the phase's applied faults (absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    /// The history checkers' answers (evidence in checks.json).
    #[serde(default)]
    pub checks: Vec<CheckBrief>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// This phase's verdict (see `verdict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Each fault judged in its own window, and the quiet time between them (absent without
    /// a history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<judgement::window::Windows>,
    /// A scenario's choreography (a holder paused, a node restarted on cue) rather than a
    /// load under a nemesis: judged by the scenario's expectation, never given a class.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub choreographed: bool,
    /// The scenario's expectation for this choreography, and whether it was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<judgement::Expectation>,
    #[serde(default)]
    pub nemesis: Vec<NemesisEvent>,
    /// Server CPU time (utime + stime of every process of the backend's servers, over the
    /// measured window) per successful acquisition, µs. Only on the local target, where
    /// dlbench started the servers and knows their PIDs; absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_acq: Option<f64>,
    /// dlbench's own CPU time over the same window per successful acquisition, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlbench_cpu_us_per_acq: Option<f64>,
    /// Counters the servers report, per successful acquisition over the same window (local
    /// target): `wal_fsyncs` (etcd), `wal_bytes` and `wal_syncs` (PostgreSQL `pg_stat_wal`),
    /// `net_bytes` (Redis and Redlock, in + out, summed over the nodes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_counters_per_acq: BTreeMap<String, f64>,
    /// dlbench's resident memory at its highest during this phase, MiB (sampled each second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_peak_rss_mb: Option<f64>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// One backend over all its phases.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackendSummary {
    pub name: String,
    pub capabilities: Option<serde_json::Value>,
    /// How its clients reached the servers, as in effect: `per-client` (a connection, session
    /// or lease each) or `shared` (one connection per server). Absent for `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<String>,
    /// Acquisitions per second over all measured phases.
    pub ops_per_sec: f64,
    pub acquire_latency_us: Percentiles,
    pub release_latency_us: Percentiles,
    pub handoff_latency_us: Percentiles,
    /// The least fair of the workloads (Jain's index over acquisitions per client).
    pub fairness_jain: Option<f64>,
    /// Grants out of arrival order over all workloads, where FIFO is claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo_violations: Option<u64>,
    /// The driver's own timer lag over all workloads (10 ms probe).
    pub driver_lag_ms: LagMs,
    /// Per-second series of every workload, in run order.
    pub timeseries: Vec<SeriesPoint>,
    pub errors: u64,
    pub timeouts: u64,
    /// Summed over the workloads (without `stale_refused`).
    #[serde(flatten)]
    pub counts: SafetyCounts,
    /// Availability during faults, over all workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    /// The worst checker answer over all workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// Derived from the counts above (see `verdict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Every fault started and ended on this backend.
    #[serde(default)]
    pub nemesis: Vec<NemesisEvent>,
    pub workloads: Vec<WorkloadSummary>,
    /// Why this backend could not be measured, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Expiry and reentrancy, measured after the phases by `run --properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Properties>,
    /// The servers' durability settings it ran with (`run --durability`), or found on a
    /// compose or external target. When a run has several levels, each backend appears once
    /// per level, named `design@level` (`redis@strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<crate::durability::Recorded>,
}

/// Two of the four properties a lock is judged by, measured on the servers by
/// `dlbench_core::probe` (the other two, mutual exclusion and availability, are the
/// verdict and the fault figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Properties {
    /// The TTL, lease or session timeout the expiry probe's holder had.
    pub ttl_ms: u64,
    /// From the holder vanishing without a release to the next client's grant.
    pub expiry_ms: Option<u64>,
    /// What a second acquire by the holder did, e.g. "granted, with a hold count".
    pub reentrancy: Option<String>,
    /// Why a probe measured nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    /// False until the run ends normally; a killed or interrupted run stays false.
    pub complete: bool,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub command: Vec<String>,
    /// The git commit dlbench was built from.
    #[serde(default)]
    pub dlbench_commit: Option<String>,
    #[serde(default)]
    pub machine: crate::facts::Machine,
    pub target: String,
    pub versions: BTreeMap<String, String>,
    /// Peak resident memory of the dlbench process, in MiB.
    pub peak_rss_mb: Option<f64>,
    /// Which side of the resource the verdicts speak for.
    pub fencing: FencingMode,
    /// The fault schedule (`--nemesis`), empty when no faults ran.
    #[serde(default)]
    pub nemesis_schedule: Vec<String>,
    /// A fault started every this many seconds (absent without faults, and in summaries
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nemesis_interval_s: Option<f64>,
    pub backends: Vec<BackendSummary>,
    /// `dlbench scenario`: each entry's observation against its expectation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<scenario::ScenarioOutcome>,
    /// `dlbench scenario U1,...`: the "what users hit" measurements, one per entry, backend
    /// and case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<scenario::Hit>,
    /// `dlbench calibrate`: the harness beside reference tools, primitive costs, and each
    /// lock's hand-off rate against its bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<calibration::Calibration>,
    /// The harness's memory and file descriptors and each server's memory over the run,
    /// sampled once a second (the series are in resources.jsonl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<usage::UsageSummary>,
    /// `dlbench soak`: the run judged against the soak's goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<soak::SoakOutcome>,
    /// `dlbench merge`: the shards the figures add up from, one row each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardRow>,
    /// Where the protected resource lived, when not in the process: the resource server
    /// (`--resource`, shown without credentials), whose clock stamped every section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_server: Option<String>,
    /// What the layer between the bench and the servers cost on this target (round trips,
    /// fsync), measured before the phases; absent where it was not measured (external
    /// target, runs written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_costs: Option<medium::TargetCosts>,
    /// The plan's settings that change what is measured and are recorded nowhere else in the
    /// summary (history kept or not, request timeout, shard, each phase's retry interval, ops
    /// limit, zipf exponent), by name: `compare` refuses runs where one differs. Absent in
    /// summaries written before they were recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan_settings: BTreeMap<String, String>,
}

impl Summary {
    /// The backends in every table's order: grouped by family (database, Redis, consensus),
    /// in run order within a family.
    pub fn by_family(&self) -> Vec<&BackendSummary> {
        let mut order: Vec<&'static str> = Vec::new();
        for b in &self.backends {
            if !order.contains(&b.family()) {
                order.push(b.family());
            }
        }
        let rank = |f: &str| crate::kind::BackendKind::FAMILIES.iter().position(|x| *x == f).unwrap_or(usize::MAX);
        order.sort_by_key(|f| rank(f));
        order.iter().flat_map(|f| self.backends.iter().filter(move |b| b.family() == *f)).collect()
    }

    /// Whether any backend ran a phase or failed: a calibration (or a run stopped before its
    /// first phase) has no rows to tabulate.
    pub fn has_rows(&self) -> bool {
        self.backends.iter().any(|b| b.failure.is_some() || !b.workloads.is_empty())
    }

    /// A run's summary before anything was measured (`complete` false).
    pub fn begin(run_id: &str, target: &str, fencing: FencingMode, nemesis_schedule: Vec<String>) -> Summary {
        Summary {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.to_string(),
            complete: false,
            started_at: crate::results::now_rfc3339(),
            ended_at: None,
            command: std::env::args().collect(),
            dlbench_commit: crate::facts::commit(),
            machine: crate::facts::machine(),
            target: target.to_string(),
            versions: BTreeMap::new(),
            peak_rss_mb: None,
            fencing,
            nemesis_schedule,
            nemesis_interval_s: None,
            backends: Vec::new(),
            scenarios: Vec::new(),
            hits: Vec::new(),
            calibration: None,
            resources: None,
            soak: None,
            shards: Vec::new(),
            resource_server: None,
            target_costs: None,
            plan_settings: BTreeMap::new(),
        }
    }

    /// True when some fault was applied (not merely asked for) in some phase.
    pub fn faults_applied(&self) -> bool {
        self.backends.iter().flat_map(|b| &b.workloads).any(|w| !w.faults_applied().is_empty())
    }

    /// Hand each backend its segments' verdicts, paired by phase id, and derive its verdicts.
    pub fn attach_checks(&mut self, verdicts: &[SegmentVerdict], mode: FencingMode) {
        for b in &mut self.backends {
            if b.failure.is_some() {
                continue;
            }
            let mine: Vec<SegmentVerdict> = verdicts.iter().filter(|v| v.backend == b.name).cloned().collect();
            b.attach_checks(&mine, mode);
        }
    }

    /// A fault was asked for somewhere but skipped, shown to do nothing, or never seen to
    /// take effect.
    pub fn faults_without_effect(&self) -> bool {
        self.backends.iter().flat_map(|b| &b.workloads).any(|w| {
            let t = w.fault_tally();
            !t.skipped.is_empty() || !t.no_effect.is_empty() || !t.unchecked.is_empty()
        })
    }

    /// Every verdict of the run set (each phase's and each backend's) that says something
    /// against itself, named: `judgement::contradictions` on each.
    pub fn contradictions(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in &self.backends {
            let phases = b.workloads.iter().map(|w| (format!("{} · {}", b.name, w.name), w.verdict.as_ref()));
            for (name, v) in std::iter::once((b.name.clone(), b.verdict.as_ref())).chain(phases) {
                out.extend(v.into_iter().flat_map(judgement::contradictions).map(|c| format!("{name}: {c}")));
            }
        }
        out
    }

    /// The worst verdict over every backend: what the exit status says.
    pub fn worst(&self) -> Validity {
        self.backends.iter().filter_map(|b| b.verdict.as_ref().map(|v| v.valid)).max().unwrap_or(Validity::Valid)
    }

    /// Mark the run finished (or interrupted) now.
    pub fn finish(&mut self, complete: bool) {
        self.complete = complete;
        self.ended_at = Some(crate::results::now_rfc3339());
        self.peak_rss_mb = peak_rss_mb();
    }
}

/// This process's peak resident set size (VmHWM), in MiB.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

impl BackendSummary {
    /// The family its rows are grouped under (by its name; unknown names have none).
    pub fn family(&self) -> &'static str {
        crate::durability::design_of(&self.name).parse::<crate::kind::BackendKind>().map(|k| k.family()).unwrap_or("")
    }

    /// Record the connection mode the backend ran with.
    pub fn with_connections(mut self, c: Option<dlbench_core::Connections>) -> Self {
        self.connections = c.map(|c| c.to_string());
        self
    }

    /// A backend with nothing measured (yet): every figure zero or absent.
    pub fn empty(name: &str, capabilities: Option<serde_json::Value>) -> Self {
        BackendSummary {
            name: name.to_string(),
            capabilities,
            connections: None,
            ops_per_sec: 0.0,
            acquire_latency_us: Percentiles::default(),
            release_latency_us: Percentiles::default(),
            handoff_latency_us: Percentiles::default(),
            fairness_jain: None,
            fifo_violations: None,
            driver_lag_ms: LagMs::default(),
            timeseries: Vec::new(),
            errors: 0,
            timeouts: 0,
            counts: SafetyCounts::default(),
            availability: None,
            validity: None,
            verdict: None,
            nemesis: Vec::new(),
            workloads: Vec::new(),
            failure: None,
            properties: None,
            durability: None,
        }
    }

    pub fn failed(name: &str, why: String) -> Self {
        BackendSummary { failure: Some(why), ..BackendSummary::empty(name, None) }
    }
}

/// One shard as the merged result shows it, so a slow or late load host is seen rather
/// than averaged away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardRow {
    /// `I/N`.
    pub shard: String,
    pub run_id: String,
    pub clients: usize,
    pub ops_per_sec: f64,
    pub acquired: u64,
    /// The driver's own timer lateness, p99 (ms): the load host as a bottleneck.
    pub driver_lag_p99_ms: f64,
    /// Its measured window started this long after the earliest shard's (ms).
    pub start_offset_ms: f64,
    /// Its clock against the resource server's (server minus shard, ms), when the shards used
    /// one (`--resource`); none otherwise.
    pub clock_offset_ms: Option<f64>,
}
