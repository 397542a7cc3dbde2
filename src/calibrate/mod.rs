//! `dlbench calibrate`: how close the harness and each lock come to what the servers can do.
//!
//! On one local target, with the same number of connections throughout:
//! - **side by side**: dlbench's raw Redis `SET NX PX` rate against `redis-benchmark` running
//!   the same command, and dlbench's postgres lock cycle against `pgbench -f` running the
//!   lock's own statements; the ratio says how much the harness's client path costs;
//! - **primitive cost**: each backend's primitive rate (put, create+delete, SET, UPDATE)
//!   against its lock-cycle rate on uncontended keys: a lock cycle costs N primitives;
//! - **efficiency**: on one hot key every hand-off follows a critical path its protocol fixes
//!   (see [`prims`]): for a polling lock one round trip of its primitive (the release's
//!   request, a waiter's attempt landing at once, its reply), for a watching lock the watch
//!   event after the holder's delete plus the reads the waiter makes before it holds. Each
//!   term is measured unloaded at its best case, so one over their sum bounds the hand-off
//!   rate from above; the measured hot-key rate is reported as a fraction of that bound, with
//!   the terms, and the figures that explain the rest (the expected retry gap, the release
//!   under load) beside them.
//!
//! With `--peers` it runs [`peers`] instead: dlbench beside each recipe's official client.

pub mod measure;
pub mod peers;
pub mod prims;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connect::{self, Timeouts};
use crate::kind::BackendKind;
use crate::results::RunDir;
use crate::summary::Summary;
use crate::summary::calibration::{BoundTerm, Calibration, Efficiency, Handoffs, PrimitiveCost, SideBySide};
use crate::cluster::local::{bins, LocalTarget};
use crate::judgement::FencingMode;

pub struct CalibrateArgs {
    pub connections: usize,
    pub seconds: Duration,
    pub out: PathBuf,
    /// `--peers`: which official clients to run beside dlbench (`all`, or names); none
    /// runs the reference tools, primitive costs and bounds instead.
    pub peers: Option<String>,
    /// `--repeats`: interleaved runs per side for each peer row.
    pub repeats: usize,
}

/// What a calibration left: its exit code, its result set, and the figures. Rendering
/// (report, tables) is the caller's: the measurement does not depend on the renderers.
pub struct Calibrated {
    pub code: i32,
    pub run_dir: PathBuf,
    pub calibration: Calibration,
}

pub async fn command(a: CalibrateArgs, cancel: CancellationToken) -> anyhow::Result<Calibrated> {
    anyhow::ensure!(a.connections >= 1, "--connections must be at least 1");
    anyhow::ensure!(a.seconds >= Duration::from_secs(1), "--seconds must be at least 1s");
    if let Some(spec) = a.peers.clone() {
        return peers_command(a, &spec, cancel).await;
    }
    let kinds = BackendKind::REAL;
    bins::find(&kinds)?;
    for (tool, pkg) in [("redis-benchmark", "redis-tools")] {
        bins::which(tool).ok_or_else(|| anyhow::anyhow!("{tool} not found: install the Debian package {pkg}"))?;
    }
    bins::find_pg("pgbench").ok_or_else(|| anyhow::anyhow!("pgbench not found: install the Debian package postgresql"))?;
    let dir = RunDir::create(&a.out, "calibrate-")?;
    let mut summary = Summary::begin(&dir.id, "local", FencingMode::Off, Vec::new());
    let mut cal = Calibration { connections: a.connections, seconds: a.seconds.as_secs_f64(), ..Default::default() };
    summary.calibration = Some(cal.clone());
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: calibrate {} -> {}", dir.id, dir.path.display());
    let target = tokio::select! {
        t = LocalTarget::start(&dir.path, &kinds, Default::default()) => Arc::new(t?),
        _ = cancel.cancelled() => return Ok(Calibrated { code: 130, run_dir: dir.path.clone(), calibration: cal }),
    };
    summary.versions = target.versions().await;
    let eps = target.endpoints().clone();
    let (n, secs) = (a.connections, a.seconds);
    for kind in kinds {
        if cancel.is_cancelled() {
            break;
        }
        let r = tokio::select! {
            r = calibrate_one(kind, &eps, n, secs, &dir, &mut cal) => r,
            _ = cancel.cancelled() => break,
        };
        if let Err(e) = r {
            eprintln!("dlbench: calibrate {kind}: {e:#}");
        }
        summary.calibration = Some(cal.clone());
        dir.write_json("summary.json", &summary)?;
    }
    drop(target);
    summary.finish(!cancel.is_cancelled());
    dir.write_json("summary.json", &summary)?;
    Ok(Calibrated { code: if summary.complete { 0 } else { 130 }, run_dir: dir.path.clone(), calibration: cal })
}

