//! `summary.json`'s `target_costs` section: what the layer between the bench and the servers
//! costs on this target, measured once the target is up and before the phases
//! (`cluster::medium` measures it): the round trip of each protocol's smallest request to
//! each node, and the latency of a 4 KiB write + fdatasync on the media the servers' data
//! lives on. `compare` reads it to say what part of a compose-vs-local difference the
//! container layer explains.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A latency measured `n` times, or why it was not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figure {
    /// How many timed samples (after the warm-up ones); 0 when not measured.
    pub n: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_us: Option<f64>,
    /// Why there is no figure (the measurement never fails the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

impl Figure {
    /// The median and p90 of `samples_us` (nearest rank), rounded to 0.1 µs.
    pub fn of(samples_us: &[f64]) -> Figure {
        if samples_us.is_empty() {
            return Figure::missing("no sample was taken");
        }
        let mut s = samples_us.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| {
            let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
            (s[i] * 10.0).round() / 10.0
        };
        Figure { n: s.len() as u64, median_us: Some(at(0.5)), p90_us: Some(at(0.9)), not_measured: None }
    }

    pub fn missing(why: impl Into<String>) -> Figure {
        Figure { n: 0, median_us: None, p90_us: None, not_measured: Some(why.into()) }
    }
}

/// Where a client's packets go on their way to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Path {
    /// The local target's own ports on 127.0.0.1.
    Loopback,
    /// The local target through dlbench's fault proxies (faults that need them were asked).
    LoopbackProxy,
    /// The bench inside the compose network, by service name (the Docker bridge).
    ComposeNetwork,
    /// The bench on the host, through a port the compose service publishes on 127.0.0.1
    /// (the bridge, behind Docker's port forwarding).
    PublishedPort,
}

impl Path {
    pub fn words(self) -> &'static str {
        match self {
            Path::Loopback => "loopback",
            Path::LoopbackProxy => "loopback via proxy",
            Path::ComposeNetwork => "compose network",
            Path::PublishedPort => "published port",
        }
    }
}

/// One node's round trip: the smallest request of its protocol, sent in sequence on one
/// connection already open and warmed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoundTrip {
    /// The server family (redis, redlock, etcd, zookeeper, postgres, mariadb).
    pub service: String,
    /// The endpoint the run's clients use.
    pub node: String,
    pub via: Path,
    /// The request timed (e.g. `PING`, `SELECT 1`).
    pub request: String,
    #[serde(flatten)]
    pub figure: Figure,
}

/// A server family's round trip under load: `connections_per_node` connections to each of
/// its `nodes` at once, each sending the smallest request in sequence, as a run's clients
/// load the path (what a packet costs when the CPUs are busy, which the idle round trip does
/// not show: a bridge's veth pairs cost CPU that loopback does not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadedRoundTrip {
    pub service: String,
    pub nodes: usize,
    pub connections_per_node: usize,
    pub via: Path,
    pub request: String,
    /// Requests answered per second by all the connections together, from the first timed
    /// request to the last answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<f64>,
    /// Each request's latency, all connections pooled.
    #[serde(flatten)]
    pub figure: Figure,
}

/// What holds a file: the host's own file system, a Docker volume, or a container's
/// writable layer (its storage driver: overlayfs, fuse-overlayfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MediumKind {
    Host,
    Volume,
    ContainerLayer,
}

impl MediumKind {
    pub fn words(self) -> &'static str {
        match self {
            MediumKind::Host => "host",
            MediumKind::Volume => "volume",
            MediumKind::ContainerLayer => "container layer",
        }
    }
}

/// The latency of a 4 KiB write followed by fdatasync on one medium.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fsync {
    pub kind: MediumKind,
    /// The directory written in (inside `container`, when there is one).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// How it was timed (in-process `pwrite` + `fdatasync`, or `dd ... conv=notrunc,fdatasync`
    /// in the container, by dd's own clock).
    pub method: String,
    #[serde(flatten)]
    pub figure: Figure,
}

