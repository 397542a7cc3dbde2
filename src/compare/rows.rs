//! The comparison itself: per phase (backend, workload, clients) and metric, the medians,
//! the effect against its threshold, and the Mann-Whitney test; then Holm's adjustment over
//! every test of the comparison.

use std::collections::BTreeMap;

use super::comparable::{mismatches, notes};
use super::{Better, Comparison, Gate, Row, ALPHA, LATENCY_FLOOR_US, METRICS, MIN_SAMPLES, MIN_TAIL, SAFETY};
use crate::judgement::Change;
use crate::stats::samples::{holm, mann_whitney_tails, median, smallest_p};
use crate::summary::{Summary, WorkloadSummary};

/// A phase's value of a compared metric (or safety count), as `compare` reads it; `None`
/// where the phase did not measure it. `trend` draws the same figures.
pub fn metric(w: &WorkloadSummary, m: &str) -> Option<f64> {
    let a = w.availability.as_ref();
    Some(match m {
        "ops_per_sec" => w.ops_per_sec,
        "acquire_p50_us" => w.acquire_latency_us.p50 as f64,
        "acquire_p99_us" => w.acquire_latency_us.p99 as f64,
        "acquire_p999_us" => w.acquire_latency_us.p999 as f64,
        "release_p99_us" => w.release_latency_us.p99 as f64,
        "handoff_p50_us" if w.handoff_latency_us.count > 0 => w.handoff_latency_us.p50 as f64,
        "errors" => w.errors as f64,
        // The figure the verdicts' availability word is made of: the grant rate during the
        // fault windows that count, as a share of the no-fault rate (not the share of fault
        // seconds with a grant, which long holds keep low on a healthy lock).
        "availability_pct" => w.verdict.as_ref()?.grant_ratio? * 100.0,
        "longest_gap_ms" => a?.longest_gap_ms as f64,
        "recovery_ms" => a?.recovery_ms as f64,
        "overlaps" => w.counts.overlaps as f64,
        "lost_updates" => w.counts.lost_updates as f64,
        "lost_updates_fenced" => w.counts.lost_updates_fenced as f64,
        _ => return None,
    })
}

/// A phase's identity in a comparison: backend, workload, clients.
type Key = (String, String, usize);

/// The phases of a run by key, in run order; every repeat of a phase under its key.
fn phases(s: &Summary) -> Vec<(Key, Vec<&WorkloadSummary>)> {
    let mut out: Vec<(Key, Vec<&WorkloadSummary>)> = Vec::new();
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        for w in &b.workloads {
            let k = (b.name.clone(), w.name.clone(), w.clients);
            match out.iter_mut().find(|(x, _)| *x == k) {
                Some((_, v)) => v.push(w),
                None => out.push((k, vec![w])),
            }
        }
    }
    out
}


/// One metric's test, decided once the whole comparison's family is known.
pub(super) struct Test {
    pub(super) row: usize,
    /// The verdict from the effect size alone (thresholds and floors).
    pub(super) effect: Change,
    /// The medians moved the worse way.
    pub(super) worse: bool,
    pub(super) p_worse: f64,
    pub(super) p_better: f64,
}

/// For a percentile metric: how many acquisitions lay beyond it in this sample, and the count.
fn tail_count(w: &WorkloadSummary, m: &str) -> Option<(u64, u64)> {
    let (p, q) = match m {
        "acquire_p99_us" => (&w.acquire_latency_us, 0.99),
        "acquire_p999_us" => (&w.acquire_latency_us, 0.999),
        "release_p99_us" => (&w.release_latency_us, 0.99),
        _ => return None,
    };
    Some((((p.count as f64) * (1.0 - q)).floor() as u64, p.count))
}

/// Compare the runs; refuses (an error naming what differs) when they cannot be compared,
/// unless `allow_mismatch`.
pub fn compare_checked(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>, allow_mismatch: bool) -> anyhow::Result<Comparison> {
    compare_gated(base, new, t, &Gate::All, allow_mismatch)
}

/// [`compare_checked`], gating on the metrics `gate` names only: the others are reported,
/// tested for information, and never fail the comparison nor join Holm's family.
pub fn compare_gated(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>, gate: &Gate, allow_mismatch: bool) -> anyhow::Result<Comparison> {
    let m = mismatches(base, new);
    if !m.is_empty() && !allow_mismatch {
        // The default plan's fault round on one side only (a speed baseline against a plain
        // `dlbench run`): say which runs would compare.
        let preset = m.iter().any(|x| x.starts_with("fault schedule (none vs") || (x.starts_with("fault schedule (") && x.ends_with(" vs none)")));
        let hint = if preset { "; runs of one --preset compare (the baselines are --preset speed)" } else { "" };
        anyhow::bail!("the runs cannot be compared, they differ in {}{hint}; pass --allow-mismatch to compare anyway", m.join(", "));
    }
    let mut c = compare_with(base, new, t, gate);
    c.mismatches = m;
    c.notes = notes(base, new);
    c.target_costs = super::layer::notes(base, new);
    Ok(c)
}


