//! Scaling curves: a backend · workload run at several client counts (`run --clients 1,2,4`),
//! read from the per-phase rows as throughput and p99 against clients, with the knee.
//!
//! **The knee** is the first point where the p99 grew by a larger factor than the throughput
//! since the previous point (`p99[i] / p99[i-1] > ops[i] / ops[i-1]`): from there, more
//! clients buy more waiting than work; the lock (or the machine) has saturated. A lock that
//! serialises every client on one key can have its knee at the second point.

use super::Summary;

/// One client count of a curve (repeats averaged).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub clients: usize,
    pub ops_per_sec: f64,
    pub p99_ms: f64,
    /// dlbench's resident memory at its highest in the phase(s), MiB.
    pub harness_peak_rss_mb: Option<f64>,
    /// Server CPU per acquisition, µs (local target).
    pub server_cpu_us_per_acq: Option<f64>,
}

/// One backend · workload over its client counts, in increasing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub backend: String,
    pub workload: String,
    pub points: Vec<Point>,
    /// Index into `points` of the knee, if there is one.
    pub knee: Option<usize>,
}

/// The knee of a series of (throughput, p99), in client order: the first index whose p99
/// grew by a larger factor than its throughput from the point before. Points with no
/// throughput or no latency are not compared.
pub fn knee(series: &[(f64, f64)]) -> Option<usize> {
    (1..series.len()).find(|&i| {
        let (t0, l0) = series[i - 1];
        let (t1, l1) = series[i];
        t0 > 0.0 && l0 > 0.0 && t1 > 0.0 && l1 / l0 > t1 / t0
    })
}

/// Every backend · workload that ran at two client counts or more.
pub fn curves(s: &Summary) -> Vec<Curve> {
    let mut out = Vec::new();
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        let mut names: Vec<&str> = Vec::new();
        for w in &b.workloads {
            if !names.contains(&w.name.as_str()) {
                names.push(&w.name);
            }
        }
        for n in names {
            let mut counts: Vec<usize> = b.workloads.iter().filter(|w| w.name == n).map(|w| w.clients).collect();
            counts.sort_unstable();
            counts.dedup();
            if counts.len() < 2 {
                continue;
            }
            let points: Vec<Point> = counts
                .iter()
                .map(|&c| {
                    let rows: Vec<_> = b.workloads.iter().filter(|w| w.name == n && w.clients == c).collect();
                    let k = rows.len() as f64;
                    let mean = |f: &dyn Fn(&super::WorkloadSummary) -> Option<f64>| {
                        let v: Vec<f64> = rows.iter().filter_map(|w| f(w)).collect();
                        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                    };
                    Point {
                        clients: c,
                        ops_per_sec: rows.iter().map(|w| w.ops_per_sec).sum::<f64>() / k,
                        p99_ms: rows.iter().map(|w| w.acquire_latency_us.p99 as f64 / 1000.0).sum::<f64>() / k,
                        harness_peak_rss_mb: rows.iter().filter_map(|w| w.harness_peak_rss_mb).reduce(f64::max),
                        server_cpu_us_per_acq: mean(&|w| w.server_cpu_us_per_acq),
                    }
                })
                .collect();
            let series: Vec<(f64, f64)> = points.iter().map(|p| (p.ops_per_sec, p.p99_ms)).collect();
            out.push(Curve { backend: b.name.clone(), workload: n.to_string(), knee: knee(&series), points });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_where_p99_outgrows_throughput() {
        // Throughput doubles with p99 flat, then flattens while p99 doubles: the knee is at
        // the third point.
        let s = [(1000.0, 1.0), (2000.0, 1.1), (2100.0, 2.2), (2150.0, 4.5)];
        assert_eq!(knee(&s), Some(2));
        // Linear scaling all the way (p99 grows slower than throughput): no knee.
        let linear = [(1000.0, 1.0), (1900.0, 1.2), (3700.0, 1.5), (7000.0, 2.0)];
        assert_eq!(knee(&linear), None);
        // A hot key serialises from the start: the knee at the second point.
        let hot = [(5000.0, 0.3), (5000.0, 0.6)];
        assert_eq!(knee(&hot), Some(1));
        // Too short, or nothing measured: no knee claimed.
        assert_eq!(knee(&[(1000.0, 1.0)]), None);
        assert_eq!(knee(&[(0.0, 0.0), (0.0, 5.0)]), None);
    }
}
