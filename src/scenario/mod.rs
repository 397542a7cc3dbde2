//! The failure-scenario catalogue (references.md, S1-S10): each entry says how to cause it,
//! what to expect without and with fencing, and checks the observation against that.
//!
//! S1-S7 are choreographed ([`scripts`]): a holder, a next client, and one fault placed
//! exactly where it hurts. S8-S10 run the hot-key load with a nemesis. One run measures both
//! sides of fencing (the resource keeps a plain and a fenced register), so every entry
//! reports `fencing off` and `fencing on`.

mod actor;
pub mod command;
pub mod power;
pub mod scripts;
pub mod stage;
pub mod users;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connect::{self, Timeouts};
use crate::driver::{self, PhaseOutputs};
use crate::phase::PhaseResult;
use crate::history::HistoryWriter;
use crate::kind::BackendKind;
use crate::nemesis::{FaultSpec, Nemesis};
use crate::stats::Totals;
use crate::cluster::local::{LocalTarget, TargetOptions};
use crate::judgement::Availability;
use crate::workload::Workload;
use scripts::{Forget, Stall};
use stage::{Ctx, Observed};

use crate::judgement::{self, Expect};
use crate::summary::scenario::ScenarioOutcome;
use crate::catalogue::{find, is_measurement};

/// How long after a fault heals a service is expected to grant the lock again: the figure a
/// recovery time is reported against, and what the quiet tail of a nemesis entry is sized
/// by. It is not part of the verdict: a recovery time is a timing, and on a shared machine
/// (two leader kills in ten seconds, a 3 s session lost during the election, a loaded CI
/// host) ZooKeeper's measured 4-12 s; what the verdict asks is that the service came back.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// How long the holder stalls in the fixed-length cases of S1 and S6, and the lock-delay
/// the next client keeps in the lock-delay cases: the stall ends 3 s after the session
/// (3 s TTL) can have expired, well before expiry plus the delay.
pub const FIXED_STALL: Duration = Duration::from_secs(6);
pub const LOCK_DELAY: Duration = Duration::from_secs(6);

/// The cases of S1 and S6 on a backend: (name, timing, expected without, with fencing). On
/// a design with Chubby's lock-delay they show what it buys and what it does not: a
/// fixed-length stall without and with the delay, and a stall that outlasts the delay.
fn stall_cases(id: &str, kind: BackendKind) -> Vec<(&'static str, scripts::Timing, Expect, Expect)> {
    let plain = scripts::Timing::default();
    // A session advisory lock (and GET_LOCK) has no TTL: the server keeps it while the
    // paused holder's connection stays open, so the next client waits instead of getting in.
    if id == "S1" && matches!(kind, BackendKind::PgAdvisory | BackendKind::MariadbGetLock) {
        return vec![("", plain, Expect::NoViolation, Expect::NoViolation)];
    }
    let mut v = vec![("", plain, Expect::Violation, Expect::Rejected)];
    if kind.lock_delay() {
        let fixed = scripts::Timing { stall_for: Some(FIXED_STALL), lock_delay: Duration::ZERO };
        v.push(("stall 6 s", fixed, Expect::Violation, Expect::Rejected));
        v.push(("stall 6 s, lock-delay 6 s", scripts::Timing { lock_delay: LOCK_DELAY, ..fixed }, Expect::NoViolation, Expect::NoViolation));
        v.push(("lock-delay 6 s, stall outlasting it", scripts::Timing { lock_delay: LOCK_DELAY, ..plain }, Expect::Violation, Expect::Rejected));
    }
    v
}

