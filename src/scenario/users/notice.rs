//! U1: the lost-lock notice delay. How late a holder learns its lock is gone, cut off from
//! the servers or not extended.

use crate::faultlog::Mark;
use std::time::{Duration, Instant};

use dlbench_core::{Expiry, Lease};
use serde_json::json;
use tokio::sync::watch;

use super::{hit, signed_s, Log, Measurement};
use crate::scenario::actor::Actor;
use crate::scenario::stage::{opts, Ctx, TTL};
use crate::scenario::stage::Stage;
use crate::summary::scenario::Hit;

/// How the holder loses its lock in U1.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Loss {
    /// The holder, extending every third of its TTL as a watchdog does, is cut off from
    /// every server (bytes held, connections open).
    CutOff,
    /// The holder stops extending (busy, or its watchdog died) and the TTL runs out on the
    /// server; it is not cut off. TTL designs only: a session's keep-alive is not the
    /// holder's to stop.
    NotExtended,
}

impl Loss {
    fn case(self) -> &'static str {
        match self {
            Loss::CutOff => "cut off",
            Loss::NotExtended => "not extended",
        }
    }
}

/// The U1 cases on a backend.
pub fn losses(expiry: Expiry) -> Vec<Loss> {
    if expiry == Expiry::Ttl {
        vec![Loss::CutOff, Loss::NotExtended]
    } else {
        vec![Loss::CutOff]
    }
}

/// U1: from the server letting the lock go (another client is granted it) to the holder
/// learning it (its lost signal fires, or an extend fails); a holder told only by its
/// release (`not held`) was never told while it mattered.
pub async fn notice(ctx: &Ctx, loss: Loss) -> anyhow::Result<Measurement> {
    let name = format!("U1-{}", loss.case().replace(' ', "-"));
    let ttl = TTL;
    let st = Stage::open(ctx, &name, ttl, 2).await;
    let net = ctx.net()?;
    let (group, hb) = ctx.dedicated().await?;
    let holder = st.actor(0, "holder", &hb).await?;
    let next = st.actor(1, "next", &ctx.backend).await?;
    let log = Log::new();
    // Bounded: a server that never lets go (a lock on a connection the cut keeps open) ends
    // the measurement here.
    // Three TTLs and a request timeout: a TTL or session runs out within one and a bit,
    // and a hung extend gives up after its 5 s request timeout.
    let limit = ttl * 3 + Duration::from_secs(4);
    let mut lease = holder.acquire(&st.key, &opts(ttl, Duration::from_secs(10))).await?;
    log.at("holder acquired");
    if loss == Loss::CutOff {
        // A holder that extends, as a watchdog does, once before the cut.
        tokio::time::sleep(ttl / 3).await;
        let r = holder.client.extend(&mut lease, ttl).await;
        log.at(format!("holder extended: {}", r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())));
        let nodes: Vec<usize> = ctx.target.nodes_of(ctx.kind).iter().map(|n| n.index).collect();
        net.cut_clients(group, &nodes);
        st.event("client-partition", Mark::Start, &["holder"]);
    }
    let origin = Instant::now();
    log.at(if loss == Loss::CutOff { "holder cut off from every server" } else { "holder stops extending" });
    let (granted_tx, granted_rx) = tokio::sync::watch::channel(None::<Instant>);
    let (granted, told) = tokio::join!(
        next_granted(&next, &st.key, limit, granted_tx, &log),
        holder_told(&holder, &mut lease, loss == Loss::CutOff, origin + limit, granted_rx)
    );
    if let Some((t, how)) = &told {
        log.at_time(*t, format!("the holder was told, by {how}"));
    }
    let valid_until = lease.valid_until;
    if loss == Loss::CutOff {
        net.heal();
        st.event("client-partition", Mark::End, &["holder"]);
    }
    let release = match holder.release(lease).await {
        Ok(()) => "ok".to_string(),
        Err(e) => e.kind().to_string(),
    };
    log.at(format!("the holder released: {release}"));
    holder.client.abandon().await;
    next.client.close().await;
    drop(st);

    let from = if loss == Loss::CutOff { "the cut" } else { "the last extend" };
    let seen = Seen { granted, told, valid_until, release };
    let h = report(ctx, loss, origin, from, limit, &seen);
    let about = json!({ "ttl_s": ttl.as_secs_f64(), "limit_s": limit.as_secs_f64(), "extend_every_s": (ttl / 3).as_secs_f64(), "origin": from });
    Ok((h, log.evidence(about)))
}

