//! Cost per acquisition: what an operator pays for a lock, measured over a phase's window.
//!
//! At the measured window's start and end the driver takes a [`Snapshot`]:
//! - the CPU time (utime + stime, from `/proc/PID/stat`, in clock ticks of
//!   `sysconf(_SC_CLK_TCK)`) of every process of the backend's server process groups, plus the
//!   group leader's reaped children (`cutime + cstime`: PostgreSQL forks a process per
//!   connection) — only on the local target, where dlbench started the servers and knows
//!   their PIDs;
//! - dlbench's own CPU time (`/proc/self/stat`), on every target, so the two can be compared;
//! - one cheap counter the server reports itself, where it has one: etcd's WAL fsyncs
//!   (`etcd_disk_wal_fsync_duration_seconds_count` from `/metrics` on the client port),
//!   PostgreSQL's WAL bytes and syncs (`pg_stat_wal`), Redis's bytes on the wire
//!   (`INFO stats`: `total_net_input_bytes + total_net_output_bytes`, summed over the nodes).
//!
//! The deltas divided by the window's successful acquisitions are the figures in
//! `summary.json` (see `WorkloadSummary::server_cpu_us_per_acq` and its neighbours).
//! The server counters are read before the CPU at the start and after it at the end, so
//! the probe's own queries stay outside the CPU window.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::kind::BackendKind;

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// dlbench's CPU time, µs.
    pub self_cpu_us: Option<f64>,
    /// The backend's server processes' CPU time, µs (None: not measured on this target).
    pub server_cpu_us: Option<f64>,
    /// Counters the server reports, by name (cumulative).
    pub counters: BTreeMap<String, f64>,
}

/// Takes a snapshot; `true` for the window's start (counters first, then CPU), `false` for
/// its end (CPU first, then counters).
pub type CostProbe = Arc<dyn Fn(bool) -> BoxFuture<'static, Snapshot> + Send + Sync>;

/// Per-acquisition figures from two snapshots and the acquisitions between them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerAcquisition {
    pub server_cpu_us: Option<f64>,
    pub dlbench_cpu_us: Option<f64>,
    pub counters: BTreeMap<String, f64>,
}

