//! What every client of a phase shares: the backend, the resource, the recorder, the clocks,
//! the history and the counters the result reads at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dlbench_core::{Backend, Capabilities, LockError, Resource};
use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use super::fifo::FifoTracker;
use super::{PhaseOutputs, SAMPLE_CLIENTS};
use crate::history::{HistoryWriter, Meta, Op, Record};
use crate::resource_server::ServerResource;
use crate::stats::{new_histogram, Recorder};
use crate::workload::Workload;

pub(super) struct Shared {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) workload: Workload,
    /// The phase's id in the history (backend and first key).
    pub(super) phase: String,
    pub(super) keys: Vec<String>,
    pub(super) resource: Resource,
    /// Where sections run when the resource is a server (`--resource`).
    pub(super) server: Option<ServerResource>,
    pub(super) recorder: Recorder,
    pub(super) started: Instant,
    pub(super) measure_from: Instant,
    /// No new operations after this fires.
    pub(super) stop: CancellationToken,
    /// Cancel operations in flight (interrupt, or the drain took too long).
    pub(super) abort: CancellationToken,
    pub(super) retired: AtomicU64,
    /// The next process id for a client replacing a retired one.
    pub(super) next_process: AtomicU64,
    /// Number of this process's client 0 in the whole (sharded) phase.
    pub(super) first_client: usize,
    pub(super) history: Option<HistoryWriter>,
    /// Next operation index (open loop) or operations started (closed loop with `ops`).
    pub(super) next_op: AtomicU64,
    /// Nanoseconds after `started` of the latest release call per key (0 = none yet).
    pub(super) last_release: Vec<AtomicU64>,
    pub(super) fifo: Option<FifoTracker>,
    pub(super) schedule_lag: Option<Mutex<Histogram<u64>>>,
    pub(super) first_keys: Mutex<Vec<Vec<u32>>>,
    /// Acquires invoked and not yet completed.
    pub(super) in_flight: AtomicU64,
    /// The resource server failed a step: the phase stops and says this.
    pub(super) resource_failed: Mutex<Option<String>>,
}

impl Shared {
    /// Everything a phase of `w` needs before its clients start: the keys, the history's
    /// `meta` record, the resource (in this process or in its server).
    pub(super) async fn open(
        backend: Arc<dyn Backend>,
        w: &Workload,
        run_id: &str,
        started: Instant,
        cancel: &CancellationToken,
        out: &PhaseOutputs,
    ) -> anyhow::Result<Shared> {
        let stop = cancel.child_token();
        let abort = cancel.child_token();
        let caps = backend.capabilities();
        let fifo = caps.fifo.then(|| FifoTracker::new(w.keys));
        let keys: Vec<String> = (0..w.keys).map(|i| w.key_name(run_id, i)).collect();
        let phase = crate::history::phase_id(out.history.as_ref().map_or(backend.name(), |(_, name)| name.as_str()), &keys[0]);
        let history = open_history(backend.as_ref(), w, &keys, &caps, out).await;
        let resource = Resource::new(w.keys);
        let server = match &out.resource_server {
            Some((url, scope)) => Some(ServerResource::open(url, scope, w.keys, resource.epoch()).await?),
            None => None,
        };
        Ok(Shared {
            backend,
            workload: w.clone(),
            phase,
            keys,
            resource,
            server,
            recorder: Recorder::new(w.clients),
            started,
            measure_from: started + w.warmup,
            stop,
            abort,
            retired: AtomicU64::new(0),
            // Replacement processes get ids after every client's; each shard its own range.
            next_process: AtomicU64::new(match out.shard {
                Some(s) => s.total_clients as u64 + ((s.index as u64) << 32),
                None => w.clients as u64,
            }),
            first_client: out.shard.map_or(0, |s| s.first_client),
            history,
            next_op: AtomicU64::new(0),
            last_release: (0..w.keys).map(|_| AtomicU64::new(0)).collect(),
            fifo,
            schedule_lag: w.rate.map(|_| Mutex::new(new_histogram())),
            first_keys: Mutex::new(vec![Vec::new(); w.clients.min(SAMPLE_CLIENTS)]),
            in_flight: AtomicU64::new(0),
            resource_failed: Mutex::new(None),
        })
    }

    pub(super) fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.started).as_nanos() as u64
    }

    /// History time: nanoseconds since the resource's epoch (sections use the same base).
    pub(super) fn hist_ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.resource.epoch()).as_nanos() as u64
    }

    pub(super) fn resource_error(&self, e: anyhow::Error) {
        self.resource_failed.lock().unwrap().get_or_insert_with(|| format!("{e:#}"));
        self.stop.cancel();
    }

    pub(super) fn op(&self, r: Record) {
        if let Some(h) = &self.history {
            h.record(&r);
        }
    }

    pub(super) fn completion(&self, p: u64, f: Op, key: u32, t: Instant, r: Result<Option<u64>, &LockError>) {
        self.op(Record::completion(p, f, key, self.hist_ns(t), r));
    }

    /// Open loop: operations due by `at` and not yet taken by a client.
    pub(super) fn backlog(&self, at: Instant) -> Option<u64> {
        let w = &self.workload;
        w.rate.map(|r| {
            let due = (at.saturating_duration_since(self.started).as_secs_f64() * r).floor() as u64;
            let due = w.ops.map_or(due, |n| due.min(n));
            due.saturating_sub(self.next_op.load(Ordering::Relaxed))
        })
    }
}

/// Open the phase's segment of the history with its `meta` record (none without a history).
async fn open_history(
    backend: &dyn Backend,
    w: &Workload,
    keys: &[String],
    caps: &Capabilities,
    out: &PhaseOutputs,
) -> Option<HistoryWriter> {
    // Asked before the phase, so the checkers judge unknown outcomes by the servers' TTL.
    let granted_ttl = match &out.history {
        Some(_) => backend.granted_ttl(w.ttl).await.ok(),
        None => None,
    };
    if let Some((h, _)) = &out.history {
        h.sync().await;
    }
    out.history.as_ref().map(|(h, backend_name)| {
        h.record(&Record::Meta(Meta {
            backend: backend_name.clone(),
            workload: w.name.clone(),
            keys: keys.to_vec(),
            ttl_ms: w.ttl.as_millis() as u64,
            fencing_tokens: caps.fencing,
            started_at: crate::results::now_rfc3339(),
            split_votes: caps.consistency == dlbench_core::Consistency::Ap,
            granted_ttl,
            choreographed: false,
            recovery_allowance_ms: out.recovery_allowance.map(|d| d.as_millis() as u64),
        }));
        h.clone()
    })
}