/// `calibrate --peers`: for each selected backend x workload, `repeats` rounds of dlbench's
/// run then each of the backend's peers, on one local target.
async fn peers_command(a: CalibrateArgs, spec: &str, cancel: CancellationToken) -> anyhow::Result<Calibrated> {
    anyhow::ensure!(a.repeats >= 1, "--repeats must be at least 1");
    let selected = peers::select(spec)?;
    let home = peers::home();
    let programs = selected.iter().map(|p| peers::program(&home, p)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut kinds: Vec<BackendKind> = Vec::new();
    for p in &selected {
        if !kinds.contains(&p.backend) {
            kinds.push(p.backend);
        }
    }
    bins::find(&kinds)?;
    let dir = RunDir::create(&a.out, "calibrate-")?;
    let mut summary = Summary::begin(&dir.id, "local", FencingMode::Off, Vec::new());
    let mut cal = Calibration { connections: a.connections, seconds: a.seconds.as_secs_f64(), repeats: Some(a.repeats), ..Default::default() };
    summary.calibration = Some(cal.clone());
    dir.write_json("summary.json", &summary)?;
    eprintln!("dlbench: calibrate --peers {} -> {}", dir.id, dir.path.display());
    let target = tokio::select! {
        t = LocalTarget::start(&dir.path, &kinds, Default::default()) => Arc::new(t?),
        _ = cancel.cancelled() => return Ok(Calibrated { code: 130, run_dir: dir.path.clone(), calibration: cal }),
    };
    summary.versions = target.versions().await;
    let eps = target.endpoints().clone();
    let logs = dir.path.join("peers");
    std::fs::create_dir_all(&logs)?;
    // Rows a selected peer could not produce: the calibration is then incomplete (exit 1).
    let mut missing = 0;
    'kinds: for kind in kinds {
        let backend = connect::connect(kind, &eps, Timeouts::default(), None).await?;
        let endpoints = eps.get(kind).map(|s| s.endpoints.clone()).unwrap_or_default();
        let mine: Vec<(&peers::Peer, &PathBuf)> = selected.iter().zip(&programs).filter(|(p, _)| p.backend == kind).map(|(p, b)| (*p, b)).collect();
        for wname in peers::WORKLOADS {
            let mut runs: Vec<Vec<((f64, Option<f64>), peers::PeerRun)>> = vec![Vec::new(); mine.len()];
            for rep in 0..a.repeats {
                if cancel.is_cancelled() {
                    break 'kinds;
                }
                let w = peers::workload(wname, a.connections, a.seconds, rep as u64 + 1)?;
                let tag = format!("cal-{kind}-{wname}-{rep}");
                eprintln!("dlbench: calibrate {kind} {wname} #{}: dlbench", rep + 1);
                let ours = match peers::dlbench_side(backend.clone(), &w, &format!("{tag}-dlbench"), &cancel).await {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("dlbench: calibrate {kind} {wname}: dlbench: {e:#}");
                        continue;
                    }
                };
                for (i, (peer, program)) in mine.iter().enumerate() {
                    eprintln!("dlbench: calibrate {kind} {wname} #{}: {}", rep + 1, peer.name);
                    let prefix = format!("{tag}-{}", peer.name);
                    let job = peers::PeerJob { program, endpoints: &endpoints, workload: &w, prefix: &prefix, log: logs.join(format!("{prefix}.log")) };
                    match peers::run_peer(job, &cancel).await {
                        Ok(r) => runs[i].push((ours, r)),
                        Err(e) => eprintln!("dlbench: calibrate {kind} {wname}: {}: {e:#}", peer.name),
                    }
                }
            }
            for ((peer, _), r) in mine.iter().zip(runs) {
                let w = peers::workload(wname, a.connections, a.seconds, 1)?;
                match r.first().and_then(|first| peers::comparison(peer, &w, first.1.client.clone(), &r)) {
                    Some(row) => cal.peers.push(row),
                    None => {
                        missing += 1;
                        eprintln!("dlbench: calibrate {kind} {wname}: no ratio for {} (no run acquired anything)", peer.name);
                    }
                }
            }
            summary.calibration = Some(cal.clone());
            dir.write_json("summary.json", &summary)?;
        }
    }
    drop(target);
    summary.finish(!cancel.is_cancelled());
    dir.write_json("summary.json", &summary)?;
    let code = if !summary.complete { 130 } else if missing > 0 { 1 } else { 0 };
    Ok(Calibrated { code, run_dir: dir.path.clone(), calibration: cal })
}

