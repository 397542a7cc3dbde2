//! One client of a phase: acquire, work on the protected resource, release, think, repeat;
//! a client whose operation ended with an unknown outcome is retired and replaced.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, DistLock, Lease, LockError, SectionRecord};

use super::shared::Shared;
use super::{SAMPLE_CLIENTS, SAMPLE_KEYS};
use crate::history::{Op, Record, CANCELLED};
use crate::workload::KeyPicker;

/// How long a retired client may take to close its session before it is abandoned.
const RETIRE_CLOSE: Duration = Duration::from_secs(2);

/// What the loop does after a step.
enum Flow {
    /// On to the next operation.
    Go,
    /// The operation's outcome is unknown (or it left a claim behind): replace the client.
    Retire,
    /// The phase is over: keep the sampled keys and close the session.
    Stop,
    /// The phase is over and the client is already closed.
    End,
}

/// One operation: which key, when it was due, when it started.
struct Turn {
    k: usize,
    key: u32,
    hold: Duration,
    think: Duration,
    due: Instant,
    t0: Instant,
    measured: bool,
}

/// The loop's state: its client, its process id in the history, its key sequence.
struct Client {
    sh: Arc<Shared>,
    /// The client's number in this process.
    c: usize,
    picker: KeyPicker,
    opts: AcquireOptions,
    sample: Vec<u32>,
    /// The process id in the history; a replacement client gets a fresh one.
    p: u64,
    client: Box<dyn DistLock>,
    open_interval: Option<Duration>,
}

pub(super) async fn client_loop(sh: Arc<Shared>, c: usize) {
    let w = &sh.workload;
    let picker = KeyPicker::new(w, (sh.first_client + c) as u64);
    let opts = AcquireOptions { ttl: w.ttl, wait: w.wait_timeout, retry_interval: w.retry_interval, ..AcquireOptions::default() };
    let p = (sh.first_client + c) as u64;
    let Some(client) = new_client(&sh, c).await else { return };
    let open_interval = w.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut me = Client { sh, c, picker, opts, sample: Vec::new(), p, client, open_interval };
    while !me.sh.stop.is_cancelled() {
        match me.step().await {
            Flow::Go | Flow::Retire => {}
            Flow::Stop => break,
            Flow::End => return,
        }
    }
    me.finish().await;
}

impl Client {
    /// One operation, from waiting for its turn to the think time after it.
    async fn step(&mut self) -> Flow {
        if let Some(h) = &self.sh.history {
            h.backpressure().await;
        }
        let ready = Instant::now();
        let Some(due) = self.due(ready).await else { return Flow::Stop };
        let turn = self.begin(due, ready);
        let (r, got) = self.acquire(&turn).await;
        let flow = match r {
            Ok(lease) => self.hold(&turn, lease, got).await,
            Err(e) => self.refused(&turn, e, got).await,
        };
        match flow {
            Flow::Go => {}
            Flow::Retire => match self.retire(turn.key).await {
                Flow::Go | Flow::Retire => {}
                other => return other,
            },
            other => return other,
        }
        // Think time belongs to the closed loop; in the open loop the schedule paces.
        if self.open_interval.is_none() && !turn.think.is_zero() && !sleep_until(&self.sh, Instant::now() + turn.think).await {
            return Flow::Stop;
        }
        Flow::Go
    }

    /// Which operation, and when it is due; none once the phase's operations are all taken.
    async fn due(&self, ready: Instant) -> Option<Instant> {
        let sh = &self.sh;
        let ops = sh.workload.ops;
        match self.open_interval {
            Some(iv) => {
                let i = sh.next_op.fetch_add(1, Ordering::Relaxed);
                if ops.is_some_and(|n| i >= n) {
                    return None;
                }
                let due = sh.started + iv.mul_f64(i as f64);
                if due > ready && !sleep_until(sh, due).await {
                    return None;
                }
                Some(due)
            }
            None => {
                if let Some(n) = ops {
                    if sh.next_op.fetch_add(1, Ordering::Relaxed) >= n {
                        return None;
                    }
                }
                Some(ready)
            }
        }
    }

    /// Pick the key, hold and think time, and note the arrival.
    fn begin(&mut self, due: Instant, ready: Instant) -> Turn {
        let sh = &self.sh;
        let k = self.picker.next_key();
        if self.c < SAMPLE_CLIENTS && self.sample.len() < SAMPLE_KEYS {
            self.sample.push(k as u32);
            if self.sample.len() == SAMPLE_KEYS {
                sh.first_keys.lock().unwrap()[self.c] = self.sample.clone();
            }
        }
        let hold = self.picker.sample(&sh.workload.hold);
        let think = self.picker.sample(&sh.workload.think);
        let t0 = Instant::now();
        if let Some(lag) = &sh.schedule_lag {
            lag.lock().unwrap().saturating_record(crate::stats::us(t0.saturating_duration_since(due.max(ready))));
        }
        let measured = due >= sh.measure_from;
        if let Some(f) = &sh.fifo {
            f.arrive(k, self.c, t0);
        }
        Turn { k, key: k as u32, hold, think, due, t0, measured }
    }

