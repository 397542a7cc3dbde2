//! The run as text: the terminal table, the AP / CP table, `summary.md`, and the
//! calibration tables, all read from the result-set model.

use std::fmt::Write as _;

use crate::summary::calibration::Calibration;
use crate::summary::{BackendSummary, Summary};
use crate::summary::scenario::Hit;
use crate::judgement::{self, Verdict};

use crate::stats::fmt_ms_cell as ms;

const COLS: usize = 16;
const HEADER: [&str; COLS] = [
    "backend", "workload", "clients", "keys", "acq/s", "p50 ms", "p99 ms", "p99.9 ms", "handoff p50", "fair", "errors",
    "overlaps", "lost upd", "stale tok", "expo %", "verdict",
];

/// The judgement's one-cell answer (`-` where none was made).
fn verdict_cell(v: Option<&Verdict>) -> String {
    v.map_or_else(|| "-".into(), |v| v.headline.clone())
}

fn has_tokens(b: &BackendSummary) -> bool {
    b.capabilities.as_ref().and_then(|c| c["fencing"].as_bool()).unwrap_or(false)
}

/// The family a backend's rows are grouped under (by its name; unknown names have none).
pub(crate) fn family(b: &BackendSummary) -> &'static str {
    b.name.parse::<crate::kind::BackendKind>().map(|k| k.family()).unwrap_or("")
}

