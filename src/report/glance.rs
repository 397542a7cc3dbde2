//! The answer on the page's first screen: the judgement's matrix (`judgement::matrix`, made
//! by `Summary::matrix`) drawn as a table, backends grouped by family, and its sentences.

use std::fmt::Write as _;

use super::tables::{by_family, esc, family, with_headings};
use crate::judgement::matrix::{Cell, NO_FAULT};
use crate::summary::Summary;

/// The cell's two words (safety, availability) as coloured pills and the figure under them.
fn cell(c: &Cell) -> String {
    let mut h = format!("<span class=\"pill {}\">{}</span>", c.safety_tone.class(), c.safety);
    match c.availability {
        Some(a) => {
            let _ = write!(h, " <span class=\"pill {}\">{a}</span>", c.availability_tone.class());
        }
        None => h.push_str(" <span class=\"pill untested\">not measured</span>"),
    }
    if let Some(d) = &c.detail {
        let _ = write!(h, "<br><small>{}</small>", esc(d));
    }
    h
}

/// The answer: the matrix, what a cell says, and one sentence per backend.
pub fn answer(s: &Summary) -> String {
    let m = s.matrix();
    let mut h = String::from("<section id=\"answer\"><div class=\"scroll\"><table class=\"answer\" id=\"answer-matrix\"><tr><th>backend</th>");
    for c in &m.columns {
        let label = if c == NO_FAULT { "no fault".to_string() } else { format!("under {c}") };
        let _ = write!(h, "<th>{}</th>", esc(&label));
    }
    h.push_str("</tr>");
    let ordered: Vec<(&'static str, &str)> = by_family(s).into_iter().map(|b| (family(b), b.name.as_str())).collect();
    let mut sentences = Vec::new();
    for (heading, name) in with_headings(ordered) {
        let Some(row) = m.rows.iter().find(|r| r.backend == name) else { continue };
        if let Some(f) = heading {
            let _ = write!(h, "<tr class=\"family\"><th colspan=\"{}\">{}</th></tr>", m.columns.len() + 1, esc(f));
        }
        let _ = write!(h, "<tr><th class=\"l\">{}</th>", esc(name));
        match &row.failure {
            Some(f) => {
                let _ = write!(h, "<td colspan=\"{}\"><span class=\"pill bad\">not measured</span><br><small>{}</small></td>", m.columns.len(), esc(&first_words(f)));
            }
            None => {
                for c in &row.cells {
                    match c {
                        Some(c) => {
                            let _ = write!(h, "<td>{}</td>", cell(c));
                        }
                        None => h.push_str("<td><small>not applied</small></td>"),
                    }
                }
            }
        }
        h.push_str("</tr>");
        sentences.push(&row.sentence);
    }
    h.push_str("</table></div><p class=\"key\">Each cell: safety (<i>held</i>: never two holders at once) and availability (grant rate against the \
                rate with no fault in force) under that condition. Safety is judged per phase, so a phase's verdict stands for every fault in it. \
                Details, by workload, below.</p><ul id=\"answer-sentences\">");
    for sentence in sentences {
        let _ = write!(h, "<li>{}</li>", esc(sentence));
    }
    h.push_str("</ul></section>");
    h
}

/// A failure's first sentence, short enough for a cell (the whole text is in the sentence).
fn first_words(f: &str) -> String {
    let first = f.split(['.', ';', ':']).next().unwrap_or(f);
    if first.chars().count() > 60 {
        format!("{}…", first.chars().take(60).collect::<String>())
    } else {
        first.to_string()
    }
}