/// What the comparison gathers phase by phase: its rows, the tests to decide once the whole
/// family is known, and what only one side measured.
#[derive(Default)]
pub(super) struct Acc {
    pub(super) rows: Vec<Row>,
    pub(super) tests: Vec<Test>,
    pub(super) left_out: Vec<String>,
    /// The rows the rule tests, or would test with enough runs a side.
    pub(super) testable: usize,
}

/// One phase measured on both sides: its key and each side's samples (one per repeat).
pub(super) struct Phase<'a> {
    pub(super) backend: &'a str,
    pub(super) workload: &'a str,
    pub(super) clients: usize,
    pub(super) base: &'a [&'a WorkloadSummary],
    pub(super) new: &'a [&'a WorkloadSummary],
    pub(super) gate: &'a Gate,
}

/// Every metric gated (the library's default; the command line gates on [`super::DEFAULT_GATE`]).
pub fn compare(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>) -> Comparison {
    compare_with(base, new, t, &Gate::All)
}

pub fn compare_with(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>, gate: &Gate) -> Comparison {
    let mut acc = Acc::default();
    let measured = |name: &str| new.backends.iter().any(|b| b.name == name && b.failure.is_none());
    for bb in base.backends.iter().filter(|b| b.failure.is_none()) {
        if !measured(&bb.name) {
            acc.rows.push(unmeasured(&bb.name, "", 0, 1, "not measured in the new run"));
        }
    }
    let new_phases = phases(new);
    let mut min_samples = usize::MAX;
    for (key, bw) in phases(base) {
        let (backend, workload, clients) = key.clone();
        let Some((_, nw)) = new_phases.iter().find(|(k, _)| *k == key) else {
            if measured(&backend) {
                acc.rows.push(unmeasured(&backend, &workload, clients, bw.len(), "this phase was not measured in the new run"));
            }
            continue;
        };
        min_samples = min_samples.min(bw.len()).min(nw.len());
        let phase = Phase { backend: &backend, workload: &workload, clients, base: &bw, new: nw, gate };
        for (m, better, _) in METRICS {
            phase.metric_row(m, *better, t, &mut acc);
        }
        acc.rows.extend(SAFETY.iter().map(|m| phase.safety_row(m)));
        phase.verdict_row(&mut acc);
    }
    let family = adjust(&mut acc.rows, &acc.tests);
    // One rule for every sample count: a comparison says "no regression" only when it could
    // have seen one. Fewer than MIN_SAMPLES runs per side give no spread to tell a change
    // from noise at all.
    let reachable = (min_samples != usize::MAX).then(|| if min_samples >= MIN_SAMPLES { smallest_p(min_samples, min_samples) } else { 1.0 });
    let rows = acc.rows;
    let regressions = rows.iter().filter(|r| r.verdict == Change::Regressed && r.gated && !r.unconfirmed).count();
    let unconfirmed = rows.iter().filter(|r| r.verdict == Change::Regressed && r.gated && r.unconfirmed).count();
    let safety_regressions = rows.iter().filter(|r| r.safety).count();
    let label = |s: &Summary| format!("{}{}", s.run_id, s.dlbench_commit.as_ref().map(|c| format!(" ({})", &c[..c.len().min(12)])).unwrap_or_default());
    Comparison {
        base: label(base),
        new: label(new),
        thresholds_pct: t.clone(),
        mismatches: Vec::new(),
        notes: Vec::new(),
        target_costs: Vec::new(),
        left_out: acc.left_out,
        min_samples: if min_samples == usize::MAX { 0 } else { min_samples },
        tests: family,
        detectable: reachable.is_none_or(|p| p * (family.max(1) as f64) < ALPHA),
        gate: gate.to_string(),
        family: acc.testable.max(family),
        runs_needed: super::runs_needed(acc.testable.max(family)),
        rows,
        regressions,
        safety_regressions,
        unconfirmed,
    }
}

/// A backend or phase of the base that the new run did not measure: a regression.
fn unmeasured(backend: &str, workload: &str, clients: usize, samples: usize, note: &str) -> Row {
    Row {
        backend: backend.to_string(),
        workload: workload.to_string(),
        clients,
        metric: "measured".into(),
        base: Some(1.0),
        new: Some(0.0),
        samples: (samples, 0),
        change_pct: None,
        p_value: None,
        p_adjusted: None,
        verdict: Change::Regressed,
        safety: false,
        unconfirmed: false,
        gated: true,
        note: note.into(),
    }
}

