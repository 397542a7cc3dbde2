//! Every checker on hand-built histories, including ones with violations it must find.

use dlbench::checker::{self, Validity};
use dlbench::faultlog::{Effect, Mark};
use dlbench::history::{Meta, Op, Record, Segment};

fn meta(ttl_ms: u64, tokens: bool) -> Meta {
    Meta {
        backend: "test".into(),
        workload: "hand-made".into(),
        keys: vec!["k".into()],
        ttl_ms,
        fencing_tokens: tokens,
        started_at: "2026-01-01T00:00:00Z".into(),
        split_votes: false,
        granted_ttl: None,
        choreographed: false,
        recovery_allowance_ms: None,
    }
}

const MS: u64 = 1_000_000;

fn inv(p: u64, f: Op, t: u64) -> Record {
    Record::Invoke { p, f, key: 0, ns: t * MS }
}
fn ok(p: u64, f: Op, t: u64, token: Option<u64>) -> Record {
    Record::Ok { p, f, key: 0, ns: t * MS, token, attempt: None }
}
/// A server-side fault's mark that took effect (as the nemesis records one it saw act).
fn nemesis(f: &str, phase: Mark, targets: &[&str], t: u64) -> Record {
    Record::Nemesis {
        f: f.into(),
        phase,
        targets: targets.iter().map(|t| t.to_string()).collect(),
        ns: t * MS,
        detail: String::new(),
        effect: Some(Effect::confirmed("seen to act")),
        side: None,
        stand_in: None,
    }
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
        lease_lost: false,
        register: 0,
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

/// `section` on register `r` (a shard's own resource, in a merge of `run --shard`).
fn on(r: u32, mut s: Record) -> Record {
    s.set_register(r);
    s
}

#[test]
fn each_shards_register_is_replayed_apart() {
    // Shard 0's and shard 1's sections interleave on key 0, each numbered by its own
    // resource from 1: replayed per register, nothing is lost.
    let apart = vec![
        on(0, section(1, None, 1, 2, (1, 0), 2)),
        on(1, section(2, None, 3, 4, (1, 0), 2)),
        on(1, section(2, None, 5, 6, (3, 1), 4)),
        on(0, section(1, None, 7, 8, (3, 1), 4)),
    ];
    let v = checker::check(&seg(10_000, false, apart.clone()));
    let l = result(&v, "lost-updates");
    assert_eq!(l.valid, Validity::Valid, "{:?}", l);
    assert_eq!(l.figures["sections"], 4);
    // Two holders inside shard 1's register at once: the write of the later one lands on
    // a value it did not read, found although shard 0's register is beside it.
    let mut lost = apart;
    lost.push(on(1, section(3, None, 9, 12, (5, 2), 7)));
    lost.push(on(1, section(4, None, 10, 13, (6, 2), 8)));
    let v = checker::check(&seg(10_000, false, lost));
    assert_eq!(result(&v, "lost-updates").valid, Validity::Invalid);
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

/// The window an unknown acquire may hold is the TTL the servers granted, not the one asked
/// for: etcd's 50 ms request is a lease of 1 s, so a grant 100 ms later may clash with it; a
/// lock with no TTL (advisory, `GET_LOCK`) is bounded by nothing.
#[test]
fn an_unknown_acquire_holds_for_the_granted_ttl_not_the_requested_one() {
    use dlbench_core::GrantedTtl;
    let h = vec![
        inv(1, A, 0),
        info(1, A, 1),
        inv(2, A, 100),
        ok(2, A, 101, Some(11)),
        inv(2, R, 102),
        ok(2, R, 103, None),
    ];
    let judged = |granted: Option<GrantedTtl>| {
        let mut s = seg(50, true, h.clone());
        s.meta.as_mut().unwrap().granted_ttl = granted;
        result(&checker::check(&s), "mutual-exclusion").valid
    };
    assert_eq!(judged(None), Validity::Valid, "requested 50 ms: the window closed before 100 ms");
    assert_eq!(judged(Some(GrantedTtl::Lock { ms: 50 })), Validity::Valid);
    assert_eq!(judged(Some(GrantedTtl::Session { ms: 1000 })), Validity::Unknown, "granted 1 s: 101 ms is inside it");
    assert_eq!(judged(Some(GrantedTtl::None)), Validity::Unknown, "no TTL: nothing bounds the unknown acquire");
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
    Record::Fail { p, f, key: 0, ns: t * MS, error: "not held".into(), kind: None }
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
    h.push(nemesis("kill", Mark::Start, &["n1"], 3000));
    // Nothing succeeds for 2 s.
    h.push(nemesis("kill", Mark::End, &["n1"], 4000));
    t = 5000;
    while t < 8000 {
        cycle(&mut h, t);
        t += 100;
    }
    let v = checker::check(&seg(10_000, true, h.clone()));
    let a = result(&v, "availability");
    assert_eq!(a.valid, Validity::Valid);
    assert!(a.figures["longest_gap_ms"].as_u64().unwrap() >= 2000, "{}", a.figures);
    // Recovery counts from the heal (4 s) to the first grant after it (5.001 s).
    assert_eq!(a.figures["recovery_ms"].as_u64().unwrap(), 1001, "{}", a.figures);
    assert_eq!(a.figures["faults"][0]["first_success_after_ms"].as_u64().unwrap(), 2001);
    assert_eq!(a.figures["success_seconds_pct"], 0.0, "no success during the fault window");
    assert_eq!(a.figures["ratio"], 0.0, "no grant during the fault, ten a second outside it");
    // Never again after the heal, for longer than the 10 s TTL the servers may keep a lost
    // holder's claim: invalid.
    h.retain(|r| r.ns().is_none_or(|ns| ns < 4500 * MS));
    h.push(inv(999, A, 6000));
    h.push(Record::Fail { p: 999, f: A, key: 0, ns: 15_000 * MS, error: "unavailable".into(), kind: None });
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "availability").valid, Validity::Invalid);
}

