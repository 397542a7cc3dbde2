//! The report page: one self-contained HTML file (no network fetches) with the run's
//! metadata, the AP / CP table, the per-workload table, scenario outcomes, the plots, and the
//! checkers' verdicts linked to the offending operations quoted from the history.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::tables::{by_family, esc, family, with_headings};
use super::Input;
use super::evidence::{checks, evidence, validity_class, Excerpts};
use crate::checker::SegmentVerdict;
use crate::judgement;
use crate::stats::fmt_ms_cell as ms;
use crate::stats::{fmt_pct_cell as pct, Quantile};
use crate::summary::calibration::Calibration;
use crate::summary::{BackendSummary, Summary, WorkloadSummary};


const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1200px}\
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
td:first-child,th:first-child,td.l{text-align:left}th{background:#f3f3f3}\
.valid{color:#1a7f37}.invalid{color:#c62828;font-weight:bold}.unknown{color:#b26a00}\
.banner{background:#fff3cd;border:1px solid #e0b400;padding:0.6em 1em}\
pre{background:#f7f7f7;padding:0.5em;overflow-x:auto;font-size:0.8em}img{max-width:100%;border:1px solid #eee;margin:0.5em 0}\
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}\
.scroll{overflow-x:auto;max-width:100%}h1,dd,li,p{overflow-wrap:anywhere}\
.matrix td{text-align:center}\
h1{margin:0.3em 0}.answer td,.answer th{text-align:left;vertical-align:top;padding:4px 8px}.answer tr.family th{background:#fafafa;font-size:0.85em;padding:1px 8px;color:#555}\
.pill{white-space:nowrap;border-radius:3px;padding:0 4px;font-weight:bold}.answer small{white-space:nowrap;color:#444}\
.good{background:#dff3e4;color:#14592a}.caution{background:#fff1cc;color:#6b4d00}.bad{background:#fbdada;color:#9b1c1c}.untested{background:#eceff1;color:#455a64}\
.key{font-size:0.85em;color:#444;margin:0.3em 0}#answer-sentences{margin:0.3em 0 1.5em}\
td{white-space:nowrap}td.l{white-space:normal;min-width:11em}td.long{min-width:22em}th{min-width:4.5em}\
.decision .narrow{display:none}\
@media (max-width:600px){body{margin:0.5em}table{font-size:0.8em}dl{grid-template-columns:auto}dd{margin-left:0.5em}\
table.decision{font-size:0.7em}table.decision td,table.decision th{white-space:normal;padding:2px;min-width:0}\
table.decision .minor{display:none}.decision .narrow{display:inline}}";

/// What the page's columns and labels mean: the one glossary (`judgement::glossary`), which
/// `dlbench run --help` and docs/glossary.md carry too.
fn glossary() -> &'static [(&'static str, String)] {
    crate::judgement::glossary::glossary()
}

pub fn page(input: &Input, plots: &[(String, PathBuf)], excerpts: &Excerpts) -> String {
    let s = &input.summary;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>dlbench {}</title><style>{STYLE}</style></head><body><h1>dlbench run {}</h1>",
        esc(&s.run_id),
        esc(&s.run_id)
    );
    if let Some(why) = &input.incomplete {
        let _ = write!(h, "<p class=\"banner\" id=\"incomplete\"><b>Incomplete run</b>: {}.</p>", esc(why));
    }
    // The answer first, as on the terminal and in summary.md: the decision table (one row
    // per backend, its CP / AP words on the first screen), then the matrix (every backend
    // under every condition), then what they rest on by workload, then the run's details.
    if s.has_rows() {
        h.push_str(&super::decision::html(&s.decision()));
    }
    h.push_str(&super::glance::answer(s));
    let mut shown = vec![false; plots.len()];
    for w in workload_names(s) {
        h.push_str(&by_workload(s, &w, plots, &mut shown));
    }
    h.push_str(&checks_matrix(&input.verdicts));
    h.push_str(&format!("<p id=\"resource\">{}</p>", esc(&super::text::resource_line(s))));
    h.push_str(&anomalies(s));
    h.push_str(&properties(s));
    h.push_str(&durability(s));
    h.push_str(&cost(s));
    h.push_str(&scaling(s));
    h.push_str(&shards(s));
    if let Some(c) = &s.calibration {
        h.push_str(&calibration(c));
    }
    if let Some(r) = &s.resources {
        h.push_str(&resources(r, s.soak.as_ref()));
    }
    h.push_str(&scenarios(s));
    h.push_str(&hits(s));
    if shown.iter().any(|x| !x) {
        h.push_str("<h2>Plots</h2>");
    }
    for ((title, path), _) in plots.iter().zip(&shown).filter(|(_, s)| !**s) {
        h.push_str(&figure(title, path));
    }
    h.push_str(&run_metadata(s));
    if !input.files.is_empty() {
        h.push_str("<p id=\"files\">Data: ");
        let links: Vec<String> = input.files.iter().map(|f| format!("<a href=\"{0}\">{0}</a>", esc(f))).collect();
        h.push_str(&links.join(" · "));
        h.push_str("</p>");
    }
    h.push_str("<h2>Glossary</h2><dl id=\"glossary\">");
    for (k, v) in glossary() {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    h.push_str("</dl>");
    h.push_str(&checks(&input.verdicts));
    h.push_str(&evidence(&input.verdicts, excerpts));
    h.push_str("</body></html>\n");
    h
}

fn figure(title: &str, path: &std::path::Path) -> String {
    format!("<h3>{}</h3><img src=\"{}\" alt=\"{}\">", esc(title), esc(&path.to_string_lossy()), esc(title))
}

/// The workloads in run order.
fn workload_names(s: &Summary) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for w in s.backends.iter().flat_map(|b| &b.workloads) {
        if !names.contains(&w.name) {
            names.push(w.name.clone());
        }
    }
    names
}

/// One workload's section: its plan, its AP / CP and workload tables (the same tables, over
/// this workload's phases only), and its own charts (marked `shown`).
fn by_workload(s: &Summary, name: &str, plots: &[(String, PathBuf)], shown: &mut [bool]) -> String {
    let mut only = s.clone();
    for b in &mut only.backends {
        b.workloads.retain(|w| w.name == name);
    }
    let phases: Vec<&WorkloadSummary> = only.backends.iter().flat_map(|b| &b.workloads).collect();
    let n: u64 = phases.iter().map(|w| w.acquired).sum();
    let plan = phases.first().map(|w| {
        format!(
            "{} clients, {} key(s), hold {}, {:.0} s measured per phase; {} phase(s), n = {n} acquisitions in all.",
            w.clients,
            w.keys,
            if w.hold.is_empty() { "?" } else { &w.hold },
            w.measured_s,
            phases.len()
        )
    });
    let mut h = format!("<h2 id=\"workload-{0}\">Workload {0}</h2><p>{1}</p>", esc(name), esc(&plan.unwrap_or_default()));
    h.push_str(&demote(&ap_cp(&only)));
    h.push_str(&demote(&workloads(&only)));
    for (i, (title, path)) in plots.iter().enumerate() {
        let file = path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
        if file == format!("throughput-{name}.svg") || file == format!("scaling-{name}.svg") {
            shown[i] = true;
            h.push_str(&figure(title, path));
        }
    }
    h
}

/// A section's headings one level down, under its workload's.
fn demote(html: &str) -> String {
    html.replace("<h2", "<h3").replace("</h2>", "</h3>")
}

/// The run's metadata: status, times, command, build, target, machine, servers, plan.
fn run_metadata(s: &Summary) -> String {
    let mut h = String::from("<h2>Run</h2><dl>");
    let mut meta = |k: &str, v: String| {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    };
    meta("status", if s.complete { "complete".into() } else { "incomplete".into() });
    meta("started", s.started_at.clone());
    meta("ended", s.ended_at.clone().unwrap_or_else(|| "-".into()));
    meta("command", s.command.join(" "));
    meta("dlbench commit", s.dlbench_commit.clone().unwrap_or_else(|| "unknown".into()));
    meta("target", s.target.clone());
    meta(
        "machine",
        format!("{} cores ({}), {} MB, {}, {}", s.machine.cores, s.machine.cpu_model, s.machine.memory_mb, s.machine.kernel, s.machine.os),
    );
    meta("servers", s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    if let Some(c) = &s.target_costs {
        meta("target costs", super::tables::target_costs_lines(c).join("; "));
    }
    meta("fencing", format!("{:?}", s.fencing).to_lowercase());
    let ws: Vec<&WorkloadSummary> = s.backends.iter().flat_map(|b| &b.workloads).collect();
    if let Some(seed) = ws.iter().find_map(|w| w.seed) {
        meta("seed", format!("{seed} (repeat with --seed {seed})"));
    }
    let mut plan: Vec<String> = Vec::new();
    for w in &ws {
        let p = format!("{}: {} clients, {} key(s), hold {}, {} s", w.name, w.clients, w.keys, if w.hold.is_empty() { "?" } else { &w.hold }, w.duration_s);
        if !plan.contains(&p) {
            plan.push(p);
        }
    }
    if !plan.is_empty() {
        let reps = ws.iter().map(|w| w.repeat + 1).max().unwrap_or(1);
        meta("plan", format!("{}{}", plan.join("; "), if reps > 1 { format!("; each {reps} times, interleaved") } else { String::new() }));
    }
    if !s.nemesis_schedule.is_empty() {
        meta("nemesis", s.nemesis_schedule.join(", "));
    }
    if let Some(rss) = s.peak_rss_mb {
        meta("peak memory", format!("{rss} MB"));
    }
    h.push_str("</dl>");
    h
}

/// A phase's checks cell: its validity linked to the backend's checks.
fn checks_cell(b: &BackendSummary, w: &WorkloadSummary) -> String {
    w.validity.map(|v| format!("<a class=\"{}\" href=\"#checks-{}\">{v}</a>", validity_class(v), esc(&b.name))).unwrap_or_else(|| "-".into())
}

/// The AP / CP table, per workload, only when faults were applied.
fn ap_cp(s: &Summary) -> String {
    if !s.faults_applied() {
        return format!(
            "<h2>{}</h2><p id=\"no-ap-cp\">{} Each phase's safety verdict and checks are in the workload table below.</p>",
            judgement::CLASS_HEADING,
            judgement::no_class(s.faults_without_effect())
        );
    }
    let mut h = format!("<h2>{} (per workload)</h2>", judgement::CLASS_HEADING);
    h.push_str("<div class=\"scroll\"><table><tr><th>backend</th><th>workload</th><th>acq/s</th><th>p99 ms</th><th>grant rate</th><th>recovery</th>\
                <th>overlaps</th><th>lost upd (no fence)</th><th>fencing</th><th>evidence</th><th>claims</th><th>observed</th>\
                <th>checks</th><th>verdict</th></tr>");
    for b in &s.backends {
        if let Some(f) = &b.failure {
            let _ = write!(h, "<tr><td>{}</td><td class=\"l\" colspan=\"13\">failed: {}</td></tr>", esc(&b.name), esc(f));
            continue;
        }
        for w in &b.workloads {
            let v = w.verdict.as_ref();
            let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            let check = checks_cell(b, w);
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"l\">{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{check}</td><td class=\"l\">{}</td></tr>",
                esc(&b.name),
                esc(&w.name),
                w.ops_per_sec,
                esc(&pct(&w.acquire_latency_us, Quantile::P99)),
                esc(&opt(v.map(|v| v.availability_cell()))),
                esc(&opt(v.and_then(|v| v.recovery.clone()))),
                w.counts.overlaps,
                w.counts.lost_updates,
                esc(&opt(v.map(|v| v.fencing.clone()))),
                esc(&opt(v.map(|v| match v.exposure {
                    Some(e) => format!("{} ({} exposed)", v.evidence, crate::judgement::percent(e)),
                    None => v.evidence.to_string(),
                }))),
                esc(&opt(v.map(|v| v.class_claimed.clone()))),
                esc(&opt(v.map(|v| v.observed_cell()))),
                esc(&v.map(|v| v.headline.clone()).unwrap_or_default()),
            );
        }
    }
    h.push_str("</table></div>");
    h
}

/// The per-workload table, grouped by family.
fn workloads(s: &Summary) -> String {
    if s.backends.iter().all(|b| b.failure.is_none() && b.workloads.is_empty()) {
        return String::new();
    }
    let mut h = String::from("<h2>Workloads</h2><div class=\"scroll\"><table><tr><th>backend</th><th>workload</th><th>clients</th><th>keys</th><th>acq/s</th><th>p50 ms</th>\
                <th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>handoff p50 ms</th><th>fair</th><th>errors</th><th>overlaps</th>\
                <th>lost upd</th><th>stale tok</th><th>checks</th><th>verdict</th><th>flags</th></tr>");
    for (heading, b) in with_headings(by_family(s).into_iter().map(|b| (family(b), b)).collect()) {
        if let Some(f) = heading {
            let _ = write!(h, "<tr><th class=\"l\" colspan=\"18\">{}</th></tr>", esc(f));
        }
        for w in &b.workloads {
            let l = &w.acquire_latency_us;
            let check = checks_cell(b, w);
            let verdict = w.verdict.as_ref().map(|v| esc(&v.headline)).unwrap_or_else(|| "-".into());
            let flags = if w.anomalies.is_empty() {
                "-".to_string()
            } else {
                format!("<a class=\"unknown\" href=\"#anomalies\">{}</a>", esc(&w.anomalies.iter().map(|a| a.kind.as_str()).collect::<Vec<_>>().join(", ")))
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{check}</td><td class=\"l\">{verdict}</td><td class=\"l\">{flags}</td></tr>",
                esc(&b.name),
                esc(&w.name),
                w.clients,
                w.keys,
                w.ops_per_sec,
                pct(l, Quantile::P50),
                pct(l, Quantile::P99),
                pct(l, Quantile::P999),
                if l.count > 0 { ms(l.max) } else { "-".into() },
                pct(&w.handoff_latency_us, Quantile::P50),
                w.fairness_jain.map(|j| format!("{j:.2}")).unwrap_or_else(|| "-".into()),
                w.errors,
                w.counts.overlaps,
                w.counts.lost_updates,
                w.counts.stale_tokens
            );
        }
    }
    h.push_str("</table></div>");
    h
}

/// The anomaly flags, or a line saying there were none.
fn anomalies(s: &Summary) -> String {
    if s.backends.iter().all(|b| b.workloads.is_empty()) {
        return String::new();
    }
    let flags = super::text::anomalies(s);
    let scope = if s.faults_applied() { format!("<p>{}</p>", esc(super::text::FAULT_SECONDS_NOTE)) } else { String::new() };
    if flags.is_empty() {
        return format!("<p id=\"anomalies\">No anomaly flagged: no second without an acquisition, no max over 10x the p99, no stall past the wait timeout, every rate settled.</p>{scope}");
    }
    let mut h = String::from("<h2 id=\"anomalies\">Anomalies</h2><p>Flags from each phase's per-second series (criteria in docs/results-and-compare.md, <i>Steady state and anomalies</i>):</p><ul>");
    for f in &flags {
        let _ = write!(h, "<li class=\"unknown\">{}</li>", esc(f));
    }
    h.push_str("</ul>");
    h.push_str(&scope);
    h
}

/// The scenario outcomes, expected beside observed.
fn scenarios(s: &Summary) -> String {
    if s.scenarios.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>Scenarios</h2><div class=\"scroll\"><table><tr><th>scenario</th><th>backend</th><th>fencing</th><th>expected</th><th>observed</th><th>agrees</th></tr>");
    for o in &s.scenarios {
        let name = if o.case.is_empty() { o.scenario.clone() } else { format!("{} ({})", o.scenario, o.case) };
        let _ = write!(
            h,
            "<tr><td>{} {}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"{}\">{}</td></tr>",
            esc(&name),
            esc(&o.title),
            esc(&o.backend),
            esc(&o.fencing),
            esc(&o.expected.to_string()),
            esc(&o.observed),
            if o.ok { "valid" } else { "invalid" },
            if o.ok { "yes" } else { "NO" }
        );
    }
    h.push_str("</table></div>");
    h
}

/// Backend · workload against checker, each cell the verdict, linked to its first evidence
/// (or to the phase's checks when the checker named none).
fn checks_matrix(verdicts: &[SegmentVerdict]) -> String {
    if verdicts.is_empty() {
        return String::new();
    }
    let mut checkers: Vec<crate::checker::CheckerId> = Vec::new();
    for v in verdicts {
        for r in &v.results {
            if !checkers.contains(&r.checker) {
                checkers.push(r.checker);
            }
        }
    }
    let mut h = String::from("<h2>Checks at a glance</h2><div class=\"scroll\"><table class=\"matrix\" id=\"checks-matrix\"><tr><th>backend · workload</th>");
    for c in &checkers {
        let _ = write!(h, "<th>{}</th>", esc(c.as_str()));
    }
    h.push_str("<th>phase</th></tr>");
    for (i, v) in verdicts.iter().enumerate() {
        let _ = write!(h, "<tr><td>{} · {}</td>", esc(&v.backend), esc(&v.workload));
        for c in &checkers {
            match v.results.iter().find(|r| r.checker == *c) {
                Some(r) => {
                    let href = if r.evidence.is_empty() { format!("#seg-{i}") } else { format!("#ev-{i}-{}-0", r.checker) };
                    let _ = write!(h, "<td><a class=\"{}\" href=\"{href}\" title=\"{}\">{}</a></td>", validity_class(r.valid), esc(&r.message), r.valid);
                }
                None => h.push_str("<td>-</td>"),
            }
        }
        let _ = write!(h, "<td><a class=\"{}\" href=\"#seg-{i}\">{}</a></td></tr>", validity_class(v.valid), v.valid);
    }
    h.push_str("</table></div>");
    h
}

/// Machine usage over the run (and the soak's outcome, when it was one).
fn resources(r: &crate::summary::usage::UsageSummary, soak: Option<&crate::summary::soak::SoakOutcome>) -> String {
    let mut h = String::from("<h2>Resources</h2>");
    if let Some(o) = soak {
        let _ = write!(
            h,
            "<p class=\"{}\">Soak {}: dlbench's memory grew {} after the warm-up (goal: under {}%), open files by {}; {} of {} faults healed.</p>",
            if o.passed { "valid" } else { "invalid" },
            if o.passed { "passed" } else { "failed" },
            o.rss_growth_pct.map(|g| format!("{g:+.1}%")).unwrap_or_else(|| "(not measured)".into()),
            o.goal.map(|g| g.max_rss_growth_pct).unwrap_or_default(),
            o.fd_growth.map(|g| format!("{g:+.1}")).unwrap_or_else(|| "(not measured)".into()),
            o.faults_healed,
            o.faults_applied
        );
        for f in &o.failures {
            let _ = write!(h, "<p class=\"invalid\">{}</p>", esc(f));
        }
    }
    let trends = match r.no_trend_reason() {
        Some(why) => format!("No growth is shown: {}.", esc(&why)),
        None => format!("Trends leave out the first {:.0} s; growth is the least-squares slope after the warm-up.", r.warmup_s),
    };
    let _ = write!(
        h,
        "<p>{} samples over {:.0} s, one a second (<a href=\"resources.jsonl\">resources.jsonl</a>). {trends}</p>",
        r.samples, r.seconds
    );
    h.push_str("<div class=\"scroll\"><table><tr><th>series</th><th>first</th><th>peak</th><th>last</th><th>mean after&nbsp;warm&#8209;up</th><th>growth / hour</th><th>growth % / hour</th></tr>");
    let row = |h: &mut String, name: &str, t: &crate::summary::usage::Trend| {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            t.first,
            t.peak,
            t.last,
            t.mean,
            r.growth(t).map(|(g, _)| format!("{g:+.1}")).unwrap_or_else(|| "-".into()),
            r.growth(t).and_then(|(_, p)| p).map(|g| format!("{g:+.1}%")).unwrap_or_else(|| "-".into())
        );
    };
    row(&mut h, "dlbench RSS (MiB)", &r.harness_rss_mb);
    if let Some(t) = &r.harness_heap_mb {
        row(&mut h, "dlbench heap in use (MiB)", t);
    }
    row(&mut h, "dlbench open files", &r.harness_fds);
    for (n, t) in &r.servers_mb {
        row(&mut h, &format!("{n} PSS (MiB)"), t);
    }
    h.push_str("</table></div>");
    h
}

/// A table from rows of cells, the renderers' shared data (`text::cost_rows`,
/// `text::scaling_rows`): `left` names the columns aligned left.
fn cells_table(id: &str, title: &str, header: &[&str], rows: &[Vec<String>], left: &[usize], note: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut h = format!("<h2 id=\"{id}\">{}</h2><div class=\"scroll\"><table><tr>", esc(title));
    for c in header {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>");
    for r in rows {
        h.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            // A long text wraps in a wider cell, so no cell runs past three lines.
            let class = match (left.contains(&i), c.chars().count() > 60) {
                (true, true) => " class=\"l long\"",
                (true, false) => " class=\"l\"",
                _ => "",
            };
            let _ = write!(h, "<td{class}>{}</td>", esc(c));
        }
        h.push_str("</tr>");
    }
    let _ = write!(h, "</table></div><p>{}</p>", esc(note));
    h
}

/// The "what users hit" table (see `text::hits_grid`): backend x entry, each figure linked
/// to its evidence file.
fn hits(s: &crate::summary::Summary) -> String {
    use crate::report::text::{hits_grid, HITS_NOTE};
    if s.hits.is_empty() {
        return String::new();
    }
    let (entries, rows) = hits_grid(&s.hits);
    let mut h = String::from("<h2 id=\"hits\">What users hit</h2><div class=\"scroll\"><table><tr><th>backend</th>");
    for (e, t) in &entries {
        let _ = write!(h, "<th>{} {}</th>", esc(e), esc(t));
    }
    h.push_str("</tr>");
    for (backend, cells) in &rows {
        let _ = write!(h, "<tr><td class=\"l\">{}</td>", esc(backend));
        for hs in cells {
            h.push_str("<td class=\"l\">");
            if hs.is_empty() {
                h.push_str("does not apply");
            }
            for (i, x) in hs.iter().enumerate() {
                if i > 0 {
                    h.push_str("<br>");
                }
                if !x.case.is_empty() {
                    let _ = write!(h, "<b>{}</b>: ", esc(&x.case));
                }
                let _ = write!(h, "<a href=\"{}\">{}</a>", esc(&x.evidence), esc(&x.figure));
                if !x.ok {
                    h.push_str(" <span class=\"invalid\">NO</span>");
                }
            }
            h.push_str("</td>");
        }
        h.push_str("</tr>");
    }
    let _ = write!(h, "</table></div><p>{}</p>", esc(HITS_NOTE));
    h
}

/// The four-properties table (see `text::properties_rows`).
fn properties(s: &crate::summary::Summary) -> String {
    use crate::report::tables::{properties_rows, PROPERTIES_HEADER, PROPERTIES_NOTE};
    let rows: Vec<Vec<String>> = properties_rows(s).into_iter().map(Vec::from).collect();
    cells_table("properties", "The four properties", &PROPERTIES_HEADER, &rows, &[0, 1, 2, 4, 5, 6], PROPERTIES_NOTE)
}

/// The durability table (several levels), or each backend's durability beside its verdict.
fn durability(s: &crate::summary::Summary) -> String {
    use crate::report::tables::{durability_lines, durability_rows, DURABILITY_HEADER, DURABILITY_NOTE};
    let rows: Vec<Vec<String>> = durability_rows(s).into_iter().map(Vec::from).collect();
    let lines = durability_lines(s);
    if lines.is_empty() {
        return cells_table("durability", "Durability", &DURABILITY_HEADER, &rows, &[0, 1, 2, 3, 6], DURABILITY_NOTE);
    }
    let items: String = lines.iter().map(|l| format!("<li>{}</li>", esc(l))).collect();
    format!("<h2 id=\"durability\">Durability</h2><p>The servers' settings beside each verdict:</p><ul>{items}</ul>")
}

/// The cost-per-acquisition table (see `text::cost_rows`).
fn cost(s: &crate::summary::Summary) -> String {
    use crate::report::tables::{cost_rows, COST_HEADER, COST_NOTE};
    let rows: Vec<Vec<String>> = cost_rows(s).into_iter().map(Vec::from).collect();
    cells_table("cost", "Cost per acquisition", &COST_HEADER, &rows, &[1, 6], COST_NOTE)
}

/// The scaling table: each swept backend · workload's points, the knee marked.
fn scaling(s: &crate::summary::Summary) -> String {
    use crate::report::tables::{scaling_rows, SCALING_HEADER, SCALING_NOTE};
    let rows: Vec<Vec<String>> = scaling_rows(s).into_iter().map(Vec::from).collect();
    cells_table("scaling", "Scaling", &SCALING_HEADER, &rows, &[1, 7], SCALING_NOTE)
}

/// The shards of a merged run (see `text::shard_rows`).
fn shards(s: &crate::summary::Summary) -> String {
    use crate::report::tables::{shard_rows, SHARD_HEADER, SHARD_NOTE};
    let rows: Vec<Vec<String>> = shard_rows(s).into_iter().map(Vec::from).collect();
    cells_table("shards", "Shards", &SHARD_HEADER, &rows, &[0, 1], SHARD_NOTE)
}

/// `dlbench calibrate`'s tables (`report::calibration`), each under its heading.
fn calibration(c: &Calibration) -> String {
    let mut h = format!("<h2>Calibration</h2><p>{} connections, {:.0} s per measurement, one local target.</p>", c.connections, c.seconds);
    for t in super::calibration::sections(c) {
        let _ = write!(h, "<h3>{}</h3>{}", t.title, t.table.html());
        if let Some(note) = &t.note {
            let _ = write!(h, "<p>{}</p>", esc(note));
        }
    }
    h
}