pub fn per_acquisition(start: &Snapshot, end: &Snapshot, acquired: u64) -> PerAcquisition {
    if acquired == 0 {
        return PerAcquisition::default();
    }
    let n = acquired as f64;
    // Four significant digits, not three decimals: 0.4 WAL bytes per thousand acquisitions
    // is 0.0004, not 0.000.
    let round = |x: f64| {
        if x == 0.0 || !x.is_finite() {
            return x;
        }
        let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
        (x * scale).round() / scale
    };
    let delta = |a: Option<f64>, b: Option<f64>| Some(round((b? - a?).max(0.0) / n));
    PerAcquisition {
        server_cpu_us: delta(start.server_cpu_us, end.server_cpu_us),
        dlbench_cpu_us: delta(start.self_cpu_us, end.self_cpu_us),
        counters: end
            .counters
            .iter()
            // A counter that went down was reset (a server restarted in the window, as
            // PostgreSQL's pg_stat_wal is after a crash): no figure, rather than a 0.
            .filter_map(|(k, v)| start.counters.get(k).filter(|s| v >= *s).map(|s| (k.clone(), round((v - s) / n))))
            .collect(),
    }
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// (ppid, pgrp, utime + stime, cutime + cstime) of one process, in ticks. After the command
/// name (which may hold spaces) the fields are: state ppid pgrp session tty tpgid flags
/// minflt cminflt majflt cmajflt utime stime cutime cstime.
fn stat(pid: &str) -> Option<(i32, i32, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// dlbench's own CPU time, µs.
pub fn self_cpu_us() -> Option<f64> {
    stat("self").map(|(_, _, own, _)| own as f64 * 1e6 / clk_tck())
}

/// The CPU time of the servers led by `leaders`, µs: every process in their process groups
/// and every descendant (a PostgreSQL backend calls `setsid`, leaving the postmaster's
/// group), each with its reaped children (`cutime + cstime`: a connection's process that
/// ended in the window is counted through its parent).
pub fn groups_cpu_us(leaders: &[i32]) -> Option<f64> {
    if leaders.is_empty() {
        return None;
    }
    let mut procs: Vec<(i32, i32, i32, u64)> = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Some((ppid, pgrp, own, children)) = stat(pid) else { continue };
        procs.push((pid.parse().ok()?, ppid, pgrp, own + children));
    }
    let mut mine: std::collections::HashSet<i32> =
        procs.iter().filter(|p| leaders.contains(&p.2) || leaders.contains(&p.0)).map(|p| p.0).collect();
    loop {
        let more: Vec<i32> = procs.iter().filter(|p| !mine.contains(&p.0) && mine.contains(&p.1)).map(|p| p.0).collect();
        if more.is_empty() {
            break;
        }
        mine.extend(more);
    }
    let ticks: u64 = procs.iter().filter(|p| mine.contains(&p.0)).map(|p| p.3).sum();
    Some(ticks as f64 * 1e6 / clk_tck())
}

/// What the probe of one backend on the local target needs.
#[derive(Debug, Clone)]
pub struct LocalServers {
    pub kind: BackendKind,
    /// The servers' own client ports (not the proxies').
    pub addrs: Vec<String>,
    pub password: Option<String>,
}

/// The server counters of one backend (empty when it reports none, or did not answer).
pub async fn counters(s: &LocalServers) -> BTreeMap<String, f64> {
    let within = Duration::from_secs(2);
    let mut out = BTreeMap::new();
    match s.kind.server() {
        BackendKind::Etcd => {
            let mut sum = 0.0;
            for a in &s.addrs {
                match tokio::time::timeout(within, http_get(a, "/metrics")).await {
                    Ok(Ok(body)) => match prometheus_value(&body, "etcd_disk_wal_fsync_duration_seconds_count") {
                        Some(v) => sum += v,
                        None => return out,
                    },
                    _ => return out,
                }
            }
            out.insert("wal_fsyncs".into(), sum);
        }
        BackendKind::Redis | BackendKind::Redlock => {
            let mut sum = 0.0;
            for a in &s.addrs {
                let Ok(info) = crate::cluster::local::redis_command(a, "INFO stats", s.password.as_deref(), within).await else { return out };
                let (Some(i), Some(o)) = (info_value(&info, "total_net_input_bytes"), info_value(&info, "total_net_output_bytes")) else { return out };
                sum += i + o;
            }
            out.insert("net_bytes".into(), sum);
        }
        BackendKind::Postgres => {
            let Some(a) = s.addrs.first() else { return out };
            if let Ok(Ok((bytes, syncs))) = tokio::time::timeout(within, pg_wal(a, s.password.as_deref())).await {
                out.insert("wal_bytes".into(), bytes);
                out.insert("wal_syncs".into(), syncs);
            }
        }
        _ => {}
    }
    out
}

async fn pg_wal(ep: &str, password: Option<&str>) -> Result<(f64, f64), sqlx::Error> {
    use sqlx::{ConnectOptions, Row};
    let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "5432"));
    let mut o = sqlx::postgres::PgConnectOptions::new().host(host).port(port.parse().unwrap_or(5432)).username("postgres").database("postgres");
    if let Some(pw) = password {
        o = o.password(pw);
    }
    let mut c = o.connect().await?;
    let row = sqlx::query("SELECT wal_bytes::float8, wal_sync::float8 FROM pg_stat_wal").fetch_one(&mut c).await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// A plain HTTP/1.0 GET on loopback; the body.
async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).to_string();
    Ok(text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or(text))
}

/// The sum of a Prometheus metric's samples (over its labels).
pub fn prometheus_value(body: &str, name: &str) -> Option<f64> {
    let vals: Vec<f64> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(' ') || r.starts_with('{')))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!vals.is_empty()).then(|| vals.iter().sum())
}

/// One field of a Redis `INFO` reply.
pub fn info_value(info: &str, field: &str) -> Option<f64> {
    info.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().parse().ok())
}

