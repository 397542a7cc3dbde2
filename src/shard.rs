//! Load from many machines: `run --shard I/N` runs one shard of a plan, `merge` combines the
//! shards' result sets into one.
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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::driver::ShardSlice;
use crate::summary::ShardRow;
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

    fn to_totals(&self) -> Totals {
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
    fn window_start(&self) -> u64 {
        self.started_unix_ns + (self.warmup_s * 1e9) as u64
    }
}

/// A run directory, or a results root whose `latest` is one.
fn run_dir(d: &Path) -> anyhow::Result<PathBuf> {
    for c in [d.to_path_buf(), d.join("latest")] {
        if c.join("shard.json").is_file() {
            return Ok(c);
        }
    }
    anyhow::bail!("merge: {} holds no shard.json (a result set of `dlbench run --shard I/N`, or its --out root)", d.display())
}

/// Read and check the shards: one plan, every index once.
fn load(dirs: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, ShardPhase)>> {
    anyhow::ensure!(!dirs.is_empty(), "merge: name the shards' result directories");
    let mut shards = Vec::new();
    for d in dirs {
        let dir = run_dir(d)?;
        // `latest` names no run: the row shows the run's own id.
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let text = std::fs::read_to_string(dir.join("shard.json"))?;
        let s: ShardPhase = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("merge: {}: {e}", dir.join("shard.json").display()))?;
        shards.push((dir, s));
    }
    shards.sort_by_key(|(_, s)| s.index);
    let first = &shards[0].1;
    for (dir, s) in &shards {
        anyhow::ensure!(
            s.count == first.count && s.backend == first.backend && s.key_scope == first.key_scope && s.workload.name == first.workload.name,
            "merge: {} is shard {}/{} of {} {} ({}), not of the same plan as {}/{} of {} {} ({})",
            dir.display(),
            s.index,
            s.count,
            s.backend,
            s.workload.name,
            s.key_scope,
            first.index,
            first.count,
            first.backend,
            first.workload.name,
            first.key_scope
        );
        anyhow::ensure!(
            s.resource_server == first.resource_server,
            "merge: {} ran its sections on {}, shard {} on {}: shards judged in different places do not add up (give every shard the same --resource)",
            dir.display(),
            s.resource_server.as_deref().unwrap_or("its own process"),
            first.index,
            first.resource_server.as_deref().unwrap_or("its own process")
        );
    }
    let have: Vec<u32> = shards.iter().map(|(_, s)| s.index).collect();
    let want: Vec<u32> = (0..first.count).collect();
    anyhow::ensure!(
        have == want,
        "merge: shards {} of {} given; a merge needs each of 0..{} once",
        have.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
        first.count,
        first.count
    );
    Ok(shards)
}

/// The acquire histogram of each second of a shard's phase, from its `.hlog`.
fn seconds(dir: &Path, label: &str) -> Vec<Histogram<u64>> {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let Ok(text) = std::fs::read(dir.join("hdr").join(format!("{label}-acquire.hlog"))) else { return Vec::new() };
    IntervalLogIterator::new(&text)
        .filter_map(|e| match e {
            Ok(LogEntry::Interval(i)) => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(i.encoded_histogram()).ok()?;
                let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).ok()?;
                let mut out = new_histogram();
                out.add(&h).ok()?;
                Some(out)
            }
            _ => None,
        })
        .collect()
}

