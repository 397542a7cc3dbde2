//! A catalogue entry's expectation against what it observed: the scenario runner hands over
//! the figures ([`Seen`]), this says whether they meet the entry's [`Expect`], and why.

use serde::{Deserialize, Serialize};

use super::{percent, Availability, FENCING_BROKEN, WEAK_EXPOSURE};

/// A published expectation (`crate::scenario::power` holds them) for one backend under one durability setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub expect: Expect,
    /// The server setting it depends on, as the case names it.
    pub setting: &'static str,
    pub source: &'static str,
    pub finding: &'static str,
}

/// What an entry expects on one side of fencing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// Two holders, or a lost update (on this side's register).
    Violation,
    /// No overlap and no lost update.
    NoViolation,
    /// Stale writes refused, no legitimate write refused, no token inversion, no update lost.
    Rejected,
    /// The tokens did not survive the fault: a holder with a valid lease was refused, or a
    /// token went backwards.
    FencingBroken,
    /// The client must be told "not acquired", and nothing of it may stay on the servers.
    MustFail,
    /// No violation (with holders exposed enough to see one), the fault applied, and a grant
    /// after every heal. The time to it is reported against
    /// [`crate::scenario::RECOVERY_BOUND`], and the grant rate during the fault.
    Recovers,
    /// Power loss under a holder (P1, J2): the next client is granted the lock its first
    /// holder still holds (the grant did not survive).
    LockLost,
    /// Power loss under a holder: the next client is refused (or waits) while the first
    /// holder still holds the lock.
    LockHeld,
    /// Power loss under a holder, where the grant races the server's periodic flush: either
    /// outcome meets it, and the observation says which one happened.
    MayLoseLock,
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expect::Violation => "violation",
            Expect::NoViolation => "no violation",
            Expect::Rejected => "stale writes rejected",
            Expect::FencingBroken => FENCING_BROKEN,
            Expect::MustFail => "acquire fails, nothing left",
            Expect::Recovers => "no violation, recovers",
            Expect::LockLost => "lock lost",
            Expect::LockHeld => "lock held",
            Expect::MayLoseLock => "held or lost (a flush race)",
        })
    }
}

/// What a scenario entry observed on one side of fencing, as figures: the runner fills it,
/// [`meets`] judges it against the entry's [`Expect`].
#[derive(Debug, Clone)]
pub struct Seen<'a> {
    pub overlaps: u64,
    /// Lost updates on this side's register.
    pub lost_updates: u64,
    pub stale_refused: u64,
    pub legit_refused: u64,
    pub token_inversions: u64,
    /// A fault took effect (not skipped, not shown to do nothing).
    pub fault_took_effect: bool,
    /// Share of the time a holder was inside the resource.
    pub exposure: f64,
    /// S7: whether the waiter whose session expired was ever told "acquired".
    pub expired_waiter_acquired: Option<bool>,
    /// S7: what the servers still held for the lock at the end; `Err` when unreadable.
    pub leftovers: Option<Result<Vec<String>, String>>,
    pub availability: Option<&'a Availability>,
    /// The recovery time a service is expected within: reported against, not judged.
    pub recovery_bound_ms: u64,
    /// P1 / J2: the power loss under a holder, when the entry is one.
    pub power: Option<&'a PowerSeen>,
}

/// What a power loss under a holder saw: whether the cut took effect (and what it dropped),
/// and how the next client was answered while the first holder still held the lock.
#[derive(Debug, Clone, Default)]
pub struct PowerSeen {
    /// `Ok(bytes)`: every node's process was gone and its layer dropped `bytes` unsynced
    /// bytes in all; `Err(why)`: the cut did not take effect where it had to.
    pub effect: Option<Result<u64, String>>,
    /// `Some(true)`: the next client was granted the lock within its bounded wait, while the
    /// first holder's lease was still valid; `Some(false)`: refused or still waiting at the
    /// end of the wait; `None`: no answer that says either (`answer` says why).
    pub granted: Option<bool>,
    /// How the next client was answered, in words.
    pub answer: String,
}

