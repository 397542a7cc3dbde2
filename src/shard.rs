//! Load from many machines: `run --shard I/N` runs one shard of a plan, `merge`
//! ([`crate::merge`]) combines the shards' result sets into one. This file holds the shard's
//! side: its slice of the plan and what it leaves for `merge`.
//!
//! The engine that starts the shards (Kubernetes, Swarm, compose `--scale`, a shell loop) is
//! not ours; what is ours is that the shards add up to the plan and that merging loses
//! nothing. Shard `I` of `N` runs clients `[I*C/N, (I+1)*C/N)` of the plan's `C`, each with
//! the key sequence and history process id it has in an unsharded run; every shard names
//! its keys after the seed (which must be given), so all of them contend on the same locks;
//! `--start-at` gives them one start. Each shard writes `shard.json` beside its summary:
//! everything its phase measured that adds up exactly (HDR histograms serialised, counters,
//! per-client counts, the resource's tallies, the wall clock of its history's time zero).
//! `merge` adds them up, rebuilds the per-second series from the shards' `.hlog` interval
//! histograms, interleaves the histories on the wall clock and runs the checkers on the
//! whole.
//!
//! Where the holders meet. With `--resource redis://...` (see `resource_server`) every shard's
//! sections run on one server, which decides every overlap, lost update and refusal in its
//! own order and stamps each step with its clock: the shards' tallies add up exactly, their
//! sections land on the server's timeline in the merged history, and each shard's clock
//! offset to that server is measured and shown. Without it, each shard's resource lives in
//! its own process: its tallies see only its own holders, and the merged history's checkers
//! see two shards' holders collide (mutual exclusion over every holder of a key; lost
//! updates replayed per shard's register, the `register` of its sections), comparing
//! timestamps from the shards' own clocks: exact on one host, where the kernel's clock is
//! shared; across hosts, only as good as the hosts' clock sync.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::driver::ShardSlice;
use crate::phase::PhaseResult;
use crate::stats::{new_histogram, TimePoint, Totals};
use crate::workload::Workload;

/// `--shard I/N`: shard `I` (from 0, as a Kubernetes completion index) of `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
    /// Unix time (seconds) every shard's phase starts at, if given.
    pub start_at: Option<u64>,
}

impl std::str::FromStr for ShardSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not I/N (shard I of N, I from 0 to N-1, e.g. 0/3)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(ShardSpec { index, count, start_at: None })
    }
}

impl ShardSpec {
    /// This shard's clients of a phase of `total` clients.
    pub fn slice(&self, total: usize) -> ShardSlice {
        let (i, n) = (self.index as usize, self.count as usize);
        ShardSlice { index: self.index, count: self.count, first_client: i * total / n, total_clients: total }
    }

    /// What the keys are named after: the same in every shard of the plan.
    pub fn key_scope(&self, seed: u64) -> String {
        format!("shards{}-s{seed}", self.count)
    }

    /// How long to wait for `--start-at`; an error when it is too far off to be meant.
    pub fn wait(&self) -> anyhow::Result<Duration> {
        let Some(at) = self.start_at else { return Ok(Duration::ZERO) };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let at = Duration::from_secs(at);
        anyhow::ensure!(
            at < now + Duration::from_secs(3600),
            "--start-at {}: more than an hour from now ({}); give Unix seconds, e.g. $(( $(date +%s) + 30 ))",
            at.as_secs(),
            now.as_secs()
        );
        Ok(at.saturating_sub(now))
    }
}

/// Unix nanoseconds of `t`.
fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

/// An HDR histogram as text: V2 serialisation in base64.
mod hist {
    use super::*;
    pub fn ser<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = Vec::new();
        V2Serializer::new().serialize(h, &mut buf).map_err(|e| serde::ser::Error::custom(format!("{e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(buf))
    }
    pub fn de<'d, D: serde::Deserializer<'d>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)?;
        let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| serde::de::Error::custom(format!("{e:?}")))?;
        // Back into the recording bounds, so shards add up without a bounds error.
        let mut out = new_histogram();
        out.add(&h).map_err(|e| serde::de::Error::custom(format!("{e:?}")))?;
        Ok(out)
    }
}

/// The histograms and counters of a phase, as `shard.json` holds them.
#[derive(Serialize, Deserialize)]
pub struct TotalsDump {
    #[serde(with = "hist_with")]
    pub acquire: Histogram<u64>,
    #[serde(with = "hist_with")]
    pub service: Histogram<u64>,
    #[serde(with = "hist_with")]
    pub release: Histogram<u64>,
    #[serde(with = "hist_with")]
    pub handoff: Histogram<u64>,
    #[serde(with = "hist_with")]
    pub timeout_latency: Histogram<u64>,
    #[serde(with = "hist_with")]
    pub error_latency: Histogram<u64>,
    pub acquired: u64,
    pub timeouts: u64,
    pub errors: BTreeMap<String, u64>,
    pub cancelled: u64,
}

mod hist_with {
    pub use super::hist::{de as deserialize, ser as serialize};
}

impl TotalsDump {
    fn of(t: &Totals) -> Self {
        TotalsDump {
            acquire: t.acquire.clone(),
            service: t.service.clone(),
            release: t.release.clone(),
            handoff: t.handoff.clone(),
            timeout_latency: t.timeout_latency.clone(),
            error_latency: t.error_latency.clone(),
            acquired: t.acquired,
            timeouts: t.timeouts,
            errors: t.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            cancelled: t.cancelled,
        }
    }

