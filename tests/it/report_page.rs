//! report.html as a person sees it, in headless Chromium at 1,280 and 390 px, for a run
//! without faults, a run with faults, a `--backends all` run and the answer plan's own run:
//! the answer (the decision table, its CP / AP words) is on the first screen and never
//! scrolls sideways at 1,280, the matrix follows it, the page never scrolls sideways, no
//! table cell wraps past three lines, no debug text shows, and every chart draws each of its
//! series.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::{dlbench, scratch};

/// A short run, shared by the tests that read it (`args` after `run`).
fn short_run(name: &str, args: &[&str]) -> PathBuf {
    let _g = common::heavy();
    let dir = scratch(name);
    let out = dlbench().arg("run").args(args).args(["--no-fail-on-violation", "--out"]).arg(&dir).stderr(Stdio::inherit()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 1 | 3)), "{name}: {stdout}");
    // The terminal's side of the same rule: nothing a run prints by default is wider than 100
    // columns (--wide is opt-in), but the path it names.
    let wide: Vec<&str> = stdout.lines().filter(|l| l.chars().count() > 100 && !l.starts_with("results: ")).collect();
    assert!(wide.is_empty(), "{name}: lines over 100 columns without --wide:\n{}", wide.join("\n"));
    let run = std::fs::canonicalize(dir.join("latest")).unwrap();
    let rep = dlbench().arg("report").arg(&run).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    run
}

fn no_fault_run() -> &'static PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| short_run("page-calm", &["--backends", "redis,etcd", "--workload", "hot-key", "--duration", "3s", "--warmup", "0s"]))
}

fn all_backends_run() -> &'static PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| short_run("page-all", &["--backends", "all", "--workload", "hot-key", "--duration", "3s", "--warmup", "0s"]))
}

fn fault_run() -> &'static PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        short_run(
            "page-faults",
            &["--backends", "redis,etcd", "--workload", "hot-key", "--duration", "13s", "--warmup", "0s", "--ttl", "2s", "--nemesis", "kill:leader,pause", "--nemesis-interval", "2s"],
        )
    })
}

/// What the page showed in the browser.
#[derive(Debug)]
struct Seen {
    /// The page's full width (more than the viewport: it scrolls sideways).
    width: f64,
    /// The bottom of the answer matrix, from the top of the page (-1: no matrix).
    matrix_bottom: f64,
    /// The bottom of the decision table, from the top of the page (-1: none).
    decision_bottom: f64,
    /// How far the decision table's box scrolls sideways, px (0: it fits).
    decision_overflow: f64,
    /// The decision table's text, as shown.
    decision: String,
    /// The right and bottom edges of the decision table's last column (CP / AP), px from the
    /// page's left and top (-1: none).
    class_right: f64,
    class_bottom: f64,
    /// The right edge of what shows of the table: its scroll box's, within the viewport
    /// (less the vertical scroll bar).
    seen_right: f64,
    /// Table cells laid out on more than three lines: "lines: text".
    wrapped: Vec<String>,
    /// The text a person sees (closed <details> and styles excluded).
    text: String,
}

