//! The run as text: the terminal table, the AP / CP table, `summary.md`, and the
//! calibration tables, all read from the result-set model.

use std::fmt::Write as _;

use super::tables::{by_family, family, verdict_cell, with_headings};
use super::tables::{cost_rows, COST_HEADER, COST_NOTE, SCALING_HEADER, SCALING_NOTE, scaling_rows};
use super::tables::{properties_rows, shard_rows, PROPERTIES_HEADER, PROPERTIES_NOTE, SHARD_HEADER, SHARD_NOTE};
use crate::judgement;
use crate::stats::{fmt_pct_cell as pct, Quantile};
use crate::summary::calibration::Calibration;
use crate::summary::scenario::Hit;
use crate::summary::{BackendSummary, Summary};

const COLS: usize = 16;
const HEADER: [&str; COLS] = [
    "backend", "workload", "clients", "keys", "acq/s", "p50 ms", "p99 ms", "p99.9 ms", "handoff p50", "fair", "errors",
    "overlaps", "lost upd", "stale tok", "expo %", "verdict",
];

fn has_tokens(b: &BackendSummary) -> bool {
    b.capabilities.as_ref().and_then(|c| c["fencing"].as_bool()).unwrap_or(false)
}

/// Each row with the family it belongs to (the Markdown table heads each family; the
/// terminal's keeps the family order without heading lines, as the docs show it).
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
                pct(&w.acquire_latency_us, Quantile::P50),
                pct(&w.acquire_latency_us, Quantile::P99),
                pct(&w.acquire_latency_us, Quantile::P999),
                pct(&w.handoff_latency_us, Quantile::P50),
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

/// The table for a terminal with every column: aligned, one line per phase, the backends in
/// family order (database, Redis, consensus) without heading lines (`--wide`).
pub fn table(s: &Summary) -> String {
    fit::within(s, usize::MAX)
}

/// The same table within `width` columns, as a run prints it by default.
pub use fit::within as table_within;

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

/// Said under the anomalies of a run with faults: what is not judged, and why.
pub const FAULT_SECONDS_NOTE: &str = "Seconds inside a fault window, and those after its heal until the rate came back, are not \
judged for anomalies: a rate that fell there is the fault's effect (see availability), not warm-up.";

/// The anomalies section of `summary.md`: the flags, or a line saying there were none.
fn anomalies_markdown(s: &Summary) -> String {
    let flags = anomalies(s);
    let mut out = if flags.is_empty() {
        "\nNo anomaly flagged (seconds without an acquisition, a max over 10x the p99, a stall past the wait timeout, a rate that had not settled).\n".to_string()
    } else {
        let mut out = "\n## Anomalies\n\n".to_string();
        for f in &flags {
            out.push_str(&format!("- {f}\n"));
        }
        out
    };
    if s.faults_applied() {
        out.push_str(&format!("\n{FAULT_SECONDS_NOTE}\n"));
    }
    out
}

