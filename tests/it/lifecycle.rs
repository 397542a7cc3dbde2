//! What a run leaves behind, whatever `--out` is and however the run ends: a private
//! `--out` works with PostgreSQL (which runs as its own user), and a SIGKILL at any instant
//! leaves no server running, no data once the next run has started, and a result set that
//! `report` and `check` read.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{dlbench, processes_under, runtime_dirs_under, scratch, wait_exit};

/// `--out` inside a directory only root may enter (as `mktemp -d` makes it): PostgreSQL's
/// server, run as the `postgres` user, must still reach its data, and nothing may stay.
#[test]
fn a_private_out_directory_runs_postgres() {
    let dir = scratch("private-out");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = dir.join("results");
    let o = dlbench()
        .args(["run", "--backends", "postgres,redis", "--workload", "hot-key", "--duration", "2s", "--warmup", "0s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "a run with --out under a mode-700 directory failed: {stderr}");
    for b in ["postgres", "redis"] {
        assert!(stdout.lines().any(|l| l.starts_with(b)), "{b} missing from the table:\n{stdout}");
    }
    let run = out.join("latest");
    // The logs stay in the run directory; the data went with the servers.
    assert!(std::fs::metadata(run.join("servers/postgres-1/log")).is_ok_and(|m| m.len() > 0), "no postgres log in the run directory");
    let rts = runtime_dirs_under(&out);
    assert_eq!(rts.len(), 1, "one runtime directory linked from the run: {rts:?}");
    assert!(!rts[0].exists(), "the runtime directory {} outlived the run", rts[0].display());
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// A `latest` that is a real directory is left alone, and so is no `.latest-*` link.
#[test]
fn a_real_latest_directory_leaves_no_temporary() {
    let dir = scratch("latest-dir");
    std::fs::create_dir_all(dir.join("latest")).unwrap();
    // A link left by a process that is gone (pid 0x7ffffffe is above pid_max).
    std::os::unix::fs::symlink("nowhere", dir.join(".latest-2147483646")).unwrap();
    let o = dlbench()
        .args(["run", "--backends", "memory", "--workload", "hot-key", "--duration", "200ms", "--warmup", "0s", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::symlink_metadata(dir.join("latest")).unwrap().is_dir(), "latest was replaced");
    let stray: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".latest-"))
        .collect();
    assert!(stray.is_empty(), "temporaries left: {stray:?}");
}

const VAR: &str = "DLBENCH_LIFECYCLE_PASSWORD";
const SECRET: &str = "s3cret-of-the-lifecycle-test";

/// Every file under `dir` (links not followed) holding `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() && std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes())) {
                hits.push(p);
            }
        }
    }
    hits
}

