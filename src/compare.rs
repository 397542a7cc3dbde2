//! `dlbench compare BASE NEW`: per backend, workload and client count (never pooled over
//! workloads), per metric, how much changed and whether that is an improvement, noise, or a
//! regression; any new safety violation is always a regression.
//!
//! Two runs are compared only when they can be: the same plans (workload, clients, keys,
//! hold, duration), backends, target, completeness and machine (cores, hostname, kernel);
//! otherwise `compare` refuses with one line naming what differs (`--allow-mismatch`
//! compares anyway and says so).
//!
//! **The samples.** Each side is one result set or a directory of them (an `--out` root):
//! every phase repeat (`run --repeat N`) of every run on a side is one sample. Runs of the
//! two builds taken in turn (A B A B ...) see the same drift of a shared machine; runs of one
//! build taken in a block and then the other's do not, and no test can tell the drift from
//! the build.
//!
//! **The decision.** When both sides have at least [`MIN_SAMPLES`] samples, a metric changed
//! only if the medians differ by more than the metric's threshold (a minimum effect size)
//! *and* a one-sided Mann-Whitney U test (exact, ties counted half) in that direction stays
//! under [`ALPHA`] after Holm's adjustment over every test of the comparison. Ten metrics
//! per phase tested at 0.05 each would flag a false regression in a large share of
//! same-build comparisons; Holm keeps the chance of any false one in the whole comparison
//! under 0.05. The cost is repeats: with n runs per side the smallest p a test can reach is
//! 1 / C(2n, n), so a comparison that cannot reach the adjusted level says so (and exits 3)
//! instead of printing "no regression". A percentile is judged only when each sample had at
//! least [`MIN_TAIL`] acquisitions beyond it. With fewer samples (one run per side) only the
//! thresholds decide, and the output says there was no spread to judge by.
//!
//! Thresholds are relative changes, set per metric; the defaults are wide because a shared
//! 2-core machine moves throughput by 10-20% from one run to the next. Count metrics
//! (errors) also need an absolute change of 10 before they count.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::summary::{Summary, WorkloadSummary};

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// A compared metric: name, direction, default threshold (percent).
pub const METRICS: &[(&str, Better, f64)] = &[
    ("ops_per_sec", Better::Higher, 25.0),
    ("acquire_p50_us", Better::Lower, 30.0),
    ("acquire_p99_us", Better::Lower, 50.0),
    ("acquire_p999_us", Better::Lower, 100.0),
    ("release_p99_us", Better::Lower, 50.0),
    ("handoff_p50_us", Better::Lower, 50.0),
    ("errors", Better::Lower, 100.0),
    ("availability_pct", Better::Higher, 5.0),
    ("longest_gap_ms", Better::Lower, 50.0),
    ("recovery_ms", Better::Lower, 50.0),
];

/// Safety counts: any increase is a regression, whatever the threshold.
pub const SAFETY: &[&str] = &["overlaps", "lost_updates", "lost_updates_fenced"];

pub use crate::judgement::Change;

/// A percentile is judged only when every sample saw at least this many acquisitions beyond it.
pub const MIN_TAIL: u64 = 10;

fn yes() -> bool {
    true
}

/// One metric's test, decided once the whole comparison's family is known.
struct Test {
    row: usize,
    /// The verdict from the effect size alone (thresholds and floors).
    effect: Change,
    /// The medians moved the worse way.
    worse: bool,
    p_worse: f64,
    p_better: f64,
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

/// Samples per side below which the thresholds alone decide.
pub const MIN_SAMPLES: usize = 3;
/// A latency change smaller than this (µs) never counts, whatever its relative size.
pub const LATENCY_FLOOR_US: f64 = 50.0;
/// The test's significance level (two-sided).
pub const ALPHA: f64 = 0.05;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub backend: String,
    #[serde(default)]
    pub workload: String,
    #[serde(default)]
    pub clients: usize,
    pub metric: String,
    /// The medians over the repeats (the value, with one run per side).
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// Samples on each side.
    #[serde(default)]
    pub samples: (usize, usize),
    /// Relative change of the medians in percent, when both exist and the base is not zero.
    pub change_pct: Option<f64>,
    /// The one-sided Mann-Whitney U p-value in the direction the medians moved (worse or
    /// better), when both sides had enough samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// That p-value after Holm's adjustment over every test of the comparison: a change
    /// counts only when this is under [`ALPHA`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_adjusted: Option<f64>,
    pub verdict: Change,
    /// A safety regression fails the comparison whatever the thresholds.
    pub safety: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub thresholds_pct: BTreeMap<String, f64>,
    /// What differs between the runs; non-empty only with `--allow-mismatch`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
    /// What differs without making the runs incomparable (kernel build, host, fields one
    /// side did not record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What only one side measured, left out of the comparison (with `--allow-mismatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The fewest samples any compared phase had on either side.
    #[serde(default)]
    pub min_samples: usize,
    /// How many metric tests the comparison made (the size of Holm's family).
    #[serde(default)]
    pub tests: usize,
    /// Whether a change could have been detected at all: with few repeats and many tests,
    /// even completely separated samples stay above the adjusted level.
    #[serde(default = "yes")]
    pub detectable: bool,
    pub rows: Vec<Row>,
    pub regressions: usize,
    pub safety_regressions: usize,
}