    /// Acquire the turn's key (cut short by an abort), recording the invocation and its
    /// completion; returns the result and when it came.
    async fn acquire(&mut self, turn: &Turn) -> (Result<Lease, LockError>, Instant) {
        let sh = &self.sh;
        let (p, key) = (self.p, turn.key);
        sh.op(Record::Invoke { p, f: Op::Acquire, key, ns: sh.hist_ns(turn.t0) });
        sh.in_flight.fetch_add(1, Ordering::SeqCst);
        let r = tokio::select! {
            r = self.client.acquire(&sh.keys[turn.k], &self.opts) => r,
            _ = sh.abort.cancelled() => Err(LockError::Indeterminate(CANCELLED.into())),
        };
        sh.in_flight.fetch_sub(1, Ordering::SeqCst);
        let got = Instant::now();
        let mut rec = Record::completion(p, Op::Acquire, key, sh.hist_ns(got), r.as_ref().map(|l| l.token.map(|t| t.0)));
        // A polling lock's grant came from its last attempt: its claim starts there.
        if let (Record::Ok { attempt, .. }, Ok(l)) = (&mut rec, &r) {
            *attempt = (l.invoked_at > turn.t0).then(|| sh.hist_ns(l.invoked_at));
        }
        sh.op(rec);
        (r, got)
    }

    /// Granted: work on the resource, then release.
    async fn hold(&mut self, turn: &Turn, lease: Lease, got: Instant) -> Flow {
        let sh = self.sh.clone();
        let (c, k, measured) = (self.c, turn.k, turn.measured);
        sh.recorder.acquired(c, got - turn.due, got - turn.t0, measured);
        if let Some(f) = &sh.fifo {
            f.granted(k, c, turn.t0);
        }
        let released_at = sh.last_release[k].load(Ordering::Acquire);
        if released_at > sh.nanos(turn.t0) {
            // We were waiting when the previous holder let go: a hand-off.
            let gap = Duration::from_nanos(sh.nanos(got).saturating_sub(released_at));
            sh.recorder.handoff(c, gap, measured);
        }
        let rec = match self.section(turn, &lease).await {
            Ok(rec) => rec,
            Err(e) => {
                // No evidence without the resource: stop the phase, say why.
                sh.resource_error(e);
                let _ = self.client.release(lease).await;
                return Flow::Stop;
            }
        };
        sh.op(Record::section(self.p, &rec));
        self.release(turn, lease).await
    }

    /// The critical section, in the resource server or in this process's resource.
    async fn section(&self, turn: &Turn, lease: &Lease) -> anyhow::Result<SectionRecord> {
        let sh = &self.sh;
        match &sh.server {
            Some(srv) => srv.section(turn.k, lease, turn.hold).await,
            None => {
                let mut section = sh.resource.enter_lease(turn.k, lease);
                section.read_sleep_write(turn.hold).await;
                section.exit();
                Ok(section.record())
            }
        }
    }

    async fn release(&mut self, turn: &Turn, lease: Lease) -> Flow {
        let sh = &self.sh;
        let (p, key) = (self.p, turn.key);
        let t1 = Instant::now();
        sh.last_release[turn.k].store(sh.nanos(t1).max(1), Ordering::Release);
        sh.op(Record::Invoke { p, f: Op::Release, key, ns: sh.hist_ns(t1) });
        let rr = self.client.release(lease).await;
        sh.completion(p, Op::Release, key, Instant::now(), rr.as_ref().map(|_| None));
        match rr {
            Ok(()) => {
                sh.recorder.released(self.c, t1.elapsed(), turn.measured);
                Flow::Go
            }
            Err(e) => {
                sh.recorder.failed(self.c, release_kind(&e), turn.measured);
                // A release that failed may leave the claim behind, kept alive by
                // this client's session: retire the client so the claim expires.
                if matches!(e, LockError::NotHeld(_)) { Flow::Go } else { Flow::Retire }
            }
        }
    }

