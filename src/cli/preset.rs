//! `--preset`: what a run answers. The default plan (`answer`) measures speed and then safety,
//! availability, recovery and the class under node kills, so that `dlbench run` alone gives
//! the decision table; `speed` is the workloads alone, as every run was before, for the CI gate
//! and the baselines (a fault round's phase would make their figures unlike).

use std::time::Duration;

use super::args::RunArgs;
use crate::kind::BackendKind;
use crate::nemesis::FaultSpec;
pub use crate::run::Preset;
use crate::run::TargetChoice;
use crate::workload::{Dist, Workload};

/// The fault round's workload name: every figure names its workload, and this one's are
/// measured under faults.
pub const ROUND: &str = "faults";
/// Holders inside long enough that each fault finds one.
pub const HOLD: Duration = crate::phase::ANSWER_HOLD;
/// A short TTL so that each fault's window (the TTL the servers grant and their election or
/// restart time after the heal) fits a round of about 20 s; printed with the table.
pub const TTL: Duration = Duration::from_secs(2);
/// One fault every 4 s, holding 2 s.
pub const INTERVAL: Duration = Duration::from_secs(4);

/// Whether a flag that shapes the run's phases themselves was given (--workload, --clients,
/// --keys, --key-dist, --duration, --ops, --warmup, --hold, --think, --ttl, --wait-timeout,
/// --rate, --repeat, --nemesis, --shard, a --durability list): the user is writing their
/// own plan, so the default is `speed` (the phases as written).
fn shaped(a: &RunArgs) -> bool {
    a.workload.is_some()
        || a.clients.is_some()
        || a.keys.is_some()
        || a.key_dist.is_some()
        || a.duration.is_some()
        || a.ops.is_some()
        || a.warmup.is_some()
        || a.hold.is_some()
        || a.think.is_some()
        || a.ttl.is_some()
        || a.wait_timeout.is_some()
        || a.rate.is_some()
        || a.repeat > 1
        || a.nemesis.is_some()
        || a.shard.is_some()
        || a.durability.contains(',')
}

/// The preset in force: the one asked for, checked against the plan, or the default.
pub fn choose(a: &RunArgs, backends: &[BackendKind], target: &TargetChoice) -> anyhow::Result<Preset> {
    let no_servers = backends.contains(&BackendKind::Memory);
    let external = matches!(target, TargetChoice::External { .. });
    match a.preset {
        Some(Preset::Speed) => Ok(Preset::Speed),
        Some(Preset::Answer) => {
            anyhow::ensure!(a.nemesis.is_none(), "--preset answer chooses its own faults (kill and pause of each backend's leader or server); drop --nemesis, or use --preset speed with it");
            anyhow::ensure!(a.shard.is_none(), "--preset answer runs faults, which --shard cannot (one schedule, one load host); use --preset speed with --shard");
            anyhow::ensure!(!no_servers, "--preset answer kills servers and the memory backend has none; drop memory from --backends, or use --preset speed");
            anyhow::ensure!(!external, "--preset answer kills servers and an external target's are not dlbench's to kill; use --target local or compose, or --preset speed");
            Ok(Preset::Answer)
        }
        None if !shaped(a) && !no_servers && !external => Ok(Preset::Answer),
        None => Ok(Preset::Speed),
    }
}

/// The fault schedule of the round: each backend's leader killed, then paused (the one
/// server where there is one node; one of Redlock's five, named as a stand-in). Where no
/// backend of the plan has a leader, a node of each.
pub fn schedule(backends: &[BackendKind]) -> Vec<FaultSpec> {
    let leader = backends.iter().any(|&b| crate::nemesis::meaningless(crate::nemesis::Targeting::Leader, b, b.nodes()).is_none());
    let s = if leader { "kill:leader,pause:leader" } else { "kill,pause" };
    crate::nemesis::parse_schedule(s).expect("the answer plan's schedule parses")
}

/// The fault round's workload: the hot key, eight clients, holders inside 200 ms, TTL 2 s, no
/// warm-up (the quiet before the first fault is the no-fault rate); its duration is set once
/// the plan knows the backends (the shortest that holds every fault with its room).
pub fn round(seed: Option<u64>) -> Workload {
    let hot = crate::workload::load("hot-key").expect("hot-key is shipped");
    Workload { name: ROUND.into(), clients: 8, keys: 1, hold: Dist::Fixed(HOLD), ttl: TTL, warmup: Duration::ZERO, seed, no_faults: false, ..hot }
}