/// `metric=PCT` overrides of the default thresholds.
pub fn thresholds(overrides: &[String]) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut t: BTreeMap<String, f64> = METRICS.iter().map(|(m, _, p)| (m.to_string(), *p)).collect();
    for o in overrides {
        let (m, v) = o.split_once('=').ok_or_else(|| anyhow::anyhow!("--threshold {o:?}: write METRIC=PERCENT, e.g. ops_per_sec=10"))?;
        if !t.contains_key(m) {
            anyhow::bail!("--threshold {o:?}: unknown metric; metrics: {}", METRICS.iter().map(|m| m.0).collect::<Vec<_>>().join(", "));
        }
        let v: f64 = v.trim_end_matches('%').parse().map_err(|_| anyhow::anyhow!("--threshold {o:?}: {v:?} is not a number"))?;
        t.insert(m.to_string(), v);
    }
    Ok(t)
}

/// One side of a comparison: a result set (a run directory or its summary.json), or a
/// directory of result sets (an `--out` root; `latest` is not counted twice), whose runs
/// are pooled as repeats. The runs of a side must themselves be comparable.
pub fn load_side(p: &Path) -> anyhow::Result<Summary> {
    if !p.is_dir() || p.join("summary.json").exists() {
        return load(p);
    }
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(p)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != "latest" && e.path().join("summary.json").is_file())
        .map(|e| e.path())
        .collect();
    dirs.sort();
    anyhow::ensure!(!dirs.is_empty(), "{} holds no result set (no summary.json in it or in its subdirectories)", p.display());
    let mut runs = dirs.iter().map(|d| load(d)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut pooled = runs.remove(0);
    let n = runs.len() + 1;
    for r in runs {
        let mut m = mismatches(&pooled, &r);
        if let (Some(a), Some(b)) = (&pooled.dlbench_commit, &r.dlbench_commit) {
            if a != b {
                m.push(format!("build ({} vs {})", &a[..a.len().min(12)], &b[..b.len().min(12)]));
            }
        }
        anyhow::ensure!(m.is_empty(), "the runs in {} cannot be pooled: {} differs from {} in {}", p.display(), r.run_id, pooled.run_id, m.join(", "));
        for b in r.backends {
            match pooled.backends.iter_mut().find(|x| x.name == b.name) {
                Some(x) if x.failure.is_none() && b.failure.is_none() => x.workloads.extend(b.workloads),
                Some(x) => anyhow::bail!("the runs in {} cannot be pooled: {} failed in {}", p.display(), x.name, r.run_id),
                None => pooled.backends.push(b),
            }
        }
    }
    if n > 1 {
        pooled.run_id = format!("{} ({n} runs pooled)", p.display());
    }
    Ok(pooled)
}

