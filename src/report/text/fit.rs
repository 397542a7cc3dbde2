//! The per-phase table within a width: a run prints it within 100 columns (or its terminal's
//! width, when wider), every column with `--wide`. The columns a verdict does not rest on are
//! left out first and named under the table (summary.md and the page keep them all); then the
//! three safety counts share one column; the verdict, the last column, wraps under itself
//! rather than widening the line, because a headline cut short would say something else.

use super::{rows, COLS, HEADER};
use crate::summary::Summary;

/// Left out, in this order, until the table fits: latency detail and the phase's shape
/// (clients and keys are in the plan line each phase printed as it started).
const LEAVE_OUT: [&str; 6] = ["handoff p50", "fair", "p99.9 ms", "p50 ms", "keys", "clients"];

/// The safety counts that share one column when the table still does not fit.
const COUNTS: [&str; 3] = ["overlaps", "lost upd", "stale tok"];
const COUNTS_HEAD: &str = "ovl/lost/stale";

/// The verdict column is never narrower than this: a few words a line.
const VERDICT_MIN: usize = 24;

struct Column {
    head: String,
    cells: Vec<String>,
    left: bool,
}

impl Column {
    /// Its width; a failure's text (which spans the row) does not widen the workload column.
    fn width(&self, failed: &[bool]) -> usize {
        self.cells.iter().zip(failed).filter(|(_, &f)| !(f && self.head == HEADER[1])).map(|(c, _)| c.chars().count()).chain([self.head.chars().count()]).max().unwrap_or(0)
    }
}

/// The table within `width` characters a line (`usize::MAX`: every column, nothing wrapped).
pub fn within(s: &Summary, width: usize) -> String {
    let rows: Vec<[String; COLS]> = rows(s).into_iter().map(|(_, r)| r).collect();
    let failed: Vec<bool> = rows.iter().map(|r| r[1].starts_with("FAILED")).collect();
    let mut cols: Vec<Column> = (0..COLS).map(|i| Column { head: HEADER[i].into(), cells: rows.iter().map(|r| r[i].clone()).collect(), left: i < 2 }).collect();
    // Everything before the verdict column (the last), with the two spaces after each.
    let lead = |cols: &[Column]| cols[..cols.len() - 1].iter().map(|c| c.width(&failed) + 2).sum::<usize>();
    let fits = |cols: &[Column]| lead(cols).saturating_add(cols[cols.len() - 1].width(&failed)) <= width;
    let mut left_out = Vec::new();
    for name in LEAVE_OUT {
        if fits(&cols) {
            break;
        }
        cols.retain(|c| c.head != name);
        left_out.push(name);
    }
    let mut shared = false;
    if lead(&cols) + VERDICT_MIN > width {
        let at = cols.iter().position(|c| c.head == COUNTS[0]).expect("the overlaps column");
        let merged = (0..rows.len())
            .map(|r| COUNTS.iter().map(|h| cols.iter().find(|c| c.head == *h).map_or("-", |c| if c.cells[r] == "n/a" { "-" } else { c.cells[r].as_str() })).collect::<Vec<_>>().join("/"))
            .collect();
        cols.retain(|c| !COUNTS.contains(&c.head.as_str()));
        cols.insert(at, Column { head: COUNTS_HEAD.into(), cells: merged, left: false });
        shared = true;
    }
    let widths: Vec<usize> = cols.iter().map(|c| c.width(&failed)).collect();
    let lead_w = lead(&cols);
    let last = cols.len() - 1;
    let verdict_w = widths[last].min(width.saturating_sub(lead_w).max(VERDICT_MIN));
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for ((c, col), &w) in cells.iter().zip(&cols).zip(&widths).take(last) {
            l.push_str(&if col.left { format!("{c:<w$}  ") } else { format!("{c:>w$}  ") });
        }
        // The verdict wraps under itself: its continuation lines start at its column.
        let wrapped = crate::util::wrap(cells[last], lead_w + verdict_w.max(1), lead_w, lead_w);
        let mut parts = wrapped.lines();
        l.push_str(parts.next().unwrap_or_default().trim_start());
        out.push_str(l.trim_end());
        out.push('\n');
        for p in parts {
            out.push_str(p.trim_end());
            out.push('\n');
        }
    };
    line(cols.iter().map(|c| c.head.as_str()).collect(), &mut out);
    for (r, row) in rows.iter().enumerate() {
        if failed[r] {
            let head = format!("{:<w$}  ", row[0], w = widths[0]);
            let text = crate::util::wrap(&row[1], width.max(head.len() + VERDICT_MIN), head.len(), head.len());
            out.push_str(&head);
            out.push_str(text.trim_start());
            continue;
        }
        line(cols.iter().map(|c| c.cells[r].as_str()).collect(), &mut out);
    }
    let mut notes = Vec::new();
    if !left_out.is_empty() {
        notes.push(format!("Left out to fit {width} columns: {}; --wide prints them (summary.md and the page have every column).", left_out.join(", ")));
    }
    if shared {
        notes.push(format!("{COUNTS_HEAD}: overlaps / lost updates / stale tokens (- where the design has no tokens)."));
    }
    for n in notes {
        out.push_str(&crate::util::wrap(&n, width, 0, 0));
    }
    out
}
