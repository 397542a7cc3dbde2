//! Lost updates: replay the resource's reads and writes of each key in the order it saw
//! them. Each write stores "what I read + 1"; a write that lands on a value other than the
//! one its section read has overwritten someone else's increment.
//!
//! The same replay drives a second register that refuses stale fencing tokens, for the
//! fencing checker: one pass gives both sides. Reads and writes carry per-key sequence numbers
//! with no gaps, and a section's read and write both happen after it entered, so with the
//! sections arriving in entry order a small per-key heap puts them back in sequence order,
//! holding only the reads and writes of sections still open.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::item::{Context, Item, SectionItem, Stamped};
use super::{CheckResult, Evidence, OpRef, Outcome, Validity, MAX_EVIDENCE};

/// A section whose read or write is still to be replayed.
struct Pending {
    sec: SectionItem,
    /// Entry order (time, then file order): who entered first.
    order: (u64, u64),
    op: OpRef,
    plain_read: Option<u64>,
    fenced_read: Option<u64>,
    fenced_refused: bool,
}

#[derive(Default)]
struct Register {
    value: u64,
    /// The last writer: its process and operation, for evidence.
    last: Option<(u64, OpRef)>,
}

#[derive(Default)]
struct KeyReplay {
    next: u64,
    heap: BinaryHeap<Reverse<(u64, bool, u64)>>,
    plain: Register,
    fenced: Register,
    /// Highest token the fenced register admitted, and the entry order of its section.
    max_token: Option<(u64, (u64, u64))>,
}

/// Both registers of the resource, replayed.
pub struct Replay {
    /// Per register and key: `register << 32 | key`.
    keys: HashMap<u64, KeyReplay>,
    pending: HashMap<u64, Pending>,
    last_acquire: HashMap<(u64, u32), OpRef>,
    pub sections: u64,
    pub lost: u64,
    pub lost_evidence: Vec<Evidence>,
    pub lost_fenced: u64,
    pub lost_fenced_evidence: Vec<Evidence>,
    /// Refused by the fenced register (stale and legitimate alike).
    pub refused: u64,
    pub refused_evidence: Vec<OpRef>,
    /// Refused because of an earlier section's token while the lease was valid.
    pub legit: u64,
    pub legit_evidence: Vec<OpRef>,
}

fn lost_evidence(key: u32, writer: &Pending, prev: &Option<(u64, OpRef)>) -> Evidence {
    let mut ops = vec![writer.op.clone()];
    if let Some((_, op)) = prev {
        ops.push(op.clone());
    }
    Evidence {
        what: format!(
            "key {}: process {} wrote over a value it had not read{}",
            key,
            writer.sec.p,
            prev.as_ref().map(|(p, _)| format!(", losing process {p}'s update")).unwrap_or_default()
        ),
        ops,
    }
}

