//! The tables every renderer draws, defined once: a `Table` as data (its header, the
//! columns that align left, the rows of cells) that Markdown and HTML draw alike, and the
//! rows, headers and notes of the run's tables (properties, shards, cost, scaling) that
//! `text` and `html` both render. The backends' order (by family) is decided here too.

use std::fmt::Write as _;

use crate::judgement::Verdict;
use crate::summary::{BackendSummary, Summary};

/// Text escaped for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub struct Table {
    pub header: Vec<String>,
    /// The columns aligned left (text); the others are figures, aligned right.
    pub left: Vec<usize>,
    pub rows: Vec<Vec<String>>,
    /// Where Markdown shows a shorter table than the page: its own header, over the first
    /// `header.len()` columns only.
    pub markdown_header: Option<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str], left: &[usize], rows: Vec<Vec<String>>) -> Table {
        Table { header: header.iter().map(|h| h.to_string()).collect(), left: left.to_vec(), rows, markdown_header: None }
    }

    /// The header line, the alignment line and one line per row, each ended by a newline.
    pub fn markdown(&self) -> String {
        let header = self.markdown_header.as_ref().unwrap_or(&self.header);
        let n = header.len();
        let mut s = format!("| {} |\n|", header.join(" | "));
        for i in 0..n {
            s.push_str(if self.left.contains(&i) { "---|" } else { "---:|" });
        }
        s.push('\n');
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r[..n.min(r.len())].join(" | "));
        }
        s
    }

    /// A scrolling `<table>`: a header row, then the rows, left columns classed `l`.
    pub fn html(&self) -> String {
        let mut h = String::from("<div class=\"scroll\"><table><tr>");
        for c in &self.header {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>");
        for r in &self.rows {
            h.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let _ = write!(h, "<td{}>{}</td>", if self.left.contains(&i) { " class=\"l\"" } else { "" }, esc(c));
            }
            h.push_str("</tr>");
        }
        h.push_str("</table></div>");
        h
    }
}

/// The judgement's one-cell answer (`-` where none was made).
pub(super) fn verdict_cell(v: Option<&Verdict>) -> String {
    v.map_or_else(|| "-".into(), |v| v.headline.clone())
}

/// The family a backend's rows are grouped under ([`BackendSummary::family`]).
pub(crate) fn family(b: &BackendSummary) -> &'static str {
    b.family()
}

/// The backends in the table's order ([`Summary::by_family`]).
pub(crate) fn by_family(s: &Summary) -> Vec<&BackendSummary> {
    s.by_family()
}

