//! Each fault judged in its own window: the words for one fault window (its safety over the
//! span in which it could cause a second grant, its grant rate against the no-fault rate, its
//! recovery after the heal) and for the quiet time between faults, from the figures the
//! checker took ([`crate::checker::windows`]). The per-fault cells, the phase's class and
//! recovery, and the backend's read these and nothing pooled across conditions.

use serde::{Deserialize, Serialize};

use crate::checker::windows::{QuietFigures, Recovery, WindowFigures, WindowsSeen};
use crate::faultlog::{Effect, Side};

use super::words::{AvailWord, SafetyWord, Strength};
use super::{percent, WEAK_EXPOSURE};

/// The least quiet time a no-fault rate is read from.
pub const MIN_QUIET_MS: u64 = 1000;

/// One fault window, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowVerdict {
    pub fault: String,
    /// The node hit in place of the one the fault names, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    pub side: Side,
    pub effect: Effect,
    pub start_ms: u64,
    pub heal_ms: Option<u64>,
    /// Server side, seen to take effect, not a script's: it can give the server a class.
    pub counts: bool,
    /// Over the span from its start to its heal plus the granted TTL.
    pub safety: SafetyWord,
    pub strength: Strength,
    /// What the safety word rests on, in words.
    pub evidence: String,
    pub overlaps: u64,
    pub token_steps_back: u64,
    /// The grant rate during the fault over the no-fault rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<AvailWord>,
    /// Why there is no availability word, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_note: Option<String>,
    pub longest_silence_ms: u64,
    pub recovery: Recovery,
}

impl WindowVerdict {
    /// The fault's label, with its stand-in: "kill:leader -> redlock-2".
    pub fn label(&self) -> String {
        match &self.stand_in {
            Some(s) => format!("{} -> {}", self.fault, s.split(':').next().unwrap_or(s)),
            None => self.fault.clone(),
        }
    }
}

/// The quiet time, judged: the no-fault cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuietVerdict {
    pub ms: u64,
    /// Grants per second in it; absent when too short to read one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    pub safety: SafetyWord,
    pub strength: Strength,
    pub evidence: String,
    pub overlaps: u64,
    pub token_steps_back: u64,
}

/// A phase's windows and quiet time, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Windows {
    /// How long after a heal the servers may take to grant again (TTL and election).
    pub room_ms: u64,
    pub windows: Vec<WindowVerdict>,
    pub quiet: QuietVerdict,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub choreographed: bool,
}

impl Windows {
    /// The windows that can give the server a class.
    pub fn counted(&self) -> impl Iterator<Item = &WindowVerdict> {
        self.windows.iter().filter(|w| w.counts)
    }
}

/// Judge every window of a segment. `fenced` says two holders were caught by fencing
/// (every stale write refused, nothing broken) on the side the verdict speaks for.
pub fn judge(seen: &WindowsSeen, fenced: bool) -> Windows {
    let quiet_rate = (seen.quiet.ms >= MIN_QUIET_MS).then(|| seen.quiet.grants as f64 / (seen.quiet.ms as f64 / 1e3));
    let windows = seen
        .windows
        .iter()
        .map(|w| {
            let (strength, evidence) = strength(w);
            let safety = two_holders(w.overlaps, w.token_steps_back, fenced).unwrap_or(match strength {
                Strength::Strong => SafetyWord::Safe,
                Strength::Weak => SafetyWord::NoViolationSeen,
                Strength::None => SafetyWord::NotTested,
            });
            let fault_ms = w.heal_ms.unwrap_or(seen.end_ms).saturating_sub(w.start_ms);
            let (grant_ratio, availability_note) = match quiet_rate {
                _ if fault_ms == 0 => (None, Some("the fault lasted no time".to_string())),
                Some(q) if q > 0.0 => (Some(((w.grants_in_fault as f64 / (fault_ms as f64 / 1e3)) / q * 1000.0).round() / 1000.0), None),
                _ => (None, Some(format!("no grant rate without faults to compare with ({} ms of quiet time)", seen.quiet.ms))),
            };
            WindowVerdict {
                fault: w.fault.clone(),
                stand_in: w.stand_in.clone(),
                side: w.side,
                effect: w.effect.clone(),
                start_ms: w.start_ms,
                heal_ms: w.heal_ms,
                counts: !seen.choreographed && w.side == Side::Servers && w.effect.is_confirmed(),
                safety,
                strength,
                evidence,
                overlaps: w.overlaps,
                token_steps_back: w.token_steps_back,
                availability: grant_ratio.map(AvailWord::of_ratio),
                grant_ratio,
                availability_note,
                longest_silence_ms: w.longest_silence_ms,
                recovery: w.recovery.clone(),
            }
        })
        .collect();
    Windows { room_ms: seen.room_ms, windows, quiet: quiet(&seen.quiet, quiet_rate, fenced), choreographed: seen.choreographed }
}

