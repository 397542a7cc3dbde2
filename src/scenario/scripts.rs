//! The choreographed scenarios (S1-S7, J1): a holder, a next client, and one fault placed
//! exactly where it hurts, with every step in the history. Each script is only its
//! choreography; the [`Stage`] it plays on (key, resource, recorder, history segment, epoch,
//! fault events, notes) is shared.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, Lease, LockError, Resource, ResourceStats};

use super::actor::Actor;
use crate::connect::{self, Timeouts};
use crate::history::{HistoryWriter, Meta, Record};
use crate::kind::BackendKind;
use crate::nemesis::{clock, FaultKind, FaultSpec, Nemesis, NemesisEvent, Targeting};
use crate::stats::Recorder;
use crate::cluster::local::{LocalTarget, Node};

/// What a script measured.
#[derive(Clone)]
pub struct Observed {
    pub resource: ResourceStats,
    pub recorder: Arc<Recorder>,
    pub elapsed: Duration,
    /// S7: whether the waiter whose session expired was ever told "acquired".
    pub expired_waiter_acquired: Option<bool>,
    /// S7: the claims (keys, nodes, rows) the servers still held for the lock at the end;
    /// `Err` when they could not be read.
    pub leftovers: Option<Result<Vec<String>, String>>,
    pub notes: Vec<String>,
    pub nemesis: Vec<NemesisEvent>,
    /// The history segment the stage opened ([`crate::history::phase_id`]); empty where
    /// the observation has none of its own.
    pub phase: String,
    /// P1 / J2: the power loss under a holder.
    pub power: Option<crate::judgement::PowerSeen>,
    /// P1 / J2: what the backend's setting is expected to do.
    pub power_expected: Option<crate::judgement::Expected>,
}

impl Observed {
    /// An observation made of resource counts alone (the nemesis entries, and tests).
    pub fn of(resource: ResourceStats, elapsed: Duration, nemesis: Vec<NemesisEvent>) -> Self {
        Observed {
            resource,
            recorder: Arc::new(Recorder::new(1)),
            elapsed,
            expired_waiter_acquired: None,
            leftovers: None,
            notes: Vec::new(),
            phase: String::new(),
            nemesis,
            power: None,
            power_expected: None,
        }
    }
}

/// Shared by the scripts of one scenario on one backend.
pub struct Ctx {
    pub target: Arc<LocalTarget>,
    pub kind: BackendKind,
    pub backend: Arc<dyn Backend>,
    pub history: HistoryWriter,
    pub run_id: String,
    pub groups: Arc<AtomicU32>,
}

/// The TTL the choreographed scenarios use: short, so expiry comes soon.
pub const TTL: Duration = Duration::from_secs(3);

impl Ctx {
    /// A backend whose clients go through their own proxies (so a fault can hit them alone).
    pub async fn dedicated(&self) -> anyhow::Result<(u32, Arc<dyn Backend>)> {
        let g = self.groups.fetch_add(1, Ordering::Relaxed) + 1;
        let eps = self.target.client_endpoints(g)?;
        let b = connect::connect(self.kind, &eps, Timeouts::default(), None).await?;
        Ok((g, b))
    }

    pub fn key(&self, name: &str) -> String {
        format!("dlbench-{}-{name}-{}", self.run_id, self.kind)
    }

    pub(super) fn nodes(&self) -> Vec<Arc<Node>> {
        self.target.nodes_of(self.kind).into_iter().filter(|n| !n.replica).collect()
    }

    pub(super) fn net(&self) -> anyhow::Result<&Arc<crate::nemesis::net::Net>> {
        self.target.net().ok_or_else(|| anyhow::anyhow!("scenarios need the target's proxies"))
    }
}

/// One script's stage: its key and resource, its own history segment (whose times count
/// from the resource's epoch), the faults it applies by hand, and its notes.
pub struct Stage<'a> {
    pub ctx: &'a Ctx,
    pub key: String,
    pub resource: Resource,
    pub recorder: Arc<Recorder>,
    notes: std::sync::Mutex<Vec<String>>,
    events: std::sync::Mutex<Vec<NemesisEvent>>,
    started: Instant,
}

