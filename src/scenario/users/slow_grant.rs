//! U5: grants that reach a slow client with no validity left.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{hit, signed_s, Log, Measurement};
use crate::scenario::stage::{opts, Ctx, TTL};

/// The U5 cases: (case, one-way delay on the waiter's links). TTL 3 s: a round trip of a
/// third of it, and one longer than it.
pub const SLOW_REPLIES: [(&str, Duration); 2] =
    [("one-way 0.5 s", Duration::from_millis(500)), ("one-way 1.6 s", Duration::from_millis(1600))];
const U5_TRIALS: usize = 2;

/// U5 (etcd #9921, #11456): a waiter whose every byte to and from the servers is delayed
/// waits for a held lock; when its acquire returns, how much of its validity is left (the
/// lease's `valid_until`, which each design computes from what it knows)? A grant with
/// none left is a lock the client may use after the servers have let it go; refusing it is
/// the safe answer (Redlock's validity check).
pub async fn slow_grant(ctx: &Ctx, case: &str, delay: Duration) -> anyhow::Result<Measurement> {
    let ttl = TTL;
    let net = ctx.net()?;
    let log = Log::new();
    let (group, wb) = ctx.dedicated().await?;
    let waiter = wb.client().await?;
    let holder = ctx.backend.client().await?;
    // The waiter's session and connections are set up at full speed; from now on its
    // every byte takes `delay` each way.
    net.slow_clients(group, delay);
    log.at(format!("the waiter's links delayed {} ms each way", delay.as_millis()));
    let mut h = hit(ctx, "U5", case);
    let (mut granted, mut none_left, mut refused) = (0u32, 0u32, Vec::new());
    let mut left = Vec::new();
    for trial in 0..U5_TRIALS {
        let key = ctx.key(&format!("U5-{}-{trial}", delay.as_millis()));
        let held = holder.acquire(&key, &opts(ttl, Duration::from_secs(10))).await?;
        log.at(format!("trial {trial}: the holder took the lock"));
        let k = key.clone();
        let w = &waiter;
        let wait = async move {
            let invoked = Instant::now();
            // Long enough for several round trips at the delay.
            let r = w.acquire(&k, &opts(ttl, delay * 8 + Duration::from_secs(4))).await;
            (invoked, r, Instant::now())
        };
        let hold = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let r = holder.release(held).await;
            log.at(format!("trial {trial}: the holder released: {}", r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())));
        };
        let ((invoked, r, returned), ()) = tokio::join!(wait, hold);
        match r {
            Ok(l) => {
                granted += 1;
                let rest = signed_s(returned, l.valid_until);
                left.push(rest);
                if rest <= 0.0 {
                    none_left += 1;
                }
                log.at_time(returned, format!(
                    "trial {trial}: the waiter was granted {:.2} s after it asked, with {rest:+.2} s of validity left (TTL {:.0} s)",
                    signed_s(invoked, returned),
                    ttl.as_secs_f64()
                ));
                let r = waiter.release(l).await;
                log.at(format!("trial {trial}: the waiter released: {}", r.map_or_else(|e| e.to_string(), |_| "ok".into())));
            }
            Err(e) => {
                log.at_time(returned, format!("trial {trial}: the waiter's acquire failed after {:.2} s: {e}", signed_s(invoked, returned)));
                refused.push(e.kind().to_string());
            }
        }
    }
    net.heal();
    log.at("links healed");
    waiter.abandon().await;
    holder.close().await;
    h.values.insert("granted".into(), granted as f64);
    h.values.insert("granted_with_none_left".into(), none_left as f64);
    h.values.insert("refused".into(), refused.len() as f64);
    if let Some(min) = left.iter().cloned().reduce(f64::min) {
        h.values.insert("least_validity_left_s".into(), min);
    }
    let lefts = left.iter().map(|x| format!("{x:+.2}")).collect::<Vec<_>>().join(", ");
    h.figure = match (granted, refused.is_empty()) {
        (0, _) => format!("refused every time ({})", refused.join(", ")),
        (_, true) => format!("{granted} granted, {none_left} with no validity left (left: {lefts} s)"),
        (_, false) => format!("{granted} granted, {none_left} with no validity left (left: {lefts} s); {} refused ({})", refused.len(), refused.join(", ")),
    };
    h.ok = true;
    let about = json!({ "ttl_s": ttl.as_secs_f64(), "one_way_delay_s": delay.as_secs_f64(), "trials": U5_TRIALS, "holder_holds_s": 1.0 });
    Ok((h, log.evidence(about)))
}