/// The merged phase, and each shard's row.
pub fn merge_phases(shards: &[(PathBuf, ShardPhase)]) -> (PhaseResult, Vec<ShardRow>) {
    let first = &shards[0].1;
    let t0 = shards.iter().map(|(_, s)| s.window_start()).min().unwrap_or(0);
    let t1 = shards.iter().map(|(_, s)| s.window_start() + (s.measured_s * 1e9) as u64).max().unwrap_or(t0);
    let started = shards.iter().map(|(_, s)| s.started_unix_ns).min().unwrap_or(0);
    let mut totals = Totals::default();
    let mut lag = new_histogram();
    let mut resource = dlbench_core::ResourceStats::default();
    let mut per_client = Vec::new();
    let mut first_keys = Vec::new();
    let mut rows = Vec::new();
    // Seconds from the earliest shard's start; a shard that started later fills later seconds.
    let mut series: BTreeMap<u32, (TimePoint, Histogram<u64>)> = BTreeMap::new();
    for (dir, s) in shards {
        let shift = ((s.started_unix_ns - started) as f64 / 1e9).round() as u32;
        let hists = seconds(dir, &s.label);
        for (i, p) in s.timeseries.iter().enumerate() {
            let t = p.t + shift;
            let e = series.entry(t).or_insert_with(|| (TimePoint { t, ok: 0, failed: 0, timeouts: 0, p50_us: 0, p99_us: 0, max_us: 0, backlog: None }, new_histogram()));
            e.0.ok += p.ok;
            e.0.failed += p.failed;
            e.0.timeouts += p.timeouts;
            match hists.get(i) {
                Some(h) => e.1.add(h).expect("same bounds"),
                // No interval log: the shard's own figures, the worst of them.
                None => {
                    e.0.p50_us = e.0.p50_us.max(p.p50_us);
                    e.0.p99_us = e.0.p99_us.max(p.p99_us);
                    e.0.max_us = e.0.max_us.max(p.max_us);
                }
            }
        }
        let t = s.totals.acquired;
        rows.push(ShardRow {
            shard: format!("{}/{}", s.index, s.count),
            run_id: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            clients: s.workload.clients,
            ops_per_sec: if s.measured_s > 0.0 { (t as f64 / s.measured_s * 10.0).round() / 10.0 } else { 0.0 },
            acquired: t,
            driver_lag_p99_ms: s.driver_lag.value_at_quantile(0.99) as f64 / 1000.0,
            start_offset_ms: (s.window_start() as f64 - t0 as f64) / 1e6,
            clock_offset_ms: s.resource_clock.map(|c| (c.offset_ms * 100.0).round() / 100.0),
        });
        lag.add(&s.driver_lag).expect("same bounds");
        let counter = resource.counter_sum;
        resource.add(&s.resource);
        if s.resource_server.is_some() {
            // One server's registers, read by each shard at its end: the last read is the total.
            resource.counter_sum = counter.max(s.resource.counter_sum);
        }
        per_client.extend(&s.per_client);
        first_keys.extend(s.first_keys.iter().cloned());
    }
    for (_, s) in shards {
        totals.merge(&s.totals.to_totals());
    }
    let timeseries = series
        .into_values()
        .map(|(mut p, h)| {
            if h.len() > 0 {
                p.p50_us = h.value_at_quantile(0.5);
                p.p99_us = h.value_at_quantile(0.99);
                p.max_us = h.max();
            }
            p
        })
        .collect();
    let mut workload = first.workload.clone();
    workload.clients = shards.iter().map(|(_, s)| s.workload.clients).sum();
    let mut p = PhaseResult::scripted(workload, totals, Duration::from_nanos(t1 - t0), resource, Vec::new());
    p.cancelled = shards.iter().any(|(_, s)| s.cancelled);
    p.retired = shards.iter().map(|(_, s)| s.retired).sum();
    p.timeseries = timeseries;
    p.per_client = per_client;
    p.first_keys = first_keys;
    p.fifo_violations = shards.iter().map(|(_, s)| s.fifo_violations).reduce(|a, b| match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }).flatten();
    p.driver_lag = lag;
    p.in_flight_at_end = shards.iter().map(|(_, s)| s.in_flight_at_end).sum();
    p.peak_rss_mb = shards.iter().filter_map(|(_, s)| s.peak_rss_mb).reduce(f64::max);
    (p, rows)
}

