//! Recording measurements without per-operation memory.
//!
//! Histograms (HdrHistogram, microseconds, 1 us to 10 min at 3 significant digits) live in a
//! few shards, each behind its own mutex; a client records into shard `client % shards`.
//! Ten thousand clients therefore share a handful of histograms instead of owning one each.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

const MAX_US: u64 = 600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

/// Counts and histograms for one shard, or merged over all.
#[derive(Debug, Clone)]
pub struct Totals {
    pub acquire: Histogram<u64>,
    pub release: Histogram<u64>,
    pub acquired: u64,
    pub timeouts: u64,
    /// Non-contention failures by kind (`unavailable`, `indeterminate`, ...).
    pub errors: BTreeMap<&'static str, u64>,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            acquire: new_histogram(),
            release: new_histogram(),
            acquired: 0,
            timeouts: 0,
            errors: BTreeMap::new(),
        }
    }
}

impl Totals {
    pub fn merge(&mut self, o: &Totals) {
        self.acquire.add(&o.acquire).expect("same bounds");
        self.release.add(&o.release).expect("same bounds");
        self.acquired += o.acquired;
        self.timeouts += o.timeouts;
        for (k, v) in &o.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The sharded recorder one phase writes into.
pub struct Recorder {
    shards: Vec<Mutex<Totals>>,
}

impl Recorder {
    pub fn new(clients: usize) -> Self {
        let n = clients.clamp(1, 16);
        Recorder { shards: (0..n).map(|_| Mutex::new(Totals::default())).collect() }
    }

    fn shard(&self, client: usize) -> std::sync::MutexGuard<'_, Totals> {
        self.shards[client % self.shards.len()].lock().unwrap()
    }

    pub fn acquired(&self, client: usize, latency: Duration) {
        let mut s = self.shard(client);
        s.acquire.saturating_record(us(latency));
        s.acquired += 1;
    }

    pub fn released(&self, client: usize, latency: Duration) {
        self.shard(client).release.saturating_record(us(latency));
    }

    pub fn timed_out(&self, client: usize) {
        self.shard(client).timeouts += 1;
    }

    pub fn failed(&self, client: usize, kind: &'static str) {
        *self.shard(client).errors.entry(kind).or_default() += 1;
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.shards {
            t.merge(&s.lock().unwrap());
        }
        t
    }
}

/// A latency distribution as reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            mean: (h.mean() * 10.0).round() / 10.0,
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_merge_to_the_whole() {
        let r = Recorder::new(4);
        for c in 0..100 {
            r.acquired(c, Duration::from_micros(100 + c as u64));
        }
        r.failed(3, "unavailable");
        r.timed_out(5);
        let t = r.totals();
        assert_eq!(t.acquired, 100);
        assert_eq!(t.acquire.len(), 100);
        assert_eq!(t.error_count(), 1);
        assert_eq!(t.timeouts, 1);
        let p = Percentiles::of(&t.acquire);
        assert!(p.p50 >= 140 && p.p50 <= 160, "{p:?}");
        assert_eq!(p.max, 199);
    }
}