impl<'a> Stage<'a> {
    /// Open a history segment `name` for a script with `actors` clients on one key.
    pub async fn open(ctx: &'a Ctx, name: &str, ttl: Duration, actors: usize) -> Stage<'a> {
        let key = ctx.key(name);
        let granted_ttl = ctx.backend.granted_ttl(ttl).await.ok();
        ctx.history.sync().await;
        ctx.history.record(&Record::Meta(Meta {
            backend: ctx.kind.name().into(),
            workload: name.into(),
            keys: vec![key.clone()],
            ttl_ms: ttl.as_millis() as u64,
            fencing_tokens: ctx.backend.capabilities().fencing,
            started_at: crate::results::now_rfc3339(),
            split_votes: ctx.backend.capabilities().consistency == dlbench_core::Consistency::Ap,
            granted_ttl,
        }));
        Stage {
            ctx,
            key,
            resource: Resource::new(1),
            recorder: Arc::new(Recorder::new(actors)),
            notes: Default::default(),
            events: Default::default(),
            started: Instant::now(),
        }
    }

    pub fn epoch(&self) -> Instant {
        self.resource.epoch()
    }

    /// Process `p` of this script, a client of `backend`.
    pub async fn actor(&self, p: u64, name: &'static str, backend: &Arc<dyn Backend>) -> Result<Actor, LockError> {
        Actor::new(p, name, backend, &self.ctx.history, &self.resource, &self.recorder).await
    }

    /// Record a fault the script applies by hand (not through the nemesis).
    pub fn event(&self, f: &str, phase: &str, targets: &[&str]) {
        self.event_with(f, phase, targets, "");
    }

    /// A fault applied by hand, with its evidence (`detail`, as the nemesis records it).
    pub fn event_with(&self, f: &str, phase: &str, targets: &[&str], detail: &str) {
        let ns = self.epoch().elapsed().as_nanos() as u64;
        let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        self.ctx.history.record(&Record::Nemesis { f: f.into(), phase: phase.into(), targets: targets.clone(), ns, detail: detail.into() });
        self.events.lock().unwrap().push(NemesisEvent {
            backend: String::new(),
            workload: String::new(),
            f: f.into(),
            phase: phase.into(),
            targets,
            at_ms: ns / 1_000_000,
            detail: detail.into(),
        });
    }

    /// A whole, undisturbed critical section by `who` holding `lease`, then its release.
    pub async fn use_and_release(&self, who: &Actor, lease: Lease) {
        let mut s = self.resource.enter_lease(0, &lease);
        s.read();
        s.write_incremented();
        s.exit();
        who.section(s.record());
        let _ = who.release(lease).await;
    }

    /// A nemesis that records into this stage's segment.
    pub fn nemesis(&self, name: &str) -> Nemesis {
        Nemesis::new(self.ctx.target.clone(), self.ctx.kind, name, self.epoch(), Some(self.ctx.history.clone()))
    }

    pub fn note(&self, s: impl Into<String>) {
        self.notes.lock().unwrap().push(s.into());
    }

    /// Events a nemesis recorded into this stage's segment, for the observation.
    pub fn extend_events(&self, events: Vec<NemesisEvent>) {
        self.events.lock().unwrap().extend(events);
    }

    pub fn finish(self) -> Observed {
        Observed {
            resource: self.resource.stats(),
            recorder: self.recorder,
            elapsed: self.started.elapsed(),
            expired_waiter_acquired: None,
            leftovers: None,
            notes: self.notes.into_inner().unwrap(),
            nemesis: self.events.into_inner().unwrap(),
            phase: crate::history::phase_id(self.ctx.kind.name(), &self.key),
            power: None,
            power_expected: None,
        }
    }
}

pub(super) fn opts(ttl: Duration, wait: Duration) -> AcquireOptions {
    AcquireOptions::default().with_ttl(ttl).with_wait(wait).with_retry_interval(Duration::from_millis(20))
}

/// How the holder is stalled in S1 and S6.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// The holder's process stops (a GC pause): no heartbeats; it writes after it resumes.
    Pause,
    /// The holder is cut off from the lock service but not from the resource: it writes
    /// while still partitioned, unaware its lease is gone.
    Partition,
}

/// How long a stall lasts and whether the next client keeps Chubby's lock-delay.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// `None`: the holder resumes only after the next client has been and gone (the stall
    /// outlasts everything). `Some(d)`: the holder resumes `d` after it stalled, whether or
    /// not the next client got in meanwhile.
    pub stall_for: Option<Duration>,
    /// The next client's `AcquireOptions::lock_delay` (zero: off).
    pub lock_delay: Duration,
}

