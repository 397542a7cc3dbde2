//! What a run is asked to do: the validated plan, where the servers are, and the rules a
//! plan must keep (bad input is refused before anything is created).

use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::local::TargetOptions;
use crate::connect::Timeouts;
use crate::judgement::FencingMode;
use crate::kind::BackendKind;
use crate::nemesis::{FaultKind, FaultSpec};
use crate::phase::FaultLayout;
use crate::workload::Workload;

/// Whether a run keeps its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HistoryMode {
    Auto,
    On,
    Off,
}

/// What a run answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// Speed, then a fault round per backend: the decision table.
    Answer,
    /// The workloads alone (under `--nemesis` when given).
    Speed,
}

/// Everything `run` needs, validated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunPlan {
    pub backends: Vec<BackendKind>,
    pub phases: Vec<Workload>,
    pub out: PathBuf,
    #[serde(skip)]
    pub timeouts: Timeouts,
    /// Each client on its own connection, or all sharing one per server.
    pub connections: dlbench_core::Connections,
    pub command: Vec<String>,
    pub nemesis: Vec<FaultSpec>,
    #[serde(with = "crate::workload::dur")]
    pub nemesis_interval: Duration,
    pub fencing: FencingMode,
    /// Stream the history (and check it at the end).
    pub history: HistoryMode,
    /// Exit 1 on an invalid verdict and 3 on an unknown one (Jepsen's convention); off for
    /// exploratory runs (`--no-fail-on-violation`).
    pub fail_on_violation: bool,
    pub target: TargetChoice,
    /// `dlbench soak`: judge the run against this goal; the soak's verdict is the exit status,
    /// and faults no backend of the target supports are dropped from the schedule instead of
    /// refused.
    pub soak: Option<crate::summary::soak::SoakGoal>,
    /// `--repeat N`: every phase N times, interleaved across backends.
    pub repeat: u32,
    /// `--shard I/N`: this process runs one shard of the plan (see `shard`).
    pub shard: Option<crate::shard::ShardSpec>,
    /// `--resource redis://...`: the protected resource in its own server (see
    /// `resource_server`); `None` keeps it in this process.
    pub resource: Option<crate::resource_server::ResourceUrl>,
    /// `--properties`: after its phases, measure each backend's expiry and reentrancy.
    pub properties: bool,
    /// `--durability`: the servers' durability levels, each once; several run every backend
    /// at each level on fresh local servers (the durability table).
    pub durability: Vec<crate::durability::Durability>,
}

/// Where the servers are.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum TargetChoice {
    /// dlbench starts them (the embedded default).
    Local,
    /// The services of a docker compose project.
    Compose { project: String },
    /// Endpoints named in a file; `allow_remote` permits addresses off this machine.
    External { endpoints: PathBuf, allow_remote: bool },
}

impl TargetChoice {
    pub fn name(&self) -> &'static str {
        match self {
            TargetChoice::Local => "local",
            TargetChoice::Compose { .. } => "compose",
            TargetChoice::External { .. } => "external",
        }
    }
}


impl RunPlan {
    pub fn validate(&self) -> anyhow::Result<()> {
        for w in &self.phases {
            w.validate().map_err(|e| anyhow::anyhow!("workload {}: {e}", w.name))?;
        }
        if !self.nemesis.is_empty() {
            self.validate_faults()?;
        }
        if let Some(s) = &self.shard {
            self.validate_shard(s)?;
        }
        if let Some(r) = &self.resource {
            self.validate_resource(r)?;
        }
        self.validate_durability()
    }

