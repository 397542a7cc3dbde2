//! The axes a verdict is made of, each judged on its own from the measurements: safety and
//! fencing ([`safety`]), availability, recovery and class from the fault windows that count
//! ([`availability`]), and each axis's validity ([`axes`]). `verdict` assembles the record
//! from them and `headline` words them.

use crate::checker::windows::Recovery;
use crate::checker::{CheckerId, Validity};

use super::words::{AvailWord, Class, SafetyWord, Strength};
use super::{FencingMode, Measured, WEAK_EXPOSURE};

/// The checkers that speak for two holders at once. The contention checker is a finding of
/// its own (a refusal nothing explains is not two holders).
const LOCK_CHECKERS: [CheckerId; 2] = [CheckerId::MutualExclusion, CheckerId::LostUpdates];
/// Every checker an axis speaks for; any other is "the history".
pub(super) const AXIS_CHECKERS: [CheckerId; 5] = [CheckerId::MutualExclusion, CheckerId::LostUpdates, CheckerId::Contention, CheckerId::Fencing, CheckerId::Availability];

/// The contention checker's finding, as a reader sees it.
pub(super) const FAILED_BUT_TOOK: &str = "an acquire reported failed while nobody could hold the key (it may have taken effect)";

/// The safety axis and what it rests on: two holders, fencing, the strength of the evidence.
pub(super) struct Safety {
    pub word: SafetyWord,
    /// The fencing label (`n/a (no tokens)`, `refused N stale write(s)`, `broken: ...`).
    pub fencing: String,
    pub evidence: Strength,
    pub lock_violated: bool,
    pub lock_unknown: bool,
    pub nothing_inside: bool,
    pub fencing_broken: bool,
    /// Two holders, every stale write refused, nothing broken, on the fenced side.
    pub fenced: bool,
    /// The fencing checker's answer, where the lock has tokens.
    pub fencing_check: Option<Validity>,
}

pub(super) fn safety(m: &Measured, mode: FencingMode) -> Safety {
    let lock_checks = m.worst(&LOCK_CHECKERS);
    let fencing_check = m.worst(&[CheckerId::Fencing]).filter(|_| m.has_tokens);
    let lock_violated = m.counts.overlaps > 0 || m.counts.lost_updates > 0 || lock_checks == Some(Validity::Invalid);
    // Without a history (the memory backend's default) the resource's exact counts speak alone.
    let lock_unknown = lock_checks == Some(Validity::Unknown);
    // Nothing inside: no section, or sections that took no measurable time. Any time inside, however
    // short, is evidence (weak below WEAK_EXPOSURE): the resource counted every entry.
    let nothing_inside = m.sections == 0 || m.exposure.is_none_or(|e| e <= 0.0);
    let stale_refused = m.counts.rejected.saturating_sub(m.counts.legit_refused);
    let fencing_broken =
        m.has_tokens && (m.counts.token_inversions > 0 || m.counts.legit_refused > 0 || m.counts.lost_updates_fenced > 0 || fencing_check == Some(Validity::Invalid));
    let fenced_side = mode != FencingMode::Off;
    let evidence = match m.exposure {
        _ if m.sections == 0 => Strength::None,
        None => Strength::None,
        Some(e) if e < WEAK_EXPOSURE => Strength::Weak,
        Some(_) => Strength::Strong,
    };
    let fenced = fenced_side && m.has_tokens && stale_refused > 0 && !fencing_broken;
    let word = if fenced_side && fencing_broken {
        if lock_violated { SafetyWord::Unsafe } else { SafetyWord::FencingBroken }
    } else if lock_violated {
        if fenced { SafetyWord::SafeWithFencing } else { SafetyWord::Unsafe }
    } else if lock_unknown || (fenced_side && fencing_check == Some(Validity::Unknown)) {
        SafetyWord::Unknown
    } else if nothing_inside {
        SafetyWord::NotTested
    } else if evidence == Strength::Weak {
        SafetyWord::NoViolationSeen
    } else {
        SafetyWord::Safe
    };
    let fencing = fencing_label(m, fencing_broken, stale_refused);
    Safety { word, fencing, evidence, lock_violated, lock_unknown, nothing_inside, fencing_broken, fenced, fencing_check }
}

