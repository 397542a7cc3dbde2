//! One script's stage: its key, its protected resource and its recorder, its own history
//! segment (a choreography: `Meta::choreographed`), the faults it applies by hand with their
//! effects, and its notes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, Lease, LockError, Resource, ResourceStats};

use super::actor::Actor;
use crate::cluster::local::{LocalTarget, Node};
use crate::connect::{self, Timeouts};
use crate::faultlog::{Effect, Mark, NemesisEvent, Side};
use crate::history::{HistoryWriter, Meta, Record};
use crate::kind::BackendKind;
use crate::nemesis::Nemesis;
use crate::stats::Recorder;

/// One script's stage: its key and resource, its own history segment (whose times count
/// from the resource's epoch), the faults it applies by hand, and its notes.
pub struct Stage<'a> {
    pub ctx: &'a Ctx,
    pub key: String,
    pub resource: Resource,
    pub recorder: Arc<Recorder>,
    notes: std::sync::Mutex<Vec<String>>,
    events: std::sync::Mutex<Vec<NemesisEvent>>,
    started: Instant,
    /// The TTL the script's locks ask for (NATS's bucket, for a nemesis's leader lookup).
    ttl: Duration,
}

impl<'a> Stage<'a> {
    /// Open a history segment `name` for a script with `actors` clients on one key.
    pub async fn open(ctx: &'a Ctx, name: &str, ttl: Duration, actors: usize) -> Stage<'a> {
        let key = ctx.key(name);
        let granted_ttl = ctx.backend.granted_ttl(ttl).await.ok();
        ctx.history.sync().await;
        ctx.history.record(&Record::Meta(Meta {
            backend: ctx.kind.name().into(),
            workload: name.into(),
            keys: vec![key.clone()],
            ttl_ms: ttl.as_millis() as u64,
            fencing_tokens: ctx.backend.capabilities().fencing,
            started_at: crate::results::now_rfc3339(),
            split_votes: ctx.backend.capabilities().consistency == dlbench_core::Consistency::Ap,
            granted_ttl,
            choreographed: true,
            recovery_allowance_ms: Some(ctx.kind.recovery_allowance().as_millis() as u64),
        }));
        Stage {
            ctx,
            key,
            resource: Resource::new(1),
            recorder: Arc::new(Recorder::new(actors)),
            notes: Default::default(),
            events: Default::default(),
            started: Instant::now(),
            ttl,
        }
    }

    pub fn epoch(&self) -> Instant {
        self.resource.epoch()
    }

    /// Process `p` of this script, a client of `backend`.
    pub async fn actor(&self, p: u64, name: &'static str, backend: &Arc<dyn Backend>) -> Result<Actor, LockError> {
        Actor::new(p, name, backend, &self.ctx.history, &self.resource, &self.recorder).await
    }

    /// Record a fault the script applies by hand (not through the nemesis).
    pub fn event(&self, f: &str, mark: Mark, targets: &[&str]) {
        self.event_with(f, mark, targets, "");
    }

    /// A fault applied by hand, with its evidence (`detail`, "checked: ..." as the nemesis
    /// writes it): without one it is unchecked. The segment is a choreography, so its faults
    /// are judged by the scenario's expectation, never counted as a test of the servers.
    pub fn event_with(&self, f: &str, mark: Mark, targets: &[&str], detail: &str) {
        let ns = self.epoch().elapsed().as_nanos() as u64;
        let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        let effect = if detail.is_empty() { Effect::unchecked("applied by the scenario's script") } else { Effect::from_detail(detail) };
        let side = Some(Side::of_name(f));
        self.ctx.history.record(&Record::Nemesis {
            f: f.into(),
            phase: mark,
            targets: targets.clone(),
            ns,
            detail: detail.into(),
            effect: Some(effect.clone()),
            side,
            stand_in: None,
        });
        self.events.lock().unwrap().push(NemesisEvent {
            backend: String::new(),
            workload: String::new(),
            f: f.into(),
            phase: mark,
            targets,
            at_ms: ns / 1_000_000,
            detail: detail.into(),
            effect: Some(effect),
            side,
            stand_in: None,
        });
    }

    /// A whole, undisturbed critical section by `who` holding `lease`, then its release.
    pub async fn use_and_release(&self, who: &Actor, lease: Lease) {
        let mut s = self.resource.enter_lease(0, &lease);
        s.read();
        s.write_incremented();
        s.exit();
        who.section(s.record());
        let _ = who.release(lease).await;
    }

    /// A nemesis that records into this stage's segment.
    pub fn nemesis(&self, name: &str) -> Nemesis {
        Nemesis::new(self.ctx.target.clone(), self.ctx.kind, self.ttl, name, self.epoch(), Some(self.ctx.history.clone()))
    }

    pub fn note(&self, s: impl Into<String>) {
        self.notes.lock().unwrap().push(s.into());
    }

    /// Events a nemesis recorded into this stage's segment, for the observation.
    pub fn extend_events(&self, events: Vec<NemesisEvent>) {
        self.events.lock().unwrap().extend(events);
    }

    pub fn finish(self) -> Observed {
        Observed {
            resource: self.resource.stats(),
            recorder: self.recorder,
            elapsed: self.started.elapsed(),
            expired_waiter_acquired: None,
            leftovers: None,
            notes: self.notes.into_inner().unwrap(),
            nemesis: self.events.into_inner().unwrap(),
            phase: crate::history::phase_id(self.ctx.kind.name(), &self.key),
            power: None,
            power_expected: None,
        }
    }
}

/// What a script measured.
#[derive(Clone)]
pub struct Observed {
    pub resource: ResourceStats,
    pub recorder: Arc<Recorder>,
    pub elapsed: Duration,
    /// S7: whether the waiter whose session expired was ever told "acquired".
    pub expired_waiter_acquired: Option<bool>,
    /// S7: the claims (keys, nodes, rows) the servers still held for the lock at the end;
    /// `Err` when they could not be read.
    pub leftovers: Option<Result<Vec<String>, String>>,
    pub notes: Vec<String>,
    pub nemesis: Vec<NemesisEvent>,
    /// The history segment the stage opened ([`crate::history::phase_id`]); empty where
    /// the observation has none of its own.
    pub phase: String,
    /// P1 / J2: the power loss under a holder.
    pub power: Option<crate::judgement::PowerSeen>,
    /// P1 / J2: what the backend's setting is expected to do.
    pub power_expected: Option<crate::judgement::Expected>,
}

impl Observed {
    /// An observation made of resource counts alone (the nemesis entries, and tests).
    pub fn of(resource: ResourceStats, elapsed: Duration, nemesis: Vec<NemesisEvent>) -> Self {
        Observed {
            resource,
            recorder: Arc::new(Recorder::new(1)),
            elapsed,
            expired_waiter_acquired: None,
            leftovers: None,
            notes: Vec::new(),
            phase: String::new(),
            nemesis,
            power: None,
            power_expected: None,
        }
    }
}

/// Shared by the scripts of one scenario on one backend.
pub struct Ctx {
    pub target: Arc<LocalTarget>,
    pub kind: BackendKind,
    pub backend: Arc<dyn Backend>,
    pub history: HistoryWriter,
    pub run_id: String,
    pub groups: Arc<AtomicU32>,
}

/// The TTL the choreographed scenarios use: short, so expiry comes soon.
pub const TTL: Duration = Duration::from_secs(3);

impl Ctx {
    /// A backend whose clients go through their own proxies (so a fault can hit them alone).
    pub async fn dedicated(&self) -> anyhow::Result<(u32, Arc<dyn Backend>)> {
        let g = self.groups.fetch_add(1, Ordering::Relaxed) + 1;
        let eps = self.target.client_endpoints(g)?;
        let b = connect::connect(self.kind, &eps, Timeouts::default(), None).await?;
        Ok((g, b))
    }

    pub fn key(&self, name: &str) -> String {
        format!("dlbench-{}-{name}-{}", self.run_id, self.kind)
    }

    pub(super) fn nodes(&self) -> Vec<Arc<Node>> {
        self.target.nodes_of(self.kind).into_iter().filter(|n| !n.replica).collect()
    }

    pub(super) fn net(&self) -> anyhow::Result<&Arc<crate::nemesis::net::Net>> {
        self.target.net().ok_or_else(|| anyhow::anyhow!("scenarios need the target's proxies"))
    }
}

pub(super) fn opts(ttl: Duration, wait: Duration) -> AcquireOptions {
    AcquireOptions::default().with_ttl(ttl).with_wait(wait).with_retry_interval(Duration::from_millis(20))
}

