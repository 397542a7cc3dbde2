//! The decision table (`summary::decision`) laid out: on the terminal within [`WIDTH`]
//! columns, and first in summary.md and on the page, under the same heading.

use std::fmt::Write as _;

use super::tables::esc;
use crate::util::WIDTH;
use crate::summary::decision::Decision;

/// The heading every rendering opens with.
pub const HEADING: &str = "The answer: speed, safety under faults, availability, CP / AP";

/// Columns moved into the sentences first, in this order, when the table is wider than
/// [`WIDTH`].
const MOVABLE: [&str; 2] = ["nodes", "p99 ms"];

/// Whether column `i` is a figure (right-aligned).
fn figure(d: &Decision, head: &str) -> bool {
    d.speed.iter().any(|s| s == head) || head == "p99 ms" || head == "avail"
}

/// The table on the terminal: the heading, the caption wrapped, the rows aligned, then one
/// sentence per backend, nothing wider than [`WIDTH`].
pub fn terminal(d: &Decision) -> String {
    let mut heads = d.header();
    let mut rows = d.cells();
    let mut extra: Vec<Vec<String>> = vec![Vec::new(); rows.len()];
    let width = |heads: &[String], rows: &[Vec<String>], i: usize| rows.iter().map(|r| r[i].chars().count()).chain([heads[i].chars().count()]).max().unwrap_or(0);
    let total = |heads: &[String], rows: &[Vec<String>]| (0..heads.len()).map(|i| width(heads, rows, i)).sum::<usize>() + 2 * heads.len().saturating_sub(1);
    // Then the speed columns from the last, keeping the first workload's.
    let movable: Vec<String> = MOVABLE.iter().map(|m| m.to_string()).chain(d.speed.iter().skip(1).rev().cloned()).collect();
    for m in &movable {
        if total(&heads, &rows) <= WIDTH {
            break;
        }
        if let Some(i) = heads.iter().position(|h| h == m) {
            heads.remove(i);
            for (r, e) in rows.iter_mut().zip(&mut extra) {
                e.push(format!("{m} {}", r.remove(i)));
            }
        }
    }
    let widths: Vec<usize> = (0..heads.len()).map(|i| width(&heads, &rows, i)).collect();
    let line = |cells: &[String]| {
        let mut l = String::new();
        for ((c, h), &w) in cells.iter().zip(&heads).zip(&widths) {
            let _ = if figure(d, h) { write!(l, "{c:>w$}  ") } else { write!(l, "{c:<w$}  ") };
        }
        format!("{}\n", l.trim_end())
    };
    let mut out = format!("{HEADING}\n\n");
    out.push_str(&line(&heads));
    for r in &rows {
        out.push_str(&line(r));
    }
    out.push('\n');
    out.push_str(&crate::util::wrap(&d.caption(), WIDTH, 0, 0));
    out.push('\n');
    for (r, e) in d.rows.iter().zip(&extra) {
        let s = if e.is_empty() { r.sentence.clone() } else { format!("{}; {}", r.sentence, e.join("; ")) };
        out.push_str(&crate::util::wrap(&s, WIDTH, 0, 2));
    }
    out
}

/// The table in summary.md: the heading, the rows, the caption, the sentences.
pub fn markdown(d: &Decision) -> String {
    let heads = d.header();
    let mut out = format!("## {HEADING}\n\n| {} |\n|", heads.join(" | "));
    for h in &heads {
        out.push_str(if figure(d, h) { "---:|" } else { "---|" });
    }
    out.push('\n');
    for r in d.cells() {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    let _ = writeln!(out, "\n{}\n", d.caption());
    for r in &d.rows {
        let _ = writeln!(out, "- {}", r.sentence);
    }
    out
}

/// The table on the page, first: nine short columns, in a box that scrolls rather than
/// widening the page; the sentences under it. On a phone-sized screen the nodes and p99
/// columns give way (their figures join each backend's sentence), so the words that decide,
/// safety to CP / AP, stay on the first screen.
pub fn html(d: &Decision) -> String {
    let heads = d.header();
    let minor = |x: &str| MOVABLE.contains(&x);
    let mut h = format!("<section id=\"decision\"><h2>{}</h2><div class=\"scroll\" id=\"decision-box\"><table class=\"decision\" id=\"decision-table\"><tr>", esc(HEADING));
    for x in &heads {
        let class = if minor(x) { " class=\"minor\"" } else { "" };
        let _ = write!(h, "<th{class}>{}</th>", esc(x));
    }
    h.push_str("</tr>");
    let cells = d.cells();
    for r in &cells {
        h.push_str("<tr>");
        for (c, x) in r.iter().zip(&heads) {
            let class = match (figure(d, x), minor(x)) {
                (true, true) => " class=\"num minor\"",
                (false, true) => " class=\"minor\"",
                (true, false) => " class=\"num\"",
                (false, false) => "",
            };
            let _ = write!(h, "<td{class}>{}</td>", esc(c));
        }
        h.push_str("</tr>");
    }
    let _ = write!(h, "</table></div><p><small>{}</small></p><ul>", esc(&d.caption()));
    for (r, cells) in d.rows.iter().zip(&cells) {
        let moved: Vec<String> = heads.iter().zip(cells).filter(|(x, _)| minor(x)).map(|(x, c)| format!("{x} {c}")).collect();
        let _ = write!(h, "<li>{}<span class=\"narrow\">; {}</span></li>", esc(&r.sentence), esc(&moved.join("; ")));
    }
    h.push_str("</ul></section>");
    h
}

#[cfg(test)]
mod tests;
