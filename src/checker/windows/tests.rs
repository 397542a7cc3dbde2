//! The windows on doctored histories: each rule shown failing where it would be wrong.

use crate::checker::windows::{Recovery, WindowsSeen};
use crate::checker::{check, Validity};
use crate::faultlog::{Effect, Mark, Side};
use crate::history::{Meta, Op, Record, Segment};

const MS: u64 = 1_000_000;

/// A history: one key, client `p` acquiring at each of `grants` (ms) and holding 50 ms,
/// tokens rising from 1.
struct H {
    records: Vec<Record>,
    token: u64,
    choreographed: bool,
}

impl H {
    fn new() -> H {
        H { records: Vec::new(), token: 0, choreographed: false }
    }

    fn grant_at(&mut self, p: u64, ms: u64) -> &mut Self {
        self.token += 1;
        let t = self.token;
        self.grant_with(p, ms, 50, t)
    }

    fn grant_with(&mut self, p: u64, ms: u64, hold_ms: u64, token: u64) -> &mut Self {
        let (a, b) = (ms * MS, (ms + hold_ms) * MS);
        self.records.push(Record::Invoke { p, f: Op::Acquire, key: 0, ns: a.saturating_sub(MS) });
        self.records.push(Record::Ok { p, f: Op::Acquire, key: 0, ns: a, token: Some(token), attempt: None });
        self.records.push(Record::Section { p, key: 0, token: Some(token), enter: a, exit: b, read_seq: None, read: None, write_seq: None, lease_lost: false, register: 0 });
        self.records.push(Record::Invoke { p, f: Op::Release, key: 0, ns: b });
        self.records.push(Record::Ok { p, f: Op::Release, key: 0, ns: b + 1, token: None, attempt: None });
        self
    }

    /// A client that keeps asking and is refused.
    fn refused_at(&mut self, p: u64, ms: u64) -> &mut Self {
        self.records.push(Record::Invoke { p, f: Op::Acquire, key: 0, ns: ms * MS });
        self.records.push(Record::Fail { p, f: Op::Acquire, key: 0, ns: ms * MS + 400 * MS, error: "unavailable".into(), kind: Some("unavailable".into()) });
        self
    }

    /// A client refused at once (a server that is down refuses the connection).
    fn failed_fast(&mut self, p: u64, ms: u64) -> &mut Self {
        self.records.push(Record::Invoke { p, f: Op::Acquire, key: 0, ns: ms * MS });
        self.records.push(Record::Fail { p, f: Op::Acquire, key: 0, ns: ms * MS + MS, error: "connection refused".into(), kind: Some("unavailable".into()) });
        self
    }

    fn every(&mut self, from_ms: u64, to_ms: u64, step: u64) -> &mut Self {
        let mut t = from_ms;
        while t < to_ms {
            self.grant_at(1 + (t / step) % 2, t);
            t += step;
        }
        self
    }

    fn fault(&mut self, f: &str, start_ms: u64, heal_ms: u64, effect: Effect) -> &mut Self {
        let side = Some(Side::of_name(f));
        for (mark, ms, e) in [(Mark::Start, start_ms, effect.clone()), (Mark::End, heal_ms, Effect::unchecked("restart"))] {
            self.records.push(Record::Nemesis { f: f.into(), phase: mark, targets: vec!["n1".into()], ns: ms * MS, detail: String::new(), effect: Some(e), side, stand_in: None });
        }
        self
    }

    fn seen(&self) -> (WindowsSeen, Validity) {
        let meta = Meta {
            backend: "etcd".into(),
            workload: "hot-key".into(),
            keys: vec!["k".into()],
            ttl_ms: 1000,
            fencing_tokens: true,
            started_at: String::new(),
            split_votes: false,
            granted_ttl: None,
            choreographed: self.choreographed,
            recovery_allowance_ms: Some(1000),
        };
        let v = check(&Segment { meta: Some(meta), records: self.records.clone() });
        let avail = v.results.iter().find(|r| r.checker == "availability").unwrap().valid;
        (v.windows.unwrap(), avail)
    }
}

