//! The `dlbench` binary end to end: what a user types, what they see, what is left behind.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{dlbench, processes_under, scratch, sigint, wait_exit};

/// Tests that start a whole target take turns: two at once would starve a 2-core machine.

#[test]
fn unknown_backend_names_the_valid_ones() {
    let out = dlbench().args(["run", "--backends", "nosuch", "--out"]).arg(scratch("nosuch")).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
    assert!(err.contains("nosuch") && err.contains("etcd") && err.contains("zookeeper") && err.contains("redlock"), "{err}");
}

#[test]
fn missing_server_binary_is_named_with_its_package() {
    let empty = scratch("empty-path");
    let out_dir = empty.join("results");
    for (backend, binary, package) in [("redis", "redis-server", "redis-server"), ("etcd", "etcd", "etcd-server")] {
        let started = Instant::now();
        let out = dlbench()
            .env("PATH", &empty)
            .args(["run", "--backends", backend, "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
        assert!(err.contains(&format!("{binary} not found")), "{err}");
        assert!(err.contains(&format!("apt-get install {package}")), "{err}");
        assert!(!out_dir.exists(), "nothing should be created before the check");
    }
}

#[test]
fn bad_duration_is_a_clear_error() {
    let out = dlbench().args(["run", "--duration", "fast"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fast") && err.contains("duration"), "{err}");
}

/// Every shipped workload on every backend, shortened: each measured, none overlapping,
/// summary.json carrying the documented fields.
#[test]
fn shipped_workloads_run_on_all_five_backends() {
    let _g = common::heavy();
    let dir = scratch("run");
    let workloads = ["hot-key", "many-keys", "zipf", "long-hold", "open-loop"];
    // From inside the directory with the default, relative `--out results`, as the README's
    // main command runs.
    let out = dlbench()
        .current_dir(&dir)
        .args(["run", "--workload", &workloads.join(","), "--duration", "2s", "--warmup", "0s", "--seed", "11"])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let dir = dir.join("results");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {}: {stdout}", out.status);
    assert!(!stdout.contains("observed"), "no AP / CP table without faults:\n{stdout}");
    let latest = dir.join("latest").join("summary.json");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&latest).unwrap()).unwrap();
    assert_eq!(summary["complete"], true);
    let backends = summary["backends"].as_array().unwrap();
    let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["postgres", "redis", "redlock", "zookeeper", "etcd"]);
    for b in backends {
        let name = b["name"].as_str().unwrap();
        assert!(b["ops_per_sec"].as_f64().unwrap() > 0.0, "{name}: no throughput");
        for f in ["p50", "p99", "p999", "p9999", "max"] {
            assert!(b["acquire_latency_us"][f].as_u64().is_some(), "{name}: acquire_latency_us.{f}");
        }
        for f in ["errors", "overlaps", "lost_updates", "stale_tokens"] {
            assert!(b[f].as_u64().is_some(), "{name}: {f}");
        }
        for f in ["handoff_latency_us", "release_latency_us", "driver_lag_ms"] {
            assert!(b[f].is_object(), "{name}: {f}");
        }
        assert!(b["fairness_jain"].as_f64().is_some_and(|j| j > 0.0 && j <= 1.0), "{name}: fairness_jain");
        assert!(!b["timeseries"].as_array().unwrap().is_empty(), "{name}: timeseries");
        let fifo = b["capabilities"]["fifo"].as_bool().unwrap();
        assert_eq!(b["fifo_violations"].is_u64(), fifo, "{name}: fifo_violations only where FIFO is claimed");
        assert_eq!(b["overlaps"], 0, "{name} overlapped");
        assert_eq!(b["lost_updates"], 0, "{name} lost updates");
        // No fault was applied: a claimed class, never an observed one.
        let v = &b["verdict"];
        assert!(v["class_observed"].is_null(), "{name}: a class without faults: {v}");
        assert!(v["class_claimed"].is_string() && v["class_note"] == "not tested: no fault applied", "{name}: {v}");
        assert!(v["summary"].as_str().unwrap().contains("class not tested: no fault applied"), "{name}: {v}");
        assert!(["strong", "weak"].contains(&v["evidence"].as_str().unwrap()), "{name}: evidence graded: {v}");
        let ws: Vec<&str> = b["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
        assert_eq!(ws, workloads, "{name}");
        for w in b["workloads"].as_array().unwrap() {
            assert!(w["acquired"].as_u64().unwrap() > 0, "{name} {}: nothing acquired", w["name"]);
            assert_eq!(w["seed"], 11);
        }
        let ol = &b["workloads"][4]["open_loop"];
        assert_eq!(ol["target_rate"], 200.0, "{name}: open-loop figures");
        assert!(ol["schedule_lag_ms"]["p99"].as_f64().is_some());
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} missing from the table:\n{stdout}");
        assert!(b["properties"].is_null(), "{name}: expiry and reentrancy are measured only with --properties");
        let hlog = dir.join("latest").join("hdr").join(format!("{name}-hot-key-acquire.hlog"));
        assert!(std::fs::read_to_string(&hlog).is_ok_and(|t| t.contains("HISTF")), "{}", hlog.display());
    }
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// Ten thousand clients on the memory backend stay within 300 MB and report the driver's lag.
#[test]
fn ten_thousand_clients_fit_in_memory() {
    let _g = common::heavy();
    let dir = scratch("10k");
    let out = dlbench()
        .args(["run", "--backends", "memory", "--clients", "10000", "--duration", "5s", "--warmup", "0s", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("latest").join("summary.json")).unwrap()).unwrap();
    let rss = summary["peak_rss_mb"].as_f64().unwrap();
    assert!(rss < 300.0, "peak RSS {rss} MB with 10,000 clients");
    let b = &summary["backends"][0];
    assert!(b["driver_lag_ms"]["p99"].as_f64().is_some(), "driver lag reported");
    assert!(b["workloads"][0]["acquired"].as_u64().unwrap() > 10_000);
}

/// Ctrl-C halfway through a run leaves no server running, and a summary marked incomplete.
#[test]
fn sigint_mid_run_leaves_nothing_behind() {
    let _g = common::heavy();
    let dir = scratch("sigint");
    let mut child = dlbench()
        .args(["run", "--duration", "60s", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // Wait until the servers are up and load is running.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = lines.next().expect("dlbench ended before load started").unwrap();
        if line.contains("hot-key") {
            break;
        }
        assert!(Instant::now() < deadline, "load never started");
    }
    std::thread::spawn(move || for _ in lines {});
    let running = processes_under(&dir);
    assert!(running.len() >= 13, "expected 13+ servers running, saw {}", running.len());
    std::thread::sleep(Duration::from_secs(2));
    sigint(&child);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "interrupted run exits 130");
    let left = processes_under(&dir);
    assert!(left.is_empty(), "left behind after SIGINT: {left:?}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("latest").join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["complete"], false, "an interrupted run must not look finished");
    // The acquires the interrupt cut short are cancelled, not errors of the lock.
    for b in summary["backends"].as_array().unwrap() {
        for w in b["workloads"].as_array().into_iter().flatten() {
            assert_eq!(w["errors"], 0, "{} {}: interrupted acquires counted as errors", b["name"], w["name"]);
        }
    }
    // `check` judges what completed and says the history was interrupted.
    let check = dlbench().arg("check").arg(dir.join("latest").join("history.jsonl")).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("(interrupted"), "check does not say interrupted:\n{text}");
    assert_eq!(check.status.code(), Some(0), "the completed part of a fault-free run checks valid:\n{text}");
}

/// With `dlbench up` running, `dlbench lock` on each backend serializes two commands.
#[test]
fn up_then_lock_serializes_commands_on_every_backend() {
    let _g = common::heavy();
    let dir = scratch("up");
    let (mut up, ep) = common::up(&dir, &[], &[]);
    for backend in ["postgres", "redis", "redlock", "zookeeper", "etcd"] {
        let start = dir.join(format!("{backend}-a-start"));
        let end = dir.join(format!("{backend}-a-end"));
        let lock = |script: String| {
            dlbench()
                .args(["lock", "--endpoints"])
                .arg(&ep)
                .args(["--backend", backend, "shared-name", "--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        };
        let mut a = lock(format!("touch {s}; sleep 2; touch {e}", s = start.display(), e = end.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !start.exists() {
            assert!(Instant::now() < deadline, "{backend}: first lock never ran its command");
            std::thread::sleep(Duration::from_millis(20));
        }
        // B starts while A holds the lock; its command may only run after A's ended.
        let mut b = lock(format!("test -e {e}", e = end.display()));
        let sb = wait_exit(&mut b, Duration::from_secs(60));
        let sa = wait_exit(&mut a, Duration::from_secs(60));
        assert!(sa.success(), "{backend}: first command failed: {sa}");
        assert!(sb.success(), "{backend}: second command ran before the first had finished");
    }
    // Exit status of the command is passed through.
    let st = dlbench()
        .args(["lock", "--endpoints"])
        .arg(&ep)
        .args(["--backend", "redis", "status-name", "--", "sh", "-c", "exit 7"])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(7));
    sigint(&up);
    let status = wait_exit(&mut up, Duration::from_secs(60));
    assert!(status.success(), "dlbench up after Ctrl-C: {status}");
    let left = processes_under(&dir);
    assert!(left.is_empty(), "left behind after up was stopped: {left:?}");
}

/// `--ttl` under 100 ms is refused before anything is connected: one line, exit 2.
#[test]
fn lock_refuses_a_ttl_under_100ms() {
    let dir = scratch("lock-ttl");
    // The endpoints file does not exist: the TTL must be checked before it is even read.
    let out = dlbench()
        .args(["lock", "--endpoints"])
        .arg(dir.join("no-such-endpoints.toml"))
        .args(["--backend", "redis", "--ttl", "50ms", "ttl-name", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
    assert!(err.contains("--ttl") && err.contains("100ms"), "{err}");
}

#[test]
fn lock_refuses_a_lock_delay_the_backend_lacks() {
    let dir = scratch("lock-delay");
    // Refused before the endpoints file (which does not exist) is read.
    let out = dlbench()
        .args(["lock", "--endpoints"])
        .arg(dir.join("no-such-endpoints.toml"))
        .args(["--backend", "redis", "--lock-delay", "5s", "delay-name", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
    assert!(err.contains("--lock-delay") && err.contains("redis") && err.contains("etcd"), "{err}");
}

/// `run --properties`: expiry and reentrancy measured per backend after its phases, in the
/// summary and in the four-properties table of the terminal and of summary.md.
#[test]
fn properties_are_measured_and_reported() {
    let _g = common::heavy();
    let dir = scratch("properties");
    let out = dlbench()
        .args(["run", "--backends", "redis,pg-advisory", "--workload", "hot-key", "--duration", "1s", "--warmup", "0s", "--properties", "--out"])
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {}: {stdout}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("latest/summary.json")).unwrap()).unwrap();
    let props = |name: &str| summary["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap()["properties"].clone();
    let redis = props("redis");
    assert_eq!(redis["ttl_ms"], 3000, "{redis}");
    // The key lives out its 3 s TTL: the next grant cannot come much sooner.
    assert!(redis["expiry_ms"].as_u64().is_some_and(|ms| ms >= 2500), "redis expiry: {redis}");
    assert!(redis["reentrancy"].as_str().is_some_and(|r| r.starts_with("blocks")), "redis reentrancy: {redis}");
    let adv = props("pg-advisory");
    assert!(adv["expiry_ms"].as_u64().is_some(), "pg-advisory expiry: {adv}");
    assert_eq!(adv["reentrancy"], "granted, with a hold count", "{adv}");
    let md = std::fs::read_to_string(dir.join("latest/summary.md")).unwrap();
    assert!(md.contains("## The four properties"), "{md}");
    let row = md.lines().find(|l| l.starts_with("| database | pg-advisory |")).unwrap_or_else(|| panic!("no pg-advisory row:\n{md}"));
    assert!(row.contains("granted, with a hold count") && row.contains("(TTL 3 s)"), "{row}");
    assert!(stdout.lines().any(|l| l.starts_with("| Redis | redis |") && l.contains("blocks")), "{stdout}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// Whether `pid` is a live process (a zombie waiting for its reaper does not count).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => !matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z' | 'X')),
    }
}

/// Start `dlbench lock` on Redis with `sh -c 'echo $$ > PIDFILE; exec sleep 60'` and return
/// it with the PID of the sleep, once the command runs.
fn lock_running_sleep(ep: &std::path::Path, dir: &std::path::Path, name: &str, ttl: &str) -> (std::process::Child, i32) {
    let pidfile = dir.join(format!("{name}.pid"));
    let script = format!("echo $$ > {p}.tmp && mv {p}.tmp {p} && exec sleep 60", p = pidfile.display());
    let child = dlbench()
        .args(["lock", "--endpoints"])
        .arg(ep)
        .args(["--backend", "redis", "--ttl", ttl, name, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the locked command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, pid)
}

fn wait_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `dlbench up` stopped (Ctrl-C, then waited for) however the test ends, so a failed
/// assertion does not leave servers running.
struct Up(std::process::Child);

impl Drop for Up {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            sigint(&self.0);
            let _ = wait_exit(&mut self.0, Duration::from_secs(60));
        }
    }
}

/// SIGTERM (SIGHUP) to `dlbench lock` stops the command, releases the lock and exits 143
/// (129); SIGKILL to `dlbench lock` takes the command down with it.
#[test]
fn lock_command_never_outlives_dlbench() {
    let dir = scratch("lock-signals");
    let (up, ep) = common::up(&dir, &["--backends", "redis"], &[]);
    let mut up = Up(up);

    // SIGTERM or SIGHUP: the command is stopped, the lock released (long before its 30 s TTL).
    for (sig, code, name) in [(libc::SIGTERM, 143, "term-name"), (libc::SIGHUP, 129, "hup-name")] {
        let (mut lock, sleep_pid) = lock_running_sleep(&ep, &dir, name, "30s");
        // SAFETY: signalling our own child by its PID.
        unsafe { libc::kill(lock.id() as i32, sig) };
        let status = wait_exit(&mut lock, Duration::from_secs(30));
        let stopped = wait_gone(sleep_pid, Duration::from_secs(10));
        if !stopped {
            // SAFETY: the sleep this test started (through dlbench), by its PID.
            unsafe { libc::kill(sleep_pid, libc::SIGKILL) };
        }
        assert!(stopped, "the command (pid {sleep_pid}) still runs after dlbench lock got signal {sig}");
        assert!(!status.success(), "dlbench lock after signal {sig}: {status}");
        assert_eq!(status.code(), Some(code), "dlbench lock after signal {sig} exits 128 + {sig}");
        let free = dlbench()
            .args(["lock", "--endpoints"])
            .arg(&ep)
            .args(["--backend", "redis", "--wait", "0s", name, "--", "true"])
            .output()
            .unwrap();
        assert!(free.status.success(), "the lock was not released after signal {sig}: {}", String::from_utf8_lossy(&free.stderr));
    }

    // SIGKILL: dlbench cannot clean up; the kernel must stop the command.
    let (mut lock, sleep_pid) = lock_running_sleep(&ep, &dir, "kill-name", "2s");
    // SAFETY: signalling our own child by its PID.
    unsafe { libc::kill(lock.id() as i32, libc::SIGKILL) };
    let _ = wait_exit(&mut lock, Duration::from_secs(10));
    let died = wait_gone(sleep_pid, Duration::from_secs(10));
    if !died {
        // SAFETY: the sleep this test started (through dlbench), by its PID.
        unsafe { libc::kill(sleep_pid, libc::SIGKILL) };
    }
    assert!(died, "the command (pid {sleep_pid}) outlived a SIGKILLed dlbench lock");

    sigint(&up.0);
    let status = wait_exit(&mut up.0, Duration::from_secs(60));
    assert!(status.success(), "dlbench up after Ctrl-C: {status}");
    let left = processes_under(&dir);
    assert!(left.is_empty(), "left behind after up was stopped: {left:?}");
}

/// A configuration error of `--target external` (a bad endpoints file, a missing section, an
/// unset password variable) is one line, before anything is created: no new run directory
/// under --out, and `latest` still names the run it named.
#[test]
fn bad_endpoints_file_leaves_no_run_behind() {
    let dir = scratch("bad-endpoints");
    let out_dir = dir.join("results");
    std::fs::create_dir_all(out_dir.join("old-run")).unwrap();
    std::os::unix::fs::symlink("old-run", out_dir.join("latest")).unwrap();
    let cases = [
        ("not-toml.toml", "this is [not toml\n", "not valid"),
        ("no-section.toml", "[redis]\nendpoints = [\"127.0.0.1:1\"]\n", "[etcd]"),
        ("no-password.toml", "[etcd]\nendpoints = [\"127.0.0.1:1\"]\npassword_env = \"DLBENCH_SURELY_UNSET_VAR\"\n", "DLBENCH_SURELY_UNSET_VAR"),
    ];
    for (name, text, says) in cases {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let out = dlbench()
            .args(["run", "--target", "external", "--backends", "etcd", "--duration", "1s", "--endpoints"])
            .arg(&file)
            .arg("--out")
            .arg(&out_dir)
            .env_remove("DLBENCH_SURELY_UNSET_VAR")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: a bad endpoints file must fail");
        assert_eq!(err.trim().lines().count(), 1, "{name}: one line, got: {err}");
        assert!(err.contains(says), "{name}: the line names what is wrong ({says}): {err}");
        let entries: Vec<String> = std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
        let mut entries = entries;
        entries.sort();
        assert_eq!(entries, ["latest", "old-run"], "{name}: nothing new under --out");
        assert_eq!(std::fs::read_link(out_dir.join("latest")).unwrap(), std::path::Path::new("old-run"), "{name}: latest moved");
    }
}

/// The Commands section of `dlbench -h`: one line per subcommand, like ripgrep's.
#[test]
fn help_lists_one_line_per_subcommand() {
    let out = dlbench().arg("-h").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let names: Vec<&str> = section.iter().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    let expected = ["run", "up", "lock", "check", "merge", "report", "compare", "trend", "schema", "scenario", "soak", "calibrate", "help"];
    assert_eq!(names, expected, "one line each, got:\n{text}");
    for l in &section {
        assert!(l.starts_with("  ") && l.split_whitespace().count() > 1, "a line with no summary: {l:?}\n{text}");
        assert!(l.chars().count() <= 100, "{l:?} would wrap");
    }
}

/// `run --help`: the detail, the headings, every default (the workload files' included) and
/// examples; `run -h` keeps one line per option.
#[test]
fn help_of_run_has_headings_defaults_and_examples() {
    let long = String::from_utf8_lossy(&dlbench().args(["run", "--help"]).output().unwrap().stdout).to_string();
    for heading in ["Workload:", "Faults:", "Output:", "Target:", "Connection:", "Examples:"] {
        assert!(long.lines().any(|l| l == heading), "no {heading} heading in:\n{long}");
    }
    assert!(long.contains("Exit 0 when every verdict"), "the detail is missing:\n{long}");
    // Values as the shipped files have them (workloads/*.toml).
    let flat = long.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("[default: from the workload file; hot-key: 8, many-keys: 8, zipf: 16, long-hold: 4, open-loop: 32]"), "{flat}");
    assert!(flat.contains("long-hold: 3s"), "--ttl's default: {flat}");
    assert!(flat.contains("[default: hot-key,many-keys;"), "{flat}");
    assert!(flat.contains("[default: 10s; 4s in the answer plan's fault round]") && flat.contains("[default: per-client]"), "{flat}");
    assert!(flat.contains("[default: answer when no Workload flag"), "--preset's default: {flat}");
    let short = String::from_utf8_lossy(&dlbench().args(["run", "-h"]).output().unwrap().stdout).to_string();
    assert!(!short.contains("Examples:"), "examples belong to --help:\n{short}");
    for heading in ["Workload:", "Faults:", "Output:", "Target:", "Connection:"] {
        assert!(short.lines().any(|l| l == heading), "no {heading} in -h:\n{short}");
    }
}

/// Every subcommand's --help ends with examples.
#[test]
fn help_of_every_subcommand_has_examples() {
    for sub in ["run", "up", "lock", "check", "report", "compare", "trend", "schema", "scenario", "soak", "calibrate"] {
        let out = dlbench().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub}");
        let text = String::from_utf8_lossy(&out.stdout);
        let examples: Vec<&str> = text.lines().skip_while(|l| *l != "Examples:").skip(1).collect();
        assert!(examples.iter().any(|l| l.trim_start().starts_with(&format!("dlbench {sub}"))), "{sub} --help has no example:\n{text}");
    }
}

/// `scenario` takes `--backends` like every other command, and `--backend` still works:
/// both reach the backend list (an unknown name is refused by dlbench, not by clap).
#[test]
fn scenario_takes_backends_and_the_backend_alias() {
    for flag in ["--backends", "--backend"] {
        let dir = scratch("scenario-flag");
        let out = dlbench().args(["scenario", "S1", flag, "nosuch", "--out"]).arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unexpected argument"), "{flag} is not accepted: {err}");
        assert!(err.contains("nosuch") && err.contains("etcd"), "{flag}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
    }
    let help = String::from_utf8_lossy(&dlbench().args(["scenario", "--help"]).output().unwrap().stdout).to_string();
    assert!(help.contains("--backends") && help.contains("[alias: --backend]"), "{help}");
}

/// U7's `--waiters` and U3's `--locks` are checked before anything is created.
#[test]
fn scenario_refuses_bad_sizes_before_starting() {
    for (flag, value, says) in [("--waiters", "1,0", "from 1 to 10000"), ("--waiters", "ten", "from 1 to 10000"), ("--locks", "0", "1..=100000")] {
        let dir = scratch("scenario-sizes");
        let out = dlbench().args(["scenario", "U7", flag, value, "--out"]).arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("");
        assert!(first.contains(flag) && first.contains(says), "{flag} {value}: {err}");
        assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing created for {flag} {value}");
    }
}

/// `-V` names the commit: the one checked out when this test was built from git.
#[test]
fn version_names_the_commit() {
    let out = dlbench().arg("-V").output().unwrap();
    assert!(out.status.success());
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let rest = v.strip_prefix(&format!("dlbench {} (commit ", env!("CARGO_PKG_VERSION"))).unwrap_or_else(|| panic!("{v:?}"));
    let commit = rest.strip_suffix(')').unwrap_or_else(|| panic!("{v:?}"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) => {
            let hex = commit.strip_suffix("-dirty").unwrap_or(commit);
            assert!(hex.len() >= 7 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{v:?}");
            assert!(head.starts_with(hex), "{v:?} is not HEAD {head}");
        }
        None => assert_eq!(commit, "unknown", "{v:?}"),
    }
    assert_eq!(String::from_utf8_lossy(&dlbench().arg("--version").output().unwrap().stdout).trim(), v);
}

/// `check` names the path it could not use, in one line, exit 2.
#[test]
fn check_errors_name_the_path() {
    let dir = scratch("check-errors");
    let missing = dir.join("no-such-history.jsonl");
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"this is\": \"not a record\"}\n{}\n").unwrap();
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let plain_dir = dir.join("not-a-run");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let run_dir = dir.join("a-run");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::write(run_dir.join("history.jsonl"), "").unwrap();
    for (path, what) in [(&missing, "No such file"), (&bad, "line 1"), (&empty, "no operations"), (&plain_dir, "directory"), (&run_dir, "history.jsonl")] {
        let out = dlbench().arg("check").arg(path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
        assert!(err.contains(&path.display().to_string()), "the path is not named: {err}");
        assert!(err.contains(what), "{}: {err}", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mutation (issue 32): a partition where nothing can be cut, and a phase too short for every
/// fault asked, once ran and reported the faults as started (or silently dropped one). Both
/// are refused in one line before anything is created.
#[test]
fn faults_that_cannot_all_take_effect_are_refused_before_starting() {
    for (args, says) in [
        (&["--backends", "redis,redlock", "--nemesis", "partition"][..], "partition would do nothing here"),
        // Each fault needs its room after the heal (etcd: its 10 s TTL and 3 s to elect), and
        // the one piece of advice names the one duration that holds them all (issue 48).
        (&["--backends", "etcd", "--duration", "30s", "--nemesis", "kill:leader,pause,partition", "--nemesis-interval", "10s"][..], "leaves room for 1 of the 3 faults asked"),
        (&["--backends", "etcd", "--duration", "30s", "--nemesis", "kill:leader,pause,partition", "--nemesis-interval", "10s"][..], "use --duration 62s or more"),
        // A target that means nothing on every backend asked is refused, not stood in for.
        (&["--backends", "redlock", "--nemesis", "kill:leader"][..], "--nemesis kill:leader means nothing here (redlock has no leader"),
        (&["--backends", "redis", "--nemesis", "pause:follower"][..], "redis runs on one node, so it has no follower"),
        // The answer plan where it cannot run (issue 50): refused before anything exists.
        (&["--backends", "memory", "--preset", "answer"][..], "--preset answer kills servers and the memory backend has none"),
        (&["--backends", "redis", "--preset", "answer", "--nemesis", "kill"][..], "--preset answer chooses its own faults"),
    ] {
        let dir = scratch("refused-faults");
        let out = dlbench().arg("run").args(args).arg("--out").arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line, got: {err}");
        assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing created in {}", dir.display());
    }
}

/// Mutation (issue 32): `compare results/baseline <run>` on this machine kind once exited 2
/// on a kernel build ("differ in machine kernel (... vs ...)"). A kernel build is a note; the
/// one-run baseline has no spread, so the answer is "nothing detectable" (exit 3), said so.
#[test]
fn the_committed_baseline_compares_across_kernel_builds() {
    let dir = scratch("baseline-kernel");
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/results/baseline");
    let mut s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(format!("{base}/summary.json")).unwrap()).unwrap();
    let kernel = s["machine"]["kernel"].as_str().unwrap().to_string();
    s["machine"]["kernel"] = format!("{kernel}-another-build").into();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    let out = dlbench().args(["compare", base]).arg(&dir).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("kernel build"), "the kernel is a note: {stdout}");
    assert!(stdout.contains("No regression could have been detected"), "{stdout}");
}

/// `compare` prints an aligned table on stdout (a terminal or a pipe alike), with no Markdown
/// and no `<details>`; `--format markdown` prints the pull-request comment, which
/// `--markdown FILE` writes whatever is printed.
#[test]
fn compare_prints_a_table_and_markdown_when_asked() {
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/results/baseline");
    let dir = scratch("compare-format");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.md");
    let out = dlbench().args(["compare", base, base, "--markdown"]).arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    for markup in ["<details", "**", "|---"] {
        assert!(!text.contains(markup), "{markup} on the terminal:\n{text}");
    }
    let head = text.lines().find(|l| l.starts_with("backend · workload")).expect(&text);
    assert!(head.contains("  metric  ") && head.ends_with("note"), "{head}");
    let md = std::fs::read_to_string(&file).unwrap();
    assert!(md.starts_with("## dlbench compare") && md.contains("<details><summary>"), "{md}");
    let out = dlbench().args(["compare", base, base, "--format", "markdown"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), md, "--format markdown prints what --markdown writes");
    let out = dlbench().args(["compare", base, base, "--format", "html"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown format is refused");
}
