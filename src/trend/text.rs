//! The trend on a terminal: the points, then one line per step with what `compare` flagged.

use std::fmt::Write as _;

use super::{Flag, Step, Trend};
use crate::judgement::{regressions, Change, NOTHING_DETECTABLE, NO_REGRESSION};

/// A flag as one phrase: "memory · hot-key ops_per_sec regressed (-50.0%)".
pub fn flag_phrase(f: &Flag) -> String {
    let pct = f.change_pct.map(|p| format!(" ({p:+.1}%)")).unwrap_or_default();
    let phase = if f.workload.is_empty() { f.backend.clone() } else { format!("{} · {}", f.backend, f.workload) };
    format!("{phase} {} {}{pct}", f.metric, f.verdict.word(f.safety))
}

/// What `compare` concluded for a step, in its own words.
pub fn conclusion(s: &Step) -> String {
    if let Some(why) = &s.refused {
        return format!("not compared: {why}");
    }
    let improved = s.flags.iter().filter(|f| f.verdict == Change::Improved).count();
    let better = if improved > 0 { format!(", {improved} improved") } else { String::new() };
    if s.regressions > 0 {
        format!("{}{better}", regressions(s.regressions))
    } else if !s.detectable {
        format!("{NOTHING_DETECTABLE} ({} sample{} a side){better}", s.min_samples, if s.min_samples == 1 { "" } else { "s" })
    } else {
        format!("{NO_REGRESSION}{better}")
    }
}

/// The terminal summary: one line per point, then per step its conclusion and each flag.
pub fn summary(t: &Trend) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "trend over {} result sets ({} steps, each as `dlbench compare` judges it):", t.points.len(), t.steps.len());
    for (i, p) in t.points.iter().enumerate() {
        let partial = if p.complete { "" } else { " (incomplete)" };
        let _ = writeln!(out, "  {:<18} {}{partial}  {}", p.label(i), p.run_id, p.dir);
    }
    for s in &t.steps {
        let _ = writeln!(out, "#{} -> #{}: {} (compare exit {})", s.from + 1, s.to + 1, conclusion(s), s.compare_exit());
        for f in &s.flags {
            let _ = writeln!(out, "    {}", flag_phrase(f));
        }
    }
    out
}
