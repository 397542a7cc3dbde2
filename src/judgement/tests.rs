//! The judgement's rules, each shown failing on a measurement built to break it.

use super::*;

fn check(name: &str, valid: Validity) -> CheckBrief {
    CheckBrief { checker: name.into(), valid, message: String::new() }
}

fn all_valid() -> Vec<CheckBrief> {
    ["mutual-exclusion", "lost-updates", "contention", "fencing", "availability"].iter().map(|n| check(n, Validity::Valid)).collect()
}

fn clean() -> Measured {
    Measured { has_tokens: true, sections: 100, checks: all_valid(), claimed: "CP".into(), exposure: Some(0.5), ..Default::default() }
}

fn under_faults(m: Measured, ratio: f64) -> Measured {
    Measured {
        faults_applied: vec!["kill".into()],
        availability: Some(Availability { ratio: Some(ratio), recovered: true, ..Default::default() }),
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
    assert_eq!((v.class_observed.as_deref(), v.availability.as_deref()), (Some("CP"), Some("unavailable")));
    assert_eq!(v.availability_rate.as_deref(), Some("10% of the no-fault rate"), "the rate, never \"0% unavailable\"");
    let v = verdict(&under_faults(clean(), 0.95), FencingMode::Both);
    assert_eq!(v.class_observed.as_deref(), Some("CP+A"));
    let violated = Measured { counts: SafetyCounts { overlaps: 1, lost_updates: 1, ..Default::default() }, ..clean() };
    let v = verdict(&under_faults(violated.clone(), 0.9), FencingMode::Both);
    assert_eq!(v.class_observed.as_deref(), Some("AP"));
    assert!(v.contradiction && v.summary.contains("CONTRADICTS"), "{}", v.summary);
    assert_eq!(verdict(&under_faults(violated, 0.5), FencingMode::Both).class_observed.as_deref(), Some("neither"));
    // Faults asked for but all skipped: no class, and the skip is said.
    let skipped = Measured { faults_skipped: vec!["clock".into()], availability: Some(Availability::default()), ..clean() };
    let v = verdict(&skipped, FencingMode::Both);
    assert_eq!((v.class_observed, v.availability), (None, None));
    assert!(v.summary.contains("skipped: clock"), "{}", v.summary);
    // Faults applied but availability not measured (no history): no class, and why.
    let unmeasured = Measured { faults_applied: vec!["kill".into()], availability_missing: Some("no history kept".into()), ..clean() };
    let v = verdict(&unmeasured, FencingMode::Both);
    assert_eq!((v.class_observed.as_deref(), v.availability.as_deref()), (None, None), "a missing availability is no class: {v:?}");
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
    assert!(tiny.summary.contains("holders inside 4.0e-3% of the time"), "{}", tiny.summary);
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
