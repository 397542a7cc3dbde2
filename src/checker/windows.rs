//! Each fault in its own window: what the history shows during every fault, after its heal,
//! and in the quiet time between faults, so that a fault is judged by what happened while it
//! could act and nothing else.
//!
//! For each window (a start paired with the heal that ends it, any side, any effect):
//! - **during the fault**, [start, heal): grants, acquire attempts refused (failed or of
//!   unknown outcome), the longest stretch without a grant;
//! - **recovery**: the first grant at or after the heal, wherever it comes: past the next
//!   fault's start, past the phase's end into the drain (the next fault's start is given
//!   beside it, so a reader can say "cut short by the next fault");
//! - **safety span**, [start, heal + the granted TTL): the span in which the fault could
//!   cause a second grant: overlaps and token steps back (a token lower than the one before
//!   it on its key) at the sections that entered in it, how many entered, and how much of
//!   the time some holder was inside (exposure), during the fault and after its heal apart.
//!
//! And the **quiet time**: from the phase's first grant to its last, outside every window
//! that may have acted (from its start to the later of its span's end and its first grant
//! after the heal): the no-fault grant rate every window's rate is read against, and the
//! overlaps and steps back no fault can be blamed for.
//!
//! One sweep in time order keeps per-key state and a bucketed time line (grants, refusals,
//! sections, overlaps, steps back, time inside), so any window is summed afterwards in
//! bounded memory (at most [`BUCKETS`] buckets, each at least 10 ms); first grants after
//! heals are exact.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::item::{Context, Item, Stamped};
use super::{is_zero, Outcome};
use crate::faultlog::{Effect, Side, Window};
use crate::history::Op;

const MS: u64 = 1_000_000;

/// What happened after a heal: the one rule the availability checker and the judgement both
/// read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Recovery {
    /// A grant came this long after the heal, before any other fault.
    Recovered { ms: u64 },
    /// The next fault started, inside the room the servers need after the heal, before the
    /// first grant: the time to that grant (measured anyway) includes the next fault, so it
    /// is reported, not judged.
    CutShort { ms: Option<u64>, next_fault_ms: u64 },
    /// No grant in all the time after the heal, which covered the granted TTL and the time
    /// the servers need to grant again (up to the phase's end, or to the next fault when that
    /// came after the room); `later_ms`: the first grant that came after all, past the next
    /// fault's start, since the heal.
    NotRecovered {
        waited_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        later_ms: Option<u64>,
    },
    /// Too little time after the heal to tell (the phase ended, or was interrupted, inside
    /// the TTL and the election time), or the fault never healed.
    NotJudged { why: String },
}

impl Recovery {
    /// The words a table shows.
    pub fn words(&self) -> String {
        match self {
            Recovery::Recovered { ms } => format!("recovered in {ms} ms"),
            Recovery::CutShort { ms: Some(ms), next_fault_ms } => {
                format!("cut short by the next fault at {:.1} s (first grant {ms} ms after the heal)", *next_fault_ms as f64 / 1000.0)
            }
            Recovery::CutShort { ms: None, next_fault_ms } => format!("cut short by the next fault at {:.1} s", *next_fault_ms as f64 / 1000.0),
            Recovery::NotRecovered { waited_ms, later_ms: None } => format!("NOT recovered (no grant in the {waited_ms} ms after a heal)"),
            Recovery::NotRecovered { waited_ms, later_ms: Some(l) } => {
                format!("NOT recovered (no grant in the {waited_ms} ms from a heal to the next fault; the first came {l} ms after the heal)")
            }
            Recovery::NotJudged { why } => format!("recovery not judged: {why}"),
        }
    }

    pub fn failed(&self) -> bool {
        matches!(self, Recovery::NotRecovered { .. })
    }

    /// How bad, for picking a phase's worst: recovered 0, cut short 1, not judged 2, not
    /// recovered 3 (then the longer time).
    pub fn rank(&self) -> (u8, u64) {
        match self {
            Recovery::Recovered { ms } => (0, *ms),
            Recovery::CutShort { ms, .. } => (1, ms.unwrap_or(0)),
            Recovery::NotJudged { .. } => (2, 0),
            Recovery::NotRecovered { waited_ms, .. } => (3, *waited_ms),
        }
    }
}

pub use line::BUCKETS;

