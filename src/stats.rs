//! Recording measurements without per-operation memory.
//!
//! Histograms (HdrHistogram, microseconds, 1 us to 10 min at 3 significant digits) live in a
//! few shards, each behind its own mutex; a client records into shard `client % shards`, so
//! ten thousand clients share a handful of histograms instead of owning one each. Besides
//! the run totals, each shard keeps an interval slice that [`Recorder::tick`] drains once a
//! second into the time series and the `.hlog` interval log. [`samples`] holds the statistics
//! over a handful of runs (medians, the Mann-Whitney U test, Holm's adjustment) `compare` uses.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub mod samples;

const MAX_US: u64 = 600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

pub fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

/// A latency in a column headed "ms": milliseconds, with two decimals from 0.1 ms and three
/// under it (`0.004` is 4 µs: the column's unit, never a µs figure in a ms column, never a
/// `0.00` that reads as nothing). Every table (terminal, summary.md, report.html) prints
/// latencies through this, percentiles through [`fmt_pct_cell`].
pub fn fmt_ms_cell(us: u64) -> String {
    if us < 100 {
        format!("{:.3}", us as f64 / 1000.0)
    } else {
        format!("{:.2}", us as f64 / 1000.0)
    }
}

/// Under this many µs a latency in running text is printed in µs.
pub const MICROS_BELOW: u64 = 10;

/// A latency in running text, with its unit: `4 µs`, `0.35 ms`, `12.5 ms`, `1.93 s`.
pub fn fmt_latency(us: u64) -> String {
    if us < MICROS_BELOW {
        format!("{us} µs")
    } else if us < 10_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// A short latency with its microseconds kept (a round trip of 22 µs is not "0.02 ms"):
/// whole µs below 1 ms, then as [`fmt_latency`].
pub fn fmt_micros(us: f64) -> String {
    let us = us.max(0.0);
    if us < 1000.0 { format!("{us:.0} µs") } else { fmt_latency(us.round() as u64) }
}

/// An amount (a count per acquisition, say) with the digits its size needs: `0` for none,
/// at least two significant digits below one (`0.0004`, `0.012`, never a `0.000` that reads
/// as nothing), one decimal under 100 where it has one (`1.5`, `12`), whole numbers above.
pub fn fmt_amount(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        // Two significant digits: as many decimals as the leading zeros need, plus two.
        let decimals = (-a.log10().floor()) as usize + 1;
        format!("{v:.decimals$}")
    };
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// A number of bytes in the unit that fits it: `0.4 bytes`, `312 bytes`, `1.5 KiB`, `12 MiB`.
pub fn fmt_bytes(v: f64) -> String {
    let a = v.abs();
    if a >= 1024.0 * 1024.0 {
        format!("{} MiB", fmt_amount(v / (1024.0 * 1024.0)))
    } else if a >= 1024.0 {
        format!("{} KiB", fmt_amount(v / 1024.0))
    } else {
        format!("{} bytes", fmt_amount(v))
    }
}

/// Run totals for one shard, or merged over all.
#[derive(Debug, Clone)]
pub struct Totals {
    /// Acquire latency: from the intended start in open loop, from the call in closed loop.
    pub acquire: Histogram<u64>,
    /// Acquire service time: from the call, always.
    pub service: Histogram<u64>,
    pub release: Histogram<u64>,
    /// From a holder's release to the next holder's acquisition of the same key.
    pub handoff: Histogram<u64>,
    /// Acquires that ended in contention (wait timeout, busy): how long until they did
    /// (YCSB's FAILED series: failures are not dropped from the latency picture).
    pub timeout_latency: Histogram<u64>,
    /// Acquires that failed otherwise (unavailable, unknown outcome, ...): how long until they did.
    pub error_latency: Histogram<u64>,
    pub acquired: u64,
    pub timeouts: u64,
    /// Non-contention failures by kind (`unavailable`, `indeterminate`, ...).
    pub errors: BTreeMap<&'static str, u64>,
    /// Acquires cut short by an interrupt or the end-of-phase drain bound: neither a success
    /// nor a failure of the lock.
    pub cancelled: u64,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            acquire: new_histogram(),
            service: new_histogram(),
            release: new_histogram(),
            handoff: new_histogram(),
            timeout_latency: new_histogram(),
            error_latency: new_histogram(),
            acquired: 0,
            timeouts: 0,
            errors: BTreeMap::new(),
            cancelled: 0,
        }
    }
}

