//! The power-loss layer under a node's data directory (issue 36): a `dlbench-faultfs`
//! process mounted on the directory itself (it opens the directory before mounting over
//! it, so the server's path stays the same and BACKING is what lies beneath). File data the
//! server writes stays in the layer until the server syncs it; cutting the power drops the
//! rest and unmounts, and mounting again is the inverse. The layer is started and stopped by
//! its PID like a server (see `process`), and unmounted on every exit.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlbench_faultfs::{control, daemon};

use super::process::{Process, Spec};

/// How long mounting or unmounting may take.
const WITHIN: Duration = Duration::from_secs(10);

/// The layer's daemon: the `dlbench` binary itself, run with [`daemon::ARG`] first (the
/// integration tests, whose own executable is not dlbench, find it beside them).
pub fn binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is dlbench? {e}"))?;
    if exe.file_stem().is_some_and(|n| n == "dlbench") {
        return Ok(exe);
    }
    let dirs = exe.ancestors().skip(1).take(2);
    dirs.map(|d| d.join("dlbench")).find(|p| p.is_file()).ok_or_else(|| {
        format!("power-loss runs its layer from the dlbench binary, which is not beside {} (build it with `cargo build --release`)", exe.display())
    })
}

/// Whether this machine can mount the layer, asked before anything is created: the daemon
/// (the dlbench binary), /dev/fuse, and root (the layer mounts over the data directory).
pub fn preflight() -> Result<(), String> {
    binary()?;
    if !Path::new("/dev/fuse").exists() {
        return Err("--nemesis power-loss needs /dev/fuse (load the fuse module, or pass --device /dev/fuse to the container); drop power-loss otherwise".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("--nemesis power-loss mounts a layer over each data directory and needs root; run as root or drop power-loss".into());
    }
    Ok(())
}

/// One node's layer.
#[derive(Debug)]
pub struct Layer {
    name: String,
    data: PathBuf,
    log: PathBuf,
    bin: PathBuf,
    /// The runtime directory the mount point is recorded in (for the sweep of dead runs).
    rt: PathBuf,
    process: Mutex<Option<Arc<Process>>>,
}

impl Layer {
    pub fn new(node: &str, data: &Path, server_log: &Path, bin: &Path, rt: &Path) -> Layer {
        Layer {
            name: format!("{node}-faultfs"),
            data: data.to_path_buf(),
            log: server_log.with_file_name(format!("{node}-faultfs.log")),
            bin: bin.to_path_buf(),
            rt: rt.to_path_buf(),
            process: Mutex::new(None),
        }
    }

    pub fn mounted(&self) -> bool {
        control::mounted(&self.data).unwrap_or(false)
    }

    /// Mounts the layer on the data directory, unless it already is.
    pub fn mount(&self) -> Result<(), String> {
        if self.mounted() {
            return Ok(());
        }
        // etcd makes its data directory itself; the layer needs it first.
        std::fs::create_dir_all(&self.data).map_err(|e| format!("create {}: {e}", self.data.display()))?;
        // Recorded first: a run killed once the layer is up leaves a mount the sweep detaches.
        super::runtime::record_mount(&self.rt, &self.data).map_err(|e| format!("record the mount of {}: {e}", self.data.display()))?;
        let spec = Spec::new(self.name.clone(), self.bin.clone(), self.log.clone()).args([Path::new(daemon::ARG), self.data.as_path(), self.data.as_path()]);
        let p = Process::start(spec).map_err(|e| format!("start {}: {e}", self.name))?;
        if let Err(e) = control::wait_mounted(&self.data, true, WITHIN) {
            p.kill();
            return Err(format!("{}: {e} (log {}: {})", self.name, self.log.display(), self.last_line()));
        }
        *self.process.lock().unwrap() = Some(p);
        Ok(())
    }

    /// Cuts the power: every unsynced write dropped, the directory unmounted. The server must
    /// be down already. Returns the layer's own account ("power loss: dropped ...").
    pub fn power_loss(&self) -> Result<String, String> {
        let p = self.process.lock().unwrap().take().ok_or_else(|| format!("{} is not mounted", self.name))?;
        p.signal(control::POWER_LOSS);
        let deadline = Instant::now() + WITHIN;
        while p.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if p.is_running() {
            p.kill();
            self.detach();
            return Err(format!("{} did not answer the power loss within {WITHIN:?}; killed", self.name));
        }
        Ok(self.last_line())
    }

    /// An orderly stop (everything synced), then nothing left mounted whatever happened.
    pub fn stop(&self) {
        if let Some(p) = self.process.lock().unwrap().take() {
            p.stop(Duration::from_secs(5));
        }
        self.detach();
    }

    /// A layer killed without unmounting leaves a mount that answers ENOTCONN.
    fn detach(&self) {
        if self.mounted() {
            let _ = control::detach(&self.data);
        }
    }

    /// The layer's last report line.
    pub fn last_line(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        self.stop();
    }
}
