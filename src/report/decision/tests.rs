//! The decision table on a real default run (tests/fixtures/decision: `dlbench run` on the
//! five seed backends, its time series dropped), and on that run doctored to fail each rule.

use super::*;
use crate::summary::decision::RUN_FOR_FAULTS;
use crate::summary::Summary;

fn run() -> Summary {
    let text = include_str!("../../../tests/fixtures/decision/summary.json");
    serde_json::from_str(text).expect("the fixture reads as a summary")
}

/// One row per backend, in family order, every fault cell filled with a class, within 100
/// columns; speed columns per workload, never pooled.
#[test]
fn the_default_run_answers_in_one_table_within_100_columns() {
    let s = run();
    let d = s.decision();
    assert_eq!(d.speed, ["hot-key", "many-keys"]);
    assert_eq!(d.faults, ["kill:leader", "pause:leader"]);
    let t = terminal(&d);
    let widest = t.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= WIDTH, "{widest} columns:\n{t}");
    assert!(t.starts_with(HEADING), "{t}");
    let names: Vec<&str> = t.lines().skip(3).take(5).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["postgres", "redis", "redlock", "zookeeper", "etcd"], "{t}");
    for r in &d.rows {
        let f = r.faults.as_ref().unwrap_or_else(|| panic!("{}: no fault cells\n{t}", r.backend));
        assert!(!f.class.ends_with('?'), "{}: a class observed: {}", r.backend, r.sentence);
        assert!(!f.safety.contains("no violation seen"), "{}: the fault round's word is earned: {}", r.backend, r.sentence);
    }
    // Each speed cell is its own workload's figure.
    for (r, b) in d.rows.iter().zip(["postgres", "redis", "redlock", "zookeeper", "etcd"]) {
        let backend = s.backends.iter().find(|x| x.name == b).unwrap();
        for (cell, name) in r.speed.iter().zip(&d.speed) {
            let w = backend.workloads.iter().find(|w| &w.name == name).unwrap();
            assert_eq!(cell, &format!("{:.0}", w.ops_per_sec), "{b} {name}");
        }
    }
    // summary.md and the page open with the same rows.
    let md = markdown(&d);
    assert!(md.contains("| redis | 1 RAM |"), "{md}");
    assert!(html(&d).contains("<td>redis</td><td class=\"minor\">1 RAM</td>"), "{}", html(&d));
}

/// A run without faults says so in every fault cell and names the command that measures
/// them; long names move columns into the sentences instead of widening the table.
#[test]
fn what_was_not_measured_is_said_with_the_command_that_measures_it() {
    let mut s = run();
    for b in &mut s.backends {
        b.workloads.retain(|w| w.faults_applied().is_empty());
    }
    let d = s.decision();
    assert!(d.faults.is_empty());
    let t = terminal(&d);
    assert!(d.rows.iter().all(|r| r.faults.is_none() && r.sentence.contains(RUN_FOR_FAULTS)), "{t}");
    assert!(t.contains("not measured"), "{t}");
    // Weak evidence under faults names what would earn the word.
    let mut weak = run();
    for w in weak.backends[0].workloads.iter_mut().filter(|w| !w.faults_applied().is_empty()) {
        w.verdict.as_mut().unwrap().evidence = crate::judgement::words::Strength::Weak;
    }
    let d = weak.decision();
    assert!(d.rows[0].sentence.contains("--hold 200ms"), "{}", d.rows[0].sentence);
    assert!(!d.rows[1].sentence.contains("--hold"), "{}", d.rows[1].sentence);
    // The widest names of the designs, and a third workload: the table still fits.
    let mut wide = run();
    for (b, name) in wide.backends.iter_mut().zip(["pg-advisory-xact", "mariadb-get-lock", "redisson@relaxed", "zookeeper@strict", "etcd-v3lock@strict"]) {
        b.name = name.into();
        let mut extra = b.workloads[0].clone();
        extra.name = "open-loop-long".into();
        b.workloads.insert(1, extra);
    }
    let t = terminal(&wide.decision());
    let widest = t.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= WIDTH, "{widest} columns:\n{t}");
    assert!(t.contains("nodes 1"), "the nodes moved into the sentences:\n{t}");
}

/// The README shows command 1's decision table as it prints: its block is this renderer's
/// output for the run the fixture holds (the same run), so a change of layout that the README
/// does not follow fails here.
#[test]
fn the_readme_shows_the_table_as_it_prints() {
    let readme = include_str!("../../../README.md");
    let after = readme.split("Command 1 prints the decision table").nth(1).expect("the README introduces the table");
    let block = after.split("```text\n").nth(1).and_then(|b| b.split("\n```").next()).expect("a text block");
    let printed = terminal(&run().decision());
    assert_eq!(block.trim_end(), printed.trim_end(), "README.md's block differs from what prints");
}
