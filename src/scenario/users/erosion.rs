//! U4: Redlock's quorum eroded by node restarts, with and without fsync and the delay.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{hit, signed_s, Log, Measurement};
use crate::scenario::stage::{opts, Ctx, TTL};

/// How the Redlock nodes restart in U4.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Erosion {
    /// No persistence, restarted at once: the node comes back empty.
    Empty,
    /// No persistence, kept down a TTL before it restarts (the Redlock page's delayed restart).
    Delayed,
    /// `appendonly yes`, `appendfsync always`, restarted at once: the key survives.
    Fsync,
}

pub const EROSIONS: [(&str, Erosion); 3] = [
    ("no persistence, restart at once", Erosion::Empty),
    ("no persistence, restart after a TTL", Erosion::Delayed),
    ("appendfsync always, restart at once", Erosion::Fsync),
];

/// U4 (the Redlock page's "Performance, crash recovery and fsync"; Kleppmann 2016): a holder
/// keeps a lock on all five nodes; three nodes restart one after another within its TTL;
/// after each restart another client tries. A grant while the holder's validity lasts is a
/// double grant. Reported per 100 restarts.
pub async fn erosion(ctx: &Ctx, case: &str, how: Erosion) -> anyhow::Result<Measurement> {
    let ttl = TTL;
    let nodes: Vec<_> = ctx.target.nodes_of(ctx.kind).into_iter().filter(|n| !n.replica).collect();
    anyhow::ensure!(nodes.len() == 5, "redlock needs its five nodes");
    let log = Log::new();
    const FSYNC: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];
    if how == Erosion::Fsync {
        restart_all(ctx, FSYNC).await?;
        log.at("every node restarted with appendonly yes, appendfsync always");
    }
    let rounds = if how == Erosion::Delayed { 4 } else { 10 };
    let (mut restarts, mut doubles, mut contender_grants) = (0u32, 0u32, 0u32);
    for round in 0..rounds {
        // A fresh holder each round: its connections to the restarted nodes are gone.
        let holder = ctx.backend.client().await?;
        let key = ctx.key(&format!("U4-{}-{round}", case.len()));
        let lease = holder.acquire(&key, &opts(ttl, Duration::from_secs(5))).await?;
        log.at(format!("round {round}: the holder took the lock"));
        let mut down = Vec::new();
        for n in nodes.iter().take(3) {
            n.kill();
            restarts += 1;
            if how == Erosion::Delayed {
                down.push(n.clone());
                log.at(format!("round {round}: {} killed, kept down", n.name));
            } else {
                n.start()?;
                ctx.target.wait_healthy(ctx.kind).await?;
                log.at(format!("round {round}: {} killed and restarted", n.name));
            }
            if let Some(double) = contend(ctx, &key, lease.valid_until, round, &log).await {
                contender_grants += 1;
                if double {
                    doubles += 1;
                }
            }
        }
        if !down.is_empty() {
            // The delayed restart: a TTL after the crash, when the key has expired anyway.
            tokio::time::sleep(ttl + Duration::from_millis(200)).await;
            for n in &down {
                n.start()?;
            }
            ctx.target.wait_healthy(ctx.kind).await?;
            log.at(format!("round {round}: the killed nodes restarted a TTL later"));
        }
        let r = holder.release(lease).await;
        log.at(format!("round {round}: the holder released: {}", r.map_or_else(|e| e.to_string(), |_| "ok".into())));
        holder.close().await;
    }
    if how == Erosion::Fsync {
        restart_all(ctx, &[]).await?;
        log.at("every node restarted as before, without persistence");
    }
    let mut h = hit(ctx, "U4", case);
    let per100 = doubles as f64 * 100.0 / restarts.max(1) as f64;
    h.values.insert("restarts".into(), restarts as f64);
    h.values.insert("double_grants".into(), doubles as f64);
    h.values.insert("double_grants_per_100_restarts".into(), per100);
    h.values.insert("contender_grants".into(), contender_grants as f64);
    h.figure = format!("{doubles} double grant(s) in {restarts} restarts ({per100:.0} per 100)");
    let expect_doubles = how == Erosion::Empty;
    h.expected = Some(if expect_doubles { "double grants".into() } else { "no double grant".into() });
    h.ok = restarts > 0 && (doubles > 0) == expect_doubles;
    let about = json!({ "ttl_s": ttl.as_secs_f64(), "rounds": rounds, "restarted_per_round": 3, "nodes": 5 });
    Ok((h, log.evidence(about)))
}

/// Restart every node with `args` (kill, start) and wait until they are healthy.
async fn restart_all(ctx: &Ctx, args: &'static [&'static str]) -> anyhow::Result<()> {
    for n in ctx.target.nodes_of(ctx.kind) {
        n.set_extra_args(args);
        n.kill();
        n.start()?;
    }
    ctx.target.wait_healthy(ctx.kind).await?;
    Ok(())
}

/// Another client tries for `key` once, without waiting; `Some(double)` when it was granted
/// it, a double grant if the holder's validity (`valid_until`) had not ended.
async fn contend(ctx: &Ctx, key: &str, valid_until: Instant, round: i32, log: &Log) -> Option<bool> {
    // A fresh client each try: no connection of it saw the node before the restart.
    let contender = match ctx.backend.client().await {
        Ok(c) => c,
        Err(e) => {
            log.at(format!("round {round}: another client could not connect: {e}"));
            return None;
        }
    };
    let r = contender.acquire(key, &opts(TTL, Duration::ZERO)).await;
    let now = Instant::now();
    let mut granted = None;
    if let Ok(l) = r {
        let double = now < valid_until;
        log.at(format!(
            "round {round}: another client was granted the lock{}",
            if double { format!(" with {:.2} s of the holder's validity left: a double grant", signed_s(now, valid_until)) } else { " after the holder's validity".into() }
        ));
        let _ = contender.release(l).await;
        granted = Some(double);
    }
    contender.close().await;
    granted
}