/// The next client waits for the lock: its grant is when the server let it go (at the
/// latest; a watch or a 20 ms poll away from it). Tells `granted` when it is done.
async fn next_granted(next: &Actor, key: &str, limit: Duration, granted: watch::Sender<Option<Instant>>, log: &Log) -> Option<Instant> {
    let r = next.acquire(key, &opts(TTL, limit).with_retry_interval(Duration::from_millis(20))).await;
    let at = Instant::now();
    let got = match r {
        Ok(l) => {
            log.at_time(at, "the next client was granted the lock: the server let it go");
            let _ = next.release(l).await;
            Some(at)
        }
        Err(e) => {
            log.at(format!("the next client was not granted the lock: {e}"));
            None
        }
    };
    let _ = granted.send(Some(at));
    got
}

/// The holder, extending every third of the TTL or (not extending) working, until it is
/// told its lock is gone (when, and how), until `deadline`, or (not extending) until a second
/// after the next client is done.
async fn holder_told(holder: &Actor, lease: &mut Lease, extend: bool, deadline: Instant, mut granted: watch::Receiver<Option<Instant>>) -> Option<(Instant, String)> {
    let ttl = TTL;
    let mut signal = lease.lost.clone();
    loop {
        let tick = async {
            tokio::time::sleep(ttl / 3).await;
            if extend {
                Some(holder.client.extend(lease, ttl).await)
            } else {
                None
            }
        };
        // Not extending, the holder works on until a second after the next client got
        // in (or gave up), then releases.
        let work_done = async {
            if extend {
                std::future::pending::<()>().await
            }
            let _ = granted.wait_for(|g| g.is_some()).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        tokio::select! {
            why = signal.lost() => return Some((Instant::now(), format!("its lost signal ({why})"))),
            r = tick => {
                if let Some(Err(e)) = r {
                    return Some((Instant::now(), format!("a failed extend ({})", e.kind())));
                }
            }
            _ = work_done => return None,
            _ = tokio::time::sleep_until(deadline.into()) => return None,
        }
    }
}

/// What the measurement saw, for its figure.
struct Seen {
    /// When the next client was granted the lock.
    granted: Option<Instant>,
    /// When and how the holder was told.
    told: Option<(Instant, String)>,
    valid_until: Instant,
    /// How the holder's release ended.
    release: String,
}

/// The hit: the server's letting go and the holder's being told, in seconds from `origin`
/// (the cut, or the last extend: `from`).
fn report(ctx: &Ctx, loss: Loss, origin: Instant, from: &str, limit: Duration, seen: &Seen) -> Hit {
    let Seen { granted, told, valid_until, release } = seen;
    let mut h = hit(ctx, "U1", loss.case());
    let let_go = granted.map(|g| signed_s(origin, g));
    let told_s = told.as_ref().map(|(t, _)| signed_s(origin, *t));
    let validity = signed_s(origin, *valid_until);
    if let Some(g) = let_go {
        h.values.insert("let_go_s".into(), g);
        h.values.insert("validity_vs_let_go_s".into(), validity - g);
    }
    if let Some(t) = told_s {
        h.values.insert("told_s".into(), t);
    }
    h.values.insert("never_told".into(), if told.is_none() { 1.0 } else { 0.0 });
    h.figure = match (let_go, told) {
        (Some(g), Some((_, how))) => {
            let d = told_s.unwrap_or(0.0) - g;
            h.values.insert("delay_s".into(), d);
            let when = if d < 0.0 { format!("{:.2} s before", -d) } else { format!("{d:.2} s after") };
            format!("told {when} the server let go ({g:.2} s after {from}), by {how}")
        }
        (Some(g), None) => format!("never told before its release ({release}); the server let go {g:.2} s after {from}"),
        (None, Some((_, how))) => format!("the server kept the lock {:.0} s (the cut holds its connection open); told after {:.2} s, by {how}", limit.as_secs_f64(), told_s.unwrap_or(0.0)),
        (None, None) => format!("the server kept the lock {:.0} s and the holder was never told", limit.as_secs_f64()),
    };
    if let Some(g) = let_go {
        let v = validity - g;
        let when = if v < 0.0 { format!("{:.2} s before it", -v) } else { format!("{v:.2} s after it") };
        h.figure.push_str(&format!("; its own validity ended {when}"));
    }
    // A figure is evidence either way; the measurement fails only when nothing happened
    // that it could measure from.
    h.ok = let_go.is_some() || told.is_some();
    if !h.ok {
        h.notes.push("neither the server let go nor the holder was told within the limit: nothing measured".into());
    }
    h
}
