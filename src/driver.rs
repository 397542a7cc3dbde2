//! The load loop: clients acquire, work on the protected resource, release, think, repeat.
//!
//! One phase runs one [`Workload`] against one backend. Each client is a task with its own
//! [`DistLock`] (its own session); a client whose operation ended with an unknown outcome
//! is retired (abandoned, as a crashed process would be) and replaced, never reused.
//! Latency counts only operations that started after the warm-up; the resource counts
//! everything, because a safety violation during warm-up is still a violation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, DistLock, LockError, Resource, ResourceStats};
use tokio_util::sync::CancellationToken;

use crate::stats::{Recorder, Totals};
use crate::workload::{KeyPicker, Workload};

/// What one phase measured.
pub struct PhaseResult {
    pub workload: Workload,
    pub totals: Totals,
    /// Wall time of the measured window (after warm-up), shortened if cancelled.
    pub measured: Duration,
    pub resource: ResourceStats,
    pub cancelled: bool,
    /// Clients retired after an operation with an unknown outcome.
    pub retired: u64,
}

impl PhaseResult {
    pub fn ops_per_sec(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.totals.acquired as f64 / s
        } else {
            0.0
        }
    }
}

struct Shared {
    backend: Arc<dyn Backend>,
    workload: Workload,
    keys: Vec<String>,
    resource: Resource,
    recorder: Recorder,
    measure_from: Instant,
    stop: CancellationToken,
    retired: std::sync::atomic::AtomicU64,
}

/// Run `w` against `backend` until its duration passes or `cancel` fires.
pub async fn run_phase(
    backend: Arc<dyn Backend>,
    w: &Workload,
    run_id: &str,
    cancel: &CancellationToken,
) -> anyhow::Result<PhaseResult> {
    w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
    let started = Instant::now();
    let stop = cancel.child_token();
    let shared = Arc::new(Shared {
        backend,
        workload: w.clone(),
        keys: (0..w.keys).map(|i| w.key_name(run_id, i)).collect(),
        resource: Resource::new(w.keys, false),
        recorder: Recorder::new(w.clients),
        measure_from: started + w.warmup,
        stop: stop.clone(),
        retired: Default::default(),
    });
    let tasks: Vec<_> = (0..w.clients).map(|c| tokio::spawn(client_loop(shared.clone(), c))).collect();
    let end = started + w.warmup + w.duration;
    tokio::select! {
        _ = tokio::time::sleep_until(end.into()) => {}
        _ = cancel.cancelled() => {}
    }
    let stopped_at = Instant::now();
    stop.cancel();
    for t in tasks {
        if let Err(e) = t.await {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
    let measured = stopped_at.saturating_duration_since(shared.measure_from);
    Ok(PhaseResult {
        workload: w.clone(),
        totals: shared.recorder.totals(),
        measured,
        resource: shared.resource.stats(),
        cancelled: cancel.is_cancelled(),
        retired: shared.retired.load(std::sync::atomic::Ordering::Relaxed),
    })
}

async fn new_client(sh: &Shared, c: usize) -> Option<Box<dyn DistLock>> {
    loop {
        match sh.backend.client().await {
            Ok(client) => return Some(client),
            Err(e) => {
                sh.recorder.failed(c, e.kind());
                tokio::select! {
                    _ = sh.stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}

async fn client_loop(sh: Arc<Shared>, c: usize) {
    let w = &sh.workload;
    let mut picker = KeyPicker::new(w, c as u64);
    let opts = AcquireOptions { ttl: w.ttl, wait: w.wait_timeout, retry_interval: w.retry_interval };
    let Some(mut client) = new_client(&sh, c).await else { return };
    while !sh.stop.is_cancelled() {
        let k = picker.next_key();
        let hold = picker.sample(&w.hold);
        let think = picker.sample(&w.think);
        let t0 = Instant::now();
        let measured = t0 >= sh.measure_from;
        let r = tokio::select! {
            r = client.acquire(&sh.keys[k], &opts) => r,
            _ = sh.stop.cancelled() => break,
        };
        let mut retire = false;
        match r {
            Ok(lease) => {
                if measured {
                    sh.recorder.acquired(c, t0.elapsed());
                }
                {
                    let mut section = sh.resource.enter(k, lease.token);
                    section.read_sleep_write(hold).await;
                }
                let t1 = Instant::now();
                match client.release(lease).await {
                    Ok(()) => {
                        if measured {
                            sh.recorder.released(c, t1.elapsed());
                        }
                    }
                    Err(e) => {
                        sh.recorder.failed(c, release_kind(&e));
                        retire = !e.is_definite();
                    }
                }
            }
            Err(e) if e.is_contention() => {
                if measured {
                    sh.recorder.timed_out(c);
                }
            }
            Err(e) => {
                sh.recorder.failed(c, e.kind());
                retire = !e.is_definite();
                if !retire {
                    // A server that refuses is not hammered: back off a little.
                    tokio::select! {
                        _ = sh.stop.cancelled() => break,
                        _ = dlbench_core::jittered_sleep(Duration::from_millis(50)) => {}
                    }
                }
            }
        }
        if retire {
            client.abandon().await;
            sh.retired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(next) = new_client(&sh, c).await else { return };
            client = next;
        }
        if !think.is_zero() {
            tokio::select! {
                _ = sh.stop.cancelled() => break,
                _ = tokio::time::sleep(think) => {}
            }
        }
    }
    client.close().await;
}

/// A release that finds the lock gone means the holder outlived its lease.
fn release_kind(e: &LockError) -> &'static str {
    match e {
        LockError::NotHeld(_) => "release_not_held",
        LockError::Indeterminate(_) => "release_indeterminate",
        _ => "release_failed",
    }
}
