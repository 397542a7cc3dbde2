//! The target once it is up (or found): its endpoints, its nemesis, its versions.

use std::sync::Arc;
use std::time::Duration;

use super::plan::{RunPlan, TargetChoice};
use crate::cluster::compose::ComposeTarget;
use crate::cluster::external::ExternalTarget;
use crate::cluster::local::LocalTarget;
use crate::endpoints::Endpoints;
use crate::kind::{names, BackendKind};
use crate::nemesis::Faults;
use crate::results::RunDir;

/// A target that is up.
pub(super) enum Running {
    Local(Arc<LocalTarget>),
    Compose(Arc<ComposeTarget>),
    External(Arc<ExternalTarget>),
}

impl Running {
    pub(super) fn endpoints(&self) -> Endpoints {
        match self {
            Running::Local(t) => t.endpoints().clone(),
            Running::Compose(t) => t.endpoints().clone(),
            Running::External(t) => t.endpoints().clone(),
        }
    }

    pub(super) fn faults(&self) -> Arc<dyn Faults> {
        match self {
            Running::Local(t) => t.clone(),
            Running::Compose(t) => t.clone(),
            Running::External(t) => t.clone(),
        }
    }

    /// What the layer between bench and servers costs here (`cluster::medium`); `None` on
    /// an external target, whose servers dlbench neither runs nor can look inside.
    pub(super) async fn target_costs(&self, real: &[BackendKind], out: &std::path::Path) -> Option<crate::summary::medium::TargetCosts> {
        use crate::cluster::medium;
        match self {
            Running::Local(t) => Some(medium::measure(medium::local_plan(t, real), None).await),
            Running::Compose(t) => Some(medium::measure(medium::compose_plan(t, real, out.to_path_buf()).await, Some(&**t)).await),
            Running::External(_) => None,
        }
    }

    /// The durability settings design `kind`'s servers run with, read back from them
    /// (compose, external); the local target's are the level's (`durability::settings`).
    pub(super) async fn durability_found(&self, kind: BackendKind, within: Duration) -> crate::durability::Recorded {
        use crate::cluster::found::durability;
        match self {
            Running::Local(t) => durability(kind, &t.direct_endpoints(), t.password(), within).await,
            Running::Compose(t) => durability(kind, t.endpoints(), None, within).await,
            Running::External(t) => durability(kind, t.endpoints(), t.password(kind), within).await,
        }
    }

    pub(super) async fn versions(&self, within: Duration) -> Result<std::collections::BTreeMap<String, String>, String> {
        match self {
            Running::Local(t) => Ok(t.versions().await),
            Running::Compose(t) => crate::cluster::probe::versions(t.endpoints(), None, within).await,
            Running::External(t) => t.versions(within).await,
        }
    }
}

/// Bring the plan's target up (or find it), for the real backends in `real`.
/// The local target needs the run directory (its servers' data live there); the others are
/// found, and their files and credentials checked, before any directory is created.
/// `level`: this pass's durability when the run has several (else the plan's one level).
pub(super) async fn bring_up(plan: &RunPlan, dir: Option<&RunDir>, real: &[BackendKind], level: Option<crate::durability::Durability>) -> anyhow::Result<Running> {
    Ok(match &plan.target {
        TargetChoice::Local => {
            let dir = dir.ok_or_else(|| anyhow::anyhow!("the local target needs its run directory"))?;
            eprintln!("dlbench: starting local servers for {}", names(real));
            let mut options = plan.target_options();
            options.durability = level.unwrap_or(options.durability);
            Running::Local(Arc::new(LocalTarget::start(&dir.path, real, options).await?))
        }
        TargetChoice::Compose { project } => {
            let t = ComposeTarget::discover(project, real, plan.timeouts.connect).await?;
            let via = if t.inside() { "by name, inside its network" } else { "through its published ports" };
            eprintln!("dlbench: using compose project {} for {} ({via})", t.project(), names(real));
            Running::Compose(Arc::new(t))
        }
        TargetChoice::External { endpoints, allow_remote } => {
            let e = Endpoints::load(endpoints)?;
            let remote = e.non_loopback();
            if !remote.is_empty() && !allow_remote {
                anyhow::bail!(
                    "{} names endpoints off this machine ({}); dlbench only talks to loopback unless you pass --allow-remote",
                    endpoints.display(),
                    remote.join(", ")
                );
            }
            Running::External(Arc::new(ExternalTarget::new(e, real, plan.timeouts)?))
        }
    })
}

/// Every endpoint answers a TCP connection within the connect timeout: an unreachable
/// server is named at once instead of surfacing as a hang later.
pub(super) async fn reachable(e: &Endpoints, kinds: &[BackendKind], within: Duration) -> anyhow::Result<()> {
    for &k in kinds {
        for ep in e.get(k).map(|s| s.endpoints.clone()).unwrap_or_default() {
            match tokio::time::timeout(within, tokio::net::TcpStream::connect(ep.as_str())).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => anyhow::bail!("[{k}] {ep} is unreachable: {err}"),
                Err(_) => anyhow::bail!("[{k}] {ep} did not accept a connection within {}", crate::util::fmt_duration(within)),
            }
        }
    }
    Ok(())
}
