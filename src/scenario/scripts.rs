//! The choreographed scenarios (S1-S7): a holder, a next client, and one fault placed
//! exactly where it hurts, with every step in the history.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, LockError, Resource, ResourceStats};

use super::actor::Actor;
use crate::connect::{self, Timeouts};
use crate::history::{HistoryWriter, Meta, Record};
use crate::kind::BackendKind;
use crate::nemesis::{clock, FaultKind, FaultSpec, Nemesis, Targeting};
use crate::stats::Recorder;
use crate::target::local::{LocalTarget, Node};

/// What a script measured.
pub struct Observed {
    pub resource: ResourceStats,
    pub recorder: Arc<Recorder>,
    pub elapsed: Duration,
    /// S7: whether the waiter whose session expired was ever told "acquired".
    pub expired_waiter_acquired: Option<bool>,
    pub notes: Vec<String>,
    pub nemesis: Vec<crate::nemesis::NemesisEvent>,
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

    /// Open a history segment for this script.
    pub async fn segment(&self, name: &str, key: &str, ttl: Duration) {
        self.history.sync().await;
        self.history.record(&Record::Meta(Meta {
            backend: self.kind.name().into(),
            workload: name.into(),
            keys: vec![key.into()],
            ttl_ms: ttl.as_millis() as u64,
            fencing_tokens: self.backend.capabilities().fencing,
            started_at: crate::results::now_rfc3339(),
        }));
    }

    pub fn key(&self, name: &str) -> String {
        format!("dlbench-{}-{name}-{}", self.run_id, self.kind)
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.target.nodes_of(self.kind).into_iter().filter(|n| !n.replica).collect()
    }

    fn nemesis(&self, name: &str, epoch: Instant) -> Nemesis {
        Nemesis::new(self.target.clone(), self.kind, name, epoch, Some(self.history.clone()))
    }

    fn net(&self) -> anyhow::Result<&Arc<crate::nemesis::net::Net>> {
        self.target.net().ok_or_else(|| anyhow::anyhow!("scenarios need the target's proxies"))
    }
}

fn opts(ttl: Duration, wait: Duration) -> AcquireOptions {
    AcquireOptions::default().with_ttl(ttl).with_wait(wait).with_retry_interval(Duration::from_millis(20))
}