/// What the fenced resource showed: `n/a (no tokens)`, `broken: ...` and why, `not
/// exercised`, or `refused N stale write(s)`.
fn fencing_label(m: &Measured, fencing_broken: bool, stale_refused: u64) -> String {
    if !m.has_tokens {
        "n/a (no tokens)".to_string()
    } else if fencing_broken {
        let mut why = Vec::new();
        if m.counts.legit_refused > 0 {
            why.push(format!("{} legitimate write(s) refused", m.counts.legit_refused));
        }
        if m.counts.token_inversions > 0 {
            why.push(format!("{} token inversion(s)", m.counts.token_inversions));
        }
        if m.counts.lost_updates_fenced > 0 {
            why.push(format!("{} update(s) lost with fencing", m.counts.lost_updates_fenced));
        }
        if why.is_empty() {
            why.push("the fencing checker found tokens out of order".into());
        }
        format!("broken: {}", why.join(", "))
    } else if stale_refused == 0 {
        "not exercised".to_string()
    } else {
        format!("refused {stale_refused} stale write(s)")
    }
}

/// Availability, recovery and class: only from the fault windows that count (server side,
/// seen to take effect, not a script's), with a no-fault rate to compare with.
pub(super) struct Avail {
    pub word: Option<AvailWord>,
    pub note: Option<String>,
    pub ratio: Option<f64>,
    pub recovery: Option<Recovery>,
    pub class_observed: Option<Class>,
    pub class_note: Option<String>,
    pub contradiction: bool,
    /// The service lost its state under a fault that counts (tokens went back).
    pub state_lost: bool,
}

pub(super) fn availability(m: &Measured, s: &Safety) -> Avail {
    let counted: Vec<&super::window::WindowVerdict> = m.windows.iter().flat_map(|w| w.counted()).collect();
    let applied = !m.faults_applied.is_empty() && !counted.is_empty();
    let measured = m.availability.as_ref().filter(|_| applied);
    let ratio = measured.and_then(|a| a.ratio);
    let word = ratio.map(AvailWord::of_ratio);
    let note = match (applied, measured, word) {
        (false, _, _) if m.expectation.is_some() => Some("not measured: a scenario's own choreography, judged by its expectation".to_string()),
        (false, _, _) if !m.faults_applied.is_empty() => Some(format!("not measured: {}", m.availability_missing.as_deref().unwrap_or("no fault window was recorded"))),
        (false, _, _) if !m.faults_no_effect.is_empty() => {
            Some(format!("not measured: no fault took effect ({} did nothing)", m.faults_no_effect.join(", ")))
        }
        (false, _, _) if !m.faults_unchecked.is_empty() => {
            Some(format!("not measured: no fault was seen to take effect ({} unchecked)", m.faults_unchecked.join(", ")))
        }
        (false, _, _) => Some("not measured: no fault applied".to_string()),
        (true, None, _) => Some(format!("not measured: {}", m.availability_missing.as_deref().unwrap_or("no availability check"))),
        (true, Some(_), None) => Some("not measured: no grant rate without faults to compare with".to_string()),
        (true, Some(_), Some(_)) => None,
    };
    let recovery = counted.iter().map(|w| w.recovery.clone()).max_by_key(Recovery::rank);
    let state_lost = counted.iter().any(|w| w.token_steps_back > 0) || (applied && s.fencing_broken && m.counts.token_inversions > 0);
    let consistent = !s.lock_violated && !state_lost;
    // A class needs strong evidence: no two holders seen where holders were barely inside
    // says nothing (a violation seen is evidence enough).
    let weak: Vec<&&super::window::WindowVerdict> = counted.iter().filter(|w| w.strength != super::words::Strength::Strong).collect();
    let (class_observed, class_note) = match word {
        None => (None, note.clone().map(|n| n.replacen("not measured", "not tested", 1))),
        Some(_) if s.word == SafetyWord::Unknown => (Some(Class::Unknown), None),
        Some(_) if consistent && !weak.is_empty() => {
            let why = weak.iter().map(|w| format!("{}: {}", w.label(), w.evidence)).collect::<Vec<_>>().join("; ");
            (None, Some(format!("not established: weak evidence ({why})")))
        }
        Some(_) if consistent && s.evidence == Strength::Weak => {
            (None, Some(format!("not established: weak evidence (holders inside {} of the phase)", super::percent(m.exposure.unwrap_or(0.0)))))
        }
        Some(w) => (Some(Class::of(consistent, w == AvailWord::Available)), None),
    };
    let contradiction = m.claimed == "CP" && class_observed.is_some_and(|c| c != Class::Unknown && !c.consistent());
    Avail { word, note, ratio, recovery, class_observed, class_note, contradiction, state_lost }
}

