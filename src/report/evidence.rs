//! The checkers' evidence as a person reads it: each checker's items grouped by what they
//! say and the key they name, counted ("94 token inversions on key 0 from t = 3.1 s, e.g.
//! token 1 entered after token 94"), the first few of each group quoted with the history
//! records around them, the rest left to checks.json and history.jsonl.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use super::tables::esc;
use crate::checker::{CheckResult, SegmentVerdict, Validity, MAX_EVIDENCE};
use crate::history::{self, Record};

/// How many items of a group the page quotes.
pub const SHOWN: usize = 3;

/// (segment, checker, evidence) -> the history records of the operations involved.
pub type Excerpts = HashMap<(usize, crate::checker::CheckerId, usize), Vec<String>>;

pub(super) fn validity_class(v: Validity) -> &'static str {
    match v {
        Validity::Valid => "valid",
        Validity::Unknown => "unknown",
        Validity::Invalid => "invalid",
    }
}

/// Quote, for every piece of evidence the page shows, the history records of the processes
/// it names, around the operations it names.
pub fn evidence_excerpts(path: &Path, verdicts: &[SegmentVerdict]) -> Excerpts {
    let mut out = Excerpts::new();
    let shown: Vec<Vec<(usize, Vec<usize>)>> =
        verdicts.iter().map(|v| v.results.iter().enumerate().map(|(k, r)| (k, groups(r).iter().flat_map(|g| g.items.iter().take(SHOWN).copied()).collect())).collect()).collect();
    // Streamed record by record: a long history is never held in memory.
    let mut seg: Option<usize> = None;
    let _ = history::for_each_record(path, |rec| {
        if matches!(rec, Record::Meta(_)) {
            seg = Some(seg.map_or(0, |i| i + 1));
            return;
        }
        let i = seg.unwrap_or(0);
        let Some(v) = verdicts.get(i) else { return };
        let (p, key) = match &rec {
            Record::Invoke { p, key, .. }
            | Record::Ok { p, key, .. }
            | Record::Fail { p, key, .. }
            | Record::Info { p, key, .. }
            | Record::Section { p, key, .. } => (*p, *key),
            _ => return,
        };
        let ns = rec.ns().unwrap_or(0);
        for (k, items) in &shown[i] {
            let r = &v.results[*k];
            for &j in items {
                let e = &r.evidence[j];
                let named = e.ops.iter().any(|op| {
                    let from = op.invoke_ns.saturating_sub(1_000_000);
                    let to = op.complete_ns.unwrap_or(op.invoke_ns).saturating_add(1_000_000_000);
                    p == op.p && key == op.key && ns >= from && ns <= to
                });
                if named {
                    let lines = out.entry((i, r.checker, j)).or_default();
                    if lines.len() < 8 * e.ops.len() {
                        lines.push(serde_json::to_string(&rec).unwrap_or_default());
                    }
                }
            }
        }
    });
    out
}

/// Evidence items that say the same thing about the same key.
pub struct Group {
    /// "token inversion" / "token inversions", by count.
    pub noun: String,
    pub key: Option<u32>,
    /// Indices into the checker's evidence, in order.
    pub items: Vec<usize>,
    /// The earliest operation named, in seconds of the history's clock.
    pub from_s: f64,
    /// The first item's text without its "key N: " prefix.
    pub example: String,
}

/// What an item is, by its checker and the shape of its text: (one, many).
fn noun(checker: &str, what: &str) -> (&'static str, &'static str) {
    match checker {
        "fencing" if what.contains("entered after token") => ("token inversion", "token inversions"),
        "fencing" if what.contains("valid lease refused") => ("legitimate write refused", "legitimate writes refused"),
        "fencing" if what.contains("stale token refused") => ("stale write refused", "stale writes refused"),
        "mutual-exclusion" => ("overlapping hold", "overlapping holds"),
        "lost-updates" | "fencing" if what.contains("wrote over") => ("lost update", "lost updates"),
        "contention" => ("acquire refused with nobody holding", "acquires refused with nobody holding"),
        _ => ("finding", "findings"),
    }
}

