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
            let tmp = out.join(format!(".latest-{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            if std::os::unix::fs::symlink(&id, &tmp).is_ok() {
                let _ = std::fs::rename(&tmp, &latest);
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

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