/// The unknown-outcome window runs to the acquire's completion plus the TTL: a polling
/// acquire can be granted until it completes, a session lock keeps its claim while waiting.
#[test]
fn an_info_acquires_window_runs_from_its_completion_not_its_invocation() {
    let h = vec![
        inv(1, A, 0),
        info(1, A, 200), // invoked at 0, unknown at 200; TTL 50: may hold until 250
        inv(2, A, 100),
        ok(2, A, 210, Some(11)),
        inv(2, R, 220),
        ok(2, R, 230, None),
        inv(3, A, 1000),
        ok(3, A, 1001, Some(12)),
        inv(3, R, 1002),
        ok(3, R, 1003, None),
    ];
    let v = checker::check(&seg(50, true, h));
    // invoke + TTL would have closed the window at 50, before process 2 held the key.
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown, "{:?}", result(&v, "mutual-exclusion"));
}

/// An acquire that never completed may be granted at any time after: its window stays open
/// however long the history runs on, whatever the TTL.
#[test]
fn an_acquire_that_never_completed_stays_open_to_the_end() {
    let mut h = vec![inv(9, A, 0)];
    h.extend([inv(1, A, 50_000), ok(1, A, 50_001, Some(10)), inv(1, R, 50_002), ok(1, R, 50_003, None)]);
    let v = checker::check(&seg(100, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown);
}

/// With sections, an acquire of unknown outcome never entered the resource and cannot damage
/// it: the answer rests on the sections.
#[test]
fn with_sections_unknown_acquires_do_not_blur_the_answer() {
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(5)),
        section(1, Some(5), 1, 2, (1, 0), 2),
        inv(1, R, 3),
        ok(1, R, 4, None),
        inv(2, A, 5), // never completes
    ];
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Valid);
}

fn busy(p: u64, t: u64) -> Record {
    Record::Fail { p, f: A, key: 0, ns: t * MS, error: "not acquired: wait timeout of 100ms elapsed".into(), kind: Some("timeout".into()) }
}

/// A wait that timed out while nobody held or wanted the key: the lock holds it for someone
/// the history does not know.
#[test]
fn contention_with_nobody_is_invalid() {
    let h = vec![inv(1, A, 0), ok(1, A, 1, Some(5)), inv(1, R, 2), ok(1, R, 3, None), inv(2, A, 10), busy(2, 110)];
    let v = checker::check(&seg(10_000, true, h));
    let c = result(&v, "contention");
    assert_eq!(c.valid, Validity::Invalid, "{}", c.message);
    assert_eq!(c.evidence[0].ops[0].p, 2);
    assert_eq!(v.valid, Validity::Invalid);
}