/// What one fault window showed. Times in milliseconds since the segment's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowFigures {
    pub fault: String,
    pub side: Side,
    pub targets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    pub effect: Effect,
    pub start_ms: u64,
    /// None when it was never healed.
    pub heal_ms: Option<u64>,
    /// Grants during the fault, [start, heal).
    pub grants_in_fault: u64,
    /// Acquire attempts invoked during the fault that failed or ended with an unknown outcome.
    pub attempts_refused: u64,
    /// The longest stretch without a grant during the fault.
    pub longest_silence_ms: u64,
    /// The first grant at or after the fault's start (during it, or after its heal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_after_start_ms: Option<u64>,
    /// The first grant at or after the heal, wherever it came (the drain included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_after_heal_ms: Option<u64>,
    /// The next window's start after this heal (any fault that may have acted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fault_ms: Option<u64>,
    /// Where the safety span ends: the heal plus the granted TTL (the heal for a lock without
    /// one; the segment's end for a fault never healed).
    pub span_end_ms: u64,
    /// Sections that entered in the span while another holder of their key was inside.
    pub overlaps: u64,
    /// Sections that entered in the span with a token lower than the one before on their key.
    pub token_steps_back: u64,
    /// Sections that entered in the span.
    pub sections: u64,
    /// Share of the fault's time some holder was inside (mean over keys).
    pub exposure_fault: Option<f64>,
    /// The same from the heal to the span's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposure_after: Option<f64>,
    /// Share of the fault's time some client was asking for the lock, by whole seconds: a
    /// second counts when an acquire was invoked in it or in flight through it. Where the lock
    /// granted nothing, how much of the time it was seen to refuse.
    #[serde(default)]
    pub asked_fault: f64,
    /// The same from the heal to the span's end.
    #[serde(default)]
    pub asked_after: f64,
    /// The fault's time after its last grant (bucket precision), where grants came during it
    /// and then stopped: a leader paused stops granting a moment after it starts, its holders
    /// leave, and the rest of the fault is covered by the clients it kept waiting.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub silent_tail_ms: u64,
    /// Share of that tail some client was asking for the lock (as `asked_fault`).
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub asked_tail: f64,
    /// Share of the fault covered: holders inside before its last grant, clients asking and
    /// refused after it. None where no grant came during it (`asked_fault` speaks then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_fault: Option<f64>,
    /// Share from the heal to the span's end covered: clients asking and refused before the
    /// first grant after the heal, holders inside from it on. None where that grant came at
    /// once or after the span (`exposure_after` / `asked_after` speak then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_after: Option<f64>,
    /// What happened after the heal.
    pub recovery: Recovery,
}

/// The time no fault may have acted in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuietFigures {
    pub ms: u64,
    pub grants: u64,
    pub overlaps: u64,
    pub token_steps_back: u64,
    pub sections: u64,
    pub exposure: Option<f64>,
}

/// Every window of a segment and its quiet time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowsSeen {
    /// The segment's last timestamp.
    pub end_ms: u64,
    /// The TTL the servers granted (what a span runs past a heal), when the lock has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// How long after a heal the servers may take to grant again: the granted TTL and what
    /// they need besides (an election, a restart). Recovery is judged only past it.
    pub room_ms: u64,
    /// A scenario's choreography: its faults are the script's, not a test of availability.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub choreographed: bool,
    /// Cut short by an interrupt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The first and last grant of the segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_grant_ms: Option<u64>,
    /// The longest stretch without a grant after the first one (to the end of the segment).
    pub longest_gap_ms: u64,
    pub windows: Vec<WindowFigures>,
    pub quiet: QuietFigures,
    /// Whole seconds (at least half a second long) of the windows that count (server side,
    /// confirmed, not choreographed), and how many saw a grant.
    pub counted_seconds: u64,
    pub counted_seconds_with_grant: u64,
}

impl WindowsSeen {
    /// The windows that can give a server a class: server side, seen to take effect, not a
    /// script's.
    pub fn counted(&self) -> impl Iterator<Item = &WindowFigures> {
        self.windows.iter().filter(move |w| !self.choreographed && w.side == Side::Servers && w.effect.is_confirmed())
    }
}

/// The sweep.
pub struct Windows {
    ctx: Context,
    windows: Vec<Window>,
    line: Line,
    /// Per key: the end of the holder that ends last so far, and its process.
    inside_until: HashMap<u32, (u64, u64)>,
    last_token: HashMap<u32, u64>,
    keys: HashSet<u32>,
    /// The end of the latest acquire in flight so far (any key).
    asking_until: u64,
    /// Windows by start and by heal, and how far the grants have come through them.
    by_start: Vec<usize>,
    next_start: usize,
    first_after_start: Vec<Option<u64>>,
    by_heal: Vec<usize>,
    next_heal: usize,
    first_after_heal: Vec<Option<u64>>,
    first: Option<u64>,
    last: Option<u64>,
    longest_gap: u64,
}

