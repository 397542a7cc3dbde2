//! The judgement's rules, each shown failing on a measurement built to break it.

use super::*;

fn check(name: &str, valid: Validity) -> CheckBrief {
    let checker = serde_json::from_value(serde_json::json!(name)).expect("a checker's name");
    CheckBrief { checker, valid, message: String::new() }
}

fn all_valid() -> Vec<CheckBrief> {
    ["mutual-exclusion", "lost-updates", "contention", "fencing", "availability"].iter().map(|n| check(n, Validity::Valid)).collect()
}

fn clean() -> Measured {
    Measured { has_tokens: true, sections: 100, checks: all_valid(), claimed: "CP".into(), exposure: Some(0.5), ..Default::default() }
}

/// A counted window of `fault` (server side, confirmed), judged strong and safe unless told.
pub(super) fn window(fault: &str, ratio: f64) -> window::WindowVerdict {
    window::WindowVerdict {
        fault: fault.into(),
        stand_in: None,
        side: crate::faultlog::Side::Servers,
        effect: crate::faultlog::Effect::confirmed("process gone"),
        start_ms: 3000,
        heal_ms: Some(5000),
        counts: true,
        safety: words::SafetyWord::Safe,
        strength: words::Strength::Strong,
        evidence: "granted nothing during it (40 attempt(s) refused); 60% from the heal to the TTL's end".into(),
        overlaps: 0,
        token_steps_back: 0,
        grant_ratio: Some(ratio),
        availability: Some(words::AvailWord::of_ratio(ratio)),
        availability_note: None,
        longest_silence_ms: 0,
        recovery: crate::checker::windows::Recovery::Recovered { ms: 400 },
    }
}

/// A phase's windows: `ws`, and a quiet time that held.
pub(super) fn windows(ws: Vec<window::WindowVerdict>) -> window::Windows {
    let quiet = window::QuietVerdict { ms: 6000, rate: Some(10.0), safety: words::SafetyWord::Safe, strength: words::Strength::Strong, evidence: String::new(), overlaps: 0, token_steps_back: 0 };
    window::Windows { room_ms: 5000, windows: ws, quiet, choreographed: false }
}

fn under_faults(m: Measured, ratio: f64) -> Measured {
    Measured {
        faults_applied: vec!["kill".into()],
        availability: Some(Availability { ratio: Some(ratio), recovered: true, ..Default::default() }),
        windows: vec![windows(vec![window("kill", ratio)])],
        ..m
    }
}

#[test]
fn a_clean_run_without_faults_is_safe_and_has_no_observed_class() {
    let v = verdict(&clean(), FencingMode::Both);
    assert_eq!((v.safety.as_str(), v.evidence.as_str(), v.valid), ("safe", "strong", Validity::Valid));
    assert_eq!(v.class_observed, None);
    assert_eq!(v.availability, None);
    assert_eq!(v.class_note.as_deref(), Some("not tested: no fault applied"), "{}", v.summary);
    assert_eq!(v.headline, "safe");
    assert_eq!(v.fencing, "not exercised");
}

#[test]
fn safe_with_fencing_needs_stale_writes_refused_and_nothing_broken() {
    let caught = Measured { counts: SafetyCounts { overlaps: 2, lost_updates: 1, rejected: 1, ..Default::default() }, ..clean() };
    let v = verdict(&caught, FencingMode::On);
    assert_eq!((v.safety.as_str(), v.fencing.as_str()), ("safe with fencing", "refused 1 stale write(s)"));
    assert_eq!(v.valid, Validity::Valid, "with fencing on, a violation fencing caught is not a failure");
    assert_eq!(verdict(&caught, FencingMode::Off).safety, "unsafe");
    assert_eq!(verdict(&caught, FencingMode::Both).valid, Validity::Invalid, "both: the lock alone failed");
    // Nothing refused: fencing was never exercised, so it earned nothing.
    let unexercised = Measured { counts: SafetyCounts { overlaps: 1, ..Default::default() }, ..clean() };
    assert_eq!(verdict(&unexercised, FencingMode::On).safety, "unsafe");
    // Refusals that were all legitimate holders: fencing broken, and the lock violated.
    let wrong = Measured { counts: SafetyCounts { overlaps: 1, rejected: 1, legit_refused: 1, ..Default::default() }, ..clean() };
    assert_eq!(verdict(&wrong, FencingMode::On).safety, "unsafe");
    assert!(verdict(&wrong, FencingMode::On).fencing.starts_with("broken"));
}

