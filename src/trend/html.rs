//! The trend as one self-contained page (inline SVG and CSS; no script, no network): the
//! points, what `compare` said of each step, then per phase one small chart per metric with
//! the median at each point, its spread (min to max over the set's repeats) and a ring
//! where `compare` flagged the step into that point.

use std::fmt::Write as _;

use super::text::{conclusion, flag_phrase};
use super::{Series, Spread, Trend};
use crate::compare::Better;
use crate::judgement::Change;

/// Text escaped for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const W: f64 = 330.0;
const H: f64 = 150.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 26.0;
const REGRESSED: &str = "#D62728";
const IMPROVED: &str = "#2CA02C";
const LINE: &str = "#1F77B4";

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:16px;color:#222}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
.grid{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0;border:1px solid #e3e3e3;padding:4px}\
figcaption{font-size:12px;color:#444}.reg{color:#D62728}.imp{color:#2CA02C}svg{display:block;max-width:100%;height:auto}\
code{font-size:12px}ul{margin:0;padding-left:18px}";

/// The page.
pub fn page(t: &Trend) -> String {
    let mut out = String::new();
    let _ = write!(out, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>dlbench trend</title><style>{STYLE}</style></head><body>");
    let _ = write!(
        out,
        "<h1>dlbench trend: {} result sets</h1><p>Each metric per phase across the result sets, in the order given. A dot is the median over the set's repeats, the bar its spread (min to max); \
         a <span class=\"reg\">red ring</span> marks a point where <code>dlbench compare</code> of the previous set and this one flags a regression, a <span class=\"imp\">green ring</span> an improvement. \
         The flags are compare's own judgement of each consecutive pair, with the same thresholds.</p>",
        t.points.len()
    );
    points_table(t, &mut out);
    steps_table(t, &mut out);
    let mut phase: Option<(&str, &str, usize)> = None;
    for s in &t.series {
        let key = (s.backend.as_str(), s.workload.as_str(), s.clients);
        if phase != Some(key) {
            if phase.is_some() {
                out.push_str("</div>");
            }
            let _ = write!(out, "<h2>{} · {} · {} client{}</h2><div class=\"grid\">", esc(&s.backend), esc(&s.workload), s.clients, if s.clients == 1 { "" } else { "s" });
            phase = Some(key);
        }
        figure(t, s, &mut out);
    }
    if phase.is_some() {
        out.push_str("</div>");
    }
    out.push_str("</body></html>\n");
    out
}

fn points_table(t: &Trend, out: &mut String) {
    out.push_str("<h2>Result sets</h2><table><tr><th>point</th><th>run id</th><th>dlbench commit</th><th>directory</th></tr>");
    for (i, p) in t.points.iter().enumerate() {
        let partial = if p.complete { "" } else { " (incomplete)" };
        let _ = write!(
            out,
            "<tr><td>#{}</td><td>{}{partial}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
            i + 1,
            esc(&p.run_id),
            esc(p.commit.as_deref().unwrap_or("not recorded")),
            esc(&p.dir)
        );
    }
    out.push_str("</table>");
}

fn steps_table(t: &Trend, out: &mut String) {
    out.push_str("<h2>What compare says of each step</h2><table><tr><th>step</th><th>compare</th><th>flagged</th></tr>");
    for s in &t.steps {
        let class = if s.regressions > 0 { " class=\"reg\"" } else { "" };
        let _ = write!(out, "<tr><td>#{} → #{}</td><td{class}>{} (exit {})</td><td>", s.from + 1, s.to + 1, esc(&conclusion(s)), s.compare_exit());
        if s.flags.is_empty() {
            out.push_str("nothing");
        } else {
            out.push_str("<ul>");
            for f in &s.flags {
                let c = if f.verdict == Change::Regressed { "reg" } else { "imp" };
                let _ = write!(out, "<li class=\"{c}\">{}</li>", esc(&flag_phrase(f)));
            }
            out.push_str("</ul>");
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</table>");
}

/// The unit a metric's name carries.
fn unit(m: &str) -> &'static str {
    match m {
        "ops_per_sec" => "acquisitions/s",
        _ if m.ends_with("_us") => "µs",
        _ if m.ends_with("_ms") => "ms",
        _ if m.ends_with("_pct") => "%",
        _ => "count",
    }
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One metric's chart.
fn figure(t: &Trend, s: &Series, out: &mut String) {
    let better = match s.better {
        Some(Better::Higher) => "higher is better",
        Some(Better::Lower) => "lower is better",
        None => "any increase is a regression",
    };
    let _ = write!(out, "<figure><figcaption><b>{}</b> ({}; {better})</figcaption>", esc(&s.metric), unit(&s.metric));
    let vals: Vec<&Spread> = s.values.iter().flatten().collect();
    let lo = vals.iter().map(|v| v.min).fold(0.0_f64, f64::min);
    let mut hi = vals.iter().map(|v| v.max).fold(f64::MIN, f64::max);
    if hi <= lo {
        hi = lo + 1.0;
    }
    let n = s.values.len();
    let x = |i: usize| LEFT + (W - LEFT - RIGHT) * if n > 1 { i as f64 / (n - 1) as f64 } else { 0.5 };
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (1.0 - (v - lo) / (hi - lo));
    let _ = write!(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{} across {n} result sets\">", esc(&s.metric));
    for v in [lo, (lo + hi) / 2.0, hi] {
        let _ = write!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\">{}</text>",
            W - RIGHT,
            LEFT - 4.0,
            y(v) + 3.0,
            num(v),
            y = y(v)
        );
    }
    for i in 0..n {
        let _ = write!(out, "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\">#{}</text>", x(i), H - 8.0, i + 1);
    }
    // The medians joined where consecutive points both measured the metric.
    for i in 1..n {
        if let (Some(a), Some(b)) = (s.values[i - 1], s.values[i]) {
            let _ = write!(out, "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{LINE}\" stroke-width=\"1.5\"/>", x(i - 1), y(a.median), x(i), y(b.median));
        }
    }
    for (i, v) in s.values.iter().enumerate() {
        let Some(v) = v else { continue };
        point(t, s, i, v, (x(i), y(v.median), y(v.min), y(v.max)), out);
    }
    out.push_str("</svg></figure>");
}

/// A point: its spread bar, its median dot, the ring of a flag, and a tooltip saying all.
fn point(t: &Trend, s: &Series, i: usize, v: &Spread, (px, py, ymin, ymax): (f64, f64, f64, f64), out: &mut String) {
    let flag = s.flag_at(&t.steps, i);
    let said = flag.map(|f| format!("; compare #{} -> #{}: {}", i, i + 1, flag_phrase(f))).unwrap_or_default();
    let _ = write!(
        out,
        "<g><title>{}: median {} (min {}, max {}, n = {}){}</title>",
        esc(&t.points[i].label(i)),
        num(v.median),
        num(v.min),
        num(v.max),
        v.n,
        esc(&said)
    );
    if v.n > 1 {
        let _ = write!(out, "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{ymin:.1}\" y2=\"{ymax:.1}\" stroke=\"{LINE}\" stroke-width=\"3\" stroke-opacity=\"0.35\"/>");
    }
    let _ = write!(out, "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{LINE}\"/>");
    if let Some(f) = flag {
        let (colour, class) = if f.verdict == Change::Regressed { (REGRESSED, "flag regressed") } else { (IMPROVED, "flag improved") };
        let _ = write!(out, "<circle class=\"{class}\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"7\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>");
    }
    out.push_str("</g>");
}
