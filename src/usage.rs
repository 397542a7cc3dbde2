//! Machine usage over time (not the protected resource, which is `dlbench_core::Resource`):
//! once a second, the harness's resident memory and open file descriptors and the memory of every server process dlbench started, appended to
//! `resources.jsonl` as the run goes (a killed run keeps what was sampled). At the end, each
//! series becomes a figure in `summary.json`: its peak, and its growth per hour after a
//! warm-up, the number a soak is judged by (a leak is a slope, not a peak).
//!
//! Server memory is the proportional set size (PSS) summed over the server's process group:
//! PostgreSQL runs a process per connection that all map the same shared buffers, and RSS
//! would count them once per process.
//!
//! glibc's malloc keeps freed memory resident: a chunk freed in the middle of an arena stays
//! in the process until something asks for it back. Under a soak's churn (connections and
//! sessions reopened after every fault, per-phase histograms) that free memory grew the RSS
//! by 2-3 MiB in a few minutes while the bytes in use stayed flat (measured on etcd with
//! `malloc_stats`; `malloc_trim(0)` took the RSS back down by the same amount). So the sampler
//! hands free pages back every [`TRIM_EVERY`], and records the allocator's bytes in use beside
//! the RSS: a leak is memory in use, which no trim can release.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::summary::usage::{UsageSummary, Trend};

/// One sample.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Seconds since sampling began.
    pub t: f64,
    /// The harness's resident set size, KiB.
    pub rss_kb: u64,
    /// The harness's open file descriptors.
    pub fds: u64,
    /// Bytes the harness's allocator has handed out and not got back, KiB (glibc only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_kb: Option<u64>,
    /// Each running server's memory (PSS over its process group), KiB, by node name.
    #[serde(default)]
    pub servers: BTreeMap<String, u64>,
}

/// The warm-up used for a run of `seconds`: 5 minutes, or a twelfth of a shorter run.
pub fn warmup_for(seconds: f64) -> f64 {
    (seconds / 12.0).min(300.0)
}

/// Summarise a series of (seconds, value) points.
pub fn trend(points: &[(f64, f64)], warmup_s: f64) -> Trend {
    let Some(&(_, first)) = points.first() else { return Trend::default() };
    let after: Vec<(f64, f64)> = points.iter().copied().filter(|(t, _)| *t >= warmup_s).collect();
    let peak = points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    let last = points.last().map(|p| p.1).unwrap_or(first);
    let n = after.len() as f64;
    let mean = if after.is_empty() { last } else { after.iter().map(|p| p.1).sum::<f64>() / n };
    let (min_a, max_a) = after.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let slope = (after.len() >= 10).then(|| {
        let mt = after.iter().map(|p| p.0).sum::<f64>() / n;
        let num: f64 = after.iter().map(|(t, v)| (t - mt) * (v - mean)).sum();
        let den: f64 = after.iter().map(|(t, _)| (t - mt) * (t - mt)).sum();
        if den > 0.0 { num / den * 3600.0 } else { 0.0 }
    });
    let round = |x: f64| (x * 100.0).round() / 100.0;
    Trend {
        first: round(first),
        peak: round(peak),
        last: round(last),
        mean: round(mean),
        growth_per_hour: slope.map(round),
        growth_pct_per_hour: slope.filter(|_| mean > 0.0).map(|s| round(s / mean * 100.0)),
        min_after_warmup: if after.is_empty() { 0.0 } else { round(min_a) },
        max_after_warmup: if after.is_empty() { 0.0 } else { round(max_a) },
    }
}

/// Summarise samples.
pub fn summarise(samples: &[Sample]) -> UsageSummary {
    let seconds = samples.last().map(|s| s.t).unwrap_or(0.0);
    let warmup_s = warmup_for(seconds);
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> { samples.iter().filter_map(|s| f(s).map(|v| (s.t, v))).collect() };
    let names: std::collections::BTreeSet<&String> = samples.iter().flat_map(|s| s.servers.keys()).collect();
    UsageSummary {
        samples: samples.len() as u64,
        seconds: (seconds * 10.0).round() / 10.0,
        warmup_s: (warmup_s * 10.0).round() / 10.0,
        harness_rss_mb: trend(&series(&|s| Some(s.rss_kb as f64 / 1024.0)), warmup_s),
        harness_fds: trend(&series(&|s| Some(s.fds as f64)), warmup_s),
        harness_heap_mb: samples.iter().any(|s| s.heap_kb.is_some()).then(|| trend(&series(&|s| s.heap_kb.map(|kb| kb as f64 / 1024.0)), warmup_s)),
        servers_mb: names
            .into_iter()
            .map(|n| (n.clone(), trend(&series(&|s| s.servers.get(n).map(|kb| *kb as f64 / 1024.0)), warmup_s)))
            .collect(),
    }
}