/// Where one server family keeps its data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DataOn {
    pub kind: MediumKind,
    pub path: String,
}

/// The target's layer, measured: round trips per node, fsync per medium, and which medium
/// each server family's data is on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetCosts {
    pub round_trips: Vec<RoundTrip>,
    /// One per server family: its round trip under load (absent from runs before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded: Vec<LoadedRoundTrip>,
    pub fsync: Vec<Fsync>,
    /// By server family.
    #[serde(default)]
    pub data_on: BTreeMap<String, DataOn>,
    /// How long the whole measurement took, seconds.
    pub took_s: f64,
}

impl TargetCosts {
    /// The round trips of one server family's nodes that were measured.
    pub fn round_trips_of(&self, service: &str) -> Vec<&RoundTrip> {
        self.round_trips.iter().filter(|r| r.service == service).collect()
    }

    /// The loaded round trip of one server family, when it was taken.
    pub fn loaded_of(&self, service: &str) -> Option<&LoadedRoundTrip> {
        self.loaded.iter().find(|l| l.service == service)
    }

    /// The fsync figure of the medium `service`'s data is on, with that medium.
    pub fn fsync_of(&self, service: &str) -> Option<&Fsync> {
        let on = self.data_on.get(service)?;
        self.fsync.iter().find(|f| f.kind == on.kind)
    }

    /// Several runs' costs as one (`compare` on a directory of runs): each figure is the
    /// median over the runs that measured it of their medians (and p90s, and rates), so one
    /// run whose measurement landed in a busy moment does not decide the note. Items are
    /// matched by family and position (a local run's ports differ from run to run), the
    /// media by kind; the shape (nodes, paths, where data is) is the first run's. A figure
    /// measured in fewer than half the runs is not measured, with how many had it.
    pub fn pooled(runs: &[&TargetCosts]) -> Option<TargetCosts> {
        let first = *runs.first()?;
        let mut out = first.clone();
        for (i, r) in out.round_trips.iter_mut().enumerate() {
            let k = first.round_trips[..i].iter().filter(|x| x.service == r.service).count();
            let same = runs.iter().filter_map(|t| t.round_trips.iter().filter(|x| x.service == r.service).nth(k)).map(|x| &x.figure);
            r.figure = Figure::median_of(same.collect(), runs.len());
        }
        for l in out.loaded.iter_mut() {
            let same: Vec<&LoadedRoundTrip> = runs.iter().filter_map(|t| t.loaded_of(&l.service)).collect();
            l.figure = Figure::median_of(same.iter().map(|x| &x.figure).collect(), runs.len());
            let rates: Vec<f64> = same.iter().filter(|x| x.figure.median_us.is_some()).filter_map(|x| x.per_second).collect();
            l.per_second = l.figure.median_us.and(median(&rates));
        }
        for f in out.fsync.iter_mut() {
            let same = runs.iter().filter_map(|t| t.fsync.iter().find(|x| x.kind == f.kind)).map(|x| &x.figure);
            f.figure = Figure::median_of(same.collect(), runs.len());
        }
        out.took_s = median(&runs.iter().map(|t| t.took_s).collect::<Vec<_>>()).unwrap_or(first.took_s);
        Some(out)
    }
}

/// `compare`'s median (the mean of the middle two for an even count); `None` when empty,
/// where that one says 0.
fn median(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| crate::stats::samples::median(xs))
}

