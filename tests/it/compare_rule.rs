//! Issue 49: `compare` cannot call like runs regressed. Real runs of the memory backend
//! (seconds each) and result sets doctored from them:
//! - a plan setting the summary records nowhere else (the history kept or not) is refused,
//!   exit 2, with one line naming it;
//! - one run a side: every figure past its threshold is "not confirmed", exit 3, never 1;
//! - the runs a side compare prints is what its rule needs: that many `--repeat`s of one
//!   build on each side exit 0, one fewer cannot confirm anything (exit 3).

use crate::common;

use std::path::{Path, PathBuf};

use common::{dlbench, scratch};

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// One run of the memory backend under `out`, with `extra` flags; its run directory.
fn run(out: &Path, extra: &[&str]) -> PathBuf {
    let o = dlbench()
        .args(["run", "--backends", "memory", "--workload", "many-keys", "--clients", "4", "--hold", "1ms", "--duration", "2s", "--warmup", "0s", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    std::fs::canonicalize(out.join("latest")).unwrap()
}

fn compare(a: &Path, b: &Path) -> (i32, String, String) {
    let o = dlbench().arg("compare").arg(a).arg(b).output().unwrap();
    (o.status.code().unwrap(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn history_on_against_off_is_refused_naming_it() {
    let dir = scratch("rule-history");
    let (off, on) = {
        let _g = common::heavy();
        (run(&dir.join("off"), &["--history", "off"]), run(&dir.join("on"), &["--history", "on"]))
    };
    assert_eq!(json(&on.join("summary.json"))["plan_settings"]["history"], "on");
    let (code, out, err) = compare(&off, &on);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("history (off vs on)"), "{err}");
    assert!(!out.contains("regression"), "{out}");
}

#[test]
fn one_run_a_side_is_never_exit_1_even_past_every_threshold() {
    let dir = scratch("rule-one-run");
    let base = {
        let _g = common::heavy();
        run(&dir.join("base"), &[])
    };
    // The new side: the base with every figure far past its threshold, and a verdict that
    // failed (NOT RECOVERED): the most a one-run pair can show.
    let mut s = json(&base.join("summary.json"));
    for w in s["backends"][0]["workloads"].as_array_mut().unwrap() {
        w["ops_per_sec"] = serde_json::json!(w["ops_per_sec"].as_f64().unwrap() / 10.0);
        for h in ["acquire_latency_us", "release_latency_us", "handoff_latency_us"] {
            for q in ["p50", "p99", "p999"] {
                w[h][q] = serde_json::json!(w[h][q].as_u64().unwrap() * 100 + 1000);
            }
        }
        w["errors"] = serde_json::json!(1000);
        let h = format!("{}; NOT RECOVERED", w["verdict"]["headline"].as_str().unwrap());
        w["verdict"]["headline"] = serde_json::json!(h);
    }
    let new = dir.join("new");
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(new.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    let (code, out, err) = compare(&base, &new);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("changes beyond the threshold, not confirmed"), "{out}");
    assert!(!out.contains(" regression: ") && !out.contains(" regressions: ") && !out.contains("regressed"), "{out}");
    for m in ["ops_per_sec", "acquire_p99_us", "verdict"] {
        assert!(out.lines().any(|l| l.contains(&format!(" {m} ")) && l.contains("not confirmed")), "{m}:\n{out}");
    }
}

/// The number compare prints for a plan, from its output.
fn runs_needed(out: &str) -> usize {
    let at = out.find("Runs needed: at least ").unwrap_or_else(|| panic!("no runs needed line:\n{out}"));
    let rest = &out[at + "Runs needed: at least ".len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_number_printed_is_the_number_that_decides() {
    let dir = scratch("rule-number");
    let _g = common::heavy();
    let (a, b) = (run(&dir.join("one-a"), &[]), run(&dir.join("one-b"), &[]));
    let (code, out, _) = compare(&a, &b);
    assert_eq!(code, 3, "{out}");
    let k = runs_needed(&out);
    assert_eq!(out.matches("Runs needed").count(), 1, "printed once:\n{out}");
    // k repeats on each side of one build: compare could detect a change, and found none.
    let r = k.to_string();
    let (a, b) = (run(&dir.join("k-a"), &["--repeat", &r]), run(&dir.join("k-b"), &["--repeat", &r]));
    let (code, out, err) = compare(&a, &b);
    assert_eq!(code, 0, "--repeat {k} of one build:\n{out}{err}");
    assert_eq!(runs_needed(&out), k, "{out}");
    assert!(out.contains("No regression."), "{out}");
    // One fewer cannot reach the adjusted level: nothing detectable, exit 3.
    let r = (k - 1).to_string();
    let (a, b) = (run(&dir.join("k1-a"), &["--repeat", &r]), run(&dir.join("k1-b"), &["--repeat", &r]));
    let (code, out, _) = compare(&a, &b);
    assert_eq!(code, 3, "--repeat {}:\n{out}", k - 1);
}