impl Totals {
    pub fn merge(&mut self, o: &Totals) {
        self.acquire.add(&o.acquire).expect("same bounds");
        self.service.add(&o.service).expect("same bounds");
        self.release.add(&o.release).expect("same bounds");
        self.handoff.add(&o.handoff).expect("same bounds");
        self.timeout_latency.add(&o.timeout_latency).expect("same bounds");
        self.error_latency.add(&o.error_latency).expect("same bounds");
        self.acquired += o.acquired;
        self.timeouts += o.timeouts;
        self.cancelled += o.cancelled;
        for (k, v) in &o.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What happened in one interval (all operations, warm-up included).
struct Interval {
    acquire: Histogram<u64>,
    ok: u64,
    failed: u64,
    timeouts: u64,
}

impl Default for Interval {
    fn default() -> Self {
        Interval { acquire: new_histogram(), ok: 0, failed: 0, timeouts: 0 }
    }
}

struct Shard {
    total: Totals,
    interval: Interval,
}

/// One second of the time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimePoint {
    /// Seconds since the phase started (warm-up included).
    pub t: u32,
    pub ok: u64,
    pub failed: u64,
    pub timeouts: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Open loop: operations due by the end of this second that no client had started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u64>,
}

/// The sharded recorder one phase writes into.
pub struct Recorder {
    shards: Vec<Mutex<Shard>>,
    /// Acquisitions per client in the measured window, for the fairness index.
    per_client: Vec<AtomicU64>,
}

impl Recorder {
    pub fn new(clients: usize) -> Self {
        let n = clients.clamp(1, 16);
        Recorder {
            shards: (0..n)
                .map(|_| Mutex::new(Shard { total: Totals::default(), interval: Interval::default() }))
                .collect(),
            per_client: (0..clients).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn shard(&self, client: usize) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[client % self.shards.len()].lock().unwrap()
    }

    /// A successful acquire; `latency` from the intended start, `service` from the call.
    pub fn acquired(&self, client: usize, latency: Duration, service: Duration, measured: bool) {
        let mut s = self.shard(client);
        s.interval.acquire.saturating_record(us(latency));
        s.interval.ok += 1;
        if measured {
            s.total.acquire.saturating_record(us(latency));
            s.total.service.saturating_record(us(service));
            s.total.acquired += 1;
            drop(s);
            self.per_client[client].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn released(&self, client: usize, latency: Duration, measured: bool) {
        if measured {
            self.shard(client).total.release.saturating_record(us(latency));
        }
    }

    pub fn handoff(&self, client: usize, gap: Duration, measured: bool) {
        if measured {
            self.shard(client).total.handoff.saturating_record(us(gap));
        }
    }

    /// An acquire that ended in contention after `latency`.
    pub fn timed_out(&self, client: usize, latency: Duration, measured: bool) {
        let mut s = self.shard(client);
        s.interval.timeouts += 1;
        if measured {
            s.total.timeouts += 1;
            s.total.timeout_latency.saturating_record(us(latency));
        }
    }

    /// A failure that is not an acquire's (connecting a client, a release). Counted in the
    /// totals only in the measured window, as acquisitions and timeouts are: errors per
    /// window, not warm-up errors over a measured rate.
    pub fn failed(&self, client: usize, kind: &'static str, measured: bool) {
        let mut s = self.shard(client);
        s.interval.failed += 1;
        if measured {
            *s.total.errors.entry(kind).or_default() += 1;
        }
    }

    /// An acquire that failed (not by contention) after `latency`; in the totals only when
    /// measured (see [`Recorder::failed`]), in the series always.
    pub fn acquire_failed(&self, client: usize, kind: &'static str, latency: Duration, measured: bool) {
        let mut s = self.shard(client);
        s.interval.failed += 1;
        if measured {
            *s.total.errors.entry(kind).or_default() += 1;
            s.total.error_latency.saturating_record(us(latency));
        }
    }

    /// An operation cut short by an interrupt or the drain bound.
    pub fn cancelled(&self, client: usize) {
        self.shard(client).total.cancelled += 1;
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.shards {
            t.merge(&s.lock().unwrap().total);
        }
        t
    }

    pub fn per_client(&self) -> Vec<u64> {
        self.per_client.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// Drain every shard's interval into one point (and the merged interval histogram).
    pub fn tick(&self, t: u32, merged: &mut Histogram<u64>) -> TimePoint {
        merged.reset();
        let (mut ok, mut failed, mut timeouts) = (0, 0, 0);
        for s in &self.shards {
            let mut s = s.lock().unwrap();
            merged.add(&s.interval.acquire).expect("same bounds");
            s.interval.acquire.reset();
            ok += std::mem::take(&mut s.interval.ok);
            failed += std::mem::take(&mut s.interval.failed);
            timeouts += std::mem::take(&mut s.interval.timeouts);
        }
        let q = |x: f64| if merged.is_empty() { 0 } else { merged.value_at_quantile(x) };
        TimePoint { t, ok, failed, timeouts, p50_us: q(0.5), p99_us: q(0.99), max_us: merged.max(), backlog: None }
    }
}

/// Jain's fairness index over per-client counts: 1 when every client got the same share,
/// 1/n when one client got everything. `None` without any acquisition.
pub fn jain(counts: &[u64]) -> Option<f64> {
    let n = counts.len() as f64;
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sq: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    (sq > 0.0).then(|| (sum * sum) / (n * sq))
}

/// An HdrHistogram interval log (`.hlog`), appended once per interval, readable by the
/// standard HdrHistogram tools (HistogramLogProcessor, HdrHistogramVisualizer).
pub struct HlogWriter {
    file: std::io::BufWriter<std::fs::File>,
    serializer: V2DeflateSerializer,
}

impl HlogWriter {
    pub fn create(path: &std::path::Path, comment: &str) -> std::io::Result<Self> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let mut serializer = V2DeflateSerializer::new();
        let mut head = Vec::new();
        IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .add_comment("values in microseconds")
            .with_start_time(std::time::SystemTime::now())
            .begin_log_with(&mut head, &mut serializer)?;
        head.extend_from_slice(b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
        file.write_all(&head)?;
        file.flush()?;
        Ok(HlogWriter { file, serializer })
    }

    /// Append one interval starting `start` after the log's start time.
    pub fn append(&mut self, h: &Histogram<u64>, start: Duration, length: Duration) -> std::io::Result<()> {
        let mut line = Vec::new();
        {
            let mut w = IntervalLogWriterBuilder::new().begin_log_with(&mut line, &mut self.serializer)?;
            w.write_histogram(h, start, length, None).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        }
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

/// A latency distribution as reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// One percentile of a [`Percentiles`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantile {
    P50,
    P90,
    P99,
    P999,
    P9999,
}

impl Quantile {
    /// The fewest samples that support the percentile. A quantile q is more than the largest
    /// sample only when at least one sample lies above it, that is with n >= 1 / (1 - q):
    /// p90 needs 10, p99 100, p99.9 1,000, p99.99 10,000 (below that HdrHistogram's value
    /// is the maximum itself: "p99 = p99.9 = max" from 48 samples). The median needs one.
    pub fn min_samples(self) -> u64 {
        match self {
            Quantile::P50 => 1,
            Quantile::P90 => 10,
            Quantile::P99 => 100,
            Quantile::P999 => 1_000,
            Quantile::P9999 => 10_000,
        }
    }
}

impl Percentiles {
    /// The value at `q`, when the samples support it ([`Quantile::min_samples`]).
    pub fn at(&self, q: Quantile) -> Option<u64> {
        if self.count < q.min_samples() {
            return None;
        }
        Some(match q {
            Quantile::P50 => self.p50,
            Quantile::P90 => self.p90,
            Quantile::P99 => self.p99,
            Quantile::P999 => self.p999,
            Quantile::P9999 => self.p9999,
        })
    }
}

/// A percentile in a column headed "ms" ([`fmt_ms_cell`]): `-` without samples, and `-` with
/// the sample count (`- (n=48)`) where too few samples support it ([`Quantile::min_samples`]).
pub fn fmt_pct_cell(p: &Percentiles, q: Quantile) -> String {
    match p.at(q) {
        Some(v) => fmt_ms_cell(v),
        None if p.count == 0 => "-".into(),
        None => format!("- (n={})", p.count),
    }
}

/// The percentile spectrum (HdrHistogram's "percentile distribution"), for plots.
pub fn spectrum(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(2).map(|v| (v.quantile_iterated_to(), v.value_iterated_to())).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn latency_cells_stay_in_their_columns_unit() {
        assert_eq!(fmt_ms_cell(1), "0.001", "a ms column shows ms, never \"1 µs\"");
        assert_eq!(fmt_ms_cell(4), "0.004");
        assert_eq!(fmt_ms_cell(15), "0.015");
        assert_eq!(fmt_ms_cell(100), "0.10");
        assert_eq!(fmt_ms_cell(13_600), "13.60");
        assert_eq!(fmt_latency(1), "1 µs");
        assert_eq!(fmt_latency(350), "0.35 ms");
        assert_eq!(fmt_latency(12_500), "12.5 ms");
        assert_eq!(fmt_latency(1_934_000), "1.93 s");
    }

    /// The case: "0.000 WAL bytes, 163 WAL syncs" per acquisition.
    #[test]
    fn amounts_keep_the_digits_their_size_needs() {
        assert_eq!(fmt_amount(0.0), "0");
        assert_eq!(fmt_amount(0.0004), "0.0004");
        assert_eq!(fmt_amount(0.01234), "0.012");
        assert_eq!(fmt_amount(0.5), "0.5");
        assert_eq!(fmt_amount(1.0), "1");
        assert_eq!(fmt_amount(1.26), "1.3");
        assert_eq!(fmt_amount(163.2), "163");
        assert_eq!(fmt_bytes(0.0004), "0.0004 bytes");
        assert_eq!(fmt_bytes(312.0), "312 bytes");
        assert_eq!(fmt_bytes(1536.0), "1.5 KiB");
        assert_eq!(fmt_bytes(12.0 * 1024.0 * 1024.0), "12 MiB");
    }

    /// The case: 48 acquisitions gave p99 = p99.9 = max (595.97 ms) with no warning.
    #[test]
    fn percentiles_past_their_samples_are_a_dash_with_n() {
        let mut h = new_histogram();
        for i in 1..=48u64 {
            h.record(i * 12_000).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.p99, p.max, "the raw figure is the max itself");
        assert_eq!(fmt_pct_cell(&p, Quantile::P99), "- (n=48)");
        assert_eq!(fmt_pct_cell(&p, Quantile::P999), "- (n=48)");
        assert_ne!(fmt_pct_cell(&p, Quantile::P90), "- (n=48)", "48 samples support a p90");
        assert_eq!(fmt_pct_cell(&p, Quantile::P50), fmt_ms_cell(p.p50));
        assert_eq!(fmt_pct_cell(&Percentiles::default(), Quantile::P50), "-");
        // At exactly 100 samples one lies above the p99: shown, and not the max.
        for i in 49..=100u64 {
            h.record(i * 12_000).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.at(Quantile::P99), Some(p.p99));
        assert!(p.p99 < p.max);
        assert_eq!(fmt_pct_cell(&p, Quantile::P99), fmt_ms_cell(p.p99));
        assert_eq!(fmt_pct_cell(&p, Quantile::P999), "- (n=100)");
    }

    use super::*;

    #[test]
    fn shards_merge_to_the_whole() {
        let r = Recorder::new(4);
        for c in 0..4 {
            for i in 0..25u64 {
                r.acquired(c, Duration::from_micros(100 + i * 4 + c as u64), Duration::from_micros(10), true);
            }
        }
        r.failed(3, "unavailable", true);
        r.timed_out(1, Duration::from_millis(5), true);
        let t = r.totals();
        assert_eq!(t.acquired, 100);
        assert_eq!(t.acquire.len(), 100);
        assert_eq!(t.error_count(), 1);
        assert_eq!(t.timeouts, 1);
        assert_eq!(t.timeout_latency.len(), 1, "a timeout has a latency of its own");
        assert_eq!(Percentiles::of(&t.acquire).max, 199);
        assert_eq!(r.per_client(), vec![25, 25, 25, 25]);
    }

    #[test]
    fn warmup_counts_in_the_series_not_in_the_totals() {
        let r = Recorder::new(2);
        r.acquired(0, Duration::from_millis(5), Duration::from_millis(5), false);
        r.acquired(1, Duration::from_millis(7), Duration::from_millis(7), true);
        let mut h = new_histogram();
        let p = r.tick(0, &mut h);
        assert_eq!(p.ok, 2);
        assert_eq!(r.totals().acquired, 1);
        assert_eq!(r.tick(1, &mut h).ok, 0, "a tick drains its interval");
    }

    /// Errors count the window acquisitions and timeouts count (issue 54: they once counted
    /// the whole phase): a warm-up full of errors and a clean measured window total 0
    /// errors, while the series still shows the warm-up's failures.
    #[test]
    fn warmup_errors_count_in_the_series_not_in_the_totals() {
        let r = Recorder::new(2);
        for _ in 0..5 {
            r.acquire_failed(0, "unavailable", Duration::from_millis(5), false);
        }
        r.failed(1, "connect", false);
        r.failed(1, "release_not_held", false);
        r.acquired(1, Duration::from_millis(7), Duration::from_millis(7), true);
        r.timed_out(0, Duration::from_millis(9), true);
        let mut h = new_histogram();
        assert_eq!(r.tick(0, &mut h).failed, 7, "the series shows the warm-up's failures");
        let t = r.totals();
        assert_eq!((t.error_count(), t.errors.len(), t.error_latency.len()), (0, 0, 0), "{:?}", t.errors);
        assert_eq!((t.acquired, t.timeouts), (1, 1));
        // The same failures in the measured window are counted, by kind.
        r.acquire_failed(0, "unavailable", Duration::from_millis(5), true);
        r.failed(1, "release_not_held", true);
        let t = r.totals();
        assert_eq!(t.error_count(), 2);
        assert_eq!(t.errors.get("unavailable"), Some(&1));
        assert_eq!(t.error_latency.len(), 1);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[5, 5, 5, 5]), Some(1.0));
        assert_eq!(jain(&[10, 0, 0, 0]), Some(0.25));
        assert_eq!(jain(&[0, 0]), None);
    }

    #[test]
    fn hlog_is_readable_back() {
        let dir = std::env::temp_dir().join(format!("dlbench-hlog-{}", std::process::id()));
        let p = dir.join("x.hlog");
        let mut w = HlogWriter::create(&p, "test").unwrap();
        let mut h = new_histogram();
        h.record(1234).unwrap();
        w.append(&h, Duration::from_secs(0), Duration::from_secs(1)).unwrap();
        w.append(&h, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        drop(w);
        let text = std::fs::read(&p).unwrap();
        let n = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&text)
            .filter(|e| matches!(e, Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(_))))
            .count();
        assert_eq!(n, 2);
        let _ = std::fs::remove_dir_all(dir);
    }
}
