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
//!   recovery after each heal, the longest gap, from [`windows`]: each fault in its own
//!   window (during it, its recovery, its safety span) and the quiet time between them.
//!
//! None of them says `valid` when it cannot decide: an operation whose outcome is unknown
//! and whose effect could reach past the end of a history without sections makes the mutex
//! checker `unknown`, never `valid`, and so does a history with no holder at all.

pub mod availability;
pub mod contention;
pub mod fencing;
pub mod item;
pub mod lost_update;
pub mod mutex;
mod ops;
mod segment;
pub mod stream;
pub mod windows;

use serde::{Deserialize, Serialize};

use crate::history::{Op, Segment};
pub use ops::{OpRecord, Outcome};
pub use segment::History;

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

/// Which checker answered. Serialized as the name checks.json always carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckerId {
    MutualExclusion,
    LostUpdates,
    Contention,
    Fencing,
    Availability,
    /// The history itself could not be read or sorted.
    History,
    /// A checker this build does not know (a result set written by another dlbench).
    #[serde(other)]
    Other,
}

impl CheckerId {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckerId::MutualExclusion => "mutual-exclusion",
            CheckerId::LostUpdates => "lost-updates",
            CheckerId::Contention => "contention",
            CheckerId::Fencing => "fencing",
            CheckerId::Availability => "availability",
            CheckerId::History => "history",
            CheckerId::Other => "other",
        }
    }
}

impl std::fmt::Display for CheckerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: the tables align it with `{:16}` as they did the string.
        f.pad(self.as_str())
    }
}

/// A checker compares equal to its name (`r.checker == "availability"`).
impl PartialEq<&str> for CheckerId {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
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
        let op = match self.f {
            Op::Acquire => "acquire",
            Op::Release => "release",
        };
        write!(f, "process {} {op} key {} at {:.3} s", self.p, self.key, self.invoke_ns as f64 / 1e9)?;
        if let Some(t) = self.token {
            write!(f, ", token {t}")?;
        }
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "failed",
            Outcome::Info => "outcome unknown",
            Outcome::Unresolved => "never completed",
        };
        write!(f, " ({outcome})")
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
    pub checker: CheckerId,
    pub valid: Validity,
    /// One line.
    pub message: String,
    pub evidence: Vec<Evidence>,
    pub figures: serde_json::Value,
}

impl CheckResult {
    pub fn new(checker: CheckerId, valid: Validity, message: impl Into<String>) -> Self {
        CheckResult {
            checker,
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
    /// The phase the segment belongs to ([`crate::history::Meta::phase_id`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    pub valid: Validity,
    pub results: Vec<CheckResult>,
    /// Where an interrupt (Ctrl-C) cut the segment, in history nanoseconds: the checkers
    /// judged what completed, and the acquires it cancelled kept their unknown-outcome window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_ns: Option<u64>,
    /// Acquires the interrupt (or the phase's drain bound) cancelled: outcome unknown, not
    /// errors of the lock.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cancelled: u64,
    /// Each fault in its own window, and the quiet time between them (absent in checks
    /// written before windows were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<windows::WindowsSeen>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SegmentVerdict {
    /// The verdict as one word, with "(interrupted)" when an interrupt cut the segment.
    pub fn describe(&self) -> String {
        match self.interrupted_ns {
            Some(ns) => format!(
                "{} (interrupted at {:.3}s: judged on what completed; {} cancelled acquire(s) kept their unknown-outcome window)",
                self.valid,
                ns as f64 / 1e9,
                self.cancelled
            ),
            None => self.valid.to_string(),
        }
    }
}

/// Whether any segment was cut by an interrupt.
pub fn interrupted<'a>(it: impl IntoIterator<Item = &'a SegmentVerdict>) -> bool {
    it.into_iter().any(|v| v.interrupted_ns.is_some())
}

/// Run all checkers on a segment held in memory.
pub fn check(seg: &Segment) -> SegmentVerdict {
    let mut st = stream::SegmentStream::new(seg.meta.clone());
    let run = || -> std::io::Result<SegmentVerdict> {
        for r in &seg.records {
            st.push(r)?;
        }
        st.finish()
    };
    run().unwrap_or_else(|e| {
        let (backend, workload) = seg.meta.as_ref().map(|m| (m.backend.clone(), m.workload.clone())).unwrap_or_default();
        SegmentVerdict {
            backend,
            workload,
            phase: seg.meta.as_ref().map(|m| m.phase_id()).unwrap_or_default(),
            valid: Validity::Unknown,
            results: vec![CheckResult::new(crate::checker::CheckerId::History, Validity::Unknown, format!("could not sort the history for checking: {e}"))],
            interrupted_ns: None,
            cancelled: 0,
            windows: None,
        }
    })
}

/// Run all checkers on every segment of a history file, one record in memory at a time
/// (plus the checkers' open state and the sort's buffer): any length checks in bounded memory.
pub fn check_file(path: &std::path::Path) -> anyhow::Result<Vec<SegmentVerdict>> {
    Ok(check_file_counted(path)?.0)
}

/// As [`check_file`], with what was read: the records, and whether a cut last line was
/// ignored (`dlbench check` says so).
pub fn check_file_counted(path: &std::path::Path) -> anyhow::Result<(Vec<SegmentVerdict>, crate::history::ReadCount)> {
    let mut out = Vec::new();
    let mut current: Option<stream::SegmentStream> = None;
    let mut failed: Option<std::io::Error> = None;
    let read = crate::history::for_each_record(path, |rec| {
        if failed.is_some() {
            return;
        }
        let r = match rec {
            crate::history::Record::Meta(m) => {
                let next = stream::SegmentStream::new(Some(m));
                match current.replace(next) {
                    Some(done) => done.finish().map(|v| out.push(v)),
                    None => Ok(()),
                }
            }
            r => current.get_or_insert_with(|| stream::SegmentStream::new(None)).push(&r),
        };
        if let Err(e) = r {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        anyhow::bail!("{}: checking needs a temporary directory to sort in: {e}", path.display());
    }
    if let Some(done) = current {
        out.push(done.finish().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?);
    }
    Ok((out, read))
}

/// The worst validity over many verdicts.
pub fn worst<'a>(it: impl IntoIterator<Item = &'a SegmentVerdict>) -> Validity {
    it.into_iter().map(|v| v.valid).max().unwrap_or(Validity::Unknown)
}
