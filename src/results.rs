//! The run directory: `<out>/<run-id>/`, created at start and filled as the run goes.

use std::path::{Path, PathBuf};

use crate::util::write_atomic;

pub struct RunDir {
    pub id: String,
    pub path: PathBuf,
}

impl RunDir {
    /// Create `<out>/<prefix><UTC timestamp>-<4 hex>` and point `<out>/latest` at it.
    pub fn create(out: &Path, prefix: &str) -> anyhow::Result<RunDir> {
        let id = format!(
            "{prefix}{}-{:04x}",
            chrono::Utc::now().format("%Y%m%d-%H%M%S"),
            rand::random::<u16>()
        );
        let path = out.join(&id);
        std::fs::create_dir_all(&path)
            .map_err(|e| anyhow::anyhow!("cannot create results directory {}: {e}", path.display()))?;
        // Absolute, because servers run with their own working directories (PostgreSQL's
        // is its data directory) and must find their files from there.
        let path = std::fs::canonicalize(&path)
            .map_err(|e| anyhow::anyhow!("cannot resolve results directory {}: {e}", path.display()))?;
        if prefix.is_empty() {
            let out = path.parent().unwrap_or(out);
            let latest = out.join("latest");
            sweep_latest_temporaries(out);
            let tmp = out.join(format!(".latest-{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            if std::os::unix::fs::symlink(&id, &tmp).is_ok() && std::fs::rename(&tmp, &latest).is_err() {
                // `latest` is something else (a real directory): leave it, and no temporary.
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(RunDir { id, path })
    }

    pub fn write(&self, name: &str, contents: &[u8]) -> anyhow::Result<()> {
        let p = self.path.join(name);
        write_atomic(&p, contents).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
    }

    pub fn write_json<T: serde::Serialize>(&self, name: &str, v: &T) -> anyhow::Result<()> {
        let mut s = serde_json::to_string_pretty(v)?;
        s.push('\n');
        self.write(name, s.as_bytes())
    }
}

/// Remove `.latest-<pid>` links whose process is gone (one killed between making the link
/// and renaming it). A live process's link is its own to rename.
fn sweep_latest_temporaries(out: &Path) {
    let Ok(entries) = std::fs::read_dir(out) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(".latest-").and_then(|p| p.parse::<i32>().ok()) else { continue };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone && e.file_type().is_ok_and(|t| t.is_symlink()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