/// One line for the terminal.
pub fn line(r: &UsageSummary) -> String {
    let servers: f64 = r.servers_mb.values().map(|t| t.peak).sum();
    // A slope over a minute, scaled to an hour, says nothing: only long runs show a trend
    // (the one rule, `UsageSummary::growth`, the page's too).
    let growth = match (r.growth(&r.harness_rss_mb), r.no_trend_reason()) {
        (Some((_, Some(g))), _) => format!(", {g:+.1}%/h after {:.0}s", r.warmup_s),
        (_, Some(why)) => format!(" ({why})"),
        _ => " (no growth trend: too few samples after the warm-up)".to_string(),
    };
    // Servers this process cannot see (another host, container or cgroup) are said so, not
    // summed to a "0 MiB".
    let servers = if r.servers_mb.is_empty() {
        "servers not sampled (not processes of this host's target)".to_string()
    } else {
        format!(
            "servers {:.0} MiB at their peaks ({} node{})",
            servers.max(0.0),
            r.servers_mb.len(),
            if r.servers_mb.len() == 1 { "" } else { "s" }
        )
    };
    format!(
        "resources: dlbench {:.0} MiB peak{growth}, {:.0}-{:.0} open files; {servers}; {} samples in resources.jsonl",
        r.harness_rss_mb.peak,
        r.harness_fds.min_after_warmup.min(r.harness_fds.first),
        r.harness_fds.peak,
        r.samples
    )
}

/// Read a `resources.jsonl`; a torn last line (a killed run) is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

fn statm_rss_kb(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_kb())
}

/// This process's resident set size now, KiB.
pub fn self_rss_kb() -> Option<u64> {
    statm_rss_kb("self")
}

/// Keep large blocks out of the heap: glibc serves blocks of 128 KiB and more by mmap, but
/// raises that threshold to the size of any such block freed, after which every phase's
/// latency histograms (about 170 KiB each, dozens per phase) are carved from the arenas,
/// zeroed in full (resident) and, once freed, left there between smaller chunks. Fixed at
/// 128 KiB they stay mmapped: resident only where written, and unmapped when freed.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt has no preconditions; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// How often the sampler gives the allocator's free pages back to the system.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Give free heap pages back to the system (glibc's `malloc_trim`, which since 2.8 also
/// releases whole free pages inside the arenas, not only the top of the heap). It holds each
/// arena's lock while it walks that arena's free chunks, hence every few seconds and not at
/// every sample.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The allocator's bytes in use, KiB: small chunks plus mmapped ones (glibc's `mallinfo2`).
pub fn heap_in_use_kb() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 has no preconditions.
        let m = unsafe { libc::mallinfo2() };
        Some(((m.uordblks + m.hblkhd) / 1024) as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// A deliberate leak for showing that the soak's judgment fails on one: this many KiB a
/// second, written to so they are resident, never freed.
pub const LEAK_HOOK: &str = "DLBENCH_TEST_HOOK_LEAK_KB_PER_S";

fn leak_hook() -> usize {
    std::env::var(LEAK_HOOK).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 / 1024 } else { 4 }
}

/// Proportional set size of one process, KiB (falls back to RSS where smaps_rollup is absent).
fn pss_kb(pid: &str) -> Option<u64> {
    match std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        Ok(s) => s.lines().find_map(|l| l.strip_prefix("Pss:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()),
        Err(_) => statm_rss_kb(pid),
    }
}

/// The process group of a process, from `/proc/PID/stat` (after the command name, which may
/// hold spaces, the fields are: state, ppid, pgrp).
fn pgrp(pid: &str) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Take one sample of the harness and of the server process groups `groups` (leader pid, name).
pub fn sample(t: f64, groups: &[(i32, String)]) -> Sample {
    let rss_kb = statm_rss_kb("self").unwrap_or(0);
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0);
    let heap_kb = heap_in_use_kb();
    let mut servers = BTreeMap::new();
    if !groups.is_empty() {
        let by_group: BTreeMap<i32, &String> = groups.iter().map(|(p, n)| (*p, n)).collect();
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for e in procs.flatten() {
                let name = e.file_name();
                let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
                let Some(node) = pgrp(pid).and_then(|g| by_group.get(&g)) else { continue };
                if let Some(kb) = pss_kb(pid) {
                    *servers.entry((*node).clone()).or_insert(0) += kb;
                }
            }
        }
    }
    Sample { t, rss_kb, fds, heap_kb, servers }
}