/// A power loss under a holder against its expectation. "No effect" (the cut did not take
/// effect, or nothing unsynced was there to drop and the lock was held where a loss was
/// expected) and "no answer" are never a verdict: they fail, saying so.
fn power_loss(expect: Expect, p: &PowerSeen) -> (bool, String) {
    let dropped = match &p.effect {
        Some(Ok(b)) => *b,
        Some(Err(why)) => return (false, format!("no effect: {why}")),
        None => return (false, "no effect: the power was never cut".into()),
    };
    let evidence = format!("{dropped} unsynced bytes dropped");
    let Some(granted) = p.granted else {
        return (false, format!("no answer: {}; {evidence}", p.answer));
    };
    let what = if granted { "LOST: the next client was granted it" } else { "held: the next client was refused" };
    match expect {
        Expect::LockLost if !granted && dropped == 0 => (false, format!("no effect: nothing unsynced to drop, and the lock was held ({})", p.answer)),
        Expect::LockLost => (granted, format!("{what} ({}); {evidence}", p.answer)),
        Expect::LockHeld => (!granted, format!("{what} ({}); {evidence}", p.answer)),
        Expect::MayLoseLock => (true, format!("{what} ({}); {evidence}; either outcome was possible", p.answer)),
        _ => (false, format!("{expect} is not a power-loss expectation")),
    }
}

/// Did an observation meet its expectation? Every branch can say no, and says why.
pub fn meets(expect: Expect, o: &Seen) -> (bool, String) {
    let lost = o.lost_updates;
    let overlap_txt = format!("{} overlap(s), {} lost update(s)", o.overlaps, lost);
    let clean = o.overlaps == 0 && lost == 0;
    match expect {
        Expect::LockLost | Expect::LockHeld | Expect::MayLoseLock => match o.power {
            Some(p) => power_loss(expect, p),
            None => (false, "not a power loss under a holder: nothing to judge".into()),
        },
        Expect::Violation => (!clean, overlap_txt),
        Expect::NoViolation => (clean, overlap_txt),
        Expect::Rejected => {
            let stale = o.stale_refused;
            let ok = stale > 0 && lost == 0 && o.legit_refused == 0 && o.token_inversions == 0;
            let mut txt = format!("{stale} stale write(s) refused, {lost} lost update(s)");
            if o.legit_refused > 0 || o.token_inversions > 0 {
                txt.push_str(&format!(", tokens out of order: {} legitimate refused, {} inversion(s)", o.legit_refused, o.token_inversions));
            }
            (ok, txt)
        }
        Expect::FencingBroken => (
            o.legit_refused > 0 || o.token_inversions > 0,
            format!(
                "{} legitimate write(s) refused, {} token inversion(s), {} stale write(s) refused",
                o.legit_refused, o.token_inversions, o.stale_refused
            ),
        ),
        Expect::MustFail => {
            let left = match &o.leftovers {
                Some(Ok(v)) if v.is_empty() => Ok(()),
                Some(Ok(v)) => Err(format!("left on the servers: {}", v.join(", "))),
                Some(Err(e)) => Err(format!("could not read the servers: {e}")),
                None => Err("the servers were not read".to_string()),
            };
            match (o.expired_waiter_acquired, left) {
                (Some(false), Ok(())) => (true, "the expired waiter's acquire failed; nothing left behind".into()),
                (Some(false), Err(e)) => (false, format!("the expired waiter's acquire failed, but {e}")),
                (Some(true), _) => (false, "the expired waiter was told it holds the lock".into()),
                (None, _) => (false, "not observed".into()),
            }
        }
        Expect::Recovers => {
            let Some(a) = o.availability else { return (false, format!("{overlap_txt}; no availability measured")) };
            // Every condition is checked and every failed one said.
            let mut failed = Vec::new();
            if !clean {
                failed.push("a violation".to_string());
            }
            if !o.fault_took_effect {
                failed.push("the fault never took effect".to_string());
            }
            if o.exposure < WEAK_EXPOSURE {
                failed.push(format!("weak evidence: holders inside {} of the time", percent(o.exposure)));
            }
            let bound = o.recovery_bound_ms;
            let rec = if !a.recovered {
                failed.push("no grant after a heal".to_string());
                format!("NOT recovered ({} ms after a heal, to the end)", a.recovery_ms)
            } else if a.recovery_ms > bound {
                format!("recovered {} ms after the heal (slower than the {bound} ms expected)", a.recovery_ms)
            } else {
                format!("recovered {} ms after the heal (expected within {bound} ms)", a.recovery_ms)
            };
            let mut txt = format!(
                "{overlap_txt}; {rec}; grant rate during the fault {} of normal",
                a.ratio.map_or("unknown".into(), |r| format!("{:.0}%", r * 100.0))
            );
            if !failed.is_empty() {
                txt.push_str(&format!(" -- {}", failed.join(", ")));
            }
            (failed.is_empty(), txt)
        }
    }
}