/// The cases of an entry on a backend at a durability level, with what each expects
/// (without, with fencing).
fn cases(id: &str, kind: BackendKind, has_tokens: bool, level: crate::durability::Durability) -> Vec<(&'static str, Expect, Expect)> {
    if is_measurement(id) {
        return Vec::new();
    }
    let fenced = |v: Expect| if has_tokens || v == Expect::NoViolation { v } else { Expect::Violation };
    match id {
        "S1" | "S6" => stall_cases(id, kind).into_iter().map(|(c, _, off, on)| (c, off, fenced(on))).collect(),
        "S2" | "S3" => vec![("", Expect::Violation, fenced(Expect::Rejected))],
        // The promoted replica missed the holder's INCR too: its counter hands the next
        // holder the token the old holder has, so fencing refuses the new, legitimate holder.
        "S5" => vec![("", Expect::Violation, fenced(Expect::FencingBroken))],
        "J1" => vec![
            ("process pause", Expect::Violation, fenced(Expect::Rejected)),
            ("partition", Expect::Violation, fenced(Expect::Rejected)),
        ],
        // A node killed and restarted at once forgets the holder's key only when it keeps
        // nothing on disk (the default): with the AOF on (strict: appendfsync always;
        // relaxed: everysec, whose writes reach the file before the reply, so a process kill
        // loses none) it reloads the key and refuses the next client (Redis docs,
        // persistence).
        "S4" if level != crate::durability::Durability::Default => vec![
            ("restart at once", Expect::NoViolation, Expect::NoViolation),
            ("restart after a TTL", Expect::NoViolation, Expect::NoViolation),
        ],
        "S4" => vec![
            ("restart at once", Expect::Violation, fenced(Expect::Rejected)),
            ("restart after a TTL", Expect::NoViolation, Expect::NoViolation),
        ],
        "S7" => vec![("", Expect::MustFail, Expect::MustFail)],
        // One side only: whether the grant survived is the lock's, not fencing's.
        "P1" | "J2" => {
            let e = power::expectation(kind, level).expect;
            vec![("", e, e)]
        }
        // A paused follower stalls the clients attached to it (their requests wait on it until
        // it resumes or their timeouts move them): on a hot key, a FIFO queue stalls behind
        // them. Measured here as a grant rate near zero during the pause; the entry asks for
        // no violation and recovery, and reports the rate.
        _ => vec![("", Expect::Recovers, Expect::Recovers)],
    }
}

/// Did the observation meet the expectation? The judgement decides ([`judgement::meets`]);
/// this hands it the observation's figures.
pub fn judge(expect: Expect, fenced: bool, o: &Observed, availability: Option<&Availability>) -> (bool, String) {
    let r = &o.resource.total;
    let seen = judgement::Seen {
        overlaps: r.overlaps,
        lost_updates: if fenced { r.lost_updates_fenced } else { r.lost_updates },
        stale_refused: r.stale_refused(),
        legit_refused: r.legit_refused,
        token_inversions: r.token_inversions,
        // A fault counts only where it took effect (a start its own check or its heal's
        // probe did not find idle).
        fault_took_effect: crate::faultlog::windows(&o.nemesis).iter().any(|w| w.effect.is_confirmed()),
        exposure: o.resource.exposure().unwrap_or(0.0),
        expired_waiter_acquired: o.expired_waiter_acquired,
        leftovers: o.leftovers.clone(),
        availability,
        recovery_bound_ms: RECOVERY_BOUND.as_millis() as u64,
        power: o.power.as_ref(),
    };
    judgement::meets(expect, &seen)
}

/// The target options the chosen entries need.
pub fn target_options(ids: &[&str], durability: crate::durability::Durability) -> TargetOptions {
    let power_loss = ids.iter().any(|i| is_power(i));
    TargetOptions { proxies: true, clock_shim: ids.contains(&"S3"), redis_replica: ids.contains(&"S5"), power_loss, durability, password: None, connect_timeout: None }
}

