//! Helpers for tests that drive the `dlbench` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The binary, with self-contradicting verdicts made fatal (exit 70): every run set the suite
/// makes is walked by dlbench itself (`judgement::contradictions`), so no test can pass over
/// one.
pub fn dlbench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlbench"));
    c.env_remove("DLBENCH_LOG");
    c.env("DLBENCH_STRICT_VERDICTS", "1");
    c
}

pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlbench-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The runtime directories (`<base>/<run>-<hex>`) that the runs under `dir` linked to from
/// their `servers/<node>/data`; the links outlive the data, so this works after a stop too.
pub fn runtime_dirs_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_symlink() && e.file_name() == "data" && p.parent().and_then(|n| n.parent()).is_some_and(|s| s.ends_with("servers")) {
                if let Some(rt) = std::fs::read_link(&p).ok().and_then(|l| l.parent().and_then(|n| n.parent()).map(Path::to_path_buf)) {
                    if !out.contains(&rt) {
                        out.push(rt);
                    }
                }
            } else if t.is_dir() && depth < 6 {
                stack.push((p, depth + 1));
            }
        }
    }
    out
}

/// PIDs of processes whose command line or working directory is under `dir`, or under a
/// runtime directory a run under `dir` keeps its servers' data in. Servers name their data
/// directory on the command line, except those that rewrite their process title (Redis,
/// PostgreSQL's helpers), which run with their data directory as working directory.
pub fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    let mut needles = vec![dir.to_string_lossy().to_string()];
    needles.extend(runtime_dirs_under(dir).iter().map(|p| p.to_string_lossy().to_string()));
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let cwd = std::fs::read_link(e.path().join("cwd")).map(|p| p.to_string_lossy().to_string()).unwrap_or_default();
        // dlbench itself also names the directory; it is our child and waited for.
        let under = needles.iter().any(|n| cmd.contains(n.as_str()) || cwd.starts_with(n.as_str()));
        if under && !cmd.starts_with(env!("CARGO_BIN_EXE_dlbench")) {
            out.push((pid, cmd));
        }
    }
    out
}

pub fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn sigint(child: &Child) {
    // SAFETY: signalling our own child by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}


/// Start `dlbench up --endpoints DIR/endpoints.toml --out DIR/servers` with `extra` flags and
/// `env`, and wait until it has written the endpoints file.
pub fn up(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Child, PathBuf) {
    let ep = dir.join("endpoints.toml");
    let mut cmd = dlbench();
    cmd.arg("up").args(extra).arg("--endpoints").arg(&ep).arg("--out").arg(dir.join("servers"));
    cmd.envs(env.iter().copied()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::inherit());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ep.exists() {
        assert!(child.try_wait().unwrap().is_none(), "dlbench up exited early");
        assert!(Instant::now() < deadline, "endpoints never written");
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, ep)
}

/// Deletes every key on a Redis server every 15 ms from a thread of its own, until dropped:
/// the lock taken from under its holders, so a second holder gets in and only a place that
/// sees every holder can call it an overlap.
pub struct Flusher {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    pub fn start(addr: &str) -> Flusher {
        use std::io::{Read, Write};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                s.write_all(b"*1\r\n$8\r\nFLUSHALL\r\n").unwrap();
                let _ = s.read(&mut buf).unwrap();
                std::thread::sleep(Duration::from_millis(15));
            }
        });
        Flusher { stop, thread: Some(thread) }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let joined = t.join();
            // A flusher that died is a failed test, unless the test is already failing.
            if joined.is_err() && !std::thread::panicking() {
                panic!("the FLUSHALL thread failed");
            }
        }
    }
}

/// A counting semaphore for tests (std has none): `acquire` waits for a permit, the guard
/// gives it back on drop, also when the test panics.
pub struct Permits {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

pub struct Permit(&'static Permits);

impl Permits {
    pub const fn new(n: usize) -> Permits {
        Permits { free: std::sync::Mutex::new(n), freed: std::sync::Condvar::new() }
    }

    pub fn acquire(&'static self) -> Permit {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// Two at a time: as many loaded runs as the machine's two cores carry, as when each test
/// file was a binary of its own and ran two tests at once.
static HEAVY: Permits = Permits::new(2);
static DOCKER: Permits = Permits::new(1);

/// Held for the whole of a test that starts servers of its own and loads them (a `dlbench
/// run`, `soak`, `scenario` or `calibrate` on the local target, or on compose): at most two
/// such tests share the cores, while tests on `support`'s servers and light ones fill the
/// gaps beside them (`.cargo/config.toml` gives libtest four threads).
pub fn heavy() -> Permit {
    HEAVY.acquire()
}

/// Held by the tests that bring the compose topology up: they publish the same host ports.
pub fn docker() -> Permit {
    DOCKER.acquire()
}