fn killed() -> Effect {
    Effect::confirmed("n1 process gone")
}

/// A kill that stops every grant: refused attempts during it, no grant, the recovery to the
/// first grant after the heal, holders inside after it; the no-fault rate from the quiet time
/// alone (not dragged down by the outage or the recovery).
#[test]
fn a_kill_is_judged_in_its_own_window() {
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).every(5500, 12000, 100);
    for t in (3000..5000).step_by(200) {
        h.refused_at(9, t);
    }
    let (seen, valid) = h.seen();
    let w = &seen.windows[0];
    assert_eq!((w.grants_in_fault, w.attempts_refused), (0, 10));
    assert!(w.asked_fault > 0.9, "a client asked all along: {w:?}");
    assert_eq!(w.recovery, Recovery::Recovered { ms: 500 });
    assert!(w.longest_silence_ms >= 1900, "{w:?}");
    assert_eq!(w.span_end_ms, 6000, "heal + the 1 s TTL");
    assert!(w.exposure_after.is_some_and(|e| e > 0.2), "{w:?}");
    // 10 grants a second outside every fault's influence (start to TTL end / first grant).
    let rate = seen.quiet.grants as f64 / (seen.quiet.ms as f64 / 1000.0);
    assert!((rate - 10.0).abs() < 0.5, "{:?}", seen.quiet);
    assert_eq!(valid, Validity::Valid);
    // Clients refused at once, a few times a second, asked in every second of the fault too.
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).every(5500, 12000, 100);
    for t in (3000..5000).step_by(300) {
        h.failed_fast(9, t);
    }
    let w = &h.seen().0.windows[0];
    assert!(w.asked_fault > 0.99, "{w:?}");
    // One refusal in two seconds: asked in half of them.
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).failed_fast(9, 3500).every(5500, 12000, 100);
    let w = &h.seen().0.windows[0];
    assert!((w.asked_fault - 0.5).abs() < 0.01, "{w:?}");
}

/// A recovery the next fault cut short is measured to the grant that came (never dropped)
/// and marked; a recovery that never comes in the room the servers need is NOT recovered,
/// and one the phase ended too soon to see is not judged.
#[test]
fn recovery_is_measured_past_the_next_fault_and_judged_only_with_room() {
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill:leader", 2000, 3000, killed()).fault("pause", 3500, 4500, Effect::confirmed("stopped")).every(6000, 9000, 100);
    let (seen, _) = h.seen();
    assert_eq!(seen.windows[0].recovery, Recovery::CutShort { ms: Some(3000), next_fault_ms: 3500 });
    assert_eq!(seen.windows[1].recovery, Recovery::Recovered { ms: 1500 });
    // No grant after the heal, 5 s to the end (the room is 2 s): NOT recovered.
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill", 2000, 3000, killed()).refused_at(9, 7600);
    let (seen, valid) = h.seen();
    assert_eq!(seen.windows[0].recovery, Recovery::NotRecovered { waited_ms: 5000, later_ms: None });
    assert_eq!(valid, Validity::Invalid);
    // The next fault came 2.5 s after the heal, past the 2 s room, with no grant before it:
    // NOT recovered, and the grant that came later is reported, not taken as a recovery.
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill", 2000, 3000, killed()).fault("pause", 5500, 6000, Effect::confirmed("stopped")).every(8000, 12000, 100);
    let (seen, valid) = h.seen();
    assert_eq!(seen.windows[0].recovery, Recovery::NotRecovered { waited_ms: 2500, later_ms: Some(5000) });
    assert!(!seen.windows[0].recovery.words().contains("recovered in"), "{}", seen.windows[0].recovery.words());
    assert_eq!(valid, Validity::Invalid);
    // The phase ended 1 s after the heal, inside the 2 s room: not judged, never NOT RECOVERED.
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill", 2000, 3000, killed()).refused_at(9, 3600);
    let (seen, valid) = h.seen();
    assert!(matches!(seen.windows[0].recovery, Recovery::NotJudged { .. }), "{:?}", seen.windows[0].recovery);
    assert_eq!(valid, Validity::Unknown);
}