/// Interleave the shards' histories on the wall clock into `out`: one segment (the first
/// shard's `meta`), every record's time moved to the earliest shard's time zero.
pub fn merge_histories(shards: &[(PathBuf, ShardPhase)], out: &Path) -> anyhow::Result<bool> {
    use crate::history::Record;
    let zero = shards.iter().map(|(_, s)| s.history_epoch_unix_ns).min().unwrap_or(0);
    let mut meta = None;
    let mut records: Vec<(u64, Record)> = Vec::new();
    for (dir, s) in shards {
        let path = dir.join("history.jsonl");
        if !path.is_file() {
            return Ok(false);
        }
        let d = s.history_epoch_unix_ns - zero;
        crate::history::for_each_record(&path, |r| match r {
            Record::Meta(m) => {
                meta.get_or_insert(m);
            }
            mut r => {
                r.shift(d);
                // Shards on one resource server wrote one register per key (its sequence
                // numbers are the server's); shards with their own resources, one each.
                if s.resource_server.is_none() {
                    r.set_register(s.index);
                }
                records.push((r.ns().unwrap_or_else(|| r.section_enter().unwrap_or(0)), r));
            }
        })?;
    }
    records.sort_by_key(|(ns, _)| *ns);
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    if let Some(m) = meta {
        serde_json::to_writer(&mut f, &Record::Meta(m))?;
        f.write_all(b"\n")?;
    }
    for (_, r) in records {
        serde_json::to_writer(&mut f, &r)?;
        f.write_all(b"\n")?;
    }
    f.flush()?;
    Ok(true)
}

/// `dlbench merge DIR...`: one result set from the shards of a plan. Returns the exit status
/// (the merged verdict, as `run`'s).
pub fn merge(dirs: &[PathBuf], out_root: &Path, fail_on_violation: bool) -> anyhow::Result<i32> {
    let shards = load(dirs)?;
    let first = &shards[0].1;
    let shard_summary: crate::summary::Summary =
        serde_json::from_str(&std::fs::read_to_string(shards[0].0.join("summary.json"))?).map_err(|e| anyhow::anyhow!("merge: {}: {e}", shards[0].0.join("summary.json").display()))?;
    let dir = crate::results::RunDir::create(out_root, "")?;
    let (phase, rows) = merge_phases(&shards);
    let late = rows.iter().map(|r| r.start_offset_ms).fold(0.0, f64::max);
    if late > 1000.0 {
        eprintln!(
            "dlbench: merge: the shards' measured windows began up to {:.1} s apart, so the merged rate spans them all rather than one common window (start shards together with --start-at)",
            late / 1000.0
        );
    }
    let mut summary = crate::summary::Summary::begin(&dir.id, &shard_summary.target, shard_summary.fencing, Vec::new());
    summary.versions = shard_summary.versions.clone();
    summary.resource_server = first.resource_server.clone();
    let mut acc = crate::summarize::BackendAcc::default();
    acc.add(&phase, 0);
    let mut b = acc.summary(&first.backend, first.capabilities.clone());
    b.connections = first.connections.clone();
    summary.backends.push(b);
    summary.shards = rows;
    dir.write_json("summary.json", &summary)?;
    let history = dir.path.join("history.jsonl");
    if merge_histories(&shards, &history)? {
        let v = crate::checker::check_file(&history)?;
        dir.write_json("checks.json", &v)?;
        // The shards' resources each saw only their own holders; holders of two shards that
        // overlapped are seen by the checker over the merged history: the table counts those.
        let seen = v.iter().flat_map(|s| &s.results).find(|r| r.checker == "mutual-exclusion").and_then(|r| r.figures["overlaps"].as_u64());
        if let Some(n) = seen {
            for b in &mut summary.backends {
                for w in &mut b.workloads {
                    w.counts.overlaps = w.counts.overlaps.max(n);
                }
                b.counts.overlaps = b.workloads.iter().map(|w| w.counts.overlaps).sum();
            }
        }
        summary.attach_checks(&v, shard_summary.fencing);
    } else {
        eprintln!("dlbench: merge: a shard kept no history; no checker ran on the whole");
    }
    summary.finish(shards.iter().all(|(d, _)| {
        std::fs::read_to_string(d.join("summary.json")).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).and_then(|v| v["complete"].as_bool()).unwrap_or(false)
    }));
    dir.write_json("summary.json", &summary)?;
    if let Err(e) = crate::report::render(&dir.path) {
        eprintln!("dlbench: the report could not be written: {e:#}");
    }
    println!("{}", crate::report::text::table(&summary));
    println!("{}", crate::report::text::shard_markdown(&summary));
    println!("results: {}", dir.path.join("summary.json").display());
    let worst = summary.worst();
    Ok(if fail_on_violation { crate::judgement::exit_code(worst) } else { 0 })
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
