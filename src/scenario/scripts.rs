//! The choreographed scenarios (S1-S7, J1): a holder, a next client, and one fault placed
//! exactly where it hurts, with every step in the history. Each script is only its
//! choreography; the [`Stage`] it plays on (key, resource, recorder, history segment, epoch,
//! fault events, notes) is shared.

use std::time::{Duration, Instant};

use dlbench_core::{Backend, Lease, LockError};

use super::actor::Actor;
use super::stage::{opts, Ctx, Observed, Stage, TTL};
use crate::faultlog::Mark;
use crate::nemesis::{clock, FaultKind, FaultSpec, Targeting};
use crate::cluster::local::Node;

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
    st.event(what, Mark::Start, &["holder"]);
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
            st.event(what, Mark::End, &["holder"]);
            sv.write_incremented();
        } else {
            sv.write_incremented();
            net.heal();
            st.event(what, Mark::End, &["holder"]);
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
    st.event("write-delay", Mark::Start, &["holder"]);
    holder.release(lease).await?;
    let l = next.acquire(&st.key, &o).await?;
    st.use_and_release(&next, l).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    sv.write_incremented();
    st.event("write-delay", Mark::End, &["holder"]);
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
    st.event("partition-clients", Mark::Start, &split);
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
                st.event("kill", Mark::End, &[&n3.name]);
            }
        }
    }
    if !restarted {
        restart_later.await;
        st.event("kill", Mark::End, &[&n3.name]);
    }
    holder.section(sv.record());
    drop(sv);
    let _ = holder.release(lease).await;
    if let Some(f) = &n3.clock_file {
        clock::set_offset(f, 0)?;
        if how == Forget::ClockJump {
            st.event("clock", Mark::End, &[&n3.name]);
        }
    }
    net.heal();
    st.event("partition-clients", Mark::End, &split);
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
            st.event("clock", Mark::Start, &[&n3.name]);
            tokio::time::sleep(Duration::from_millis(300)).await; // the shim re-reads every 50 ms
        }
        Forget::RestartNow | Forget::RestartAfterTtl => {
            n3.kill();
            st.event("kill", Mark::Start, &[&n3.name]);
            if how == Forget::RestartNow {
                n3.start()?;
                st.ctx.target.wait_healthy(st.ctx.kind).await?;
                st.event("kill", Mark::End, &[&n3.name]);
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
    st.event("partition", Mark::Start, &[&replica.name, &primary.name]);
    let lease = holder.acquire(&st.key, &opts(TTL * 3, Duration::from_secs(10))).await?;
    let mut sv = st.resource.enter_lease(0, &lease);
    sv.read();
    let nem = st.nemesis(name);
    let fault = nem.start(FaultSpec { kind: FaultKind::Failover, target: Targeting::Random }).await.map_err(|(e, _)| anyhow::Error::msg(e))?;
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
    st.event("partition", Mark::End, &[&replica.name, &primary.name]);
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
        st.event("client-partition", Mark::Start, &["waiter"]);
        tokio::time::sleep(TTL * 2 + Duration::from_secs(1)).await;
        net.heal();
        st.event("client-partition", Mark::End, &["waiter"]);
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