/// S1 / S6 (and J1 with a 2 s lease): the holder stalls inside its critical section past its
/// TTL; the next client gets the lock; the stalled holder then writes with its old token.
pub async fn stalled_holder(ctx: &Ctx, name: &str, stall: Stall, ttl: Duration, timing: Timing) -> anyhow::Result<Observed> {
    let st = Stage::open(ctx, name, ttl, 2).await;
    let net = ctx.net()?;
    let (group, vb) = ctx.dedicated().await?;
    let holder = st.actor(0, "holder", &vb).await?;
    let next = st.actor(1, "next", &ctx.backend).await?;

    let lease = holder.acquire(&st.key, &opts(ttl, Duration::from_secs(20))).await?;
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    let what = if stall == Stall::Pause { "client-pause" } else { "client-partition" };
    let nodes: Vec<usize> = ctx.nodes().iter().map(|n| n.index).collect();
    net.cut_clients(group, &nodes);
    st.event(what, "start", &["holder"]);
    // The next client waits for the lock; it should get it once the holder's lease or
    // session has expired on the servers (and, with a lock-delay, that long after).
    let wait = ttl * 4 + Duration::from_secs(10) + timing.lock_delay;
    let next_turn = async {
        match next.acquire(&st.key, &opts(ttl, wait).with_lock_delay(timing.lock_delay)).await {
            Ok(l) => {
                st.use_and_release(&next, l).await;
                true
            }
            Err(e) => {
                st.note(format!("the next client never got the lock: {e}"));
                false
            }
        }
    };
    // The stalled holder comes back: a paused one writes once it runs again; a partitioned
    // one writes while still cut off, unaware its lease is gone.
    let resume = |sv: &mut dlbench_core::Section<'_>| {
        if stall == Stall::Pause {
            net.heal();
            st.event(what, "end", &["holder"]);
            sv.write_incremented();
        } else {
            sv.write_incremented();
            net.heal();
            st.event(what, "end", &["holder"]);
        }
        // Out of the section once its write is in: with a fixed stall the next client may
        // still be on its way, and a section left open would count as an overlap.
        sv.exit();
    };
    let got = match timing.stall_for {
        None => {
            let got = next_turn.await;
            resume(&mut sv);
            got
        }
        Some(d) => {
            let back = async {
                tokio::time::sleep(d).await;
                resume(&mut sv);
            };
            tokio::join!(next_turn, back).0
        }
    };
    holder.section(sv.record());
    drop(sv);
    match holder.release(lease).await {
        Err(LockError::NotHeld(_)) => st.note("the stalled holder's release found its lock gone"),
        Ok(()) if got => st.note("the stalled holder's release succeeded after another client held the lock"),
        other => st.note(format!("the stalled holder's release: {other:?}")),
    }
    holder.client.abandon().await;
    next.client.close().await;
    Ok(st.finish())
}

/// S2: the holder's write is delayed in flight past its release; the next holder writes;
/// the delayed write lands last.
pub async fn delayed_write(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let st = Stage::open(ctx, name, TTL, 2).await;
    let holder = st.actor(0, "holder", &ctx.backend).await?;
    let next = st.actor(1, "next", &ctx.backend).await?;
    let o = opts(TTL, Duration::from_secs(20));
    let lease = holder.acquire(&st.key, &o).await?;
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    // The write leaves now and arrives later; the holder, done as far as it knows, leaves
    // and releases.
    sv.exit();
    st.event("write-delay", "start", &["holder"]);
    holder.release(lease).await?;
    let l = next.acquire(&st.key, &o).await?;
    st.use_and_release(&next, l).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    sv.write_incremented();
    st.event("write-delay", "end", &["holder"]);
    holder.section(sv.record());
    drop(sv);
    holder.client.close().await;
    next.client.close().await;
    Ok(st.finish())
}

/// How S3 and S4 make one Redlock node forget the holder.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Forget {
    /// Its wall clock jumps past the TTL.
    ClockJump,
    /// It crashes and restarts empty at once.
    RestartNow,
    /// It crashes and restarts empty only after a TTL has passed.
    RestartAfterTtl,
}