#[test]
fn a_token_reset_is_fencing_broken_even_without_overlap() {
    let reset = Measured { counts: SafetyCounts { rejected: 40, legit_refused: 40, token_inversions: 1, ..Default::default() }, ..clean() };
    let v = verdict(&reset, FencingMode::On);
    assert_eq!(v.safety, "fencing broken");
    assert!(v.fencing.contains("40 legitimate write(s) refused"), "{}", v.fencing);
    assert_eq!(v.valid, Validity::Invalid);
    // Off: the lock alone was not at fault.
    assert_eq!(verdict(&reset, FencingMode::Off).safety, "safe");
}

#[test]
fn no_tokens_is_na_and_never_safe_with_fencing() {
    let redlock = Measured { counts: SafetyCounts { overlaps: 1, lost_updates: 1, lost_updates_fenced: 1, ..Default::default() }, has_tokens: false, claimed: "AP".into(), ..clean() };
    let v = verdict(&redlock, FencingMode::Both);
    assert_eq!((v.safety.as_str(), v.fencing.as_str()), ("unsafe", "n/a (no tokens)"));
}

#[test]
fn any_checker_decides_the_worst() {
    let mut m = clean();
    m.checks[0].valid = Validity::Unknown;
    assert_eq!(verdict(&m, FencingMode::Both).safety, "unknown", "unknown stays unknown, never safe");
    assert_eq!(verdict(&m, FencingMode::Both).valid, Validity::Unknown);
    // contention: a refusal nothing explains is a finding, not two holders; it fails the
    // run and the headline says why.
    let mut m = clean();
    m.checks[2].valid = Validity::Invalid;
    let v = verdict(&m, FencingMode::Both);
    assert_eq!((v.safety.as_str(), v.valid), ("safe", Validity::Invalid));
    assert!(v.headline.contains("failed acquire took effect") && v.findings.len() == 1, "{v:?}");
    // Its unknown does not overrule the resource's exact count.
    let mut m = clean();
    m.checks[2].valid = Validity::Unknown;
    assert_eq!((verdict(&m, FencingMode::Both).safety.as_str(), verdict(&m, FencingMode::Both).valid), ("safe", Validity::Valid));
    // No grant after the last heal: the headline is as loud as the exit status.
    let mut m = clean();
    m.checks[4].valid = Validity::Invalid;
    let v = verdict(&m, FencingMode::Both);
    assert_eq!((v.safety.as_str(), v.valid), ("safe", Validity::Invalid));
    assert_eq!(v.headline, "safe; NOT RECOVERED");
    let mut m = clean();
    m.checks[3].valid = Validity::Invalid;
    assert_eq!(verdict(&m, FencingMode::On).safety, "fencing broken");
}

#[test]
fn classes_come_only_from_applied_faults() {
    let v = verdict(&under_faults(clean(), 0.1), FencingMode::Both);
    assert_eq!((v.class_observed.map(|c| c.as_str()), v.availability.map(|a| a.as_str())), (Some("CP"), Some("unavailable")));
    assert_eq!(v.availability_rate.as_deref(), Some("grant rate 10% of the no-fault rate"), "the rate, never \"0% unavailable\"");
    let v = verdict(&under_faults(clean(), 0.95), FencingMode::Both);
    assert_eq!(v.class_observed.map(|c| c.as_str()), Some("CP+A"));
    let violated = Measured { counts: SafetyCounts { overlaps: 1, lost_updates: 1, ..Default::default() }, ..clean() };
    let v = verdict(&under_faults(violated.clone(), 0.9), FencingMode::Both);
    assert_eq!(v.class_observed.map(|c| c.as_str()), Some("AP"));
    assert!(v.contradiction && v.summary.contains("CONTRADICTS"), "{}", v.summary);
    assert_eq!(verdict(&under_faults(violated, 0.5), FencingMode::Both).class_observed.map(|c| c.as_str()), Some("neither"));
    // Faults asked for but all skipped: no class, and the skip is said.
    let skipped = Measured { faults_skipped: vec!["clock".into()], availability: Some(Availability::default()), ..clean() };
    let v = verdict(&skipped, FencingMode::Both);
    assert_eq!((v.class_observed, v.availability), (None, None));
    assert!(v.summary.contains("skipped: clock"), "{}", v.summary);
    // Faults applied but availability not measured (no history): no class, and why.
    let unmeasured = Measured { faults_applied: vec!["kill".into()], availability_missing: Some("no history kept".into()), ..clean() };
    let v = verdict(&unmeasured, FencingMode::Both);
    assert_eq!((v.class_observed.map(|c| c.as_str()), v.availability.map(|a| a.as_str())), (None, None), "a missing availability is no class: {v:?}");
    assert_eq!(v.class_note.as_deref(), Some("not tested: no history kept"));
    // No rate outside the faults to compare with: not measured either.
    let no_rate = under_faults(clean(), 0.5);
    let no_rate = Measured { availability: Some(Availability { ratio: None, ..no_rate.availability.clone().unwrap() }), ..no_rate };
    assert_eq!(verdict(&no_rate, FencingMode::Both).class_observed, None);
    // A fault that did nothing: not applied, and said.
    let none = Measured { faults_no_effect: vec!["partition".into()], ..clean() };
    let v = verdict(&none, FencingMode::Both);
    assert_eq!(v.class_observed, None);
    assert!(v.availability_note.as_deref().is_some_and(|n| n.contains("partition did nothing")), "{v:?}");
}

