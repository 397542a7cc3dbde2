//! The checkers over generated histories of 1,000,000 operations (an operation is an
//! invocation and its completion, as in the history's own vocabulary), written by
//! `dlbench::synthetic`: 64 clients on 32 keys, acquires that wait for the key's holder or give
//! up after 1 ms, critical sections with the resource's reads and writes and fencing tokens,
//! releases. Both histories are valid; the bench asserts that every checker says so.
//!
//! - `checkers/check_file`: what `dlbench check history.jsonl` does: stream the file record by
//!   record, pair, sort (spilling to disk past a million items), sweep every checker.
//! - `checkers/check_file_unknown`: the same with half the acquires ending with an unknown
//!   outcome (each a retired process whose claim may live for a TTL): the case that made a
//!   checker quadratic before the sweep.
//!
//! Set `DLBENCH_BENCH_HISTORY=DIR` to keep the generated files (for timing `dlbench check`).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dlbench::checker::{self, Validity};
use dlbench::synthetic::{self, Spec};

const OPERATIONS: u64 = 1_000_000;

fn generated(name: &str, spec: &Spec) -> PathBuf {
    let dir = std::env::var_os("DLBENCH_BENCH_HISTORY").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("dlbench-bench-{name}-{}.jsonl", std::process::id()));
    let w = synthetic::write(spec, &path).unwrap();
    assert_eq!(w.operations, spec.operations);
    let verdicts = checker::check_file(&path).unwrap();
    assert_eq!(verdicts.len(), 1);
    for r in &verdicts[0].results {
        assert_eq!(r.valid, Validity::Valid, "{name}: {}: {}", r.checker, r.message);
    }
    eprintln!(
        "checkers {name}: {} operations ({} unknown), {} records, {} sections, {:.0} MB on disk ({})",
        w.operations,
        w.unknown,
        w.records,
        w.sections,
        std::fs::metadata(&path).unwrap().len() as f64 / 1e6,
        path.display()
    );
    path
}

fn checkers(c: &mut Criterion) {
    let plain = generated("1m", &Spec { operations: OPERATIONS, ..Spec::default() });
    let unknown = generated("1m-unknown", &Spec { operations: OPERATIONS, unknown_share: 0.5, ..Spec::default() });
    let mut g = c.benchmark_group("checkers");
    g.throughput(Throughput::Elements(OPERATIONS));
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("check_file", |b| b.iter(|| checker::check_file(&plain).unwrap()));
    g.bench_function("check_file_unknown", |b| b.iter(|| checker::check_file(&unknown).unwrap()));
    g.finish();
    if std::env::var_os("DLBENCH_BENCH_HISTORY").is_none() {
        let _ = std::fs::remove_file(&plain);
        let _ = std::fs::remove_file(&unknown);
    }
}

criterion_group!(benches, checkers);
criterion_main!(benches);
