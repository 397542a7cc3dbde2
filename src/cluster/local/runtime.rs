//! Where the servers' data lives while they run, and the guarantee that none of it outlives
//! the run that made it.
//!
//! - Data, configuration (Redis's `auth.conf` holds the password), sockets and the clock
//!   shim go to `<base>/<run-id>/<node>/`, not under `--out`: PostgreSQL runs as its own
//!   user and must enter its directory, and `--out` may be private (`mktemp -d`, mode 700).
//!   `<base>` and `<base>/<run-id>` are mode 0711: every user may pass through, nobody
//!   else may list them. The run directory keeps `servers/<node>/log` (the logs stay) and a
//!   link `servers/<node>/data` to the data (dangling once the servers stop).
//! - Each runtime directory holds `lock`, flock'ed by the process that made it for as long as
//!   it lives (the kernel drops the lock when the process dies, however it dies), and `pid`.
//!   Every start sweeps `<base>`: a directory whose lock nobody holds belongs to a run that
//!   is gone (SIGKILL, double Ctrl-C) and is removed; one whose lock is held is never
//!   touched.
//! - A node on the power-loss layer (`dlbench-faultfs`) has its mount point recorded in
//!   `mounts` before it is mounted. A dead run's layers died with it and left their mounts
//!   (answering ENOTCONN, which also keeps the directory from being removed): the sweep
//!   detaches each recorded path that is under the dead directory and still a faultfs mount
//!   (`fusermount3 -u`, falling back to a lazy unmount), never by process name.
//! - A directory is made under a staging name (`.new-<run-id>`) and renamed once its lock is
//!   held, so the sweep never sees a live directory without a held lock. A staging directory
//!   is only swept once it is a minute old and unlocked.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable naming the base directory (default `$TMPDIR/dlbench-<uid>`, i.e.
/// `/tmp/dlbench-0` for root).
pub const ENV: &str = "DLBENCH_RUNTIME_DIR";

const STAGING: &str = ".new-";
/// The file of a runtime directory that lists its faultfs mount points, one a line.
const MOUNTS: &str = "mounts";
const STAGING_GRACE: Duration = Duration::from_secs(60);

/// The base directory runtime directories go in. Not `/run` or `$XDG_RUNTIME_DIR`: those
/// are RAM (tmpfs) sized for sockets, and etcd alone preallocates 64 MB of WAL per member;
/// `$XDG_RUNTIME_DIR` is also mode 700, which PostgreSQL's user could not enter.
pub fn base() -> PathBuf {
    if let Some(d) = std::env::var_os(ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions.
    std::env::temp_dir().join(format!("dlbench-{}", unsafe { libc::geteuid() }))
}

/// A run's runtime directory; removed (with everything in it) when dropped.
pub struct RuntimeDir {
    pub path: PathBuf,
    /// Held (flock) for the directory's whole life: the sweep's proof that the run lives.
    lock: Option<File>,
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Create `dir` with `mode`, or check that the existing one is ours and a real directory
/// (in a shared /tmp another user could have made it first, or put a link there).
fn own_dir(dir: &Path, mode: u32) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != me {
        return Err(format!(
            "{} is not a directory owned by uid {me}; remove it or set {ENV} to another directory",
            dir.display()
        ));
    }
    // The umask may have narrowed the mode; the servers' users must pass through.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(|e| format!("chmod {}: {e}", dir.display()))
}

/// Record, in the runtime directory `rt`, that `mountpoint` is about to be mounted, so the
/// sweep can detach it should this run die.
pub fn record_mount(rt: &Path, mountpoint: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = OpenOptions::new().create(true).append(true).open(rt.join(MOUNTS))?;
    writeln!(f, "{}", mountpoint.display())
}

/// Detach the faultfs mounts a dead run recorded in `dir`: only paths under `dir` that are
/// faultfs mounts now. Returns the paths detached.
pub fn detach_mounts(dir: &Path) -> Vec<PathBuf> {
    let mut detached = Vec::new();
    let text = std::fs::read_to_string(dir.join(MOUNTS)).unwrap_or_default();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let p = PathBuf::from(line);
        if !p.starts_with(dir) || !dlbench_faultfs::control::mounted(&p).unwrap_or(false) {
            continue;
        }
        let quiet = std::process::Stdio::null;
        let unmounted = std::process::Command::new("fusermount3").arg("-u").arg(&p).stdout(quiet()).stderr(quiet()).status().is_ok_and(|s| s.success());
        if unmounted || dlbench_faultfs::control::detach(&p).is_ok() {
            tracing::info!("detached {} (a layer of a run that is gone)", p.display());
            detached.push(p);
        }
    }
    detached
}

/// Remove every runtime directory under `base` whose lock nobody holds. Returns the removed
/// paths. Never touches a directory whose lock is held.
pub fn sweep(base: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(base) else { return removed };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let lock = OpenOptions::new().read(true).open(path.join("lock"));
        let free = match &lock {
            Ok(f) => try_lock(f),
            // No lock file: a staging directory being made, or the remains of a start that
            // died before locking. Only an old one is taken to be the latter.
            Err(_) => false,
        };
        let old = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|a| a > STAGING_GRACE);
        let stale = if name.starts_with(STAGING) { old && (free || lock.is_err()) } else { free || (lock.is_err() && old) };
        if stale {
            detach_mounts(&path);
            // Holding the lock while removing keeps a second sweeper from racing us; its
            // removal of what we already removed fails harmlessly.
            if std::fs::remove_dir_all(&path).is_ok() {
                tracing::info!("removed {} (left by a run that is gone)", path.display());
                removed.push(path);
            }
        }
        drop(lock);
    }
    removed
}

impl RuntimeDir {
    /// Sweep `base`, then make `<base>/<run_id>`, locked and owned by this process.
    pub fn create(run_id: &str) -> Result<RuntimeDir, String> {
        let base = base();
        if let Some(parent) = base.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        own_dir(&base, 0o711)?;
        sweep(&base);
        let staging = base.join(format!("{STAGING}{run_id}"));
        let path = base.join(run_id);
        own_dir(&staging, 0o711)?;
        let made = (|| {
            let lock = OpenOptions::new().create(true).truncate(false).write(true).open(staging.join("lock"))?;
            if !try_lock(&lock) {
                return Err(std::io::Error::other("lock held by another process"));
            }
            std::fs::write(staging.join("pid"), format!("{}\n", std::process::id()))?;
            std::fs::rename(&staging, &path)?;
            Ok(lock)
        })();
        match made {
            Ok(lock) => Ok(RuntimeDir { path, lock: Some(lock) }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staging);
                Err(format!("cannot make the runtime directory {}: {e}", path.display()))
            }
        }
    }

    /// Remove the directory and everything in it (data, secrets, sockets), then let go of the
    /// lock.
    pub fn remove(&mut self) {
        if self.lock.is_some() {
            let _ = std::fs::remove_dir_all(&self.path);
            self.lock = None;
        }
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        self.remove();
    }
}