/// A small deterministic generator (xorshift64*), so a failing instant can be repeated.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SIGKILLs the `dlbench up` we started if the test fails before stopping it (its servers
/// follow by their parent-death signal), so a failed assertion leaves nothing running.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn wait_no_processes(dirs: &[&Path], within: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + within;
    loop {
        let left: Vec<(u32, String)> = dirs.iter().flat_map(|d| processes_under(d)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The run directory `dlbench run --out out` made, if it got that far.
fn run_dir(out: &Path) -> Option<PathBuf> {
    std::fs::read_dir(out).ok()?.flatten().map(|e| e.path()).find(|p| {
        let n = p.file_name().unwrap().to_string_lossy();
        !n.starts_with('.') && n != "latest" && p.is_dir()
    })
}

/// SIGKILL `dlbench run` at 10 instants spread over its whole life (start-up, the phase, the
/// pause fault at 2-3 s, the final check and write), chosen by a seeded generator. After
/// each: the servers died with it, what it wrote renders and checks; after the next start,
/// none of the killed runs' data remains, while runtime directories of live runs (the
/// sweep's other rule) are never touched.
#[test]
fn sigkill_at_ten_random_instants_leaves_nothing_behind() {
    let _g = common::heavy();
    let dir = scratch("sigkill10");
    let base = dir.join("runtime");
    let seed = 0x5eed_d1b5_u64;
    let mut rng = Rng(seed);
    eprintln!("seed {seed:#x}");
    // A live directory another run holds: must survive every sweep below. It requires a
    // password, whose file must be private while it runs and gone once it stops.
    let (mut live, live_ep) = {
        let live_dir = dir.join("live");
        std::fs::create_dir_all(&live_dir).unwrap();
        let env = [("DLBENCH_RUNTIME_DIR", base.to_str().unwrap()), (VAR, SECRET)];
        let (child, ep) = common::up(&live_dir, &["--backends", "redis", "--password-env", VAR], &env);
        (KillOnDrop(child), ep)
    };
    let live_rts = runtime_dirs_under(&dir.join("live"));
    assert_eq!(live_rts.len(), 1, "the live run's runtime directory: {live_rts:?}");
    let auth = live_rts[0].join("redis-1/auth.conf");
    let mode = std::fs::metadata(&auth).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{} is readable by others", auth.display());

    let started = Instant::now();
    let mut killed_rts = Vec::new();
    let mut rendered = 0;
    let mut checked = 0;
    let mut left_behind = 0;
    for i in 0..10 {
        // Stratified: instant i falls in its own tenth of 0.2..5.7 s, so every stage of the
        // run (which lasts about 5.6 s here) is hit.
        let delay = Duration::from_secs_f64(0.2 + (i as f64 + rng.unit()) * 0.55);
        let out = dir.join(format!("out-{i}"));
        let mut child = dlbench()
            // The pause and its room after the heal (the 1 s TTL, 2 s to restart).
            .args(["run", "--backends", "redis", "--workload", "hot-key", "--duration", "5s", "--warmup", "0s", "--ttl", "1s"])
            .args(["--nemesis", "pause", "--nemesis-interval", "2s", "--out"])
            .arg(&out)
            .env("DLBENCH_RUNTIME_DIR", &base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap();
        // SIGKILL to the one PID we started: no cleanup code of dlbench runs.
        child.kill().unwrap();
        wait_exit(&mut child, Duration::from_secs(10));
        eprintln!("kill {i} at {delay:?}{}", if finished.is_some() { " (the run had already ended)" } else { "" });

        // The servers followed dlbench (parent-death signal).
        let left = wait_no_processes(&[&out], Duration::from_secs(10));
        assert!(left.is_empty(), "kill {i} at {delay:?}: servers outlived dlbench: {left:?}");
        // What this kill left (the next iteration's start sweeps it, so count it now).
        let rts = runtime_dirs_under(&out);
        left_behind += rts.iter().filter(|p| p.exists()).count();
        killed_rts.extend(rts);

        let Some(run) = run_dir(&out) else { continue };
        if run.join("summary.json").exists() {
            let o = dlbench().arg("report").arg(&run).output().unwrap();
            assert!(o.status.success(), "kill {i} at {delay:?}: report failed: {}", String::from_utf8_lossy(&o.stderr));
            assert!(run.join("report.html").exists(), "kill {i}: no report.html");
            rendered += 1;
        }
        let history = run.join("history.jsonl");
        if history.exists() {
            let o = dlbench().arg("check").arg(&history).output().unwrap();
            let code = o.status.code();
            let stderr = String::from_utf8_lossy(&o.stderr);
            // Killed before the first operation: the history exists but holds none, and check
            // says so with its input-error status. Only that reason is let through, and only
            // when the file really holds no operation.
            let no_ops = !std::fs::read_to_string(&history).unwrap_or_default().lines().any(|l| l.contains("\"type\":\"invoke\""));
            if code == Some(2) && stderr.contains("holds no operations") && no_ops {
                eprintln!("kill {i} at {delay:?}: killed before the first operation");
                continue;
            }
            assert!(
                matches!(code, Some(0 | 1 | 3)),
                "kill {i} at {delay:?}: check exit {code:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            checked += 1;
        }
    }
    eprintln!("{rendered} result sets rendered, {checked} histories checked, {left_behind} runtime directories left by the kills");
    assert!(rendered >= 5 && checked >= 5, "too few kills reached the phase: {rendered} rendered, {checked} checked");
    // SIGKILL runs no cleanup: runs killed after their servers started left their data.
    assert!(left_behind > 0, "no killed run left data, so the sweep below is not tested");

    // The next start sweeps what the killed runs left (each start already swept what the
    // kill before it left; this one makes sure of the last).
    let out = dir.join("out-next");
    let o = dlbench()
        .args(["run", "--backends", "redis", "--workload", "hot-key", "--duration", "500ms", "--warmup", "0s", "--out"])
        .arg(&out)
        .env("DLBENCH_RUNTIME_DIR", &base)
        .output()
        .unwrap();
    assert!(o.status.success(), "the next run: {}", String::from_utf8_lossy(&o.stderr));
    let remaining: Vec<&PathBuf> = killed_rts.iter().filter(|p| p.exists()).collect();
    assert!(remaining.is_empty(), "data of killed runs after the next start: {remaining:?}");
    assert!(live_rts[0].exists(), "the sweep removed {}, which a live run holds", live_rts[0].display());
    let in_base: Vec<PathBuf> = std::fs::read_dir(&base).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(in_base, live_rts, "only the live run's directory remains in {}", base.display());
    // The live run still works: its servers answer after the sweeps.
    let o = dlbench()
        .args(["run", "--target", "external", "--backends", "redis", "--duration", "300ms", "--warmup", "0s", "--endpoints"])
        .arg(&live_ep)
        .arg("--out")
        .arg(dir.join("out-live"))
        .env(VAR, SECRET)
        .output()
        .unwrap();
    assert!(o.status.success(), "the live run's servers after the sweeps: {}", String::from_utf8_lossy(&o.stderr));

    common::sigint(&live.0);
    let status = wait_exit(&mut live.0, Duration::from_secs(60));
    assert!(status.success(), "dlbench up after Ctrl-C: {status}");
    assert!(!live_rts[0].exists(), "dlbench up left its runtime directory (and auth.conf) at stop");
    let leaked: Vec<PathBuf> = [&dir, &base].iter().flat_map(|d| files_containing(d, SECRET)).collect();
    assert!(leaked.is_empty(), "the password is still in files after stop: {leaked:?}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
    eprintln!("sigkill test took {:?}", started.elapsed());
}

/// `--clients 1,2` on the local target: one row per client count, each with the servers' CPU
/// per acquisition (dlbench owns their PIDs), and the report's cost table and scaling chart.
#[test]
fn a_local_sweep_measures_the_cost_of_each_point() {
    let dir = scratch("cost-sweep");
    let out = dir.join("results");
    let o = dlbench()
        .args(["run", "--backends", "redis", "--workload", "hot-key", "--clients", "1,2", "--duration", "2s", "--warmup", "1s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "the sweep failed: {}", String::from_utf8_lossy(&o.stderr));
    let run = out.join("latest");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    let rows = s["backends"][0]["workloads"].as_array().unwrap();
    let clients: Vec<u64> = rows.iter().map(|w| w["clients"].as_u64().unwrap()).collect();
    assert_eq!(clients, vec![1, 2], "one row per client count: {rows:?}");
    for w in rows {
        let cpu = w["server_cpu_us_per_acq"].as_f64();
        assert!(cpu.is_some_and(|c| c > 0.0), "server CPU per acquisition at {} clients: {cpu:?}", w["clients"]);
        assert!(w["dlbench_cpu_us_per_acq"].as_f64().is_some_and(|c| c > 0.0), "dlbench CPU per acquisition: {w}");
        assert!(w["server_counters_per_acq"]["net_bytes"].as_f64().is_some_and(|b| b > 0.0), "Redis bytes on the wire: {w}");
        assert!(w["harness_peak_rss_mb"].as_f64().is_some_and(|m| m > 0.0), "dlbench's peak RSS in the phase: {w}");
    }
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("## Cost per acquisition") && md.contains("## Scaling"), "summary.md:\n{md}");
    assert!(!md.contains("not measured: not the local target"), "the local target measures its servers:\n{md}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("Cost per acquisition") && html.contains("scaling-hot-key.svg"), "report.html lacks the cost table or the scaling chart");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}
