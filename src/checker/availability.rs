//! Availability: did the lock keep granting during the faults that took effect on its
//! servers, and did it come back after each heal? Read from the windows
//! ([`super::windows`]), each fault in its own.
//!
//! Judged against the same workload without faults, so that every hold time reads the same
//! way: `ratio` is the grant rate inside the counted fault windows (server side, seen to take
//! effect, not a scenario's choreography) over the rate in the quiet time (from the first
//! grant, outside every fault that may have acted and the recovery after it). With holds of
//! seconds (long-hold) a second without a grant is normal; a rate that falls is not.
//! `recovery_ms` is the longest time from a counted fault's heal to the first grant after it,
//! wherever that grant came (past the next fault's start or into the drain);
//! `longest_gap_ms` the longest stretch without a grant after the first one.
//!
//! `valid` when something was granted after every counted heal; `invalid` when nothing was
//! after a heal although the segment went on past the room the servers may need (the granted
//! TTL and their election or restart time: [`Recovery`]); `unknown` when the segment ended
//! (or was interrupted, or the next fault came) too soon after a heal to tell, on a fault
//! never healed, and on a segment with no fault that granted nothing (no recovery is asked of
//! it). Faults the nemesis could not apply are listed as skipped.

use super::item::Context;
use super::windows::{Recovery, WindowsSeen};
use super::{CheckResult, Validity};

pub fn result(seen: &WindowsSeen, ctx: &Context) -> CheckResult {
    if ctx.ops == 0 && ctx.sections == 0 {
        return CheckResult::new(crate::checker::CheckerId::Availability, Validity::Unknown, "no operations");
    }
    let counted: Vec<_> = seen.counted().collect();
    let fault_ms: u64 = super::windows::union(counted.iter().map(|w| (w.start_ms, w.heal_ms.unwrap_or(seen.end_ms).max(w.start_ms))).collect())
        .iter()
        .map(|(a, b)| b - a)
        .sum();
    let grants_in: u64 = counted.iter().map(|w| w.grants_in_fault).sum();
    let q = &seen.quiet;
    let rate = |n: u64, ms: u64| (ms > 0).then(|| n as f64 / (ms as f64 / 1e3));
    let (rate_in, rate_out) = (rate(grants_in, fault_ms), rate(q.grants, q.ms));
    let ratio = match (rate_in, rate_out) {
        (Some(i), Some(o)) if o > 0.0 => Some(((i / o) * 1000.0).round() / 1000.0),
        _ => None,
    };
    let Recoveries { worst: recovery, judged, cut, failed, unjudged } = recoveries(&counted);
    let recovered = failed.is_none() && unjudged.is_empty();
    let (valid, mut message) = judge(seen, &counted, failed, &unjudged, ratio, judged);
    if valid == Validity::Valid && !cut.is_empty() {
        // Said, never dropped: which recoveries ran into the next fault.
        message = format!("{message}; {}", cut.join("; "));
    }
    let skipped: Vec<_> = ctx.skipped.iter().map(|s| serde_json::json!({"fault": s.f, "at_ms": s.ns / 1_000_000, "why": s.why})).collect();
    let pct = if seen.counted_seconds > 0 { (seen.counted_seconds_with_grant as f64 * 1000.0 / seen.counted_seconds as f64).round() / 10.0 } else { 100.0 };
    let round = |x: Option<f64>| x.map(|v| (v * 10.0).round() / 10.0);
    let mut r = CheckResult::new(crate::checker::CheckerId::Availability, valid, message);
    r.figures = serde_json::json!({
        "faults_applied": counted.len(),
        "fault_ms": fault_ms,
        "outside_ms": q.ms,
        "grants_in_faults": grants_in,
        "grants_outside": q.grants,
        "rate_in_faults": round(rate_in),
        "rate_outside": round(rate_out),
        "ratio": ratio,
        "seconds": seen.counted_seconds,
        "success_seconds": seen.counted_seconds_with_grant,
        "success_seconds_pct": pct,
        "longest_gap_ms": seen.longest_gap_ms,
        "recovery_ms": failed.unwrap_or(recovery).max(recovery),
        "recovered": recovered,
        "faults": counted.iter().map(|w| serde_json::json!({
            "fault": w.fault,
            "targets": w.targets,
            "start_ms": w.start_ms,
            "end_ms": w.heal_ms,
            "first_success_after_ms": w.first_grant_after_start_ms.map(|g| g - w.start_ms),
            "recovery_after_heal_ms": w.heal_ms.zip(w.first_grant_after_heal_ms).map(|(h, g)| g - h),
            "next_fault_before_recovery": w.next_fault_ms.is_some_and(|n| w.first_grant_after_heal_ms.is_none_or(|g| g > n)),
        })).collect::<Vec<_>>(),
        "skipped": skipped,
    });
    r
}

/// What happened after the counted heals: the longest time to a grant, the longest wait for
/// none (past the room), and why any was not judged.
struct Recoveries {
    /// The longest time to a grant after a heal, cut-short ones included (the figure).
    worst: u64,
    /// The same over the recoveries judged (the message's); None when none was.
    judged: Option<u64>,
    /// Recoveries the next fault cut short, in words (their grant came past it).
    cut: Vec<String>,
    failed: Option<u64>,
    unjudged: Vec<String>,
}

fn recoveries(counted: &[&super::windows::WindowFigures]) -> Recoveries {
    let mut r = Recoveries { worst: 0, judged: None, cut: Vec::new(), failed: None, unjudged: Vec::new() };
    for w in counted {
        match &w.recovery {
            Recovery::Recovered { ms } => {
                r.worst = r.worst.max(*ms);
                r.judged = Some(r.judged.unwrap_or(0).max(*ms));
            }
            c @ Recovery::CutShort { ms: Some(ms), .. } => {
                r.worst = r.worst.max(*ms);
                r.cut.push(format!("{}: {}", w.fault, c.words()));
            }
            Recovery::NotRecovered { waited_ms, .. } => r.failed = Some(r.failed.unwrap_or(0).max(*waited_ms)),
            Recovery::NotJudged { why } => r.unjudged.push(why.clone()),
            c @ Recovery::CutShort { ms: None, .. } => r.unjudged.push(c.words()),
        }
    }
    r
}

/// The validity and its message.
fn judge(seen: &WindowsSeen, counted: &[&super::windows::WindowFigures], failed: Option<u64>, unjudged: &[String], ratio: Option<f64>, recovery: Option<u64>) -> (Validity, String) {
    if counted.is_empty() {
        match seen.first_grant_ms {
            Some(_) => (Validity::Valid, format!("no fault counted; longest gap between grants {} ms", seen.longest_gap_ms)),
            None => (Validity::Unknown, "nothing was ever acquired (no fault counted, so no recovery is asked)".to_string()),
        }
    } else if let Some(w) = failed {
        (Validity::Invalid, format!("no successful acquisition in the {w} ms after a heal (more than the {} ms the servers may need)", seen.room_ms))
    } else if let Some(why) = unjudged.first() {
        (Validity::Unknown, why.clone())
    } else {
        let rate = ratio.map_or("unknown".to_string(), |r| format!("{:.0}%", r * 100.0));
        let recovery = match recovery {
            Some(ms) => format!("a grant within {ms} ms of each heal judged"),
            None => "no recovery judged".to_string(),
        };
        (Validity::Valid, format!("grant rate during faults {rate} of the no-fault rate; {recovery}"))
    }
}