/// Each axis's validity as the chosen side speaks for it, their worst, and the findings.
pub(super) struct Axes {
    pub lock: Validity,
    pub contention: Validity,
    pub availability: Validity,
    /// The worst of the checkers no axis speaks for.
    pub others: Validity,
    pub valid: Validity,
    pub findings: Vec<String>,
}

pub(super) fn axes(m: &Measured, mode: FencingMode, s: &Safety, a: &Avail) -> Axes {
    let contention_check = m.worst(&[CheckerId::Contention]);
    // Nothing but choreography: the lock and fencing axes have nothing of their own to judge.
    let scripted_only = m.unscripted.as_ref().is_some_and(|u| u.sections == 0);
    let lock = if scripted_only {
        Validity::Valid
    } else if s.lock_violated {
        if mode == FencingMode::On && s.word == SafetyWord::SafeWithFencing { Validity::Valid } else { Validity::Invalid }
    } else if s.lock_unknown || s.nothing_inside {
        Validity::Unknown
    } else {
        Validity::Valid
    };
    let fencing = match mode {
        _ if scripted_only => Validity::Valid,
        FencingMode::Off => Validity::Valid,
        _ if s.fencing_broken => Validity::Invalid,
        _ => s.fencing_check.unwrap_or(Validity::Valid),
    };
    // The contention checker's `unknown` (a lone waiter timing out in a fault window) does
    // not overrule the resource's exact count; its `invalid` is a finding of its own.
    let contention = match contention_check {
        Some(Validity::Invalid) => Validity::Invalid,
        Some(Validity::Unknown) if m.sections == 0 => Validity::Unknown,
        _ => Validity::Valid,
    };
    // Recovery is the windows' (the one rule the availability checker also applies); a
    // phase without a window that counts asks none.
    let availability = match &a.recovery {
        Some(r) if r.failed() => Validity::Invalid,
        Some(Recovery::NotJudged { .. } | Recovery::CutShort { ms: None, .. }) => Validity::Unknown,
        Some(_) => Validity::Valid,
        None => match m.worst(&[CheckerId::Availability]) {
            Some(Validity::Invalid) if m.windows.is_empty() => Validity::Invalid,
            Some(Validity::Unknown) if m.windows.is_empty() && m.sections == 0 => Validity::Unknown,
            _ => Validity::Valid,
        },
    };
    let others = m.checks.iter().filter(|c| !AXIS_CHECKERS.contains(&c.checker)).map(|c| c.valid).max().unwrap_or(Validity::Valid);
    let findings: Vec<String> = (contention_check == Some(Validity::Invalid)).then(|| FAILED_BUT_TOOK.to_string()).into_iter().collect();
    // A scenario's choreography is judged by its expectation: met is valid, missed invalid.
    let expected = match &m.expectation {
        Some(e) if !e.met => Validity::Invalid,
        _ => Validity::Valid,
    };
    let valid = [lock, fencing, contention, availability, others, expected].into_iter().max().unwrap();
    Axes { lock, contention, availability, others, valid, findings }
}
