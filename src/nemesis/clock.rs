//! Wall-clock faults: servers started with the clock shim read their clock offset from a
//! file; writing the file moves that server's wall clock (within 50 ms).

use std::path::{Path, PathBuf};

/// The shim, built by build.rs from clockshim/clockshim.c.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libdlbench_clockshim.so"));

/// Write the shim into `dir`; `None` when this build has no shim.
pub fn install(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    if SHIM.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir)?;
    let p = dir.join("libdlbench_clockshim.so");
    std::fs::write(&p, SHIM)?;
    Ok(Some(p))
}

/// The environment that puts a server under the shim, reading `offset_file`.
pub fn env(shim: &Path, offset_file: &Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vec![
        ("LD_PRELOAD".into(), shim.as_os_str().to_owned()),
        ("DLBENCH_CLOCK_FILE".into(), offset_file.as_os_str().to_owned()),
    ]
}

/// Set the server's clock offset in milliseconds (0 puts it back).
pub fn set_offset(offset_file: &Path, ms: i64) -> std::io::Result<()> {
    crate::util::write_atomic(offset_file, format!("{ms}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `date +%s` under the shim follows the offset file.
    #[test]
    fn shim_moves_the_wall_clock() {
        let dir = std::env::temp_dir().join(format!("dlbench-clock-{}", std::process::id()));
        let Some(shim) = install(&dir).unwrap() else { return };
        let f = dir.join("offset");
        set_offset(&f, 3_600_000).unwrap();
        let out = std::process::Command::new("date").arg("+%s").envs(env(&shim, &f)).output().unwrap();
        let shifted: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((shifted - now - 3600).abs() <= 5, "date under the shim said {shifted}, now is {now}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