/// S3 / S4 on Redlock: the holder has nodes {1,2,3}, the next client can reach {3,4,5};
/// node 3 forgets the holder's key; the next client's quorum {3,4,5} overlaps the holder's.
pub async fn redlock_forget(ctx: &Ctx, name: &str, how: Forget) -> anyhow::Result<Observed> {
    let ttl = Duration::from_secs(10);
    let st = Stage::open(ctx, name, ttl, 2).await;
    let net = ctx.net()?;
    let nodes = ctx.nodes();
    anyhow::ensure!(nodes.len() == 5, "redlock needs its five nodes");
    let (gh, hb) = ctx.dedicated().await?;
    let (gn, nb) = ctx.dedicated().await?;
    let holder = st.actor(0, "holder", &hb).await?;
    let next = st.actor(1, "next", &nb).await?;
    // The holder cannot reach nodes 4 and 5; the next client cannot reach 1 and 2.
    net.cut_clients(gh, &[nodes[3].index, nodes[4].index]);
    net.cut_clients(gn, &[nodes[0].index, nodes[1].index]);
    let split = ["holder|redlock-4,5", "next|redlock-1,2"];
    st.event("partition-clients", "start", &split);
    let lease = holder.acquire(&st.key, &opts(ttl, Duration::from_secs(20))).await?;
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    let n3 = nodes[2].clone();
    forget(&st, &n3, how, ttl).await?;
    // The next client tries while the holder still works; the holder stops using the lock
    // once its validity is nearly over, as a careful Redlock user does.
    let key = st.key.clone();
    let next_try = try_quorum(&next, &key, ttl);
    let until = lease.valid_until.checked_sub(Duration::from_millis(500)).unwrap_or(lease.valid_until);
    let holder_done = tokio::time::sleep_until(until.into());
    let restart_later = restart_after_ttl(ctx, &n3, how, ttl);
    tokio::pin!(next_try);
    let mut next_done = false;
    let mut holder_finished = false;
    let mut restarted = how != Forget::RestartAfterTtl;
    tokio::pin!(holder_done);
    tokio::pin!(restart_later);
    while !next_done || !holder_finished {
        tokio::select! {
            l = &mut next_try, if !next_done => {
                match l {
                    Some(l) => st.use_and_release(&next, l).await,
                    None => st.note("the next client never got a quorum"),
                }
                next_done = true;
            }
            _ = &mut holder_done, if !holder_finished => {
                sv.write_incremented();
                sv.exit();
                holder_finished = true;
            }
            _ = &mut restart_later, if !restarted => {
                restarted = true;
                st.event("kill", "end", &[&n3.name]);
            }
        }
    }
    if !restarted {
        restart_later.await;
        st.event("kill", "end", &[&n3.name]);
    }
    holder.section(sv.record());
    drop(sv);
    let _ = holder.release(lease).await;
    if let Some(f) = &n3.clock_file {
        clock::set_offset(f, 0)?;
        if how == Forget::ClockJump {
            st.event("clock", "end", &[&n3.name]);
        }
    }
    net.heal();
    st.event("partition-clients", "end", &split);
    holder.client.close().await;
    next.client.close().await;
    Ok(st.finish())
}

/// Node 3 forgets the holder: its clock jumps past the TTL, or it is killed (and, for
/// `RestartNow`, restarted at once).
async fn forget(st: &Stage<'_>, n3: &Node, how: Forget, ttl: Duration) -> anyhow::Result<()> {
    match how {
        Forget::ClockJump => {
            let f = n3.clock_file.as_ref().ok_or_else(|| anyhow::anyhow!("{} does not run under the clock shim", n3.name))?;
            clock::set_offset(f, ttl.as_millis() as i64 * 2)?;
            st.event("clock", "start", &[&n3.name]);
            tokio::time::sleep(Duration::from_millis(300)).await; // the shim re-reads every 50 ms
        }
        Forget::RestartNow | Forget::RestartAfterTtl => {
            n3.kill();
            st.event("kill", "start", &[&n3.name]);
            if how == Forget::RestartNow {
                n3.start()?;
                st.ctx.target.wait_healthy(st.ctx.kind).await?;
                st.event("kill", "end", &[&n3.name]);
            }
        }
    }
    Ok(())
}

/// The next client tries for a quorum, half a second at a time, for three TTLs.
async fn try_quorum(next: &Actor, key: &str, ttl: Duration) -> Option<Lease> {
    let deadline = Instant::now() + ttl * 3;
    loop {
        match next.acquire(key, &opts(ttl, Duration::from_millis(500))).await {
            Ok(l) => return Some(l),
            Err(_) if Instant::now() < deadline => continue,
            Err(_) => return None,
        }
    }
}

/// S4's delayed restart: node 3 starts again a TTL and a second after it was killed
/// (nothing to do for the other ways to forget).
async fn restart_after_ttl(ctx: &Ctx, n3: &Node, how: Forget, ttl: Duration) {
    if how == Forget::RestartAfterTtl {
        tokio::time::sleep(ttl + Duration::from_secs(1)).await;
        if n3.start().is_ok() {
            let _ = ctx.target.wait_healthy(ctx.kind).await;
        }
    }
}