/// Digits masked: two items with the same shape say the same thing.
fn shape(what: &str) -> String {
    let mut out = String::new();
    for c in what.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A checker's evidence grouped by shape and key, in order of first appearance.
pub fn groups(r: &CheckResult) -> Vec<Group> {
    let mut out: Vec<(String, Group)> = Vec::new();
    for (j, e) in r.evidence.iter().enumerate() {
        let key = e.ops.first().map(|o| o.key);
        let id = format!("{}|{key:?}", shape(&e.what));
        let from = e.ops.iter().map(|o| o.invoke_ns).min().unwrap_or(0) as f64 / 1e9;
        match out.iter_mut().find(|(k, _)| *k == id) {
            Some((_, g)) => {
                g.items.push(j);
                g.from_s = g.from_s.min(from);
            }
            None => {
                let example = match e.what.split_once(": ") {
                    Some((k, rest)) if k.starts_with("key ") => rest.to_string(),
                    _ => e.what.clone(),
                };
                out.push((id, Group { noun: String::new(), key, items: vec![j], from_s: from, example }));
            }
        }
    }
    out.into_iter()
        .map(|(_, mut g)| {
            let (one, many) = noun(r.checker.as_str(), &r.evidence[g.items[0]].what);
            g.noun = if g.items.len() == 1 { one.to_string() } else { many.to_string() };
            g
        })
        .collect()
}

impl Group {
    /// "94 token inversions on key 0 from t = 3.1 s".
    pub fn headline(&self) -> String {
        let on = self.key.map(|k| format!(" on key {k}")).unwrap_or_default();
        let when = if self.items.len() == 1 { "at" } else { "from" };
        format!("{} {}{on} {when} t = {:.1} s", self.items.len(), self.noun, self.from_s)
    }
}

/// Where the items the page does not quote are: checks.json keeps the first MAX_EVIDENCE.
fn rest_note(r: &CheckResult) -> String {
    if r.evidence.len() >= MAX_EVIDENCE {
        format!(" (checks.json keeps the first {MAX_EVIDENCE}; the count of all is in the line above)")
    } else {
        String::new()
    }
}

/// Each phase's checkers, their answers and the evidence they name, grouped and counted
/// (each group linked to its first item below).
pub fn checks(verdicts: &[SegmentVerdict]) -> String {
    let mut h = String::from("<h2>Checks</h2>");
    if verdicts.is_empty() {
        h.push_str("<p>No history was kept for this run, so only the resource's counts above speak for safety.</p>");
    }
    let mut anchored = std::collections::HashSet::new();
    for (i, v) in verdicts.iter().enumerate() {
        let anchor = if anchored.insert(v.backend.clone()) { format!(" id=\"checks-{}\"", esc(&v.backend)) } else { String::new() };
        let _ = write!(h, "<h3{anchor}><span id=\"seg-{i}\"></span>{} {}: <span class=\"{}\">{}</span></h3><ul>", esc(&v.backend), esc(&v.workload), validity_class(v.valid), v.valid);
        for r in &v.results {
            let _ = write!(h, "<li><b>{}</b> <span class=\"{}\">{}</span>: {}", esc(r.checker.as_str()), validity_class(r.valid), r.valid, esc(&r.message));
            if !r.evidence.is_empty() {
                h.push_str("<ul>");
                for g in groups(r) {
                    let id = format!("ev-{i}-{}-{}", r.checker, g.items[0]);
                    let _ = write!(h, "<li><a href=\"#{id}\">{}</a>, e.g. {}</li>", esc(&g.headline()), esc(&g.example));
                }
                let _ = write!(h, "</ul>{}", esc(&rest_note(r)));
            }
            h.push_str("</li>");
        }
        h.push_str("</ul>");
    }
    h
}

/// Evidence: the first few items of each group, the operations they name and the history
/// records around them; the rest counted and left to the data files.
pub fn evidence(verdicts: &[SegmentVerdict], excerpts: &Excerpts) -> String {
    let mut h = String::new();
    for (i, v) in verdicts.iter().enumerate() {
        for r in &v.results {
            for g in groups(r) {
                if h.is_empty() {
                    h.push_str("<h2>Evidence</h2><p>Operations named by the checks, and the history records around them (from <a href=\"history.jsonl\">history.jsonl</a>); \
                                the first few of each kind, the rest in <a href=\"checks.json\">checks.json</a>.</p>");
                }
                let _ = write!(h, "<h3>{} {} &middot; {}: {}</h3>", esc(&v.backend), esc(&v.workload), esc(r.checker.as_str()), esc(&g.headline()));
                for &j in g.items.iter().take(SHOWN) {
                    let e = &r.evidence[j];
                    let id = format!("ev-{i}-{}-{j}", r.checker);
                    let _ = write!(h, "<h4 id=\"{id}\">{}</h4><ul>", esc(&e.what));
                    for op in &e.ops {
                        let _ = write!(h, "<li>{}</li>", esc(&op.to_string()));
                    }
                    h.push_str("</ul>");
                    if let Some(lines) = excerpts.get(&(i, r.checker, j)).filter(|l| !l.is_empty()) {
                        let _ = write!(h, "<details><summary>{} history records around it</summary><pre>{}</pre></details>", lines.len(), esc(&lines.join("\n")));
                    }
                }
                if g.items.len() > SHOWN {
                    let _ = write!(h, "<p>{} more like these in <a href=\"checks.json\">checks.json</a>{}.</p>", g.items.len() - SHOWN, esc(&rest_note(r)));
                }
            }
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{Evidence, OpRef, Outcome};
    use crate::history::Op;

    fn op(key: u32, s: f64, token: Option<u64>) -> OpRef {
        OpRef { p: 1, f: Op::Acquire, key, invoke_ns: (s * 1e9) as u64, complete_ns: None, outcome: Outcome::Ok, token }
    }

    fn inversion(key: u32, s: f64, later: u64, earlier: u64) -> Evidence {
        Evidence { what: format!("key {key}: token {later} entered after token {earlier}"), ops: vec![op(key, s, Some(earlier)), op(key, s + 0.1, Some(later))] }
    }

    /// Forty inversions on key 0 and one on key 3 read as two counted lines, no debug text.
    #[test]
    fn inversions_are_grouped_by_key_and_counted() {
        let mut r = CheckResult::new(crate::checker::CheckerId::Fencing, Validity::Invalid, "tokens out of order: 41 token inversion(s)");
        r.evidence = (0..40).map(|i| inversion(0, 3.1 + i as f64, i + 1, 94)).collect();
        r.evidence.push(inversion(3, 9.0, 5, 7));
        let g = groups(&r);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].headline(), "40 token inversions on key 0 from t = 3.1 s");
        assert_eq!(g[0].example, "token 1 entered after token 94");
        assert_eq!(g[1].headline(), "1 token inversion on key 3 at t = 9.0 s");
        let page = evidence(&[SegmentVerdict { backend: "redis".into(), workload: "hot-key".into(), phase: String::new(), valid: Validity::Invalid, results: vec![r], interrupted_ns: None, cancelled: 0, windows: None }], &Excerpts::new());
        assert_eq!(page.matches("<h4 ").count(), SHOWN + 1, "the first few of each group, not all 41");
        assert!(page.contains("37 more like these"), "{page}");
        assert!(!page.contains("Some(") && !page.contains("None"), "{page}");
    }
}
