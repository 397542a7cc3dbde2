//! Lost updates: replay the resource's reads and writes of each key in the order it saw
//! them. Each write stores "what I read + 1"; a write that lands on a value other than the
//! one its section read has overwritten someone else's increment.

use std::collections::HashMap;

use super::{CheckResult, Evidence, History, OpRef, Outcome, Validity, MAX_EVIDENCE};
use crate::history::Op;

/// Replay one register. `admit(section index, is_write)` decides whether a request is taken
/// (always, without fencing). Returns lost updates as (writer, overwritten writer) pairs and
/// the refused section indices.
pub(super) fn replay(
    h: &History,
    mut admit: impl FnMut(usize, bool) -> bool,
) -> (Vec<(usize, Option<usize>)>, Vec<usize>) {
    // (key, seq, section index, is_write)
    let mut events: Vec<(u32, u64, usize, bool)> = Vec::new();
    for (i, s) in h.sections.iter().enumerate() {
        if let Some(q) = s.read_seq {
            events.push((s.key, q, i, false));
        }
        if let Some(q) = s.write_seq {
            events.push((s.key, q, i, true));
        }
    }
    events.sort_unstable();
    let mut value: HashMap<u32, (u64, Option<usize>)> = HashMap::new();
    let mut read_of: HashMap<usize, u64> = HashMap::new();
    let mut lost = Vec::new();
    let mut refused = Vec::new();
    for (key, _, i, is_write) in events {
        let (v, last_writer) = *value.get(&key).unwrap_or(&(0, None));
        if !is_write {
            if admit(i, false) {
                read_of.insert(i, v);
            } else {
                refused.push(i);
            }
            continue;
        }
        let Some(&r) = read_of.get(&i) else { continue }; // its read was refused
        if !admit(i, true) {
            refused.push(i);
            continue;
        }
        if v != r {
            lost.push((i, last_writer));
        }
        value.insert(key, (r + 1, Some(i)));
    }
    refused.sort_unstable();
    refused.dedup();
    (lost, refused)
}

pub(super) fn section_ref(h: &History, i: usize) -> OpRef {
    let s = &h.sections[i];
    h.acquire_before(s.p, s.key, s.enter).map(|o| o.as_ref()).unwrap_or(OpRef {
        p: s.p,
        f: Op::Acquire,
        key: s.key,
        invoke_ns: s.enter,
        complete_ns: Some(s.enter),
        outcome: Outcome::Ok,
        token: s.token,
    })
}

pub(super) fn lost_evidence(h: &History, lost: &[(usize, Option<usize>)]) -> Vec<Evidence> {
    lost.iter()
        .take(MAX_EVIDENCE)
        .map(|(w, prev)| {
            let mut ops = vec![section_ref(h, *w)];
            if let Some(p) = prev {
                ops.push(section_ref(h, *p));
            }
            Evidence {
                what: format!(
                    "key {}: process {} wrote over a value it had not read{}",
                    h.sections[*w].key,
                    h.sections[*w].p,
                    prev.map(|p| format!(", losing process {}'s update", h.sections[p].p)).unwrap_or_default()
                ),
                ops,
            }
        })
        .collect()
}

pub fn check(h: &History) -> CheckResult {
    if h.sections.is_empty() {
        return CheckResult::new("lost-updates", Validity::Unknown, "no resource operations in the history");
    }
    let (lost, _) = replay(h, |_, _| true);
    let mut r = if lost.is_empty() {
        CheckResult::new("lost-updates", Validity::Valid, "every write stored on the value its section read")
    } else {
        let mut r = CheckResult::new("lost-updates", Validity::Invalid, format!("{} update(s) lost", lost.len()));
        r.evidence = lost_evidence(h, &lost);
        r
    };
    r.figures = serde_json::json!({ "lost_updates": lost.len(), "sections": h.sections.len() });
    r
}
