//! The comparison for a terminal: the same paragraphs as the Markdown, then one aligned
//! table of every row (regressions first, then improvements, then the unchanged), long
//! notes numbered under it. No Markdown markup, no HTML.

use std::fmt::Write as _;

use super::markdown::{human, lead, phase_cells, thresholds_line, word};
use super::{Comparison, Row};
use crate::judgement::Change;

/// A note longer than this leaves its row for a numbered line under the table (the same
/// note on many rows is listed once).
const NOTE_IN_ROW: usize = 40;

const HEAD: [&str; 8] = ["backend · workload", "clients", "metric", "base", "new", "change", "verdict", "note"];
/// The columns aligned right (figures).
const RIGHT: [usize; 4] = [1, 3, 4, 5];

pub fn text(c: &Comparison) -> String {
    let mut s = format!("dlbench compare: base {} -> new {}\n\n", c.base, c.new);
    for p in lead(c, |x| x.to_string()) {
        s.push_str(&p);
        s.push_str("\n\n");
    }
    let mut rows: Vec<&Row> = c.rows.iter().collect();
    rows.sort_by_key(|r| match r.verdict {
        Change::Regressed => 0,
        Change::Improved => 1,
        Change::Unchanged => 2,
    });
    let mut notes: Vec<&str> = Vec::new();
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            let (phase, clients, change) = phase_cells(r);
            let note = if r.note.chars().count() > NOTE_IN_ROW {
                // One number per distinct note: the same note on many rows is listed once.
                let i = notes.iter().position(|n| *n == r.note).unwrap_or_else(|| {
                    notes.push(&r.note);
                    notes.len() - 1
                });
                format!("[{}]", i + 1)
            } else {
                r.note.clone()
            };
            [phase, clients, r.metric.clone(), human(&r.metric, r.base), human(&r.metric, r.new), change, word(r).to_string(), note]
        })
        .collect();
    if !cells.is_empty() {
        s.push_str(&aligned(&cells));
    }
    if !notes.is_empty() {
        s.push('\n');
    }
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(s, "[{}] {n}", i + 1);
    }
    let _ = writeln!(s, "\n{}", thresholds_line(c));
    s
}

/// The header and the rows, each column as wide as its widest cell, two spaces apart.
fn aligned(rows: &[[String; 8]]) -> String {
    let mut width: Vec<usize> = HEAD.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = " ".repeat(width[i] - c.chars().count());
            if RIGHT.contains(&i) {
                let _ = write!(l, "{pad}{c}  ");
            } else {
                let _ = write!(l, "{c}{pad}  ");
            }
        }
        format!("{}\n", l.trim_end())
    };
    let mut out = line(HEAD.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(|c| c.as_str()).collect()));
    }
    out
}
