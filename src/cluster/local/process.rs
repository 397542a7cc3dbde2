//! Server processes dlbench starts, and the guarantee that it stops them.
//!
//! - Each server runs in its own process group (`setpgid`), so stopping it signals the group
//!   and reaches helpers it forked (PostgreSQL's backends), by the PID we started, never by
//!   name.
//! - Each server gets `PR_SET_PDEATHSIG = SIGKILL`: if dlbench dies without cleaning up
//!   (SIGKILL, abort), the kernel kills the server. The signal fires when the *thread* that
//!   forked the child exits, so every spawn happens on one thread that lives as long as the
//!   process.
//! - A process-wide registry of live groups lets the Ctrl-C path and `Drop` stop whatever is
//!   still running.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How to start one server.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
    /// stdout and stderr are appended here.
    pub log: PathBuf,
    /// Run as this (uid, gid), e.g. PostgreSQL refusing root.
    pub user: Option<(u32, u32)>,
    /// Signal for a graceful stop (SIGINT for PostgreSQL's fast shutdown).
    pub stop_signal: i32,
}

impl Spec {
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, log: impl Into<PathBuf>) -> Self {
        Spec {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            log: log.into(),
            user: None,
            stop_signal: libc::SIGTERM,
        }
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, it: I) -> Self {
        self.args.extend(it.into_iter().map(Into::into));
        self
    }
}

type SpawnRequest = (Command, mpsc::SyncSender<std::io::Result<Child>>);

/// The one long-lived thread that forks servers (see the module doc on PDEATHSIG).
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("dlbench-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the process-spawner thread");
        Mutex::new(tx)
    })
}

/// Process groups started and not yet reaped: pid -> name.
fn live() -> &'static Mutex<BTreeMap<i32, String>> {
    static LIVE: OnceLock<Mutex<BTreeMap<i32, String>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// Names and PIDs of every server process still running.
pub fn live_processes() -> Vec<(i32, String)> {
    live().lock().unwrap().iter().map(|(p, n)| (*p, n.clone())).collect()
}

/// SIGKILL every process group still registered. The last resort of the signal path.
pub fn kill_all_now() {
    for (pid, _) in live_processes() {
        // SAFETY: signalling a process group we created and have not reaped.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// A running server.
pub struct Process {
    pub spec: Spec,
    pub pid: i32,
    child: Mutex<Option<Child>>,
    started: Instant,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.spec.name, self.pid)
    }
}

impl Process {
    pub fn start(spec: Spec) -> std::io::Result<Arc<Process>> {
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = OpenOptions::new().create(true).append(true).open(&spec.log)?;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        if let Some(d) = &spec.cwd {
            cmd.current_dir(d);
        }
        if let Some((uid, gid)) = spec.user {
            cmd.uid(uid).gid(gid);
        }
        // SAFETY: the hook makes only async-signal-safe calls (see `die_with_parent`).
        unsafe {
            cmd.pre_exec(crate::util::die_with_parent());
        }
        let (tx, rx) = mpsc::sync_channel(1);
        spawner().lock().unwrap().send((cmd, tx)).map_err(|_| std::io::Error::other("spawner thread gone"))?;
        let child = rx.recv().map_err(|_| std::io::Error::other("spawner thread gone"))??;
        let pid = child.id() as i32;
        live().lock().unwrap().insert(pid, spec.name.clone());
        tracing::debug!("started {} pid {pid}", spec.name);
        Ok(Arc::new(Process { spec, pid, child: Mutex::new(Some(child)), started: Instant::now() }))
    }

    /// True while the process has not exited.
    pub fn is_running(&self) -> bool {
        let mut g = self.child.lock().unwrap();
        match g.as_mut() {
            None => false,
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                _ => {
                    self.reaped(&mut g);
                    false
                }
            },
        }
    }

    fn reaped(&self, g: &mut Option<Child>) {
        if let Some(mut c) = g.take() {
            let _ = c.wait();
        }
        live().lock().unwrap().remove(&self.pid);
    }

    /// Send `sig` to the process group, if it still runs.
    pub fn signal(&self, sig: i32) -> bool {
        let g = self.child.lock().unwrap();
        if g.is_none() {
            return false;
        }
        // SAFETY: the group leader is our unreaped child, so the pgid is still ours.
        unsafe { libc::kill(-self.pid, sig) == 0 }
    }

    /// Stop gracefully, then by SIGKILL after `grace`; waits until the process has exited.
    pub fn stop(&self, grace: Duration) {
        let mut g = self.child.lock().unwrap();
        let Some(child) = g.as_mut() else { return };
        if let Ok(Some(_)) = child.try_wait() {
            // The leader is gone; make sure nothing it forked lingers in its group.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            self.reaped(&mut g);
            return;
        }
        // SAFETY: as in `signal`. SIGCONT first so a paused group can act on the signal.
        unsafe {
            libc::kill(-self.pid, libc::SIGCONT);
            libc::kill(-self.pid, self.spec.stop_signal);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group, leader or forked helpers, goes now.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        self.reaped(&mut g);
    }

    /// SIGKILL and reap (the nemesis's crash).
    pub fn kill(&self) {
        let mut g = self.child.lock().unwrap();
        if g.is_none() {
            return;
        }
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        self.reaped(&mut g);
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The last `n` lines of the server's log, for error messages.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.spec.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}