impl Phase<'_> {
    /// A row of this phase, unchanged and without a note until the caller says otherwise.
    pub(super) fn row(&self, metric: &str, base: Option<f64>, new: Option<f64>, samples: (usize, usize)) -> Row {
        Row {
            backend: self.backend.to_string(),
            workload: self.workload.to_string(),
            clients: self.clients,
            metric: metric.to_string(),
            base,
            new,
            samples,
            change_pct: None,
            p_value: None,
            p_adjusted: None,
            verdict: Change::Unchanged,
            safety: false,
            unconfirmed: false,
            gated: true,
            note: String::new(),
        }
    }

    /// A metric's row from the medians, and its test when both sides have a spread.
    fn metric_row(&self, m: &str, better: Better, t: &BTreeMap<String, f64>, acc: &mut Acc) {
        let xs: Vec<f64> = self.base.iter().filter_map(|w| metric(w, m)).collect();
        let ys: Vec<f64> = self.new.iter().filter_map(|w| metric(w, m)).collect();
        if xs.is_empty() || ys.is_empty() {
            // Measured on one side only (availability with faults on one side): said, not
            // dropped without a word.
            if xs.is_empty() != ys.is_empty() {
                let side = if xs.is_empty() { "new" } else { "base" };
                acc.left_out.push(format!("{} · {} {m} (only the {side} side measured it)", self.backend, self.workload));
            }
            return;
        }
        let (b, n) = (median(&xs), median(&ys));
        let pct = if b != 0.0 { Some((n - b) / b.abs() * 100.0) } else { None };
        let row = Row { change_pct: pct, ..self.row(m, Some(b), Some(n), (xs.len(), ys.len())) };
        // A percentile judged from fewer than MIN_TAIL observations beyond it is the
        // largest few values of a short phase: noise, whatever the test says.
        if let Some(short) = self.base.iter().chain(self.new.iter()).filter_map(|w| tail_count(w, m)).find(|&(beyond, _)| beyond < MIN_TAIL) {
            let note = format!("not judged: {} acquisitions leave {} beyond this percentile, fewer than {MIN_TAIL}; run longer phases", short.1, short.0);
            acc.rows.push(Row { note, ..row });
            return;
        }
        let limit = t.get(m).copied().unwrap_or(50.0);
        let (verdict, note) = effect(m, better, (b, n), pct, limit);
        if !self.gate.gates(m) {
            // Reported, never decided: past its threshold it says so, with the test's p
            // (unadjusted, for information) when both sides have a spread.
            let p = (xs.len() >= MIN_SAMPLES && ys.len() >= MIN_SAMPLES).then(|| {
                let (le, ge) = mann_whitney_tails(&xs, &ys);
                if (better == Better::Higher) == (n < b) { ge } else { le }
            });
            let note = match (verdict, p) {
                (Change::Unchanged, _) => note,
                (_, Some(p)) => format!("not gated (--gate): past its threshold, p = {p:.3} unadjusted"),
                (_, None) => "not gated (--gate): past its threshold".into(),
            };
            acc.rows.push(Row { verdict, note, gated: false, p_value: p, ..row });
            return;
        }
        acc.testable += 1;
        if xs.len() < MIN_SAMPLES || ys.len() < MIN_SAMPLES {
            // One rule whatever the load: with no spread a side, a change past its threshold
            // is not confirmed (exit 3), never a regression (exit 1).
            let unconfirmed = verdict != Change::Unchanged;
            let note = if unconfirmed { not_confirmed(xs.len().min(ys.len())) } else { note };
            acc.rows.push(Row { verdict, note, unconfirmed, ..row });
            return;
        }
        {
            // U counts base values above new ones: a high U means the new values are
            // lower. Each direction is its own one-sided test, decided after the loop.
            let (le, ge) = mann_whitney_tails(&xs, &ys);
            let (p_worse, p_better) = match better {
                Better::Higher => (ge, le),
                Better::Lower => (le, ge),
            };
            let worse = match better {
                Better::Higher => n < b,
                Better::Lower => n > b,
            };
            acc.tests.push(Test { row: acc.rows.len(), effect: verdict, worse, p_worse, p_better });
        }
        acc.rows.push(Row { verdict, note, ..row });
    }

    /// Safety as a rate per run, with its spread: one run with one overlap is no better
    /// than five runs with one each.
    fn safety_row(&self, m: &str) -> Row {
        let xs: Vec<f64> = self.base.iter().filter_map(|w| metric(w, m)).collect();
        let ys: Vec<f64> = self.new.iter().filter_map(|w| metric(w, m)).collect();
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        let (b, n) = (mean(&xs), mean(&ys));
        let verdict = if n > b { Change::Regressed } else if n < b { Change::Improved } else { Change::Unchanged };
        let spread = |v: &[f64]| {
            let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            if v.len() > 1 { format!("{lo}-{hi}") } else { format!("{}", v.first().copied().unwrap_or(0.0)) }
        };
        let note = format!(
            "per run: base {} over {} run{}, new {} over {}{}",
            spread(&xs),
            xs.len(),
            if xs.len() == 1 { "" } else { "s" },
            spread(&ys),
            ys.len(),
            if verdict == Change::Regressed { "; more violations per run" } else { "" }
        );
        let samples = (self.base.len(), self.new.len());
        Row { verdict, safety: verdict == Change::Regressed, note, ..self.row(m, Some(b), Some(n), samples) }
    }
}

