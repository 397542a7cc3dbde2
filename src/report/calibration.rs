//! `dlbench calibrate`'s tables, defined once: the terminal and summary.md draw them as
//! Markdown (`text::calibration_markdown`), the page as HTML (`html`).

use super::tables::Table;
use crate::summary::calibration::{Calibration, PeerComparison};

/// One calibration table with its words: the page's heading for it, the line Markdown puts
/// before it, and the note under it.
pub struct Section {
    pub title: &'static str,
    pub lead: Option<&'static str>,
    pub table: Table,
    pub note: Option<String>,
}

impl Section {
    fn new(title: &'static str, table: Table) -> Section {
        Section { title, lead: None, table, note: None }
    }
}

/// The tables a calibration has, in the order they are shown; a table with no rows is left out.
pub fn sections(c: &Calibration) -> Vec<Section> {
    let mut out = vec![
        Section::new("The harness beside reference tools", side_by_side(c)),
        Section::new("A lock cycle in primitives (each client its own key)", primitive_cost(c)),
        Section::new("Hot-key hand-offs against the bound (the critical path of a hand-off, each term at its best case)", efficiency(c)),
        Section {
            lead: Some("Hand-offs as they happened in the hot-key run:"),
            ..Section::new("Hot-key hand-offs as they happened", Table::new(&HANDOFF_HEADER, &[0], handoff_rows(c).into_iter().map(Vec::from).collect()))
        },
        Section {
            note: Some(peer_note(c)),
            ..Section::new("Official clients beside dlbench", Table::new(&PEER_HEADER, &[0, 1, 2], peer_rows(c).into_iter().map(Vec::from).collect()))
        },
    ];
    out.retain(|s| !s.table.rows.is_empty());
    out
}

fn side_by_side(c: &Calibration) -> Table {
    let rows = c
        .side_by_side
        .iter()
        .map(|r| vec![r.backend.clone(), r.work.clone(), format!("{:.0}", r.dlbench_per_sec), r.reference.clone(), format!("{:.0}", r.reference_per_sec), format!("{:.2}", r.ratio)])
        .collect();
    Table::new(&["backend", "work", "dlbench /s", "reference", "reference /s", "ratio"], &[0, 1, 3], rows)
}

fn primitive_cost(c: &Calibration) -> Table {
    let rows = c
        .primitive_cost
        .iter()
        .map(|r| {
            let f = |v: f64, d: usize| format!("{v:.d$}");
            vec![r.backend.clone(), r.primitive.clone(), f(r.primitive_per_sec, 0), f(r.lock_cycle_per_sec, 0), f(r.primitives_per_cycle, 1)]
        })
        .collect();
    Table::new(&["backend", "primitive", "primitive /s", "lock cycles /s", "primitives per cycle"], &[0, 1], rows)
}

/// The page shows the note column and short headers (its heading says what the path is);
/// Markdown, with no heading, says it in the header and has no note column.
fn efficiency(c: &Calibration) -> Table {
    let rows = c
        .efficiency
        .iter()
        .map(|r| {
            let (bound, handoffs) = (format!("{:.0}", r.bound_per_sec), format!("{:.0}", r.handoff_per_sec));
            vec![r.backend.clone(), r.path_line(), bound, handoffs, format!("{:.2}", r.efficiency), r.beside_line(), r.note.clone()]
        })
        .collect();
    let header = ["backend", "critical path µs", "bound /s", "hand-offs /s", "efficiency", "beside the path µs (not summed)", "note"];
    let markdown = [
        "backend",
        "critical path of a hand-off (µs, each term at its best case)",
        "bound hand-offs/s",
        "hot-key hand-offs/s",
        "efficiency",
        "beside the path (µs, not summed)",
    ];
    Table { markdown_header: Some(markdown.iter().map(|h| h.to_string()).collect()), ..Table::new(&header, &[0, 1, 5, 6], rows) }
}

/// The columns of the hand-offs table (the efficiency runs' recorded hand-offs).
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
    let med = |v: &[f64]| PeerComparison::spread(v).map(|s| format!("{:.0}", s.0)).unwrap_or_else(|| "-".into());
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
