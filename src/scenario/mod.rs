//! The failure-scenario catalogue (references.md, S1-S10): each entry says how to cause it,
//! what to expect without and with fencing, and checks the observation against that.
//!
//! S1-S7 are choreographed ([`scripts`]): a holder, a next client, and one fault placed
//! exactly where it hurts. S8-S10 run the hot-key load with a nemesis. One run measures both
//! sides of fencing (the resource keeps a plain and a fenced register), so every entry
//! reports `fencing off` and `fencing on`.

mod actor;
pub mod command;
pub mod scripts;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::connect::{self, Timeouts};
use crate::driver::{self, PhaseOutputs, PhaseResult};
use crate::history::HistoryWriter;
use crate::kind::BackendKind;
use crate::nemesis::{FaultSpec, Nemesis};
use crate::stats::Totals;
use crate::target::local::{LocalTarget, TargetOptions};
use crate::verdict::Availability;
use crate::workload::Workload;
use scripts::{Ctx, Forget, Observed, Stall};

/// What an entry expects on one side of fencing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// Two holders, or a lost update (on this side's register).
    Violation,
    /// No overlap and no lost update.
    NoViolation,
    /// Stale writes refused and no update lost.
    Rejected,
    /// The client must be told "not acquired".
    MustFail,
    /// No violation, and an availability gap that ends (the service recovers).
    NoViolationWithGap,
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expect::Violation => "violation",
            Expect::NoViolation => "no violation",
            Expect::Rejected => "stale writes rejected",
            Expect::MustFail => "acquire fails",
            Expect::NoViolationWithGap => "no violation, a gap, recovery",
        })
    }
}

/// One catalogue entry.
pub struct Scenario {
    pub id: &'static str,
    pub title: &'static str,
    pub applies: fn(BackendKind) -> bool,
}

fn any(k: BackendKind) -> bool {
    k != BackendKind::Memory
}
fn sessions(k: BackendKind) -> bool {
    matches!(k, BackendKind::Etcd | BackendKind::Zookeeper)
}

pub const CATALOGUE: &[Scenario] = &[
    Scenario { id: "S1", title: "holder pauses longer than its TTL or session", applies: any },
    Scenario { id: "S2", title: "holder's write is delayed past its release", applies: any },
    Scenario { id: "S3", title: "one Redlock node's clock jumps forward", applies: |k| k == BackendKind::Redlock },
    Scenario { id: "S4", title: "a Redlock node restarts empty (at once, and after a TTL)", applies: |k| k == BackendKind::Redlock },
    Scenario { id: "S5", title: "Redis primary fails over before replicating", applies: |k| k == BackendKind::Redis },
    Scenario { id: "S6", title: "holder partitioned from the quorum", applies: sessions },
    Scenario { id: "S7", title: "session expires while waiting in the queue", applies: sessions },
    Scenario { id: "S8", title: "leader killed", applies: sessions },
    Scenario { id: "S9", title: "a follower paused", applies: sessions },
    Scenario { id: "S10", title: "PostgreSQL killed and restarted", applies: |k| k == BackendKind::Postgres },
];

pub fn find(id: &str) -> Option<&'static Scenario> {
    CATALOGUE.iter().find(|s| s.id.eq_ignore_ascii_case(id))
}

/// The cases of an entry on a backend, with what each expects (without, with fencing).
fn cases(id: &str, has_tokens: bool) -> Vec<(&'static str, Expect, Expect)> {
    let fenced = |v: Expect| if has_tokens { v } else { Expect::Violation };
    match id {
        "S1" | "S2" | "S3" | "S5" | "S6" => vec![("", Expect::Violation, fenced(Expect::Rejected))],
        "S4" => vec![
            ("restart at once", Expect::Violation, fenced(Expect::Rejected)),
            ("restart after a TTL", Expect::NoViolation, Expect::NoViolation),
        ],
        "S7" => vec![("", Expect::MustFail, Expect::MustFail)],
        _ => vec![("", Expect::NoViolationWithGap, Expect::NoViolationWithGap)],
    }
}

/// One observed case on one side of fencing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    pub scenario: String,
    pub case: String,
    pub backend: String,
    pub title: String,
    /// `off` or `on`.
    pub fencing: String,
    pub expected: Expect,
    pub observed: String,
    /// The observation agrees with the expectation.
    pub ok: bool,
    pub overlaps: u64,
    pub lost_updates: u64,
    pub rejected: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    pub notes: Vec<String>,
    /// Every node healthy again after the entry.
    pub healed: bool,
}