async fn calibrate_one(kind: BackendKind, eps: &crate::endpoints::Endpoints, n: usize, secs: Duration, dir: &RunDir, cal: &mut Calibration) -> anyhow::Result<()> {
    eprintln!("dlbench: calibrate {kind}: primitives");
    let p = match kind {
        BackendKind::Redis => prims::redis(eps, n, secs).await?,
        BackendKind::Redlock => prims::redlock(eps, n, secs).await?,
        BackendKind::Postgres => prims::postgres(eps, n, secs, None).await?,
        BackendKind::Etcd => prims::etcd(eps, n, secs).await?,
        BackendKind::Zookeeper => prims::zookeeper(eps, n, secs).await?,
        // Calibration covers the five server families (BackendKind::REAL).
        _ => return Ok(()),
    };
    let backend = connect::connect(kind, eps, Timeouts::default(), None).await?;
    eprintln!("dlbench: calibrate {kind}: lock cycles");
    let cycles = measure::lock_cycles(backend.clone(), n, secs, true, &format!("cal-{kind}")).await?.per_sec;
    let hot = measure::lock_cycles(backend, n, secs, false, &format!("cal-{kind}-hot")).await?;
    let name = kind.name().to_string();
    cal.primitive_cost.push(PrimitiveCost {
        backend: name.clone(),
        primitive: p.name.into(),
        primitive_per_sec: p.per_sec,
        lock_cycle_per_sec: cycles,
        primitives_per_cycle: p.per_sec / cycles,
    });
    let mut beside = p.beside;
    beside.push(BoundTerm::new("release under the hot-key load (median)", 1, hot.release_us));
    let mut e = Efficiency::new(&name, p.path, beside, hot.per_sec, p.note);
    e.handoffs = Handoffs::of(hot.cycles);
    cal.efficiency.push(e);
    match kind {
        BackendKind::Redis => {
            let ep = eps.get(kind).unwrap().endpoints[0].clone();
            eprintln!("dlbench: calibrate redis: redis-benchmark");
            let ours = p.per_sec;
            // As many requests as dlbench managed in the same time, so both run about as long.
            let theirs = measure::redis_benchmark(&ep, n, (ours * secs.as_secs_f64()).max(10_000.0) as u64).await?;
            cal.side_by_side.push(SideBySide {
                backend: name,
                work: "SET key v NX PX 10000, random keys".into(),
                dlbench_per_sec: ours,
                reference: "redis-benchmark".into(),
                reference_per_sec: theirs,
                ratio: ours / theirs,
            });
        }
        BackendKind::Postgres => {
            let ep = eps.get(kind).unwrap().endpoints[0].clone();
            let script = dir.path.join("pgbench-lock-cycle.sql");
            std::fs::write(&script, measure::pgbench_script())?;
            eprintln!("dlbench: calibrate postgres: pgbench -f {}", script.display());
            let theirs = measure::pgbench(&ep, n, secs, &script, None).await?;
            cal.side_by_side.push(SideBySide {
                backend: name,
                work: "lock cycle: the backend's INSERT .. ON CONFLICT acquire + UPDATE release, own key per client".into(),
                dlbench_per_sec: cycles,
                reference: "pgbench -M prepared -f".into(),
                reference_per_sec: theirs,
                ratio: cycles / theirs,
            });
        }
        _ => {}
    }
    Ok(())
}