impl Figure {
    /// One figure from several runs' figures of the same thing, out of `runs` runs: the
    /// median of the measured ones' medians and p90s, `n` their samples together.
    pub fn median_of(figs: Vec<&Figure>, runs: usize) -> Figure {
        let measured: Vec<&Figure> = figs.iter().copied().filter(|f| f.median_us.is_some()).collect();
        if measured.len() * 2 < runs || measured.is_empty() {
            let why = figs.iter().find_map(|f| f.not_measured.clone()).unwrap_or_else(|| "not recorded".into());
            return Figure::missing(format!("measured in {} of {runs} runs ({why})", measured.len()));
        }
        let m = |get: fn(&Figure) -> Option<f64>| median(&measured.iter().filter_map(|f| get(f)).collect::<Vec<_>>()).map(|v| (v * 10.0).round() / 10.0);
        Figure { n: measured.iter().map(|f| f.n).sum(), median_us: m(|f| f.median_us), p90_us: m(|f| f.p90_us), not_measured: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p90_by_nearest_rank() {
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let f = Figure::of(&s);
        assert_eq!((f.n, f.median_us, f.p90_us), (10, Some(5.0), Some(9.0)));
        let f = Figure::of(&[3.0]);
        assert_eq!((f.median_us, f.p90_us), (Some(3.0), Some(3.0)));
        let f = Figure::of(&[]);
        assert_eq!((f.n, f.median_us), (0, None));
        assert!(f.not_measured.is_some(), "no samples is said, never a 0");
    }

    fn loaded(us: f64, rate: f64) -> LoadedRoundTrip {
        let figure = Figure { n: 100, median_us: Some(us), p90_us: Some(2.0 * us), not_measured: None };
        LoadedRoundTrip { service: "redis".into(), nodes: 1, connections_per_node: 8, via: Path::Loopback, request: "PING".into(), per_second: Some(rate), figure }
    }

    fn run(rtt: f64, loaded_us: f64, rate: f64, fsync: Option<f64>) -> TargetCosts {
        let fig = |v: f64| Figure { n: 200, median_us: Some(v), p90_us: Some(v + 1.0), not_measured: None };
        let rt = |port: u16| RoundTrip { service: "redis".into(), node: format!("127.0.0.1:{port}"), via: Path::Loopback, request: "PING".into(), figure: fig(rtt) };
        TargetCosts {
            // A local run's ports differ from run to run: matched by position, not by name.
            round_trips: vec![rt((rtt as u16) + 1000), rt((rtt as u16) + 2000)],
            loaded: vec![loaded(loaded_us, rate)],
            fsync: vec![Fsync { kind: MediumKind::Host, path: "/d".into(), container: None, method: "m".into(), figure: fsync.map(fig).unwrap_or_else(|| Figure::missing("busy")) }],
            data_on: BTreeMap::new(),
            took_s: 1.0,
        }
    }

    #[test]
    fn pooled_runs_take_each_figures_median_so_one_busy_run_does_not_decide() {
        // The third run's loaded burst landed in a busy moment (5 ms, 2k req/s): the median
        // of the three ignores it, where the first run alone (or the mean) would not.
        let runs = [run(50.0, 200.0, 20000.0, Some(900.0)), run(60.0, 240.0, 18000.0, Some(1100.0)), run(70.0, 5000.0, 2000.0, None)];
        let p = TargetCosts::pooled(&runs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(p.round_trips.len(), 2);
        assert_eq!(p.round_trips[1].figure.median_us, Some(60.0), "matched by position across differing ports");
        assert_eq!(p.loaded[0].figure.median_us, Some(240.0));
        assert_eq!(p.loaded[0].figure.p90_us, Some(480.0));
        assert_eq!(p.loaded[0].per_second, Some(18000.0));
        assert_eq!(p.loaded[0].figure.n, 300);
        // Measured in two of three: the mean of the two.
        assert_eq!(p.fsync[0].figure.median_us, Some(1000.0));
        // Measured in one of three: not measured, saying so.
        let runs = [run(50.0, 200.0, 1.0, Some(900.0)), run(50.0, 200.0, 1.0, None), run(50.0, 200.0, 1.0, None)];
        let p = TargetCosts::pooled(&runs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(p.fsync[0].figure.median_us, None);
        assert_eq!(p.fsync[0].figure.not_measured.as_deref(), Some("measured in 1 of 3 runs (busy)"));
        assert!(TargetCosts::pooled(&[]).is_none());
    }
}