/// A stretch without any grant this long is a silence the waiting clients cover (a working
/// lock's gaps between grants are shorter; a frozen or dead server's last its fault's time).
const SILENCE: u64 = 500 * MS;

impl Windows {
    pub fn new(ctx: &Context) -> Windows {
        let windows = ctx.faults.clone();
        let mut by_heal: Vec<usize> = (0..windows.len()).filter(|&i| windows[i].heal.is_some()).collect();
        by_heal.sort_by_key(|&i| windows[i].heal);
        let mut by_start: Vec<usize> = (0..windows.len()).collect();
        by_start.sort_by_key(|&i| windows[i].start);
        Windows {
            first_after_heal: vec![None; windows.len()],
            first_after_start: vec![None; windows.len()],
            by_start,
            next_start: 0,
            windows,
            line: Line::new(ctx.end_ns),
            inside_until: HashMap::new(),
            last_token: HashMap::new(),
            keys: HashSet::new(),
            asking_until: 0,
            by_heal,
            next_heal: 0,
            first: None,
            last: None,
            longest_gap: 0,
            ctx: ctx.clone(),
        }
    }

    pub fn item(&mut self, s: &Stamped) {
        match &s.item {
            Item::Grant(o) if o.f == Op::Acquire => {
                let t = s.at;
                let i = self.line.at(t);
                self.line.grants[i] += 1;
                if let Some(prev) = self.last {
                    self.longest_gap = self.longest_gap.max(t.saturating_sub(prev));
                }
                self.first.get_or_insert(t);
                self.last = Some(t);
                while let Some(&w) = self.by_start.get(self.next_start).filter(|&&w| self.windows[w].start <= t) {
                    self.first_after_start[w] = Some(t);
                    self.next_start += 1;
                }
                while let Some(&w) = self.by_heal.get(self.next_heal).filter(|&&w| self.windows[w].heal.is_some_and(|h| h <= t)) {
                    self.first_after_heal[w] = Some(t);
                    self.next_heal += 1;
                }
            }
            Item::Acquire(o) => {
                let i = self.line.at(s.at);
                self.line.attempts[i] += 1;
                if matches!(o.outcome, Outcome::Fail | Outcome::Info | Outcome::Unresolved) {
                    self.line.refused[i] += 1;
                }
                // A client waiting on an acquire, until it was answered (or the end).
                let end = o.complete_ns.unwrap_or(self.ctx.end_ns).max(o.invoke_ns);
                let from = o.invoke_ns.max(self.asking_until);
                if end > from {
                    Line::add_time(&mut self.line.asking, self.line.width, from, end);
                }
                self.asking_until = self.asking_until.max(end);
            }
            Item::Section(sec) => {
                let i = self.line.at(sec.enter);
                self.line.sections[i] += 1;
                self.keys.insert(sec.key);
                let (until, holder) = self.inside_until.get(&sec.key).copied().unwrap_or((0, u64::MAX));
                if sec.enter < until && holder != sec.p {
                    self.line.overlaps[i] += 1;
                }
                if let Some(tok) = sec.token {
                    if self.last_token.get(&sec.key).is_some_and(|&prev| tok < prev) {
                        self.line.steps_back[i] += 1;
                    }
                    self.last_token.insert(sec.key, tok);
                }
                let from = sec.enter.max(until);
                if sec.exit > from {
                    Line::add_time(&mut self.line.inside, self.line.width, from, sec.exit);
                }
                if sec.exit > until {
                    self.inside_until.insert(sec.key, (sec.exit, sec.p));
                }
            }
            _ => {}
        }
    }

