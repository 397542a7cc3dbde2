//! The fault log: what the nemesis (or a scenario's own choreography) did to a phase, as
//! typed records every reader shares. A basic: it imports nothing of the harness, so the
//! history, the checkers, the judgement, the model and the readers all stand on it.
//!
//! Each fault leaves a `start` and an `end` mark (or one `skipped` mark when the target could
//! not apply it). Whether it took effect travels as an [`Effect`], never as prose to be parsed
//! again: `Confirmed` with what was seen (a process gone, bytes a cut held back, a clock that
//! moved), `NoEffect` with why (the process still ran, the cut held nothing), or `Unchecked`
//! where nothing could tell. Only a server-side fault with a confirmed effect counts as
//! applied: it alone can give a server a class ([`Window::counts`]).

use serde::{Deserialize, Serialize};

/// Which side of the lock a fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The lock's servers (a node killed, paused, cut off, slowed, its clock moved).
    Servers,
    /// The holder (a paused or cut-off client, a delayed write) or a scenario's own
    /// choreography: it tests the lock's contract with its holder, never the server's class.
    Holder,
}

impl Side {
    /// The side of a fault recorded before sides were (by its name: the scenarios' `client-*`,
    /// `write-delay` and `partition-clients` act on the holder).
    pub fn of_name(f: &str) -> Side {
        if f.starts_with("client-") || f == "write-delay" || f == "partition-clients" {
            Side::Holder
        } else {
            Side::Servers
        }
    }
}

/// Whether a fault took effect, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Effect {
    /// Seen to take effect: what was seen.
    Confirmed { what: String },
    /// Seen to do nothing (the process still ran, the cut held no traffic), or refused as
    /// having nothing to act on: why.
    NoEffect { why: String },
    /// Nothing could tell: why (the fault counts as not applied).
    Unchecked { why: String },
}

impl Effect {
    pub fn confirmed(what: impl Into<String>) -> Effect {
        Effect::Confirmed { what: what.into() }
    }
    pub fn none(why: impl Into<String>) -> Effect {
        Effect::NoEffect { why: why.into() }
    }
    pub fn unchecked(why: impl Into<String>) -> Effect {
        Effect::Unchecked { why: why.into() }
    }

    pub fn is_confirmed(&self) -> bool {
        matches!(self, Effect::Confirmed { .. })
    }
    pub fn is_none(&self) -> bool {
        matches!(self, Effect::NoEffect { .. })
    }

    /// What was seen, or why not, as the log's detail reads it: "checked: process gone",
    /// "checked: NOT dropped ...", "no effect: ...", "unchecked: ...".
    pub fn detail(&self) -> String {
        match self {
            Effect::Confirmed { what } => format!("checked: {what}"),
            Effect::NoEffect { why } if why.starts_with("NOT") => format!("checked: {why}"),
            Effect::NoEffect { why } => format!("no effect: {why}"),
            Effect::Unchecked { why } => format!("unchecked: {why}"),
        }
    }

    /// The effect a record written before effects were typed implies by its detail: the
    /// old convention was "checked: NOT ..." or "no effect ..." for nothing done, "checked:
    /// ..." for evidence, and nothing at all for a fault nobody checked.
    pub fn from_detail(detail: &str) -> Effect {
        if detail.starts_with("no effect") {
            Effect::none(detail.trim_start_matches("no effect").trim_start_matches(':').trim())
        } else if let Some(i) = detail.find("checked: NOT") {
            Effect::none(&detail[i + "checked: ".len()..])
        } else if let Some(i) = detail.find("checked: ") {
            Effect::confirmed(&detail[i + "checked: ".len()..])
        } else {
            Effect::unchecked("no check was recorded")
        }
    }

    /// Two marks' effects as one: nothing done wins, then evidence, then unchecked.
    pub fn and(self, other: Effect) -> Effect {
        match (self, other) {
            (e @ Effect::NoEffect { .. }, _) | (_, e @ Effect::NoEffect { .. }) => e,
            (Effect::Confirmed { what: a }, Effect::Confirmed { what: b }) => Effect::confirmed(format!("{a}; {b}")),
            (e @ Effect::Confirmed { .. }, _) | (_, e @ Effect::Confirmed { .. }) => e,
            (e, _) => e,
        }
    }
}

/// A mark's place in a fault's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mark {
    Start,
    End,
    /// The target could not apply it (or it had nothing to act on): no window.
    Skipped,
}