fn judge(expect: Expect, fenced: bool, o: &Observed, availability: Option<&Availability>) -> (bool, String) {
    let r = &o.resource.total;
    let lost = if fenced { r.lost_updates_fenced } else { r.lost_updates };
    let overlap_txt = format!("{} overlap(s), {} lost update(s)", r.overlaps, lost);
    match expect {
        Expect::Violation => (r.overlaps > 0 || lost > 0, overlap_txt),
        Expect::NoViolation => (r.overlaps == 0 && lost == 0, overlap_txt),
        Expect::Rejected => (r.rejected > 0 && lost == 0, format!("{} stale write(s) refused, {lost} lost update(s)", r.rejected)),
        Expect::MustFail => match o.expired_waiter_acquired {
            Some(false) => (true, "the expired waiter's acquire failed".into()),
            Some(true) => (false, "the expired waiter was told it holds the lock".into()),
            None => (false, "not observed".into()),
        },
        Expect::NoViolationWithGap => match availability {
            Some(a) => (
                r.overlaps == 0 && lost == 0 && a.longest_gap_ms > 0,
                format!("{overlap_txt}; longest gap {} ms, recovery {} ms", a.longest_gap_ms, a.recovery_ms),
            ),
            None => (false, format!("{overlap_txt}; no availability measured")),
        },
    }
}

/// The target options the chosen entries need.
pub fn target_options(ids: &[&str]) -> TargetOptions {
    TargetOptions { proxies: true, clock_shim: ids.contains(&"S3"), redis_replica: ids.contains(&"S5"), password: None }
}

/// S8-S10: the hot-key load with faults from a nemesis.
async fn with_nemesis(
    ctx: &Ctx,
    id: &str,
    fault: &str,
    cancel: &CancellationToken,
) -> anyhow::Result<(PhaseResult, Observed)> {
    let w = Workload {
        name: id.to_string(),
        clients: 8,
        keys: 1,
        duration: Duration::from_secs(20),
        warmup: Duration::from_secs(1),
        seed: Some(1),
        ..Workload::default()
    };
    let target = ctx.target.clone();
    let kind = ctx.kind;
    let history = ctx.history.clone();
    let spec: FaultSpec = fault.parse().map_err(anyhow::Error::msg)?;
    let name = id.to_string();
    let runner: driver::FaultRunner = Box::new(move |epoch, stop| {
        Box::pin(async move {
            let n = Nemesis::new(target, kind, &name, epoch, Some(history));
            n.run(&[spec], Duration::from_secs(8), stop).await.map_err(anyhow::Error::msg)?;
            Ok(n.events())
        })
    });
    let out = PhaseOutputs { history: Some((ctx.history.clone(), kind.name().into())), faults: Some(runner), ..Default::default() };
    let p = driver::run_phase(ctx.backend.clone(), &w, &ctx.run_id, cancel, out).await?;
    let o = Observed {
        resource: p.resource.clone(),
        recorder: Arc::new(crate::stats::Recorder::new(1)),
        elapsed: p.measured,
        expired_waiter_acquired: None,
        notes: Vec::new(),
        nemesis: p.nemesis.clone(),
    };
    Ok((p, o))
}

/// The result of one entry on one backend: its phase (for the summary) and its cases.
pub struct EntryResult {
    pub capabilities: dlbench_core::Capabilities,
    pub phases: Vec<PhaseResult>,
    pub observed: Vec<(String, Observed)>,
}

