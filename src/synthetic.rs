//! Synthetic histories, written straight to a file in bounded memory, for the checkers'
//! bench and the bounded-memory test: clients on a few keys, acquires that wait for the
//! key's holder or give up after 1 ms, critical sections with the resource's reads and writes
//! and fencing tokens, releases. A share of acquires can end with an unknown outcome (`info`:
//! the process is retired and a new one takes its place), the case that once made a checker
//! quadratic. The history is valid: every checker must say so.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::history::{Meta, Op, Record};

const US: u64 = 1_000;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Operations (an invocation and its completion), in total.
    pub operations: u64,
    pub clients: u64,
    pub keys: usize,
    /// Share of acquires that end `info` (unknown outcome) instead of waiting.
    pub unknown_share: f64,
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec { operations: 1_000_000, clients: 64, keys: 32, unknown_share: 0.0, seed: 7 }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Written {
    pub operations: u64,
    pub records: u64,
    pub sections: u64,
    pub unknown: u64,
}

/// Write a history of `spec.operations` operations to `path`, in time order. Records are
/// produced ahead of time per client and released once no client can produce an earlier one,
/// so memory stays at a few records per client.
pub fn write(spec: &Spec, path: &Path) -> std::io::Result<Written> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut w = Written::default();
    let line = |out: &mut std::io::BufWriter<std::fs::File>, r: &Record| -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")
    };
    line(
        &mut out,
        &Record::Meta(Meta {
            backend: "generated".into(),
            workload: format!("synthetic-{}", spec.operations),
            keys: (0..spec.keys).map(|i| format!("dlbench/synthetic/k{i}")).collect(),
            ttl_ms: 10_000,
            fencing_tokens: true,
            started_at: "2026-01-01T00:00:00Z".into(),
            split_votes: false,
            granted_ttl: None,
        }),
    )?;
    let keys = spec.keys.max(1);
    let mut free_at = vec![0u64; keys];
    let mut token = vec![0u64; keys];
    let mut seq = vec![0u64; keys];
    let mut value = vec![0u64; keys];
    // Records produced and not yet written, by (time, order).
    let mut pending: BinaryHeap<Reverse<(u64, u64, String)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut push = |pending: &mut BinaryHeap<Reverse<(u64, u64, String)>>, ns: u64, r: Record| {
        order += 1;
        pending.push(Reverse((ns, order, serde_json::to_string(&r).expect("records serialize"))));
    };
    // Each client's next free moment and its process id; the earliest goes next.
    let mut ready: BinaryHeap<Reverse<(u64, u64)>> = (0..spec.clients).map(|p| Reverse((p * 3 * US, p))).collect();
    let mut next_process = spec.clients;
    while w.operations < spec.operations {
        let Reverse((t, p)) = ready.pop().expect("clients");
        // Nothing produced later can start before `t`: write what is due.
        while pending.peek().is_some_and(|Reverse((ns, _, _))| *ns < t) {
            let Reverse((_, _, s)) = pending.pop().unwrap();
            out.write_all(s.as_bytes())?;
            out.write_all(b"\n")?;
            w.records += 1;
        }
        let k = rng.random_range(0..keys);
        let key = k as u32;
        push(&mut pending, t, Record::Invoke { p, f: Op::Acquire, key, ns: t });
        let grant = (t + rng.random_range(15..40) * US).max(free_at[k] + 5 * US);
        let (next, p_next) = if rng.random_bool(spec.unknown_share.clamp(0.0, 1.0)) {
            // The request left and no answer came: unknown outcome, the process is retired.
            let at = t + 2_000 * US;
            push(&mut pending, at, Record::Info { p, f: Op::Acquire, key, ns: at, error: "outcome unknown: timed out".into() });
            w.operations += 1;
            w.unknown += 1;
            next_process += 1;
            (at, next_process)
        } else if grant > t + 1_000 * US || w.operations + 2 > spec.operations {
            // Waited too long: the wait timeout, a definite failure, with another holder.
            let at = t + 1_000 * US;
            push(
                &mut pending,
                at,
                Record::Fail { p, f: Op::Acquire, key, ns: at, error: "not acquired: wait timeout of 1ms elapsed".into(), kind: Some("timeout".into()) },
            );
            w.operations += 1;
            (at, p)
        } else {
            token[k] += 1;
            push(&mut pending, grant, Record::Ok { p, f: Op::Acquire, key, ns: grant, token: Some(token[k]) });
            let enter = grant + US;
            let exit = enter + rng.random_range(5..60) * US;
            let read_seq = seq[k] + 1;
            let read = value[k];
            seq[k] += 2;
            value[k] += 1;
            push(
                &mut pending,
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
                    register: 0,
                },
            );
            w.sections += 1;
            let release = exit + US;
            let released = release + rng.random_range(15..40) * US;
            push(&mut pending, release, Record::Invoke { p, f: Op::Release, key, ns: release });
            push(&mut pending, released, Record::Ok { p, f: Op::Release, key, ns: released, token: None });
            free_at[k] = released;
            w.operations += 2;
            (released, p)
        };
        ready.push(Reverse((next + rng.random_range(0..200) * US, p_next)));
    }
    while let Some(Reverse((_, _, s))) = pending.pop() {
        out.write_all(s.as_bytes())?;
        out.write_all(b"\n")?;
        w.records += 1;
    }
    out.flush()?;
    Ok(w)
}