/// A fault starting, ending or skipped, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NemesisEvent {
    pub backend: String,
    pub workload: String,
    pub f: String,
    /// `start`, `end` or `skipped`.
    pub phase: Mark,
    pub targets: Vec<String>,
    /// Milliseconds since the phase started.
    pub at_ms: u64,
    /// What was seen, in words (the typed `effect` is what counts).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Whether it took effect (absent in result sets written before it was recorded: read
    /// from `detail` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// Which side it acted on (absent before it was recorded: read from the name then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// The node hit in place of the one the fault names, and why ("redlock-2: Redlock has
    /// no leader", "etcd-3: no leader found").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
}

impl NemesisEvent {
    /// A server-side fault's mark with its effect, on no backend in particular (scripts,
    /// fixtures).
    pub fn new(f: &str, phase: Mark, targets: &[&str], at_ms: u64, effect: Effect) -> NemesisEvent {
        NemesisEvent {
            backend: String::new(),
            workload: String::new(),
            f: f.into(),
            phase,
            targets: targets.iter().map(|t| t.to_string()).collect(),
            at_ms,
            detail: effect.detail(),
            side: Some(Side::of_name(f)),
            effect: Some(effect),
            stand_in: None,
        }
    }

    pub fn effect(&self) -> Effect {
        self.effect.clone().unwrap_or_else(|| Effect::from_detail(&self.detail))
    }

    pub fn side(&self) -> Side {
        self.side.unwrap_or_else(|| Side::of_name(&self.f))
    }

    /// The mark as the pairing reads it (times in milliseconds).
    pub fn mark(&self) -> MarkAt {
        MarkAt {
            f: self.f.clone(),
            mark: self.phase,
            targets: self.targets.clone(),
            at: self.at_ms,
            effect: self.effect(),
            side: self.side(),
            stand_in: self.stand_in.clone(),
        }
    }
}

/// One mark of a fault at a time in some unit (milliseconds in the summary, nanoseconds in
/// a history): what [`pair`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkAt {
    pub f: String,
    pub mark: Mark,
    pub targets: Vec<String>,
    pub at: u64,
    pub effect: Effect,
    pub side: Side,
    pub stand_in: Option<String>,
}

/// One fault from its start to the end that heals it, with its effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    pub fault: String,
    pub side: Side,
    pub targets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    /// In the unit of the marks it was paired from.
    pub start: u64,
    /// None when it was never healed.
    pub heal: Option<u64>,
    pub effect: Effect,
}

impl Window {
    /// A server-side fault seen to take effect: what alone can give a server a class.
    pub fn counts(&self) -> bool {
        self.side == Side::Servers && self.effect.is_confirmed()
    }

    /// The fault's label with its stand-in: "kill:leader -> redlock-2".
    pub fn label(&self) -> String {
        match &self.stand_in {
            Some(s) => format!("{} -> {}", self.fault, s.split(':').next().unwrap_or(s)),
            None => self.fault.clone(),
        }
    }
}

/// Each start with the end that heals it (the next end of the same fault on the same
/// targets), its effect the two marks' together ([`Effect::and`]).
pub fn pair(marks: &[MarkAt]) -> Vec<Window> {
    let mut used = vec![false; marks.len()];
    let mut out = Vec::new();
    for (i, s) in marks.iter().enumerate().filter(|(_, m)| m.mark == Mark::Start) {
        let end = marks.iter().enumerate().skip(i + 1).find(|(j, x)| !used[*j] && x.mark == Mark::End && x.f == s.f && x.targets == s.targets);
        let (heal, effect) = match end {
            Some((j, e)) => {
                used[j] = true;
                (Some(e.at), s.effect.clone().and(e.effect.clone()))
            }
            None => (None, s.effect.clone()),
        };
        out.push(Window { fault: s.f.clone(), side: s.side, targets: s.targets.clone(), stand_in: s.stand_in.clone(), start: s.at, heal, effect });
    }
    out
}

/// The windows of a phase's events (milliseconds).
pub fn windows(events: &[NemesisEvent]) -> Vec<Window> {
    pair(&events.iter().map(NemesisEvent::mark).collect::<Vec<_>>())
}

/// What a phase's log says of its server-side faults, by name, each name once: applied
/// (some window confirmed), shown to do nothing (and never applied), unchecked (never
/// applied nor shown idle), and skipped (the target could not apply it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub applied: Vec<String>,
    pub no_effect: Vec<String>,
    pub unchecked: Vec<String>,
    pub skipped: Vec<String>,
}