/// Run entry `id` on `kind`. Ends with every node of the backend healed and healthy.
pub async fn run_entry(
    target: &Arc<LocalTarget>,
    kind: BackendKind,
    id: &str,
    history: &HistoryWriter,
    run_id: &str,
    groups: &Arc<AtomicU32>,
    cancel: &CancellationToken,
) -> anyhow::Result<EntryResult> {
    let backend = connect::connect(kind, target.endpoints(), Timeouts::default(), None).await?;
    let ctx = Ctx {
        target: target.clone(),
        kind,
        backend,
        history: history.clone(),
        run_id: run_id.to_string(),
        groups: groups.clone(),
    };
    let scripted = |name: &str, o: Observed| {
        let w = Workload { name: name.to_string(), clients: 2, keys: 1, ttl: scripts::TTL, warmup: Duration::ZERO, ..Workload::default() };
        let totals: Totals = o.recorder.totals();
        let p = PhaseResult::scripted(w, totals, o.elapsed, o.resource.clone(), o.nemesis.clone());
        (p, o)
    };
    let mut phases = Vec::new();
    let mut observed = Vec::new();
    match id {
        "S1" | "S6" => {
            let stall = if id == "S1" { Stall::Pause } else { Stall::Partition };
            let (p, o) = scripted(id, scripts::stalled_holder(&ctx, id, stall).await?);
            phases.push(p);
            observed.push((String::new(), o));
        }
        "S2" => {
            let (p, o) = scripted(id, scripts::delayed_write(&ctx, id).await?);
            phases.push(p);
            observed.push((String::new(), o));
        }
        "S3" => {
            let (p, o) = scripted(id, scripts::redlock_forget(&ctx, id, Forget::ClockJump).await?);
            phases.push(p);
            observed.push((String::new(), o));
        }
        "S4" => {
            for (case, how) in [("restart at once", Forget::RestartNow), ("restart after a TTL", Forget::RestartAfterTtl)] {
                let name = format!("S4 {case}");
                let (p, o) = scripted(&name, scripts::redlock_forget(&ctx, &name.replace(' ', "-"), how).await?);
                phases.push(p);
                observed.push((case.to_string(), o));
            }
        }
        "S5" => {
            let (p, o) = scripted(id, scripts::failover(&ctx, id).await?);
            phases.push(p);
            observed.push((String::new(), o));
        }
        "S7" => {
            let (p, o) = scripted(id, scripts::expired_waiter(&ctx, id).await?);
            phases.push(p);
            observed.push((String::new(), o));
        }
        "S8" | "S9" | "S10" => {
            let fault = match id {
                "S8" => "kill:leader",
                "S9" => "pause:follower",
                _ => "kill",
            };
            let (p, o) = with_nemesis(&ctx, id, fault, cancel).await?;
            phases.push(p);
            observed.push((String::new(), o));
        }
        other => anyhow::bail!("no scenario {other}"),
    }
    // Every entry ends healed: nodes running and resumed, links open, clocks back, healthy.
    let nem = Nemesis::new(target.clone(), kind, id, std::time::Instant::now(), None);
    nem.heal_all().await.map_err(anyhow::Error::msg)?;
    Ok(EntryResult { capabilities: ctx.backend.capabilities(), phases, observed })
}

/// Judge an entry's observations against the catalogue, on both sides of fencing.
pub fn judge_entry(
    id: &str,
    kind: BackendKind,
    has_tokens: bool,
    observed: &[(String, Observed)],
    availability: &[Option<Availability>],
    healed: bool,
) -> Vec<Outcome> {
    let title = find(id).map(|s| s.title).unwrap_or("");
    let mut out = Vec::new();
    for ((case, off, on), ((_, o), a)) in cases(id, has_tokens).into_iter().zip(observed.iter().zip(availability)) {
        for (fencing, expect) in [("off", off), ("on", on)] {
            let (ok, observed) = judge(expect, fencing == "on", o, a.as_ref());
            let r = &o.resource.total;
            out.push(Outcome {
                scenario: id.to_string(),
                case: case.to_string(),
                backend: kind.name().to_string(),
                title: title.to_string(),
                fencing: fencing.to_string(),
                expected: expect,
                observed,
                ok: ok && healed,
                overlaps: r.overlaps,
                lost_updates: if fencing == "on" { r.lost_updates_fenced } else { r.lost_updates },
                rejected: if fencing == "on" { r.rejected } else { 0 },
                availability: a.clone(),
                notes: o.notes.clone(),
                healed,
            });
        }
    }
    out
}

/// The observed-versus-expected table.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    for o in outcomes {
        let name = if o.case.is_empty() { o.scenario.clone() } else { format!("{} ({})", o.scenario, o.case) };
        s.push_str(&format!(
            "{:<26} {:<9} fencing {:<3}  expected {:<30} observed {:<55} {}\n",
            name,
            o.backend,
            o.fencing,
            o.expected.to_string(),
            o.observed,
            if o.ok { "OK" } else if !o.healed { "NOT HEALED" } else { "CONTRADICTS" }
        ));
    }
    s
}