    /// Only the local target sets durability; a compose or external target records what its
    /// servers run with, so any level but `default` is refused there.
    fn validate_durability(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.durability.is_empty(), "--durability names no level (default, strict, relaxed)");
        let set: Vec<&str> = self.durability.iter().filter(|l| !l.is_default() || self.durability.len() > 1).map(|l| l.name()).collect();
        anyhow::ensure!(
            set.is_empty() || matches!(self.target, TargetChoice::Local),
            "--durability {}: a {} target's servers are not dlbench's to configure; it records the settings it finds (drop --durability, or use --target local)",
            set.join(","),
            self.target.name()
        );
        anyhow::ensure!(
            self.durability.len() == 1 || !self.backends.contains(&BackendKind::Memory),
            "--durability {}: the memory backend has no servers to set it on; drop memory from --backends",
            self.durability.iter().map(|l| l.name()).collect::<Vec<_>>().join(",")
        );
        Ok(())
    }

    /// The nemesis asked for fits the backends, the shard and every phase's length.
    fn validate_faults(&self) -> anyhow::Result<()> {
        if self.backends.contains(&BackendKind::Memory) {
            anyhow::bail!("--nemesis acts on server nodes; the memory backend has none (drop it from --backends)");
        }
        if self.nemesis_interval < Duration::from_secs(2) {
            anyhow::bail!("--nemesis-interval must be at least 2s");
        }
        if self.shard.is_some() {
            anyhow::bail!("--shard runs load only: faults from several load hosts at once would not be one schedule (drop --nemesis, or run it unsharded)");
        }
        if self.nemesis.iter().any(|f| f.kind == crate::nemesis::FaultKind::Partition) {
            let why: Vec<String> = self.backends.iter().filter_map(|b| b.nothing_to_partition().map(|w| format!("{b}: {w}"))).collect();
            anyhow::ensure!(
                why.len() < self.backends.len(),
                "--nemesis partition would do nothing here ({}): use isolate to cut a node off from its clients, or add a consensus backend (etcd, zookeeper)",
                why.join("; ")
            );
        }
        // The power-loss layer is asked for before anything is created (its daemon, /dev/fuse,
        // root), not found missing after the run directory exists.
        if matches!(self.target, TargetChoice::Local) && self.nemesis.iter().any(|f| f.kind == crate::nemesis::FaultKind::PowerLoss) {
            crate::cluster::local::power::preflight().map_err(anyhow::Error::msg)?;
        }
        // A target that means nothing on every backend of the plan (a leader on Redlock, a
        // follower on one node) is refused; over several backends the nemesis hits a named
        // stand-in where it means nothing, and every label shows it.
        for f in &self.nemesis {
            let why: Vec<String> = self
                .backends
                .iter()
                .filter_map(|&b| crate::nemesis::meaningless(f.target, b, b.nodes()))
                .collect();
            anyhow::ensure!(
                why.is_empty() || why.len() < self.backends.len(),
                "--nemesis {f} means nothing here ({}): use {}:random (one node) or {}:minority",
                why.join("; "),
                f.kind.name(),
                f.kind.name()
            );
        }
        // Every fault asked for must fit once in every phase, each with the room its backend
        // needs after the heal (a soak carries the cycle on from turn to turn instead).
        if self.soak.is_none() {
            if let Some(advice) = self.duration_advice() {
                anyhow::bail!("{advice}");
            }
        }
        Ok(())
    }

    /// How `kind`'s phase `w` is laid out under this plan's faults: the nemesis interval and
    /// the room the backend needs after each heal (the TTL it grants and its election or
    /// restart time).
    pub fn fault_layout(&self, kind: BackendKind, w: &Workload) -> FaultLayout {
        FaultLayout { interval: self.nemesis_interval, room: kind.recovery_room(w.ttl) }
    }

    /// Whether phase `w` runs under the plan's faults (the default plan's performance rounds
    /// do not).
    pub fn faulted(&self, w: &Workload) -> bool {
        !self.nemesis.is_empty() && !w.no_faults
    }

    /// The shortest phase that holds every fault asked for on every backend, each with its
    /// room after the heal.
    pub fn shortest_fault_phase(&self, w: &Workload) -> Duration {
        self.backends.iter().map(|&k| self.fault_layout(k, w).shortest(self.nemesis.len())).max().unwrap_or_default()
    }

    /// The one piece of duration advice a fault plan gets: for the first phase too short, how
    /// many faults fit on the backend that needs the most room, and the shortest --duration
    /// that holds them all. None when every phase fits.
    pub fn duration_advice(&self) -> Option<String> {
        let n = self.nemesis.len();
        for w in self.phases.iter().filter(|w| self.faulted(w)) {
            let (kind, layout) = self.backends.iter().map(|&k| (k, self.fault_layout(k, w))).max_by_key(|(_, l)| l.shortest(n))?;
            let need = layout.shortest(n);
            if w.duration >= need {
                continue;
            }
            let ttl = kind.granted_ttl_estimate(w.ttl).map_or("no TTL".to_string(), |t| format!("its {} TTL", crate::util::fmt_duration(t)));
            return Some(format!(
                "workload {}: --duration {} leaves room for {} of the {} faults asked ({}) at one every {}, each followed by {} of quiet for {kind} to grant again ({ttl} and {} to elect or restart): use --duration {} or more, or a shorter --ttl",
                w.name,
                crate::util::fmt_duration(w.duration),
                layout.fits(w.duration).min(n),
                n,
                self.nemesis.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", "),
                crate::util::fmt_duration(self.nemesis_interval),
                crate::util::fmt_duration(layout.gap()),
                crate::util::fmt_duration(kind.recovery_allowance()),
                crate::util::fmt_duration(need)
            ));
        }
        None
    }

    /// A shard runs one phase of one backend on shared servers, its clients spread evenly.
    fn validate_shard(&self, s: &crate::shard::ShardSpec) -> anyhow::Result<()> {
        let what = format!("--shard {}/{}", s.index, s.count);
        anyhow::ensure!(
            self.backends.len() == 1 && self.phases.len() == 1 && self.repeat == 1,
            "{what}: a sharded run is one backend and one workload, once (--backends X --workload Y, no --repeat or client list), so that every shard runs the same phase"
        );
        anyhow::ensure!(!matches!(self.target, TargetChoice::Local), "{what}: shards must share the servers: use --target compose or --target external --endpoints FILE");
        anyhow::ensure!(self.backends[0] != BackendKind::Memory, "{what}: the memory backend lives in one process; shards cannot share it");
        let w = &self.phases[0];
        anyhow::ensure!(w.clients >= s.count as usize, "{what}: {} client(s) cannot be spread over {} shards (--clients at least {})", w.clients, s.count, s.count);
        anyhow::ensure!(w.ops.is_none(), "{what}: --ops counts one process's operations; give --duration instead");
        s.wait()?;
        anyhow::ensure!(
            self.resource.is_none() || s.start_at.is_some(),
            "{what} --resource: give --start-at (the same in every shard): it starts the shards together and names the resource cells they share"
        );
        Ok(())
    }

    /// The protected resource in its own server: on loopback (or the project's network).
    fn validate_resource(&self, r: &crate::resource_server::ResourceUrl) -> anyhow::Result<()> {
        let host = r.host();
        let near = crate::endpoints::is_loopback(&host) || (!host.contains('.') && !host.contains(':'));
        let allow = matches!(self.target, TargetChoice::External { allow_remote: true, .. });
        anyhow::ensure!(
            near || allow,
            "--resource {}: not on loopback nor a service name of the project's network; dlbench only talks to loopback unless you pass --allow-remote",
            r.shown()
        );
        anyhow::ensure!(!self.backends.contains(&BackendKind::Memory), "--resource: the memory backend is the in-process reference; run it with --resource local");
        Ok(())
    }

    /// `auto` keeps a history for the servers and not for the memory backend, whose
    /// hundreds of thousands of operations a second would make gigabytes of it.
    pub fn history_on(&self) -> bool {
        match self.history {
            HistoryMode::On => true,
            HistoryMode::Off => false,
            HistoryMode::Auto => !self.backends.contains(&BackendKind::Memory),
        }
    }

    /// What the target must offer for this plan's faults.
    pub fn target_options(&self) -> TargetOptions {
        let has = |k: FaultKind| self.nemesis.iter().any(|f| f.kind == k);
        TargetOptions {
            proxies: has(FaultKind::Partition) || has(FaultKind::Isolate) || has(FaultKind::Delay) || has(FaultKind::Failover),
            clock_shim: has(FaultKind::Clock),
            redis_replica: has(FaultKind::Failover),
            power_loss: has(FaultKind::PowerLoss),
            durability: self.durability.first().copied().unwrap_or_default(),
            password: None,
            connect_timeout: Some(self.timeouts.connect),
        }
    }
}
