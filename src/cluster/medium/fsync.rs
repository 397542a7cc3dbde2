//! The latency of a 4 KiB write followed by fdatasync, what a server's commit waits for: on
//! the host in-process, in a container with the `dd` every Debian image has (coreutils),
//! timed by dd's own clock (which starts after the file is open and stops after the
//! fdatasync), so the cost of `docker exec` and of starting dd stays out of the figure.
//!
//! Each write overwrites the same 4 KiB of a file that already holds them: a data-only
//! flush, as etcd's and ZooKeeper's preallocated logs see, not a file growing.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::summary::medium::Figure;

/// Writes timed per medium.
pub const SAMPLES: usize = 100;
/// Writes before those, untimed (the first allocates the block).
pub const WARMUP: usize = 5;

const PROBE: &str = ".dlbench-fsync-probe";

pub const HOST_METHOD: &str = "pwrite 4 KiB + fdatasync, in-process";
pub const DD_METHOD: &str = "dd bs=4096 count=1 conv=notrunc,fdatasync, by dd's clock, via docker exec";

/// In `dir` on this machine (blocking: call it from `spawn_blocking`).
pub fn host(dir: &Path) -> Figure {
    match host_samples(dir) {
        Ok(s) => Figure::of(&s),
        Err(e) => Figure::missing(format!("{}: {e}", dir.display())),
    }
}

fn host_samples(dir: &Path) -> std::io::Result<Vec<f64>> {
    let path = dir.join(PROBE);
    let f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path)?;
    let mut out = Vec::with_capacity(SAMPLES);
    let r = timed_writes(&f, &mut out);
    let _ = std::fs::remove_file(&path);
    r.map(|()| out)
}

fn timed_writes(f: &std::fs::File, out: &mut Vec<f64>) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let block = [0x5au8; 4096];
    for i in 0..WARMUP + SAMPLES {
        let t = Instant::now();
        f.write_all_at(&block, 0)?;
        f.sync_data()?;
        if i >= WARMUP {
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(())
}

/// The shell script that times the writes in a container's `dir`: one dd per write, its
/// last stderr line ("4096 bytes (4.1 kB, 4.0 KiB) copied, 0.00123 s, 3.3 MB/s") each.
pub fn container_script(dir: &str) -> String {
    let dir = dir.replace('\'', "'\\''");
    format!(
        "f='{dir}'/{PROBE}; i=0; while [ $i -lt {n} ]; do LC_ALL=C dd if=/dev/zero of=\"$f\" bs=4096 count=1 conv=notrunc,fdatasync 2>&1 | tail -n 1; i=$((i+1)); done; rm -f \"$f\"",
        n = WARMUP + SAMPLES
    )
}

/// dd's reported seconds, one per line it printed, in µs (lines without a time are errors
/// and end the parse with that line).
pub fn parse_dd(out: &str) -> Result<Vec<f64>, String> {
    let mut v = Vec::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let secs = line.split(", ").find_map(|part| part.strip_suffix(" s")?.trim().parse::<f64>().ok());
        match secs {
            Some(s) => v.push(s * 1e6),
            None => return Err(format!("dd said: {}", line.trim())),
        }
    }
    Ok(v)
}

/// The timed samples of dd's output (the warm-up ones dropped).
pub fn dd_figure(out: &str) -> Figure {
    match parse_dd(out) {
        Ok(v) if v.len() == WARMUP + SAMPLES => Figure::of(&v[WARMUP..]),
        Ok(v) => Figure::missing(format!("dd timed {} writes of the {} asked", v.len(), WARMUP + SAMPLES)),
        Err(e) => Figure::missing(e),
    }
}

/// Bound on one medium's writes.
pub const BUDGET: Duration = Duration::from_secs(8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dd_lines_parse_and_errors_are_said() {
        let ok = "4096 bytes (4.1 kB, 4.0 KiB) copied, 0.00123 s, 3.3 MB/s\n4096 bytes (4.1 kB, 4.0 KiB) copied, 2.5e-05 s, 164 MB/s\n";
        let v = parse_dd(ok).unwrap();
        assert!((v[0] - 1230.0).abs() < 1e-6 && (v[1] - 25.0).abs() < 1e-6, "{v:?}");
        let err = parse_dd("dd: failed to open '/nope/.dlbench-fsync-probe': No such file or directory\n").unwrap_err();
        assert!(err.contains("No such file"), "{err}");
        // Too few lines: not measured, never a figure from a partial run.
        let f = dd_figure(ok);
        assert!(f.median_us.is_none() && f.not_measured.unwrap().contains("2 writes"));
        let full: String = (0..WARMUP + SAMPLES).map(|i| format!("4096 bytes copied, 0.00{} s, 1 MB/s\n", if i < WARMUP { 9 } else { 1 })).collect();
        let f = dd_figure(&full);
        assert_eq!((f.n, f.median_us), (SAMPLES as u64, Some(1000.0)), "the warm-up writes are dropped");
    }

    #[test]
    fn host_fsync_measures_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("dlbench-fsync-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = host(&dir);
        assert_eq!(f.n, SAMPLES as u64);
        assert!(f.median_us.unwrap() > 0.0 && f.p90_us.unwrap() >= f.median_us.unwrap());
        assert!(!dir.join(PROBE).exists(), "the probe file is removed");
        std::fs::remove_dir(&dir).unwrap();
        let f = host(Path::new("/nonexistent-dlbench-dir"));
        assert!(f.median_us.is_none() && f.not_measured.is_some());
    }
}