    pub fn to_totals(&self) -> Totals {
        Totals {
            acquire: self.acquire.clone(),
            service: self.service.clone(),
            release: self.release.clone(),
            handoff: self.handoff.clone(),
            timeout_latency: self.timeout_latency.clone(),
            error_latency: self.error_latency.clone(),
            acquired: self.acquired,
            timeouts: self.timeouts,
            // Error kinds are a small fixed set of names; a merge keeps them for the process.
            errors: self.errors.iter().map(|(k, v)| (&*Box::leak(k.clone().into_boxed_str()), *v)).collect(),
            cancelled: self.cancelled,
        }
    }
}

/// What a shard's phase leaves for `merge` (`shard.json`).
#[derive(Serialize, Deserialize)]
pub struct ShardPhase {
    pub index: u32,
    pub count: u32,
    pub first_client: usize,
    pub total_clients: usize,
    pub backend: String,
    /// The hlog's label (`redis-many-keys`).
    pub label: String,
    pub key_scope: String,
    pub capabilities: Option<serde_json::Value>,
    pub connections: Option<String>,
    /// The phase as this shard ran it (its share of the clients).
    pub workload: Workload,
    /// Wall clock (Unix ns) of the phase's start and of its history's time zero.
    pub started_unix_ns: u64,
    pub history_epoch_unix_ns: u64,
    pub warmup_s: f64,
    pub measured_s: f64,
    pub totals: TotalsDump,
    #[serde(with = "hist_with")]
    pub driver_lag: Histogram<u64>,
    pub resource: dlbench_core::ResourceStats,
    pub timeseries: Vec<TimePoint>,
    pub per_client: Vec<u64>,
    pub first_keys: Vec<Vec<u32>>,
    pub fifo_violations: Option<u64>,
    pub retired: u64,
    pub cancelled: bool,
    pub in_flight_at_end: u64,
    pub peak_rss_mb: Option<f64>,
    /// The resource server the shard's sections ran on (no credentials), if any: shards on
    /// one server share its registers, so their tallies add up and its counters are common.
    #[serde(default)]
    pub resource_server: Option<String>,
    /// This host's clock against the resource server's.
    #[serde(default)]
    pub resource_clock: Option<crate::resource_server::ClockOffset>,
}

impl ShardPhase {
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        p: &PhaseResult,
        slice: ShardSlice,
        backend: &str,
        label: &str,
        key_scope: &str,
        capabilities: Option<serde_json::Value>,
        connections: Option<String>,
        resource_server: Option<String>,
    ) -> Self {
        ShardPhase {
            index: slice.index,
            count: slice.count,
            first_client: slice.first_client,
            total_clients: slice.total_clients,
            backend: backend.to_string(),
            label: label.to_string(),
            key_scope: key_scope.to_string(),
            capabilities,
            connections,
            workload: p.workload.clone(),
            started_unix_ns: unix_ns(p.started_wall),
            history_epoch_unix_ns: unix_ns(p.history_epoch_wall),
            warmup_s: p.workload.warmup.as_secs_f64(),
            measured_s: p.measured.as_secs_f64(),
            totals: TotalsDump::of(&p.totals),
            driver_lag: p.driver_lag.clone(),
            resource: p.resource.clone(),
            timeseries: p.timeseries.clone(),
            per_client: p.per_client.clone(),
            first_keys: p.first_keys.clone(),
            fifo_violations: p.fifo_violations,
            retired: p.retired,
            cancelled: p.cancelled,
            in_flight_at_end: p.in_flight_at_end,
            peak_rss_mb: p.peak_rss_mb,
            resource_server,
            resource_clock: p.resource_clock,
        }
    }

    /// The measured window's start, Unix ns.
    pub fn window_start(&self) -> u64 {
        self.started_unix_ns + (self.warmup_s * 1e9) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_spec_parses_and_refuses() {
        let s: ShardSpec = "1/3".parse().unwrap();
        assert_eq!((s.index, s.count), (1, 3));
        for bad in ["3/3", "1", "a/3", "0/0", "-1/2"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn slices_cover_every_client_once() {
        for (clients, n) in [(8, 3), (3, 3), (100, 7)] {
            let mut next = 0;
            for i in 0..n {
                let s = ShardSpec { index: i, count: n, start_at: None };
                let a = s.slice(clients);
                let b = if i + 1 < n { ShardSpec { index: i + 1, ..s }.slice(clients).first_client } else { clients };
                assert_eq!(a.first_client, next);
                assert!(b > a.first_client, "each shard has a client");
                next = b;
            }
            assert_eq!(next, clients);
        }
    }

    #[test]
    fn a_histogram_survives_the_dump() {
        let mut t = Totals::default();
        for v in [5u64, 50, 500, 5000] {
            t.acquire.record(v).unwrap();
        }
        t.acquired = 4;
        t.errors.insert("unavailable", 2);
        let text = serde_json::to_string(&TotalsDump::of(&t)).unwrap();
        let back: TotalsDump = serde_json::from_str(&text).unwrap();
        let back = back.to_totals();
        assert_eq!(back.acquire.len(), 4);
        assert_eq!(back.acquire.value_at_quantile(0.99), t.acquire.value_at_quantile(0.99));
        assert_eq!(back.errors.get("unavailable"), Some(&2));
        let mut m = Totals::default();
        m.merge(&back);
        m.merge(&t);
        assert_eq!(m.acquire.len(), 8, "two shards' histograms add up exactly");
    }
}
