//! `DLBENCH_TIME_SCALE`: shorten a run's time lengths by a factor, after the plan has been
//! validated as written. tests/it/readme.rs sets it to run every command the README and docs/
//! show quickly: a documented example that would be refused as written is refused here too
//! (validation sees the lengths you typed), and one that runs, runs shorter.
//!
//! Scaled: each phase's duration and warm-up, the nemesis interval, calibrate's --seconds,
//! the window of the loaded round trip a run measures before its phases.
//! A leaf: the run plan's own scaling (`RunPlan::scale_in_time`) calls it.
//! Floors keep a scaled run meaningful: a phase lasts at least 500 ms, the nemesis interval
//! stays at least 2 s (or what was given, if less) and a phase under faults at least two intervals and
//! the shortest that holds its faults plus 4 s for a slow inverse, calibrate's
//! measurements at least 1 s, the loaded round trip's window at least 200 ms. Nothing else (TTLs, timeouts, holds) changes.

use std::time::Duration;

pub const VAR: &str = "DLBENCH_TIME_SCALE";

/// What a scaled phase under faults keeps beyond the shortest that holds its faults.
pub const SLOW_INVERSE: Duration = Duration::from_secs(4);

/// The factor, when the variable is set; a value outside (0, 1] is refused.
pub fn factor() -> anyhow::Result<Option<f64>> {
    match std::env::var(VAR) {
        Err(_) => Ok(None),
        // Compose passes the variable through empty when the host has none.
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => match s.trim().parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(Some(f)),
            _ => anyhow::bail!("{VAR}={s:?}: give a factor in (0, 1], such as 0.1, or unset it"),
        },
    }
}

/// `d` times `f`, never below `floor` (or `d` itself, when shorter than the floor).
pub fn times(d: Duration, f: f64, floor: Duration) -> Duration {
    d.mul_f64(f).max(floor.min(d))
}

/// Shorten calibrate's measurement length.
pub fn scale_seconds(seconds: Duration) -> anyhow::Result<Duration> {
    Ok(match factor()? {
        Some(f) => times(seconds, f, Duration::from_secs(1)),
        None => seconds,
    })
}

/// Shorten the loaded round trip's window (`cluster::medium::rtt`), floor 200 ms: a few
/// hundred requests per connection still give a median and a p90.
pub fn scale_window(window: Duration) -> Duration {
    match factor() {
        Ok(Some(f)) => times(window, f, Duration::from_millis(200)),
        _ => window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_hold_and_nothing_grows() {
        assert_eq!(times(Duration::from_secs(30), 0.1, Duration::from_secs(2)), Duration::from_secs(3));
        assert_eq!(times(Duration::from_secs(10), 0.1, Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(times(Duration::from_secs(1), 0.1, Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(times(Duration::from_millis(300), 0.1, Duration::from_millis(500)), Duration::from_millis(300));
    }
}