/// The power-loss entries (P1, J2): judged on one side of fencing, with the published
/// expectation of each backend's setting.
pub fn is_power(id: &str) -> bool {
    matches!(id, "P1" | "J2")
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
        // Faults in the first half; the second half, longer than the recovery bound, shows
        // whether and when the service came back.
        duration: RECOVERY_BOUND * 2 + Duration::from_secs(8),
        warmup: Duration::from_secs(1),
        seed: Some(1),
        // Holders inside long enough for a second holder to be seen.
        hold: crate::workload::Dist::Fixed(crate::phase::FAULT_HOLD),
        // A claim orphaned by the fault (a holder whose release could not reach the servers)
        // blocks the key until its lease or session expires: the choreographed scenarios'
        // short TTL lets the service recover within the phase.
        ttl: stage::TTL,
        ..Workload::default()
    };
    let target = ctx.target.clone();
    let kind = ctx.kind;
    let history = ctx.history.clone();
    let spec: FaultSpec = fault.parse().map_err(anyhow::Error::msg)?;
    let room = kind.recovery_room(w.ttl);
    let name = id.to_string();
    let runner: driver::FaultRunner = Box::new(move |epoch, stop, until| {
        Box::pin(async move {
            let n = Nemesis::new(target, kind, stage::TTL, &name, epoch, Some(history));
            // After each heal, the room the backend needs to grant again before another fault.
            n.run(&[spec], Duration::from_secs(8), room, stop, until).await.map_err(anyhow::Error::msg)?;
            Ok(n.events())
        })
    });
    let out = PhaseOutputs {
        history: Some((ctx.history.clone(), kind.name().into())),
        faults: Some(runner),
        quiet_tail: Some(RECOVERY_BOUND + Duration::from_secs(4)),
        recovery_allowance: Some(kind.recovery_allowance()),
        ..Default::default()
    };
    let p = driver::run_phase(ctx.backend.clone(), &w, &ctx.run_id, cancel, out).await?;
    let o = Observed { phase: p.phase.clone(), ..Observed::of(p.resource.clone(), p.measured, p.nemesis.clone()) };
    Ok((p, o))
}

/// The result of one entry on one backend: its phase (for the summary) and its cases.
pub struct EntryResult {
    pub capabilities: dlbench_core::Capabilities,
    pub phases: Vec<PhaseResult>,
    pub observed: Vec<(String, Observed)>,
    /// The U entries' measurements, each with its evidence.
    pub hits: Vec<users::Measurement>,
}

/// Run entry `id` on `kind`. Ends with every node of the backend healed and healthy.
#[allow(clippy::too_many_arguments)]
pub async fn run_entry(
    target: &Arc<LocalTarget>,
    kind: BackendKind,
    id: &str,
    history: &HistoryWriter,
    run_id: &str,
    groups: &Arc<AtomicU32>,
    sizes: &users::Sizes,
    durability: crate::durability::Durability,
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
    let mut phases = Vec::new();
    let mut observed = Vec::new();
    let mut hits = Vec::new();
    // One scripted phase: its case name (empty for a single-case entry), its history segment
    // and workload name, what it observed.
    let mut push = |case: &str, name: &str, o: Observed| {
        let w = Workload { name: name.to_string(), clients: 2, keys: 1, ttl: stage::TTL, warmup: Duration::ZERO, ..Workload::default() };
        let totals: Totals = o.recorder.totals();
        let mut p = PhaseResult::scripted(w, totals, o.elapsed, o.resource.clone(), o.nemesis.clone());
        p.phase = o.phase.clone();
        phases.push(p);
        observed.push((case.to_string(), o));
    };
    match scripted(&ctx, target, id, durability).await? {
        Some(list) => list.into_iter().for_each(|(case, name, o)| push(&case, &name, o)),
        None => match id {
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
            "U1" | "U2" | "U3" | "U4" | "U5" | "U6" | "U7" => hits = users::run(&ctx, id, sizes).await?,
            other => anyhow::bail!("no scenario {other}"),
        },
    }
    heal(target, kind, id, &mut observed).await?;
    Ok(EntryResult { capabilities: ctx.backend.capabilities(), phases, observed, hits })
}