/// Record a fault the script applies by hand (not through the nemesis).
fn event(h: &HistoryWriter, epoch: Instant, f: &str, phase: &str, targets: &[&str]) -> crate::nemesis::NemesisEvent {
    let ns = epoch.elapsed().as_nanos() as u64;
    h.record(&Record::Nemesis { f: f.into(), phase: phase.into(), targets: targets.iter().map(|t| t.to_string()).collect(), ns, detail: String::new() });
    crate::nemesis::NemesisEvent {
        backend: String::new(),
        workload: String::new(),
        f: f.into(),
        phase: phase.into(),
        targets: targets.iter().map(|t| t.to_string()).collect(),
        at_ms: ns / 1_000_000,
        detail: String::new(),
    }
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

/// S1 / S6: the holder stalls inside its critical section past its TTL; the next client
/// gets the lock; the stalled holder then writes with its old token.
pub async fn stalled_holder(ctx: &Ctx, name: &str, stall: Stall) -> anyhow::Result<Observed> {
    let started = Instant::now();
    let key = ctx.key(name);
    let resource = Resource::new(1);
    let recorder = Arc::new(Recorder::new(2));
    ctx.segment(name, &key, TTL).await;
    let epoch = resource.epoch();
    let net = ctx.net()?;
    let (group, vb) = ctx.dedicated().await?;
    let holder = Actor::new(0, "holder", &vb, &ctx.history, &resource, &recorder).await?;
    let next = Actor::new(1, "next", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let mut notes = Vec::new();
    let mut events = Vec::new();

    let lease = holder.acquire(&key, &opts(TTL, Duration::from_secs(20))).await?;
    let mut sv = resource.enter(0, lease.token);
    sv.read();
    let what = if stall == Stall::Pause { "client-pause" } else { "client-partition" };
    let nodes: Vec<usize> = ctx.nodes().iter().map(|n| n.index).collect();
    net.cut_clients(group, &nodes);
    events.push(event(&ctx.history, epoch, what, "start", &["holder"]));
    // The next client waits for the lock; it should get it once the holder's lease or
    // session has expired on the servers.
    let wait = TTL * 4 + Duration::from_secs(10);
    let got = match next.acquire(&key, &opts(TTL, wait)).await {
        Ok(l) => {
            let mut sn = resource.enter(0, l.token);
            sn.read();
            sn.write_incremented();
            sn.exit();
            next.section(sn.record());
            let _ = next.release(l).await;
            true
        }
        Err(e) => {
            notes.push(format!("the next client never got the lock: {e}"));
            false
        }
    };
    if stall == Stall::Pause {
        net.heal();
        events.push(event(&ctx.history, epoch, what, "end", &["holder"]));
        sv.write_incremented();
    } else {
        sv.write_incremented();
        net.heal();
        events.push(event(&ctx.history, epoch, what, "end", &["holder"]));
    }
    sv.exit();
    holder.section(sv.record());
    match holder.release(lease).await {
        Err(LockError::NotHeld(_)) => notes.push("the stalled holder's release found its lock gone".into()),
        Ok(()) if got => notes.push("the stalled holder's release succeeded after another client held the lock".into()),
        other => notes.push(format!("the stalled holder's release: {other:?}")),
    }
    holder.client.abandon().await;
    next.client.close().await;
    Ok(Observed { resource: resource.stats(), recorder, elapsed: started.elapsed(), expired_waiter_acquired: None, notes, nemesis: events })
}

/// S2: the holder's write is delayed in flight past its release; the next holder writes;
/// the delayed write lands last.
pub async fn delayed_write(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let started = Instant::now();
    let key = ctx.key(name);
    let resource = Resource::new(1);
    let recorder = Arc::new(Recorder::new(2));
    ctx.segment(name, &key, TTL).await;
    let epoch = resource.epoch();
    let holder = Actor::new(0, "holder", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let next = Actor::new(1, "next", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let o = opts(TTL, Duration::from_secs(20));
    let lease = holder.acquire(&key, &o).await?;
    let mut sv = resource.enter(0, lease.token);
    sv.read();
    // The write leaves now and arrives later; the holder, done as far as it knows, leaves
    // and releases.
    sv.exit();
    let mut events = vec![event(&ctx.history, epoch, "write-delay", "start", &["holder"])];
    holder.release(lease).await?;
    let l = next.acquire(&key, &o).await?;
    let mut sn = resource.enter(0, l.token);
    sn.read();
    sn.write_incremented();
    sn.exit();
    next.section(sn.record());
    next.release(l).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    sv.write_incremented();
    events.push(event(&ctx.history, epoch, "write-delay", "end", &["holder"]));
    holder.section(sv.record());
    holder.client.close().await;
    next.client.close().await;
    Ok(Observed { resource: resource.stats(), recorder, elapsed: started.elapsed(), expired_waiter_acquired: None, notes: vec![], nemesis: events })
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
    let started = Instant::now();
    let ttl = Duration::from_secs(10);
    let key = ctx.key(name);
    let resource = Resource::new(1);
    let recorder = Arc::new(Recorder::new(2));
    ctx.segment(name, &key, ttl).await;
    let epoch = resource.epoch();
    let net = ctx.net()?;
    let nodes = ctx.nodes();
    anyhow::ensure!(nodes.len() == 5, "redlock needs its five nodes");
    let (gh, hb) = ctx.dedicated().await?;
    let (gn, nb) = ctx.dedicated().await?;
    let holder = Actor::new(0, "holder", &hb, &ctx.history, &resource, &recorder).await?;
    let next = Actor::new(1, "next", &nb, &ctx.history, &resource, &recorder).await?;
    let mut notes = Vec::new();
    let mut events = Vec::new();
    // The holder cannot reach nodes 4 and 5; the next client cannot reach 1 and 2.
    net.cut_clients(gh, &[nodes[3].index, nodes[4].index]);
    net.cut_clients(gn, &[nodes[0].index, nodes[1].index]);
    events.push(event(&ctx.history, epoch, "partition-clients", "start", &["holder|redlock-4,5", "next|redlock-1,2"]));
    let lease = holder.acquire(&key, &opts(ttl, Duration::from_secs(20))).await?;
    let mut sv = resource.enter(0, lease.token);
    sv.read();
    let n3 = nodes[2].clone();
    match how {
        Forget::ClockJump => {
            let f = n3.clock_file.as_ref().ok_or_else(|| anyhow::anyhow!("{} does not run under the clock shim", n3.name))?;
            clock::set_offset(f, ttl.as_millis() as i64 * 2)?;
            events.push(event(&ctx.history, epoch, "clock", "start", &[&n3.name]));
            tokio::time::sleep(Duration::from_millis(300)).await; // the shim re-reads every 50 ms
        }
        Forget::RestartNow | Forget::RestartAfterTtl => {
            n3.kill();
            events.push(event(&ctx.history, epoch, "kill", "start", &[&n3.name]));
            if how == Forget::RestartNow {
                n3.start()?;
                ctx.target.wait_healthy(ctx.kind).await?;
                events.push(event(&ctx.history, epoch, "kill", "end", &[&n3.name]));
            }
        }
    }
    // The next client tries while the holder still works; the holder stops using the lock
    // once its validity is nearly over, as a careful Redlock user does.
    let next_try = async {
        let deadline = Instant::now() + ttl * 3;
        loop {
            match next.acquire(&key, &opts(ttl, Duration::from_millis(500))).await {
                Ok(l) => return Some(l),
                Err(_) if Instant::now() < deadline => continue,
                Err(_) => return None,
            }
        }
    };
    let until = lease.valid_until.checked_sub(Duration::from_millis(500)).unwrap_or(lease.valid_until);
    let holder_done = tokio::time::sleep_until(until.into());
    let restart_later = async {
        if how == Forget::RestartAfterTtl {
            tokio::time::sleep(ttl + Duration::from_secs(1)).await;
            if n3.start().is_ok() {
                let _ = ctx.target.wait_healthy(ctx.kind).await;
            }
        }
    };
    tokio::pin!(next_try);
    let mut next_lease = None;
    let mut holder_finished = false;
    let mut restarted = how != Forget::RestartAfterTtl;
    tokio::pin!(holder_done);
    tokio::pin!(restart_later);
    while next_lease.is_none() || !holder_finished {
        tokio::select! {
            l = &mut next_try, if next_lease.is_none() => {
                match l {
                    Some(l) => {
                        let mut sn = resource.enter(0, l.token);
                        sn.read();
                        sn.write_incremented();
                        sn.exit();
                        next.section(sn.record());
                        let _ = next.release(l).await;
                    }
                    None => notes.push("the next client never got a quorum".into()),
                }
                next_lease = Some(());
            }
            _ = &mut holder_done, if !holder_finished => {
                sv.write_incremented();
                sv.exit();
                holder_finished = true;
            }
            _ = &mut restart_later, if !restarted => {
                restarted = true;
                events.push(event(&ctx.history, epoch, "kill", "end", &[&n3.name]));
            }
        }
    }
    if !restarted {
        restart_later.await;
        events.push(event(&ctx.history, epoch, "kill", "end", &[&n3.name]));
    }
    holder.section(sv.record());
    let _ = holder.release(lease).await;
    if let Some(f) = &n3.clock_file {
        clock::set_offset(f, 0)?;
        if how == Forget::ClockJump {
            events.push(event(&ctx.history, epoch, "clock", "end", &[&n3.name]));
        }
    }
    net.heal();
    events.push(event(&ctx.history, epoch, "partition-clients", "end", &["holder|redlock-4,5", "next|redlock-1,2"]));
    holder.client.close().await;
    next.client.close().await;
    Ok(Observed { resource: resource.stats(), recorder, elapsed: started.elapsed(), expired_waiter_acquired: None, notes, nemesis: events })
}

/// S5 on Redis: the holder's SET (and fencing INCR) reach the primary but not its replica;
/// the primary dies; the replica is promoted and clients sent to it; the next client gets
/// the lock the holder still holds.
pub async fn failover(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let started = Instant::now();
    let key = ctx.key(name);
    let resource = Resource::new(1);
    let recorder = Arc::new(Recorder::new(2));
    ctx.segment(name, &key, TTL * 3).await;
    let epoch = resource.epoch();
    let net = ctx.net()?;
    let all = ctx.target.nodes_of(ctx.kind);
    let primary = all.iter().find(|n| !n.replica).cloned().ok_or_else(|| anyhow::anyhow!("no primary"))?;
    let replica = all.iter().find(|n| n.replica).cloned().ok_or_else(|| anyhow::anyhow!("redis has no replica"))?;
    let holder = Actor::new(0, "holder", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let next = Actor::new(1, "next", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let mut events = Vec::new();
    let mut notes = Vec::new();
    // Replication lags: the replica's link to the primary is cut.
    net.cut_link(replica.index, primary.index);
    events.push(event(&ctx.history, epoch, "partition", "start", &[&replica.name, &primary.name]));
    let lease = holder.acquire(&key, &opts(TTL * 3, Duration::from_secs(10))).await?;
    let mut sv = resource.enter(0, lease.token);
    sv.read();
    let nem = ctx.nemesis(name, epoch);
    let fault = nem.start(FaultSpec { kind: FaultKind::Failover, target: Targeting::Random }).await.map_err(anyhow::Error::msg)?;
    let mut got = false;
    for _ in 0..20 {
        match next.acquire(&key, &opts(TTL * 3, Duration::from_secs(2))).await {
            Ok(l) => {
                let mut sn = resource.enter(0, l.token);
                sn.read();
                sn.write_incremented();
                sn.exit();
                next.section(sn.record());
                let _ = next.release(l).await;
                got = true;
                break;
            }
            Err(e) if e.is_contention() => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    if !got {
        notes.push("the next client did not get the lock on the promoted replica".into());
    }
    sv.write_incremented();
    sv.exit();
    holder.section(sv.record());
    let _ = holder.release(lease).await;
    net.heal();
    events.push(event(&ctx.history, epoch, "partition", "end", &[&replica.name, &primary.name]));
    nem.end(fault).await.map_err(anyhow::Error::msg)?;
    events.extend(nem.events());
    holder.client.close().await;
    next.client.close().await;
    Ok(Observed { resource: resource.stats(), recorder, elapsed: started.elapsed(), expired_waiter_acquired: None, notes, nemesis: events })
}

/// S7: a client waiting in the queue loses its session; it must get an error, never the
/// lock, and leave nothing behind that blocks others.
pub async fn expired_waiter(ctx: &Ctx, name: &str) -> anyhow::Result<Observed> {
    let started = Instant::now();
    let key = ctx.key(name);
    let resource = Resource::new(1);
    let recorder = Arc::new(Recorder::new(3));
    ctx.segment(name, &key, TTL).await;
    let epoch = resource.epoch();
    let net = ctx.net()?;
    let (group, wb) = ctx.dedicated().await?;
    let holder = Actor::new(0, "holder", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    let waiter = Actor::new(1, "waiter", &wb, &ctx.history, &resource, &recorder).await?;
    let mut notes = Vec::new();
    let mut events = Vec::new();
    let lease = holder.acquire(&key, &opts(TTL, Duration::from_secs(10))).await?;
    let nodes: Vec<usize> = ctx.nodes().iter().map(|n| n.index).collect();
    let wait = async {
        let r = waiter.acquire(&key, &opts(TTL, Duration::from_secs(40))).await;
        if let Ok(l) = &r {
            let mut s = resource.enter(0, l.token);
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
        let e1 = event(&ctx.history, epoch, "client-partition", "start", &["waiter"]);
        tokio::time::sleep(TTL * 2 + Duration::from_secs(1)).await;
        net.heal();
        let e2 = event(&ctx.history, epoch, "client-partition", "end", &["waiter"]);
        tokio::time::sleep(Duration::from_millis(500)).await;
        (e1, e2)
    };
    let (r, (e1, e2)) = tokio::join!(wait, async {
        let evs = fault.await;
        let _ = holder.release(lease).await;
        evs
    });
    events.push(e1);
    events.push(e2);
    let acquired = r.is_ok();
    match &r {
        Ok(_) => notes.push("the waiter was told it holds the lock after its session expired".into()),
        Err(e) => notes.push(format!("the waiter's acquire failed: {e}")),
    }
    if let Ok(l) = r {
        let _ = waiter.release(l).await;
    }
    waiter.client.abandon().await;
    // Nothing of the expired waiter may block the next client.
    let fresh = Actor::new(2, "fresh", &ctx.backend, &ctx.history, &resource, &recorder).await?;
    match fresh.acquire(&key, &opts(TTL, Duration::from_secs(15))).await {
        Ok(l) => {
            let _ = fresh.release(l).await;
        }
        Err(e) => notes.push(format!("a fresh client could not take the lock afterwards: {e}")),
    }
    fresh.client.close().await;
    holder.client.close().await;
    Ok(Observed {
        resource: resource.stats(),
        recorder,
        elapsed: started.elapsed(),
        expired_waiter_acquired: Some(acquired),
        notes,
        nemesis: events,
    })
}
