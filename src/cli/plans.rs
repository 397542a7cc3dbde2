//! From parsed flags to a validated `RunPlan`: `run`'s and `soak`'s (a soak is a run in
//! rounds). Bad input is refused here, with one line, before anything is created.

use std::time::Duration;

use super::args::{client_list, RunArgs, SoakArgs};
use super::preset::{self, Preset};
use crate::connect::Timeouts;
use crate::kind::{self, BackendKind};
use crate::run::{HistoryMode, RunPlan, TargetChoice};
use crate::judgement::FencingMode;
use crate::workload::{self, Dist, Overrides, Workload};

/// A soak is a run: one workload per backend, each for its share of the time, every fault.
pub(crate) fn soak_plan(a: SoakArgs) -> anyhow::Result<RunPlan> {
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    if backends.contains(&BackendKind::Memory) {
        anyhow::bail!("--backends: a soak runs under faults and the memory backend has no servers; drop memory");
    }
    let n = backends.len().max(1) as u32;
    let (rounds, share) = soak_rounds(a.duration, n, a.nemesis_interval, a.rounds)?;
    if !(a.max_rss_growth > 0.0) {
        anyhow::bail!("--max-rss-growth must be a positive percentage, got {}", a.max_rss_growth);
    }
    let run = RunArgs {
        backends: a.backends,
        workload: Some(a.workload),
        clients: a.clients.map(|c| c.to_string()),
        keys: None,
        key_dist: None,
        duration: Some(share),
        ops: None,
        warmup: None,
        hold: None,
        think: None,
        ttl: None,
        wait_timeout: None,
        rate: None,
        seed: a.seed,
        out: a.out,
        nemesis: Some(a.nemesis),
        nemesis_interval: Some(a.nemesis_interval),
        preset: Some(Preset::Speed),
        fencing: FencingMode::Both,
        history: HistoryMode::Auto,
        target: a.target,
        endpoints: a.endpoints,
        compose_project: a.compose_project,
        allow_remote: false,
        connect_timeout: a.connect_timeout,
        connections: a.connections,
        no_fail_on_violation: true,
        wide: false,
        properties: false,
        repeat: rounds,
        shard: None,
        start_at: None,
        resource: "local".into(),
        durability: "default".into(),
    };
    let (mut plan, notices) = build_run_plan(run)?;
    plan.soak = Some(crate::summary::soak::SoakGoal { max_rss_growth_pct: a.max_rss_growth, ..Default::default() });
    checked(plan, notices)
}

/// A soak's rounds and the length of one backend's turn. Run one backend after another for
/// its whole share, a soak measures the order of their working sets (the last backend's
/// connections and sessions appear after the warm-up and read as growth); in rounds, every
/// backend has had a turn before the warm-up ends, and what the later rounds add is growth.
pub(crate) fn soak_rounds(total: Duration, backends: u32, interval: Duration, rounds: Option<u32>) -> anyhow::Result<(u32, Duration)> {
    let fmt = crate::util::fmt_duration;
    let shortest = interval * 2;
    let most = (total.as_secs_f64() / (backends as f64 * shortest.as_secs_f64())).floor() as u32;
    if most == 0 {
        anyhow::bail!(
            "--duration {} gives each of {backends} backends {}, too short for faults every {}: use at least {}",
            fmt(total),
            fmt(total / backends),
            fmt(interval),
            fmt(shortest * backends)
        );
    }
    let rounds = match rounds {
        Some(0) => anyhow::bail!("--rounds must be at least 1"),
        Some(r) if r > most => anyhow::bail!(
            "--rounds {r}: turns of {} are shorter than two fault intervals ({}); use at most {most} rounds, or a longer --duration",
            fmt(total / (backends * r)),
            fmt(shortest)
        ),
        Some(r) => r,
        None => {
            // The first round, plus the servers' start-up, inside the warm-up: 15% spare.
            let warmup = crate::usage::warmup_for(total.as_secs_f64());
            ((total.as_secs_f64() * 1.15 / warmup).ceil() as u32).clamp(1, most)
        }
    };
    Ok((rounds, total / (backends * rounds)))
}

pub(crate) fn run_plan(a: RunArgs) -> anyhow::Result<RunPlan> {
    let (plan, notices) = build_run_plan(a)?;
    checked(plan, notices)
}

