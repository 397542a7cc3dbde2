//! One local target per test binary, shared by every test in it.
//!
//! Tests each run in their own tokio runtime, so only endpoints are shared: the servers are
//! started once on a helper thread, and each test connects its own clients. The servers are
//! stopped when the test process exits (an `atexit` hook stops them gracefully; if the
//! process is killed instead, the kernel's parent-death signal kills them).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dlbench::connect::{self, Timeouts};
use dlbench::endpoints::{Endpoints, Section};
use dlbench::kind::BackendKind;
use dlbench::cluster::local::LocalTarget;
use dlbench_core::{Backend, LockError};

static TARGET: Mutex<Option<LocalTarget>> = Mutex::new(None);
static ENDPOINTS: OnceLock<(Endpoints, PathBuf)> = OnceLock::new();

extern "C" fn stop_target() {
    if let Ok(mut g) = TARGET.lock() {
        if let Some(mut t) = g.take() {
            t.stop();
            let _ = std::fs::remove_dir_all(t.dir.parent().unwrap_or(&t.dir));
        }
    }
}

/// Endpoints of the shared local target (every server family), starting it on first use.
pub fn endpoints() -> &'static Endpoints {
    &ENDPOINTS
        .get_or_init(|| {
            std::thread::spawn(|| {
                let dir = std::env::temp_dir().join(format!("dlbench-test-{}", std::process::id()));
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let target = rt
                    .block_on(LocalTarget::start(&dir, &BackendKind::SERVERS, Default::default()))
                    .unwrap_or_else(|e| panic!("local target did not start: {e}"));
                let eps = target.endpoints().clone();
                eprintln!("test servers: {}", eps.to_toml().replace('\n', " "));
                *TARGET.lock().unwrap() = Some(target);
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(stop_target) };
                (eps, dir)
            })
            .join()
            .expect("target start-up thread")
        })
        .0
}

/// The name of the node the shared target's nemesis would take for `kind`'s leader, locks
/// asking for `lock_ttl` (the `Faults` lookup behind `kill:leader`).
pub fn leader(kind: BackendKind, lock_ttl: Duration) -> Option<String> {
    use dlbench::nemesis::Faults;
    endpoints();
    let g = TARGET.lock().unwrap();
    let t = g.as_ref().expect("the shared target is up");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(t.leader(kind, lock_ttl)).map(|n| n.name)
}

/// A backend connected to the shared servers.
pub async fn backend(kind: BackendKind) -> Arc<dyn Backend> {
    let eps = endpoints();
    connect::connect(kind, eps, Timeouts::default(), None)
        .await
        .unwrap_or_else(|e| panic!("connect {kind}: {e}"))
}

/// A backend pointed at loopback ports nobody listens on.
pub async fn dead(kind: BackendKind) -> Result<Arc<dyn Backend>, LockError> {
    let n = match kind {
        BackendKind::Redlock => 5,
        BackendKind::Etcd | BackendKind::Zookeeper | BackendKind::Nats => 3,
        _ => 1,
    };
    let mut e = Endpoints::default();
    e.set(kind, Section::new((0..n).map(|_| dlbench_core::conformance::dead_endpoint()).collect()));
    connect::connect(kind, &e, Timeouts { connect: Duration::from_secs(2), request: Duration::from_secs(3) }, None).await
}

/// A command-line SQL client (psql, mariadb) kept open on stdin, as a user's session that
/// holds a lock between statements; killed (by its PID) if the test fails before `quit`.
pub struct SqlSession(std::process::Child, std::sync::mpsc::Receiver<String>);

impl SqlSession {
    /// Start `cmd` (set up to read statements on stdin and print rows one per line).
    pub fn open(mut cmd: std::process::Command) -> SqlSession {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("SQL client");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        SqlSession(child, rx)
    }

    /// Run `sql`; return its output lines, up to the marker row that follows it.
    pub fn run(&mut self, sql: &str) -> Vec<String> {
        use std::io::Write;
        let stdin = self.0.stdin.as_mut().unwrap();
        writeln!(stdin, "{sql}\nSELECT 'done';").unwrap();
        stdin.flush().unwrap();
        let mut lines = Vec::new();
        loop {
            let line = self.1.recv_timeout(Duration::from_secs(20)).expect("the SQL client answered within 20 s");
            if line == "done" {
                return lines;
            }
            lines.push(line);
        }
    }

    /// End the session (stdin closed) and check the client exited cleanly.
    pub fn quit(mut self) {
        drop(self.0.stdin.take());
        let status = self.0.wait().unwrap();
        assert!(status.success(), "the SQL client failed: {status}");
    }
}

impl Drop for SqlSession {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
