//! `dlbench check` keeps one record, the checkers' open state and the sort's buffer in memory,
//! never the history: a long history checks in bounded memory. (Checking used to hold a whole
//! segment, about 490 MB per million operations.)

use crate::common;

use common::{dlbench, scratch};
use dlbench::synthetic::{self, Spec};

/// Peak resident memory of a command, in MB, and its exit code.
fn peak_rss_mb(cmd: &mut std::process::Command) -> (f64, Option<i32>) {
    let child = cmd.stdout(std::process::Stdio::null()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child by its PID, with zeroed out-parameters.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (usage.ru_maxrss as f64 / 1024.0, code)
}

/// Write a history of `operations` (30% of acquires with an unknown outcome), check it, and
/// return the checker's peak RSS in MB.
fn check_peak_mb(dir: &std::path::Path, operations: u64) -> f64 {
    let path = dir.join(format!("history-{operations}.jsonl"));
    // A share of acquires end with an unknown outcome: each retires its process, which a new
    // one replaces, so the number of processes grows with the history, the case that once
    // kept per-process state forever.
    let w = synthetic::write(&Spec { operations, unknown_share: 0.3, ..Spec::default() }, &path).unwrap();
    assert_eq!(w.operations, operations);
    assert!(w.unknown > operations / 10, "the history has unknown-outcome acquires: {}", w.unknown);
    let (mb, code) = peak_rss_mb(dlbench().arg("check").arg(&path).env("TMPDIR", dir));
    let mb_on_disk = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
    println!("dlbench check: {operations} operations, {mb_on_disk:.0} MB of history, peak RSS {mb:.0} MB");
    assert_eq!(code, Some(0), "a valid history checks valid");
    let _ = std::fs::remove_file(&path);
    mb
}

#[test]
fn checking_two_million_operations_stays_in_bounded_memory() {
    let dir = scratch("check-memory");
    let small = check_peak_mb(&dir, 500_000);
    let large = check_peak_mb(&dir, 2_000_000);
    assert!(large < 350.0, "peak RSS {large:.0} MB for 2 million operations: the checkers hold the history");
    // Four times the history, (almost) the same memory: any state kept per operation or per
    // process shows here long before it would matter at 350 MB.
    assert!(
        large < small * 1.25 + 20.0,
        "peak RSS grew from {small:.0} MB (500k operations) to {large:.0} MB (2M): the checkers keep state per operation"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