/// Two holders in the quiet time are the quiet time's, not the next fault's; two holders in a
/// fault's span are that fault's; a token that steps back is counted once, where the counter
/// went back, not at every later section.
#[test]
fn violations_are_placed_where_they_happened() {
    let mut h = H::new();
    h.every(0, 2000, 100);
    h.grant_with(5, 1020, 200, 99); // overlaps the holders of 1000 and 1100, in quiet time
    h.fault("kill", 3000, 4000, killed());
    h.every(4100, 8000, 100);
    h.grant_with(6, 4120, 100, 7); // a second holder right after the heal, a token back
    let (seen, _) = h.seen();
    // The stray [1020, 1220] enters inside 1000's section, and 1100's and 1200's enter inside it.
    assert_eq!(seen.quiet.overlaps, 3, "{:?}", seen.quiet);
    let w = &seen.windows[0];
    // [4120, 4220] enters inside 4100's, and 4200's inside it: both in the kill's span.
    assert_eq!(w.overlaps, 2, "{w:?}");
    // The counter stepped back once in the quiet time (99 -> the next) and once after the
    // heal (to 7), and not at every section after either.
    assert_eq!((seen.quiet.token_steps_back, w.token_steps_back), (1, 1), "{w:?} {:?}", seen.quiet);
}

/// A holder-side fault or a scenario's choreography never counts; with no fault that
/// counts, a history that granted nothing is not NOT RECOVERED (nothing was asked after a
/// heal): unknown.
#[test]
fn only_server_faults_outside_choreography_count() {
    let mut h = H::new();
    h.every(0, 2000, 100).fault("client-pause", 1000, 1500, Effect::confirmed("holder stopped"));
    let (seen, _) = h.seen();
    assert_eq!(seen.counted().count(), 0);
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill", 1000, 1500, killed());
    h.choreographed = true;
    let (seen, valid) = h.seen();
    assert_eq!((seen.counted().count(), valid), (0, Validity::Valid));
    let mut h = H::new();
    h.refused_at(1, 0).refused_at(2, 1000);
    assert_eq!(h.seen().1, Validity::Unknown, "no fault, no grant: unknown, not NOT RECOVERED");
    // An unchecked or idle kill is not counted either.
    let mut h = H::new();
    h.every(0, 2000, 100).fault("kill", 500, 800, Effect::unchecked("cannot tell")).fault("pause", 1000, 1200, Effect::none("NOT stopped"));
    assert_eq!(h.seen().0.counted().count(), 0);
}

/// A paused leader: grants in the fault's first 200 ms, then none while a client waits. The
/// tail after the last grant is measured and the clients asking in it cover the fault; where
/// grants run to the heal the tail is under one step, and a tail nobody asked in covers nothing.
#[test]
fn grants_that_stop_part_way_leave_a_tail_the_waiting_clients_cover() {
    let mut h = H::new();
    h.every(0, 3200, 100).fault("pause", 3000, 5000, killed()).every(5500, 12000, 100);
    for t in (3200..5000).step_by(200) {
        h.refused_at(9, t);
    }
    let w = &h.seen().0.windows[0];
    assert_eq!(w.grants_in_fault, 2, "{w:?}");
    assert!((1880..=1900).contains(&w.silent_tail_ms), "the last grant at 3100 ms: {w:?}");
    assert!(w.asked_tail > 0.99, "{w:?}");
    assert!(w.covered_fault.is_some_and(|c| c > 0.85 && c > w.exposure_fault.unwrap()), "{w:?}");
    // The same tail with nobody asking in it: covered only by the holders' 100 ms.
    let mut h = H::new();
    h.every(0, 3200, 100).fault("pause", 3000, 5000, killed()).every(5500, 12000, 100);
    let w = &h.seen().0.windows[0];
    assert_eq!(w.asked_tail, 0.0, "{w:?}");
    assert!(w.covered_fault.is_some_and(|c| c < 0.1), "{w:?}");
    // Grants all through the fault: the tail is under one step, the cover the holders'.
    let mut h = H::new();
    h.every(0, 12000, 100).fault("pause", 3000, 5000, killed());
    let w = &h.seen().0.windows[0];
    assert!(w.silent_tail_ms < 100, "{w:?}");
    assert!(w.covered_fault.is_some_and(|c| (c - w.exposure_fault.unwrap()).abs() < 0.06), "{w:?}");
}