    pub fn finish(self) -> WindowsSeen {
        let end = self.ctx.end_ns.max(self.last.unwrap_or(0));
        let ttl = self.ctx.ttl_ns;
        let nkeys = self.keys.len().max(1) as f64;
        let exposure = |a: u64, b: u64| (b > a && !self.keys.is_empty()).then(|| self.line.sum_time(&self.line.inside, a, b) / ((b - a) as f64 * nkeys));
        let asked = |a: u64, b: u64| self.asked(a, b);
        let acted: Vec<usize> = (0..self.windows.len()).filter(|&i| !self.windows[i].effect.is_none()).collect();
        let span_end = |w: &Window| match w.heal {
            Some(h) => h.saturating_add(ttl.unwrap_or(0)).min(end.max(h)),
            None => end,
        };
        let room = ttl.unwrap_or(0) + self.ctx.allowance_ns;
        let mut figures = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            let heal = w.heal.unwrap_or(end).max(w.start);
            let se = span_end(w).max(heal);
            // Where grants came during the fault and then stopped: the tail after the last.
            let tail = self.line.last_grant_end(w.start, heal).filter(|&g| g < heal).map(|g| (g, asked(g, heal)));
            let grants = self.line.sum(&self.line.grants, w.start, heal);
            let next = w.heal.and_then(|h| acted.iter().map(|&j| self.windows[j].start).filter(|&s| s >= h && s > w.start).min());
            figures.push(WindowFigures {
                fault: w.fault.clone(),
                side: w.side,
                targets: w.targets.clone(),
                stand_in: w.stand_in.clone(),
                effect: w.effect.clone(),
                start_ms: w.start / MS,
                heal_ms: w.heal.map(|h| h / MS),
                grants_in_fault: grants.round() as u64,
                attempts_refused: self.line.sum(&self.line.refused, w.start, heal).round() as u64,
                longest_silence_ms: self.silence(w.start, heal) / MS,
                first_grant_after_start_ms: self.first_after_start[i].map(|t| t / MS),
                first_grant_after_heal_ms: self.first_after_heal[i].map(|t| t / MS),
                next_fault_ms: next.map(|t| t / MS),
                span_end_ms: se / MS,
                overlaps: self.line.sum(&self.line.overlaps, w.start, se).round() as u64,
                token_steps_back: self.line.sum(&self.line.steps_back, w.start, se).round() as u64,
                sections: self.line.sum(&self.line.sections, w.start, se).round() as u64,
                exposure_fault: exposure(w.start, heal),
                exposure_after: exposure(heal, se),
                asked_fault: asked(w.start, heal),
                asked_after: asked(heal, se),
                silent_tail_ms: tail.map_or(0, |(g, _)| (heal - g) / MS),
                asked_tail: tail.map_or(0.0, |(_, a)| a),
                covered_fault: (grants > 0.0).then(|| self.covered_fault(w.start, heal, tail, nkeys)),
                covered_after: self.first_after_heal[i].filter(|&g| g > heal && g < se).map(|g| {
                    let inside = self.line.sum_time(&self.line.inside, g, se) / nkeys;
                    ((asked(heal, g) * (g - heal) as f64 + inside) / (se - heal) as f64).min(1.0)
                }),
                recovery: recovery(w.heal, self.first_after_heal[i], next, end, room, self.ctx.interrupted),
            });
        }
        let influence: Vec<(u64, u64)> = acted
            .iter()
            .map(|&i| {
                let w = &self.windows[i];
                (w.start, span_end(w).max(self.first_after_heal[i].unwrap_or(end)))
            })
            .collect();
        let quiet = self.quiet(&union(influence), exposure);
        let (secs, good) = self.counted_seconds(end);
        WindowsSeen {
            end_ms: end / MS,
            ttl_ms: ttl.map(|t| t / MS),
            room_ms: room / MS,
            choreographed: self.ctx.choreographed,
            interrupted: self.ctx.interrupted,
            first_grant_ms: self.first.map(|t| t / MS),
            last_grant_ms: self.last.map(|t| t / MS),
            longest_gap_ms: self.last.map_or(0, |l| self.longest_gap.max(end - l)) / MS,
            windows: figures,
            quiet,
            counted_seconds: secs,
            counted_seconds_with_grant: good,
        }
    }

    /// The share of a fault `[start, heal)` that granted something covered: grants stopped
    /// part-way (the `tail` after the last, its clients asking), or a silence at its start or
    /// in its middle (a server whose freeze or thaw came a moment before or after the fault's
    /// stamps): the holders, and the clients kept waiting where nothing was granted, whichever
    /// reads more.
    fn covered_fault(&self, start: u64, heal: u64, tail: Option<(u64, f64)>, nkeys: f64) -> f64 {
        let union = self.line.covered(start, heal, nkeys, SILENCE);
        let tail = tail.map_or(0.0, |(g, a)| {
            let inside = self.line.sum_time(&self.line.inside, start, g) / nkeys;
            ((inside + a * (heal - g) as f64) / (heal - start) as f64).min(1.0)
        });
        union.max(tail)
    }

    /// The share of `[a, b)`, by whole seconds (the last one cut), in which some client asked
    /// for the lock: an acquire invoked in it, or one in flight through it.
    fn asked(&self, a: u64, b: u64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let mut yes = 0u64;
        let mut s = a;
        while s < b {
            let e = (s + 1000 * MS).min(b);
            if self.line.sum(&self.line.attempts, s, e) > 0.0 || self.line.sum_time(&self.line.asking, s, e) > 0.0 {
                yes += e - s;
            }
            s = e;
        }
        yes as f64 / (b - a) as f64
    }

    /// The longest run of buckets without a grant in `[a, b)` (to bucket precision).
    fn silence(&self, a: u64, b: u64) -> u64 {
        if b <= a {
            return 0;
        }
        let (i, j) = (self.line.at(a), self.line.at(b.saturating_sub(1)));
        let (mut best, mut run) = (0u64, 0u64);
        for k in i..=j {
            if self.line.grants[k] == 0 {
                let (lo, hi) = (k as u64 * self.line.width, (k as u64 + 1) * self.line.width);
                run += hi.min(b) - lo.max(a);
                best = best.max(run);
            } else {
                run = 0;
            }
        }
        best
    }

    /// From the first grant to the last, outside every span of influence.
    fn quiet(&self, spans: &[(u64, u64)], exposure: impl Fn(u64, u64) -> Option<f64>) -> QuietFigures {
        let (Some(from), Some(to)) = (self.first, self.last) else { return QuietFigures::default() };
        let mut parts = Vec::new();
        let mut t = from;
        for &(a, b) in spans {
            if a > t {
                parts.push((t, a.min(to)));
            }
            t = t.max(b);
        }
        if to > t {
            parts.push((t, to));
        }
        parts.retain(|(a, b)| b > a);
        let total = |v: &[u32]| parts.iter().map(|&(a, b)| self.line.sum(v, a, b)).sum::<f64>().round() as u64;
        let ms: u64 = parts.iter().map(|(a, b)| b - a).sum();
        let inside: f64 = parts.iter().map(|&(a, b)| exposure(a, b).unwrap_or(0.0) * (b - a) as f64).sum();
        QuietFigures {
            ms: ms / MS,
            grants: total(&self.line.grants),
            overlaps: total(&self.line.overlaps),
            token_steps_back: total(&self.line.steps_back),
            sections: total(&self.line.sections),
            exposure: (ms > 0 && !self.keys.is_empty()).then(|| inside / ms as f64),
        }
    }

    /// Whole seconds of the counted windows (at least half a second long), and how many saw
    /// a grant.
    fn counted_seconds(&self, end: u64) -> (u64, u64) {
        if self.ctx.choreographed {
            return (0, 0);
        }
        let spans = union(self.windows.iter().filter(|w| w.counts()).map(|w| (w.start, w.heal.unwrap_or(end).max(w.start))).collect());
        let (mut secs, mut good) = (0, 0);
        for (a, b) in spans {
            let mut s = a;
            while s < b {
                let e = (s + 1000 * MS).min(b);
                if e - s >= 500 * MS {
                    secs += 1;
                    if self.line.sum(&self.line.grants, s, e) >= 0.5 {
                        good += 1;
                    }
                }
                s = e;
            }
        }
        (secs, good)
    }
}

