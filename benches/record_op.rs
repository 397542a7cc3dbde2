//! What the driver pays to record one operation: latency into the sharded HDR histograms
//! (`stats::Recorder`) and lines into the streamed history (`history::HistoryWriter`),
//! written to a temporary file by the real flusher thread.
//!
//! - `record_op/histograms`: one successful acquire and its release into the recorder
//!   (`acquired` + `released`, as `driver::client_loop` calls them).
//! - `record_op/history_line`: one `ok` acquire line appended to the history.
//! - `record_op/acquire_release_cycle`: everything `client_loop` records for one successful
//!   acquire/release, in its order: clock reads, invoke + ok of the acquire, the histograms,
//!   the section line, invoke + ok of the release, the release histogram.
//!
//! The flusher drains to disk on another thread as in a run; the loop honours the writer's
//! back-pressure every 256 operations (the driver awaits it once per operation, a single
//! atomic load while under the high-water mark). The file is emptied between samples so a
//! long measurement does not fill the disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dlbench::history::{HistoryWriter, Meta, Op, Record};
use dlbench::stats::Recorder;

const CLIENTS: usize = 8;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn writer(path: &Path) -> HistoryWriter {
    let w = HistoryWriter::create(path).expect("create the history file");
    w.record(&Record::Meta(Meta {
        backend: "memory".into(),
        workload: "bench".into(),
        keys: (0..64).map(|i| format!("dlbench/bench/k{i}")).collect(),
        ttl_ms: 10_000,
        fencing_tokens: true,
        started_at: "2026-01-01T00:00:00Z".into(),
        split_votes: false,
        granted_ttl: None,
    }));
    w
}

/// A latency that moves around the histogram as a run's would (20 us to ~1 ms).
fn lat(i: u64) -> Duration {
    Duration::from_nanos(20_000 + (i.wrapping_mul(7919) % 1_000_000))
}

fn record_op(c: &mut Criterion) {
    let dir = TempDir(std::env::temp_dir().join(format!("dlbench-bench-record-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("history.jsonl");
    let w = writer(&path);
    // Back-pressure sleeps on tokio's timer when the flusher is behind.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    // Wait for the flusher, then empty the file (outside the timed part).
    let settle = || {
        rt.block_on(w.sync());
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
    };
    let recorder = Recorder::new(CLIENTS);
    let epoch = Instant::now();
    let ns = |t: Instant| t.saturating_duration_since(epoch).as_nanos() as u64;

    let mut g = c.benchmark_group("record_op");
    g.throughput(Throughput::Elements(1));
    g.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));

    g.bench_function("histograms", |b| {
        let mut i = 0u64;
        b.iter(|| {
            let client = (i as usize) % CLIENTS;
            recorder.acquired(client, lat(i), lat(i + 1), true);
            recorder.released(client, lat(i + 2), true);
            i += 1;
        })
    });

    g.bench_function("history_line", |b| {
        let mut i = 0u64;
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let p = i % CLIENTS as u64;
                w.record(&Record::Ok { p, f: Op::Acquire, key: (i % 64) as u32, ns: 1_000_000 + i * 1_000, token: Some(i) });
                i += 1;
                if i.is_multiple_of(256) {
                    rt.block_on(w.backpressure());
                }
            }
            let took = start.elapsed();
            settle();
            took
        })
    });

    g.bench_function("acquire_release_cycle", |b| {
        let mut i = 0u64;
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let client = (i as usize) % CLIENTS;
                let p = client as u64;
                let key = (i % 64) as u32;
                let t0 = Instant::now();
                w.record(&Record::Invoke { p, f: Op::Acquire, key, ns: ns(t0) });
                let got = Instant::now();
                w.record(&Record::Ok { p, f: Op::Acquire, key, ns: ns(got), token: Some(i + 1) });
                recorder.acquired(client, got - t0 + lat(i), got - t0 + lat(i), true);
                w.record(&Record::Section {
                    p,
                    key,
                    token: Some(i + 1),
                    enter: ns(got) + 100,
                    exit: ns(got) + 900,
                    read_seq: Some(2 * i + 1),
                    read: Some(i),
                    write_seq: Some(2 * i + 2),
                    lease_lost: false,
                    register: 0,
                });
                let t1 = Instant::now();
                w.record(&Record::Invoke { p, f: Op::Release, key, ns: ns(t1) });
                w.record(&Record::Ok { p, f: Op::Release, key, ns: ns(Instant::now()), token: None });
                recorder.released(client, t1.elapsed() + lat(i + 1), true);
                i += 1;
                if i.is_multiple_of(256) {
                    rt.block_on(w.backpressure());
                }
            }
            let took = start.elapsed();
            settle();
            took
        })
    });
    g.finish();
    w.close().expect("history flushed");
    let t = recorder.totals();
    assert!(t.acquired > 0 && !t.release.is_empty());
}

criterion_group!(benches, record_op);
criterion_main!(benches);
