//! Every checker on hand-built histories, including ones with violations it must find.

use dlbench::checker::{self, Validity};
use dlbench::history::{Meta, Op, Record, Segment};

fn meta(ttl_ms: u64, tokens: bool) -> Meta {
    Meta {
        backend: "test".into(),
        workload: "hand-made".into(),
        keys: vec!["k".into()],
        ttl_ms,
        fencing_tokens: tokens,
        started_at: "2026-01-01T00:00:00Z".into(),
    }
}

const MS: u64 = 1_000_000;

fn inv(p: u64, f: Op, t: u64) -> Record {
    Record::Invoke { p, f, key: 0, ns: t * MS }
}
fn ok(p: u64, f: Op, t: u64, token: Option<u64>) -> Record {
    Record::Ok { p, f, key: 0, ns: t * MS, token }
}
fn info(p: u64, f: Op, t: u64) -> Record {
    Record::Info { p, f, key: 0, ns: t * MS, error: "timeout".into() }
}
fn section(p: u64, token: Option<u64>, enter: u64, exit: u64, read: (u64, u64), write_seq: u64) -> Record {
    Record::Section {
        p,
        key: 0,
        token,
        enter: enter * MS,
        exit: exit * MS,
        read_seq: Some(read.0),
        read: Some(read.1),
        write_seq: Some(write_seq),
    }
}
fn seg(ttl_ms: u64, tokens: bool, records: Vec<Record>) -> Segment {
    Segment { meta: Some(meta(ttl_ms, tokens)), records }
}
fn result<'a>(v: &'a checker::SegmentVerdict, name: &str) -> &'a checker::CheckResult {
    v.results.iter().find(|r| r.checker == name).unwrap()
}

use Op::{Acquire as A, Release as R};

/// A then B, cleanly.
fn sequential() -> Vec<Record> {
    vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(10)),
        inv(1, R, 5),
        ok(1, R, 6, None),
        inv(2, A, 2),
        ok(2, A, 7, Some(11)),
        inv(2, R, 9),
        ok(2, R, 10, None),
    ]
}

#[test]
fn clean_history_is_valid() {
    let v = checker::check(&seg(10_000, true, sequential()));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Valid);
    assert_eq!(result(&v, "fencing").valid, Validity::Valid);
}

#[test]
fn one_overlap_is_invalid_and_names_both_ops() {
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(10)),
        inv(2, A, 2),
        ok(2, A, 3, Some(11)), // granted while 1 still holds
        inv(1, R, 5),
        ok(1, R, 6, None),
        inv(2, R, 7),
        ok(2, R, 8, None),
    ];
    let v = checker::check(&seg(10_000, true, h));
    let m = result(&v, "mutual-exclusion");
    assert_eq!(m.valid, Validity::Invalid);
    assert_eq!(v.valid, Validity::Invalid, "the segment verdict is the worst");
    let ops = &m.evidence[0].ops;
    let procs: Vec<u64> = ops.iter().map(|o| o.p).collect();
    assert_eq!(procs, vec![1, 2], "both holders named: {:?}", m.evidence);
    assert!(ops.iter().all(|o| o.f == A));
}

#[test]
fn an_unresolved_acquire_at_the_end_is_never_valid() {
    let mut h = sequential();
    h.push(inv(3, A, 11)); // never completes
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown);
    assert_ne!(v.valid, Validity::Valid);
}

#[test]
fn an_info_acquire_whose_lease_outlives_the_history_is_never_valid() {
    let mut h = sequential();
    h.push(inv(3, A, 11));
    h.push(info(3, A, 12));
    let v = checker::check(&seg(10_000, true, h.clone()));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown);
    // Once its TTL has certainly passed within the history, and nobody else held the key
    // meanwhile, the info acquire is harmless.
    h.push(inv(4, A, 30_000));
    h.push(ok(4, A, 30_001, Some(12)));
    h.push(inv(4, R, 30_002));
    h.push(ok(4, R, 30_003, None));
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Valid);
}

