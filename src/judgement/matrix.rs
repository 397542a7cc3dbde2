//! The answer at a glance: one row per backend, one column per condition it ran under (no
//! fault, then each fault that counts: server side, seen to take effect), each cell the
//! safety word and the availability word of that condition's own windows, and one sentence
//! per backend. A fault's cell reads only its windows (its safety span, its grant rate, its
//! recovery); the no-fault cell reads only the quiet time between faults (or, in a phase
//! without faults, the phase). Nothing is pooled across conditions, and no rate across
//! workloads. Readers only draw it.

use super::window::{WindowVerdict, Windows};
use super::words::{grant_rate, AvailWord, SafetyWord};
use super::Verdict;

/// The column of the time outside every fault.
pub const NO_FAULT: &str = "no fault";

/// One phase as the matrix reads it (the model hands it over: `summary::answer`).
#[derive(Debug, Clone)]
pub struct PhaseFacts {
    pub workload: String,
    pub verdict: Verdict,
    /// Its fault windows, judged; none without a history.
    pub windows: Option<Windows>,
    /// Acquisitions per second over the measured window.
    pub ops_per_sec: f64,
    /// A scenario's choreography: judged by its expectation, not in the matrix.
    pub choreographed: bool,
    /// Sections that entered while another holder was inside, over the phase.
    pub overlaps: u64,
}

/// One backend: its phases, or why it could not be measured.
#[derive(Debug, Clone)]
pub struct BackendFacts {
    pub name: String,
    pub failure: Option<String>,
    pub phases: Vec<PhaseFacts>,
}

/// How a cell's word reads: good, a caution, bad, or no evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Caution,
    Bad,
    Untested,
}

impl Tone {
    /// The class name a page colours the cell by.
    pub fn class(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Caution => "caution",
            Tone::Bad => "bad",
            Tone::Untested => "untested",
        }
    }
}

/// One backend under one condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `held`, `weak evidence`, `not tested`, `fenced`, `unknown`, `fencing broken` or
    /// `violated`.
    pub safety: &'static str,
    pub safety_tone: Tone,
    /// `available`, `degraded` or `unavailable`; none when it could not be measured.
    pub availability: Option<&'static str>,
    pub availability_tone: Tone,
    /// The figures behind the words ("hot-key 221 acq/s", "grant rate 12% of the no-fault
    /// rate", "no grant for 5 s", "recovered in 1.2 s"), and the stand-in where the fault hit
    /// one.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub backend: String,
    /// One per column; none where the condition did not occur for this backend.
    pub cells: Vec<Option<Cell>>,
    /// Why the backend was not measured.
    pub failure: Option<String>,
    pub sentence: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// `no fault`, then each fault that counts somewhere, in the order first seen.
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

/// The matrix's word for a safety word, its tone and its rank (the worst window wins).
fn safety_word(w: SafetyWord) -> (&'static str, Tone, u8) {
    match w {
        SafetyWord::Safe => ("held", Tone::Good, 0),
        SafetyWord::NoViolationSeen => ("weak evidence", Tone::Caution, 1),
        SafetyWord::NotTested => ("not tested", Tone::Untested, 2),
        SafetyWord::SafeWithFencing => ("fenced", Tone::Caution, 3),
        SafetyWord::Unknown => ("unknown", Tone::Caution, 4),
        SafetyWord::FencingBroken => ("fencing broken", Tone::Bad, 5),
        SafetyWord::Unsafe => ("violated", Tone::Bad, 6),
    }
}

fn availability_tone(w: AvailWord) -> Tone {
    match w {
        AvailWord::Available => Tone::Good,
        AvailWord::Degraded => Tone::Caution,
        AvailWord::Unavailable => Tone::Bad,
    }
}

fn worst(words: impl Iterator<Item = SafetyWord>) -> Option<(&'static str, Tone, u8)> {
    words.map(safety_word).max_by_key(|w| w.2)
}

fn loaded(b: &BackendFacts) -> impl Iterator<Item = &PhaseFacts> {
    b.phases.iter().filter(|p| !p.choreographed)
}