/// S5 on Redis: the holder's SET (and fencing INCR) reach the primary but not its replica;
/// the primary dies; the replica is promoted and clients sent to it; the next client gets
/// the lock the holder still holds.
pub async fn failover(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let st = Stage::open(ctx, name, TTL * 3, 2).await;
    let net = ctx.net()?;
    let all = ctx.target.nodes_of(ctx.kind);
    let primary = all.iter().find(|n| !n.replica).cloned().ok_or_else(|| anyhow::anyhow!("no primary"))?;
    let replica = all.iter().find(|n| n.replica).cloned().ok_or_else(|| anyhow::anyhow!("redis has no replica"))?;
    let holder = st.actor(0, "holder", &ctx.backend).await?;
    let next = st.actor(1, "next", &ctx.backend).await?;
    // Replication lags: the replica's link to the primary is cut.
    net.cut_link(replica.index, primary.index);
    st.event("partition", "start", &[&replica.name, &primary.name]);
    let lease = holder.acquire(&st.key, &opts(TTL * 3, Duration::from_secs(10))).await?;
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    let nem = st.nemesis(name);
    let fault = nem.start(FaultSpec { kind: FaultKind::Failover, target: Targeting::Random }).await.map_err(anyhow::Error::msg)?;
    let mut got = false;
    for _ in 0..20 {
        match next.acquire(&st.key, &opts(TTL * 3, Duration::from_secs(2))).await {
            Ok(l) => {
                st.use_and_release(&next, l).await;
                got = true;
                break;
            }
            Err(e) if e.is_contention() => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    if !got {
        st.note("the next client did not get the lock on the promoted replica");
    }
    sv.write_incremented();
    sv.exit();
    holder.section(sv.record());
    drop(sv);
    let _ = holder.release(lease).await;
    net.heal();
    st.event("partition", "end", &[&replica.name, &primary.name]);
    nem.end(fault).await.map_err(anyhow::Error::msg)?;
    st.extend_events(nem.events());
    holder.client.close().await;
    next.client.close().await;
    Ok(st.finish())
}

/// S7: a client waiting in the queue loses its session; it must get an error, never the
/// lock, and leave nothing behind: the servers are read at the end for any claim left.
pub async fn expired_waiter(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let st = Stage::open(ctx, name, TTL, 3).await;
    let net = ctx.net()?;
    let (group, wb) = ctx.dedicated().await?;
    let holder = st.actor(0, "holder", &ctx.backend).await?;
    let waiter = st.actor(1, "waiter", &wb).await?;
    let lease = holder.acquire(&st.key, &opts(TTL, Duration::from_secs(10))).await?;
    let nodes: Vec<usize> = ctx.nodes().iter().map(|n| n.index).collect();
    let key = st.key.clone();
    let wait = async {
        let r = waiter.acquire(&key, &opts(TTL, Duration::from_secs(40))).await;
        if let Ok(l) = &r {
            let mut s = st.resource.enter_lease(0, l);
            s.read();
            s.write_incremented();
            s.exit();
            waiter.section(s.record());
        }
        r
    };
    let fault = async {
        tokio::time::sleep(Duration::from_millis(500)).await; // the waiter is queued
        net.cut_clients(group, &nodes);
        st.event("client-partition", "start", &["waiter"]);
        tokio::time::sleep(TTL * 2 + Duration::from_secs(1)).await;
        net.heal();
        st.event("client-partition", "end", &["waiter"]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (r, ()) = tokio::join!(wait, async {
        fault.await;
        let _ = holder.release(lease).await;
    });
    let acquired = r.is_ok();
    match &r {
        Ok(_) => st.note("the waiter was told it holds the lock after its session expired"),
        Err(e) => st.note(format!("the waiter's acquire failed: {e}")),
    }
    if let Ok(l) = r {
        let _ = waiter.release(l).await;
    }
    waiter.client.abandon().await;
    // Nothing of the expired waiter may block the next client.
    let fresh = st.actor(2, "fresh", &ctx.backend).await?;
    match fresh.acquire(&st.key, &opts(TTL, Duration::from_secs(15))).await {
        Ok(l) => {
            let _ = fresh.release(l).await;
        }
        Err(e) => st.note(format!("a fresh client could not take the lock afterwards: {e}")),
    }
    fresh.client.close().await;
    holder.client.close().await;
    // Every client is done: the servers must hold nothing for this lock. A closed session's
    // claims go at once; give the servers a moment to apply the deletes.
    let leftovers = leftover_claims(&*ctx.backend, &st.key, Duration::from_secs(5)).await;
    let mut o = st.finish();
    o.expired_waiter_acquired = Some(acquired);
    o.leftovers = Some(leftovers);
    Ok(o)
}

/// The claims still held for `key`, polled until none are left or `within` passes.
pub(super) async fn leftover_claims(b: &dyn Backend, key: &str, within: Duration) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + within;
    loop {
        match b.claims(key).await {
            Ok(v) if v.is_empty() || Instant::now() >= deadline => return Ok(v),
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(e) => return Err(e.to_string()),
        }
    }
}
