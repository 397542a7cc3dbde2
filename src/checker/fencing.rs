//! Fencing: whether the tokens did their job, judged from what the resource saw.
//!
//! A fenced register cannot lose an update while every section presents a token, so "no
//! update lost with fencing" proves nothing by itself. What this checker judges:
//! - token inversions: a section entered, its lease valid, with a token not above one an
//!   earlier section of the key presented (a counter reset by a restart, repeated or
//!   regressing tokens) — `invalid`;
//! - legitimate writes refused: the register refused a section because of a token an earlier
//!   section presented, while the refused holder's lease was valid — `invalid`;
//! - stale writes refused: refusals caused by a later section, whose holder had been
//!   superseded — what fencing is for;
//! - updates lost on the fenced register (sections without tokens) — `invalid`.
//!
//! The register itself is replayed with the plain one ([`super::lost_update::Replay`]);
//! inversions are read off the sections in entry order. Without sections (a hand-made
//! history), tokens must grow in the order acquisitions complete. The same rules as
//! `dlbench_core::Resource`, applied offline.

use std::collections::HashMap;

use super::lost_update::Replay;
use super::item::{Context, Item, Stamped};
use super::{CheckResult, Evidence, OpRef, Outcome, Validity, MAX_EVIDENCE};

/// A token as a reader sees it: its number, or "none" for a section that presented none.
fn token_word(t: Option<u64>) -> String {
    t.map_or_else(|| "none".to_string(), |t| t.to_string())
}

pub struct Fencing {
    declared_without: bool,
    has_tokens: bool,
    from_sections: bool,
    /// Per key, the highest token any section entered with, and its operation.
    max_entered: HashMap<u32, (u64, OpRef)>,
    /// Per key, the last grant's token and operation (completion order, no sections).
    last_grant: HashMap<u32, (u64, OpRef)>,
    last_acquire: HashMap<(u64, u32), OpRef>,
    inversions: u64,
    evidence: Vec<Evidence>,
}

impl Fencing {
    pub fn new(ctx: &Context) -> Self {
        Fencing {
            declared_without: ctx.fencing_tokens == Some(false),
            has_tokens: ctx.has_tokens,
            from_sections: ctx.sections > 0,
            max_entered: HashMap::new(),
            last_grant: HashMap::new(),
            last_acquire: HashMap::new(),
            inversions: 0,
            evidence: Vec::new(),
        }
    }

    fn inversion(&mut self, key: u32, earlier: OpRef, later: OpRef) {
        self.inversions += 1;
        if self.evidence.len() < MAX_EVIDENCE {
            self.evidence.push(Evidence {
                what: format!("key {key}: token {} entered after token {}", token_word(later.token), token_word(earlier.token)),
                ops: vec![earlier, later],
            });
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        match &s.item {
            Item::Acquire(o) if o.outcome == Outcome::Ok => {
                self.last_acquire.insert((o.p, o.key), o.as_ref());
            }
            Item::Grant(o) if !self.from_sections => {
                let Some(t) = o.token else { return };
                if let Some((last, prev)) = self.last_grant.get(&o.key).cloned() {
                    if t <= last {
                        self.inversion(o.key, prev, o.as_ref());
                    }
                }
                self.last_grant.insert(o.key, (t, o.as_ref()));
            }
            Item::Section(sec) => {
                let Some(t) = sec.token else { return };
                let op = self.last_acquire.remove(&(sec.p, sec.key)).unwrap_or_else(|| sec.stand_in());
                match self.max_entered.get(&sec.key).cloned() {
                    Some((m, prev)) if t <= m => {
                        if !sec.lease_lost {
                            self.inversion(sec.key, prev, op);
                        }
                    }
                    _ => {
                        self.max_entered.insert(sec.key, (t, op));
                    }
                }
            }
            _ => {}
        }
    }

    pub fn finish(self, r: &Replay) -> CheckResult {
        if !self.has_tokens {
            let why = if self.declared_without { "the backend has no fencing tokens" } else { "no fencing tokens in the history" };
            return CheckResult::new(crate::checker::CheckerId::Fencing, Validity::Unknown, why);
        }
        let stale_refused = r.refused.saturating_sub(r.legit);
        let mut c = if self.inversions > 0 || r.legit > 0 {
            let mut c = CheckResult::new(
                crate::checker::CheckerId::Fencing,
                Validity::Invalid,
                format!("tokens out of order: {} token inversion(s), {} legitimate write(s) refused", self.inversions, r.legit),
            );
            c.evidence = self.evidence;
            for op in r.legit_evidence.iter().take(MAX_EVIDENCE) {
                c.evidence.push(Evidence {
                    what: "a holder with a valid lease refused because of an earlier holder's token".into(),
                    ops: vec![op.clone()],
                });
            }
            c
        } else if r.lost_fenced > 0 {
            let mut c = CheckResult::new(crate::checker::CheckerId::Fencing, Validity::Invalid, format!("{} update(s) lost despite fencing", r.lost_fenced));
            c.evidence = r.lost_fenced_evidence.clone();
            c
        } else if r.sections == 0 {
            CheckResult::new(crate::checker::CheckerId::Fencing, Validity::Valid, "tokens grew with every grant")
        } else if stale_refused == 0 {
            CheckResult::new(crate::checker::CheckerId::Fencing, Validity::Valid, "tokens grew with every holder; no stale write arrived, so fencing was not exercised")
        } else {
            let mut c = CheckResult::new(
                crate::checker::CheckerId::Fencing,
                Validity::Valid,
                format!("{stale_refused} stale write(s) refused; tokens grew with every holder and no legitimate write was refused"),
            );
            for op in r.refused_evidence.iter().take(MAX_EVIDENCE) {
                c.evidence.push(Evidence { what: "stale token refused".into(), ops: vec![op.clone()] });
            }
            c
        };
        c.figures = serde_json::json!({
            "token_inversions": self.inversions,
            "rejected": r.refused,
            "stale_refused": stale_refused,
            "legit_refused": r.legit,
            "lost_updates_fenced": r.lost_fenced,
        });
        c
    }
}