/// Items in family order, each with the heading to show before it: its family where the
/// family changes, when the items span more than one (one family needs no headings).
pub(crate) fn with_headings<T>(items: Vec<(&'static str, T)>) -> Vec<(Option<&'static str>, T)> {
    let grouped = items.iter().any(|(f, _)| *f != items[0].0);
    let mut last = None;
    items
        .into_iter()
        .map(|(f, x)| {
            let heading = (grouped && last != Some(f)).then_some(f);
            last = Some(f);
            (heading, x)
        })
        .collect()
}

pub const PROPERTIES_HEADER: [&str; 7] = [
    "family",
    "design",
    "mutual exclusion (verdict)",
    "acq/s",
    "availability under faults",
    "expiry: holder gone -> next grant",
    "reentrancy: the holder acquires again",
];
pub const PROPERTIES_NOTE: &str = "The four properties a distributed lock is judged by, each as this run measured it: \
mutual exclusion is the verdict (\"weak\" when holders were inside too little of the time to see a second one); \
availability is the grant rate while faults were applied against the rate without them, and the time from the last \
heal to the next grant (no fault, no figure); expiry is the time from a holder vanishing without a release \
(keep-alives stopped, connection dropped where the lock lives on one) to another client's grant; reentrancy is what \
a second acquire by the holder did (granted with a hold count, granted without one so the first release frees it, \
or blocked until its 500 ms wait ran out). Expiry and reentrancy are measured only with `run --properties`.";

/// One row per backend (grouped by family) of the four-properties table.
pub fn properties_rows(s: &Summary) -> Vec<[String; 7]> {
    let unmeasured = || "not measured (run --properties)".to_string();
    by_family(s)
        .into_iter()
        .filter(|b| b.failure.is_none())
        .map(|b| {
            let avail = match b.verdict.as_ref() {
                Some(v) => match (&v.availability, &v.availability_rate, &v.recovery) {
                    (Some(word), Some(rate), Some(rec)) => format!("{word}: {rate}; {rec}"),
                    _ => v.availability_note.clone().unwrap_or_else(|| "not measured".into()),
                },
                None => "not measured".into(),
            };
            let p = b.properties.as_ref();
            let expiry = p.map_or_else(unmeasured, |p| match p.expiry_ms {
                Some(ms) => format!("{:.2} s (TTL {:.0} s)", ms as f64 / 1000.0, p.ttl_ms as f64 / 1000.0),
                None => format!("not measured: {}", p.errors.join("; ")),
            });
            let re = p.map_or_else(unmeasured, |p| p.reentrancy.clone().unwrap_or_else(|| format!("not measured: {}", p.errors.join("; "))));
            [family(b).to_string(), b.name.clone(), verdict_cell(b.verdict.as_ref()), workload_rates(b), avail, expiry, re]
        })
        .collect()
}

/// A backend's acquisition rate, one figure per workload, each labelled with its workload
/// when there is more than one: rates of different workloads never pooled into one mean
/// (hot-key's 221/s and many-keys' 3008/s are not "1614"). Repeats of a workload give their
/// mean, said so.
pub(crate) fn workload_rates(b: &BackendSummary) -> String {
    let mut names: Vec<&str> = Vec::new();
    for w in &b.workloads {
        if !names.contains(&w.name.as_str()) {
            names.push(&w.name);
        }
    }
    let cells: Vec<String> = names
        .iter()
        .map(|n| {
            let rates: Vec<f64> = b.workloads.iter().filter(|w| w.name == *n).map(|w| w.ops_per_sec).collect();
            let mean = rates.iter().sum::<f64>() / rates.len() as f64;
            let reps = if rates.len() > 1 { format!(", mean of {}", rates.len()) } else { String::new() };
            match (names.len(), reps.is_empty()) {
                (1, true) => format!("{mean:.0}"),
                (1, false) => format!("{mean:.0} ({})", &reps[2..]),
                _ => format!("{mean:.0} ({n}{reps})"),
            }
        })
        .collect();
    if cells.is_empty() { "-".into() } else { cells.join(", ") }
}

pub const SHARD_HEADER: [&str; 8] = ["shard", "run", "clients", "acq/s", "acquired", "driver lag p99 ms", "window starts +ms", "clock offset ms"];
pub const SHARD_NOTE: &str = "Each shard of a merged run (`run --shard I/N`, then `merge`): its own rate, how late its \
driver's timers fired (the load host as a bottleneck) and how long after the earliest shard its measured window began, \
so a slow or late load host shows instead of being averaged away. Clock offset: the resource server's clock minus the \
shard's (least-delay round trip of eight), when the shards ran their sections on one (`--resource`); not measured \
otherwise, and then overlaps across hosts rest on the hosts' clock sync.";

/// The shards a merged result adds up from, one row each.
pub fn shard_rows(s: &Summary) -> Vec<[String; 8]> {
    s.shards
        .iter()
        .map(|r| {
            [
                r.shard.clone(),
                r.run_id.clone(),
                r.clients.to_string(),
                format!("{:.1}", r.ops_per_sec),
                r.acquired.to_string(),
                format!("{:.1}", r.driver_lag_p99_ms),
                format!("{:.1}", r.start_offset_ms),
                r.clock_offset_ms.map_or("not measured".to_string(), |o| format!("{o:+.2}")),
            ]
        })
        .collect()
}

/// The columns of the cost-per-acquisition table.
pub const COST_HEADER: [&str; 7] = ["backend", "workload", "clients", "acq/s", "server CPU µs/acq", "dlbench CPU µs/acq", "server counters per acq"];

/// What the server columns say where dlbench did not start the servers.
pub const NOT_LOCAL: &str = "not measured: not the local target";

/// What the server CPU column says where a server was restarted in the window.
const RESTARTED: &str = "- (server restarted)";

/// The fault that restarted a server in a phase's window (a kill, a failover, a power loss), if one did:
/// the killed processes' CPU went with them and the servers' counters started again, so
/// the server's cost over that window is not a figure.
fn restarted_in(w: &crate::summary::WorkloadSummary) -> Option<String> {
    w.faults_applied().into_iter().find(|f| f.starts_with("kill") || f.starts_with("failover") || f.starts_with("power-loss"))
}

/// One server counter per acquisition in the unit that fits it: bytes as bytes, KiB or MiB,
/// counts with the digits their size needs (`0.0004 WAL bytes` is never `0.000`).
fn counter_cell(name: &str, v: f64) -> String {
    let bytes = crate::stats::fmt_bytes(v);
    match name {
        "wal_bytes" => format!("{bytes} of WAL"),
        "net_bytes" => format!("{bytes} on the wire"),
        _ => format!("{} {}", crate::stats::fmt_amount(v), counter_label(name)),
    }
}

fn counter_label(name: &str) -> &str {
    match name {
        "wal_fsyncs" => "WAL fsyncs",
        "wal_bytes" => "WAL bytes",
        "wal_syncs" => "WAL syncs",
        "net_bytes" => "bytes on the wire",
        other => other,
    }
}

/// One row per backend · workload phase: server and dlbench CPU per acquisition and the
/// servers' own counters; empty when no phase measured its cost.
pub fn cost_rows(s: &Summary) -> Vec<[String; 7]> {
    let local = s.target == "local";
    let mut rows = Vec::new();
    for b in s.backends.iter().filter(|b| b.failure.is_none()) {
        for w in &b.workloads {
            if w.dlbench_cpu_us_per_acq.is_none() && w.server_cpu_us_per_acq.is_none() {
                continue;
            }
            let restarted = restarted_in(w);
            let server = match w.server_cpu_us_per_acq {
                Some(_) if restarted.is_some() => RESTARTED.into(),
                Some(v) => format!("{v:.1}"),
                None if b.name == "memory" => "- (no server)".into(),
                None if !local => NOT_LOCAL.into(),
                None => "-".into(),
            };
            let counters = if let Some(f) = restarted.filter(|_| !w.server_counters_per_acq.is_empty()) {
                format!("- (restarted by {f}: counters started again)")
            } else if w.server_counters_per_acq.is_empty() {
                if local || b.name == "memory" { "-".to_string() } else { NOT_LOCAL.to_string() }
            } else {
                w.server_counters_per_acq.iter().map(|(k, v)| counter_cell(k, *v)).collect::<Vec<_>>().join(", ")
            };
            rows.push([
                b.name.clone(),
                w.name.clone(),
                w.clients.to_string(),
                format!("{:.0}", w.ops_per_sec),
                server,
                w.dlbench_cpu_us_per_acq.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                counters,
            ]);
        }
    }
    rows
}

/// The explanation under the cost table.
pub const COST_NOTE: &str = "Over each phase's measured window, divided by its successful acquisitions. Server CPU: \
     utime + stime of every process of the backend's servers, their descendants and the children they reaped \
     (from /proc), measured on the local target only, where dlbench started the servers. \
     dlbench CPU: this process over the same window, for comparison. Counters: what each server reports \
     cheaply (etcd WAL fsyncs from /metrics, summed over its nodes; PostgreSQL pg_stat_wal bytes and syncs; \
     Redis and Redlock INFO total_net_input_bytes + total_net_output_bytes, summed over the nodes). \
     Where a fault restarted a server in the window (kill, failover, power-loss), the server's figures are not given: the killed \
     processes' CPU left with them and its counters started again.";

/// The scaling table's columns.
pub const SCALING_HEADER: [&str; 8] = ["backend", "workload", "clients", "acq/s", "p99 ms", "dlbench peak RSS MiB", "server CPU µs/acq", "knee"];

/// The explanation under the scaling table.
pub const SCALING_NOTE: &str = "The knee: the first client count whose p99 grew by a larger factor than its throughput since the previous \
     count (marked on the scaling charts). dlbench peak RSS: the harness's resident memory at its highest during that phase \
     (sampled each second).";

/// The scaling table's rows: per backend · workload swept over client counts, each point's
/// throughput, p99, dlbench's peak memory, server CPU, and whether it is the knee (the
/// last cell, "knee" or empty). Both renderers read these cells.
pub fn scaling_rows(s: &Summary) -> Vec<[String; 8]> {
    let mut rows = Vec::new();
    for c in crate::summary::scaling::curves(s) {
        for (i, p) in c.points.iter().enumerate() {
            rows.push([
                c.backend.clone(),
                c.workload.clone(),
                p.clients.to_string(),
                format!("{:.0}", p.ops_per_sec),
                format!("{:.2}", p.p99_ms),
                p.harness_peak_rss_mb.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                p.server_cpu_us_per_acq.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                if c.knee == Some(i) { "knee".into() } else { String::new() },
            ]);
        }
    }
    rows
}

/// The target's measured costs in three lines (terminal, `summary.md`, the page's run
/// metadata): the round trip per service, idle and under load, the fsync per medium and where each service's
/// data is. A figure not taken reads "not measured", never a number.
pub fn target_costs_lines(c: &crate::summary::medium::TargetCosts) -> Vec<String> {
    use crate::stats::fmt_micros;
    let mut services: Vec<String> = Vec::new();
    let mut vias: Vec<&str> = Vec::new();
    for r in &c.round_trips {
        if !services.contains(&r.service) {
            services.push(r.service.clone());
        }
        if !vias.contains(&r.via.words()) {
            vias.push(r.via.words());
        }
    }
    let rtt: Vec<String> = services
        .iter()
        .map(|s| {
            let nodes = c.round_trips_of(s);
            let mut med: Vec<f64> = nodes.iter().filter_map(|r| r.figure.median_us).collect();
            med.sort_by(|a, b| a.total_cmp(b));
            let missing = nodes.len() - med.len();
            let shown = match (med.first(), med.last()) {
                (Some(lo), Some(hi)) if fmt_micros(*lo) != fmt_micros(*hi) => format!("{s} {}-{}", fmt_micros(*lo), fmt_micros(*hi)),
                (Some(lo), _) => format!("{s} {}", fmt_micros(*lo)),
                _ => format!("{s} not measured"),
            };
            if missing > 0 && !med.is_empty() { format!("{shown} ({missing} of {} nodes not measured)", nodes.len()) } else { shown }
        })
        .collect();
    let fsync: Vec<String> = c
        .fsync
        .iter()
        .map(|f| match (f.figure.median_us, f.figure.p90_us) {
            (Some(m), Some(p)) => format!("{} {} (p90 {})", f.kind.words(), fmt_micros(m), fmt_micros(p)),
            _ => format!("{} not measured ({})", f.kind.words(), f.figure.not_measured.as_deref().unwrap_or("no figure")),
        })
        .collect();
    let data: Vec<String> = c.data_on.iter().map(|(s, d)| format!("{s} on {}", d.kind.words())).collect();
    let mut lines = Vec::new();
    if !rtt.is_empty() {
        lines.push(format!("network round trip (median per node, {}): {}", vias.join(", "), rtt.join(", ")));
    }
    let loaded: Vec<String> = c
        .loaded
        .iter()
        .map(|l| match (l.figure.median_us, l.figure.p90_us, l.per_second) {
            (Some(m), Some(p), Some(r)) => format!("{} {} (p90 {}, {:.0} req/s, {}x{})", l.service, fmt_micros(m), fmt_micros(p), r, l.nodes, l.connections_per_node),
            _ => format!("{} not measured ({})", l.service, l.figure.not_measured.as_deref().unwrap_or("no figure")),
        })
        .collect();
    if !loaded.is_empty() {
        lines.push(format!("round trip under load (median, nodes x connections at once): {}", loaded.join(", ")));
    }
    if !fsync.is_empty() {
        let on = if data.is_empty() { String::new() } else { format!("; data: {}", data.join(", ")) };
        lines.push(format!("fsync (4 KiB write + fdatasync, median): {}{on}", fsync.join(", ")));
    }
    lines
}

/// The durability table's columns (a run with several `--durability` levels).
pub const DURABILITY_HEADER: [&str; 7] =
    ["backend", "level", "server settings", "mutual exclusion (verdict)", "overlaps", "acq/s", "acq/s against the least strict level"];

/// The explanation under the durability table.
pub const DURABILITY_NOTE: &str = "Each backend at each durability level of the run (`run --durability`), on fresh local \
servers per level, under the run's faults: the server settings behind the level, the verdict and the overlaps seen, the \
acquisition rate, and the rate as a share of the same backend's rate at its least strict level measured in this run (1 at \
that level; below 1 is what the stricter setting costs). Ratios of one run on one machine, not a benchmark of the settings.";

/// A backend's mean rate per workload, in the order it ran them.
fn workload_means(b: &BackendSummary) -> Vec<(&str, f64)> {
    let mut out: Vec<(&str, f64, usize)> = Vec::new();
    for w in &b.workloads {
        match out.iter_mut().find(|(n, _, _)| *n == w.name) {
            Some(e) => {
                e.1 += w.ops_per_sec;
                e.2 += 1;
            }
            None => out.push((&w.name, w.ops_per_sec, 1)),
        }
    }
    out.into_iter().map(|(n, sum, k)| (n, sum / k as f64)).collect()
}

/// How strict a measured level is for its design (`durability::settings`), to find the
/// least strict one; `None` where the backend recorded no level.
fn strictness(b: &BackendSummary) -> Option<(u8, bool)> {
    let kind = crate::durability::design_of(&b.name).parse::<crate::kind::BackendKind>().ok()?;
    let s = crate::durability::settings(kind, b.durability.as_ref()?.level?);
    Some((s.strictness, s.one_level))
}

/// `b`'s rate against `base`'s, per workload both ran.
fn cost_cell(b: &BackendSummary, base: &BackendSummary, one_level: bool) -> String {
    if one_level {
        return "- (one level: the same settings)".into();
    }
    if std::ptr::eq(b, base) {
        return "1 (least strict)".into();
    }
    let (mine, theirs) = (workload_means(b), workload_means(base));
    let cells: Vec<String> = mine
        .iter()
        .filter_map(|(n, r)| theirs.iter().find(|(m, _)| m == n).filter(|(_, t)| *t > 0.0).map(|(_, t)| (n, r / t)))
        .map(|(n, x)| if mine.len() > 1 { format!("{x:.2} ({n})") } else { format!("{x:.2}") })
        .collect();
    if cells.is_empty() { "-".into() } else { cells.join(", ") }
}

/// The durability table's rows: backend x level, for runs that measured more than one level
/// (none otherwise: one level is a label beside the verdict, see [`durability_lines`]).
pub fn durability_rows(s: &Summary) -> Vec<[String; 7]> {
    let levels: Vec<_> = s.backends.iter().filter_map(|b| b.durability.as_ref()?.level).collect();
    if levels.iter().all(|l| *l == levels[0]) {
        return Vec::new();
    }
    let mut designs: Vec<&str> = Vec::new();
    for b in by_family(s) {
        let d = crate::durability::design_of(&b.name);
        if !designs.contains(&d) {
            designs.push(d);
        }
    }
    let mut rows = Vec::new();
    for d in designs {
        let mine: Vec<&BackendSummary> = s.backends.iter().filter(|b| crate::durability::design_of(&b.name) == d && strictness(b).is_some()).collect();
        let base = mine.iter().copied().filter(|b| b.failure.is_none()).min_by_key(|b| strictness(b).map(|s| s.0));
        for &b in &mine {
            let (rec, one_level) = (b.durability.as_ref().unwrap(), strictness(b).is_some_and(|s| s.1));
            let settings = rec.label.strip_prefix(&format!("{d} (")).and_then(|l| l.strip_suffix(')')).unwrap_or(&rec.label);
            let (verdict, cost) = match (&b.failure, base) {
                (Some(f), _) => (format!("FAILED: {f}"), "-".into()),
                (None, Some(base)) => (verdict_cell(b.verdict.as_ref()), cost_cell(b, base, one_level)),
                (None, None) => (verdict_cell(b.verdict.as_ref()), "-".into()),
            };
            rows.push([
                d.to_string(),
                rec.level.map_or("-".into(), |l| l.to_string()),
                settings.to_string(),
                verdict,
                b.counts.overlaps.to_string(),
                workload_rates(b),
                cost,
            ]);
        }
    }
    rows
}

/// Each backend's durability beside its verdict, one line each ("redis (appendonly yes,
/// appendfsync everysec): unsafe: ..."), for a run with one level; none when the run has
/// the durability table instead, or recorded no durability.
pub fn durability_lines(s: &Summary) -> Vec<String> {
    if !durability_rows(s).is_empty() {
        return Vec::new();
    }
    by_family(s)
        .into_iter()
        .filter_map(|b| {
            let d = b.durability.as_ref()?;
            let verdict = b.failure.as_ref().map_or_else(|| verdict_cell(b.verdict.as_ref()), |f| format!("FAILED: {f}"));
            Some(format!("{}: {verdict}", d.label))
        })
        .collect()
}
