//! What a new user meets on day one (issue 54): the list of scenarios, `--backend` on `run`,
//! the fault targets in `run --help`, the fault preamble of a run, and `check` on the
//! history of a killed run. Each was a stumble once; each test fails on the old behaviour.

use crate::common;

use std::process::Stdio;

use common::{dlbench, scratch};

/// `dlbench scenario list` prints every catalogue entry, one a line, with its title (and
/// source where it has one), and exits 0; `scenario --help` says so. It once exited 2 with
/// `no scenario "list"`.
#[test]
fn scenario_list_prints_every_entry_with_its_title() {
    let out = dlbench().args(["scenario", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), dlbench::catalogue::CATALOGUE.len(), "one line per entry:\n{text}");
    for (l, e) in lines.iter().zip(dlbench::catalogue::CATALOGUE) {
        assert_eq!(l.split_whitespace().next(), Some(e.id), "in catalogue order: {l}");
        assert!(l.contains(e.title), "{} without its title: {l}", e.id);
        if let Some(p) = e.published {
            assert!(l.contains(p.source), "{} without its source: {l}", e.id);
        }
    }
    let help = String::from_utf8_lossy(&dlbench().args(["scenario", "--help"]).output().unwrap().stdout).to_string();
    assert!(help.contains("dlbench scenario list"), "scenario --help does not mention the list:\n{help}");
    // A wrong id names the list command.
    let out = dlbench().args(["scenario", "S99"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dlbench scenario list"));
}

/// `run` takes `--backend` as an alias of `--backends`, as `scenario` and `lock` take it;
/// clap once refused it ("unexpected argument").
#[test]
fn run_takes_the_backend_alias() {
    let dir = scratch("run-backend-alias");
    let out = dlbench().args(["run", "--backend", "nosuch", "--out"]).arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("unexpected argument"), "--backend is not accepted: {err}");
    assert!(err.contains("unknown backend \"nosuch\""), "dlbench, not clap, refused the name: {err}");
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing created in {}", dir.display());
    let help = String::from_utf8_lossy(&dlbench().args(["run", "--help"]).output().unwrap().stdout).to_string();
    assert!(help.contains("[alias: --backend]") || help.contains("[aliases: --backend]"), "{help}");
}

/// `run --help` names every fault and every target the parser accepts (`follower` was once
/// missing): the help is written from the parser's own lists.
#[test]
fn run_help_names_every_fault_and_target_the_parser_accepts() {
    let help = String::from_utf8_lossy(&dlbench().args(["run", "--help"]).output().unwrap().stdout).to_string();
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let nemesis = flat.split("--nemesis <NEMESIS>").nth(1).expect("--nemesis in run --help");
    let nemesis = &nemesis[..nemesis.find("[default: none]").expect("its default")];
    for (name, _) in dlbench::nemesis::FAULT_NAMES {
        assert!(nemesis.contains(name), "fault {name} missing: {nemesis}");
        assert!(format!("{name}:leader").parse::<dlbench::nemesis::FaultSpec>().is_ok(), "{name} does not parse");
    }
    for (name, _) in dlbench::nemesis::TARGET_NAMES {
        assert!(nemesis.contains(&format!(":{name}")), "target :{name} missing: {nemesis}");
        assert!(format!("kill:{name}").parse::<dlbench::nemesis::FaultSpec>().is_ok(), "{name} does not parse");
    }
    assert!(nemesis.contains(":follower"), "{nemesis}");
    // The parser's refusal lists the same names.
    let err = "kill:nobody".parse::<dlbench::nemesis::FaultSpec>().unwrap_err();
    assert!(err.contains("follower") && err.contains("majority"), "{err}");
}

/// The fault preamble lists, of the faults the target cannot inject, only those asked for
/// (it once listed clock, failover and power-loss on every run with faults), and names on
/// the terminal a fault asked for that a backend will skip: partition on single-node Redis,
/// before the run and again under the AP / CP table, as summary.json says it.
#[test]
fn the_fault_preamble_names_what_was_asked_and_will_be_skipped() {
    let _g = common::heavy();
    let dir = scratch("preamble");
    let out = dlbench()
        .args(["run", "--backends", "redis,etcd", "--workload", "hot-key", "--nemesis", "kill,partition"])
        // A short TTL so etcd grants again soon after each fault: room for both in 14 s.
        .args(["--nemesis-interval", "2s", "--duration", "14s", "--ttl", "1s", "--warmup", "0s", "--no-fail-on-violation", "--out"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let preamble: Vec<&str> = stderr.lines().take_while(|l| !l.starts_with("dlbench: redis ")).collect();
    let preamble = preamble.join("\n");
    assert!(preamble.contains("can inject: kill, pause, partition"), "{preamble}");
    for unasked in ["clock", "failover", "power-loss"] {
        assert!(!preamble.contains(&format!("{unasked} (")), "a fault nobody asked for is listed as not injectable: {preamble}");
    }
    assert!(!preamble.contains("cannot inject"), "{preamble}");
    let skip = preamble.lines().find(|l| l.contains("partition is skipped on redis")).unwrap_or_else(|| panic!("the skip is not said before the run:\n{preamble}"));
    assert!(skip.contains("one server") && !skip.contains("etcd"), "{skip}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("latest/summary.json")).unwrap()).unwrap();
    let redis = &s["backends"][0];
    assert_eq!(redis["name"], "redis");
    assert_eq!(redis["verdict"]["faults_no_effect"], serde_json::json!(["partition"]), "{}", redis["verdict"]);
    let note = stdout.lines().skip_while(|l| !l.starts_with("redis · hot-key")).take_while(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
    assert!(note.contains("no effect: partition"), "the terminal's AP / CP notes do not name the skipped partition:\n{stdout}");
}

/// `dlbench check` on the history of a killed run (its last line cut mid-record) says how many
/// records it read and that it ignored the partial last line, on stdout (stderr with
/// --json, whose stdout stays JSON); a whole history gets no such note.
#[test]
fn check_says_it_ignored_a_cut_last_line() {
    let dir = scratch("check-cut");
    let run = dlbench()
        .args(["run", "--backends", "memory", "--workload", "hot-key", "--duration", "300ms", "--warmup", "0s", "--history", "on", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let history = dir.join("latest/history.jsonl");
    let whole = std::fs::read_to_string(&history).unwrap();
    let records = whole.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(records > 10, "{records} records");
    let out = dlbench().arg("check").arg(&history).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("partial"), "a whole history is not cut");
    // Cut as a killed writer leaves it: half of a record, no newline.
    let last = whole.lines().last().unwrap();
    std::fs::write(&history, format!("{whole}{}", &last[..last.len() / 2])).unwrap();
    let out = dlbench().arg("check").arg(&history).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let note = stdout.lines().find(|l| l.contains("partial last line")).unwrap_or_else(|| panic!("the cut line is not said:\n{stdout}"));
    assert!(note.contains(&format!("read {records} records")), "{note}");
    let out = dlbench().arg("check").arg(&history).arg("--json").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("read {records} records")));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout[..out.stdout.iter().rposition(|b| *b == b']').unwrap() + 1]).unwrap();
    assert!(json.is_array());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check --json` prints JSON alone on stdout (the verdict line goes to stderr), and a reader
/// that stops reading (`check ... | head`) ends nothing with a panic: the exit status stays
/// the verdict's.
#[test]
fn check_json_is_pure_and_a_closed_pipe_is_no_panic() {
    let h = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/issue48/late.jsonl");
    let out = dlbench().args(["check", "--json", h]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the fixture's verdict is invalid");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(v[0]["valid"], "invalid", "{v}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("verdict: invalid"), "the verdict line on stderr");
    for json in [false, true] {
        let mut c = dlbench();
        c.arg("check");
        if json {
            c.arg("--json");
        }
        let mut child = c.arg(h).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // the reader is gone before the first line
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "json {json}: {err}");
        assert_eq!(out.status.code(), Some(1), "json {json}: the verdict's status: {err}");
    }
}

/// The power-loss layer's daemon rides in the dlbench binary (issue 50: one binary carries
/// every feature): `cargo install --path .` brings it, nothing else needs building. Asked
/// with no paths, it answers with its own usage, not dlbench's CLI.
#[test]
fn the_dlbench_binary_carries_the_power_loss_layer() {
    let out = dlbench().arg("__faultfs-layer").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("dlbench-faultfs: expected BACKING and MOUNTPOINT"), "the layer's daemon answered: {err}");
}