pub fn tally(events: &[NemesisEvent]) -> Tally {
    let mut t = Tally::default();
    let push = |v: &mut Vec<String>, f: &str| {
        if !v.iter().any(|x| x == f) {
            v.push(f.to_string());
        }
    };
    for w in windows(events).iter().filter(|w| w.side == Side::Servers) {
        match &w.effect {
            Effect::Confirmed { .. } => push(&mut t.applied, &w.fault),
            Effect::NoEffect { .. } => push(&mut t.no_effect, &w.fault),
            Effect::Unchecked { .. } => push(&mut t.unchecked, &w.fault),
        }
    }
    for e in events.iter().filter(|e| e.phase == Mark::Skipped && e.side() == Side::Servers) {
        match e.effect() {
            // Refused as having nothing to act on (a partition of one node): no effect.
            Effect::NoEffect { .. } => push(&mut t.no_effect, &e.f),
            _ => push(&mut t.skipped, &e.f),
        }
    }
    let applied = t.applied.clone();
    t.no_effect.retain(|f| !applied.contains(f));
    t.unchecked.retain(|f| !applied.contains(f) && !t.no_effect.contains(f));
    t.skipped.retain(|f| !applied.contains(f));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(f: &str, phase: Mark, at_ms: u64, effect: Option<Effect>, detail: &str) -> NemesisEvent {
        NemesisEvent {
            backend: "etcd".into(),
            workload: "w".into(),
            f: f.into(),
            phase,
            targets: vec!["etcd-1".into()],
            at_ms,
            detail: detail.into(),
            effect,
            side: None,
            stand_in: None,
        }
    }

    /// A fault counts as applied only with evidence that it took effect: a start whose check
    /// found the node untouched, an end whose probe found the network unharmed, and a start
    /// refused as having nothing to act on are "no effect"; a fault nobody checked is
    /// "unchecked", never applied; one effective start of a name outweighs an idle one.
    #[test]
    fn only_faults_with_evidence_count_as_applied() {
        let events = vec![
            ev("kill", Mark::Start, 0, Some(Effect::confirmed("etcd-1 process gone")), ""),
            ev("kill", Mark::End, 1, Some(Effect::unchecked("restart")), ""),
            ev("pause", Mark::Start, 2, Some(Effect::none("NOT stopped: etcd-1 in state S")), ""),
            ev("pause", Mark::End, 3, None, ""),
            ev("partition", Mark::Start, 4, Some(Effect::unchecked("the probe runs while it holds")), ""),
            ev("partition", Mark::End, 5, Some(Effect::none("the cut held no traffic")), ""),
            ev("isolate", Mark::Skipped, 6, Some(Effect::none("nothing to cut")), ""),
            ev("delay", Mark::Start, 7, None, ""),
            ev("delay", Mark::End, 8, None, ""),
            ev("clock", Mark::Skipped, 9, Some(Effect::unchecked("this target cannot move a clock")), ""),
            ev("client-pause", Mark::Start, 10, Some(Effect::confirmed("holder stopped")), ""),
        ];
        let t = tally(&events);
        assert_eq!(t.applied, ["kill"]);
        assert_eq!(t.no_effect, ["pause", "partition", "isolate"]);
        assert_eq!(t.unchecked, ["delay"], "a fault nobody checked is not applied");
        assert_eq!(t.skipped, ["clock"]);
        let mut again = events.clone();
        again.push(ev("pause", Mark::Start, 11, Some(Effect::confirmed("etcd-1 stopped (state T)")), ""));
        assert!(tally(&again).applied.contains(&"pause".to_string()));
        let w = windows(&events);
        assert!(w.iter().find(|w| w.fault == "client-pause").is_some_and(|w| w.side == Side::Holder && !w.counts()));
        assert_eq!(w.iter().find(|w| w.fault == "kill").map(|w| (w.start, w.heal)), Some((0, Some(1))));
    }

    /// Result sets written before effects were typed read by their detail, as then.
    #[test]
    fn legacy_details_read_as_they_were_meant() {
        assert_eq!(Effect::from_detail("checked: etcd-1 process gone"), Effect::confirmed("etcd-1 process gone"));
        assert!(Effect::from_detail("+30000 ms; checked: NOT in effect: redis-1 moved").is_none());
        assert!(Effect::from_detail("no effect: no other node to cut the targets off from").is_none());
        assert_eq!(Effect::from_detail(""), Effect::unchecked("no check was recorded"));
        assert_eq!(Effect::from_detail("checked: dropped: a -> b").detail(), "checked: dropped: a -> b");
        assert_eq!(Side::of_name("partition-clients"), Side::Holder);
        assert_eq!(Side::of_name("kill:leader"), Side::Servers);
    }
}
