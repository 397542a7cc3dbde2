//! The comparison as Markdown, fit for a pull-request comment, and the paragraphs it shares
//! with the terminal's table (`text.rs`).

use super::{Comparison, Row, ALPHA, MIN_SAMPLES, SAFETY};
use crate::judgement::Change;
use crate::stats::samples::smallest_p;

/// A metric's value in human units: ms or µs for latencies, k/s for rates.
pub(super) fn human(metric: &str, v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    if metric.ends_with("_us") {
        if v >= 1000.0 { format!("{:.2} ms", v / 1000.0) } else { format!("{v:.0} µs") }
    } else if metric.ends_with("_ms") {
        if v >= 10_000.0 { format!("{:.1} s", v / 1000.0) } else { format!("{v:.0} ms") }
    } else if metric == "ops_per_sec" {
        if v >= 1000.0 { format!("{:.1} k/s", v / 1000.0) } else { format!("{v:.0} /s") }
    } else if metric == "availability_pct" {
        format!("{v:.1}%")
    } else if metric == "verdict" || metric == "measured" {
        String::new()
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A row's phase ("backend · workload"), its client count (blank when none) and its change.
pub(super) fn phase_cells(r: &Row) -> (String, String, String) {
    let phase = if r.workload.is_empty() { r.backend.clone() } else { format!("{} · {}", r.backend, r.workload) };
    let clients = if r.clients > 0 { r.clients.to_string() } else { String::new() };
    (phase, clients, r.change_pct.map(|p| format!("{p:+.1}%")).unwrap_or_default())
}

/// A row's word: improved, unchanged, regressed (safety), or past its threshold and not
/// confirmed.
pub(super) fn word(r: &Row) -> &'static str {
    match r.verdict {
        Change::Unchanged => r.verdict.word(r.safety),
        _ if !r.gated => "not gated",
        _ if r.unconfirmed => "not confirmed",
        _ => r.verdict.word(r.safety),
    }
}

fn md_row(r: &Row) -> String {
    let (phase, clients, change) = phase_cells(r);
    let verdict = match r.verdict {
        Change::Regressed if r.gated && !r.unconfirmed => format!("**{}**", word(r)),
        _ => word(r).to_string(),
    };
    let note = if r.note.is_empty() { String::new() } else { format!(" ({})", r.note) };
    format!(
        "| {phase} | {clients} | {} | {} | {} | {change} | {verdict}{note} |\n",
        r.metric,
        human(&r.metric, r.base),
        human(&r.metric, r.new)
    )
}

/// "1 run", "3 runs".
fn runs(n: usize) -> String {
    if n == 1 { "1 run".into() } else { format!("{n} runs") }
}

/// Runs per side (equal sides) for completely separated samples to pass Holm's first step
/// over `tests` tests.
pub fn runs_needed(tests: usize) -> usize {
    (MIN_SAMPLES..100).find(|&n| smallest_p(n, n) * (tests.max(1) as f64) < ALPHA).unwrap_or(100)
}

/// The paragraphs before the table, the same on a terminal and in Markdown: mismatches,
/// notes, what was left out, the conclusion, how it was reached. `strong` marks the words a
/// reader must not miss (bold in Markdown, plain on a terminal).
pub(super) fn lead(c: &Comparison, strong: fn(&str) -> String) -> Vec<String> {
    let mut p = Vec::new();
    if !c.mismatches.is_empty() {
        p.push(format!("{}: the runs differ in {}.", strong("Compared despite mismatches (--allow-mismatch)"), c.mismatches.join(", ")));
    }
    for n in &c.notes {
        p.push(format!("Note: {n}."));
    }
    for n in &c.target_costs {
        p.push(format!("{}: {n}.", strong("Target costs")));
    }
    if !c.left_out.is_empty() {
        p.push(format!("{} (measured on one side only): {}.", strong("Left out"), c.left_out.join("; ")));
    }
    p.push(conclusion(c, strong));
    if c.min_samples >= MIN_SAMPLES {
        p.push(format!(
            "{} or more runs per side: a change counts when the medians differ by more than its threshold and a one-sided Mann-Whitney U test tells the sides apart at p < {ALPHA} after Holm's adjustment over the comparison's {} tests.",
            c.min_samples, c.tests
        ));
    } else {
        p.push(format!(
            "{} per side: no spread to judge noise by, so a change past its threshold is reported as not confirmed, and none can be ruled out.",
            runs(c.min_samples)
        ));
    }
    // The number, once: what this comparison's rule needs for the plans in front of it.
    let (k, n) = (c.runs_needed, c.min_samples);
    let have = if n >= k {
        format!("This comparison has {}.", runs(n))
    } else {
        format!("This comparison has {}: use `run --repeat {k}` on each side, or {k} runs in each side's directory, taken in turn.", runs(n))
    };
    p.push(format!(
        "{}: at least {k} runs per side. The rule tests each gated row (--gate {g}: {f} tests here) with a one-sided Mann-Whitney U test under Holm's adjustment, so completely separated samples must reach p < {lvl:.4}, and {k} runs a side is the fewest that can (1 / C({k2}, {k}) = {pk:.4}). {have}",
        strong("Runs needed"),
        g = if c.gate.is_empty() { "all" } else { c.gate.as_str() },
        f = c.family,
        lvl = ALPHA / c.family.max(1) as f64,
        k2 = 2 * k,
        pk = smallest_p(k, k),
    ));
    p
}

/// The conclusion: the confirmed regressions, else the changes not confirmed, else why no
/// regression could have been detected, else "No regression".
fn conclusion(c: &Comparison, strong: fn(&str) -> String) -> String {
    let names = |pick: fn(&Row) -> bool| {
        c.rows
            .iter()
            .filter(|r| pick(r))
            .map(|r| if r.workload.is_empty() { format!("{} {}", r.backend, r.metric) } else { format!("{} · {} {}", r.backend, r.workload, r.metric) })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let none = crate::judgement::NOTHING_DETECTABLE;
    if c.regressions > 0 {
        let safety = if c.safety_regressions > 0 { format!(", {} of safety", c.safety_regressions) } else { String::new() };
        let also = if c.unconfirmed > 0 { format!("; and {}: {}", crate::judgement::unconfirmed(c.unconfirmed), names(|r| r.verdict == Change::Regressed && r.gated && r.unconfirmed)) } else { String::new() };
        let ungated = names(|r| r.verdict == Change::Regressed && !r.gated);
        let ungated = if ungated.is_empty() { ungated } else { format!("; past its threshold, not gated: {ungated}") };
        format!(
            "{}: {}{also}{ungated}",
            strong(&format!("{}{safety}", crate::judgement::regressions(c.regressions))),
            names(|r| r.verdict == Change::Regressed && r.gated && !r.unconfirmed)
        )
    } else if c.unconfirmed > 0 {
        format!(
            "{}: {} ({} per side: no test could tell it from noise; exit 3).",
            strong(&crate::judgement::unconfirmed(c.unconfirmed)),
            names(|r| r.verdict == Change::Regressed && r.gated && r.unconfirmed),
            runs(c.min_samples)
        )
    } else if !c.detectable && c.min_samples < MIN_SAMPLES {
        format!("{}: {} per side {} no spread to tell a change from noise.", strong(none), runs(c.min_samples), if c.min_samples == 1 { "gives" } else { "give" })
    } else if !c.detectable {
        format!(
            "{}: with {n} runs per side the smallest p-value a test can reach is {pv:.4}, and {t} tests need one under {lvl:.4} (Holm).",
            strong(none),
            n = c.min_samples,
            pv = smallest_p(c.min_samples, c.min_samples),
            t = c.tests,
            lvl = ALPHA / c.tests.max(1) as f64,
        )
    } else {
        strong(&format!("{}.", crate::judgement::NO_REGRESSION))
    }
}

/// The paragraph after the table: the thresholds in force.
pub(super) fn thresholds_line(c: &Comparison) -> String {
    format!(
        "Thresholds (minimum relative change that counts, %): {}; availability in percentage points; any increase in {} fails.",
        c.thresholds_pct.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        SAFETY.join(", ")
    )
}

/// Markdown fit for a pull-request comment: the changes first, the unchanged rows folded.
pub fn markdown(c: &Comparison) -> String {
    let mut s = format!("## dlbench compare\n\nbase `{}` → new `{}`\n\n", c.base, c.new);
    for p in lead(c, |x| format!("**{x}**")) {
        s.push_str(&p);
        s.push_str("\n\n");
    }
    const HEAD: &str = "| backend · workload | clients | metric | base | new | change | verdict |\n|---|---:|---|---:|---:|---:|---|\n";
    let changed: Vec<&Row> = c.rows.iter().filter(|r| r.verdict != Change::Unchanged).collect();
    let unchanged: Vec<&Row> = c.rows.iter().filter(|r| r.verdict == Change::Unchanged).collect();
    if !changed.is_empty() {
        s.push_str(HEAD);
        let mut changed = changed;
        changed.sort_by_key(|r| if r.verdict == Change::Regressed { 0 } else { 1 });
        for r in changed {
            s.push_str(&md_row(r));
        }
        s.push('\n');
    }
    if !unchanged.is_empty() {
        let rows = if unchanged.len() == 1 { "1 unchanged row".to_string() } else { format!("{} unchanged rows", unchanged.len()) };
        s.push_str(&format!("<details><summary>{rows}</summary>\n\n{HEAD}"));
        for r in unchanged {
            s.push_str(&md_row(r));
        }
        s.push_str("\n</details>\n");
    }
    s.push_str(&format!("\n{}\n", thresholds_line(c)));
    s
}