impl Replay {
    pub fn new() -> Self {
        Replay {
            keys: HashMap::new(),
            pending: HashMap::new(),
            last_acquire: HashMap::new(),
            sections: 0,
            lost: 0,
            lost_evidence: Vec::new(),
            lost_fenced: 0,
            lost_fenced_evidence: Vec::new(),
            refused: 0,
            refused_evidence: Vec::new(),
            legit: 0,
            legit_evidence: Vec::new(),
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        match &s.item {
            Item::Acquire(o) if o.outcome == Outcome::Ok => {
                self.last_acquire.insert((o.p, o.key), o.as_ref());
            }
            Item::Section(sec) => {
                self.sections += 1;
                let op = self.last_acquire.remove(&(sec.p, sec.key)).unwrap_or_else(|| sec.stand_in());
                let rk = (u64::from(sec.register) << 32) | u64::from(sec.key);
                let k = self.keys.entry(rk).or_insert_with(|| KeyReplay { next: 1, ..Default::default() });
                if let Some(q) = sec.read_seq {
                    k.heap.push(Reverse((q, false, s.serial)));
                }
                if let Some(q) = sec.write_seq {
                    k.heap.push(Reverse((q, true, s.serial)));
                }
                self.pending.insert(
                    s.serial,
                    Pending { sec: sec.clone(), order: (sec.enter, s.serial), op, plain_read: None, fenced_read: None, fenced_refused: false },
                );
                self.advance(rk, false);
            }
            _ => {}
        }
    }

    /// Replay every read and write of `key` whose turn has come (all of them at the end).
    fn advance(&mut self, rk: u64, all: bool) {
        let key = rk as u32;
        let Some(k) = self.keys.get_mut(&rk) else { return };
        while let Some(&Reverse((seq, is_write, id))) = k.heap.peek() {
            if seq != k.next && !all {
                break;
            }
            k.heap.pop();
            k.next = seq + 1;
            let Some(p) = self.pending.get_mut(&id) else { continue };
            if !is_write {
                p.plain_read = Some(k.plain.value);
                // The fenced register: refuse a token below the highest admitted, or equal to
                // it from another section.
                let admit = match admit(p.sec.token, p.order, &mut k.max_token) {
                    Ok(()) => true,
                    Err(by) => {
                        refuse(p, by, &mut self.refused, &mut self.refused_evidence, &mut self.legit, &mut self.legit_evidence);
                        false
                    }
                };
                if admit {
                    p.fenced_read = Some(k.fenced.value);
                }
                if p.sec.write_seq.is_none() {
                    self.pending.remove(&id);
                }
                continue;
            }
            // A write.
            if let Some(read) = p.plain_read {
                if k.plain.value != read {
                    self.lost += 1;
                    if self.lost_evidence.len() < MAX_EVIDENCE {
                        self.lost_evidence.push(lost_evidence(key, p, &k.plain.last));
                    }
                }
                k.plain.value = read + 1;
                k.plain.last = Some((p.sec.p, p.op.clone()));
            }
            if let Some(read) = p.fenced_read {
                let admit = match admit(p.sec.token, p.order, &mut k.max_token) {
                    Ok(()) => true,
                    Err(by) => {
                        refuse(p, by, &mut self.refused, &mut self.refused_evidence, &mut self.legit, &mut self.legit_evidence);
                        false
                    }
                };
                if admit {
                    if k.fenced.value != read {
                        self.lost_fenced += 1;
                        if self.lost_fenced_evidence.len() < MAX_EVIDENCE {
                            self.lost_fenced_evidence.push(lost_evidence(key, p, &k.fenced.last));
                        }
                    }
                    k.fenced.value = read + 1;
                    k.fenced.last = Some((p.sec.p, p.op.clone()));
                }
            }
            self.pending.remove(&id);
        }
    }

    /// Replay what is left (sequence gaps: sections a killed run never recorded).
    pub fn drain(&mut self) {
        let keys: Vec<u64> = self.keys.keys().copied().collect();
        for k in keys {
            self.advance(k, true);
        }
    }
}

/// The fenced register's rule: refuse a token below the highest admitted, or equal to it
/// from another section (`Err` names the section that set the maximum); admit otherwise,
/// raising the maximum. A section without a token is admitted.
fn admit(token: Option<u64>, order: (u64, u64), max_token: &mut Option<(u64, (u64, u64))>) -> Result<(), (u64, u64)> {
    match (token, *max_token) {
        (None, _) => Ok(()),
        (Some(t), Some((m, by))) if t < m || (t == m && by != order) => Err(by),
        (Some(t), _) => {
            *max_token = Some((t, order));
            Ok(())
        }
    }
}

/// Count a refusal once per section; a refusal caused by a section that entered earlier,
/// while this holder's lease was valid, refuses a legitimate holder.
fn refuse(p: &mut Pending, by: (u64, u64), refused: &mut u64, ev: &mut Vec<OpRef>, legit: &mut u64, legit_ev: &mut Vec<OpRef>) {
    if p.fenced_refused {
        return;
    }
    p.fenced_refused = true;
    *refused += 1;
    if ev.len() < MAX_EVIDENCE {
        ev.push(p.op.clone());
    }
    if by < p.order && !p.sec.lease_lost {
        *legit += 1;
        if legit_ev.len() < MAX_EVIDENCE {
            legit_ev.push(p.op.clone());
        }
    }
}

impl Default for Replay {
    fn default() -> Self {
        Self::new()
    }
}

pub fn result(r: &Replay, _ctx: &Context) -> CheckResult {
    if r.sections == 0 {
        return CheckResult::new(crate::checker::CheckerId::LostUpdates, Validity::Unknown, "no resource operations in the history");
    }
    let mut c = if r.lost == 0 {
        CheckResult::new(crate::checker::CheckerId::LostUpdates, Validity::Valid, "every write stored on the value its section read")
    } else {
        let mut c = CheckResult::new(crate::checker::CheckerId::LostUpdates, Validity::Invalid, format!("{} update(s) lost", r.lost));
        c.evidence = r.lost_evidence.clone();
        c
    };
    c.figures = serde_json::json!({ "lost_updates": r.lost, "sections": r.sections });
    c
}
