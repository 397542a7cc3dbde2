//! The comparison as Markdown, fit for a pull-request comment.

use super::{Comparison, Row, ALPHA, MIN_SAMPLES, SAFETY};
use crate::judgement::Change;
use crate::stats::samples::smallest_p;

/// A metric's value in human units: ms or µs for latencies, k/s for rates.
fn human(metric: &str, v: Option<f64>) -> String {
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

fn md_row(r: &Row) -> String {
    let change = r.change_pct.map(|p| format!("{p:+.1}%")).unwrap_or_default();
    let verdict = match r.verdict {
        Change::Regressed => format!("**{}**", r.verdict.word(r.safety)),
        _ => r.verdict.word(r.safety).to_string(),
    };
    let note = if r.note.is_empty() { String::new() } else { format!(" ({})", r.note) };
    let phase = if r.workload.is_empty() { r.backend.clone() } else { format!("{} · {}", r.backend, r.workload) };
    let clients = if r.clients > 0 { r.clients.to_string() } else { String::new() };
    format!(
        "| {phase} | {clients} | {} | {} | {} | {change} | {verdict}{note} |\n",
        r.metric,
        human(&r.metric, r.base),
        human(&r.metric, r.new)
    )
}

/// Runs per side (equal sides) for completely separated samples to pass Holm's first step
/// over `tests` tests.
pub fn runs_needed(tests: usize) -> usize {
    (MIN_SAMPLES..100).find(|&n| smallest_p(n, n) * (tests.max(1) as f64) < ALPHA).unwrap_or(100)
}

/// Markdown fit for a pull-request comment: the changes first, the unchanged rows folded.
pub fn markdown(c: &Comparison) -> String {
    let mut s = format!("## dlbench compare\n\nbase `{}` → new `{}`\n\n", c.base, c.new);
    if !c.mismatches.is_empty() {
        s.push_str(&format!("**Compared despite mismatches (--allow-mismatch)**: the runs differ in {}.\n\n", c.mismatches.join(", ")));
    }
    for n in &c.notes {
        s.push_str(&format!("Note: {n}.\n\n"));
    }
    if !c.left_out.is_empty() {
        s.push_str(&format!("**Left out** (measured on one side only): {}.\n\n", c.left_out.join("; ")));
    }
    if c.regressions == 0 && !c.detectable && c.min_samples < MIN_SAMPLES {
        s.push_str(&format!(
            "**{none}**: {n} run(s) per side give no spread to tell a change from noise; use at least {k} runs per side (`run --repeat {k}`, or more runs in each side's directory).\n\n",
            none = crate::judgement::NOTHING_DETECTABLE,
            n = c.min_samples,
            k = runs_needed(c.tests),
        ));
    } else if c.regressions == 0 && !c.detectable {
        let p = smallest_p(c.min_samples, c.min_samples);
        s.push_str(&format!(
            "**{none}**: with {n} runs per side the smallest p-value a test can reach is {p:.4}, and {t} tests need one under {lvl:.4} (Holm); use at least {k} runs per side (`run --repeat`, or more runs in each side's directory).\n\n",
            none = crate::judgement::NOTHING_DETECTABLE,
            n = c.min_samples,
            t = c.tests,
            lvl = ALPHA / c.tests as f64,
            k = runs_needed(c.tests),
        ));
    } else if c.regressions == 0 {
        s.push_str(&format!("**{}.**\n\n", crate::judgement::NO_REGRESSION));
    } else {
        let names: Vec<String> = c
            .rows
            .iter()
            .filter(|r| r.verdict == Change::Regressed)
            .map(|r| if r.workload.is_empty() { format!("{} {}", r.backend, r.metric) } else { format!("{} · {} {}", r.backend, r.workload, r.metric) })
            .collect();
        s.push_str(&format!(
            "**{} {}{}**: {}\n\n",
            c.regressions,
            crate::judgement::REGRESSIONS,
            if c.safety_regressions > 0 { format!(", {} of safety", c.safety_regressions) } else { String::new() },
            names.join(", ")
        ));
    }
    if c.min_samples >= MIN_SAMPLES {
        s.push_str(&format!(
            "{} or more runs per side: a change counts when the medians differ by more than its threshold and a one-sided Mann-Whitney U test tells the sides apart at p < {ALPHA} after Holm's adjustment over the comparison's {} tests.\n\n",
            c.min_samples, c.tests
        ));
    } else {
        s.push_str(&format!("{} run(s) per side: no spread to judge noise by, so only the thresholds could flag a change here, and none can be ruled out (use `run --repeat {}` on both sides).\n\n", c.min_samples, runs_needed(c.tests)));
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
        s.push_str(&format!("<details><summary>{} unchanged row(s)</summary>\n\n{HEAD}", unchanged.len()));
        for r in unchanged {
            s.push_str(&md_row(r));
        }
        s.push_str("\n</details>\n");
    }
    s.push_str(&format!(
        "\nThresholds (minimum relative change that counts, %): {}; availability in percentage points; any increase in {} fails.\n",
        c.thresholds_pct.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        SAFETY.join(", ")
    ));
    s
}