#[test]
fn exposure_grades_the_evidence() {
    let weak = Measured { exposure: Some(0.01), ..clean() };
    let v = verdict(&weak, FencingMode::Both);
    assert_eq!((v.evidence.as_str(), v.safety.as_str(), v.headline.as_str()), ("weak", "no violation seen", "no violation seen (weak)"));
    assert!(v.summary.contains("weak evidence: holders inside 1.0%"), "{}", v.summary);
    assert_eq!(v.valid, Validity::Valid, "weak evidence is no violation");
    // Nothing inside: not tested, and the run cannot call it valid.
    for m in [Measured { exposure: None, ..clean() }, Measured { exposure: Some(0.0), ..clean() }, Measured { sections: 0, ..clean() }] {
        let v = verdict(&m, FencingMode::Both);
        assert_eq!((v.safety.as_str(), v.valid), ("not tested", Validity::Unknown), "{m:?}");
    }
    assert_eq!(verdict(&Measured { exposure: None, ..clean() }, FencingMode::Both).evidence, "none");
    // A tiny share is still time inside: weak, printed with its digits, not "0.0%".
    let tiny = verdict(&Measured { exposure: Some(0.00004), ..clean() }, FencingMode::Both);
    assert_eq!((tiny.safety.as_str(), tiny.valid), ("no violation seen", Validity::Valid));
    assert!(tiny.summary.contains("holders inside 0.0040% of the time"), "{}", tiny.summary);
}

#[test]
fn availability_is_judged_against_the_rate_without_faults() {
    let a = |gi, fm, go, om| Availability { grants_in_faults: gi, fault_ms: fm, grants_outside: go, outside_ms: om, ..Default::default() };
    // Long holds: one grant per 2.5 s both inside and outside the faults is available.
    let long = Availability::combine([&a(2, 5000, 4, 10000)]).unwrap();
    assert_eq!((long.ratio, long.label()), (Some(1.0), "available"));
    let stalled = Availability::combine([&a(10, 5000, 1000, 10000), &a(0, 5000, 1000, 10000)]).unwrap();
    assert_eq!(stalled.label(), "unavailable", "{stalled:?}");
    assert_eq!(Availability::combine([&a(5, 5000, 0, 10000)]).unwrap().label(), "unknown");
}

/// The resource's counters reach the model field by field (each a distinct value, so a
/// swapped pair shows), and a backend's counts are its phases' added up, without the
/// phase-only `stale_refused`.
#[test]
fn safety_counts_come_from_the_resource_and_add_up() {
    let c = dlbench_core::CellStats {
        sections: 100,
        overlaps: 1,
        lost_updates: 2,
        lost_updates_fenced: 3,
        stale_tokens: 4,
        rejected: 9,
        legit_refused: 5,
        token_inversions: 6,
        entered_expired: 7,
        writes: 8,
    };
    let p = SafetyCounts::of_phase(&c);
    let want = SafetyCounts {
        overlaps: 1,
        lost_updates: 2,
        stale_tokens: 4,
        lost_updates_fenced: 3,
        rejected: 9,
        stale_refused: Some(4),
        legit_refused: 5,
        token_inversions: 6,
    };
    assert_eq!(p, want);
    let total: SafetyCounts = [p.clone(), p].iter().sum();
    assert_eq!(
        total,
        SafetyCounts { overlaps: 2, lost_updates: 4, stale_tokens: 8, lost_updates_fenced: 6, rejected: 18, stale_refused: None, legit_refused: 10, token_inversions: 12 }
    );
}