/// The no-fault cell: the quiet time of phases with faults, the whole of phases without; the
/// rate per workload, never pooled across them.
fn no_fault_cell(b: &BackendFacts) -> Option<Cell> {
    let (safety, safety_tone, _) = worst(loaded(b).map(|p| match &p.windows {
        Some(w) if !w.windows.is_empty() => w.quiet.safety,
        _ => p.verdict.safety,
    }))?;
    let mut rates: Vec<(String, f64)> = Vec::new();
    for p in loaded(b) {
        let r = match &p.windows {
            Some(w) if !w.windows.is_empty() => w.quiet.rate,
            _ => Some(p.ops_per_sec),
        };
        if let Some(r) = r.filter(|_| !rates.iter().any(|(n, _)| *n == p.workload)) {
            rates.push((p.workload.clone(), r));
        }
    }
    let granted = rates.iter().any(|(_, r)| *r > 0.0);
    let availability = (!rates.is_empty()).then_some(if granted { "available" } else { "unavailable" });
    let detail = if rates.is_empty() {
        None
    } else if !granted {
        Some("nothing granted".to_string())
    } else {
        Some(rates.iter().map(|(n, r)| format!("{n} {r:.0} acq/s")).collect::<Vec<_>>().join(", "))
    };
    let availability_tone = match availability {
        Some("available") => Tone::Good,
        Some(_) => Tone::Bad,
        None => Tone::Untested,
    };
    Some(Cell { safety, safety_tone, availability, availability_tone, detail })
}

/// The windows of `fault` that count, over a backend's phases.
fn windows_of<'a>(b: &'a BackendFacts, fault: &'a str) -> impl Iterator<Item = &'a WindowVerdict> {
    loaded(b).filter_map(|p| p.windows.as_ref()).flat_map(|w| w.counted()).filter(move |w| w.fault == fault)
}

/// A fault's cell: the worst safety of its windows, their grant rate against the no-fault
/// rate (weighted by each window's length), the longest silence under it, its worst
/// recovery, and the stand-in where it hit one.
fn fault_cell(b: &BackendFacts, fault: &str) -> Option<Cell> {
    let mine: Vec<&WindowVerdict> = windows_of(b, fault).collect();
    let (safety, safety_tone, _) = worst(mine.iter().map(|w| w.safety))?;
    let timed: Vec<(f64, f64)> = mine.iter().filter_map(|w| Some((w.grant_ratio?, (w.heal_ms? - w.start_ms) as f64))).collect();
    let span: f64 = timed.iter().map(|(_, d)| d).sum();
    let ratio = (timed.len() == mine.len() && span > 0.0).then(|| timed.iter().map(|(r, d)| r * d).sum::<f64>() / span);
    let word = ratio.map(AvailWord::of_ratio);
    let silence = mine.iter().map(|w| w.longest_silence_ms).max().unwrap_or(0);
    let mut detail = Vec::new();
    if let Some(r) = ratio {
        detail.push(grant_rate(r));
    }
    if silence >= 1000 {
        detail.push(format!("no grant for {:.1} s", silence as f64 / 1000.0));
    }
    if let Some(r) = mine.iter().map(|w| &w.recovery).max_by_key(|r| r.rank()) {
        detail.push(r.words());
    }
    let mut stand_ins: Vec<String> = mine.iter().filter_map(|w| w.stand_in.clone()).collect();
    stand_ins.dedup();
    detail.extend(stand_ins.into_iter().map(|s| format!("hit {s}")));
    Some(Cell {
        safety,
        safety_tone,
        availability: word.map(AvailWord::as_str),
        availability_tone: word.map_or(Tone::Untested, availability_tone),
        detail: (!detail.is_empty()).then(|| detail.join("; ")),
    })
}

