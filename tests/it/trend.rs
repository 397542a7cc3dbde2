//! Issue 34, item 6: `dlbench trend` over a series of result sets agrees with `dlbench compare`
//! on every consecutive pair, and the CI example's script (scripts/ci-bench.sh) records runs
//! that exit 1, 3 or fail, and never compares sides with uneven runs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{dlbench, scratch};

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// One short run of the in-process memory backend, `repeat` repeats (a spread per point).
fn memory_run(out: &Path, repeat: u32) -> PathBuf {
    let o = dlbench()
        .args(["run", "--backends", "memory", "--workload", "many-keys", "--clients", "4", "--hold", "1ms", "--duration", "2s", "--warmup", "0s", "--repeat"])
        .arg(repeat.to_string())
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    std::fs::canonicalize(out.join("latest")).unwrap()
}

/// Five result sets in order: four real runs and, at point 4, point 3 with its throughput
/// halved in every repeat (a regression at a known point, and a recovery after it). Four
/// repeats a point: the runs a side compare needs for this plan under its default gate
/// (issue 49: with two, a step could only ever be "not confirmed").
fn series() -> &'static (PathBuf, Vec<PathBuf>) {
    static S: OnceLock<(PathBuf, Vec<PathBuf>)> = OnceLock::new();
    S.get_or_init(|| {
        let _g = common::heavy();
        let dir = scratch("trend");
        let mut sets: Vec<PathBuf> = (1..=3).map(|i| memory_run(&dir.join(format!("c{i}")), 4)).collect();
        let mut s = json(&sets[2].join("summary.json"));
        for w in s["backends"][0]["workloads"].as_array_mut().unwrap() {
            let ops = w["ops_per_sec"].as_f64().unwrap();
            w["ops_per_sec"] = serde_json::json!(ops / 2.0);
        }
        s["run_id"] = serde_json::json!("doctored-half-throughput");
        let doctored = dir.join("c4");
        std::fs::create_dir_all(&doctored).unwrap();
        std::fs::write(doctored.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
        sets.push(doctored);
        sets.push(memory_run(&dir.join("c5"), 4));
        (dir, sets)
    })
}

/// The changed rows of a comparison (compare's JSON) or of a trend step, as comparable keys.
fn changed(rows: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        // What compare decides on: gated rows it confirmed (issue 49), as the trend flags.
        .filter(|r| r["verdict"] != "unchanged" && r["unconfirmed"] != true && r["gated"] != false)
        .map(|r| format!("{} {} {} {} {}", r["backend"], r["workload"], r["clients"], r["metric"], r["verdict"]))
        .collect();
    v.sort();
    v
}

#[test]
fn trend_renders_and_flags_what_compare_flags() {
    let (dir, sets) = series();
    let page = dir.join("trend.html");
    let out = dlbench().arg("trend").args(sets).arg("--html").arg(&page).arg("--json").arg(dir.join("trend.json")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let t = json(&dir.join("trend.json"));
    let steps = t["steps"].as_array().unwrap();
    assert_eq!(steps.len(), sets.len() - 1, "one step per consecutive pair");
    // Each step agrees with `dlbench compare` on the same pair: exit status, counts, and
    // every row it judged other than unchanged.
    for (i, s) in steps.iter().enumerate() {
        let cj = dir.join(format!("compare-{i}.json"));
        let c = dlbench().arg("compare").arg(&sets[i]).arg(&sets[i + 1]).arg("--json").arg(&cj).output().unwrap();
        let said = format!("step #{} -> #{}:\n{text}\ncompare said:\n{}", i + 1, i + 2, String::from_utf8_lossy(&c.stdout));
        let code = c.status.code().unwrap();
        assert!(matches!(code, 0 | 1 | 3), "{said}");
        let cj = json(&cj);
        assert_eq!(changed(&s["flags"]), changed(&cj["rows"]), "{said}");
        assert_eq!(s["regressions"], cj["regressions"], "{said}");
        let trend_exit = if s["regressions"].as_u64().unwrap() > 0 { 1 } else if s["detectable"] == false { 3 } else { 0 };
        assert_eq!(trend_exit, code, "{said}");
        assert!(text.contains(&format!("#{} -> #{}: ", i + 1, i + 2)) && text.contains(&format!("(compare exit {code})")), "{said}");
    }
    // The doctored point: a throughput regression into #4 and an improvement out of it.
    let has = |i: usize, verdict: &str| steps[i]["flags"].as_array().unwrap().iter().any(|f| f["metric"] == "ops_per_sec" && f["verdict"] == verdict);
    assert!(has(2, "regressed") && has(3, "improved"), "{text}");
    // The page: self-contained, one chart per series, a red ring per regression it can place.
    let html = std::fs::read_to_string(&page).unwrap();
    let no_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!html.contains("<script") && !no_ns.contains("http") && !html.contains("src="), "self-contained: no script, nothing fetched");
    let series = t["series"].as_array().unwrap();
    assert_eq!(html.matches("<figure>").count(), series.len(), "one chart per series");
    let metrics: Vec<&str> = series.iter().map(|s| s["metric"].as_str().unwrap()).collect();
    let placed = |verdict: &str| steps.iter().flat_map(|s| s["flags"].as_array().unwrap()).filter(|f| f["verdict"] == verdict && metrics.contains(&f["metric"].as_str().unwrap())).count();
    assert_eq!(html.matches("class=\"flag regressed\"").count(), placed("regressed"), "a ring per regression");
    assert_eq!(html.matches("class=\"flag improved\"").count(), placed("improved"), "a ring per improvement");
    for (i, p) in t["points"].as_array().unwrap().iter().enumerate() {
        assert!(html.contains(&format!("<td>#{}</td>", i + 1)) && html.contains(p["run_id"].as_str().unwrap()), "point {} is labelled", i + 1);
    }
}

