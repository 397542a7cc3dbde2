//! `dlbench calibrate --peers`: dlbench beside the official client of each recipe.
//!
//! Each peer is a small program in the repository's `peers/` (one per client) that runs the
//! workload dlbench runs: N clients, each its own connection and session, the same key choice
//! (one hot key, or 64 uniform keys), hold 0, acquire + release for warm-up + duration, and
//! prints one JSON line. `scripts/setup.sh --peers` installs the clients and builds the
//! programs into `peers/build/bin/`. Here both sides run interleaved on the same servers
//! (dlbench, peer, dlbench, peer, ...), so drift on a shared machine falls on both.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlbench_core::Backend;
use tokio_util::sync::CancellationToken;

use crate::cluster::local::process::{Process, Spec};
use crate::kind::BackendKind;
use crate::summary::calibration::PeerComparison;
use crate::workload::Workload;

/// One official client and the program that drives it.
#[derive(Debug)]
pub struct Peer {
    pub name: &'static str,
    pub backend: BackendKind,
    /// Under `peers/build/bin/`, written by `scripts/setup.sh --peers`.
    pub program: &'static str,
    pub usage: &'static str,
}

/// Every peer, in the order calibrate runs them.
pub const PEERS: &[Peer] = &[
    Peer {
        name: "redis-py",
        backend: BackendKind::Redis,
        program: "redis-py-lock",
        usage: "a process per client, Redis.lock(key, timeout=10, sleep=0.002, blocking_timeout=5): polls every 2 ms, dlbench's Redis retry interval (the library default is 0.1 s)",
    },
    Peer {
        name: "pottery",
        backend: BackendKind::Redlock,
        program: "pottery-redlock",
        usage: "a process per client, Redlock(key, masters=every node, auto_release_time=10).acquire(timeout=5): retries after a random 0-0.2 s, pottery's default",
    },
    Peer {
        name: "curator",
        backend: BackendKind::Zookeeper,
        program: "curator-mutex",
        usage: "a CuratorFramework (session) per client, one InterProcessMutex per lock path, acquire(5 s) / release()",
    },
    Peer {
        name: "kazoo",
        backend: BackendKind::Zookeeper,
        program: "kazoo-lock",
        usage: "a process and KazooClient (session) per client, one zk.Lock(path) per lock path, acquire(timeout=5) / release()",
    },
    Peer {
        name: "etcd-go",
        backend: BackendKind::Etcd,
        program: "etcd-mutex",
        usage: "a clientv3.Client and concurrency.Session (TTL 10 s) per client, NewMutex(session, key).Lock / Unlock",
    },
];

/// The workloads each backend runs, both sides.
pub const WORKLOADS: [&str; 2] = ["hot-key", "many-keys"];

/// Warm-up before each measured window, on both sides.
pub const WARMUP: Duration = Duration::from_secs(1);

/// Where the peer programs are: `$DLBENCH_PEERS_DIR`, else the repository's `peers/`.
pub fn home() -> PathBuf {
    std::env::var_os("DLBENCH_PEERS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/peers")))
}

/// `all`, or a comma-separated list of peer names (`redis-py`) and backend names (`zookeeper`).
pub fn select(spec: &str) -> anyhow::Result<Vec<&'static Peer>> {
    if spec == "all" {
        return Ok(PEERS.iter().collect());
    }
    let mut out: Vec<&'static Peer> = Vec::new();
    for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let hits: Vec<&Peer> = PEERS.iter().filter(|p| p.name == word || p.backend.name() == word).collect();
        anyhow::ensure!(
            !hits.is_empty(),
            "--peers: unknown peer or backend {word:?} (peers: {}; or all)",
            PEERS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
        );
        for p in hits {
            if !out.iter().any(|q| q.name == p.name) {
                out.push(p);
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "--peers: name at least one peer, or all");
    // Calibrate's order, whatever the order given.
    out.sort_by_key(|p| PEERS.iter().position(|q| q.name == p.name));
    Ok(out)
}

/// The program of `peer`, or one line saying how to install it.
pub fn program(home: &Path, peer: &Peer) -> anyhow::Result<PathBuf> {
    let p = home.join("build/bin").join(peer.program);
    anyhow::ensure!(p.is_file(), "peer {} is not installed ({} missing): run `sh scripts/setup.sh --peers` first", peer.name, p.display());
    Ok(p)
}

/// What a peer program printed.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct PeerRun {
    pub client: String,
    pub acquisitions: u64,
    pub per_sec: f64,
    #[serde(default)]
    pub errors: u64,
    #[serde(default)]
    pub p99_us: Option<f64>,
}

/// The last JSON line of a peer's output.
pub fn parse_output(text: &str) -> anyhow::Result<PeerRun> {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or_else(|| anyhow::anyhow!("the peer printed no JSON line"))?;
    Ok(serde_json::from_str(line)?)
}

/// Everything a run of one peer needs.
pub struct PeerJob<'a> {
    pub program: &'a Path,
    pub endpoints: &'a [String],
    pub workload: &'a Workload,
    pub prefix: &'a str,
    pub log: PathBuf,
}