/// A probe: server CPU and counters when `servers` (and its process group leaders, asked
/// each time: a restarted node has a new PID) are known, dlbench's CPU always.
pub fn probe(servers: Option<(LocalServers, Arc<dyn Fn() -> Vec<i32> + Send + Sync>)>) -> CostProbe {
    Arc::new(move |start: bool| {
        let servers = servers.clone();
        Box::pin(async move {
            let cpu = |s: &Option<(LocalServers, Arc<dyn Fn() -> Vec<i32> + Send + Sync>)>| {
                (self_cpu_us(), s.as_ref().and_then(|(_, pids)| groups_cpu_us(&pids())))
            };
            let mut snap = Snapshot::default();
            if start {
                if let Some((s, _)) = &servers {
                    snap.counters = counters(s).await;
                }
                (snap.self_cpu_us, snap.server_cpu_us) = cpu(&servers);
            } else {
                (snap.self_cpu_us, snap.server_cpu_us) = cpu(&servers);
                if let Some((s, _)) = &servers {
                    snap.counters = counters(s).await;
                }
            }
            snap
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_per_acquisition() {
        let a = Snapshot { self_cpu_us: Some(1000.0), server_cpu_us: Some(5000.0), counters: [("wal_fsyncs".to_string(), 10.0)].into() };
        let b = Snapshot { self_cpu_us: Some(3000.0), server_cpu_us: Some(9000.0), counters: [("wal_fsyncs".to_string(), 110.0)].into() };
        let p = per_acquisition(&a, &b, 100);
        assert_eq!(p.server_cpu_us, Some(40.0));
        assert_eq!(p.dlbench_cpu_us, Some(20.0));
        assert_eq!(p.counters["wal_fsyncs"], 1.0);
        // A small figure keeps its digits: 4 bytes over 10,000 acquisitions.
        let a = Snapshot { counters: [("wal_bytes".to_string(), 1000.0)].into(), ..Snapshot::default() };
        let b = Snapshot { counters: [("wal_bytes".to_string(), 1004.0)].into(), ..Snapshot::default() };
        assert_eq!(per_acquisition(&a, &b, 10_000).counters["wal_bytes"], 0.0004);
        assert_eq!(per_acquisition(&a, &b, 3).counters["wal_bytes"], 1.333);
        // Reset by a restart in the window (end below start): not measured, never 0.
        assert_eq!(per_acquisition(&b, &a, 3).counters.get("wal_bytes"), None);
        let none = Snapshot { server_cpu_us: None, ..a.clone() };
        assert_eq!(per_acquisition(&none, &b, 100).server_cpu_us, None, "not measured stays absent, never 0");
        assert_eq!(per_acquisition(&a, &b, 0), PerAcquisition::default());
    }

    #[test]
    fn server_counters_parse() {
        let m = "# HELP x\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 3\netcd_disk_wal_fsync_duration_seconds_count 42\n";
        assert_eq!(prometheus_value(m, "etcd_disk_wal_fsync_duration_seconds_count"), Some(42.0));
        assert_eq!(prometheus_value(m, "etcd_missing"), None);
        let info = "# Stats\r\ntotal_net_input_bytes:1234\r\ntotal_net_output_bytes:99\r\n";
        assert_eq!(info_value(info, "total_net_input_bytes"), Some(1234.0));
        assert_eq!(info_value(info, "total_net_output_bytes"), Some(99.0));
    }

    #[test]
    fn this_process_uses_cpu() {
        let a = self_cpu_us().unwrap();
        // Spin until the counter moves (one clock tick), within a bound.
        let mut x = 0u64;
        for round in 0..10_000u64 {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i ^ round));
            }
            if self_cpu_us().unwrap() > a {
                break;
            }
        }
        let b = self_cpu_us().unwrap();
        assert!(b > a, "{a} -> {b}");
        assert!(groups_cpu_us(&[]).is_none());
        // A child that left our process group (as a PostgreSQL backend does) is still ours.
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh").args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]).process_group(0).spawn().unwrap();
        child.wait().unwrap();
        let me = std::process::id() as i32;
        let with = groups_cpu_us(&[me]).unwrap();
        let own = self_cpu_us().unwrap();
        assert!(with > own, "the reaped child's CPU counts through its parent: {with} <= {own}");
    }

    /// A child that leaves its parent's process group (as PostgreSQL's backends do) still
    /// counts; a process outside the tree does not.
    #[test]
    fn a_server_child_outside_its_group_still_counts() {
        use std::os::unix::process::CommandExt;
        // The parent sleeps; only its child, in a session of its own, does work.
        let mut parent = std::process::Command::new("sh")
            .args(["-c", "setsid -w sh -c 'i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; exec sleep 60' & sleep 60"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = parent.id() as i32;
        let child_pgrp_differs = || {
            std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let f: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
                f.get(1) == Some(&pid.to_string().as_str()) && f.get(2) != Some(&pid.to_string().as_str())
            })
        };
        // Bounded waits, not timings: until the child has left the group and done its work.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut cpu = 0.0;
        let mut left = false;
        while std::time::Instant::now() < deadline && !(left && cpu >= 50.0) {
            left = left || child_pgrp_differs();
            cpu = groups_cpu_us(&[pid]).unwrap() / 1000.0;
            std::thread::sleep(Duration::from_millis(100));
        }
        let none = groups_cpu_us(&[i32::MAX - 1]).unwrap();
        // Stop what we started, by PID: the child in its own session, then the group.
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let f: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
            if f.get(1) == Some(&pid.to_string().as_str()) {
                if let Ok(child) = e.file_name().to_string_lossy().parse::<i32>() {
                    unsafe { libc::kill(child, libc::SIGKILL) };
                }
            }
        }
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = parent.kill();
        let _ = parent.wait();
        assert!(left, "the child left its parent's process group");
        assert!(cpu >= 50.0, "the work of a child outside the group counts: {cpu} ms");
        assert_eq!(none, 0.0, "nothing belongs to no server");
    }
}