/// The matrix of every backend.
pub fn matrix(backends: &[BackendFacts]) -> Matrix {
    let mut columns = vec![NO_FAULT.to_string()];
    for b in backends {
        for w in loaded(b).filter_map(|p| p.windows.as_ref()).flat_map(|w| w.counted()) {
            if !columns.contains(&w.fault) {
                columns.push(w.fault.clone());
            }
        }
    }
    let rows = backends
        .iter()
        .map(|b| {
            if let Some(f) = &b.failure {
                let sentence = format!("{}: not measured ({f}).", b.name);
                return Row { backend: b.name.clone(), cells: vec![None; columns.len()], failure: Some(f.clone()), sentence };
            }
            let cells: Vec<Option<Cell>> = columns.iter().map(|c| if c == NO_FAULT { no_fault_cell(b) } else { fault_cell(b, c) }).collect();
            let sentence = sentence(b, &columns, &cells);
            Row { backend: b.name.clone(), cells, failure: None, sentence }
        })
        .collect();
    Matrix { columns, rows }
}

/// "etcd: no two holders under kill:leader; unavailable under kill:leader (grant rate 0% of
/// the no-fault rate; no grant for 2.0 s; recovered in 1200 ms)."
fn sentence(b: &BackendFacts, columns: &[String], cells: &[Option<Cell>]) -> String {
    let faults: Vec<(&String, &Cell)> = columns.iter().zip(cells).skip(1).filter_map(|(c, x)| x.as_ref().map(|x| (c, x))).collect();
    let mut parts = Vec::new();
    let Some(nf) = cells.first().and_then(|c| c.as_ref()) else {
        return if b.phases.iter().any(|p| p.choreographed) {
            format!("{}: a scenario's choreography only, judged by its expectations (the catalogue table).", b.name)
        } else {
            format!("{}: no phase measured.", b.name)
        };
    };
    parts.push(safety_clause(nf.safety, "without faults", b, None));
    if faults.is_empty() {
        parts.push(format!("{} without faults; availability under faults not tested", nf.detail.clone().unwrap_or_default()));
    } else {
        for (f, c) in &faults {
            parts.push(safety_clause(c.safety, &format!("under {f}"), b, Some(f)));
        }
        let avail: Vec<String> = faults
            .iter()
            .map(|(f, c)| match (c.availability, &c.detail) {
                (Some(w), Some(d)) => format!("{w} under {f} ({d})"),
                (Some(w), None) => format!("{w} under {f}"),
                (None, Some(d)) => format!("availability under {f} not measured ({d})"),
                (None, None) => format!("availability under {f} not measured"),
            })
            .collect();
        parts.push(avail.join(", "));
    }
    format!("{}: {}.", b.name, parts.join("; "))
}

/// The safety clause of one condition, with that condition's own counts.
fn safety_clause(word: &str, when: &str, b: &BackendFacts, fault: Option<&str>) -> String {
    let (o, steps) = match fault {
        Some(f) => windows_of(b, f).fold((0, 0), |(o, s), w| (o + w.overlaps, s + w.token_steps_back)),
        None => loaded(b).fold((0, 0), |(o, s), p| match &p.windows {
            Some(w) if !w.windows.is_empty() => (o + w.quiet.overlaps, s + w.quiet.token_steps_back),
            _ => (o + p.overlaps, s),
        }),
    };
    match word {
        "held" => format!("no two holders {when}"),
        "weak evidence" => format!("no two holders seen {when}, but the evidence is weak (holders were inside too little of the time)"),
        "not tested" => format!("safety not tested {when} (nothing entered the protected resource)"),
        "fenced" => format!("two holders {when} ({o} overlap(s)), every stale write refused by fencing"),
        "unknown" => format!("safety unknown {when} (a checker could not decide)"),
        "fencing broken" if steps > 0 => format!("no two holders {when}, but fencing broke (tokens went back {steps} time(s): the service lost its state)"),
        "fencing broken" => {
            let why = b.phases.iter().map(|p| &p.verdict.fencing).find(|f| f.starts_with("broken")).map(|f| f.trim_start_matches("broken: ").to_string());
            format!("no two holders {when}, but fencing broke ({})", why.unwrap_or_else(|| "tokens out of order".into()))
        }
        _ => format!("two holders {when} ({o} overlap(s))"),
    }
}

#[cfg(test)]
mod tests;
