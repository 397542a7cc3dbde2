//! A validated run plan shortened in time when `DLBENCH_TIME_SCALE` asks (README test): the
//! factor and floors are `timescale`'s, a leaf, so that the plan imports it and not the other
//! way (the circle timescale -> run -> target -> medium -> rtt -> timescale).

use std::time::Duration;

use super::RunPlan;
use crate::timescale::{factor, times, SLOW_INVERSE, VAR};

impl RunPlan {
    /// Shorten the plan's phases and fault interval (no-op without the variable).
    pub fn scale_in_time(&mut self) -> anyhow::Result<()> {
        let Some(f) = factor()? else { return Ok(()) };
        self.nemesis_interval = times(self.nemesis_interval, f, Duration::from_secs(2));
        // A scaled phase never outgrows the phase as written.
        let written: Vec<Duration> = self.phases.iter().map(|w| w.duration).collect();
        let faulted: Vec<bool> = self.phases.iter().map(|w| self.faulted(w)).collect();
        let interval = self.nemesis_interval;
        for (w, &faulted) in self.phases.iter_mut().zip(&faulted) {
            w.duration = times(w.duration, f, Duration::from_millis(500));
            w.warmup = w.warmup.mul_f64(f);
            if faulted {
                // Still long enough for every fault asked for, as validation required as written.
                w.duration = w.duration.max(interval * 2);
            }
        }
        for i in (0..self.phases.len()).filter(|&i| faulted[i]) {
            // Plus a few seconds for an inverse that is slow in itself (a compose failover's
            // undo restarts a container and re-attaches it: 3-5 s), which at full length the
            // interval's half absorbs and at a 1 s hold would leave no time after the heal.
            let need = (self.shortest_fault_phase(&self.phases[i]) + SLOW_INVERSE).min(written[i]);
            self.phases[i].duration = self.phases[i].duration.max(need);
        }
        eprintln!("dlbench: {VAR}={f}: phases and faults shortened (README test mode)");
        Ok(())
    }
}
