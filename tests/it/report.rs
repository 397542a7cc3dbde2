//! Result sets: the JSON Schema, the HTML report in a real browser, a killed run's report,
//! and `dlbench compare` on real summaries.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{dlbench, processes_under, scratch, wait_exit};


/// One short run with faults, shared by the tests that read a finished result set.
fn finished_run() -> &'static PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let _g = common::heavy();
        let dir = scratch("report");
        let out = dlbench()
            .args([
                // The kill and its room after the heal (etcd: the 2 s TTL, 3 s to elect).
                "run", "--backends", "redis,etcd", "--workload", "hot-key", "--duration", "8s", "--warmup", "0s", "--ttl", "2s", "--nemesis",
                "kill", "--nemesis-interval", "3s", "--no-fail-on-violation", "--out",
            ])
            .arg(&dir)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        std::fs::canonicalize(dir.join("latest")).unwrap()
    })
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn committed_schema_is_current_and_summaries_validate() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/summary.schema.json")).unwrap();
    let out = dlbench().arg("schema").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        committed,
        "schema/summary.schema.json is stale: regenerate it with `dlbench schema > schema/summary.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the committed schema is a valid JSON Schema");
    let summary = json(&finished_run().join("summary.json"));
    let errors: Vec<String> = validator.iter_errors(&summary).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "summary.json does not validate: {errors:#?}");
    // And the schema has teeth: a summary missing a required field does not validate.
    let mut broken = summary.clone();
    broken.as_object_mut().unwrap().remove("backends");
    assert!(!validator.is_valid(&broken));
}

