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
    let mut g = Generator::new(spec);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    serde_json::to_writer(&mut out, &meta(spec))?;
    out.write_all(b"\n")?;
    while g.w.operations < spec.operations {
        let Reverse((t, p)) = g.ready.pop().expect("clients");
        // Nothing produced later can start before `t`: write what is due.
        while g.pending.peek().is_some_and(|Reverse((ns, _, _))| *ns < t) {
            g.write_next(&mut out)?;
        }
        g.operation(t, p);
    }
    while !g.pending.is_empty() {
        g.write_next(&mut out)?;
    }
    out.flush()?;
    Ok(g.w)
}

/// The history's `meta` record.
fn meta(spec: &Spec) -> Record {
    Record::Meta(Meta {
        backend: "generated".into(),
        workload: format!("synthetic-{}", spec.operations),
        keys: (0..spec.keys).map(|i| format!("dlbench/synthetic/k{i}")).collect(),
        ttl_ms: 10_000,
        fencing_tokens: true,
        started_at: "2026-01-01T00:00:00Z".into(),
        split_votes: false,
        granted_ttl: None,
        choreographed: false,
        recovery_allowance_ms: None,
    })
}

/// The generator's state: the keys' holders, tokens and registers, the records produced and
/// not yet written, and the clients' next free moments.
struct Generator<'a> {
    spec: &'a Spec,
    rng: StdRng,
    w: Written,
    keys: usize,
    free_at: Vec<u64>,
    token: Vec<u64>,
    seq: Vec<u64>,
    value: Vec<u64>,
    /// Records produced and not yet written, by (time, order).
    pending: BinaryHeap<Reverse<(u64, u64, String)>>,
    order: u64,
    /// Each client's next free moment and its process id; the earliest goes next.
    ready: BinaryHeap<Reverse<(u64, u64)>>,
    next_process: u64,
}

impl<'a> Generator<'a> {
    fn new(spec: &'a Spec) -> Self {
        let keys = spec.keys.max(1);
        Generator {
            spec,
            rng: StdRng::seed_from_u64(spec.seed),
            w: Written::default(),
            keys,
            free_at: vec![0u64; keys],
            token: vec![0u64; keys],
            seq: vec![0u64; keys],
            value: vec![0u64; keys],
            pending: BinaryHeap::new(),
            order: 0,
            ready: (0..spec.clients).map(|p| Reverse((p * 3 * US, p))).collect(),
            next_process: spec.clients,
        }
    }

    fn push(&mut self, ns: u64, r: Record) {
        self.order += 1;
        self.pending.push(Reverse((ns, self.order, serde_json::to_string(&r).expect("records serialize"))));
    }

    /// Write the earliest pending record.
    fn write_next(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let Reverse((_, _, s)) = self.pending.pop().unwrap();
        out.write_all(s.as_bytes())?;
        out.write_all(b"\n")?;
        self.w.records += 1;
        Ok(())
    }

    /// Client `p`, free at `t`, acquires a key: an unknown outcome, a wait timeout, or a
    /// grant with its section and release.
    fn operation(&mut self, t: u64, p: u64) {
        let k = self.rng.random_range(0..self.keys);
        let key = k as u32;
        self.push(t, Record::Invoke { p, f: Op::Acquire, key, ns: t });
        let grant = (t + self.rng.random_range(15..40) * US).max(self.free_at[k] + 5 * US);
        let (next, p_next) = if self.rng.random_bool(self.spec.unknown_share.clamp(0.0, 1.0)) {
            self.unknown(t, p, key)
        } else if grant > t + 1_000 * US || self.w.operations + 2 > self.spec.operations {
            self.timeout(t, p, key)
        } else {
            self.granted(p, k, grant)
        };
        let pause = self.rng.random_range(0..200) * US;
        self.ready.push(Reverse((next + pause, p_next)));
    }

    /// The request left and no answer came: unknown outcome, the process is retired.
    fn unknown(&mut self, t: u64, p: u64, key: u32) -> (u64, u64) {
        let at = t + 2_000 * US;
        self.push(at, Record::Info { p, f: Op::Acquire, key, ns: at, error: "outcome unknown: timed out".into() });
        self.w.operations += 1;
        self.w.unknown += 1;
        self.next_process += 1;
        (at, self.next_process)
    }

    /// Waited too long: the wait timeout, a definite failure, with another holder.
    fn timeout(&mut self, t: u64, p: u64, key: u32) -> (u64, u64) {
        let at = t + 1_000 * US;
        self.push(
            at,
            Record::Fail { p, f: Op::Acquire, key, ns: at, error: "not acquired: wait timeout of 1ms elapsed".into(), kind: Some("timeout".into()) },
        );
        self.w.operations += 1;
        (at, p)
    }

    /// Granted at `grant`: the section's read and write, then the release.
    fn granted(&mut self, p: u64, k: usize, grant: u64) -> (u64, u64) {
        let key = k as u32;
        self.token[k] += 1;
        let token = Some(self.token[k]);
        self.push(grant, Record::Ok { p, f: Op::Acquire, key, ns: grant, token, attempt: None });
        let enter = grant + US;
        let exit = enter + self.rng.random_range(5..60) * US;
        let read_seq = self.seq[k] + 1;
        let read = self.value[k];
        self.seq[k] += 2;
        self.value[k] += 1;
        self.push(
            exit,
            Record::Section {
                p,
                key,
                token,
                enter,
                exit,
                read_seq: Some(read_seq),
                read: Some(read),
                write_seq: Some(read_seq + 1),
                lease_lost: false,
                register: 0,
            },
        );
        self.w.sections += 1;
        let release = exit + US;
        let released = release + self.rng.random_range(15..40) * US;
        self.push(release, Record::Invoke { p, f: Op::Release, key, ns: release });
        self.push(released, Record::Ok { p, f: Op::Release, key, ns: released, token: None, attempt: None });
        self.free_at[k] = released;
        self.w.operations += 2;
        (released, p)
    }
}
