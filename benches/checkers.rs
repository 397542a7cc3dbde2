//! The checkers over a generated history of 1,000,000 operations (an operation is an
//! invocation and its completion, as in the history's own vocabulary): 64 clients on 32 keys,
//! acquires that wait for the key's holder or give up after 1 ms, critical sections with the
//! resource's reads and writes and fencing tokens, releases. The history is well formed and
//! valid; the bench asserts that every checker says so.
//!
//! - `checkers/check_file`: what `dlbench check history.jsonl` does (`run::check_history`):
//!   stream the file segment by segment, parse every line, run every checker.
//! - `checkers/check_segment`: `checker::check` on the parsed segment (all checkers, with the
//!   pairing of invocations and completions).
//! - `checkers/from_segment`, `mutex`, `lost_update`, `fencing`, `availability`: the parts.
//!
//! Set `DLBENCH_BENCH_HISTORY=PATH` to keep the generated file (for timing `dlbench check`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dlbench::checker::{self, availability, fencing, lost_update, mutex, History, Validity};
use dlbench::history::{self, Meta, Op, Record, Segment};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const OPERATIONS: u64 = 1_000_000;
const CLIENTS: u64 = 64;
const KEYS: usize = 32;
const US: u64 = 1_000;

/// A well-formed, valid history of exactly `OPERATIONS` operations, in time order.
fn generate() -> Segment {
    let mut rng = StdRng::seed_from_u64(7);
    // (time, sequence) -> record; the sequence keeps each process's records in order.
    let mut events: Vec<(u64, u64, Record)> = Vec::with_capacity(2_600_000);
    let push = |events: &mut Vec<(u64, u64, Record)>, ns: u64, r: Record| {
        let n = events.len() as u64;
        events.push((ns, n, r));
    };
    let mut free_at = [0u64; KEYS];
    let mut token = [0u64; KEYS];
    let mut seq = [0u64; KEYS];
    let mut value = [0u64; KEYS];
    // Each client's next free moment; the earliest goes next.
    let mut ready: BinaryHeap<Reverse<(u64, u64)>> = (0..CLIENTS).map(|p| Reverse((p * 3 * US, p))).collect();
    let mut ops = 0u64;
    while ops < OPERATIONS {
        let Reverse((t, p)) = ready.pop().unwrap();
        let k = rng.random_range(0..KEYS);
        let key = k as u32;
        push(&mut events, t, Record::Invoke { p, f: Op::Acquire, key, ns: t });
        let grant = (t + rng.random_range(15..40) * US).max(free_at[k] + 5 * US);
        let next = if grant > t + 1_000 * US || ops + 2 > OPERATIONS {
            // Waited too long: the wait timeout, a definite failure.
            let at = t + 1_000 * US;
            push(&mut events, at, Record::Fail { p, f: Op::Acquire, key, ns: at, error: "timed out waiting for the lock".into(), kind: None });
            ops += 1;
            at
        } else {
            token[k] += 1;
            push(&mut events, grant, Record::Ok { p, f: Op::Acquire, key, ns: grant, token: Some(token[k]) });
            let enter = grant + US;
            let exit = enter + rng.random_range(5..60) * US;
            let read_seq = seq[k] + 1;
            let read = value[k];
            seq[k] += 2;
            value[k] += 1;
            push(
                &mut events,
                exit,
                Record::Section {
                    p,
                    key,
                    token: Some(token[k]),
                    enter,
                    exit,
                    read_seq: Some(read_seq),
                    read: Some(read),
                    write_seq: Some(read_seq + 1),
                    lease_lost: false,
                },
            );
            let release = exit + US;
            let released = release + rng.random_range(15..40) * US;
            push(&mut events, release, Record::Invoke { p, f: Op::Release, key, ns: release });
            push(&mut events, released, Record::Ok { p, f: Op::Release, key, ns: released, token: None });
            free_at[k] = released;
            ops += 2;
            released
        };
        ready.push(Reverse((next + rng.random_range(0..200) * US, p)));
    }
    events.sort_unstable_by_key(|e| (e.0, e.1));
    Segment {
        meta: Some(Meta {
            backend: "generated".into(),
            workload: "bench-1m".into(),
            keys: (0..KEYS).map(|i| format!("dlbench/bench/k{i}")).collect(),
            ttl_ms: 10_000,
            fencing_tokens: true,
            started_at: "2026-01-01T00:00:00Z".into(),
        }),
        records: events.into_iter().map(|e| e.2).collect(),
    }
}

fn write(seg: &Segment, path: &std::path::Path) {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut line = |r: &Record| {
        serde_json::to_writer(&mut f, r).unwrap();
        f.write_all(b"\n").unwrap();
    };
    line(&Record::Meta(seg.meta.clone().unwrap()));
    seg.records.iter().for_each(&mut line);
    f.flush().unwrap();
}

/// What `dlbench check FILE` runs (`run::check_history`).
fn check_file(path: &std::path::Path) -> Vec<checker::SegmentVerdict> {
    let mut out = Vec::new();
    history::for_each_segment(path, |s| out.push(checker::check(&s))).unwrap();
    out
}

fn checkers(c: &mut Criterion) {
    let seg = generate();
    let kept = std::env::var_os("DLBENCH_BENCH_HISTORY").map(PathBuf::from);
    let path = kept.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("dlbench-bench-1m-{}.jsonl", std::process::id())));
    write(&seg, &path);
    let h = History::from_segment(&seg);
    assert_eq!(h.ops.len() as u64, OPERATIONS);
    let verdicts = check_file(&path);
    assert_eq!(verdicts.len(), 1);
    for r in &verdicts[0].results {
        assert_eq!(r.valid, Validity::Valid, "{}: {}", r.checker, r.message);
    }
    eprintln!(
        "checkers: {} operations, {} records, {} sections, {:.0} MB on disk ({})",
        h.ops.len(),
        seg.records.len(),
        h.sections.len(),
        std::fs::metadata(&path).unwrap().len() as f64 / 1e6,
        path.display()
    );

    let mut g = c.benchmark_group("checkers");
    g.throughput(Throughput::Elements(OPERATIONS));
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("check_file", |b| b.iter(|| check_file(&path)));
    g.bench_function("check_segment", |b| b.iter(|| checker::check(&seg)));
    g.bench_function("from_segment", |b| b.iter(|| History::from_segment(&seg)));
    g.bench_function("mutex", |b| b.iter(|| mutex::check(&h)));
    g.bench_function("lost_update", |b| b.iter(|| lost_update::check(&h)));
    g.bench_function("fencing", |b| b.iter(|| fencing::check(&h)));
    g.bench_function("availability", |b| b.iter(|| availability::check(&h)));
    g.finish();
    if kept.is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

criterion_group!(benches, checkers);
criterion_main!(benches);
