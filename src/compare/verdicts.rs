//! The verdict row: each sample's whole verdict as evidence, counted (a violation, each
//! failed acquire that took effect, NOT RECOVERED, two holders without fencing, an invalid
//! history, a contradicted expectation), and compared over the repeats with the same rule as
//! the figures: a one-sided Mann-Whitney test in Holm's family, and with too few runs a side
//! a change that is not confirmed. The safety counts (overlaps, lost updates) keep their own
//! rows, which fail on any rise.

use super::rows::{not_confirmed, Acc, Phase, Test};
use super::{Row, MIN_SAMPLES};
use crate::judgement::{Change, CONTRADICTS, FAILED_ACQUIRE, HISTORY_INVALID, NOT_RECOVERED, TWO_HOLDERS_UNFENCED};
use crate::stats::samples::mann_whitney_tails;
use crate::summary::WorkloadSummary;

/// What a sample's verdict failed on, each failure once (a failed acquire that took effect
/// once per finding), and their names.
pub(super) fn failed_axes(w: &WorkloadSummary) -> Vec<&'static str> {
    let Some(v) = &w.verdict else { return Vec::new() };
    let mut out = Vec::new();
    if v.safety.violation_rank() >= 3 {
        out.push(v.safety.as_str());
    }
    for part in v.headline.split("; ") {
        match part {
            p if p == NOT_RECOVERED || p == HISTORY_INVALID || p == TWO_HOLDERS_UNFENCED => out.push(match p {
                p if p == NOT_RECOVERED => NOT_RECOVERED,
                p if p == HISTORY_INVALID => HISTORY_INVALID,
                _ => TWO_HOLDERS_UNFENCED,
            }),
            p if p == FAILED_ACQUIRE => out.extend(std::iter::repeat_n(FAILED_ACQUIRE, v.findings.len().max(1))),
            p if p.starts_with(CONTRADICTS) => out.push(CONTRADICTS),
            _ => {}
        }
    }
    out
}

/// "0, 1, 1 (NOT RECOVERED x2)": each sample's count, then what was counted.
fn described(samples: &[Vec<&'static str>]) -> String {
    let counts: Vec<String> = samples.iter().map(|s| s.len().to_string()).collect();
    let mut names: Vec<(&str, usize)> = Vec::new();
    for n in samples.iter().flatten() {
        match names.iter_mut().find(|(x, _)| x == n) {
            Some((_, c)) => *c += 1,
            None => names.push((n, 1)),
        }
    }
    let what = names.iter().map(|(n, c)| if *c == 1 { n.to_string() } else { format!("{n} x{c}") }).collect::<Vec<_>>().join(", ");
    if what.is_empty() { counts.join(", ") } else { format!("{} ({what})", counts.join(", ")) }
}

impl Phase<'_> {
    /// The verdict row, when some sample on either side failed an axis: the mean count of
    /// failed axes a run on each side, tested as a figure where lower is better.
    pub(super) fn verdict_row(&self, acc: &mut Acc) {
        let bs: Vec<Vec<&'static str>> = self.base.iter().map(|w| failed_axes(w)).collect();
        let ns: Vec<Vec<&'static str>> = self.new.iter().map(|w| failed_axes(w)).collect();
        if bs.iter().chain(&ns).all(|s| s.is_empty()) {
            return;
        }
        let xs: Vec<f64> = bs.iter().map(|s| s.len() as f64).collect();
        let ys: Vec<f64> = ns.iter().map(|s| s.len() as f64).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (b, n) = (mean(&xs), mean(&ys));
        let verdict = if n > b { Change::Regressed } else if n < b { Change::Improved } else { Change::Unchanged };
        let note = format!("failed axes per run: base {}; new {}", described(&bs), described(&ns));
        let row = Row { verdict, note, ..self.row("verdict", Some(b), Some(n), (xs.len(), ys.len())) };
        acc.testable += 1;
        if xs.len() < MIN_SAMPLES || ys.len() < MIN_SAMPLES {
            let unconfirmed = verdict != Change::Unchanged;
            let note = if unconfirmed { format!("{}; {}", not_confirmed(xs.len().min(ys.len())), row.note) } else { row.note.clone() };
            acc.rows.push(Row { unconfirmed, note, ..row });
            return;
        }
        // U counts base values above new ones: a low U means more failures on the new side.
        let (le, ge) = mann_whitney_tails(&xs, &ys);
        acc.tests.push(Test { row: acc.rows.len(), effect: verdict, worse: n > b, p_worse: le, p_better: ge });
        acc.rows.push(row);
    }
}