/// The word for two holders, or for tokens that went back, where either was seen.
fn two_holders(overlaps: u64, steps_back: u64, fenced: bool) -> Option<SafetyWord> {
    if overlaps > 0 {
        Some(if fenced { SafetyWord::SafeWithFencing } else { SafetyWord::Unsafe })
    } else if steps_back > 0 {
        // The service lost its state (a counter reset by a restart): fencing cannot work.
        Some(SafetyWord::FencingBroken)
    } else {
        None
    }
}

/// How strongly a window's span speaks for "no second holder": each part (during the fault,
/// after its heal to the TTL's end) is covered when holders were inside enough of it, or when
/// the lock granted nothing in it while clients were asking for enough of it (a lock that
/// refuses during a kill is not thereby weak: a wrong grant would have gone to one of them).
fn strength(w: &WindowFigures) -> (Strength, String) {
    if w.sections == 0 && w.grants_in_fault == 0 && w.asked_fault == 0.0 && w.attempts_refused == 0 {
        return (Strength::None, "nothing was asked of the lock during it".into());
    }
    let during = if w.grants_in_fault == 0 {
        (w.asked_fault >= WEAK_EXPOSURE, format!("granted nothing during it while clients asked {} of the time", percent(w.asked_fault)))
    } else {
        let e = w.exposure_fault.unwrap_or(0.0);
        match w.covered_fault.filter(|&c| c > e) {
            // Grants stopped part-way (a paused leader): the clients it then kept waiting
            // cover the rest, as they cover a fault that granted nothing at all.
            // The tail after the last grant is the fault's silence (nine tenths of its longest
            // or more): said as a tail; a longer silence elsewhere is said as such, below.
            Some(c) if w.silent_tail_ms > 0 && w.asked_tail > 0.0 && w.silent_tail_ms * 10 >= w.longest_silence_ms * 9 => (
                c >= WEAK_EXPOSURE,
                format!(
                    "holders inside {} of the fault; granted nothing in its last {} ms while clients asked {} of them ({} covered)",
                    percent(e),
                    w.silent_tail_ms,
                    percent(w.asked_tail),
                    percent(c)
                ),
            ),
            // A silence elsewhere in the fault (a server frozen or dead from its start, whose
            // thaw came a moment before the heal's stamp): the clients kept waiting in it.
            Some(c) => (
                c >= WEAK_EXPOSURE,
                format!("holders inside {} of the fault; granted nothing for {} ms of it while clients waited ({} covered)", percent(e), w.longest_silence_ms, percent(c)),
            ),
            None => (e >= WEAK_EXPOSURE, format!("holders inside {} of the fault", percent(e))),
        }
    };
    let granted_after = w.first_grant_after_heal_ms.is_some_and(|g| g < w.span_end_ms);
    let after = match (w.exposure_after, granted_after) {
        (None, _) => (true, None),
        (Some(_), false) => (w.asked_after >= WEAK_EXPOSURE, Some(format!("granted nothing after the heal within the TTL while clients asked {} of it", percent(w.asked_after)))),
        (Some(e), true) => match w.covered_after.filter(|&c| c > e) {
            // The first grant came a while after the heal: the clients kept waiting till
            // then cover that part, as they cover a heal followed by no grant at all.
            Some(c) => (
                c >= WEAK_EXPOSURE,
                Some(format!(
                    "holders inside {} from the heal to the TTL's end; granted nothing in its first {} ms while clients asked ({} covered)",
                    percent(e),
                    w.first_grant_after_heal_ms.zip(w.heal_ms).map_or(0, |(g, h)| g.saturating_sub(h)),
                    percent(c)
                )),
            ),
            None => (e >= WEAK_EXPOSURE, Some(format!("holders inside {} from the heal to the TTL's end", percent(e)))),
        },
    };
    let words = match after.1 {
        Some(a) => format!("{}; {a}", during.1),
        None => during.1,
    };
    if during.0 && after.0 {
        (Strength::Strong, words)
    } else {
        (Strength::Weak, format!("weak: {words}"))
    }
}

/// The no-fault cell.
fn quiet(q: &QuietFigures, rate: Option<f64>, fenced: bool) -> QuietVerdict {
    let (safety, strength, evidence) = match (two_holders(q.overlaps, q.token_steps_back, fenced), q.exposure) {
        (Some(w), _) => (w, Strength::Strong, format!("{} overlap(s), {} token step(s) back without a fault in force", q.overlaps, q.token_steps_back)),
        (None, _) if q.sections == 0 => (SafetyWord::NotTested, Strength::None, "nothing entered the resource without a fault in force".into()),
        (None, Some(e)) if e >= WEAK_EXPOSURE => (SafetyWord::Safe, Strength::Strong, format!("holders inside {} of the quiet time", percent(e))),
        (None, e) => (SafetyWord::NoViolationSeen, Strength::Weak, format!("weak: holders inside {} of the quiet time", percent(e.unwrap_or(0.0)))),
    };
    QuietVerdict { ms: q.ms, rate: rate.map(|r| (r * 10.0).round() / 10.0), safety, strength, evidence, overlaps: q.overlaps, token_steps_back: q.token_steps_back }
}

#[cfg(test)]
mod tests;