/// The plan validated as written, then the notices about it: bad input gets its one line and
/// nothing else.
pub(crate) fn checked(plan: RunPlan, notices: Vec<String>) -> anyhow::Result<RunPlan> {
    plan.validate()?;
    // A missing server binary is refused in its one line before any notice (the run checks
    // again, for callers that build a plan another way).
    if matches!(plan.target, TargetChoice::Local) {
        let real: Vec<BackendKind> = plan.backends.iter().copied().filter(|k| *k != BackendKind::Memory).collect();
        crate::cluster::local::bins::find(&real)?;
    }
    for n in notices {
        eprintln!("{n}");
    }
    Ok(plan)
}

/// The plan of `run` (and of `soak`, which sets its goal on it) and what to tell the user
/// about it once it is known good.
pub(crate) fn build_run_plan(a: RunArgs) -> anyhow::Result<(RunPlan, Vec<String>)> {
    let backends = kind::parse_list(&a.backends).map_err(anyhow::Error::msg)?;
    let target = plan_target(&a)?;
    let preset = preset::choose(&a, &backends, &target)?;
    let mut phases = plan_phases(&a)?;
    let (nemesis, interval) = match (&a.nemesis, preset) {
        (_, Preset::Answer) => {
            // The workloads measure speed alone; the fault round follows them.
            for w in &mut phases {
                w.no_faults = true;
            }
            phases.push(preset::round(phases.first().and_then(|w| w.seed)));
            (preset::schedule(&backends), a.nemesis_interval.unwrap_or(preset::INTERVAL))
        }
        (Some(s), _) => (crate::nemesis::parse_schedule(s).map_err(anyhow::Error::msg)?, a.nemesis_interval.unwrap_or(DEFAULT_INTERVAL)),
        (None, _) => (Vec::new(), a.nemesis_interval.unwrap_or(DEFAULT_INTERVAL)),
    };
    // A verdict under faults needs holders a second holder could collide with: a zero hold
    // (a yield, microseconds inside) would make "0 overlaps" say almost nothing.
    let mut notices = Vec::new();
    if !nemesis.is_empty() && a.hold.is_none() {
        for w in phases.iter_mut().filter(|w| w.hold.max().is_zero() && !w.no_faults) {
            notices.push(format!(
                "dlbench: workload {} holds 0ms; under --nemesis it holds {} so that a second holder would be seen (--hold to choose)",
                w.name,
                crate::util::fmt_duration(crate::phase::FAULT_HOLD)
            ));
            w.hold = Dist::Fixed(crate::phase::FAULT_HOLD);
        }
    }
    let backends = compose_without_nats(backends, &a.backends, &target, &mut notices)?;
    let mut plan = RunPlan {
        backends,
        phases,
        out: a.out,
        timeouts: Timeouts { connect: a.connect_timeout, ..Timeouts::default() },
        connections: a.connections.parse().map_err(anyhow::Error::msg)?,
        target,
        command: std::env::args().collect(),
        nemesis,
        nemesis_interval: interval,
        fencing: a.fencing,
        history: a.history,
        fail_on_violation: !a.no_fail_on_violation,
        repeat: a.repeat,
        soak: None,
        shard: a.shard.map(|s| crate::shard::ShardSpec { start_at: a.start_at, ..s }),
        resource: crate::resource_server::ResourceUrl::parse(&a.resource).map_err(anyhow::Error::msg)?,
        properties: a.properties,
        durability: crate::durability::parse_levels(&a.durability).map_err(anyhow::Error::msg)?,
    };
    if preset == Preset::Answer {
        // The round as short as holds each fault with its room on the backend needing most.
        let i = plan.phases.len() - 1;
        plan.phases[i].duration = plan.shortest_fault_phase(&plan.phases[i]);
        notices.push(answer_notice(&plan));
    }
    Ok((plan, notices))
}

/// The nemesis interval when none is given outside the answer plan.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// What the answer plan will do, in one line, and the flag for speed alone.
fn answer_notice(plan: &RunPlan) -> String {
    let fmt = crate::util::fmt_duration;
    let round = plan.phases.last().expect("the answer plan has its round");
    let speed: Vec<&str> = plan.phases.iter().filter(|w| w.no_faults).map(|w| w.name.as_str()).collect();
    format!(
        "dlbench: plan answer (the default): {} for speed, then a {} round per backend ({}, one every {}, TTL {}, holders inside {}); --preset speed for speed alone",
        speed.join(" and "),
        fmt(round.duration),
        plan.nemesis.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", "),
        fmt(plan.nemesis_interval),
        fmt(round.ttl),
        round.hold
    )
}

