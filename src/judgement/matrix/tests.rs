//! The matrix reads each fault's own windows.

use super::*;
use crate::judgement::tests::{window, windows};
use crate::judgement::{verdict, FencingMode, Measured};

fn phase(ws: Vec<WindowVerdict>) -> PhaseFacts {
    let m = Measured { sections: 100, exposure: Some(0.5), claimed: "CP".into(), ..Measured::default() };
    PhaseFacts { workload: "hot-key".into(), verdict: verdict(&m, FencingMode::Both), windows: Some(windows(ws)), ops_per_sec: 10.0, choreographed: false, overlaps: 0 }
}

fn backend(name: &str, phases: Vec<PhaseFacts>) -> BackendFacts {
    BackendFacts { name: name.into(), failure: None, phases }
}

/// A kill whose recovery the next fault cut short, then a partition the lock rode out: each
/// cell reads its own windows (the partition is not blamed for the kill's silence), and the
/// no-fault cell reads the quiet time.
#[test]
fn each_fault_cell_reads_its_own_windows() {
    let mut kill = window("kill:leader", 0.0);
    kill.longest_silence_ms = 3800;
    kill.recovery = crate::checker::windows::Recovery::CutShort { ms: Some(3800), next_fault_ms: 7000 };
    let part = window("partition", 0.92);
    let m = matrix(&[backend("etcd", vec![phase(vec![kill, part])])]);
    assert_eq!(m.columns, [NO_FAULT, "kill:leader", "partition"]);
    let k = m.rows[0].cells[1].as_ref().unwrap();
    assert_eq!(k.availability, Some("unavailable"));
    assert!(k.detail.as_deref().is_some_and(|d| d.contains("no grant for 3.8 s") && d.contains("cut short by the next fault at 7.0 s")), "{k:?}");
    let p = m.rows[0].cells[2].as_ref().unwrap();
    assert_eq!(p.availability, Some("available"));
    assert!(p.detail.as_deref().is_some_and(|d| !d.contains("no grant") && d.contains("recovered in 400 ms")), "{p:?}");
    let nf = m.rows[0].cells[0].as_ref().unwrap();
    assert_eq!((nf.safety, nf.detail.as_deref()), ("held", Some("hot-key 10 acq/s")));
}

/// Tokens that went back under a kill break fencing under the kill only: not under "no
/// fault", not under a pause in the same phase.
#[test]
fn a_broken_fence_belongs_to_the_fault_that_broke_it() {
    let mut kill = window("kill", 0.0);
    kill.token_steps_back = 1;
    kill.safety = crate::judgement::words::SafetyWord::FencingBroken;
    let m = matrix(&[backend("redis", vec![phase(vec![kill, window("pause", 0.5)])])]);
    let words: Vec<&str> = m.rows[0].cells.iter().map(|c| c.as_ref().unwrap().safety).collect();
    assert_eq!(words, ["held", "fencing broken", "held"]);
    assert!(m.rows[0].sentence.contains("under kill, but fencing broke (tokens went back 1 time(s)"), "{}", m.rows[0].sentence);
}

/// A fault that hit a stand-in says which node and why; a scenario's choreography is not a
/// column and its backend's sentence says where it is judged.
#[test]
fn stand_ins_are_named_and_choreography_stays_out() {
    let mut k = window("kill:leader", 0.6);
    k.stand_in = Some("redlock-2: redlock has no leader (its nodes are independent and equal)".into());
    let m = matrix(&[backend("redlock", vec![phase(vec![k])])]);
    assert!(m.rows[0].cells[1].as_ref().unwrap().detail.as_deref().is_some_and(|d| d.contains("hit redlock-2: redlock has no leader")));
    let mut s = phase(vec![window("kill", 0.0)]);
    s.choreographed = true;
    let m = matrix(&[backend("etcd", vec![s])]);
    assert_eq!(m.columns, [NO_FAULT]);
    assert!(m.rows[0].sentence.contains("choreography only"), "{}", m.rows[0].sentence);
}
