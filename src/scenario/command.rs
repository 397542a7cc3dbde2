//! `dlbench scenario ID[,ID] --backends B|all`: run catalogue entries, judge observed
//! against expected, write a result set and return it (the command line prints it and exits
//! non-zero on a contradiction: `cli/output.rs`).

use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{judge_entry, run_entry, target_options, EntryResult, ScenarioOutcome};
use crate::catalogue::{find, CATALOGUE};
use crate::checker::SegmentVerdict;
use crate::history::HistoryWriter;
use crate::kind::{self, BackendKind};
use crate::results::RunDir;
use crate::kind::names;
use crate::summary::{BackendSummary, Summary};
use crate::cluster::local::{bins, LocalTarget};
use crate::judgement::{Availability, FencingMode};

pub struct ScenarioArgs {
    pub ids: String,
    pub backends: String,
    pub out: PathBuf,
    pub sizes: super::users::Sizes,
    pub durability: crate::durability::Durability,
}

/// Expand `S1,S3` or `all` and the backend list into (entry, backend) pairs that apply, and
/// a line for each pair that does not, saying why.
pub fn plan(ids: &str, backends: &str) -> anyhow::Result<(Vec<(&'static str, BackendKind)>, Vec<String>)> {
    let entries: Vec<&'static str> = if ids.trim().eq_ignore_ascii_case("all") {
        CATALOGUE.iter().map(|s| s.id).collect()
    } else {
        ids.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                find(s.trim()).map(|e| e.id).ok_or_else(|| {
                    anyhow::anyhow!("no scenario {:?}; the catalogue has {} (`dlbench scenario list` prints each with its title)", s.trim(), CATALOGUE.iter().map(|s| s.id).collect::<Vec<_>>().join(", "))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let kinds = kind::parse_list(backends).map_err(anyhow::Error::msg)?;
    let mut pairs = Vec::new();
    let mut skipped = Vec::new();
    for id in &entries {
        let e = find(id).unwrap();
        for k in &kinds {
            if (e.applies)(*k) {
                pairs.push((*id, *k));
            } else {
                skipped.push(format!("{id} does not apply to {k}: {}", e.scope));
            }
        }
    }
    if pairs.is_empty() {
        anyhow::bail!("none of {} applies to {}: {}", entries.join(", "), names(&kinds), skipped.join("; "));
    }
    Ok((pairs, skipped))
}

/// Run the entries; their summary and result directory, or `None` when interrupted before the
/// servers were up.
pub async fn command(a: ScenarioArgs, cancel: CancellationToken) -> anyhow::Result<Option<(Summary, PathBuf)>> {
    let (mut pairs, mut skipped) = plan(&a.ids, &a.backends)?;
    // U6 needs PgBouncer: said before anything starts, and the rest still runs.
    if pairs.iter().any(|(id, _)| *id == "U6") && super::users::pgbouncer::pgbouncer_bin().is_none() {
        pairs.retain(|(id, _)| *id != "U6");
        skipped.push("U6 needs pgbouncer, which is not installed: apt-get install pgbouncer (scripts/setup.sh installs it)".into());
        anyhow::ensure!(!pairs.is_empty(), "U6 needs pgbouncer, which is not installed: apt-get install pgbouncer (scripts/setup.sh installs it)");
    }
    let mut kinds: Vec<BackendKind> = pairs.iter().map(|(_, k)| *k).collect();
    kinds.sort();
    kinds.dedup();
    bins::find(&kinds)?;
    let ids: Vec<&str> = pairs.iter().map(|(i, _)| *i).collect();
    let dir = RunDir::create(&a.out, "")?;
    let history_path = dir.path.join("history.jsonl");
    let history = HistoryWriter::create(&history_path)?;
    let mut summary = Summary::begin(&dir.id, "local", FencingMode::Both, Vec::new());
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: scenarios {} -> {}", dir.id, dir.path.display());
    for s in &skipped {
        eprintln!("dlbench: {s}");
    }
    eprintln!("dlbench: starting local servers for {}", names(&kinds));
    let target = tokio::select! {
        t = LocalTarget::start(&dir.path, &kinds, target_options(&ids, a.durability)) => Arc::new(t?),
        _ = cancel.cancelled() => return Ok(None),
    };
    summary.versions = target.versions().await;
    let groups = Arc::new(AtomicU32::new(0));
    // (entry, backend, observations, healed), judged once the history is checked.
    let mut done = Vec::new();
    for (id, kind) in &pairs {
        if cancel.is_cancelled() {
            break;
        }
        eprintln!("dlbench: {id} on {kind}: {}", find(id).unwrap().title);
        let r = run_entry(&target, *kind, id, &history, &dir.id, &groups, &a.sizes, a.durability, &cancel).await;
        let healed = target.wait_healthy(*kind).await.is_ok() && target.net().is_none_or(|n| n.is_healed());
        match r {
            Ok(mut r) => {
                keep_hits(&dir, &mut summary, std::mem::take(&mut r.hits), healed)?;
                done.push((*id, *kind, r.capabilities.fencing, r, healed))
            }
            Err(e) => {
                eprintln!("dlbench: {id} on {kind} could not run: {e:#}");
                summary.scenarios.push(did_not_run(id, *kind, &e, healed));
            }
        }
    }
    drop(target);
    history.close()?;
    let verdicts: Vec<SegmentVerdict> = crate::checker::check_file(&history_path)?;
    summary.backends = backend_summaries(&kinds, &done, a.durability);
    // Each entry judged against the catalogue first: a choreographed phase's verdict is its
    // expectation met or missed, in every output.
    for (id, kind, tokens, r, healed) in &done {
        let avail: Vec<Option<Availability>> = r.phases.iter().map(|p| availability(&verdicts, *kind, p)).collect();
        let groups = judge_entry(id, *kind, *tokens, a.durability, &r.observed, &avail, *healed);
        for (p, group) in r.phases.iter().zip(&groups).filter(|(p, _)| p.choreographed) {
            let w = summary.backends.iter_mut().filter(|b| b.name == kind.name()).flat_map(|b| b.workloads.iter_mut()).find(|w| !p.phase.is_empty() && w.phase_id == p.phase);
            if let Some(w) = w {
                w.expectation = Some(super::expectation(id, group));
            }
        }
        summary.scenarios.extend(groups.into_iter().flatten());
    }
    summary.attach_checks(&verdicts, FencingMode::Both);
    summary.finish(!cancel.is_cancelled());
    dir.write_json("summary.json", &summary)?;
    dir.write_json("checks.json", &verdicts)?;
    Ok(Some((summary, dir.path.clone())))
}

/// An entry's measurements, each with its evidence written as the entry ends (under
/// `evidence/`), into the summary, which is written again.
fn keep_hits(dir: &RunDir, summary: &mut Summary, hits: Vec<super::users::Measurement>, healed: bool) -> anyhow::Result<()> {
    if !hits.is_empty() {
        std::fs::create_dir_all(dir.path.join("evidence"))?;
    }
    for (mut hit, evidence) in hits {
        let slug: String = format!("{}-{}-{}", hit.entry, hit.backend, hit.case)
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
            .collect::<String>()
            .trim_end_matches('-')
            .to_string();
        hit.evidence = format!("evidence/{slug}.json");
        if let Err(e) = dir.write_json(&hit.evidence, &evidence) {
            hit.notes.push(format!("the evidence could not be written: {e:#}"));
        }
        hit.ok = hit.ok && healed;
        summary.hits.push(hit);
    }
    dir.write_json("summary.json", summary)?;
    Ok(())
}

/// The row of an entry that could not run.
fn did_not_run(id: &str, kind: BackendKind, e: &anyhow::Error, healed: bool) -> ScenarioOutcome {
    ScenarioOutcome {
        scenario: id.to_string(),
        case: String::new(),
        backend: kind.name().into(),
        title: find(id).unwrap().title.into(),
        fencing: "off".into(),
        expected: super::Expect::NoViolation,
        observed: format!("did not run: {e:#}"),
        ok: false,
        overlaps: 0,
        lost_updates: 0,
        rejected: 0,
        availability: None,
        notes: Vec::new(),
        healed,
        published: None,
        source: None,
    }
}

/// Summaries per backend from every phase the entries ran (the judgement comes with the
/// checks).
fn backend_summaries(kinds: &[BackendKind], done: &[(&str, BackendKind, bool, EntryResult, bool)], level: crate::durability::Durability) -> Vec<BackendSummary> {
    let mut backends: Vec<BackendSummary> = Vec::new();
    for kind in kinds {
        let phases: Vec<&crate::phase::PhaseResult> =
            done.iter().filter(|d| d.1 == *kind).flat_map(|d| d.3.phases.iter()).collect();
        if phases.is_empty() {
            continue;
        }
        let owned: Vec<crate::phase::PhaseResult> = phases.into_iter().cloned().collect();
        let caps = done.iter().find(|d| d.1 == *kind).and_then(|d| serde_json::to_value(d.3.capabilities).ok());
        let mut b = crate::summarize::backend(kind.name(), caps, &owned);
        // The settings its servers ran with, as a run records them.
        b.durability = (*kind != BackendKind::Memory).then(|| crate::durability::settings(*kind, level).record());
        backends.push(b);
    }
    backends
}

/// The availability check of phase `p` on `kind`, if the checker made one.
fn availability(verdicts: &[SegmentVerdict], kind: BackendKind, p: &crate::phase::PhaseResult) -> Option<Availability> {
    verdicts
        .iter()
        .find(|v| v.backend == kind.name() && v.workload == p.workload.name)
        .and_then(|v| v.results.iter().find(|c| c.checker == "availability"))
        .and_then(Availability::from_check)
}