#[test]
fn contention_explained_by_a_holder_or_a_rival_is_valid() {
    // Process 1 holds the key while 2 waits in vain.
    let held = vec![inv(1, A, 0), ok(1, A, 1, Some(5)), inv(2, A, 10), busy(2, 110), inv(1, R, 200), ok(1, R, 201, None)];
    assert_eq!(result(&checker::check(&seg(10_000, true, held)), "contention").valid, Validity::Valid);
    // Two rivals whose claims clash (a Redlock split vote) both fail: on a design that can
    // split its votes each explains the other...
    let split = vec![inv(1, A, 0), inv(2, A, 0), busy(1, 100), busy(2, 100)];
    let mut votes = seg(10_000, true, split.clone());
    votes.meta.as_mut().unwrap().split_votes = true;
    assert_eq!(result(&checker::check(&votes), "contention").valid, Validity::Valid);
    // ...and on one that cannot, a failed acquire holds nothing, so nothing explains either
    // refusal.
    assert_eq!(result(&checker::check(&seg(10_000, true, split)), "contention").valid, Validity::Invalid);
    // A holder whose release failed keeps its claim for a TTL after.
    let stuck = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(5)),
        inv(1, R, 2),
        Record::Info { p: 1, f: R, key: 0, ns: 3 * MS, error: "timeout".into() },
        inv(2, A, 500),
        busy(2, 600),
    ];
    assert_eq!(result(&checker::check(&seg(10_000, true, stuck.clone())), "contention").valid, Validity::Valid);
    // ...but not forever: with a 100 ms TTL the claim is gone by 500 ms.
    assert_eq!(result(&checker::check(&seg(100, true, stuck)), "contention").valid, Validity::Invalid);
}

#[test]
fn contention_with_nobody_during_a_fault_is_unknown() {
    let h = vec![
        nemesis("partition", Mark::Start, &["n1"], 5),
        inv(2, A, 10),
        busy(2, 110),
        nemesis("partition", Mark::End, &["n1"], 200),
        inv(2, A, 20_000),
        ok(2, A, 20_001, Some(3)),
    ];
    assert_eq!(result(&checker::check(&seg(1_000, true, h)), "contention").valid, Validity::Unknown);
}

/// A token counter reset (a restart without persistence): the next holder, lease valid,
/// presents a lower token and the fenced register refuses it. Fencing broken, not "safe".
#[test]
fn a_token_reset_refusing_a_legitimate_holder_breaks_fencing() {
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(100)),
        section(1, Some(100), 1, 2, (1, 0), 2),
        inv(1, R, 3),
        ok(1, R, 4, None),
        inv(2, A, 5),
        ok(2, A, 6, Some(1)),
        section(2, Some(1), 6, 7, (3, 1), 4),
        inv(2, R, 8),
        ok(2, R, 9, None),
    ];
    let v = checker::check(&seg(10_000, true, h));
    let f = result(&v, "fencing");
    assert_eq!(f.valid, Validity::Invalid, "{}", f.message);
    assert_eq!((f.figures["legit_refused"].as_u64(), f.figures["token_inversions"].as_u64()), (Some(1), Some(1)));
    assert_eq!(f.figures["stale_refused"], 0);
}

/// The same refusal of a holder whose lease was already lost as it entered (granted after
/// expiry) is a stale write caught.
#[test]
fn a_late_holder_with_a_lost_lease_is_stale_not_legitimate() {
    let mut late = section(2, Some(1), 6, 7, (3, 1), 4);
    if let Record::Section { lease_lost, .. } = &mut late {
        *lease_lost = true;
    }
    let h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(100)),
        section(1, Some(100), 1, 2, (1, 0), 2),
        inv(1, R, 3),
        ok(1, R, 4, None),
        inv(2, A, 5),
        ok(2, A, 6, Some(1)),
        late,
        inv(2, R, 8),
        ok(2, R, 9, None),
    ];
    let f = result(&checker::check(&seg(10_000, true, h)), "fencing").clone();
    assert_eq!(f.valid, Validity::Valid, "{}", f.message);
    assert_eq!(f.figures["stale_refused"], 1);
}

/// Long holds leave seconds without a grant even without faults: availability is the grant
/// rate during the fault against the rate outside it, so they read as available.
#[test]
fn availability_with_long_holds_is_judged_against_the_rate_without_faults() {
    let mut h = Vec::new();
    let mut p = 0;
    let mut t = 0;
    while t < 30_000 {
        p += 1;
        h.extend([inv(p, A, t), ok(p, A, t + 1, Some(p)), inv(p, R, t + 2400), ok(p, R, t + 2401, None)]);
        t += 2500;
    }
    h.push(nemesis("pause", Mark::Start, &["n2"], 10_000));
    h.push(nemesis("pause", Mark::End, &["n2"], 20_000));
    h.sort_by_key(|r| r.ns());
    let v = checker::check(&seg(10_000, true, h));
    let a = result(&v, "availability");
    assert!(a.figures["success_seconds_pct"].as_f64().unwrap() < 50.0, "most fault seconds have no grant: {}", a.figures);
    let ratio = a.figures["ratio"].as_f64().unwrap();
    assert!((0.8..=1.25).contains(&ratio), "the same rate as without faults: {}", a.figures);
}