/// Run one peer program to its end (bounded); it is stopped, with whatever it forked, on
/// every exit from here (the `Process` guard signals its process group).
pub async fn run_peer(job: PeerJob<'_>, cancel: &CancellationToken) -> anyhow::Result<PeerRun> {
    let w = job.workload;
    let spec = Spec::new(format!("peer {}", job.prefix), job.program, &job.log).args([
        "--endpoints".to_string(),
        job.endpoints.join(","),
        "--clients".into(),
        w.clients.to_string(),
        "--keys".into(),
        w.keys.to_string(),
        "--seconds".into(),
        format!("{}", w.duration.as_secs_f64()),
        "--warmup".into(),
        format!("{}", w.warmup.as_secs_f64()),
        "--prefix".into(),
        job.prefix.to_string(),
        "--seed".into(),
        w.seed.unwrap_or(1).to_string(),
    ]);
    // Working directory in the result set: a process left behind is then visibly ours.
    let mut spec = spec;
    spec.cwd = job.log.parent().map(Path::to_path_buf);
    let process = Process::start(spec).map_err(|e| anyhow::anyhow!("cannot start {}: {e}", job.program.display()))?;
    // Start-up (a JVM, N Python processes, N sessions) plus the run plus a margin.
    let deadline = Instant::now() + w.warmup + w.duration + Duration::from_secs(90);
    while process.is_running() {
        if cancel.is_cancelled() {
            anyhow::bail!("interrupted");
        }
        anyhow::ensure!(Instant::now() < deadline, "{} did not finish in time (log: {})", job.program.display(), job.log.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(process);
    let text = std::fs::read_to_string(&job.log)?;
    parse_output(&text).map_err(|e| anyhow::anyhow!("{e}; its log {} ends:\n{}", job.log.display(), tail(&text, 5)))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// dlbench's side: the same workload through the driver `dlbench run` uses; (acq/s, p99 µs).
pub async fn dlbench_side(backend: Arc<dyn Backend>, w: &Workload, run_id: &str, cancel: &CancellationToken) -> anyhow::Result<(f64, Option<f64>)> {
    let r = crate::driver::run_phase(backend, w, run_id, cancel, Default::default()).await?;
    let p99 = (r.totals.acquire.len() > 0).then(|| r.totals.acquire.value_at_quantile(0.99) as f64);
    Ok((r.ops_per_sec(), p99))
}

/// The workload both sides run: a shipped one with the calibration's clients and duration.
pub fn workload(name: &str, clients: usize, secs: Duration, seed: u64) -> anyhow::Result<Workload> {
    let mut w = crate::workload::load(name).map_err(anyhow::Error::msg)?;
    w.clients = clients;
    w.duration = secs;
    w.warmup = WARMUP;
    w.seed = Some(seed);
    Ok(w)
}

/// One row from the repeats of one backend x workload x peer: (dlbench, peer) per repeat.
pub fn comparison(peer: &Peer, w: &Workload, client: String, runs: &[((f64, Option<f64>), PeerRun)]) -> Option<PeerComparison> {
    let ratios: Vec<f64> = runs.iter().map(|((d, _), p)| d / p.per_sec).collect();
    let (ratio_median, ratio_min, ratio_max) = PeerComparison::spread(&ratios)?;
    let median = |v: Vec<f64>| PeerComparison::spread(&v).map(|s| s.0);
    Some(PeerComparison {
        backend: peer.backend.name().into(),
        workload: w.name.clone(),
        peer: peer.name.into(),
        client,
        usage: peer.usage.into(),
        clients: w.clients,
        keys: w.keys,
        dlbench_per_sec: runs.iter().map(|((d, _), _)| *d).collect(),
        peer_per_sec: runs.iter().map(|(_, p)| p.per_sec).collect(),
        ratios: ratios.into_iter().filter(|r| r.is_finite()).collect(),
        ratio_median,
        ratio_min,
        ratio_max,
        dlbench_p99_us: median(runs.iter().filter_map(|((_, p), _)| *p).collect()),
        peer_p99_us: median(runs.iter().filter_map(|(_, p)| p.p99_us).collect()),
        peer_errors: runs.iter().map(|(_, p)| p.errors).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_by_peer_and_backend_names_in_calibrate_order() {
        let names = |s: &str| select(s).unwrap().iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names("all").len(), PEERS.len());
        assert_eq!(names("etcd,redis-py"), ["redis-py", "etcd-go"]);
        assert_eq!(names("zookeeper,kazoo"), ["curator", "kazoo"]);
        assert!(select("redis-pie").unwrap_err().to_string().contains("unknown peer"));
        assert!(select(",").is_err());
    }

    #[test]
    fn output_is_the_last_json_line_and_ratios_are_dlbench_over_peer() {
        let text = "warning: something\n{\"client\":\"x 1.0\",\"acquisitions\":10,\"per_sec\":5.0}\n";
        let r = parse_output(text).unwrap();
        assert_eq!((r.acquisitions, r.per_sec, r.errors), (10, 5.0, 0));
        assert!(parse_output("Traceback: boom\n").is_err());
        let w = workload("hot-key", 8, Duration::from_secs(2), 1).unwrap();
        let peer = &PEERS[0];
        let run = |d: f64, p: f64| ((d, Some(100.0)), PeerRun { client: "c".into(), acquisitions: 1, per_sec: p, errors: 1, p99_us: None });
        let row = comparison(peer, &w, "c".into(), &[run(10.0, 5.0), run(30.0, 10.0), run(4.0, 4.0)]).unwrap();
        assert_eq!(row.ratios, [2.0, 3.0, 1.0]);
        assert_eq!((row.ratio_median, row.ratio_min, row.ratio_max), (2.0, 1.0, 3.0));
        assert_eq!((row.keys, row.peer_errors, row.peer_p99_us, row.dlbench_p99_us), (1, 3, None, Some(100.0)));
        // A peer that acquired nothing gives no ratio, not an infinite one.
        assert!(comparison(peer, &w, "c".into(), &[run(10.0, 0.0)]).is_none());
    }
}