/// Samples once a second into `resources.jsonl` until stopped; `groups` names the server
/// process groups to follow (asked again each second: a killed node restarts with a new pid).
pub struct Sampler {
    stop: CancellationToken,
    task: Option<std::thread::JoinHandle<()>>,
    pub path: PathBuf,
}

impl Sampler {
    /// Start sampling on a thread of its own, so a busy runtime cannot delay the samples.
    pub fn start(path: PathBuf, groups: fn() -> Vec<(i32, String)>) -> std::io::Result<Sampler> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let stop = CancellationToken::new();
        let s2 = stop.clone();
        let task = std::thread::Builder::new().name("dlbench-resources".into()).spawn(move || {
            // Samples go to the file only: kept in memory they would be the very slope a soak
            // looks for (a few hundred bytes a second).
            let t0 = Instant::now();
            let mut next = t0;
            let mut trimmed = t0;
            let leak = leak_hook();
            loop {
                if leak > 0 {
                    std::mem::forget(vec![1u8; leak * 1024]);
                }
                if trimmed.elapsed() >= TRIM_EVERY {
                    release_free_memory();
                    trimmed = Instant::now();
                }
                let s = sample(t0.elapsed().as_secs_f64(), &groups());
                if let Ok(line) = serde_json::to_string(&s) {
                    // Flushed every line: a killed run keeps every sample taken.
                    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
                }
                next += Duration::from_secs(1);
                // Sleep in short steps so stopping is prompt.
                while Instant::now() < next {
                    if s2.is_cancelled() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50).min(next.saturating_duration_since(Instant::now())));
                }
                if s2.is_cancelled() {
                    return;
                }
            }
        })?;
        Ok(Sampler { stop, task: Some(task), path })
    }

    /// Stop and summarise what was sampled.
    pub fn finish(mut self) -> UsageSummary {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.join();
        }
        summarise(&read(&self.path).unwrap_or_default())
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_series_has_no_growth_and_a_leak_has_its_slope() {
        // 100 MB flat with noise, after a warm-up climb: no growth.
        let flat: Vec<(f64, f64)> = (0..600).map(|i| (i as f64, if i < 50 { i as f64 * 2.0 } else { 100.0 + (i % 7) as f64 * 0.1 })).collect();
        let t = trend(&flat, 50.0);
        assert!(t.growth_pct_per_hour.unwrap().abs() < 1.0, "{t:?}");
        assert_eq!(t.peak, 100.6);
        // 1 MB a minute on 100 MB: 60 MB an hour.
        let leak: Vec<(f64, f64)> = (0..600).map(|i| (i as f64, 100.0 + i as f64 / 60.0)).collect();
        let t = trend(&leak, 0.0);
        assert!((t.growth_per_hour.unwrap() - 60.0).abs() < 0.01, "{t:?}");
        assert!(t.growth_pct_per_hour.unwrap() > 40.0, "{t:?}");
        // Too few samples after the warm-up: no slope claimed.
        assert_eq!(trend(&leak[..20], 15.0).growth_per_hour, None);
    }

    /// The terminal line asks the same rule as the page (`UsageSummary::growth`).
    #[test]
    fn the_terminal_shows_growth_only_from_long_runs() {
        let t = Trend { peak: 44.0, growth_per_hour: Some(3145.8), growth_pct_per_hour: Some(7489.9), ..Trend::default() };
        let usage = |seconds: f64| UsageSummary { seconds, harness_rss_mb: t.clone(), ..UsageSummary::default() };
        assert!(line(&usage(49.0)).contains("run too short for a growth trend"), "{}", line(&usage(49.0)));
        assert!(!line(&usage(49.0)).contains("7489.9"));
        assert!(line(&usage(3600.0)).contains("+7489.9%/h"), "{}", line(&usage(3600.0)));
    }

    #[test]
    fn sampling_sees_this_process_and_a_child_group() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep").arg("5").process_group(0).spawn().unwrap();
        let pid = child.id() as i32;
        let s = sample(0.0, &[(pid, "sleeper".into())]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(s.rss_kb > 1000, "{s:?}");
        assert!(s.fds >= 3, "{s:?}");
        assert!(s.servers.get("sleeper").copied().unwrap_or(0) > 0, "{s:?}");
    }
}
