//! report.html as a person sees it, in headless Chromium at 1,280 and 390 px, for a run
//! without faults, a run with faults and a `--backends all` run: the answer (the matrix) is
//! on the first screen, the page never scrolls sideways, no table cell wraps past three
//! lines, no debug text shows, and every chart draws each of its series.

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
    assert!(matches!(out.status.code(), Some(0 | 1 | 3)), "{name}: {}", String::from_utf8_lossy(&out.stdout));
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
        .expect("chromium (Debian package chromium) must be installed: scripts/setup.sh installs it");
    let _ = std::fs::remove_file(&wrapper);
    let dom = String::from_utf8_lossy(&out.stdout);
    let enc = dom.split("PROBE").nth(1).and_then(|r| r.split("END").next()).unwrap_or_else(|| panic!("the probe did not run on {}", page.display()));
    let v: serde_json::Value = serde_json::from_str(&percent_decode(enc)).unwrap();
    assert!(v.get("error").is_none(), "probe error: {v}");
    Seen {
        width: v["width"].as_f64().unwrap(),
        matrix_bottom: v["matrix_bottom"].as_f64().unwrap(),
        wrapped: v["wrapped"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        text: v["text"].as_str().unwrap().to_string(),
    }
}

/// What a person would object to at this width (the first screen is 800 px tall at 1,280).
fn problems(s: &Seen, width: u32, first_screen: Option<u32>) -> Vec<String> {
    let mut p = Vec::new();
    if s.matrix_bottom < 0.0 {
        p.push("no answer matrix".to_string());
    }
    if let Some(h) = first_screen {
        if s.matrix_bottom > h as f64 {
            p.push(format!("the matrix ends at {} px, below the first screen ({h} px)", s.matrix_bottom));
        }
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
    for (width, height, first) in [(1280, 800, Some(800)), (390, 844, None)] {
        let seen = probe(&page, width, height);
        let p = problems(&seen, width, first);
        assert!(p.is_empty(), "{} at {width} px:\n{}", page.display(), p.join("\n"));
    }
}

/// The probe has teeth: a page with the matrix pushed below the fold, a wide element, a
/// six-line cell and debug text fails on each.
fn check_probe_fails_on_a_broken_page(run: &Path) {
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let broken = html
        .replacen("<section id=\"answer\">", "<div style=\"height:900px\"></div><section id=\"answer\">", 1)
        .replacen("</body>", "<div style=\"width:2000px\">wide</div><table><tr><td><div style=\"width:2em;white-space:normal\">a b c d e f g h i j k</div></td></tr></table><p>token Some(1)</p></body>", 1);
    let page = run.join("report-broken.html");
    std::fs::write(&page, broken).unwrap();
    let p = problems(&probe(&page, 1280, 800), 1280, Some(800)).join("\n");
    let _ = std::fs::remove_file(&page);
    for want in ["below the first screen", "px wide at 1280", "a cell wraps", "debug text \"Some(\""] {
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