/// Issue 48, item 5: a class needs strong evidence and a kept state. A CP backend that grants
/// nothing under a kill (refusal is strong) earns CP; the same with holders barely inside is
/// "not established"; a service whose tokens went back under the fault is not CP.
#[test]
fn a_class_needs_strong_evidence_and_a_kept_state() {
    let v = verdict(&under_faults(clean(), 0.0), FencingMode::Both);
    assert_eq!(v.class_observed.map(|c| c.as_str()), Some("CP"), "{}", v.summary);
    let mut weak = under_faults(clean(), 0.9);
    weak.windows[0].windows[0].strength = words::Strength::Weak;
    weak.windows[0].windows[0].evidence = "weak: holders inside 8.0% of the fault".into();
    let v = verdict(&weak, FencingMode::Both);
    assert_eq!(v.class_observed, None);
    assert!(v.class_note.as_deref().is_some_and(|n| n.starts_with("not established: weak evidence")), "{v:?}");
    // Weak over the whole phase, though no window saw a thing: not established either.
    let v = verdict(&under_faults(Measured { exposure: Some(0.08), ..clean() }, 0.0), FencingMode::Both);
    assert_eq!(v.class_observed, None, "{}", v.summary);
    // Tokens went back under the kill: fencing broken, and not consistent.
    let mut reset = under_faults(Measured { counts: SafetyCounts { rejected: 40, legit_refused: 40, token_inversions: 1, ..Default::default() }, ..clean() }, 0.0);
    reset.windows[0].windows[0].token_steps_back = 1;
    let v = verdict(&reset, FencingMode::Both);
    assert_eq!((v.safety, v.class_observed.map(|c| c.as_str())), (words::SafetyWord::FencingBroken, Some("neither")));
    assert!(v.contradiction && v.summary.contains("lost its state"), "{}", v.summary);
    assert!(contradictions(&v).is_empty(), "{:?}", contradictions(&v));
}

/// Issue 48, item 6: an axis that sets the exit status is in the headline. Two holders caught
/// by fencing fail `--fencing both`: the headline says the lock alone let them in.
#[test]
fn every_failed_axis_is_in_the_headline() {
    let caught = Measured { counts: SafetyCounts { overlaps: 2, lost_updates: 1, rejected: 1, ..Default::default() }, ..clean() };
    let v = verdict(&caught, FencingMode::Both);
    assert_eq!((v.safety, v.valid), (words::SafetyWord::SafeWithFencing, Validity::Invalid));
    assert_eq!(v.headline, "safe with fencing; two holders without fencing");
    assert_eq!(verdict(&caught, FencingMode::On).headline, "safe with fencing", "on: fencing's side passes");
    assert!(contradictions(&v).is_empty(), "{:?}", contradictions(&v));
}

/// Issue 48, item 3: a phase without a fault that granted nothing is never NOT RECOVERED;
/// a window the phase ended too soon to judge says so, and the exit is unknown.
#[test]
fn recovery_is_never_judged_without_room() {
    let mut nothing = clean();
    nothing.sections = 0;
    nothing.checks[4].valid = Validity::Unknown;
    let v = verdict(&nothing, FencingMode::Both);
    assert!(!v.headline.contains(NOT_RECOVERED), "{}", v.headline);
    let mut short = under_faults(clean(), 0.0);
    short.windows[0].windows[0].recovery = crate::checker::windows::Recovery::NotJudged { why: "the phase ended 800 ms after the heal, inside the 5000 ms the servers may need (TTL and election)".into() };
    let v = verdict(&short, FencingMode::Both);
    assert_eq!(v.valid, Validity::Unknown);
    assert!(v.headline.contains("recovery not judged: the phase ended 800 ms after the heal"), "{}", v.headline);
    assert!(!v.headline.contains(NOT_RECOVERED) && contradictions(&v).is_empty(), "{v:?}");
    let mut failed = under_faults(clean(), 0.0);
    failed.windows[0].windows[0].recovery = crate::checker::windows::Recovery::NotRecovered { waited_ms: 9000, later_ms: None };
    let v = verdict(&failed, FencingMode::Both);
    assert_eq!((v.valid, v.headline.as_str()), (Validity::Invalid, "safe; NOT RECOVERED"));
}