/// The workloads of the plan (one per client count of a sweep), with the flags applied,
/// one seed for all of them, each validated.
fn plan_phases(a: &RunArgs) -> anyhow::Result<Vec<Workload>> {
    let clients = a.clients.as_deref().map(client_list).transpose().map_err(|e| anyhow::anyhow!("--clients: {e}"))?;
    let mut phases: Vec<Workload> = match (&a.workload, a.keys) {
        (Some(list), _) => {
            list.split(',').filter(|s| !s.trim().is_empty()).map(|s| workload::load(s.trim())).collect::<Result<_, _>>()
        }
        (None, Some(1)) => workload::load("hot-key").map(|w| vec![w]),
        (None, Some(_)) => workload::load("many-keys").map(|w| vec![w]),
        (None, None) => ["hot-key", "many-keys"].iter().map(|n| workload::load(n)).collect(),
    }
    .map_err(anyhow::Error::msg)?;
    if phases.is_empty() {
        anyhow::bail!("--workload names no workload; shipped: {}", workload::shipped_names());
    }
    if let Some(s) = &a.shard {
        if a.seed.is_none() {
            anyhow::bail!("--shard {}/{}: give --seed N, the same in every shard, so that all of them choose from the same keys", s.index, s.count);
        }
    }
    // One seed for the whole run, chosen now and logged, unless given.
    let seed = a.seed.unwrap_or_else(|| rand::random::<u32>() as u64);
    let o = Overrides {
        clients: clients.as_ref().filter(|c| c.len() == 1).map(|c| c[0]),
        keys: a.keys,
        key_dist: a.key_dist,
        hold: a.hold.clone(),
        think: a.think.clone(),
        ttl: a.ttl,
        wait_timeout: a.wait_timeout,
        duration: a.duration,
        ops: a.ops,
        warmup: a.warmup,
        rate: a.rate,
        seed: None,
    };
    if let Some(sweep) = clients.as_ref().filter(|c| c.len() > 1) {
        phases = phases.iter().flat_map(|w| sweep.iter().map(move |&c| Workload { clients: c, ..w.clone() })).collect();
    }
    for w in &mut phases {
        o.apply(w);
        if a.seed.is_some() || w.seed.is_none() {
            w.seed = Some(seed);
        }
        w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
    }
    Ok(phases)
}

/// The compose file has no NATS service yet: `all` there leaves nats out and says so; nats
/// named outright is refused before anything is created.
fn compose_without_nats(mut backends: Vec<BackendKind>, asked: &str, target: &TargetChoice, notices: &mut Vec<String>) -> anyhow::Result<Vec<BackendKind>> {
    if !matches!(target, TargetChoice::Compose { .. }) || !backends.contains(&BackendKind::Nats) {
        return Ok(backends);
    }
    anyhow::ensure!(
        asked.trim() == "all",
        "--backends nats: the compose target has no NATS service yet; run nats on --target local, or on --target external with a [nats] section"
    );
    backends.retain(|k| *k != BackendKind::Nats);
    notices.push("dlbench: --backends all on compose leaves out nats (the compose file has no NATS service yet)".into());
    Ok(backends)
}

/// Where the servers are, from --target, --endpoints and --compose-project.
fn plan_target(a: &RunArgs) -> anyhow::Result<TargetChoice> {
    let target = match a.target.as_str() {
        "compose" => TargetChoice::Compose { project: a.compose_project.clone() },
        "external" => TargetChoice::External {
            endpoints: a.endpoints.clone().ok_or_else(|| anyhow::anyhow!("--target external needs --endpoints FILE (dlbench up --endpoints FILE writes one)"))?,
            allow_remote: a.allow_remote,
        },
        _ => TargetChoice::Local,
    };
    if a.endpoints.is_some() && !matches!(target, TargetChoice::External { .. }) {
        anyhow::bail!("--endpoints is for --target external");
    }
    Ok(target)
}