/// A run directory or a summary.json.
pub fn load(p: &Path) -> anyhow::Result<Summary> {
    let file = if p.is_dir() { p.join("summary.json") } else { p.to_path_buf() };
    let bytes = std::fs::read(&file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{} is not a dlbench summary: {e}", file.display()))
}

fn metric(w: &WorkloadSummary, m: &str) -> Option<f64> {
    let a = w.availability.as_ref();
    Some(match m {
        "ops_per_sec" => w.ops_per_sec,
        "acquire_p50_us" => w.acquire_latency_us.p50 as f64,
        "acquire_p99_us" => w.acquire_latency_us.p99 as f64,
        "acquire_p999_us" => w.acquire_latency_us.p999 as f64,
        "release_p99_us" => w.release_latency_us.p99 as f64,
        "handoff_p50_us" if w.handoff_latency_us.count > 0 => w.handoff_latency_us.p50 as f64,
        "errors" => w.errors as f64,
        "availability_pct" => a?.success_seconds_pct,
        "longest_gap_ms" => a?.longest_gap_ms as f64,
        "recovery_ms" => a?.recovery_ms as f64,
        "overlaps" => w.counts.overlaps as f64,
        "lost_updates" => w.counts.lost_updates as f64,
        "lost_updates_fenced" => w.counts.lost_updates_fenced as f64,
        _ => return None,
    })
}

/// Worse verdicts rank higher (the judgement's ranking of its own words).
fn safety_rank(w: &WorkloadSummary) -> u8 {
    crate::judgement::violation_rank(w.verdict.as_ref().map(|v| v.safety.as_str()))
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

/// What a plan is, per phase: the fields both sides must agree on. A field one side's
/// summary does not record (written by an older dlbench) is left out on both sides, and the
/// comparison says so.
fn plan_of(s: &Summary, fields: &Fields) -> std::collections::BTreeSet<String> {
    let mut p = std::collections::BTreeSet::new();
    for b in &s.backends {
        for w in &b.workloads {
            let mut x = format!("{} (clients {}, keys {}", w.name, w.clients, w.keys);
            if fields.hold {
                x.push_str(&format!(", hold {}, duration {}s, wait {} ms, warm-up {}s", w.hold, w.duration_s, w.wait_timeout_ms, w.warmup_s));
            }
            if fields.ttl {
                x.push_str(&format!(", ttl {} ms, think {}, keys {}", w.ttl_ms, w.think, w.key_dist));
            }
            if let Some(o) = &w.open_loop {
                x.push_str(&format!(", rate {}/s", o.target_rate));
            }
            x.push(')');
            p.insert(x);
        }
    }
    p
}

/// Which plan fields both sides recorded.
struct Fields {
    hold: bool,
    ttl: bool,
}

fn records_hold(s: &Summary) -> bool {
    s.backends.iter().flat_map(|b| &b.workloads).all(|w| !w.hold.is_empty())
}

fn records_ttl(s: &Summary) -> bool {
    s.backends.iter().flat_map(|b| &b.workloads).all(|w| w.ttl_ms > 0)
}

/// Everything that makes two runs incomparable, each named; empty when they compare. The
/// machine is compared by class (cores, CPU model, memory, OS): a different kernel build or
/// host name is a note ([`notes`]), not a refusal.
pub fn mismatches(base: &Summary, new: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let names = |s: &Summary| {
        let mut v: Vec<String> = s.backends.iter().map(|b| b.name.clone()).collect();
        v.sort();
        v.join(",")
    };
    let mut differ = |what: &str, b: String, n: String| {
        if b != n {
            out.push(format!("{what} ({b} vs {n})"));
        }
    };
    differ("backends", names(base), names(new));
    differ("target", base.target.clone(), new.target.clone());
    // Per-client and shared connections measure different things (N processes against one
    // multiplexed process); summaries written before the mode was recorded have none.
    let conns = |s: &Summary| {
        s.backends.iter().filter_map(|b| Some(format!("{} {}", b.name, b.connections.as_ref()?))).collect::<Vec<_>>().join(", ")
    };
    let (cb, cn) = (conns(base), conns(new));
    if !cb.is_empty() && !cn.is_empty() {
        differ("connections", cb, cn);
    }
    let state = |s: &Summary| if s.complete { "complete" } else { "interrupted" }.to_string();
    differ("completeness", state(base), state(new));
    // The fenced side is what the verdict rows speak for.
    let fencing = |s: &Summary| format!("{:?}", s.fencing).to_lowercase();
    differ("fencing mode", fencing(base), fencing(new));
    let faults = |s: &Summary| if s.nemesis_schedule.is_empty() { "none".to_string() } else { s.nemesis_schedule.join(",") };
    differ("fault schedule", faults(base), faults(new));
    if base.nemesis_interval_s.is_some() && new.nemesis_interval_s.is_some() {
        let i = |s: &Summary| format!("{}s", s.nemesis_interval_s.unwrap_or(0.0));
        differ("fault interval", i(base), i(new));
    }
    let resource = |s: &Summary| s.resource_server.clone().unwrap_or_else(|| "in process".into());
    differ("protected resource", resource(base), resource(new));
    let fields = Fields { hold: records_hold(base) && records_hold(new), ttl: records_ttl(base) && records_ttl(new) };
    let (pb, pn) = (plan_of(base, &fields), plan_of(new, &fields));
    if pb != pn {
        let only = |a: &std::collections::BTreeSet<String>, b: &std::collections::BTreeSet<String>| a.difference(b).cloned().collect::<Vec<_>>().join("; ");
        differ("plan", format!("base has {}", or_none(only(&pb, &pn))), format!("new has {}", or_none(only(&pn, &pb))));
    }
    let (mb, mn) = (&base.machine, &new.machine);
    differ("machine cores", mb.cores.to_string(), mn.cores.to_string());
    differ("machine CPU", mb.cpu_model.clone(), mn.cpu_model.clone());
    // Memory by the GiB: two machines of one kind report a few MB apart.
    let gib = |m: &crate::facts::Machine| format!("{} GiB", (m.memory_mb as f64 / 1024.0).round());
    differ("machine memory", gib(mb), gib(mn));
    differ("machine OS", mb.os.clone(), mn.os.clone());
    out
}

/// What differs between two comparable runs without making them incomparable: the kernel
/// build and the host name of machines of one class, plan fields one side did not record.
pub fn notes(base: &Summary, new: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let (mb, mn) = (&base.machine, &new.machine);
    if mb.kernel != mn.kernel {
        out.push(format!("kernel build {} vs {} (same machine class)", mb.kernel, mn.kernel));
    }
    if mb.hostname != mn.hostname {
        out.push(format!("host {} vs {}", mb.hostname, mn.hostname));
    }
    if !(records_hold(base) && records_hold(new)) {
        out.push("hold, duration, wait and warm-up not compared: one side's summary does not record them".into());
    }
    if !(records_ttl(base) && records_ttl(new)) {
        out.push("TTL, think time and key distribution not compared: one side's summary does not record them".into());
    }
    if base.nemesis_interval_s.is_some() != new.nemesis_interval_s.is_some() && !base.nemesis_schedule.is_empty() {
        out.push("fault interval not compared: one side's summary does not record it".into());
    }
    match (&base.dlbench_commit, &new.dlbench_commit) {
        (Some(b), Some(n)) if b == n => out.push(format!("both sides built from {}", &b[..b.len().min(12)])),
        _ => {}
    }
    out
}

fn or_none(s: String) -> String {
    if s.is_empty() { "nothing else".into() } else { s }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The Mann-Whitney U test of `a` against `b`, where U counts the pairs with the `a` value
/// above the `b` value (ties half): `(P(U <= u), P(U >= u))`, the two one-sided p-values.
/// Exact (the count of orderings by U) up to 400 pairs, the normal approximation beyond.
pub fn mann_whitney_tails(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return (1.0, 1.0);
    }
    let mut u2 = 0u64; // twice U, so ties (half a point) stay integers
    for x in a {
        for y in b {
            u2 += if x > y { 2 } else if x == y { 1 } else { 0 };
        }
    }
    let mn = (m * n) as u64;
    if m * n > 400 {
        let u = u2 as f64 / 2.0;
        let mu = mn as f64 / 2.0;
        let sd = ((m * n * (m + n + 1)) as f64 / 12.0).sqrt();
        // Continuity-corrected: P(U <= u) and P(U >= u).
        let le = phi((u - mu + 0.5) / sd);
        let ge = 1.0 - phi((u - mu - 0.5) / sd);
        return (le.min(1.0), ge.min(1.0));
    }
    // f[i][j][u]: orderings of i a's and j b's with U = u.
    let max = mn as usize;
    let mut f = vec![vec![vec![0f64; max + 1]; n + 1]; m + 1];
    for i in 0..=m {
        for j in 0..=n {
            if i == 0 || j == 0 {
                f[i][j][0] = 1.0;
                continue;
            }
            for u in 0..=(i * j) {
                // The largest value is an a (beating all j b's) or a b.
                let from_a = if u >= j { f[i - 1][j][u - j] } else { 0.0 };
                let from_b = f[i][j - 1][u];
                f[i][j][u] = from_a + from_b;
            }
        }
    }
    let total: f64 = f[m][n].iter().sum();
    let lo = (u2 / 2) as usize; // P(U <= floor(u))
    let hi = u2.div_ceil(2) as usize; // P(U >= ceil(u))
    let p_le: f64 = f[m][n][..=lo].iter().sum::<f64>() / total;
    let p_ge: f64 = f[m][n][hi..].iter().sum::<f64>() / total;
    (p_le.min(1.0), p_ge.min(1.0))
}

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (le, ge) = mann_whitney_tails(a, b);
    (2.0 * le.min(ge)).min(1.0)
}

/// The smallest one-sided p-value an exact Mann-Whitney test can reach with `m` against `n`
/// samples (complete separation): one ordering in C(m + n, m).
pub fn smallest_p(m: usize, n: usize) -> f64 {
    let mut c = 1f64;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    1.0 / c
}

/// Holm's step-down adjustment of `ps` (family-wise error at most the level used on the
/// result): the i-th smallest p is multiplied by (m - i), and the adjusted values are made
/// monotone. Returned in the input's order.
pub fn holm(ps: &[f64]) -> Vec<f64> {
    let m = ps.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let mut out = vec![1.0; m];
    let mut running = 0f64;
    for (rank, &i) in idx.iter().enumerate() {
        running = running.max(((m - rank) as f64 * ps[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26).
fn phi(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * z.abs() / std::f64::consts::SQRT_2);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-(z * z) / 2.0).exp();
    if z >= 0.0 { 0.5 * (1.0 + y) } else { 0.5 * (1.0 - y) }
}

/// Compare the runs; refuses (an error naming what differs) when they cannot be compared,
/// unless `allow_mismatch`.
pub fn compare_checked(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>, allow_mismatch: bool) -> anyhow::Result<Comparison> {
    let m = mismatches(base, new);
    if !m.is_empty() && !allow_mismatch {
        anyhow::bail!("the runs cannot be compared, they differ in {}; pass --allow-mismatch to compare anyway", m.join(", "));
    }
    let mut c = compare(base, new, t);
    c.mismatches = m;
    c.notes = notes(base, new);
    Ok(c)
}

pub fn compare(base: &Summary, new: &Summary, t: &BTreeMap<String, f64>) -> Comparison {
    let mut rows = Vec::new();
    let new_phases = phases(new);
    let mut min_samples = usize::MAX;
    let mut tests: Vec<Test> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    for bb in base.backends.iter().filter(|b| b.failure.is_none()) {
        if !new.backends.iter().any(|b| b.name == bb.name && b.failure.is_none()) {
            rows.push(Row {
                backend: bb.name.clone(),
                workload: String::new(),
                clients: 0,
                metric: "measured".into(),
                base: Some(1.0),
                new: Some(0.0),
                samples: (1, 0),
                change_pct: None,
                p_value: None,
                p_adjusted: None,
                verdict: Change::Regressed,
                safety: false,
                note: "not measured in the new run".into(),
            });
        }
    }
    for (key, bw) in phases(base) {
        let (backend, workload, clients) = key.clone();
        let Some((_, nw)) = new_phases.iter().find(|(k, _)| *k == key) else {
            if new.backends.iter().any(|b| b.name == backend && b.failure.is_none()) {
                rows.push(Row {
                    backend,
                    workload,
                    clients,
                    metric: "measured".into(),
                    base: Some(1.0),
                    new: Some(0.0),
                    samples: (bw.len(), 0),
                    change_pct: None,
                    p_value: None,
                    p_adjusted: None,
                    verdict: Change::Regressed,
                    safety: false,
                    note: "this phase was not measured in the new run".into(),
                });
            }
            continue;
        };
        min_samples = min_samples.min(bw.len()).min(nw.len());
        let row = |metric: &str, b: Option<f64>, n: Option<f64>, samples, change_pct, p_value, verdict, safety, note: String| Row {
            backend: backend.clone(),
            workload: workload.clone(),
            clients,
            metric: metric.to_string(),
            base: b,
            new: n,
            samples,
            change_pct,
            p_value,
            p_adjusted: None,
            verdict,
            safety,
            note,
        };
        for (m, better, _) in METRICS {
            let xs: Vec<f64> = bw.iter().filter_map(|w| metric(w, m)).collect();
            let ys: Vec<f64> = nw.iter().filter_map(|w| metric(w, m)).collect();
            if xs.is_empty() || ys.is_empty() {
                // Measured on one side only (availability with faults on one side): said, not
                // dropped without a word.
                if xs.is_empty() != ys.is_empty() {
                    left_out.push(format!("{backend} · {workload} {m} (only the {} side measured it)", if xs.is_empty() { "new" } else { "base" }));
                }
                continue;
            }
            let (b, n) = (median(&xs), median(&ys));
            let pct = if b != 0.0 { Some((n - b) / b.abs() * 100.0) } else { None };
            let samples = (xs.len(), ys.len());
            // A percentile judged from fewer than MIN_TAIL observations beyond it is the
            // largest few values of a short phase: noise, whatever the test says.
            if let Some(short) = bw.iter().chain(nw.iter()).filter_map(|w| tail_count(w, m)).find(|&(beyond, _)| beyond < MIN_TAIL) {
                let note = format!("not judged: {} acquisitions leave {} beyond this percentile, fewer than {MIN_TAIL}; run longer phases", short.1, short.0);
                rows.push(row(m, Some(b), Some(n), samples, pct, None, Change::Unchanged, false, note));
                continue;
            }
            let limit = t.get(*m).copied().unwrap_or(50.0);
            // Minimum absolute effects: 10 errors; 50 µs of latency (below it a relative
            // change is the histogram's microsecond resolution, e.g. 1 µs -> 2 µs is +100%).
            let abs_ok = match *m {
                "errors" => (n - b).abs() >= 10.0,
                m if m.ends_with("_us") => (n - b).abs() >= LATENCY_FLOOR_US,
                _ => true,
            };
            let beyond = match (pct, better) {
                _ if !abs_ok => Change::Unchanged,
                // For availability the threshold is in percentage points.
                _ if *m == "availability_pct" => {
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
            let unit = if *m == "availability_pct" { " points" } else { "%" };
            let spread = xs.len() >= MIN_SAMPLES && ys.len() >= MIN_SAMPLES;
            let (verdict, note) = match () {
                _ if !abs_ok && m.ends_with("_us") => (Change::Unchanged, format!("within threshold (under {LATENCY_FLOOR_US} µs)")),
                _ if beyond == Change::Unchanged => (Change::Unchanged, format!("within threshold ({limit}{unit})")),
                _ => (beyond, String::new()),
            };
            if spread {
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
                tests.push(Test { row: rows.len(), effect: verdict, worse, p_worse, p_better });
            }
            rows.push(row(m, Some(b), Some(n), samples, pct, None, verdict, false, note));
        }
        // Safety as a rate per run, with its spread: one run with one overlap is no better
        // than five runs with one each.
        for m in SAFETY {
            let xs: Vec<f64> = bw.iter().filter_map(|w| metric(w, m)).collect();
            let ys: Vec<f64> = nw.iter().filter_map(|w| metric(w, m)).collect();
            let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
            let (b, n) = (mean(&xs), mean(&ys));
            let verdict = if n > b { Change::Regressed } else if n < b { Change::Improved } else { Change::Unchanged };
            let spread = |v: &[f64]| {
                let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
                if v.len() > 1 { format!("{lo}-{hi}") } else { format!("{}", v.first().copied().unwrap_or(0.0)) }
            };
            let note = format!(
                "per run: base {} over {} run(s), new {} over {}{}",
                spread(&xs),
                xs.len(),
                spread(&ys),
                ys.len(),
                if verdict == Change::Regressed { "; more violations per run" } else { "" }
            );
            rows.push(row(m, Some(b), Some(n), (bw.len(), nw.len()), None, None, verdict, verdict == Change::Regressed, note));
        }
        let wb = bw.iter().copied().max_by_key(|w| safety_rank(w)).expect("a phase has a sample");
        let wn = nw.iter().copied().max_by_key(|w| safety_rank(w)).expect("a phase has a sample");
        let (rb, rn) = (safety_rank(wb), safety_rank(wn));
        if rn != rb || rn > 0 {
            let v = |w: &WorkloadSummary| w.verdict.as_ref().map(|v| v.safety.clone()).unwrap_or_else(|| crate::judgement::NO_VERDICT.into());
            let verdict = if rn > rb { Change::Regressed } else if rn < rb { Change::Improved } else { Change::Unchanged };
            rows.push(row("verdict", Some(rb as f64), Some(rn as f64), (bw.len(), nw.len()), None, None, verdict, rn > rb, format!("{} -> {}", v(wb), v(wn))));
        }
    }
    // Every metric compared with a spread is a test, and a comparison makes many (ten
    // metrics per phase): at p < ALPHA each, a same-build comparison would flag something
    // in most runs. Holm's adjustment over all of them keeps the chance of any false
    // regression in the whole comparison under ALPHA; regressions and improvements are two
    // one-sided families.
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
            // Unchanged with a spread is always within threshold (see `verdict` above): the
            // test found a shift too small to count; say how sure it was.
            r.note = format!("{}; p = {p:.3}", r.note);
        }
    }
    // One rule for every sample count: a comparison says "no regression" only when it could
    // have seen one. Fewer than MIN_SAMPLES runs per side give no spread to tell a change
    // from noise at all.
    let reachable = (min_samples != usize::MAX).then(|| if min_samples >= MIN_SAMPLES { smallest_p(min_samples, min_samples) } else { 1.0 });
    let regressions = rows.iter().filter(|r| r.verdict == Change::Regressed).count();
    let safety_regressions = rows.iter().filter(|r| r.safety).count();
    let label = |s: &Summary| format!("{}{}", s.run_id, s.dlbench_commit.as_ref().map(|c| format!(" ({})", &c[..c.len().min(12)])).unwrap_or_default());
    Comparison {
        base: label(base),
        new: label(new),
        thresholds_pct: t.clone(),
        mismatches: Vec::new(),
        notes: Vec::new(),
        left_out,
        min_samples: if min_samples == usize::MAX { 0 } else { min_samples },
        tests: family,
        detectable: reachable.is_none_or(|p| p * (family.max(1) as f64) < ALPHA),
        rows,
        regressions,
        safety_regressions,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::BackendSummary;
    use crate::judgement::FencingMode;

    fn summary_of(ops: &[f64], overlaps: u64) -> Summary {
        let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
        let mut b = BackendSummary::empty("etcd", None);
        for (i, &o) in ops.iter().enumerate() {
            let mut w: WorkloadSummary = serde_json::from_value(serde_json::json!({
                "name": "hot-key", "clients": 8, "keys": 1, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
                "ops_per_sec": o, "acquired": 1, "acquire_latency_us": pct(), "service_latency_us": pct(),
                "release_latency_us": pct(), "handoff_latency_us": pct(), "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
                "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
                "sections": 0, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
            }))
            .unwrap();
            w.repeat = i as u32;
            w.counts.overlaps = if i == 0 { overlaps } else { 0 };
            b.workloads.push(w);
        }
        s.backends.push(b);
        s
    }

    fn pct() -> serde_json::Value {
        serde_json::json!({"count": 10, "mean": 100.0, "p50": 100, "p90": 500, "p99": 1000, "p999": 2000, "p9999": 2000, "max": 2000})
    }

    fn summary(ops: f64, overlaps: u64) -> Summary {
        summary_of(&[ops], overlaps)
    }

    #[test]
    fn halved_throughput_regresses_and_is_named() {
        let t = thresholds(&[]).unwrap();
        let c = compare(&summary(1000.0, 0), &summary(500.0, 0), &t);
        assert_eq!(c.regressions, 1);
        let md = markdown(&c);
        assert!(md.contains("etcd · hot-key ops_per_sec"), "{md}");
        assert!(md.contains("1.0 k/s") && md.contains("500 /s"), "human units: {md}");
        assert!(md.contains("<details>"), "unchanged rows folded: {md}");
    }

    #[test]
    fn same_twice_is_unchanged_and_noise_is_tolerated() {
        let t = thresholds(&[]).unwrap();
        assert_eq!(compare(&summary(1000.0, 0), &summary(1000.0, 0), &t).regressions, 0);
        assert_eq!(compare(&summary(1000.0, 0), &summary(900.0, 0), &t).regressions, 0, "10% is noise");
        let strict = thresholds(&["ops_per_sec=5".into()]).unwrap();
        assert_eq!(compare(&summary(1000.0, 0), &summary(900.0, 0), &strict).regressions, 1);
    }

    #[test]
    fn a_new_overlap_always_fails() {
        let t = thresholds(&["ops_per_sec=1000".into()]).unwrap();
        let c = compare(&summary(1000.0, 0), &summary(1000.0, 1), &t);
        assert_eq!(c.safety_regressions, 1);
        assert!(c.regressions >= 1);
    }

    #[test]
    fn bad_threshold_is_named() {
        let e = thresholds(&["speed=10".into()]).unwrap_err().to_string();
        assert!(e.contains("speed") && e.contains("ops_per_sec"), "{e}");
    }

    #[test]
    fn mann_whitney_matches_the_tables() {
        // Completely separated 5 vs 5: the exact two-sided p is 2/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-9, "{p}");
        // Interleaved: no evidence.
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(p > 0.5, "{p}");
        // 3 vs 3 separated: 2/20.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((p - 0.1).abs() < 1e-9, "{p}");
    }

    /// With repeats the spread decides: a 40% median drop whose samples overlap the base's
    /// is within noise; a clean 40% drop is a regression; a clean 10% drop is within threshold.
    #[test]
    fn repeats_decide_from_the_spread() {
        let t = thresholds(&[]).unwrap();
        let base = summary_of(&[1000.0, 1010.0, 990.0, 1005.0, 995.0], 0);
        let noisy = summary_of(&[600.0, 1020.0, 580.0, 1000.0, 590.0], 0);
        let c = compare(&base, &noisy, &t);
        assert_eq!(c.regressions, 0, "{}", markdown(&c));
        assert!(markdown(&c).contains("within noise"));
        let slow = summary_of(&[600.0, 610.0, 590.0, 605.0, 595.0], 0);
        let c = compare(&base, &slow, &t);
        assert_eq!(c.regressions, 1, "{}", markdown(&c));
        assert_eq!(c.min_samples, 5);
        let slight = summary_of(&[900.0, 910.0, 890.0, 905.0, 895.0], 0);
        let c = compare(&base, &slight, &t);
        assert_eq!(c.regressions, 0);
        assert!(markdown(&c).contains("within threshold"), "{}", markdown(&c));
    }

    /// 1 µs -> 2 µs at p50 is +100% but below the latency floor: not a regression.
    #[test]
    fn microsecond_latencies_are_not_regressions() {
        let t = thresholds(&[]).unwrap();
        let mut a = summary(1000.0, 0);
        let mut b = summary(1000.0, 0);
        a.backends[0].workloads[0].acquire_latency_us.p50 = 1;
        b.backends[0].workloads[0].acquire_latency_us.p50 = 2;
        assert_eq!(compare(&a, &b, &t).regressions, 0);
        b.backends[0].workloads[0].acquire_latency_us.p50 = 2000;
        assert_eq!(compare(&a, &b, &t).regressions, 1, "2 ms is well past the floor");
    }

    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        let a = holm(&[0.01, 0.04, 0.03]);
        let want = [0.03, 0.06, 0.06];
        for (x, y) in a.iter().zip(want) {
            assert!((x - y).abs() < 1e-12, "{a:?}");
        }
        assert!((smallest_p(5, 5) - 1.0 / 252.0).abs() < 1e-12);
        assert_eq!(runs_needed(1), 4, "1/70 < 0.05 at 4 vs 4, 1/20 is not at 3 vs 3");
        assert_eq!(runs_needed(10), 5, "1/252 * 10 < 0.05");
        assert_eq!(runs_needed(60), 7);
    }

    fn with_counts(mut s: Summary, count: u64) -> Summary {
        for w in s.backends.iter_mut().flat_map(|b| b.workloads.iter_mut()) {
            w.acquire_latency_us.count = count;
            w.release_latency_us.count = count;
        }
        s
    }

    /// The gate's one false alarm on a real server: release p99 +51% with p < 0.05 over 5
    /// against 5, one of ten metrics. Alone at 0.05 it would count; over the comparison's
    /// tests it is within noise. The same shift completely separated still counts.
    #[test]
    fn one_lucky_metric_among_many_is_noise_but_a_clean_shift_is_not() {
        let t = thresholds(&[]).unwrap();
        let mut base = with_counts(summary_of(&[1000.0, 1010.0, 990.0, 1005.0, 995.0], 0), 100_000);
        let mut new = with_counts(summary_of(&[1000.0, 1012.0, 992.0, 1003.0, 997.0], 0), 100_000);
        // One overlap (340 > 335): one-sided p = 2/252, under 0.05 alone.
        for (w, v) in base.backends[0].workloads.iter_mut().zip([300, 310, 320, 330, 340]) {
            w.release_latency_us.p99 = v;
        }
        for (w, v) in new.backends[0].workloads.iter_mut().zip([335, 650, 660, 670, 680]) {
            w.release_latency_us.p99 = v;
        }
        let c = compare(&base, &new, &t);
        let row = c.rows.iter().find(|r| r.metric == "release_p99_us").unwrap();
        assert!(row.p_value.unwrap() < ALPHA, "alone it would count: {:?}", row.p_value);
        assert_eq!(c.regressions, 0, "{}", markdown(&c));
        assert!(row.note.contains("adjusted over"), "{}", row.note);
        assert!(c.detectable);
        for (w, rn) in new.backends[0].workloads.iter_mut().zip([650, 660, 670, 680, 690]) {
            w.release_latency_us.p99 = rn;
        }
        let c = compare(&base, &new, &t);
        assert_eq!(c.regressions, 1, "{}", markdown(&c));
    }

    /// Percentiles of short phases are their few largest values: not judged.
    #[test]
    fn a_tail_with_too_few_observations_is_not_judged() {
        let t = thresholds(&[]).unwrap();
        let base = with_counts(summary_of(&[1000.0; 5], 0), 2000);
        let mut new = with_counts(summary_of(&[1000.0; 5], 0), 2000);
        for w in &mut new.backends[0].workloads {
            w.acquire_latency_us.p999 = 90_000;
        }
        let c = compare(&base, &new, &t);
        assert_eq!(c.regressions, 0, "{}", markdown(&c));
        let row = c.rows.iter().find(|r| r.metric == "acquire_p999_us").unwrap();
        assert!(row.note.contains("fewer than 10"), "{}", row.note);
        let c = compare(&with_counts(base, 20_000), &with_counts(new, 20_000), &t);
        assert_eq!(c.regressions, 1, "with 20 beyond p99.9 it is judged: {}", markdown(&c));
    }

    /// 3 runs per side cannot reach p < 0.05 after any adjustment: the comparison says so
    /// instead of "no regression".
    #[test]
    fn too_few_repeats_say_nothing_was_detectable() {
        let t = thresholds(&[]).unwrap();
        let base = summary_of(&[1000.0, 1010.0, 990.0], 0);
        let slow = summary_of(&[500.0, 510.0, 490.0], 0);
        let c = compare(&base, &slow, &t);
        assert_eq!(c.regressions, 0);
        assert!(!c.detectable);
        let md = markdown(&c);
        assert!(md.contains("No regression could have been detected") && md.contains("at least 5 runs per side"), "{md}");
    }

    /// A directory of runs is one side with every run's phases as samples; runs of a side
    /// that differ are refused.
    #[test]
    fn a_directory_of_runs_is_pooled() {
        let root = std::env::temp_dir().join(format!("dlbench-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (i, ops) in [[1000.0, 1010.0], [990.0, 1005.0], [995.0, 1002.0]].iter().enumerate() {
            let d = root.join(format!("run{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("summary.json"), serde_json::to_vec(&summary_of(ops, 0)).unwrap()).unwrap();
        }
        std::os::unix::fs::symlink(root.join("run2"), root.join("latest")).unwrap();
        let pooled = load_side(&root).unwrap();
        assert_eq!(pooled.backends[0].workloads.len(), 6, "latest is not counted twice");
        assert!(pooled.run_id.contains("3 runs pooled"), "{}", pooled.run_id);
        let mut odd = summary_of(&[1000.0], 0);
        odd.target = "external".into();
        std::fs::create_dir_all(root.join("run9")).unwrap();
        std::fs::write(root.join("run9/summary.json"), serde_json::to_vec(&odd).unwrap()).unwrap();
        let e = load_side(&root).unwrap_err().to_string();
        assert!(e.contains("cannot be pooled") && e.contains("target"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn mismatches_are_named() {
        let a = summary(1000.0, 0);
        let mut b = summary(1000.0, 0);
        assert!(mismatches(&a, &b).is_empty());
        b.machine.cores = a.machine.cores + 62;
        b.target = "external".into();
        let m = mismatches(&a, &b).join(", ");
        assert!(m.contains("cores") && m.contains("target (local vs external)"), "{m}");
        let mut c = summary(1000.0, 0);
        assert!(mismatches(&a, &c).is_empty(), "no connection mode recorded on either side: comparable");
        for (s, mode) in [(&mut b, "per-client"), (&mut c, "shared")] {
            for bs in &mut s.backends {
                bs.connections = Some(mode.into());
            }
        }
        let mut d = c.clone();
        assert!(mismatches(&c, &d).is_empty());
        d.backends[0].connections = Some("per-client".into());
        assert!(mismatches(&c, &d).join(", ").contains("connections ("), "per-client against shared is a mismatch");
        assert!(compare_checked(&a, &b, &thresholds(&[]).unwrap(), false).is_err());
        let c = compare_checked(&a, &b, &thresholds(&[]).unwrap(), true).unwrap();
        assert!(markdown(&c).contains("--allow-mismatch"));
    }

    /// Mutation (issue 32): base `--fencing on` against new `--fencing off` once compared
    /// and said "No regression"; a fault schedule on one side only dropped the availability
    /// rows. Both are now refused, and a kernel build is a note, not a refusal.
    #[test]
    fn unlike_runs_are_refused_and_a_kernel_build_is_a_note() {
        let a = summary(1000.0, 0);
        let mut b = summary(1000.0, 0);
        b.fencing = FencingMode::Off;
        let mut on = a.clone();
        on.fencing = FencingMode::On;
        let m = mismatches(&on, &b).join(", ");
        assert!(m.contains("fencing mode (on vs off)"), "{m}");
        assert!(compare_checked(&on, &b, &thresholds(&[]).unwrap(), false).is_err());
        let mut faulted = a.clone();
        faulted.nemesis_schedule = vec!["kill".into()];
        assert!(mismatches(&a, &faulted).join(", ").contains("fault schedule (none vs kill)"));
        let mut rebuilt = a.clone();
        rebuilt.machine.kernel = format!("{} (another build)", a.machine.kernel);
        assert!(mismatches(&a, &rebuilt).is_empty(), "a kernel build alone is the same machine class");
        assert!(notes(&a, &rebuilt).join(", ").contains("kernel build"), "{:?}", notes(&a, &rebuilt));
    }

    /// Mutation (issue 32): one run per side once printed "No regression." and exited 0
    /// while three runs per side exited 3. One rule now: with no spread, nothing was
    /// detectable, whatever the count.
    #[test]
    fn one_run_per_side_is_not_a_clean_bill() {
        let t = thresholds(&[]).unwrap();
        let c = compare(&summary(1000.0, 0), &summary(1000.0, 0), &t);
        assert!(!c.detectable, "one run per side has no spread");
        let md = markdown(&c);
        assert!(!md.contains("**No regression.**"), "{md}");
        assert!(md.contains("No regression could have been detected"), "{md}");
    }

    /// Mutation (issue 32): safety rows once compared raw sums over samples, so 1 run with 1
    /// overlap against 5 runs with 1 each was a "regression". They compare rates per run.
    #[test]
    fn safety_compares_per_run_rates() {
        let t = thresholds(&[]).unwrap();
        let one = summary_of(&[1000.0], 1);
        let mut five = summary_of(&[1000.0; 5], 0);
        for w in &mut five.backends[0].workloads {
            w.counts.overlaps = 1;
        }
        let c = compare(&one, &five, &t);
        let row = c.rows.iter().find(|r| r.metric.contains("overlaps"));
        assert!(row.is_none_or(|r| r.verdict != Change::Regressed), "{}", markdown(&c));
    }
}