/// The first grant after the heal late in the TTL's span, a client asking till then: the wait
/// and the holders after it cover the span; a grant past the span or at the heal covers
/// nothing more than the holders do.
#[test]
fn a_late_first_grant_after_the_heal_is_covered_by_the_clients_waiting_for_it() {
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).every(6500, 12000, 100);
    for t in (3000..6500).step_by(200) {
        h.refused_at(9, t);
    }
    let w = &h.seen().0.windows[0];
    assert_eq!(w.first_grant_after_heal_ms, Some(6500), "{w:?}");
    assert!(w.exposure_after.is_none_or(|e| e < 0.01), "the TTL's span ends at 6000: {w:?}");
    // The span after the heal is [5000, 6000): the first grant after it covers nothing.
    assert_eq!(w.covered_after, None, "{w:?}");
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).every(5500, 12000, 100);
    for t in (3000..5500).step_by(200) {
        h.refused_at(9, t);
    }
    let w = &h.seen().0.windows[0];
    assert!(w.covered_after.is_some_and(|c| c > 0.7 && c > w.exposure_after.unwrap()), "{w:?}");
    // A grant at the heal: nothing to cover before it, the holders speak alone.
    let mut h = H::new();
    h.every(0, 3000, 100).fault("kill", 3000, 5000, killed()).every(5000, 12000, 100);
    let w = &h.seen().0.windows[0];
    assert_eq!(w.covered_after, None, "{w:?}");
}

/// A frozen server whose thaw came a moment before the heal's stamp: the fault's only grant
/// in its last 50 ms, a client kept waiting from its start. The silence before that grant is
/// covered by the waiting client, as a tail after the last grant is; with nobody waiting it
/// is not; and a working lock's short gaps between grants (0 ms holds, a client always
/// waiting) are never a silence: there only the holders count.
#[test]
fn a_silence_before_the_faults_only_grant_is_covered_by_the_client_kept_waiting() {
    let frozen = |waiting: bool| {
        let mut h = H::new();
        h.every(0, 3000, 100).fault("pause", 3000, 5000, killed());
        if waiting {
            h.records.push(Record::Invoke { p: 9, f: Op::Acquire, key: 0, ns: 3010 * MS });
        }
        h.grant_with(8, 4960, 50, 1000).every(5100, 12000, 100);
        h.seen().0.windows[0].clone()
    };
    let w = frozen(true);
    assert_eq!(w.grants_in_fault, 1, "{w:?}");
    assert!(w.silent_tail_ms < 100, "no tail after the grant: {w:?}");
    assert!(w.exposure_fault.is_some_and(|e| e < 0.05), "{w:?}");
    assert!(w.covered_fault.is_some_and(|c| c > 0.9), "{w:?}");
    let w = frozen(false);
    assert!(w.covered_fault.is_some_and(|c| c < 0.05), "nobody waited: {w:?}");
    // Grants every 100 ms held 1 ms, one client always waiting: no silence, no cover.
    let mut h = H::new();
    for t in (0..12000).step_by(100) {
        h.grant_with(1 + (t / 100) % 2, t, 1, t + 1);
    }
    h.records.push(Record::Invoke { p: 9, f: Op::Acquire, key: 0, ns: 0 });
    let w = h.fault("pause", 3000, 5000, killed()).seen().0.windows[0].clone();
    assert!(w.covered_fault.is_some_and(|c| c < 0.1), "a working lock's gaps covered: {w:?}");
}
