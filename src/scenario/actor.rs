//! A scripted client: one process of a scenario, whose every operation and critical
//! section goes to the history, as the driver's do.

use std::sync::Arc;
use std::time::Instant;

use dlbench_core::{AcquireOptions, Backend, DistLock, Lease, LockError, Resource, SectionRecord};

use crate::history::{HistoryWriter, Op, Record};
use crate::stats::Recorder;

pub struct Actor {
    pub p: u64,
    pub name: &'static str,
    pub client: Box<dyn DistLock>,
    history: HistoryWriter,
    epoch: Instant,
    recorder: Arc<Recorder>,
}

impl Actor {
    pub async fn new(
        p: u64,
        name: &'static str,
        backend: &Arc<dyn Backend>,
        history: &HistoryWriter,
        resource: &Resource,
        recorder: &Arc<Recorder>,
    ) -> Result<Actor, LockError> {
        Ok(Actor {
            p,
            name,
            client: backend.client().await?,
            history: history.clone(),
            epoch: resource.epoch(),
            recorder: recorder.clone(),
        })
    }

    fn ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn complete(&self, f: Op, r: Result<Option<u64>, &LockError>) {
        self.history.record(&Record::completion(self.p, f, 0, self.ns(), r));
    }

    pub async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let t0 = Instant::now();
        self.history.record(&Record::Invoke { p: self.p, f: Op::Acquire, key: 0, ns: self.ns() });
        let r = self.client.acquire(key, opts).await;
        self.complete(Op::Acquire, r.as_ref().map(|l| l.token.map(|t| t.0)));
        match &r {
            Ok(_) => self.recorder.acquired(self.p as usize, t0.elapsed(), t0.elapsed(), true),
            Err(e) if e.is_contention() => self.recorder.timed_out(self.p as usize, t0.elapsed(), true),
            Err(e) => self.recorder.acquire_failed(self.p as usize, e.kind(), t0.elapsed(), true),
        }
        tracing::info!("scenario: {} acquire {key}: {:?}", self.name, r.as_ref().map(|l| l.token));
        r
    }

    pub async fn release(&self, lease: Lease) -> Result<(), LockError> {
        self.history.record(&Record::Invoke { p: self.p, f: Op::Release, key: 0, ns: self.ns() });
        let r = self.client.release(lease).await;
        self.complete(Op::Release, r.as_ref().map(|_| None));
        if let Err(e) = &r {
            let kind = match e {
                LockError::NotHeld(_) => "release_not_held",
                _ => "release_failed",
            };
            // A scenario has no warm-up: everything is measured (as its acquires are).
            self.recorder.failed(self.p as usize, kind, true);
        }
        r
    }

    /// Log a finished critical section.
    pub fn section(&self, rec: SectionRecord) {
        self.history.record(&Record::section(self.p, &rec));
    }
}