/// What happened after a heal at `heal` (nanoseconds): the first grant at or after it, the
/// next fault's start, the segment's end and the room the servers may need.
fn recovery(heal: Option<u64>, first: Option<u64>, next: Option<u64>, end: u64, room: u64, interrupted: bool) -> Recovery {
    let Some(h) = heal else { return Recovery::NotJudged { why: "the fault was never healed".into() } };
    let ms = |ns: u64| ns / MS;
    match (first, next) {
        // The room passed with no grant before the next fault: that is the failure, whatever
        // came later.
        (g, Some(n)) if g.is_none_or(|g| g > n) && n - h >= room => Recovery::NotRecovered { waited_ms: ms(n - h), later_ms: g.map(|g| ms(g - h)) },
        (Some(g), Some(n)) if g > n => Recovery::CutShort { ms: Some(ms(g - h)), next_fault_ms: ms(n) },
        (Some(g), _) => Recovery::Recovered { ms: ms(g - h) },
        (None, Some(n)) if n - h < room => Recovery::CutShort { ms: None, next_fault_ms: ms(n) },
        (None, _) => {
            let waited = end.saturating_sub(h);
            if interrupted {
                Recovery::NotJudged { why: format!("interrupted {} ms after the heal", ms(waited)) }
            } else if waited < room {
                Recovery::NotJudged {
                    why: format!("the phase ended {} ms after the heal, inside the {} ms the servers may need (TTL and election)", ms(waited), ms(room)),
                }
            } else {
                Recovery::NotRecovered { waited_ms: ms(waited), later_ms: None }
            }
        }
    }
}

/// Overlapping intervals merged, in order.
pub fn union(mut w: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    w.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in w {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

mod line;
use line::Line;

#[cfg(test)]
mod tests;

fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}
