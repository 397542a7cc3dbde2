//! A window's words on doctored figures.

use super::*;
use crate::checker::windows::{QuietFigures, Recovery, WindowFigures, WindowsSeen};

fn figures() -> WindowFigures {
    WindowFigures {
        fault: "kill:leader".into(),
        side: Side::Servers,
        targets: vec!["etcd-1".into()],
        stand_in: None,
        effect: Effect::confirmed("process gone"),
        start_ms: 3000,
        heal_ms: Some(5000),
        grants_in_fault: 0,
        attempts_refused: 12,
        longest_silence_ms: 2000,
        first_grant_after_start_ms: Some(5400),
        first_grant_after_heal_ms: Some(5400),
        next_fault_ms: None,
        span_end_ms: 8000,
        overlaps: 0,
        token_steps_back: 0,
        sections: 60,
        exposure_fault: Some(0.01),
        exposure_after: Some(0.7),
        asked_fault: 1.0,
        asked_after: 0.4,
        silent_tail_ms: 0,
        asked_tail: 0.0,
        covered_fault: None,
        covered_after: None,
        recovery: Recovery::Recovered { ms: 400 },
    }
}

fn seen(ws: Vec<WindowFigures>) -> WindowsSeen {
    WindowsSeen {
        end_ms: 20_000,
        ttl_ms: Some(3000),
        room_ms: 6000,
        windows: ws,
        quiet: QuietFigures { ms: 10_000, grants: 100, sections: 100, exposure: Some(0.6), ..Default::default() },
        ..Default::default()
    }
}

/// A lock that grants nothing during a kill, with holders inside after the heal, earns
/// strong evidence (PostgreSQL, etcd): refusing is not weakness.
#[test]
fn refusing_during_the_fault_is_strong_evidence() {
    let j = judge(&seen(vec![figures()]), false);
    let w = &j.windows[0];
    assert_eq!((w.safety, w.strength, w.availability), (SafetyWord::Safe, Strength::Strong, Some(AvailWord::Unavailable)));
    assert!(w.evidence.contains("granted nothing during it while clients asked 100.0% of the time"), "{}", w.evidence);
    assert_eq!(w.grant_ratio, Some(0.0));
    // The same window where holders were barely inside after the heal: weak.
    let thin = WindowFigures { exposure_after: Some(0.05), ..figures() };
    assert_eq!(judge(&seen(vec![thin]), false).windows[0].strength, Strength::Weak);
    // Grants during the fault with holders barely inside: weak, never "safe".
    let thin = WindowFigures { grants_in_fault: 40, exposure_fault: Some(0.08), ..figures() };
    let w = &judge(&seen(vec![thin]), false).windows[0];
    assert_eq!((w.safety, w.strength), (SafetyWord::NoViolationSeen, Strength::Weak));
    // Grants in the fault's first moments, then none while clients waited (a paused leader):
    // the waiting clients cover the rest, strong; the same tail barely asked stays weak.
    let stopped = WindowFigures { grants_in_fault: 3, exposure_fault: Some(0.1), silent_tail_ms: 1800, asked_tail: 1.0, covered_fault: Some(0.99), ..figures() };
    let w = &judge(&seen(vec![stopped.clone()]), false).windows[0];
    assert_eq!((w.safety, w.strength), (SafetyWord::Safe, Strength::Strong), "{}", w.evidence);
    assert!(w.evidence.contains("granted nothing in its last 1800 ms while clients asked 100.0% of them"), "{}", w.evidence);
    let unasked_tail = WindowFigures { asked_tail: 0.05, covered_fault: Some(0.145), ..stopped };
    assert_eq!(judge(&seen(vec![unasked_tail]), false).windows[0].strength, Strength::Weak);
    // A silence before the fault's only grants (a server frozen from the start, thawed a
    // moment before the heal's stamp), clients waiting through it: strong, in its own words;
    // the same silence nobody waited in stays weak.
    let thawed = WindowFigures { grants_in_fault: 1, exposure_fault: Some(0.004), longest_silence_ms: 1990, covered_fault: Some(0.97), ..figures() };
    let w = &judge(&seen(vec![thawed.clone()]), false).windows[0];
    assert_eq!((w.safety, w.strength), (SafetyWord::Safe, Strength::Strong), "{}", w.evidence);
    assert!(w.evidence.contains("granted nothing for 1990 ms of it while clients waited (97.0% covered)"), "{}", w.evidence);
    // A short tail after that grant does not speak for the silence before it.
    let short_tail = WindowFigures { silent_tail_ms: 13, asked_tail: 1.0, ..thawed.clone() };
    let w = &judge(&seen(vec![short_tail]), false).windows[0];
    assert!(w.evidence.contains("granted nothing for 1990 ms of it while clients waited"), "{}", w.evidence);
    let unwaited = WindowFigures { covered_fault: Some(0.004), ..thawed };
    assert_eq!(judge(&seen(vec![unwaited]), false).windows[0].strength, Strength::Weak);
    // The first grant 1.8 s into a 2 s span after the heal, clients waiting till then: the
    // wait covers that part (strong); without it, 10% holders inside is weak.
    let late = WindowFigures { exposure_after: Some(0.1), first_grant_after_heal_ms: Some(6800), heal_ms: Some(5000), ..figures() };
    assert_eq!(judge(&seen(vec![late.clone()]), false).windows[0].strength, Strength::Weak);
    let waited = WindowFigures { covered_after: Some(0.95), ..late };
    let w = &judge(&seen(vec![waited]), false).windows[0];
    assert_eq!(w.strength, Strength::Strong, "{}", w.evidence);
    assert!(w.evidence.contains("granted nothing in its first 1800 ms while clients asked (95.0% covered)"), "{}", w.evidence);
    // Granting nothing while barely asked: weak.
    let unasked = WindowFigures { asked_fault: 0.05, ..figures() };
    assert_eq!(judge(&seen(vec![unasked]), false).windows[0].strength, Strength::Weak);
    // Nothing asked of the lock at all: not tested.
    let idle = WindowFigures { grants_in_fault: 0, attempts_refused: 0, sections: 0, asked_fault: 0.0, ..figures() };
    assert_eq!(judge(&seen(vec![idle]), false).windows[0].safety, SafetyWord::NotTested);
}