/// The choreographed entries (S1-S7, J1, P1, J2): each case's name, history segment name and
/// observation; `None` for an entry that is not choreographed.
async fn scripted(ctx: &Ctx, target: &Arc<LocalTarget>, id: &str, durability: crate::durability::Durability) -> anyhow::Result<Option<Vec<(String, String, Observed)>>> {
    let kind = ctx.kind;
    let mut out: Vec<(String, String, Observed)> = Vec::new();
    match id {
        "S1" | "S6" => {
            let stall = if id == "S1" { Stall::Pause } else { Stall::Partition };
            for (case, timing, _, _) in stall_cases(id, kind) {
                let name = if case.is_empty() { id.to_string() } else { format!("{id}-{}", case.replace([' ', ','], "-").replace("--", "-")) };
                out.push((case.to_string(), name.clone(), scripts::stalled_holder(ctx, &name, stall, stage::TTL, timing).await?));
            }
        }
        "J1" => {
            // Jepsen's lease: 2 s.
            let ttl = Duration::from_secs(2);
            for (case, stall) in [("process pause", Stall::Pause), ("partition", Stall::Partition)] {
                let name = format!("J1-{}", case.replace(' ', "-"));
                out.push((case.to_string(), name.clone(), scripts::stalled_holder(ctx, &name, stall, ttl, scripts::Timing::default()).await?));
            }
        }
        "S2" => out.push((String::new(), id.to_string(), scripts::delayed_write(ctx, id).await?)),
        "S3" => out.push((String::new(), id.to_string(), scripts::redlock_forget(ctx, id, Forget::ClockJump).await?)),
        "S4" => {
            for (case, how) in [("restart at once", Forget::RestartNow), ("restart after a TTL", Forget::RestartAfterTtl)] {
                let name = format!("S4-{}", case.replace(' ', "-"));
                out.push((case.to_string(), name.clone(), scripts::redlock_forget(ctx, &name, how).await?));
            }
        }
        "S5" => out.push((String::new(), id.to_string(), scripts::failover(ctx, id).await?)),
        "S7" => out.push((String::new(), id.to_string(), scripts::expired_waiter(ctx, id).await?)),
        "P1" | "J2" => {
            let case = power_case(id, kind, durability, target).await;
            let mut o = power::under_holder(ctx, id).await?;
            o.power_expected = Some(power::expectation(kind, durability));
            out.push((case, id.to_string(), o));
        }
        _ => return Ok(None),
    }
    Ok(Some(out))
}

/// Every entry ends healed: nodes running and resumed, links open, clocks back, healthy.
async fn heal(target: &Arc<LocalTarget>, kind: BackendKind, id: &str, observed: &mut [(String, Observed)]) -> anyhow::Result<()> {
    // Healing acts on every node: no leader is looked up, so the TTL names no bucket here.
    let nem = Nemesis::new(target.clone(), kind, stage::TTL, id, std::time::Instant::now(), None);
    if let Err(e) = nem.heal_all().await {
        // Servers that do not come back after a power loss are its observation, said on the
        // row (NOT HEALED), not an entry that did not run.
        anyhow::ensure!(is_power(id), "{e}");
        if let Some((_, o)) = observed.last_mut() {
            o.notes.push(format!("not healed: {e}"));
        }
    }
    Ok(())
}

/// A power-loss entry's case: the server setting it runs under (and for J2 the version of
/// nats-server, read from the server).
async fn power_case(id: &str, kind: BackendKind, level: crate::durability::Durability, target: &LocalTarget) -> String {
    let setting = power::expectation(kind, level).setting;
    if id == "J2" {
        let v = target.versions().await.get(kind.server().name()).cloned().unwrap_or_else(|| "unknown".into());
        return format!("nats-server {v}, all 3 nodes, {setting}");
    }
    format!("{level}: {setting}")
}

/// Judge an entry's observations against the catalogue at its durability level, on both
/// sides of fencing: one group of outcomes per observation (per phase), in order.
pub fn judge_entry(
    id: &str,
    kind: BackendKind,
    has_tokens: bool,
    level: crate::durability::Durability,
    observed: &[(String, Observed)],
    availability: &[Option<Availability>],
    healed: bool,
) -> Vec<Vec<ScenarioOutcome>> {
    let title = find(id).map(|s| s.title).unwrap_or("");
    let mut out = Vec::new();
    let power = is_power(id);
    // The row names the level the servers ran at: `redis@strict`, as a run's tables do.
    let backend = crate::durability::keyed(kind.name(), (level != crate::durability::Durability::Default).then_some(level));
    for ((case, off, on), ((seen_case, o), a)) in cases(id, kind, has_tokens, level).into_iter().zip(observed.iter().zip(availability)) {
        let case = if seen_case.is_empty() { case } else { seen_case.as_str() };
        // A power entry is judged against the setting it ran under.
        let (off, on) = o.power_expected.map_or((off, on), |e| (e.expect, e.expect));
        let sides = if power { vec![("off", off)] } else { vec![("off", off), ("on", on)] };
        // P1's published expectation is its backend's setting's; the others' the entry's.
        let (published, source) = match (id, find(id).and_then(|s| s.published)) {
            ("P1", _) => {
                let e = observed.first().and_then(|(_, o)| o.power_expected).unwrap_or_else(|| power::expectation(kind, level));
                (Some(e.finding.to_string()), Some(e.source.to_string()))
            }
            (_, p) => (p.map(|p| p.finding.to_string()), p.map(|p| p.source.to_string())),
        };
        let mut group = Vec::new();
        for (fencing, expect) in sides {
            let (ok, observed) = judge(expect, fencing == "on", o, a.as_ref());
            let r = &o.resource.total;
            group.push(ScenarioOutcome {
                scenario: id.to_string(),
                case: case.to_string(),
                backend: backend.clone(),
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
                published: published.clone(),
                source: source.clone(),
            });
        }
        out.push(group);
    }
    out
}