/// The note of a row past its threshold with too few runs a side to test it.
pub(super) fn not_confirmed(runs: usize) -> String {
    format!("{}: {runs} run{} a side, fewer than the {MIN_SAMPLES} a test needs", crate::judgement::NOT_CONFIRMED, if runs == 1 { "" } else { "s" })
}

/// The verdict from the effect size alone, with the note an unchanged row keeps: the medians
/// `(base, new)` against the metric's threshold (percentage points for availability), after
/// the minimum absolute effects.
fn effect(m: &str, better: Better, (b, n): (f64, f64), pct: Option<f64>, limit: f64) -> (Change, String) {
    // Minimum absolute effects: 10 errors; 50 µs of latency (below it a relative
    // change is the histogram's microsecond resolution, e.g. 1 µs -> 2 µs is +100%).
    let abs_ok = match m {
        "errors" => (n - b).abs() >= 10.0,
        m if m.ends_with("_us") => (n - b).abs() >= LATENCY_FLOOR_US,
        _ => true,
    };
    let beyond = match (pct, better) {
        _ if !abs_ok => Change::Unchanged,
        // For availability the threshold is in percentage points.
        _ if m == "availability_pct" => {
            if n < b - limit {
                Change::Regressed
            } else if n > b + limit {
                Change::Improved
            } else {
                Change::Unchanged
            }
        }
        (None, _) if n == b => Change::Unchanged,
        (None, Better::Lower) => Change::Regressed,
        (None, Better::Higher) => Change::Improved,
        (Some(p), Better::Higher) if p < -limit => Change::Regressed,
        (Some(p), Better::Higher) if p > limit => Change::Improved,
        (Some(p), Better::Lower) if p > limit => Change::Regressed,
        (Some(p), Better::Lower) if p < -limit => Change::Improved,
        _ => Change::Unchanged,
    };
    let unit = if m == "availability_pct" { " points" } else { "%" };
    match () {
        _ if !abs_ok && m.ends_with("_us") => (Change::Unchanged, format!("within threshold (under {LATENCY_FLOOR_US} µs)")),
        _ if beyond == Change::Unchanged => (Change::Unchanged, format!("within threshold ({limit}{unit})")),
        _ => (beyond, String::new()),
    }
}

/// Every metric compared with a spread is a test, and a comparison makes many (ten metrics
/// per phase): at p < ALPHA each, a same-build comparison would flag something in most
/// runs. Holm's adjustment over all of them keeps the chance of any false regression in the
/// whole comparison under ALPHA; regressions and improvements are two one-sided families.
/// Decides the tested rows; returns the family's size.
fn adjust(rows: &mut [Row], tests: &[Test]) -> usize {
    let adj_worse = holm(&tests.iter().map(|t| t.p_worse).collect::<Vec<_>>());
    let adj_better = holm(&tests.iter().map(|t| t.p_better).collect::<Vec<_>>());
    let family = tests.len();
    for (i, t) in tests.iter().enumerate() {
        let r = &mut rows[t.row];
        let (p, adj) = if t.worse { (t.p_worse, adj_worse[i]) } else { (t.p_better, adj_better[i]) };
        r.p_value = Some(p);
        r.p_adjusted = Some(adj);
        if t.effect != Change::Unchanged && adj >= ALPHA {
            r.verdict = Change::Unchanged;
            r.note = format!("within noise (p = {p:.3}, {adj:.2} adjusted over {family} tests)");
        } else if t.effect == Change::Unchanged && p < ALPHA {
            // Unchanged with a spread is always within threshold (see `effect`): the test
            // found a shift too small to count; say how sure it was.
            r.note = format!("{}; p = {p:.3}", r.note);
        }
    }
    family
}
