//! Checkers: read a history segment, return `valid`, `invalid` (with the offending
//! operations) or `unknown`. They compose: a segment's verdict is the worst of its checkers.
//!
//! - [`mutex`]: no two holders of a key at once (sections at the resource when recorded,
//!   otherwise the client-side hold intervals).
//! - [`lost_update`]: replays the resource's reads and writes; a write over a value it did
//!   not read lost someone's update.
//! - [`fencing`]: whether fencing worked: no token inversion, no legitimate holder refused,
//!   nothing lost on the fenced register (run for backends that hand out tokens).
//! - [`contention`]: every acquire refused as contended met another process holding or
//!   taking the key (a lock that reports failure for an acquire that took effect fails it).
//! - [`availability`]: the grant rate during applied faults against the rate outside them,
//!   recovery after each heal, the longest gap.
//!
//! None of them says `valid` when it cannot decide: an operation whose outcome is unknown
//! and whose effect could reach past the end of a history without sections makes the mutex
//! checker `unknown`, never `valid`, and so does a history with no holder at all.

pub mod availability;
pub mod contention;
pub mod fencing;
pub mod lost_update;
pub mod mutex;
mod ops;

use serde::{Deserialize, Serialize};

use crate::history::{Op, Segment};
pub use ops::{History, OpRecord, Outcome};

/// A checker's answer. Ordered so that the worst is the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Validity {
    Valid,
    Unknown,
    Invalid,
}

impl std::fmt::Display for Validity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Validity::Valid => "valid",
            Validity::Unknown => "unknown",
            Validity::Invalid => "invalid",
        })
    }
}

/// An operation named as evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpRef {
    pub p: u64,
    pub f: Op,
    pub key: u32,
    pub invoke_ns: u64,
    pub complete_ns: Option<u64>,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

impl std::fmt::Display for OpRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "process {} {:?} key {} at {:.3}s", self.p, self.f, self.key, self.invoke_ns as f64 / 1e9)?;
        if let Some(t) = self.token {
            write!(f, " token {t}")?;
        }
        write!(f, " ({:?})", self.outcome)
    }
}

/// One piece of evidence: what went wrong and the operations involved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub what: String,
    pub ops: Vec<OpRef>,
}

/// How many pieces of evidence a checker keeps.
pub const MAX_EVIDENCE: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub checker: String,
    pub valid: Validity,
    /// One line.
    pub message: String,
    pub evidence: Vec<Evidence>,
    pub figures: serde_json::Value,
}

impl CheckResult {
    pub fn new(checker: &str, valid: Validity, message: impl Into<String>) -> Self {
        CheckResult {
            checker: checker.into(),
            valid,
            message: message.into(),
            evidence: Vec::new(),
            figures: serde_json::Value::Null,
        }
    }
}

/// Every checker over one segment, and the worst of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentVerdict {
    pub backend: String,
    pub workload: String,
    pub valid: Validity,
    pub results: Vec<CheckResult>,
}

/// Run all checkers on a segment.
pub fn check(seg: &Segment) -> SegmentVerdict {
    let h = History::from_segment(seg);
    let mut results = vec![mutex::check(&h), lost_update::check(&h), contention::check(&h)];
    // The fencing question does not arise for a backend that declares it has no tokens
    // (Redlock): its answer would only ever be `unknown`, and would mask the others.
    if h.fencing_tokens != Some(false) {
        results.push(fencing::check(&h));
    }
    results.push(availability::check(&h));
    let valid = results.iter().map(|r| r.valid).max().unwrap_or(Validity::Unknown);
    let (backend, workload) = seg
        .meta
        .as_ref()
        .map(|m| (m.backend.clone(), m.workload.clone()))
        .unwrap_or_else(|| ("unknown".into(), "unknown".into()));
    SegmentVerdict { backend, workload, valid, results }
}

/// The worst validity over many verdicts.
pub fn worst<'a>(it: impl IntoIterator<Item = &'a SegmentVerdict>) -> Validity {
    it.into_iter().map(|v| v.valid).max().unwrap_or(Validity::Unknown)
}