/// Issue 48, item 2: a scenario's choreography is judged by its expectation (met: valid,
/// whatever the lock did by design; missed: invalid, and the headline says so), never gets a
/// class, and a backend spanning it and a server fault takes its class from the fault alone.
#[test]
fn choreography_answers_to_its_expectation() {
    let paused = Measured {
        counts: SafetyCounts { overlaps: 3, lost_updates: 1, rejected: 1, ..Default::default() },
        expectation: Some(Expectation { entry: "S1".into(), met: true, words: "expected violation, observed 3 overlap(s)".into() }),
        unscripted: Some(Box::new(Measured { claimed: "CP".into(), ..Default::default() })),
        faults_applied: vec![],
        ..clean()
    };
    let v = verdict(&paused, FencingMode::Both);
    assert_eq!(v.valid, Validity::Valid, "{}", v.headline);
    assert!(v.headline.contains("as S1 expects") && v.class_observed.is_none(), "{v:?}");
    let missed = Measured { expectation: Some(Expectation { met: false, ..paused.expectation.clone().unwrap() }), ..paused.clone() };
    let v = verdict(&missed, FencingMode::Both);
    assert_eq!(v.valid, Validity::Invalid);
    assert!(v.headline.contains("CONTRADICTS S1's expectation"), "{}", v.headline);
    // S1 with S8's kill: the class is S8's, the paused holder's overlaps do not contradict CP.
    let s8 = under_faults(clean(), 0.1);
    let both = Measured { unscripted: Some(Box::new(s8.clone())), windows: s8.windows.clone(), faults_applied: s8.faults_applied.clone(), availability: s8.availability.clone(), ..paused };
    let v = verdict(&both, FencingMode::Both);
    assert_eq!((v.class_observed.map(|c| c.as_str()), v.contradiction, v.valid), (Some("CP"), false, Validity::Valid), "{}", v.summary);
    assert!(contradictions(&v).is_empty(), "{:?}", contradictions(&v));
}

/// The walker catches the records issue 48 found: "NOT RECOVERED" beside "recovered in 3025
/// ms", a consistent class beside two holders, a class from weak evidence, exit 1 under a
/// quiet headline.
#[test]
fn the_walker_catches_a_record_that_contradicts_itself() {
    let good = verdict(&under_faults(clean(), 0.9), FencingMode::Both);
    assert!(contradictions(&good).is_empty(), "{:?}", contradictions(&good));
    let mut bad = good.clone();
    bad.headline = "safe with fencing; NOT RECOVERED".into();
    bad.recovery_outcome = Some(crate::checker::windows::Recovery::Recovered { ms: 3025 });
    assert!(contradictions(&bad).iter().any(|c| c.starts_with("NOT RECOVERED beside a recovery")));
    let mut bad = good.clone();
    bad.safety = words::SafetyWord::Unsafe;
    assert!(contradictions(&bad).iter().any(|c| c.starts_with("a consistent class beside two holders")));
    let mut bad = good.clone();
    bad.evidence = words::Strength::Weak;
    assert!(contradictions(&bad).iter().any(|c| c.starts_with("a consistent class from weak evidence")));
    let mut bad = good;
    bad.valid = Validity::Invalid;
    assert!(contradictions(&bad).iter().any(|c| c.starts_with("exit 1 under a headline")));
}

/// Shares of time print in plain decimals at every size (issue 54: "5.9e-2%" once), with
/// the digits a small share needs and a floor under which it is "<0.001%".
#[test]
fn percent_prints_small_shares_readably() {
    for (share, want) in [
        (0.0, "0.0%"),
        (0.821, "82.1%"),
        (0.001, "0.1%"),
        (0.000999, "0.1%"),
        (0.00059, "0.059%"),
        (0.000042, "0.0042%"),
        (0.00001, "0.0010%"),
        (0.0000099, "<0.001%"),
        (1e-9, "<0.001%"),
    ] {
        let got = percent(share);
        assert_eq!(got, want, "percent({share})");
        assert!(!got.contains('e'), "e-notation: {got}");
    }
}