/// Two holders read unsafe, or fenced when fencing caught them; tokens that went back read
/// fencing broken (the service lost its state); only a confirmed server fault counts.
#[test]
fn a_window_says_what_happened_in_its_span() {
    let two = WindowFigures { overlaps: 2, ..figures() };
    assert_eq!(judge(&seen(vec![two.clone()]), false).windows[0].safety, SafetyWord::Unsafe);
    assert_eq!(judge(&seen(vec![two]), true).windows[0].safety, SafetyWord::SafeWithFencing);
    let reset = WindowFigures { token_steps_back: 1, ..figures() };
    assert_eq!(judge(&seen(vec![reset]), false).windows[0].safety, SafetyWord::FencingBroken);
    let holder = WindowFigures { side: Side::Holder, fault: "client-pause".into(), ..figures() };
    let unchecked = WindowFigures { effect: Effect::unchecked("no probe"), ..figures() };
    let j = judge(&seen(vec![holder, unchecked, figures()]), false);
    assert_eq!(j.windows.iter().map(|w| w.counts).collect::<Vec<_>>(), [false, false, true]);
    let mut scripted = seen(vec![figures()]);
    scripted.choreographed = true;
    assert!(!judge(&scripted, false).windows[0].counts, "a script's fault gives no class");
}

/// Without quiet time to read a no-fault rate from, no availability word, and why.
#[test]
fn no_quiet_time_no_rate() {
    let mut s = seen(vec![figures()]);
    s.quiet.ms = 400;
    let w = &judge(&s, false).windows[0];
    assert_eq!(w.availability, None);
    assert!(w.availability_note.as_deref().is_some_and(|n| n.contains("no grant rate without faults")), "{w:?}");
}
