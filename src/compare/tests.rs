use super::*;
use crate::summary::{BackendSummary, Summary, WorkloadSummary};
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

/// Five runs of one rate, a little spread: enough for the rule to confirm a change over the
/// few tests of these summaries (issue 49: one run a side confirms nothing).
fn five(ops: f64) -> Summary {
    summary_of(&[ops, ops * 1.01, ops * 0.99, ops * 1.02, ops * 0.98], 0)
}

#[test]
fn halved_throughput_regresses_and_is_named() {
    let t = thresholds(&[]).unwrap();
    let c = compare(&five(1000.0), &five(500.0), &t);
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
    assert_eq!(compare(&five(1000.0), &five(900.0), &strict).regressions, 1);
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
    let (mut a, mut b) = (five(1000.0), five(1000.0));
    let p50 = |s: &mut Summary, v: u64| s.backends[0].workloads.iter_mut().for_each(|w| w.acquire_latency_us.p50 = v);
    p50(&mut a, 1);
    p50(&mut b, 2);
    assert_eq!(compare(&a, &b, &t).regressions, 0);
    p50(&mut b, 2000);
    assert_eq!(compare(&a, &b, &t).regressions, 1, "2 ms is well past the floor");
}

#[test]
fn runs_needed_is_the_first_count_past_holm() {
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
    // A speed baseline against the default plan (a fault round): the refusal names the preset
    // that compares; unlike fencing alone does not.
    for (x, y) in [(&a, &faulted), (&faulted, &a)] {
        let e = compare_checked(x, y, &thresholds(&[]).unwrap(), false).unwrap_err().to_string();
        assert!(e.contains("runs of one --preset compare"), "{e}");
    }
    let e = compare_checked(&on, &b, &thresholds(&[]).unwrap(), false).unwrap_err().to_string();
    assert!(!e.contains("--preset"), "{e}");
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

/// The terminal gets an aligned table, no Markdown and no HTML; `markdown` is the PR comment.
#[test]
fn the_terminal_gets_an_aligned_table_and_markdown_stays_for_the_comment() {
    let t = thresholds(&[]).unwrap();
    let c = compare(&five(1000.0), &five(500.0), &t);
    let text = text(&c);
    for markup in ["<details", "<summary", "**", "|---", "| "] {
        assert!(!text.contains(markup), "{markup} on the terminal:\n{text}");
    }
    assert!(text.contains("1 regression: etcd · hot-key ops_per_sec"), "{text}");
    // The table: a header, then every row, each column starting where the header's does.
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.iter().position(|l| l.starts_with("backend · workload")).expect(&text);
    let at = |l: &str, word: &str| l.find(word).map(|b| l[..b].chars().count());
    let metric_col = at(lines[head], "metric").unwrap();
    let body: Vec<&str> = lines[head + 1..].iter().take_while(|l| !l.is_empty()).copied().collect();
    assert_eq!(body.len(), c.rows.len(), "{text}");
    assert!(body[0].contains("regressed"), "regressions first:\n{text}");
    for l in &body {
        let m = c.rows.iter().map(|r| r.metric.as_str()).find(|m| l.contains(&format!(" {m} "))).expect(l);
        assert_eq!(at(l, &format!(" {m} ")).map(|c| c + 1), Some(metric_col), "misaligned:\n{text}");
    }
    let md = markdown(&c);
    assert!(md.starts_with("## dlbench compare") && md.contains("| backend · workload |") && md.contains("**1 regression**"), "{md}");
}

/// Issue 49: one run a side confirms nothing. Every figure past its threshold (throughput
/// halved, every latency ten times) is "changed beyond the threshold, not confirmed": no
/// regression (exit 1 is for what the rule confirmed), unconfirmed changes (exit 3).
#[test]
fn one_run_a_side_past_every_threshold_is_not_confirmed() {
    let t = thresholds(&[]).unwrap();
    let mut slow = summary(500.0, 0);
    for w in &mut slow.backends[0].workloads {
        for h in [&mut w.acquire_latency_us, &mut w.handoff_latency_us] {
            h.p50 *= 10;
        }
        w.errors = 100;
    }
    let c = compare(&summary(1000.0, 0), &slow, &t);
    let past: Vec<&Row> = c.rows.iter().filter(|r| r.verdict == Change::Regressed).collect();
    assert!(past.len() >= 3, "throughput, p50, hand-off and errors crossed: {}", markdown(&c));
    assert!(past.iter().all(|r| r.unconfirmed), "{}", markdown(&c));
    assert_eq!((c.regressions, c.unconfirmed), (0, past.len()));
    let text = text(&c);
    assert!(text.contains(&format!("{} changes beyond the threshold, not confirmed", past.len())), "{text}");
    assert!(!text.contains("regression:") && !text.contains("regressions:"), "{text}");
    // The number, once: 4 tests here need 5 runs a side.
    assert_eq!(c.runs_needed, 5);
    assert_eq!(text.matches("at least 5 runs per side").count(), 1, "{text}");
    // Five runs a side of the same change: now a regression the rule confirmed.
    let mut slow5 = five(500.0);
    slow5.backends[0].workloads.iter_mut().for_each(|w| w.acquire_latency_us.p50 *= 10);
    let c = compare(&five(1000.0), &slow5, &t);
    assert_eq!((c.regressions, c.unconfirmed), (2, 0), "{}", markdown(&c));
}

fn with_verdict(mut s: Summary, headlines: &[&str]) -> Summary {
    for (w, h) in s.backends[0].workloads.iter_mut().zip(headlines) {
        let mut v: crate::judgement::Verdict = serde_json::from_value(serde_json::json!({
            "safety": "safe", "fencing": "not exercised", "class_claimed": "CP", "contradiction": false,
            "faults_applied": [], "faults_skipped": [], "valid": "valid", "headline": h, "summary": h
        }))
        .unwrap();
        if h.contains(crate::judgement::NOT_RECOVERED) || h.contains(crate::judgement::FAILED_ACQUIRE) {
            v.valid = crate::checker::Validity::Invalid;
        }
        if h.contains(crate::judgement::FAILED_ACQUIRE) {
            v.findings = vec!["acquire 12 failed while no one held the key".into()];
        }
        v.grant_ratio = Some(if h.contains(crate::judgement::NOT_RECOVERED) { 0.2 } else { 0.9 });
        w.verdict = Some(v);
    }
    s
}

/// Issue 49: the verdict row compares the whole verdict as counts over repeats. "safe"
/// against "safe; NOT RECOVERED" once compared equal (the safety word alone); and
/// availability is the verdicts' grant ratio, not the share of fault seconds with a grant.
#[test]
fn the_whole_verdict_is_compared_as_evidence() {
    let t = thresholds(&[]).unwrap();
    let ok = ["safe"; 5];
    let bad = ["safe; NOT RECOVERED; failed acquire took effect"; 5];
    let c = compare(&with_verdict(five(1000.0), &ok), &with_verdict(five(1000.0), &bad), &t);
    let row = c.rows.iter().find(|r| r.metric == "verdict").expect("a verdict row");
    assert_eq!(row.verdict, Change::Regressed, "{}", markdown(&c));
    assert!(row.note.contains("NOT RECOVERED x5") && row.note.contains("failed acquire took effect x5"), "{}", row.note);
    assert_eq!((row.base, row.new), (Some(0.0), Some(2.0)));
    let avail = c.rows.iter().find(|r| r.metric == "availability_pct").expect("availability from the verdicts");
    assert_eq!((avail.base, avail.new, avail.verdict), (Some(90.0), Some(20.0), Change::Regressed), "{}", markdown(&c));
    // One run a side: the same change is not confirmed.
    let c = compare(&with_verdict(summary(1000.0, 0), &ok), &with_verdict(summary(1000.0, 0), &bad), &t);
    let row = c.rows.iter().find(|r| r.metric == "verdict").unwrap();
    assert!(row.unconfirmed && c.regressions == 0, "{}", markdown(&c));
    // Same verdicts on both sides: a row (something failed) but unchanged.
    let c = compare(&with_verdict(five(1000.0), &bad), &with_verdict(five(1000.0), &bad), &t);
    assert_eq!(c.regressions, 0, "{}", markdown(&c));
}

/// Issue 49: a plan setting the summary records nowhere else (the history kept or not)
/// differs: the runs are refused, with the setting named.
#[test]
fn history_on_against_off_is_refused_by_name() {
    let (mut on, mut off) = (summary(1000.0, 0), summary(1000.0, 0));
    on.plan_settings.insert("history".into(), "on".into());
    off.plan_settings.insert("history".into(), "off".into());
    assert_eq!(mismatches(&on, &off), vec!["history (on vs off)".to_string()]);
    let e = compare_checked(&on, &off, &thresholds(&[]).unwrap(), false).unwrap_err().to_string();
    assert!(e.contains("history (on vs off)"), "{e}");
    // A setting one side does not record is a note, not a refusal.
    let old = summary(1000.0, 0);
    assert!(mismatches(&on, &old).is_empty());
    assert!(notes(&on, &old).join(" ").contains("history mode"), "{:?}", notes(&on, &old));
}

/// Issue 49: `--gate` names the rows that can fail; the others are reported ("not gated")
/// and neither fail nor join Holm's family, so fewer gated rows need fewer runs a side.
#[test]
fn only_gated_rows_fail_and_count_in_the_family() {
    let t = thresholds(&[]).unwrap();
    let mut slow = five(1000.0);
    slow.backends[0].workloads.iter_mut().for_each(|w| w.acquire_latency_us.p50 *= 10);
    let gate = Gate::parse("ops_per_sec").unwrap();
    let c = compare_with(&five(1000.0), &slow, &t, &gate);
    let p50 = c.rows.iter().find(|r| r.metric == "acquire_p50_us").unwrap();
    assert!(!p50.gated && p50.verdict == Change::Regressed && p50.p_value.is_some(), "{}", markdown(&c));
    assert_eq!((c.regressions, c.family, c.runs_needed), (0, 1, 4), "{}", markdown(&c));
    assert!(text(&c).contains("not gated"), "{}", text(&c));
    let c = compare_with(&five(1000.0), &slow, &t, &Gate::All);
    assert_eq!((c.regressions, c.family, c.runs_needed), (1, 4, 5), "{}", markdown(&c));
    assert!(Gate::parse("speed").unwrap_err().to_string().contains("ops_per_sec"));
}
