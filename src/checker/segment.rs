//! A whole segment in memory, paired by the checkers' own [`Pairing`]: for the figures of a
//! run killed before it wrote them (`report/partial.rs`). The checkers stream instead.

use super::item::SectionItem;
use super::ops::{FaultLog, OpRecord, Pairing};
use crate::history::{Record, Segment};

/// Everything in one segment.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every operation, in invocation order.
    pub ops: Vec<OpRecord>,
    pub sections: Vec<SectionItem>,
    pub faults: FaultLog,
    /// The last timestamp in the segment.
    pub end_ns: u64,
}

impl History {
    pub fn from_segment(seg: &Segment) -> History {
        let mut h = History::default();
        let mut pairing = Pairing::default();
        for r in &seg.records {
            if let Some(ns) = r.ns() {
                h.end_ns = h.end_ns.max(ns);
            }
            match r {
                Record::Section { .. } => {
                    let s = SectionItem::of(r).expect("a section record");
                    h.end_ns = h.end_ns.max(s.exit);
                    h.sections.push(s);
                }
                Record::Nemesis { .. } => h.faults.push(r),
                _ => h.ops.extend(pairing.push(r)),
            }
        }
        h.ops.extend(pairing.unfinished());
        h.ops.sort_by_key(|o| (o.invoke_ns, o.p));
        h
    }
}