/// A fake `dlbench run`: the Nth call writes a copy of SRC as a result set under --out (for
/// exit codes 0, 1, 3 and 130, as the real one does) and exits with the Nth of CODES.
fn fake(dir: &Path, side: &str, src: &Path, codes: &str) -> PathBuf {
    let bin = dir.join(format!("fake-{side}"));
    let counter = dir.join(format!("fake-{side}.n"));
    let script = format!(
        "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '{c}'\ncode=$(echo '{codes}' | cut -d' ' -f$n)\n\
         out=''; while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n\
         case $code in 0|1|3|130) mkdir -p \"$out/run-$n\"; cp '{s}/summary.json' \"$out/run-$n/\"; ln -sfn \"run-$n\" \"$out/latest\";; esac\nexit $code\n",
        c = counter.display(),
        s = src.display()
    );
    std::fs::write(&bin, script).unwrap();
    Command::new("chmod").arg("+x").arg(&bin).status().unwrap();
    bin
}

fn ci_bench(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ci-bench.sh");
    Command::new("sh").arg(script).args(args).output().unwrap()
}

#[test]
fn ci_bench_records_failed_runs_and_compares_only_paired_rounds() {
    let dir = scratch("ci-bench");
    let sets: Vec<PathBuf> = {
        let _g = common::heavy();
        vec![memory_run(&dir.join("src-a"), 2), memory_run(&dir.join("src-b"), 2)]
    };
    let out = dir.join("results");
    // Round 1: head says unknown (3); round 2: head interrupted (130); round 3: base finds a
    // violation (1); round 4: base fails before writing anything (2).
    let base = fake(&dir, "base", &sets[0], "0 0 1 2");
    let head = fake(&dir, "head", &sets[1], "3 130 0 0");
    let real = PathBuf::from(env!("CARGO_BIN_EXE_dlbench"));
    let b = ci_bench(&["bench".as_ref(), out.as_os_str(), "4".as_ref(), base.as_os_str(), head.as_os_str(), "--backends".as_ref(), "memory".as_ref()]);
    let log = String::from_utf8_lossy(&b.stdout).to_string();
    assert!(b.status.success(), "{log}{}", String::from_utf8_lossy(&b.stderr));
    let exits = std::fs::read_to_string(out.join("exits")).unwrap();
    assert_eq!(exits.lines().count(), 8, "every round ran on both sides, whatever a run exited with:\n{exits}");
    let r = ci_bench(&["report".as_ref(), out.as_os_str(), real.as_os_str()]);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let said = format!("{md}\n{}", String::from_utf8_lossy(&r.stderr));
    assert!(md.starts_with("<!-- dlbench -->\n"), "the comment's marker first:\n{said}");
    let listed = |side: &str| {
        let mut v: Vec<String> = std::fs::read_dir(out.join(side)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    assert_eq!(listed("base"), ["round-1", "round-3"], "{said}");
    assert_eq!(listed("head"), listed("base"), "the sides hold the same rounds:\n{said}");
    assert!(md.contains("exit 3: verdict unknown") && md.contains("exit 1: a safety violation") && md.contains("exit 130"), "{said}");
    assert!(md.contains("Round(s) 2 4 did not finish on both sides"), "{said}");
    // compare ran on the even sides: its samples per row are equal, and its status is the script's.
    let c = json(&out.join("compare.json"));
    let rows = c["rows"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r["samples"][0] == r["samples"][1] && r["samples"][0] == 4), "{said}");
    let direct = dlbench().arg("compare").arg(out.join("base")).arg(out.join("head")).output().unwrap();
    assert_eq!(r.status.code(), direct.status.code(), "{said}");
    // No round finished on both sides: no comparison at all, exit 2, and the report says so.
    let out2 = dir.join("none");
    let base = fake(&dir, "base2", &sets[0], "0 0");
    let head = fake(&dir, "head2", &sets[1], "2 130");
    let b = ci_bench(&["bench".as_ref(), out2.as_os_str(), "2".as_ref(), base.as_os_str(), head.as_os_str()]);
    assert!(b.status.success());
    let r = ci_bench(&["report".as_ref(), out2.as_os_str(), real.as_os_str()]);
    let md = std::fs::read_to_string(out2.join("report.md")).unwrap();
    assert_eq!(r.status.code(), Some(2), "{md}");
    assert!(md.contains("**No comparison**") && !out2.join("compare.json").exists(), "{md}");
}