    /// Not granted: a wait that timed out, an operation we cut short, or a failure.
    async fn refused(&mut self, turn: &Turn, e: LockError, got: Instant) -> Flow {
        let sh = &self.sh;
        let c = self.c;
        if let Some(f) = &sh.fifo {
            f.leave(turn.k, c);
        }
        if e.is_contention() {
            sh.recorder.timed_out(c, got - turn.due, turn.measured);
            // A try-lock (`--wait-timeout 0s`) that finds the key busy returns at
            // once: wait a retry interval, as a polling client would, rather than spin
            // (a spinning task starves the others, the ticker and the lock's holder).
            if self.opts.wait.is_zero() {
                let pause = self.opts.retry_interval.max(Duration::from_millis(1));
                if !sleep_until(sh, Instant::now() + pause).await {
                    return Flow::Stop;
                }
            }
            Flow::Go
        } else if sh.abort.is_cancelled() && matches!(&e, LockError::Indeterminate(m) if m == CANCELLED) {
            // Cut short by us, not failed by the lock; its outcome is still unknown,
            // so the process is retired like any other `info`.
            sh.recorder.cancelled(c);
            Flow::Retire
        } else {
            sh.recorder.acquire_failed(c, e.kind(), got - turn.due, turn.measured);
            if !e.is_definite() {
                return Flow::Retire;
            }
            // A server that refuses is not hammered: back off a little.
            if !sleep_until(sh, Instant::now() + Duration::from_millis(50)).await {
                return Flow::Stop;
            }
            Flow::Go
        }
    }

    /// Its operation may still take effect: this process is done, a new one takes its
    /// place (Jepsen's rule for `info`). Like an application that saw the error, it closes
    /// its session (revoking its lease, freeing any claim it may hold) if the servers
    /// answer in time; if they do not, the claim expires with its TTL.
    async fn retire(&mut self, key: u32) -> Flow {
        let sh = self.sh.clone();
        if tokio::time::timeout(RETIRE_CLOSE, self.client.close()).await.is_err() {
            self.client.abandon().await;
        }
        sh.retired.fetch_add(1, Ordering::Relaxed);
        if sh.abort.is_cancelled() {
            return Flow::End;
        }
        self.p = sh.next_process.fetch_add(1, Ordering::Relaxed);
        let Some(next) = self.reopen(key).await else { return Flow::End };
        self.client = next;
        // The fault that made the outcome unknown is likely still there.
        if !sleep_until(&sh, Instant::now() + Duration::from_millis(50)).await {
            return Flow::Stop;
        }
        Flow::Go
    }

    /// Keep the sampled keys (however few) and close the session.
    async fn finish(self) {
        if self.c < SAMPLE_CLIENTS && self.sample.len() < SAMPLE_KEYS {
            self.sh.first_keys.lock().unwrap()[self.c] = self.sample;
        }
        self.client.close().await;
    }

    /// The replacement process opens its session. Each attempt that cannot reach the servers
    /// is recorded as an acquire of `key` the lock refused: the process wants the lock, and a
    /// server that wrongly answered would have granted it, so the windows see the clients
    /// asking through a dead server as they see them waiting on a frozen one. A failure whose
    /// outcome is unknown (it reached a server) retires that process too.
    async fn reopen(&mut self, key: u32) -> Option<Box<dyn DistLock>> {
        let sh = self.sh.clone();
        let p = &mut self.p;
        open_session(&sh, self.c, |e, t0| {
            sh.op(Record::Invoke { p: *p, f: Op::Acquire, key, ns: sh.hist_ns(t0) });
            // Never a contention: no session was opened, so nobody could have held the key
            // against it (the contention checker asks who did).
            let (ns, error) = (sh.hist_ns(Instant::now()), format!("no session: {e}"));
            sh.op(if e.is_definite() {
                Record::Fail { p: *p, f: Op::Acquire, key, ns, error, kind: Some("unavailable".into()) }
            } else {
                Record::Info { p: *p, f: Op::Acquire, key, ns, error }
            });
            if !e.is_definite() {
                *p = sh.next_process.fetch_add(1, Ordering::Relaxed);
            }
        })
        .await
    }
}

/// A client's first session: tried until it opens (failures counted, not in the history:
/// no process has asked for a key yet).
async fn new_client(sh: &Shared, c: usize) -> Option<Box<dyn DistLock>> {
    open_session(sh, c, |_, _| {}).await
}

/// Open a session, trying every 100 ms until one opens or the phase stops; each failure is
/// counted and handed to `failed` with the instant its try began.
async fn open_session(sh: &Shared, c: usize, mut failed: impl FnMut(&LockError, Instant)) -> Option<Box<dyn DistLock>> {
    loop {
        let t0 = Instant::now();
        match sh.backend.client().await {
            Ok(client) => return Some(client),
            Err(e) => {
                failed(&e, t0);
                sh.recorder.failed(c, e.kind(), Instant::now() >= sh.measure_from);
                tokio::select! {
                    _ = sh.stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}

/// Sleep until `t` unless the phase stops first; false when it stopped.
async fn sleep_until(sh: &Shared, t: Instant) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(t.into()) => true,
        _ = sh.stop.cancelled() => false,
    }
}

/// A release that finds the lock gone means the holder outlived its lease.
fn release_kind(e: &LockError) -> &'static str {
    match e {
        LockError::NotHeld(_) => "release_not_held",
        LockError::Indeterminate(_) => "release_indeterminate",
        _ => "release_failed",
    }
}
