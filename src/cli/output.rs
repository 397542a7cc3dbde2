//! The one place a finished command is rendered and printed, and its exit status decided:
//! producers return their result (`run::Finished`, `calibrate::Calibrated`, `compare::Comparison`,
//! `trend::Trend`,
//! the merged shards' and the scenarios' summaries),
//! this prints it.

use std::path::Path;

use crate::checker::Validity;
use crate::run::Finished;

/// The exit status of a run whose verdicts contradict themselves (EX_SOFTWARE): a bug in
/// dlbench, never a finding about a lock.
pub const CONTRADICTED: i32 = 70;
/// Set (by the test suite) to fail a command whose verdicts contradict themselves, rather
/// than only saying so.
pub const STRICT_VERDICTS: &str = "DLBENCH_STRICT_VERDICTS";

/// Every verdict of the run set walked for a statement that contradicts another of the same
/// record (`judgement::contradictions`); each one found is said on stderr. Under
/// [`STRICT_VERDICTS`], the exit status becomes [`CONTRADICTED`].
fn contradicted(summary: &crate::summary::Summary) -> Option<i32> {
    let found = summary.contradictions();
    for c in &found {
        eprintln!("dlbench: internal error: a verdict contradicts itself: {c}");
    }
    (!found.is_empty() && std::env::var_os(STRICT_VERDICTS).is_some()).then_some(CONTRADICTED)
}

/// A run's (or soak's) report, its tables on the terminal, and its exit status: 130 when
/// interrupted, the soak's own verdict for a soak, else the worst verdict's (Jepsen's
/// convention) unless `--no-fail-on-violation`.
pub(super) fn run_finished(f: &Finished, wide: bool) -> i32 {
    let code = run_code(f, table_width(wide));
    contradicted(&f.summary).unwrap_or(code)
}

/// The width the per-phase table keeps within: every column with `--wide`; else 100
/// columns, or the terminal's width when stdout is a wider terminal (a wide table is opt-in).
fn table_width(wide: bool) -> usize {
    if wide {
        usize::MAX
    } else {
        crate::util::terminal_columns().map_or(crate::util::WIDTH, |c| c.max(crate::util::WIDTH))
    }
}

/// What a finished run prints on stdout, every line within `width` but for `--wide`'s table:
/// the decision table, then the tables it rests on, each under a heading.
pub(super) fn run_text(summary: &crate::summary::Summary, dir: &Path, width: usize) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if summary.has_rows() {
        // The answer first, then the tables it rests on, each under a heading.
        let _ = writeln!(o, "{}", crate::report::decision::terminal(&summary.decision()));
        let _ = writeln!(o, "Each phase\n");
    }
    let _ = writeln!(o, "{}", crate::report::text::table_within(summary, width));
    if summary.backends.iter().any(|b| b.properties.is_some()) {
        let _ = writeln!(o, "{}", crate::report::text::properties_table(summary));
    }
    o.push_str(&crate::report::text::durability_text(summary));
    let durability = crate::report::text::durability_markdown(summary);
    if !durability.is_empty() {
        let _ = writeln!(o, "{}", durability.trim_start());
    }
    // Lines of prose wrap within the width (100 under --wide), their continuations indented.
    let prose = if width == usize::MAX { crate::util::WIDTH } else { width };
    let wrap = |text: &str| crate::util::wrap(text, prose, 0, 2);
    for a in crate::report::text::anomalies(summary) {
        o.push_str(&wrap(&format!("anomaly: {a}")));
    }
    if summary.faults_applied() {
        let _ = writeln!(o, "{} (per workload)\n", crate::judgement::CLASS_HEADING);
        let _ = writeln!(o, "{}", crate::report::text::ap_cp_table(summary));
    } else {
        // The same rule as summary.md and the page: faults skipped or shown to do nothing.
        o.push_str(&wrap(&crate::judgement::no_class(summary.faults_without_effect())));
        o.push('\n');
    }
    if let Some(r) = &summary.resources {
        o.push_str(&wrap(&crate::usage::line(r)));
    }
    for l in crate::report::text::target_costs(summary) {
        o.push_str(&wrap(&l));
    }
    let _ = writeln!(o, "results: {}", dir.join("summary.json").display());
    o
}

fn run_code(f: &Finished, width: usize) -> i32 {
    let summary = &f.summary;
    write_report(&f.dir);
    print!("{}", run_text(summary, &f.dir, width));
    if !summary.complete {
        return 130;
    }
    if let Some(o) = &summary.soak {
        // A soak judges the harness over hours; the locks' verdicts are in the table above.
        println!("{}", crate::soak::line(o, summary.resources.as_ref()));
        return if o.passed { 0 } else { 1 };
    }
    let worst = summary.worst();
    if worst != Validity::Valid {
        let what = if worst == Validity::Invalid { "invalid" } else { "unknown" };
        if f.fail_on_violation {
            eprintln!("dlbench: verdict {what} (see the table and checks.json); exit {}", crate::judgement::exit_code(worst));
            return crate::judgement::exit_code(worst);
        }
        eprintln!("dlbench: verdict {what}; exit 0 because of --no-fail-on-violation");
    }
    0
}