/// The backends in the table's order: grouped by family (database, Redis, consensus), in
/// run order within a family.
pub(crate) fn by_family(s: &Summary) -> Vec<&BackendSummary> {
    let mut order: Vec<&'static str> = Vec::new();
    for b in &s.backends {
        if !order.contains(&family(b)) {
            order.push(family(b));
        }
    }
    let rank = |f: &str| crate::kind::BackendKind::FAMILIES.iter().position(|x| *x == f).unwrap_or(usize::MAX);
    order.sort_by_key(|f| rank(f));
    order.iter().flat_map(|f| s.backends.iter().filter(move |b| family(b) == *f)).collect()
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

/// Each row with the family it belongs to; a heading line is shown where the family changes
/// when the run spans more than one.
fn rows(s: &Summary) -> Vec<(&'static str, [String; COLS])> {
    let mut out = Vec::new();
    for b in by_family(s) {
        if let Some(f) = &b.failure {
            let mut r: [String; COLS] = Default::default();
            r[0] = b.name.clone();
            r[1] = format!("FAILED: {f}");
            out.push((family(b), r));
            continue;
        }
        let repeated = b.workloads.iter().any(|x| x.repeat > 0);
        for w in &b.workloads {
            out.push((family(b), [
                b.name.clone(),
                if repeated { format!("{} #{}", w.name, w.repeat + 1) } else { w.name.clone() },
                w.clients.to_string(),
                w.keys.to_string(),
                format!("{:.0}", w.ops_per_sec),
                ms(w.acquire_latency_us.p50),
                ms(w.acquire_latency_us.p99),
                ms(w.acquire_latency_us.p999),
                if w.handoff_latency_us.count > 0 { ms(w.handoff_latency_us.p50) } else { "-".into() },
                w.fairness_jain.map(|j| format!("{j:.2}")).unwrap_or_else(|| "-".into()),
                w.errors.to_string(),
                w.counts.overlaps.to_string(),
                w.counts.lost_updates.to_string(),
                if has_tokens(b) { w.counts.stale_tokens.to_string() } else { "n/a".into() },
                w.exposure.map(|e| crate::judgement::percent(e).trim_end_matches('%').to_string()).unwrap_or_else(|| "-".into()),
                verdict_cell(w.verdict.as_ref()),
            ]));
        }
    }
    out
}

/// The table for a terminal: aligned columns.
pub fn table(s: &Summary) -> String {
    let rows = with_headings(rows(s));
    let mut width: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
    for (_, r) in &rows {
        for (i, c) in r.iter().enumerate() {
            if !(i == 1 && c.starts_with("FAILED")) {
                width[i] = width[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            if i < 2 {
                let _ = write!(out, "{:<w$}  ", c, w = width[i]);
            } else {
                let _ = write!(out, "{:>w$}  ", c, w = width[i]);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&HEADER.map(String::from), &mut out);
    for (heading, r) in &rows {
        if let Some(f) = heading {
            let _ = writeln!(out, "-- {f}");
        }
        line(r, &mut out);
    }
    out
}

/// The same table in Markdown.
pub fn markdown_table(s: &Summary) -> String {
    let mut out = format!("| {} |\n|{}\n", HEADER.join(" | "), "---|".repeat(HEADER.len()));
    for (heading, r) in with_headings(rows(s)) {
        if let Some(f) = heading {
            out.push_str(&format!("| **{f}** |{}\n", " |".repeat(COLS - 1)));
        }
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

/// The anomaly flags of every phase (see `summary::steady`), one line each, keyed
/// "backend · workload"; empty when there are none.
pub fn anomalies(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    for b in &s.backends {
        for w in &b.workloads {
            let rep = if b.workloads.iter().any(|x| x.repeat > 0) { format!(" (repeat {})", w.repeat + 1) } else { String::new() };
            for a in &w.anomalies {
                out.push(format!("{} · {}{rep}: {}: {}", b.name, w.name, a.kind, a.detail));
            }
        }
    }
    out
}

/// `summary.md`: the table and how to read it.
pub fn markdown(s: &Summary) -> String {
    let mut out = format!(
        "# dlbench run {}\n\n{}\n\nTarget: {}. Command: `{}`.\n\n",
        s.run_id,
        if s.complete { "Complete." } else { "**Incomplete**: the run was interrupted; figures cover what finished." },
        s.target,
        s.command.join(" ")
    );
    out.push_str(&markdown_table(s));
    out.push_str(
        "\nacq/s: successful acquisitions per second (measured window, warm-up excluded). \
         p50/p99/p99.9: acquire latency. errors: failures other than contention timeouts. \
         overlaps: critical sections that began while another holder of the same key was inside, \
         seen at the protected resource. lost upd: read-modify-write updates overwritten by a concurrent \
         holder. stale tok: fencing tokens presented out of order (n/a: the backend has none). expo %: how much of \
         the wall time some holder was inside its critical section (mean over keys); below 20% a second holder \
         would mostly go unseen, and the verdict says \"weak\". handoff p50: median time from one holder's release \
         to the next holder's acquisition of the same key. fair: Jain's index over acquisitions per client \
         (1 = even, 1/clients = one client got everything). In open-loop workloads latency counts from each \
         operation's intended start.\n",
    );
    let conns: Vec<String> = s.backends.iter().filter_map(|b| Some(format!("{} {}", b.name, b.connections.as_ref()?))).collect();
    if !conns.is_empty() {
        out.push_str(&format!(
            "\nConnections (per-client: each client its own connection, session or lease, as separate processes; \
             shared: one connection per server for all clients): {}.\n",
            conns.join(", ")
        ));
    }
    out.push_str(&format!("\n## The four properties\n\n{}\n{PROPERTIES_NOTE}\n", properties_table(s)));
    out.push_str(&cost_markdown(s));
    out.push_str(&scaling_markdown(s));
    out.push_str(&shard_markdown(s));
    out.push_str(&hits_markdown(&s.hits));
    let flags = anomalies(s);
    if flags.is_empty() {
        out.push_str("\nNo anomaly flagged (seconds without an acquisition, a max over 10x the p99, a stall past the wait timeout, a rate that had not settled).\n");
    } else {
        out.push_str("\n## Anomalies\n\n");
        for f in &flags {
            out.push_str(&format!("- {f}\n"));
        }
    }
    if s.faults_applied() {
        out.push_str(&format!("\n## {} (per workload)\n\n```\n", judgement::CLASS_HEADING));
        out.push_str(&ap_cp_table(s));
        out.push_str("```\n");
    } else {
        out.push_str(&format!("\n{}\n", judgement::no_class(s.faults_without_effect())));
    }
    out.push_str(&format!("\n{}\n", resource_line(s)));
    if !s.versions.is_empty() {
        out.push_str("\nServers: ");
        out.push_str(&s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
        out.push('\n');
    }
    if let Some(c) = &s.calibration {
        out.push('\n');
        out.push_str(&calibration_markdown(c));
    }
    out
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
            [family(b).to_string(), b.name.clone(), verdict_cell(b.verdict.as_ref()), format!("{:.0}", b.ops_per_sec), avail, expiry, re]
        })
        .collect()
}

/// The four-properties table in Markdown (also what the terminal shows).
pub fn properties_table(s: &Summary) -> String {
    let mut out = format!("| {} |\n|{}\n", PROPERTIES_HEADER.join(" | "), "---|".repeat(PROPERTIES_HEADER.len()));
    for r in properties_rows(s) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

pub const SHARD_HEADER: [&str; 8] = ["shard", "run", "clients", "acq/s", "acquired", "driver lag p99 ms", "window starts +ms", "clock offset ms"];
pub const SHARD_NOTE: &str = "Each shard of a merged run (`run --shard I/N`, then `merge`): its own rate, how late its \
driver's timers fired (the load host as a bottleneck) and how long after the earliest shard its measured window began, \
so a slow or late load host shows instead of being averaged away. Clock offset: the resource server's clock minus the \
shard's (least-delay round trip of eight), when the shards ran their sections on one (`--resource`); not measured \
otherwise, and then overlaps across hosts rest on the hosts' clock sync.";

/// Where the sections were judged.
pub fn resource_line(s: &Summary) -> String {
    match &s.resource_server {
        Some(url) => format!(
            "Protected resource: the server {url}; every section's steps were judged there in its one order and stamped with its clock."
        ),
        None => "Protected resource: in the process of the run (its clock and memory shared by every client).".to_string(),
    }
}

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

/// The shards table as Markdown (empty unless the result is a merge).
pub fn shard_markdown(s: &Summary) -> String {
    cells_markdown("Shards", &SHARD_HEADER, "|---|---|---:|---:|---:|---:|---:|---:|", &shard_rows(s), SHARD_NOTE)
}

/// The AP / CP table: per backend and workload, speed, availability under the faults that
/// were applied, safety without and with fencing, the evidence, and the class claimed beside
/// the class observed.
pub fn ap_cp_table(s: &Summary) -> String {
    let header = [
        "backend", "workload", "acq/s", "p99 ms", "avail", "recovery", "overlaps", "lost upd (no fence)", "fencing",
        "evidence", "claims", "observed", "verdict",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for b in &s.backends {
        if b.failure.is_some() {
            continue;
        }
        for w in &b.workloads {
            let v = w.verdict.as_ref();
            rows.push(vec![
                b.name.clone(),
                w.name.clone(),
                format!("{:.0}", w.ops_per_sec),
                ms(w.acquire_latency_us.p99),
                v.map(|v| match (&v.availability, &v.availability_rate) {
                    (Some(word), Some(rate)) => format!("{word} ({})", rate.trim_end_matches(" of the no-fault rate")),
                    _ => "not measured".into(),
                })
                .unwrap_or_else(|| "-".into()),
                v.and_then(|v| v.recovery.clone()).map(|r| if r.starts_with("NOT") { "NOT recovered".into() } else { r.trim_start_matches("recovered in ").to_string() }).unwrap_or_else(|| "-".into()),
                w.counts.overlaps.to_string(),
                w.counts.lost_updates.to_string(),
                v.map(|v| v.fencing.clone()).unwrap_or_default(),
                v.map(|v| match v.exposure {
                    Some(e) => format!("{} ({})", v.evidence, crate::judgement::percent(e)),
                    None => v.evidence.clone(),
                })
                .unwrap_or_default(),
                v.map(|v| v.class_claimed.clone()).unwrap_or_default(),
                v.map(|v| v.observed_cell()).unwrap_or_default(),
                v.map(|v| v.headline.clone()).unwrap_or_default(),
            ]);
        }
    }
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            if i <= 1 || i >= 8 {
                let _ = write!(out, "{:<w$}  ", c, w = width[i]);
            } else {
                let _ = write!(out, "{:>w$}  ", c, w = width[i]);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(header.iter().map(|h| h.to_string()).collect(), &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// The three tables, as Markdown (printed, and in summary.md).
pub fn calibration_markdown(c: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### Calibration ({} connections, {:.0} s per measurement)\n", c.connections, c.seconds);
    if !c.side_by_side.is_empty() {
        s.push_str("| backend | work | dlbench /s | reference | reference /s | ratio |\n|---|---|---:|---|---:|---:|\n");
        for r in &c.side_by_side {
            let _ = writeln!(s, "| {} | {} | {:.0} | {} | {:.0} | {:.2} |", r.backend, r.work, r.dlbench_per_sec, r.reference, r.reference_per_sec, r.ratio);
        }
        s.push('\n');
    }
    if !c.primitive_cost.is_empty() {
        s.push_str("| backend | primitive | primitive /s | lock cycles /s | primitives per cycle |\n|---|---|---:|---:|---:|\n");
        for r in &c.primitive_cost {
            let _ = writeln!(s, "| {} | {} | {:.0} | {:.0} | {:.1} |", r.backend, r.primitive, r.primitive_per_sec, r.lock_cycle_per_sec, r.primitives_per_cycle);
        }
        s.push('\n');
    }
    if !c.efficiency.is_empty() {
        s.push_str("| backend | critical path of a hand-off (µs, each term at its best case) | bound hand-offs/s | hot-key hand-offs/s | efficiency | beside the path (µs, not summed) |\n|---|---|---:|---:|---:|---|\n");
        for r in &c.efficiency {
            let _ = writeln!(s, "| {} | {} | {:.0} | {:.0} | {:.2} | {} |", r.backend, r.path_line(), r.bound_per_sec, r.handoff_per_sec, r.efficiency, r.beside_line());
        }
        s.push('\n');
    }
    let rows = handoff_rows(c);
    if !rows.is_empty() {
        let _ = writeln!(s, "Hand-offs as they happened in the hot-key run:\n\n| {} |\n|---|---:|---:|---:|---:|---:|---:|", HANDOFF_HEADER.join(" | "));
        for r in rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        s.push('\n');
    }
    let rows = peer_rows(c);
    if !rows.is_empty() {
        let _ = writeln!(s, "| {} |\n|---|---|---|---:|---:|---:|---:|---:|", PEER_HEADER.join(" | "));
        for r in rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        let _ = writeln!(s, "\n{}\n", peer_note(c));
    }
    s
}

/// The columns of the `calibrate --peers` table.
pub const HANDOFF_HEADER: [&str; 7] = [
    "backend",
    "hand-offs",
    "median µs",
    "won by the releaser",
    "to the releaser, median µs",
    "to a waiter, median µs",
    "harness on the path: median µs (share of time)",
];

/// One row per backend whose efficiency run recorded its hand-offs.
pub fn handoff_rows(c: &Calibration) -> Vec<[String; 7]> {
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "-".into());
    c.efficiency
        .iter()
        .filter_map(|e| {
            let h = e.handoffs.as_ref()?;
            Some([
                e.backend.clone(),
                h.count.to_string(),
                format!("{:.0}", h.median_us),
                format!("{:.0}%", h.to_releaser_share * 100.0),
                opt(h.to_releaser_median_us),
                opt(h.to_waiter_median_us),
                format!("{:.1} ({:.2}%)", h.harness_median_us, h.harness_share * 100.0),
            ])
        })
        .collect()
}

pub const PEER_HEADER: [&str; 8] =
    ["backend", "workload", "official client", "dlbench acq/s", "official acq/s", "dlbench / official: median [min - max]", "dlbench p99 µs", "official p99 µs"];

/// One row per backend x workload x official client; rates are medians over the repeats.
pub fn peer_rows(c: &Calibration) -> Vec<[String; 8]> {
    let med = |v: &[f64]| crate::summary::calibration::PeerComparison::spread(v).map(|s| format!("{:.0}", s.0)).unwrap_or_else(|| "-".into());
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "-".into());
    c.peers
        .iter()
        .map(|r| {
            [
                r.backend.clone(),
                r.workload.clone(),
                r.client.clone(),
                med(&r.dlbench_per_sec),
                med(&r.peer_per_sec),
                format!("{:.2} [{:.2} - {:.2}]", r.ratio_median, r.ratio_min, r.ratio_max),
                opt(r.dlbench_p99_us),
                opt(r.peer_p99_us),
            ]
        })
        .collect()
}

/// What the peer table's figures are.
pub fn peer_note(c: &Calibration) -> String {
    let mut usages: Vec<String> = Vec::new();
    for r in &c.peers {
        let u = format!("{}: {}", r.peer, r.usage);
        if !usages.contains(&u) {
            usages.push(u);
        }
    }
    format!(
        "{} clients on each side, each its own connection and session; hold 0; {} run(s) per side, interleaved (dlbench, official, dlbench, official, ...); \
         rates are medians, the ratio is per repeat. Usage: {}.",
        c.connections,
        c.repeats.unwrap_or(1),
        usages.join("; ")
    )
}

/// The columns of the cost-per-acquisition table.
pub const COST_HEADER: [&str; 7] = ["backend", "workload", "clients", "acq/s", "server CPU µs/acq", "dlbench CPU µs/acq", "server counters per acq"];

/// What the server columns say where dlbench did not start the servers.
pub const NOT_LOCAL: &str = "not measured: not the local target";

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
            let server = match w.server_cpu_us_per_acq {
                Some(v) => format!("{v:.1}"),
                None if b.name == "memory" => "- (no server)".into(),
                None if !local => NOT_LOCAL.into(),
                None => "-".into(),
            };
            let counters = if w.server_counters_per_acq.is_empty() {
                if local || b.name == "memory" { "-".to_string() } else { NOT_LOCAL.to_string() }
            } else {
                w.server_counters_per_acq.iter().map(|(k, v)| format!("{} {}", if *v >= 100.0 { format!("{v:.0}") } else { format!("{v:.3}") }, counter_label(k))).collect::<Vec<_>>().join(", ")
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
     Redis and Redlock INFO total_net_input_bytes + total_net_output_bytes, summed over the nodes).";

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

/// A Markdown table from rows of cells (the renderers' shared data), its heading and the
/// note under it; `align` is the separator row. Empty when there are no rows.
fn cells_markdown<const N: usize>(title: &str, header: &[&str; N], align: &str, rows: &[[String; N]], note: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!("\n## {title}\n\n| {} |\n{align}\n", header.join(" | "));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    let _ = writeln!(out, "\n{note}");
    out
}

/// The scaling table as Markdown (empty when no phase swept its clients).
pub fn scaling_markdown(s: &Summary) -> String {
    let mut rows = scaling_rows(s);
    for r in &mut rows {
        if !r[7].is_empty() {
            r[7] = format!("**{}**", r[7]);
        }
    }
    let mut out = cells_markdown("Scaling", &SCALING_HEADER, "|---|---|---:|---:|---:|---:|---:|---|", &rows, SCALING_NOTE);
    let none: Vec<String> =
        crate::summary::scaling::curves(s).iter().filter(|c| c.knee.is_none()).map(|c| format!("{} · {}", c.backend, c.workload)).collect();
    if !out.is_empty() && !none.is_empty() {
        let _ = writeln!(out, "No knee within the counts run: {}.", none.join(", "));
    }
    out
}

/// The cost table as Markdown (empty when nothing measured it).
pub fn cost_markdown(s: &Summary) -> String {
    cells_markdown("Cost per acquisition", &COST_HEADER, "|---|---|---:|---:|---:|---:|---|", &cost_rows(s), COST_NOTE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{BackendSummary, WorkloadSummary};
    use crate::judgement::FencingMode;

    fn row(clients: usize, ops: f64, p99: u64, server: Option<f64>) -> WorkloadSummary {
        let pct = serde_json::json!({"count": 10, "mean": 100.0, "p50": 100, "p90": 500, "p99": p99, "p999": p99, "p9999": p99, "max": p99});
        let mut w: WorkloadSummary = serde_json::from_value(serde_json::json!({
            "name": "many-keys", "clients": clients, "keys": 64, "seed": null, "warmup_s": 0.0, "measured_s": 5.0,
            "ops_per_sec": ops, "acquired": 1, "acquire_latency_us": pct, "service_latency_us": pct,
            "release_latency_us": pct, "handoff_latency_us": pct, "fairness_jain": null, "driver_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
            "first_keys": [], "timeseries": [], "errors": 0, "error_kinds": {}, "timeouts": 0, "retired_clients": 0,
            "sections": 0, "overlaps": 0, "lost_updates": 0, "stale_tokens": 0, "lost_updates_fenced": 0, "rejected": 0
        }))
        .unwrap();
        w.server_cpu_us_per_acq = server;
        w.dlbench_cpu_us_per_acq = Some(30.0);
        w
    }

    fn hit(entry: &str, backend: &str, case: &str, ok: bool) -> Hit {
        Hit {
            entry: entry.into(),
            title: format!("title of {entry}"),
            backend: backend.into(),
            case: case.into(),
            figure: format!("{entry} on {backend} {case} | figure"),
            ok,
            evidence: format!("evidence/{entry}-{backend}.json"),
            ..Hit::default()
        }
    }

    /// Backend x entry, entries in catalogue order whatever the order measured, each case
    /// of a cell with its link, a cell an entry has no hit for said so, a NO kept visible.
    #[test]
    fn what_users_hit_is_a_grid_with_links() {
        let hits = vec![
            hit("U7", "redis", "", true),
            hit("U6", "pg-advisory", "transaction pooling", true),
            hit("U6", "pg-advisory", "session pooling", false),
            hit("U1", "redis", "cut off", true),
        ];
        let (entries, rows) = hits_grid(&hits);
        assert_eq!(entries.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(), ["U1", "U6", "U7"]);
        assert_eq!(rows.len(), 2);
        let md = hits_markdown(&hits);
        let redis = md.lines().find(|l| l.starts_with("| redis |")).expect(&md);
        assert_eq!(redis.matches(" | ").count(), 3, "backend and three entries: {redis}");
        assert!(redis.contains("does not apply"), "redis has no U6: {redis}");
        assert!(redis.contains("cut off: U1 on redis cut off / figure ([evidence](evidence/U1-redis.json))"), "{redis}");
        let pg = md.lines().find(|l| l.starts_with("| pg-advisory |")).expect(&md);
        assert!(pg.contains("<br>session pooling: ") && pg.contains("(NO)"), "{pg}");
        assert!(hits_markdown(&[]).is_empty());
        let term = hits_terminal(&hits);
        assert!(term.find("U1 ").unwrap() < term.find("U6 ").unwrap() && term.contains("-- NO"), "{term}");
    }

    fn summary(target: &str, server: Option<f64>) -> Summary {
        let mut s = Summary::begin("r", target, FencingMode::Both, vec![]);
        let mut b = BackendSummary::empty("redis", None);
        b.workloads = vec![row(1, 1000.0, 1000, server), row(2, 1900.0, 1100, server), row(4, 2000.0, 3000, server)];
        s.backends.push(b);
        s
    }

    #[test]
    fn cost_is_a_figure_on_the_local_target_and_said_unmeasured_elsewhere() {
        let local = markdown(&summary("local", Some(21.5)));
        assert!(local.contains("| redis | many-keys | 1 | 1000 | 21.5 | 30.0 |"), "{local}");
        assert!(!local.contains(NOT_LOCAL), "{local}");
        let external = markdown(&summary("external", None));
        assert!(external.contains(&format!("| redis | many-keys | 1 | 1000 | {NOT_LOCAL} | 30.0 |")), "{external}");
        assert!(!external.contains("| 0.0 |"), "not measured is never printed as 0: {external}");
    }

    #[test]
    fn the_scaling_table_marks_the_knee() {
        let md = scaling_markdown(&summary("local", Some(20.0)));
        // 2 -> 4 clients: throughput x1.05, p99 x2.7.
        assert!(md.contains("| redis | many-keys | 4 | 2000 | 3.00 | - | 20.0 | **knee** |"), "{md}");
        assert_eq!(md.matches("**knee**").count(), 1, "{md}");
    }

    #[test]
    fn the_table_groups_designs_by_family_in_any_run_order() {
        let mut s = Summary::begin("r", "local", FencingMode::Both, vec![]);
        for name in ["etcd", "redis", "pg-advisory", "zookeeper", "postgres"] {
            let mut b = BackendSummary::empty(name, None);
            b.workloads = vec![row(8, 100.0, 1000, None)];
            s.backends.push(b);
        }
        let t = table(&s);
        let order: Vec<&str> = t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
        assert_eq!(order, ["--", "pg-advisory", "postgres", "--", "redis", "--", "etcd", "zookeeper"], "{t}");
        assert!(t.contains("-- database\n") && t.contains("-- Redis\n") && t.contains("-- consensus\n"), "{t}");
        let md = markdown_table(&s);
        assert!(md.find("| **database** |").unwrap() < md.find("| **consensus** |").unwrap(), "{md}");
        // One family: no headings.
        s.backends.retain(|b| b.name == "redis");
        assert!(!table(&s).contains("--") && !markdown_table(&s).contains("**"));
    }
}

pub const HITS_NOTE: &str = "What users hit: the failures lock users report upstream (`dlbench scenario U1,U2,U3,U4,U5,U6,U7`), \
each measured on the servers. U1: from the server letting the lock go (another client granted it) to the holder \
being told (its lost signal, or a failed extend; told only by its release is never told), cut off from every server \
while extending every third of its 3 s TTL, and (TTL designs) not extending at all. U2: a `dlbench lock` holder, \
which keeps its lock alive itself, starved of CPU (nice 19 beside two nice -20 busy loops on its CPU) for 9 s or \
stopped for 6 s: whether another client got in while it still ran its command, when it noticed, anything left on the \
servers after it exited. U3: 1,000 locks held at once over shared connections for 9 s, kept alive by extends (TTL \
designs) or their sessions: locks lost, renewals, and per 1,000 locks the servers' CPU and the bytes clients sent, \
beyond idle. U4: Redlock with three of five nodes restarted one after another within a held lock's TTL: double \
grants per 100 restarts, without persistence, with a restart delayed past the TTL, with appendfsync always. U5: a \
waiter whose every byte is delayed (0.5 s, 1.6 s each way; TTL 3 s): how much validity its grant has left when it \
arrives, or whether it is refused. U6: four clients taking one advisory lock through PgBouncer for 4 s: double grants \
seen at the resource, unlocks refused, locks left on the server after every client left. U7: waiters on a key the \
holder keeps, each its own client: the requests they send (reads at dlbench's proxies) per waiter per second and \
the servers' CPU, beyond the holder's own, then the requests per waiter in the second after a release. Each cell \
links to its evidence: every event with its time. NO: no evidence (nothing happened to measure from) or, where the \
entry expects something, not what it expects. Single runs on one machine: figures, not ratios with a spread.";

/// The "what users hit" grid: the entries present (catalogue order), and per backend the
/// hits of each entry.
pub fn hits_grid(hits: &[Hit]) -> (Vec<(String, String)>, Vec<(String, Vec<Vec<&Hit>>)>) {
    let mut entries: Vec<(String, String)> = Vec::new();
    for h in hits {
        if !entries.iter().any(|(e, _)| *e == h.entry) {
            entries.push((h.entry.clone(), h.title.clone()));
        }
    }
    let order = |e: &str| crate::catalogue::CATALOGUE.iter().position(|s| s.id == e).unwrap_or(usize::MAX);
    entries.sort_by_key(|(e, _)| order(e));
    let mut rows: Vec<(String, Vec<Vec<&Hit>>)> = Vec::new();
    for h in hits {
        let col = entries.iter().position(|(e, _)| *e == h.entry).unwrap_or(0);
        let row = match rows.iter().position(|(b, _)| *b == h.backend) {
            Some(i) => i,
            None => {
                rows.push((h.backend.clone(), vec![Vec::new(); entries.len()]));
                rows.len() - 1
            }
        };
        rows[row].1[col].push(h);
    }
    (entries, rows)
}

fn hit_text(h: &Hit) -> String {
    let case = if h.case.is_empty() { String::new() } else { format!("{}: ", h.case) };
    let flag = if h.ok { "" } else { " (NO)" };
    format!("{case}{}{flag}", h.figure)
}

/// The table in Markdown, each cell linking to its evidence.
pub fn hits_markdown(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return String::new();
    }
    let (entries, rows) = hits_grid(hits);
    let mut out = format!(
        "\n## What users hit\n\n| backend | {} |\n|---|{}\n",
        entries.iter().map(|(e, t)| format!("{e} {t}")).collect::<Vec<_>>().join(" | "),
        "---|".repeat(entries.len())
    );
    for (backend, cells) in &rows {
        let cells: Vec<String> = cells
            .iter()
            .map(|hs| {
                if hs.is_empty() {
                    return "does not apply".to_string();
                }
                hs.iter().map(|h| format!("{} ([evidence]({}))", hit_text(h).replace('|', "/"), h.evidence)).collect::<Vec<_>>().join("<br>")
            })
            .collect();
        out.push_str(&format!("| {backend} | {} |\n", cells.join(" | ")));
    }
    out.push_str(&format!("\n{HITS_NOTE}\n"));
    out
}

/// The measurements for the terminal: per entry, its source, then each backend and case.
pub fn hits_terminal(hits: &[Hit]) -> String {
    let mut s = String::from("What users hit\n");
    let (entries, rows) = hits_grid(hits);
    for (col, (e, title)) in entries.iter().enumerate() {
        s.push_str(&format!("{e} {title}\n"));
        if let Some(p) = crate::catalogue::find(e).and_then(|x| x.published) {
            s.push_str(&format!("  reported ({}): {}\n", p.source, p.finding));
        }
        for (backend, cells) in &rows {
            for h in &cells[col] {
                let case = if h.case.is_empty() { String::new() } else { format!("({})", h.case) };
                s.push_str(&format!(
                    "  {backend:<17} {case:<40} {}{}\n      evidence: {}\n",
                    h.figure,
                    if h.ok { String::new() } else { format!(" -- NO{}", h.expected.as_ref().map(|x| format!(" (expected {x})")).unwrap_or_default()) },
                    h.evidence
                ));
            }
        }
    }
    s
}