/// Faults the nemesis skipped are not fault windows.
#[test]
fn skipped_faults_are_not_windows() {
    let mut h = sequential();
    h.push(Record::Nemesis { f: "clock".into(), phase: Mark::Skipped, targets: vec![], ns: 3 * MS, detail: "cannot".into(), effect: None, side: None, stand_in: None });
    let v = checker::check(&seg(10_000, true, h));
    let a = result(&v, "availability");
    assert_eq!(a.figures["faults_applied"], 0);
    assert_eq!(a.figures["skipped"].as_array().unwrap().len(), 1);
}

/// What the driver writes for an acquire the interrupt cut short.
fn cancelled(p: u64, t: u64) -> Record {
    Record::Info { p, f: A, key: 0, ns: t * MS, error: format!("outcome unknown: {}", dlbench::history::CANCELLED) }
}

/// An interrupted history (sections recorded, as the driver writes them): what completed is
/// judged `valid`, the verdict says "interrupted" and counts the cancelled acquires; the same
/// history without the interrupt record is not called interrupted.
#[test]
fn an_interrupted_history_is_judged_on_what_completed_and_says_so() {
    let mut h = vec![
        inv(1, A, 0),
        ok(1, A, 1, Some(10)),
        section(1, Some(10), 1, 4, (1, 0), 2),
        inv(1, R, 5),
        ok(1, R, 6, None),
        inv(2, A, 2),
        ok(2, A, 7, Some(11)),
        section(2, Some(11), 7, 9, (3, 1), 4),
        inv(2, R, 9),
        ok(2, R, 10, None),
        inv(3, A, 11),
        cancelled(3, 12),
    ];
    let plain = checker::check(&seg(10_000, true, h.clone()));
    assert_eq!(plain.interrupted_ns, None, "no interrupt record, not interrupted");
    assert!(!plain.describe().contains("interrupted"));
    h.push(Record::Interrupted { ns: 12 * MS });
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(v.interrupted_ns, Some(12 * MS));
    assert_eq!(v.cancelled, 1);
    assert_eq!(v.valid, Validity::Valid, "{:?}", v.results);
    assert!(v.describe().contains("interrupted"), "{}", v.describe());
    assert!(checker::interrupted([&v]));
}

/// Without sections, a cancelled acquire keeps its unknown-outcome window: an interrupt does
/// not make a history whose last acquire may still hold `valid`.
#[test]
fn a_cancelled_acquire_keeps_its_unknown_outcome_window() {
    let mut h = sequential();
    h.push(inv(3, A, 11));
    h.push(cancelled(3, 12));
    h.push(Record::Interrupted { ns: 12 * MS });
    let v = checker::check(&seg(10_000, true, h));
    assert_eq!(result(&v, "mutual-exclusion").valid, Validity::Unknown);
    assert_eq!(v.cancelled, 1);
    assert!(v.interrupted_ns.is_some());
}

/// Issue 48's doctored histories (tests/fixtures/issue48/make.py), read by `dlbench check`
/// as a user would: a recovery the next fault cut short is said, not pooled; one that did
/// not come within the room before the next fault is NOT recovered, whatever came later; a
/// fault without evidence and a holder's own pause ask no recovery of the servers.
#[test]
fn doctored_histories_of_issue_48() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/issue48");
    let check = |name: &str| {
        let out = crate::common::dlbench().arg("check").arg(dir.join(name)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        let line = text.lines().find(|l| l.trim_start().starts_with("availability")).unwrap_or_default().to_string();
        (out.status.code(), line, text)
    };
    let (code, line, text) = check("cut-short.jsonl");
    assert_eq!(code, Some(0), "{text}");
    assert!(line.contains("kill:leader: cut short by the next fault at 7.0 s (first grant 3800 ms after the heal)"), "{line}");
    assert!(!line.contains("within 3800 ms"), "the cut-short time is not a judged recovery: {line}");
    let (code, line, text) = check("late.jsonl");
    assert_eq!(code, Some(1), "{text}");
    assert!(line.contains("invalid") && line.contains("no successful acquisition in the 6000 ms after a heal"), "{line}");
    for quiet in ["no-evidence.jsonl", "holder-side.jsonl"] {
        let (code, line, text) = check(quiet);
        assert_eq!(code, Some(0), "{text}");
        assert!(line.contains("no fault counted"), "{quiet}: {line}");
    }
}
