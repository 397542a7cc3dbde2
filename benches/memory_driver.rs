//! The driver's acquire/release cycle on the in-process `memory` backend: whole phases
//! through `driver::run_phase`, as `dlbench run --backends memory` runs them (a multi-thread
//! tokio runtime with one worker per core), each ended by an operation count. Throughput is
//! in acquisitions: every operation of these phases acquires and releases once.
//!
//! - `memory_driver/many-keys`: the shipped workload (8 clients, 64 uniform keys, no hold,
//!   no think), no history (the CLI's default for `memory`).
//! - `memory_driver/many-keys+history`: the same, streaming every operation to a history file
//!   (`--history on`).
//! - `memory_driver/hot-key`: the shipped workload (8 clients, one key): every acquisition is
//!   a hand-off between waiters.
//!
//! Each timed iteration is one whole phase, set-up and drain included.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dlbench::driver::{run_phase, PhaseOutputs};
use dlbench::history::HistoryWriter;
use dlbench::workload::{self, Workload};
use dlbench_core::Backend;
use dlbench_memory::MemoryBackend;
use tokio_util::sync::CancellationToken;

/// Acquisitions per phase: half a second at the 200,000/s target.
const OPS: u64 = 100_000;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn phase_workload(name: &str) -> Workload {
    let mut w = workload::load(name).expect("a shipped workload");
    w.warmup = Duration::ZERO; // every operation counts, so acquired == OPS
    w.duration = Duration::from_secs(600); // the operation count ends the phase
    w.ops = Some(OPS);
    w.seed = Some(7);
    w
}

fn memory_driver(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = TempDir(std::env::temp_dir().join(format!("dlbench-bench-driver-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();

    let mut g = c.benchmark_group("memory_driver");
    g.throughput(Throughput::Elements(OPS));
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));

    for (label, name, history) in [("many-keys", "many-keys", false), ("many-keys+history", "many-keys", true), ("hot-key", "hot-key", false)] {
        let w = phase_workload(name);
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for i in 0..iters {
                    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
                    let path = dir.0.join(format!("history-{i}.jsonl"));
                    let hw = history.then(|| HistoryWriter::create(&path).expect("history file"));
                    let out = PhaseOutputs { history: hw.clone().map(|h| (h, "memory".to_string())), ..Default::default() };
                    let t = Instant::now();
                    let p = rt.block_on(run_phase(backend, &w, "bench", &CancellationToken::new(), out)).expect("phase ran");
                    if let Some(h) = &hw {
                        // The run is not over until its history is on disk.
                        h.close().expect("history flushed");
                    }
                    took += t.elapsed();
                    assert_eq!(p.totals.acquired, OPS, "every operation acquired");
                    assert_eq!(p.resource.total.overlaps, 0);
                    let _ = std::fs::remove_file(&path);
                }
                took
            })
        });
    }
    g.finish();
}

criterion_group!(benches, memory_driver);
criterion_main!(benches);