/// Render a page in headless Chromium and return the DOM after load.
fn chromium_dom(page: &Path) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .stderr(Stdio::null())
        .output()
        .expect("chromium (Debian package chromium) must be installed: scripts/setup.sh --peers installs it (the tests' set-up)");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Load `page` in headless Chromium inside an iframe `width` px wide (the test's own wrapper
/// page: the report carries no test hook) and report what loaded: how many images, which
/// did not decode, and how wide the page's content is.
fn chromium_probe(page: &Path, width: u32) -> (usize, String, u32) {
    let dir = page.parent().unwrap();
    let name = page.file_name().unwrap().to_string_lossy();
    let wrapper = dir.join(format!("probe-{width}.html"));
    std::fs::write(
        &wrapper,
        format!(
            "<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"f\" src=\"{name}\" style=\"width:{width}px;height:900px;border:0\"></iframe><pre id=\"probe\">loading</pre><script>\
             document.getElementById('f').addEventListener('load',function(){{var o=document.getElementById('probe');try{{var d=this.contentDocument;\
             var imgs=[].slice.call(d.images);var bad=imgs.filter(function(i){{return !(i.complete&&i.naturalWidth>0)}}).map(function(i){{return i.getAttribute('src')}});\
             o.textContent='probe images='+imgs.length+' broken='+bad.join(',')+' width='+d.documentElement.scrollWidth+' end';}}catch(e){{o.textContent='probe error '+e;}}}});\
             </script></body></html>"
        ),
    )
    .unwrap();
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", wrapper.display()))
        .stderr(Stdio::null())
        .output()
        .expect("chromium (Debian package chromium) must be installed: scripts/setup.sh --peers installs it (the tests' set-up)");
    let _ = std::fs::remove_file(&wrapper);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let probe = dom.split("probe images=").nth(1).and_then(|r| r.split(" end").next()).unwrap_or_else(|| panic!("the probe did not run: {}", &dom[dom.len().saturating_sub(300)..]));
    let field = |k: &str| probe.split(&format!("{k}=")).nth(1).unwrap_or("").split(' ').next().unwrap_or("").to_string();
    (probe.split(' ').next().unwrap_or("0").parse().unwrap_or(0), field("broken"), field("width").parse().unwrap_or(u32::MAX))
}

#[test]
fn report_renders_in_chromium_with_every_plot_and_fault_windows() {
    let run = finished_run();
    let out = dlbench().arg("report").arg(run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = run.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"), "the page must not fetch anything");
    let plots: Vec<String> = std::fs::read_dir(run.join("plots")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    for want in ["latency-spectrum.svg", "timeline-redis.svg", "timeline-etcd.svg", "availability.svg"] {
        assert!(plots.iter().any(|p| p == want), "{want} missing from {plots:?}");
    }
    // Every plot decodes, and nothing makes the page wider than the screen at 800 and 420
    // px (wide tables scroll in their own box).
    for width in [800, 420] {
        let (images, broken, content) = chromium_probe(&page, width);
        assert_eq!((images, broken.as_str()), (plots.len(), ""), "at {width} px: not every plot loaded");
        assert!(content <= width, "at {width} px the page is {content} px wide: something does not wrap or scroll");
    }
    assert!(!html.contains("<script"), "no script, no test hook in the page");
    // The page links its data files, and each link resolves.
    let dom = chromium_dom(&page);
    let files = dom.split("id=\"files\"").nth(1).and_then(|r| r.split("</p>").next()).expect("the page links its data files");
    let links: Vec<&str> = files.split("href=\"").skip(1).filter_map(|r| r.split('"').next()).collect();
    for want in ["summary.json", "history.jsonl", "checks.json"] {
        assert!(links.contains(&want), "no link to {want}: {links:?}");
    }
    assert!(links.iter().any(|l| l.starts_with("hdr/") && l.ends_with(".hlog")), "no .hlog linked: {links:?}");
    for l in &links {
        assert!(run.join(l).is_file(), "the page links {l}, which is not in the run directory");
    }
    // The checks matrix: a row per backend · workload, a cell per checker, each linked.
    let matrix = dom.split("id=\"checks-matrix\"").nth(1).and_then(|r| r.split("</table>").next()).expect("a checks matrix");
    for b in ["redis · hot-key", "etcd · hot-key"] {
        assert!(matrix.contains(b), "{b} missing from the checks matrix");
    }
    assert!(["fencing", "lost-updates", "availability"].iter().all(|c| matrix.contains(c)), "no checker column: {}", &matrix[..matrix.len().min(400)]);
    for anchor in matrix.split("href=\"#").skip(1).filter_map(|r| r.split('"').next()) {
        assert!(dom.contains(&format!("id=\"{anchor}\"")), "the matrix links #{anchor}, which the page lacks");
    }
    assert!(dom.contains("id=\"glossary\"") && dom.contains("Jain"), "no glossary");
    // Faults ran, so the timelines shade their windows (the fault colour, translucent).
    let svg = std::fs::read_to_string(run.join("plots").join("timeline-redis.svg")).unwrap();
    assert!(svg.matches("#D62728").count() >= 3, "no shaded fault window in the redis timeline");
    assert!(html.contains("id=\"checks-redis\""), "verdicts link to their evidence");
}

#[test]
fn compare_flags_halved_throughput_and_new_overlaps() {
    let run = finished_run();
    let dir = scratch("compare");
    let base = run.join("summary.json");
    // One run per side has no spread: "nothing changed" is not a clean bill (issue 32), exit 3
    // and what is missing; a change beyond the thresholds is still flagged below.
    let same = dlbench().args(["compare"]).arg(&base).arg(&base).output().unwrap();
    let same_text = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(3), "{same_text}");
    assert!(same_text.contains("No regression could have been detected") && same_text.contains("run --repeat"), "{same_text}");
    let mut s = json(&base);
    // compare reads each phase (backend · workload), never the pooled backend figure.
    let ops = s["backends"][0]["workloads"][0]["ops_per_sec"].as_f64().unwrap();
    s["backends"][0]["workloads"][0]["ops_per_sec"] = serde_json::json!(ops / 2.0);
    let halved = dir.join("halved.json");
    std::fs::write(&halved, serde_json::to_vec(&s).unwrap()).unwrap();
    let out = dlbench().args(["compare"]).arg(&base).arg(&halved).arg("--json").arg(dir.join("c.json")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Issue 49: one run a side confirms nothing; the halving is past its threshold, not
    // confirmed, and the exit status is 3 (1 is for what the rule confirmed).
    assert_eq!(out.status.code(), Some(3), "{text}");
    let name = s["backends"][0]["name"].as_str().unwrap();
    assert!(text.contains(&format!("{name} · hot-key ops_per_sec")), "names backend, workload and metric:\n{text}");
    assert!(text.contains("beyond the threshold, not confirmed"), "{text}");
    assert!(json(&dir.join("c.json"))["unconfirmed"].as_u64().unwrap() >= 1);
    let mut s = json(&base);
    s["backends"][1]["workloads"][0]["overlaps"] = serde_json::json!(1);
    let overlapped = dir.join("overlap.json");
    std::fs::write(&overlapped, serde_json::to_vec(&s).unwrap()).unwrap();
    let out = dlbench().args(["compare", "--threshold", "ops_per_sec=1000"]).arg(&base).arg(&overlapped).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a new overlap always fails:\n{text}");
    assert!(text.contains("regressed (safety)"), "{text}");
}

/// SIGKILL leaves a run directory the report marks incomplete and renders from the history.
#[test]
fn a_killed_run_still_renders_and_says_so() {
    let _g = common::heavy();
    let dir = scratch("killed");
    let mut child = dlbench()
        .args(["run", "--backends", "redis", "--workload", "hot-key", "--duration", "60s", "--warmup", "0s", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the phase is recording.
    let deadline = Instant::now() + Duration::from_secs(90);
    let history = loop {
        if let Some(h) = std::fs::read_dir(&dir).ok().and_then(|mut d| d.find_map(|e| {
            let p = e.ok()?.path().join("history.jsonl");
            (std::fs::metadata(&p).ok()?.len() > 100_000).then_some(p)
        })) {
            break h;
        }
        assert!(Instant::now() < deadline, "the run never started recording");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap(); // SIGKILL: no cleanup code runs
    wait_exit(&mut child, Duration::from_secs(10));
    let run = history.parent().unwrap().to_path_buf();
    // The kernel's parent-death signal took the servers down with dlbench.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_under(&dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(processes_under(&dir).is_empty(), "servers outlived a SIGKILLed dlbench: {:?}", processes_under(&dir));
    let out = dlbench().arg("report").arg(&run).output().unwrap();
    assert!(out.status.success(), "report of a killed run: {}", String::from_utf8_lossy(&out.stderr));
    let mut html = String::new();
    std::fs::File::open(run.join("report.html")).unwrap().read_to_string(&mut html).unwrap();
    assert!(html.contains("id=\"incomplete\""), "a killed run is marked incomplete");
    assert!(html.contains("<td class=\"l\">hot-key</td>"), "the phase cut short is rebuilt from its history");
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("Incomplete"), "{md}");
    let (_, broken, width) = chromium_probe(&run.join("report.html"), 800);
    assert!(broken.is_empty() && width <= 800, "the incomplete report does not load cleanly: broken {broken:?}, width {width}");
}

/// `compare` refuses runs that cannot be compared: exit 2, one line naming what differs;
/// `--allow-mismatch` compares anyway and says so.
#[test]
fn compare_refuses_mismatched_runs_and_names_the_difference() {
    let run = finished_run();
    let dir = scratch("mismatch");
    let base = run.join("summary.json");
    type Doctor = fn(&mut serde_json::Value);
    let cases: [(&str, Doctor, &str); 9] = [
        ("workload", |s| s["backends"][0]["workloads"][0]["name"] = "many-keys".into(), "plan"),
        ("clients", |s| s["backends"][0]["workloads"][0]["clients"] = 64.into(), "plan"),
        ("keys", |s| s["backends"][1]["workloads"][0]["keys"] = 1000.into(), "plan"),
        ("hold", |s| s["backends"][0]["workloads"][0]["hold"] = "50ms".into(), "plan"),
        ("duration", |s| s["backends"][0]["workloads"][0]["duration_s"] = 60.0.into(), "plan"),
        ("backends", |s| s["backends"][0]["name"] = "memory".into(), "backends"),
        ("target", |s| s["target"] = "external".into(), "target (local vs external)"),
        ("completeness", |s| s["complete"] = false.into(), "completeness (complete vs interrupted)"),
        ("machine", |s| s["machine"]["cores"] = 64.into(), "machine cores"),
    ];
    for (what, doctor, says) in cases {
        let mut s = json(&base);
        doctor(&mut s);
        let other = dir.join(format!("{what}.json"));
        std::fs::write(&other, serde_json::to_vec(&s).unwrap()).unwrap();
        let out = dlbench().arg("compare").arg(&base).arg(&other).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: exit 2 on a mismatch, got {:?}: {err}", out.status.code());
        assert_eq!(err.trim().lines().count(), 1, "{what}: one line: {err}");
        assert!(err.contains(says) && err.contains("--allow-mismatch"), "{what}: names the difference ({says}): {err}");
        assert!(out.stdout.is_empty(), "{what}: no verdict on runs that cannot be compared");
        let out = dlbench().arg("compare").arg("--allow-mismatch").arg(&base).arg(&other).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_ne!(out.status.code(), Some(2), "{what}: --allow-mismatch compares: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("Compared despite mismatches") && text.contains(says), "{what}: the output says so:\n{text}");
    }
}