#[test]
fn an_info_acquire_clashing_with_a_holder_is_unknown_not_invalid() {
    let h = vec![
        inv(1, A, 0),
        info(1, A, 1), // may or may not hold from t=0 until t=0+ttl
        inv(2, A, 2),
        ok(2, A, 3, Some(11)),
        inv(2, R, 4),
        ok(2, R, 5, None),
        inv(3, A, 100),
        ok(3, A, 101, Some(12)),
        inv(3, R, 102),
        ok(3, R, 103, None),
    ];
    let v = checker::check(&seg(50, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown);
}

#[test]
fn overlapping_sections_are_invalid() {
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(5)),
        inv(2, A, 2),
        ok(2, A, 3, Some(6)),
        section(1, Some(5), 1, 10, (1, 0), 4), // 1 reads 0, writes at seq 4
        section(2, Some(6), 3, 5, (2, 0), 3),  // 2 reads 0, writes 1 at seq 3
        inv(2, R, 6),
        ok(2, R, 7, None),
        inv(1, R, 11),
        fail(1, R, 12),
    ];
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Invalid);
    // 1's write (read 0) lands on 1: process 2's update is lost...
    let lu = result(&v, "lost-updates");
    assert_eq!(lu.valid, Validity::Invalid);
    assert_eq!(lu.figures["lost_updates"], 1);
    assert_eq!(lu.evidence[0].ops[0].p, 1);
    assert_eq!(lu.evidence[0].ops[1].p, 2);
    // ...but a fenced register refuses 1's stale write (token 5 after 6): nothing lost.
    let f = result(&v, "fencing");
    assert_eq!(f.valid, Validity::Valid, "{}", f.message);
    assert_eq!(f.figures["rejected"], 1);
    assert_eq!(f.figures["lost_updates_fenced"], 0);
}

fn fail(p: u64, f: Op, t: u64) -> Record {
    Record::Fail { p, f, key: 0, ns: t * MS, error: "not held".into() }
}

#[test]
fn a_token_inversion_is_invalid() {
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(10)),
        inv(1, R, 2),
        ok(1, R, 3, None),
        inv(2, A, 4),
        ok(2, A, 5, Some(9)), // lower than the previous holder's
        inv(2, R, 6),
        ok(2, R, 7, None),
    ];
    let v = checker::check(&seg(10_000, true, h));
    let f = result(&v, "fencing");
    assert_eq!(f.valid, Validity::Invalid);
    assert_eq!(f.evidence[0].ops.len(), 2);
}

#[test]
fn without_tokens_fencing_is_unknown() {
    let mut h = sequential();
    for r in &mut h {
        if let Record::Ok { token, .. } = r {
            *token = None;
        }
    }
    // Tokens missing although the backend claims them: cannot decide.
    let v = checker::check(&seg(10_000, true, h.clone()));
    assert_eq!(result(&v, "fencing").valid, Validity::Unknown);
    // A backend that declares no tokens is not asked the fencing question at all.
    let v = checker::check(&seg(10_000, false, h));
    assert!(v.results.iter().all(|r| r.checker != "fencing"));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Valid);
}

#[test]
fn availability_measures_the_gap_and_recovery() {
    let mut h = Vec::new();
    let mut t = 0;
    let mut p = 0;
    let mut cycle = |h: &mut Vec<Record>, at: u64| {
        p += 1;
        h.extend([inv(p, A, at), ok(p, A, at + 1, Some(p)), inv(p, R, at + 2), ok(p, R, at + 3, None)]);
    };
    while t < 3000 {
        cycle(&mut h, t);
        t += 100;
    }
    h.push(Record::Nemesis { f: "kill".into(), phase: "start".into(), targets: vec!["n1".into()], ns: 3000 * MS, detail: String::new() });
    // Nothing succeeds for 2 s.
    h.push(Record::Nemesis { f: "kill".into(), phase: "end".into(), targets: vec!["n1".into()], ns: 4000 * MS, detail: String::new() });
    t = 5000;
    while t < 8000 {
        cycle(&mut h, t);
        t += 100;
    }
    let v = checker::check(&seg(10_000, true, h.clone()));
    let a = result(&v, "availability");
    assert_eq!(a.valid, Validity::Valid);
    assert!(a.figures["longest_gap_ms"].as_u64().unwrap() >= 2000, "{}", a.figures);
    assert!(a.figures["recovery_ms"].as_u64().unwrap() >= 2000);
    assert_eq!(a.figures["success_seconds_pct"], 0.0, "no success during the fault window");
    // Never again after the heal: invalid.
    h.retain(|r| r.ns().is_none_or(|ns| ns < 4500 * MS));
    h.push(inv(999, A, 6000));
    h.push(Record::Fail { p: 999, f: A, key: 0, ns: 9000 * MS, error: "unavailable".into() });
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "availability").valid, Validity::Invalid);
}