/// Calibrate measured and wrote summary.json; its report and table are rendered here.
pub(super) fn calibrated(done: &crate::calibrate::Calibrated) -> i32 {
    write_report(&done.run_dir);
    println!("{}", crate::report::text::calibration_markdown(&done.calibration));
    println!("results: {}", done.run_dir.join("summary.json").display());
    done.code
}

/// A comparison on stdout, as an aligned table (`--format text`, the default) or Markdown,
/// and in the files asked for; exit 1 on a confirmed regression, 3 when a change was not
/// confirmed or none could have been found (as for an undecided verdict), else 0.
pub(super) fn compared(c: &crate::compare::Comparison, format: super::args::CompareFormat, json: Option<&Path>, markdown: Option<&Path>) -> anyhow::Result<i32> {
    let md = crate::compare::markdown(c);
    match format {
        super::args::CompareFormat::Text => print!("{}", crate::compare::text(c)),
        super::args::CompareFormat::Markdown => print!("{md}"),
    }
    if let Some(p) = json {
        crate::util::write_atomic(p, serde_json::to_string_pretty(c)?.as_bytes())?;
    }
    if let Some(p) = markdown {
        crate::util::write_atomic(p, md.as_bytes())?;
    }
    // One rule whatever the load: 1 only for what the rule confirmed (or a safety count
    // that rose); a change it could not confirm, or a comparison that could not have seen
    // one, is 3.
    Ok(if c.regressions > 0 { 1 } else if !c.detectable || c.unconfirmed > 0 { 3 } else { 0 })
}

/// A trend: the page and the JSON asked for, then the terminal summary; exit 0 once written
/// (the trend is a view: the gate is `compare`).
pub(super) fn trended(t: &crate::trend::Trend, html: &Path, json: Option<&Path>) -> anyhow::Result<i32> {
    crate::util::write_atomic(html, crate::trend::html::page(t).as_bytes()).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", html.display()))?;
    if let Some(p) = json {
        crate::util::write_atomic(p, serde_json::to_string_pretty(t)?.as_bytes())?;
    }
    print!("{}", crate::trend::text::summary(t));
    println!("page: {}", html.display());
    Ok(0)
}

/// The merged shards: the report, the table and the shards' own table; the worst verdict's
/// exit status unless `--no-fail-on-violation`.
pub(super) fn merged(summary: &crate::summary::Summary, dir: &Path, fail_on_violation: bool) -> i32 {
    write_report(dir);
    println!("{}", crate::report::text::table_within(summary, table_width(false)));
    println!("{}", crate::report::text::shard_markdown(summary));
    println!("results: {}", dir.join("summary.json").display());
    let code = if fail_on_violation { crate::judgement::exit_code(summary.worst()) } else { 0 };
    contradicted(summary).unwrap_or(code)
}

/// Scenarios: the report, the tables, the result path and every contradiction; exit 1 on a
/// contradiction or a measurement without evidence, 130 when cut short.
pub(super) fn scenarios(summary: &crate::summary::Summary, dir: &Path) -> i32 {
    write_report(dir);
    if !summary.scenarios.is_empty() {
        println!("{}", crate::scenario::table(&summary.scenarios));
    }
    if !summary.hits.is_empty() {
        println!("{}", crate::report::text::hits_terminal(&summary.hits));
    }
    println!("results: {}", dir.join("summary.json").display());
    let contradictions = summary.scenarios.iter().filter(|o| !o.ok).count();
    let unmeasured = summary.hits.iter().filter(|h| !h.ok).count();
    if contradictions > 0 {
        eprintln!("dlbench: {contradictions} observation(s) contradict the catalogue's expectation:");
        // Named one per line, so a long log cut in the middle still says which.
        for o in summary.scenarios.iter().filter(|o| !o.ok) {
            let case = if o.case.is_empty() { String::new() } else { format!(" ({})", o.case) };
            eprintln!(
                "  {} {}{case} fencing {}: expected {}, observed {}{}",
                o.scenario,
                o.backend,
                o.fencing,
                o.expected,
                o.observed,
                if o.notes.is_empty() { String::new() } else { format!("; {}", o.notes.join("; ")) }
            );
        }
    }
    if unmeasured > 0 {
        eprintln!("dlbench: {unmeasured} measurement(s) without evidence or against their expectation (the table's NO rows)");
    }
    let code = if contradictions + unmeasured > 0 {
        1
    } else if summary.complete {
        0
    } else {
        130
    };
    contradicted(summary).unwrap_or(code)
}

/// `dlbench scenario list`: every catalogue entry on one line (id, title, and the published
/// source it reproduces, where it has one), in catalogue order, as `cargo test --list` lists
/// tests; exit 0.
pub(super) fn scenario_list() -> i32 {
    let width = crate::catalogue::CATALOGUE.iter().map(|e| e.id.len()).max().unwrap_or(0);
    for e in crate::catalogue::CATALOGUE {
        let source = e.published.map(|p| format!("  (source: {})", p.source)).unwrap_or_default();
        println!("{:<width$}  {}{source}", e.id, e.title);
    }
    0
}

/// summary.md and report.html beside the summary.json a command wrote. A report that cannot
/// be written is said, and does not change the exit status: the results are already on disk.
fn write_report(dir: &Path) {
    if let Err(e) = crate::report::render(dir) {
        eprintln!("dlbench: the report could not be written: {e:#}");
    }
}