/// A phase's expectation, from its outcomes on each side of fencing: met when every side's
/// was, in the catalogue's words.
pub fn expectation(id: &str, group: &[ScenarioOutcome]) -> crate::judgement::Expectation {
    let words = group.iter().map(|o| format!("fencing {}: expected {}, observed {}", o.fencing, o.expected, o.observed)).collect::<Vec<_>>().join("; ");
    crate::judgement::Expectation { entry: id.to_string(), met: group.iter().all(|o| o.ok), words }
}

/// The observed-versus-expected table: per entry, the published finding it reproduces (if
/// any) and its source, then each backend and side of fencing, expected against observed.
pub fn table(outcomes: &[ScenarioOutcome]) -> String {
    let mut s = String::new();
    let mut last: Option<&str> = None;
    let mut last_published: Option<&str> = None;
    // The case column as wide as its longest name, so the rows stay aligned.
    let width = outcomes.iter().map(|o| if o.case.is_empty() { 0 } else { o.case.chars().count() + 2 }).max().unwrap_or(0).max(22);
    for o in outcomes {
        if last != Some(o.scenario.as_str()) {
            last = Some(o.scenario.as_str());
            s.push_str(&format!("{} {}\n", o.scenario, o.title));
            last_published = None;
        }
        // Printed again where it changes within an entry (P1: each backend's setting).
        if let (Some(p), Some(src)) = (&o.published, &o.source) {
            if last_published != Some(p.as_str()) {
                s.push_str(&format!("  published ({src}): {p}\n"));
                last_published = Some(p.as_str());
            }
        }
        let name = if o.case.is_empty() { String::new() } else { format!("({})", o.case) };
        s.push_str(&format!(
            "  {:<width$} {:<9} fencing {:<3}  expected {:<30} observed {:<60} {}\n",
            name,
            o.backend,
            o.fencing,
            o.expected.to_string(),
            o.observed,
            if o.ok {
                "OK"
            } else if !o.healed {
                "NOT HEALED"
            } else if o.observed.starts_with("no effect") {
                "NO EFFECT"
            } else if o.observed.starts_with("no answer") {
                "NO ANSWER"
            } else {
                "CONTRADICTS"
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    //! Every judgment fails on an observation doctored to contradict it.
    use super::*;
    use dlbench_core::{CellStats, ResourceStats};

    fn obs(total: CellStats) -> Observed {
        let r = ResourceStats { total, keys: 1, elapsed_ns: 10_000_000_000, busy_ns: 5_000_000_000, busiest_key_ns: 5_000_000_000, counter_sum: 0 };
        let mut o = Observed::of(r, Duration::from_secs(10), Vec::new());
        o.nemesis.push(crate::faultlog::NemesisEvent::new("kill", crate::faultlog::Mark::Start, &[], 1000, crate::faultlog::Effect::confirmed("process gone")));
        o
    }
    fn avail(recovery_ms: u64, ratio: f64) -> Availability {
        Availability { recovery_ms, ratio: Some(ratio), recovered: true, ..Default::default() }
    }
    fn ok(expect: Expect, fenced: bool, o: &Observed, a: Option<&Availability>) -> bool {
        judge(expect, fenced, o, a).0
    }

    #[test]
    fn violation_needs_an_overlap_or_a_lost_update() {
        assert!(!ok(Expect::Violation, false, &obs(CellStats::default()), None));
        assert!(ok(Expect::Violation, false, &obs(CellStats { overlaps: 1, ..Default::default() }), None));
        assert!(ok(Expect::Violation, true, &obs(CellStats { lost_updates_fenced: 1, ..Default::default() }), None));
    }

    #[test]
    fn no_violation_fails_on_any_overlap_or_loss() {
        assert!(ok(Expect::NoViolation, false, &obs(CellStats::default()), None));
        assert!(!ok(Expect::NoViolation, false, &obs(CellStats { overlaps: 1, ..Default::default() }), None));
        assert!(!ok(Expect::NoViolation, true, &obs(CellStats { lost_updates_fenced: 1, ..Default::default() }), None));
    }

    #[test]
    fn rejected_needs_stale_refusals_and_no_broken_fencing() {
        let good = CellStats { overlaps: 1, lost_updates: 1, rejected: 1, ..Default::default() };
        assert!(ok(Expect::Rejected, true, &obs(good), None));
        assert!(!ok(Expect::Rejected, true, &obs(CellStats { overlaps: 1, lost_updates: 1, ..Default::default() }), None), "nothing refused");
        let legit = CellStats { rejected: 1, legit_refused: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(legit), None), "a legitimate holder refused");
        let inverted = CellStats { rejected: 2, token_inversions: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(inverted), None), "tokens went backwards");
        let lost = CellStats { rejected: 1, lost_updates_fenced: 1, ..Default::default() };
        assert!(!ok(Expect::Rejected, true, &obs(lost), None), "an update lost despite fencing");
    }

    #[test]
    fn fencing_broken_needs_a_refused_holder_or_an_inversion() {
        let caught = CellStats { overlaps: 1, lost_updates: 1, rejected: 1, ..Default::default() };
        assert!(!ok(Expect::FencingBroken, true, &obs(caught), None), "fencing that worked is not broken");
        assert!(ok(Expect::FencingBroken, true, &obs(CellStats { rejected: 1, legit_refused: 1, ..Default::default() }), None));
        assert!(ok(Expect::FencingBroken, true, &obs(CellStats { token_inversions: 1, ..Default::default() }), None));
    }

    #[test]
    fn must_fail_reads_the_servers() {
        let mut o = obs(CellStats::default());
        o.expired_waiter_acquired = Some(false);
        o.leftovers = Some(Ok(vec![]));
        assert!(ok(Expect::MustFail, false, &o, None));
        o.leftovers = Some(Ok(vec!["/lock/_c_x-lock-0000000003".into()]));
        let (good, why) = judge(Expect::MustFail, false, &o, None);
        assert!(!good && why.contains("_c_x-lock"), "{why}");
        o.leftovers = Some(Err("connection refused".into()));
        assert!(!ok(Expect::MustFail, false, &o, None), "servers unread is not 'nothing left'");
        o.leftovers = None;
        assert!(!ok(Expect::MustFail, false, &o, None));
        o.leftovers = Some(Ok(vec![]));
        o.expired_waiter_acquired = Some(true);
        assert!(!ok(Expect::MustFail, false, &o, None));
    }

    #[test]
    fn recovery_is_judged_after_the_heal_and_its_time_reported() {
        let o = obs(CellStats::default());
        assert!(ok(Expect::Recovers, false, &o, Some(&avail(1500, 0.2))));
        let (good, why) = judge(Expect::Recovers, false, &o, Some(&avail(RECOVERY_BOUND.as_millis() as u64 + 1, 0.2)));
        assert!(good && why.contains("slower than"), "a slow recovery is a recovery, said slow: {why}");
        assert!(!ok(Expect::Recovers, false, &o, None), "not measured");
        let never = Availability { recovered: false, ..avail(900, 0.0) };
        let (good, why) = judge(Expect::Recovers, false, &o, Some(&never));
        assert!(!good && why.contains("NOT recovered"), "no grant after the heal: {why}");
        let mut quiet = o.clone();
        quiet.nemesis.clear();
        assert!(!ok(Expect::Recovers, false, &quiet, Some(&avail(0, 1.0))), "no fault applied");
        let mut weak = o.clone();
        weak.resource.busy_ns = 10_000_000;
        assert!(!ok(Expect::Recovers, false, &weak, Some(&avail(0, 1.0))), "holders barely exposed");
        let violated = obs(CellStats { overlaps: 1, ..Default::default() });
        assert!(!ok(Expect::Recovers, false, &violated, Some(&avail(0, 1.0))));
    }
}