/// The workload table of `summary.md`, how to read it, and the connections each backend used.
fn workloads_markdown(s: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&markdown_table(s));
    // The columns' meanings, from the one glossary.
    out.push('\n');
    for term in ["acq/s", "p50 / p99 / p99.9", "handoff p50", "fair", "errors", "overlaps", "lost upd", "stale tok", "expo %"] {
        if let Some(m) = judgement::glossary::meaning(term) {
            let _ = writeln!(out, "- **{term}**: {m}.");
        }
    }
    out.push_str("\nEvery term: docs/glossary.md.\n");
    let conns: Vec<String> = s.backends.iter().filter_map(|b| Some(format!("{} {}", b.name, b.connections.as_ref()?))).collect();
    if !conns.is_empty() {
        out.push_str(&format!(
            "\nConnections (per-client: each client its own connection, session or lease, as separate processes; \
             shared: one connection per server for all clients): {}.\n",
            conns.join(", ")
        ));
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
    let has_rows = s.has_rows();
    if has_rows {
        // The answer first; the tables it rests on after it.
        out.push_str(&super::decision::markdown(&s.decision()));
        out.push('\n');
        out.push_str(&workloads_markdown(s));
    } else {
        // A calibration (or a run stopped before its first phase): no empty tables.
        out.push_str(if s.calibration.is_some() { "No workload was run: a calibration (its tables are below).\n" } else { "No workload finished: nothing to tabulate.\n" });
    }
    let props = properties_table(s);
    if !props.is_empty() {
        out.push_str(&format!("\n## The four properties\n\n{props}\n{PROPERTIES_NOTE}\n"));
    }
    let durability = durability_text(s);
    if !durability.is_empty() {
        out.push_str(&format!("\n{durability}"));
    }
    out.push_str(&durability_markdown(s));
    out.push_str(&cost_markdown(s));
    out.push_str(&scaling_markdown(s));
    out.push_str(&shard_markdown(s));
    out.push_str(&hits_markdown(&s.hits));
    if has_rows {
        out.push_str(&anomalies_markdown(s));
        if s.faults_applied() {
            out.push_str(&format!("\n## {} (per workload)\n\n```\n", judgement::CLASS_HEADING));
            out.push_str(&ap_cp_table(s));
            out.push_str("```\n");
        } else {
            out.push_str(&format!("\n{}\n", judgement::no_class(s.faults_without_effect())));
        }
        out.push_str(&format!("\n{}\n", resource_line(s)));
    }
    if !s.versions.is_empty() {
        out.push_str("\nServers: ");
        out.push_str(&s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
        out.push('\n');
    }
    if let Some(c) = &s.target_costs {
        out.push_str("\nTarget costs, measured before the phases:\n\n");
        for l in super::tables::target_costs_lines(c) {
            out.push_str(&format!("- {l}\n"));
        }
    }
    if let Some(c) = &s.calibration {
        out.push('\n');
        out.push_str(&calibration_markdown(c));
    }
    out
}

/// The target's measured costs (round trips, fsync), as the terminal prints them after the
/// run table; none when the run did not measure them.
pub fn target_costs(s: &Summary) -> Vec<String> {
    s.target_costs.iter().flat_map(super::tables::target_costs_lines).collect()
}

/// The four-properties table in Markdown (also what the terminal shows).
pub fn properties_table(s: &Summary) -> String {
    if properties_rows(s).is_empty() {
        return String::new();
    }
    let mut out = format!("| {} |\n|{}\n", PROPERTIES_HEADER.join(" | "), "---|".repeat(PROPERTIES_HEADER.len()));
    for r in properties_rows(s) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

/// Where the sections were judged.
pub fn resource_line(s: &Summary) -> String {
    match &s.resource_server {
        Some(url) => format!(
            "Protected resource: the server {url}; every section's steps were judged there in its one order and stamped with its clock."
        ),
        None => "Protected resource: in the process of the run (its clock and memory shared by every client).".to_string(),
    }
}

/// The shards table as Markdown (empty unless the result is a merge).
pub fn shard_markdown(s: &Summary) -> String {
    cells_markdown("Shards", &SHARD_HEADER, "|---|---|---:|---:|---:|---:|---:|---:|", &shard_rows(s), SHARD_NOTE)
}

/// The width the terminal's AP / CP table and the lines under it keep within.
pub use crate::util::WIDTH;

/// A column of the AP / CP table on the terminal.
struct Col {
    head: &'static str,
    right: bool,
    cells: Vec<String>,
}

/// The columns that leave the table for the lines under it, first to last, while the
/// table is wider than [`WIDTH`] (long backend or workload names, a long "not tested" note).
const MOVABLE: [&str; 6] = ["p99 ms", "acq/s", "observed", "recovery", "grant rate", "claims"];

/// The AP / CP table: per backend and workload, speed, availability under the faults that
/// took effect, safety without fencing, and the class claimed beside the class observed,
/// within [`WIDTH`] columns; under it one line per phase with the verdict, what the fenced
/// side showed and the evidence (and any column the width left out), wrapped.
pub fn ap_cp_table(s: &Summary) -> String {
    let heads: [(&str, bool); 10] = [
        ("backend", false), ("workload", false), ("acq/s", true), ("p99 ms", true), ("grant rate", false), ("recovery", true),
        ("overlaps", true), ("lost upd", true), ("claims", false), ("observed", false),
    ];
    let mut cols: Vec<Col> = heads.iter().map(|&(head, right)| Col { head, right, cells: Vec::new() }).collect();
    let mut notes: Vec<(String, Vec<String>)> = Vec::new();
    // In the run table's order: by family, run order within one.
    for b in by_family(s).into_iter().filter(|b| b.failure.is_none()) {
        for w in &b.workloads {
            let v = w.verdict.as_ref();
            let cells = [
                b.name.clone(),
                w.name.clone(),
                format!("{:.0}", w.ops_per_sec),
                pct(&w.acquire_latency_us, Quantile::P99),
                v.map(|v| v.availability_cell()).unwrap_or_else(|| "-".into()),
                v.map(|v| v.recovery_cell()).unwrap_or_else(|| "-".into()),
                w.counts.overlaps.to_string(),
                w.counts.lost_updates.to_string(),
                v.map(|v| v.class_claimed.clone()).unwrap_or_default(),
                v.map(|v| v.observed_cell()).unwrap_or_default(),
            ];
            for (c, cell) in cols.iter_mut().zip(cells) {
                c.cells.push(cell);
            }
            let mut n = vec![v.map_or_else(|| judgement::NO_VERDICT.to_string(), |v| v.headline.clone())];
            if let Some(v) = v {
                n.push(format!("fencing {}", v.fencing));
                n.push(match v.exposure {
                    Some(e) => format!("evidence {} ({})", v.evidence, judgement::percent(e)),
                    None => format!("evidence {}", v.evidence),
                });
                // Faults asked for that never acted here, in summary.json's and the page's
                // words, so the terminal names them too.
                if !v.faults_skipped.is_empty() {
                    n.push(format!("skipped: {}", v.faults_skipped.join(", ")));
                }
                if !v.faults_no_effect.is_empty() {
                    n.push(format!("no effect: {}", v.faults_no_effect.join(", ")));
                }
            }
            notes.push((format!("{} · {}", b.name, w.name), n));
        }
    }
    let width = |c: &Col| c.cells.iter().map(|x| x.chars().count()).chain([c.head.len()]).max().unwrap_or(0);
    let table_width = |cols: &[Col]| cols.iter().map(width).sum::<usize>() + 2 * cols.len().saturating_sub(1);
    for head in MOVABLE {
        if table_width(&cols) <= WIDTH {
            break;
        }
        if let Some(i) = cols.iter().position(|c| c.head == head) {
            let col = cols.remove(i);
            for (note, cell) in notes.iter_mut().zip(col.cells) {
                note.1.push(format!("{head} {cell}"));
            }
        }
    }
    let widths: Vec<usize> = cols.iter().map(width).collect();
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for ((c, col), &w) in cells.iter().zip(&cols).zip(&widths) {
            let _ = if col.right { write!(l, "{c:>w$}  ") } else { write!(l, "{c:<w$}  ") };
        }
        format!("{}\n", l.trim_end())
    };
    let mut out = line(cols.iter().map(|c| c.head).collect());
    for r in 0..notes.len() {
        out.push_str(&line(cols.iter().map(|c| c.cells[r].as_str()).collect()));
    }
    out.push('\n');
    for (key, n) in &notes {
        out.push_str(&crate::util::wrap(&format!("{key}: {}", n.join("; ")), WIDTH, 0, 2));
    }
    out
}

/// The calibration tables (`report::calibration`), as Markdown (printed, and in summary.md).
pub fn calibration_markdown(c: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### Calibration ({} connections, {:.0} s per measurement)\n", c.connections, c.seconds);
    for t in super::calibration::sections(c) {
        if let Some(lead) = t.lead {
            let _ = write!(s, "{lead}\n\n");
        }
        s.push_str(&t.table.markdown());
        match &t.note {
            Some(note) => {
                let _ = writeln!(s, "\n{note}\n");
            }
            None => s.push('\n'),
        }
    }
    s
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

/// The durability table as Markdown (empty unless the run measured several levels).
pub fn durability_markdown(s: &Summary) -> String {
    use super::tables::{durability_rows, DURABILITY_HEADER, DURABILITY_NOTE};
    cells_markdown("Durability", &DURABILITY_HEADER, "|---|---|---|---|---:|---:|---|", &durability_rows(s), DURABILITY_NOTE)
}

/// Each backend's durability beside its verdict (one level), as lines; empty otherwise.
pub fn durability_text(s: &Summary) -> String {
    let lines = super::tables::durability_lines(s);
    if lines.is_empty() {
        return String::new();
    }
    let items: String = lines.iter().map(|l| crate::util::wrap(&format!("- {l}"), crate::util::WIDTH, 0, 2)).collect();
    format!("Durability (the servers' settings) and verdict:\n{items}\n")
}

/// The cost table as Markdown (empty when nothing measured it).
pub fn cost_markdown(s: &Summary) -> String {
    cells_markdown("Cost per acquisition", &COST_HEADER, "|---|---|---:|---:|---:|---:|---|", &cost_rows(s), COST_NOTE)
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

mod fit;

#[cfg(test)]
mod tests;