/// Counts a cell's lines from its text's line boxes: rects that do not overlap vertically
/// are on different lines (a pill and small print on one line overlap).
const PROBE_JS: &str = r#"
var f=document.getElementById('f');f.addEventListener('load',function(){var o=document.getElementById('probe');try{
var d=f.contentDocument,r={};r.width=d.documentElement.scrollWidth;var m=d.getElementById('answer-matrix');
r.matrix_bottom=m?m.getBoundingClientRect().bottom+d.documentElement.scrollTop:-1;r.wrapped=[];
var t=d.getElementById('decision-table'),b=d.getElementById('decision-box');r.decision_bottom=t?t.getBoundingClientRect().bottom+d.documentElement.scrollTop:-1;
r.decision_overflow=b?b.scrollWidth-b.clientWidth:0;r.decision=t?t.innerText:'';r.class_right=-1;r.class_bottom=-1;
r.seen_right=Math.min(d.documentElement.clientWidth,b?b.getBoundingClientRect().right:1e9);
if(t){[].slice.call(t.rows).forEach(function(row){var c=row.cells[row.cells.length-1].getBoundingClientRect();
r.class_right=Math.max(r.class_right,c.right+d.documentElement.scrollLeft);r.class_bottom=Math.max(r.class_bottom,c.bottom+d.documentElement.scrollTop);});}
[].slice.call(d.querySelectorAll('td,th')).forEach(function(c){var rects=[],tw=d.createTreeWalker(c,NodeFilter.SHOW_TEXT),n;
while((n=tw.nextNode())){if(!n.textContent.trim())continue;var rg=d.createRange();rg.selectNodeContents(n);
[].slice.call(rg.getClientRects()).forEach(function(x){if(x.height>0)rects.push([x.top,x.bottom]);});}
rects.sort(function(a,b){return a[0]-b[0];});var lines=0,bottom=-1e9;
rects.forEach(function(x){if(x[0]>=bottom-2){lines++;bottom=x[1];}else{bottom=Math.max(bottom,x[1]);}});
if(lines>3)r.wrapped.push(lines+': '+c.textContent.slice(0,100));});
r.text=d.body.innerText;o.textContent='PROBE'+encodeURIComponent(JSON.stringify(r))+'END';
}catch(e){o.textContent='PROBE'+encodeURIComponent(JSON.stringify({error:String(e)}))+'END';}});
"#;

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Load `page` in an iframe `width` x `height` px (the test's own wrapper: the report has no
/// script) and measure it.
fn probe(page: &Path, width: u32, height: u32) -> Seen {
    let wrapper = page.with_file_name(format!("probe-page-{width}.html"));
    let name = page.file_name().unwrap().to_string_lossy();
    std::fs::write(
        &wrapper,
        format!("<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"f\" src=\"{name}\" style=\"width:{width}px;height:{height}px;border:0\"></iframe><pre id=\"probe\">loading</pre><script>{PROBE_JS}</script></body></html>"),
    )
    .unwrap();
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--virtual-time-budget=5000", "--window-size=1400,1000", "--dump-dom"])
        .arg(format!("file://{}", wrapper.display()))
        .stderr(Stdio::null())
        .output()
        .expect("chromium (Debian package chromium) must be installed: scripts/setup.sh --peers installs it (the tests' set-up)");
    let _ = std::fs::remove_file(&wrapper);
    let dom = String::from_utf8_lossy(&out.stdout);
    let enc = dom.split("PROBE").nth(1).and_then(|r| r.split("END").next()).unwrap_or_else(|| panic!("the probe did not run on {}", page.display()));
    let v: serde_json::Value = serde_json::from_str(&percent_decode(enc)).unwrap();
    assert!(v.get("error").is_none(), "probe error: {v}");
    Seen {
        width: v["width"].as_f64().unwrap(),
        matrix_bottom: v["matrix_bottom"].as_f64().unwrap(),
        decision_bottom: v["decision_bottom"].as_f64().unwrap(),
        decision_overflow: v["decision_overflow"].as_f64().unwrap(),
        decision: v["decision"].as_str().unwrap().to_string(),
        class_right: v["class_right"].as_f64().unwrap(),
        class_bottom: v["class_bottom"].as_f64().unwrap(),
        seen_right: v["seen_right"].as_f64().unwrap(),
        wrapped: v["wrapped"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        text: v["text"].as_str().unwrap().to_string(),
    }
}

/// What a person would object to at this width and first-screen height: the answer (the
/// decision table) below the first screen, its CP / AP column out of sight, the table
/// scrolling sideways at 1,280 px, no matrix after it.
fn problems(s: &Seen, width: u32, height: u32) -> Vec<String> {
    let mut p = Vec::new();
    if s.matrix_bottom < 0.0 {
        p.push("no answer matrix".to_string());
    }
    if s.decision_bottom < 0.0 {
        p.push("no decision table".to_string());
    } else if !s.decision.contains("CP/AP") {
        p.push(format!("the decision table has no CP/AP column: {}", s.decision));
    }
    if s.decision_bottom > height as f64 {
        p.push(format!("the decision table ends at {} px, below the first screen ({height} px)", s.decision_bottom));
    }
    if s.class_right > s.seen_right + 0.5 || s.class_bottom > height as f64 {
        p.push(format!("the CP/AP column is out of the first screen at {width} px (right {} px of {} shown, bottom {} px)", s.class_right, s.seen_right, s.class_bottom));
    }
    if width >= 1280 && s.decision_overflow > 0.0 {
        p.push(format!("the decision table scrolls sideways by {} px at {width} px", s.decision_overflow));
    }
    if s.width > width as f64 {
        p.push(format!("the page is {} px wide at {width} px", s.width));
    }
    for w in &s.wrapped {
        p.push(format!("a cell wraps into {w}"));
    }
    for debug in ["Some(", "None", "{"] {
        if let Some(i) = s.text.find(debug) {
            let before: String = s.text[..i].chars().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect();
            let after: String = s.text[i..].chars().take(60).collect();
            p.push(format!("debug text {debug:?}: ...{before}{after}..."));
        }
    }
    p
}

fn check_page(run: &Path) {
    let page = run.join("report.html");
    for (width, height) in [(1280, 800), (390, 844)] {
        let seen = probe(&page, width, height);
        let p = problems(&seen, width, height);
        assert!(p.is_empty(), "{} at {width} px:\n{}", page.display(), p.join("\n"));
    }
}

/// The probe has teeth: a page with the decision table pushed below the fold and made to
/// scroll sideways, a wide element, a six-line cell and debug text fails on each.
fn check_probe_fails_on_a_broken_page(run: &Path) {
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let broken = html
        .replacen("<section id=\"decision\">", "<div style=\"height:900px\"></div><section id=\"decision\">", 1)
        .replacen("<table class=\"decision\" id=\"decision-table\">", "<table class=\"decision\" id=\"decision-table\" style=\"min-width:3000px\">", 1)
        .replacen("</body>", "<div style=\"width:2000px\">wide</div><table><tr><td><div style=\"width:2em;white-space:normal\">a b c d e f g h i j k</div></td></tr></table><p>token Some(1)</p></body>", 1);
    let page = run.join("report-broken.html");
    std::fs::write(&page, broken).unwrap();
    let p = problems(&probe(&page, 1280, 800), 1280, 800).join("\n");
    let _ = std::fs::remove_file(&page);
    for want in ["below the first screen", "CP/AP column is out of the first screen", "scrolls sideways by", "px wide at 1280", "a cell wraps", "debug text \"Some(\""] {
        assert!(p.contains(want), "the probe missed {want:?} on a broken page:\n{p}");
    }
}

#[test]
fn the_answer_is_on_the_first_screen_without_faults() {
    check_page(no_fault_run());
    check_probe_fails_on_a_broken_page(no_fault_run());
}

#[test]
fn the_answer_is_on_the_first_screen_with_faults() {
    check_page(fault_run());
    let html = std::fs::read_to_string(fault_run().join("report.html")).unwrap();
    let head = html.split("id=\"answer-matrix\"").nth(1).and_then(|r| r.split("</tr>").next()).unwrap();
    assert!(head.contains("under pause") || head.contains("under kill"), "a fault column: {head}");
    let seen = probe(&fault_run().join("report.html"), 1280, 800);
    assert!(seen.decision.contains("CP ->"), "no class claimed -> observed in the decision table on the first screen: {}", seen.decision);
}

/// The answer plan's page (the README's command 1: five backends, speed and fault rounds),
/// drawn from the decision fixture's real summary: the CP / AP words of every backend on the
/// first screen at 1,280 px, nothing scrolling sideways, no cell over three lines at 390.
#[test]
fn the_answer_plans_page_shows_the_classes_on_the_first_screen() {
    let dir = scratch("page-answer").join("20261207-000000-fix0");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/decision/summary.json"), dir.join("summary.json")).unwrap();
    let rep = dlbench().arg("report").arg(&dir).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    check_page(&dir);
    let seen = probe(&dir.join("report.html"), 1280, 800);
    for (backend, class) in [("postgres", "CP -> CP"), ("redis", "CP -> neither"), ("redlock", "AP -> CP+A"), ("zookeeper", "CP -> CP"), ("etcd", "CP -> CP")] {
        let row = seen.decision.lines().find(|l| l.starts_with(backend)).unwrap_or_else(|| panic!("no {backend} row: {}", seen.decision));
        assert!(row.contains(class), "{backend}: {class:?} not on the first screen: {row}");
    }
}

#[test]
fn the_answer_is_on_the_first_screen_with_every_backend() {
    check_page(all_backends_run());
}

/// The polylines and rectangles of an SVG with their colour: (stroke or fill, points or
/// height).
fn marks(svg: &str) -> Vec<(String, String, f64)> {
    let attr = |el: &str, a: &str| el.split(&format!(" {a}=\"")).nth(1).and_then(|r| r.split('"').next()).map(str::to_string);
    let mut out = Vec::new();
    for el in svg.split('<').skip(1) {
        if el.starts_with("polyline") {
            let pts: Vec<(f64, f64)> = attr(el, "points")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.split_once(',').and_then(|(x, y)| Some((x.parse().ok()?, y.parse().ok()?))))
                .collect();
            // A legend swatch is one 20 px horizontal stroke; a data line spans more.
            let legend = pts.len() == 2 && pts[0].1 == pts[1].1 && (pts[1].0 - pts[0].0).abs() == 20.0;
            let extent = pts.iter().map(|p| (p.0 - pts[0].0).abs() + (p.1 - pts[0].1).abs()).fold(0.0, f64::max);
            if !legend && pts.len() >= 2 && extent > 0.0 {
                out.push(("line".into(), attr(el, "stroke").unwrap_or_default(), extent));
            }
        } else if el.starts_with("rect") {
            let h: f64 = attr(el, "height").and_then(|h| h.parse().ok()).unwrap_or(0.0);
            let w: f64 = attr(el, "width").and_then(|h| h.parse().ok()).unwrap_or(0.0);
            let fill = attr(el, "fill").unwrap_or_default();
            let stroke = attr(el, "stroke").unwrap_or_default();
            if h >= 1.0 && w >= 1.0 {
                out.push(("rect".into(), if fill != "none" { fill } else { stroke }, h));
            }
        }
    }
    out
}

fn hex(name: &str) -> String {
    let c = dlbench::report::plots::backend_color(name);
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// Each chart of a run draws a visible mark for each of its series: a line that goes
/// somewhere, or a bar (a 0% bar outlined) of the backend's colour, as often as there are
/// series of that colour.
fn check_charts(run: &Path) {
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    let backends: Vec<&serde_json::Value> = s["backends"].as_array().unwrap().iter().filter(|b| b.get("failure").is_none_or(|f| f.is_null())).collect();
    let dir = run.join("plots");
    let need = |file: &str, names: Vec<&str>, kind: &str| {
        let svg = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let m = marks(&svg);
        for n in &names {
            let want = names.iter().filter(|x| hex(x) == hex(n)).count();
            let got = m.iter().filter(|(k, c, _)| k == kind && *c == hex(n)).count();
            assert!(got >= want, "{}: {file} shows {got} {kind} mark(s) of {n}'s colour {}, wants {want}", run.display(), hex(n));
        }
    };
    let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
    need("latency-spectrum.svg", names.clone(), "line");
    need("throughput-hot-key.svg", names.clone(), "line");
    for n in &names {
        need(&format!("timeline-{n}.svg"), vec![n], "line");
    }
    let avail: Vec<&str> = backends.iter().filter(|b| b.get("availability").is_some_and(|a| !a.is_null())).map(|b| b["name"].as_str().unwrap()).collect();
    if !avail.is_empty() {
        need("availability.svg", avail, "rect");
    }
}

#[test]
fn every_chart_draws_each_of_its_series() {
    for run in [no_fault_run(), fault_run()] {
        check_charts(run);
    }
}
