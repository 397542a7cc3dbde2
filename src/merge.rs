//! `dlbench merge DIR...`: one result set from the `shard.json`s of a sharded plan's
//! shards ([`crate::shard`]): their histograms and counters added up, the per-second series
//! rebuilt from their `.hlog` interval histograms, their histories interleaved on the wall
//! clock, and the checkers run on the whole.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use crate::phase::PhaseResult;
use crate::shard::ShardPhase;
use crate::stats::{new_histogram, TimePoint, Totals};
use crate::summary::ShardRow;

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
    let rows = shards.iter().map(|(dir, s)| row(dir, s, t0)).collect();
    let mut totals = Totals::default();
    for (_, s) in shards {
        totals.merge(&s.totals.to_totals());
    }
    let mut workload = first.workload.clone();
    workload.clients = shards.iter().map(|(_, s)| s.workload.clients).sum();
    let mut p = PhaseResult::scripted(workload, totals, Duration::from_nanos(t1 - t0), resource(shards), Vec::new());
    // The shards' load loops, not a scenario's choreography: judged as a run is.
    p.choreographed = false;
    p.cancelled = shards.iter().any(|(_, s)| s.cancelled);
    p.retired = shards.iter().map(|(_, s)| s.retired).sum();
    p.timeseries = timeseries(shards);
    p.per_client = shards.iter().flat_map(|(_, s)| s.per_client.iter().copied()).collect();
    p.first_keys = shards.iter().flat_map(|(_, s)| s.first_keys.iter().cloned()).collect();
    p.fifo_violations = shards.iter().map(|(_, s)| s.fifo_violations).reduce(|a, b| match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }).flatten();
    let mut lag = new_histogram();
    for (_, s) in shards {
        lag.add(&s.driver_lag).expect("same bounds");
    }
    p.driver_lag = lag;
    p.in_flight_at_end = shards.iter().map(|(_, s)| s.in_flight_at_end).sum();
    p.peak_rss_mb = shards.iter().filter_map(|(_, s)| s.peak_rss_mb).reduce(f64::max);
    (p, rows)
}

/// A shard's row of the merged set's table; `t0` is the earliest measured window's start.
fn row(dir: &Path, s: &ShardPhase, t0: u64) -> ShardRow {
    let t = s.totals.acquired;
    ShardRow {
        shard: format!("{}/{}", s.index, s.count),
        run_id: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        clients: s.workload.clients,
        ops_per_sec: if s.measured_s > 0.0 { (t as f64 / s.measured_s * 10.0).round() / 10.0 } else { 0.0 },
        acquired: t,
        driver_lag_p99_ms: s.driver_lag.value_at_quantile(0.99) as f64 / 1000.0,
        start_offset_ms: (s.window_start() as f64 - t0 as f64) / 1e6,
        clock_offset_ms: s.resource_clock.map(|c| (c.offset_ms * 100.0).round() / 100.0),
    }
}

/// The shards' resource tallies added up.
fn resource(shards: &[(PathBuf, ShardPhase)]) -> dlbench_core::ResourceStats {
    let mut resource = dlbench_core::ResourceStats::default();
    for (_, s) in shards {
        let counter = resource.counter_sum;
        resource.add(&s.resource);
        if s.resource_server.is_some() {
            // One server's registers, read by each shard at its end: the last read is the total.
            resource.counter_sum = counter.max(s.resource.counter_sum);
        }
    }
    resource
}

/// The merged per-second series: counts added up, latencies from the shards' interval
/// histograms added up (or, without them, the worst of the shards' own figures).
fn timeseries(shards: &[(PathBuf, ShardPhase)]) -> Vec<TimePoint> {
    let started = shards.iter().map(|(_, s)| s.started_unix_ns).min().unwrap_or(0);
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
    }
    series
        .into_values()
        .map(|(mut p, h)| {
            if h.len() > 0 {
                p.p50_us = h.value_at_quantile(0.5);
                p.p99_us = h.value_at_quantile(0.99);
                p.max_us = h.max();
            }
            p
        })
        .collect()
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
/// Merge the shards into one result set; returns the merged summary and its directory (the
/// command line renders and prints them).
pub fn merge(dirs: &[PathBuf], out_root: &Path) -> anyhow::Result<(crate::summary::Summary, PathBuf)> {
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
    // The shards' own settings, but whole: the merged figures are the whole plan's.
    summary.plan_settings = shard_summary.plan_settings.clone();
    if !summary.plan_settings.is_empty() {
        summary.plan_settings.insert("shard".into(), format!("{} shards merged", shards.len()));
    }
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
    Ok((summary, dir.path.clone()))
}
