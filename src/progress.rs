//! Live progress: a bar per phase on a terminal, a plain line every 10 s elsewhere, and
//! nothing for short phases in CI logs.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::driver::{OnTick, Tick};

/// How progress is shown for one phase.
pub struct PhaseProgress {
    bar: Option<ProgressBar>,
}

struct Counts {
    ok: u64,
    failed: u64,
    last_line: Duration,
}

impl PhaseProgress {
    /// Start showing progress for `label` (e.g. "etcd hot-key") over `planned` time.
    pub fn start(label: &str, planned: Duration) -> (PhaseProgress, OnTick) {
        let counts = Arc::new(Mutex::new(Counts { ok: 0, failed: 0, last_line: Duration::ZERO }));
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(planned.as_secs().max(1));
            bar.set_style(
                ProgressStyle::with_template("{prefix:<18} [{bar:20}] {pos:>3}/{len}s {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar.set_prefix(label.to_string());
            let b = bar.clone();
            let on_tick: OnTick = Arc::new(move |t: &Tick| {
                let mut c = counts.lock().unwrap();
                c.ok += t.point.ok;
                c.failed += t.point.failed;
                b.set_position(t.elapsed.as_secs());
                b.set_message(format!(
                    "{} acq/s p99 {:.1}ms {} err",
                    t.point.ok,
                    t.point.p99_us as f64 / 1000.0,
                    c.failed
                ));
            });
            (PhaseProgress { bar: Some(bar) }, on_tick)
        } else {
            let label = label.to_string();
            let on_tick: OnTick = Arc::new(move |t: &Tick| {
                let mut c = counts.lock().unwrap();
                c.ok += t.point.ok;
                c.failed += t.point.failed;
                if t.elapsed >= c.last_line + Duration::from_secs(10) {
                    c.last_line = t.elapsed;
                    eprintln!(
                        "dlbench: {label} t={}s {} acquisitions, {} errors so far",
                        t.elapsed.as_secs(),
                        c.ok,
                        c.failed
                    );
                }
            });
            (PhaseProgress { bar: None }, on_tick)
        }
    }

    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
