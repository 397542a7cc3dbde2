//! The answer at a glance: one row per backend, one column per condition it ran under (no
//! fault, then each fault that took effect), each cell the safety word and the availability
//! word, and one sentence per backend. Made from the verdicts already judged (the safety of
//! a phase covers every condition in it: the checks and the resource's counts are per phase,
//! not per fault window) and from each phase's per-second grants against its fault windows
//! (availability per fault); readers only draw it.

use super::Verdict;
use super::availability::availability_word;
use super::Availability;

/// The column of the time outside every fault.
pub const NO_FAULT: &str = "no fault";

/// One window of a fault that took effect, in milliseconds since its phase started.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultWindow {
    pub fault: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// One phase as the matrix reads it (the model hands it over: `summary::answer`).
#[derive(Debug, Clone)]
pub struct PhaseFacts {
    pub verdict: Verdict,
    /// Windows of the faults that took effect (none skipped or shown to do nothing).
    pub windows: Vec<FaultWindow>,
    /// Acquisitions granted in each second since the phase started.
    pub grants: Vec<u64>,
    pub overlaps: u64,
    pub lost_updates: u64,
    /// The availability checker's figures (recovery after the heals), when measured.
    pub availability: Option<Availability>,
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
    /// The figure behind the availability word ("221 acq/s", "12% of no-fault rate",
    /// "no grant for 5 s").
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
    /// `no fault`, then each fault that took effect somewhere, in the order first seen.
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

/// The safety word of a verdict in the matrix, its tone and its rank (the worst phase wins).
fn safety_word(v: &Verdict) -> (&'static str, Tone, u8) {
    match v.safety.as_str() {
        "safe" => ("held", Tone::Good, 0),
        "no violation seen" => ("weak evidence", Tone::Caution, 1),
        "not tested" => ("not tested", Tone::Untested, 2),
        "safe with fencing" => ("fenced", Tone::Caution, 3),
        "unknown" => ("unknown", Tone::Caution, 4),
        "fencing broken" => ("fencing broken", Tone::Bad, 5),
        _ => ("violated", Tone::Bad, 6),
    }
}

fn availability_tone(word: &str) -> Tone {
    match word {
        "available" => Tone::Good,
        "degraded" => Tone::Caution,
        _ => Tone::Bad,
    }
}

/// Grants and the seconds they came in.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    grants: f64,
    secs: f64,
}

fn overlap_s(t: usize, windows: &[&FaultWindow]) -> f64 {
    let (a, b) = (t as f64 * 1000.0, (t + 1) as f64 * 1000.0);
    let ms: f64 = windows.iter().map(|w| (b.min(w.end_ms as f64) - a.max(w.start_ms as f64)).max(0.0)).sum();
    (ms / 1000.0).min(1.0)
}

/// Outside every fault window, from the first grant (a second partly inside counts pro rata;
/// the time before the first grant is start-up). Where the availability checker measured the
/// phase, its exact figures stand instead.
fn outside(p: &PhaseFacts) -> Tally {
    if let Some(a) = p.availability.as_ref().filter(|a| a.outside_ms > 0) {
        return Tally { grants: a.grants_outside as f64, secs: a.outside_ms as f64 / 1000.0 };
    }
    let all: Vec<&FaultWindow> = p.windows.iter().collect();
    let first = p.grants.iter().position(|&g| g > 0).unwrap_or(p.grants.len());
    let mut out = Tally::default();
    for (t, &g) in p.grants.iter().enumerate().skip(first) {
        let fall = overlap_s(t, &all);
        out.grants += g as f64 * (1.0 - fall);
        out.secs += 1.0 - fall;
    }
    out
}

/// The longest run of whole seconds without a grant that begins inside a window of `fault`.
fn longest_silence(p: &PhaseFacts, fault: &str) -> u64 {
    let mut best = 0;
    for w in p.windows.iter().filter(|w| w.fault == fault) {
        let from = w.start_ms.div_ceil(1000) as usize;
        let until = w.end_ms.div_ceil(1000) as usize;
        for start in from..until.min(p.grants.len()) {
            let n = p.grants[start..].iter().take_while(|&&g| g == 0).count() as u64;
            best = best.max(n);
        }
    }
    best
}

fn worst_safety<'a>(phases: impl Iterator<Item = &'a PhaseFacts>) -> Option<(&'static str, Tone, u8)> {
    phases.map(|p| safety_word(&p.verdict)).max_by_key(|w| w.2)
}

fn rate(t: Tally) -> Option<f64> {
    (t.secs > 0.0).then(|| t.grants / t.secs)
}

/// The cell of the time outside every fault.
fn no_fault_cell(phases: &[PhaseFacts]) -> Option<Cell> {
    let (safety, safety_tone, _) = worst_safety(phases.iter())?;
    let out = phases.iter().map(outside).fold(Tally::default(), |a, b| Tally { grants: a.grants + b.grants, secs: a.secs + b.secs });
    let (availability, detail) = match rate(out) {
        Some(r) if r > 0.0 => (Some("available"), Some(format!("{r:.0} acq/s"))),
        _ => (Some("unavailable"), Some("nothing granted".to_string())),
    };
    Some(Cell { safety, safety_tone, availability, availability_tone: availability_tone(availability.unwrap()), detail })
}

/// The cell of one fault: the worst safety and the availability of the phases it took
/// effect in (the checker's, over each phase's faults, so the cell agrees with the AP / CP
/// table), and the longest stretch without a grant that began while it was in force.
fn fault_cell(phases: &[PhaseFacts], fault: &str) -> Option<Cell> {
    let mine: Vec<&PhaseFacts> = phases.iter().filter(|p| p.windows.iter().any(|w| w.fault == fault)).collect();
    let (safety, safety_tone, _) = worst_safety(mine.iter().copied())?;
    let measured: Vec<&Availability> = mine.iter().filter_map(|p| p.availability.as_ref()).collect();
    let combined = if measured.len() == mine.len() { Availability::combine(measured) } else { None };
    let word = combined.as_ref().and_then(availability_word);
    let silence = mine.iter().map(|p| longest_silence(p, fault)).max().unwrap_or(0);
    let detail = match (word, combined.as_ref().and_then(|a| a.ratio)) {
        (Some(_), _) if silence > 0 => Some(format!("no grant for {silence} s")),
        (Some(_), Some(r)) => Some(format!("{:.0}% of no-fault rate", r * 100.0)),
        _ => None,
    };
    Some(Cell { safety, safety_tone, availability: word, availability_tone: word.map_or(Tone::Untested, availability_tone), detail })
}

/// The matrix of every backend.
pub fn matrix(backends: &[BackendFacts]) -> Matrix {
    let mut columns = vec![NO_FAULT.to_string()];
    for w in backends.iter().flat_map(|b| &b.phases).flat_map(|p| &p.windows) {
        if !columns.contains(&w.fault) {
            columns.push(w.fault.clone());
        }
    }
    let rows = backends
        .iter()
        .map(|b| {
            if let Some(f) = &b.failure {
                let sentence = format!("{}: not measured ({f}).", b.name);
                return Row { backend: b.name.clone(), cells: vec![None; columns.len()], failure: Some(f.clone()), sentence };
            }
            let cells: Vec<Option<Cell>> =
                columns.iter().map(|c| if c == NO_FAULT { no_fault_cell(&b.phases) } else { fault_cell(&b.phases, c) }).collect();
            let sentence = sentence(b, &columns, &cells);
            Row { backend: b.name.clone(), cells, failure: None, sentence }
        })
        .collect();
    Matrix { columns, rows }
}

/// "etcd: no two holders under kill, pause; unavailable under kill (no grant for 5 s),
/// available under pause; recovered within 0.5 s of every heal."
fn sentence(b: &BackendFacts, columns: &[String], cells: &[Option<Cell>]) -> String {
    let faults: Vec<(&String, &Cell)> = columns.iter().zip(cells).skip(1).filter_map(|(c, x)| x.as_ref().map(|x| (c, x))).collect();
    let mut parts = Vec::new();
    if faults.is_empty() {
        let Some(nf) = cells.first().and_then(|c| c.as_ref()) else { return format!("{}: no phase measured.", b.name) };
        parts.push(safety_clause(nf.safety, "without faults", b));
        parts.push(format!("{} without faults; availability under faults not tested", nf.detail.clone().unwrap_or_default()));
    } else {
        let mut words: Vec<&'static str> = Vec::new();
        for (_, c) in &faults {
            if !words.contains(&c.safety) {
                words.push(c.safety);
            }
        }
        for w in words {
            let under: Vec<&str> = faults.iter().filter(|(_, c)| c.safety == w).map(|(f, _)| f.as_str()).collect();
            parts.push(safety_clause(w, &format!("under {}", under.join(", ")), b));
        }
        let avail: Vec<String> = faults
            .iter()
            .map(|(f, c)| match (c.availability, &c.detail) {
                (Some(w), Some(d)) => format!("{w} under {f} ({d})"),
                (Some(w), None) => format!("{w} under {f}"),
                (None, _) => format!("availability under {f} not measured"),
            })
            .collect();
        parts.push(avail.join(", "));
        if let Some(r) = recovery_clause(&b.phases) {
            parts.push(r);
        }
    }
    format!("{}: {}.", b.name, parts.join("; "))
}

fn safety_clause(word: &str, when: &str, b: &BackendFacts) -> String {
    let (o, l) = b.phases.iter().fold((0, 0), |(o, l), p| (o + p.overlaps, l + p.lost_updates));
    match word {
        "held" => format!("no two holders {when}"),
        "weak evidence" => format!("no two holders seen {when}, but the evidence is weak (holders were inside too little of the time)"),
        "not tested" => format!("safety not tested {when} (nothing entered the protected resource)"),
        "fenced" => format!("two holders {when}, every stale write refused by fencing"),
        "unknown" => format!("safety unknown {when} (a checker could not decide)"),
        "fencing broken" => {
            let why = b.phases.iter().map(|p| &p.verdict.fencing).find(|f| f.starts_with("broken")).map(|f| f.trim_start_matches("broken: ").to_string());
            format!("no two holders {when}, but fencing broke ({})", why.unwrap_or_else(|| "tokens out of order".into()))
        }
        _ => format!("two holders {when} ({o} overlap(s), {l} lost update(s))"),
    }
}

/// The recovery after the heals, over the phases the availability checker measured.
fn recovery_clause(phases: &[PhaseFacts]) -> Option<String> {
    let measured: Vec<&Availability> = phases.iter().filter_map(|p| p.availability.as_ref()).collect();
    if measured.is_empty() {
        return None;
    }
    let worst = measured.iter().map(|a| a.recovery_ms).max().unwrap_or(0);
    Some(if measured.iter().all(|a| a.recovered) {
        format!("recovered within {:.1} s of every heal", worst as f64 / 1000.0)
    } else {
        format!("NOT recovered: no grant in the {:.1} s after a heal", worst as f64 / 1000.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judgement::{verdict, FencingMode, Measured, SafetyCounts};

    /// A phase's verdict from its counts: `overlaps` two holders, exposure 0.5 (strong).
    fn phase(overlaps: u64, windows: Vec<FaultWindow>, grants: Vec<u64>) -> PhaseFacts {
        let faults: Vec<String> = windows.iter().map(|w| w.fault.clone()).collect();
        let m = Measured {
            counts: SafetyCounts { overlaps, ..SafetyCounts::default() },
            sections: 100,
            exposure: Some(0.5),
            claimed: "CP".into(),
            faults_applied: faults,
            ..Measured::default()
        };
        PhaseFacts { verdict: verdict(&m, FencingMode::Off), windows, grants, overlaps, lost_updates: 0, availability: None }
    }

    fn window(fault: &str, start_s: u64, end_s: u64) -> FaultWindow {
        FaultWindow { fault: fault.into(), start_ms: start_s * 1000, end_ms: end_s * 1000 }
    }

    fn backend(name: &str, phases: Vec<PhaseFacts>) -> BackendFacts {
        BackendFacts { name: name.into(), failure: None, phases }
    }

    #[test]
    fn a_fault_gets_a_column_only_where_it_took_effect_somewhere() {
        // etcd ran kill; redis ran without a fault (its own, say, did nothing: no window).
        let m = matrix(&[
            backend("etcd", vec![phase(0, vec![window("kill", 3, 5)], vec![10; 8])]),
            backend("redis", vec![phase(0, vec![], vec![10; 8])]),
        ]);
        assert_eq!(m.columns, [NO_FAULT, "kill"]);
        assert!(m.rows[1].cells[1].is_none(), "redis never had kill in effect: no cell");
        assert_eq!(m.rows[1].cells[0].as_ref().unwrap().safety, "held");
    }

    #[test]
    fn a_violation_under_a_fault_reads_violated_and_the_sentence_says_two_holders() {
        let m = matrix(&[backend("redis", vec![phase(3, vec![window("pause", 2, 4)], vec![10; 8])])]);
        let c = m.rows[0].cells[1].as_ref().unwrap();
        assert_eq!((c.safety, c.safety_tone), ("violated", Tone::Bad));
        assert!(m.rows[0].sentence.contains("two holders under pause (3 overlap(s)"), "{}", m.rows[0].sentence);
    }

    /// The checker's availability of the phases a fault was in force in (so the cell agrees
    /// with the AP / CP table), and the longest silence that began under this fault.
    #[test]
    fn availability_per_fault_is_the_checkers_with_the_silence_under_it() {
        // 10 grants a second outside; none during kill (s 3-5); 9 a second during pause (s 6-8).
        let grants = vec![10, 10, 10, 0, 0, 10, 9, 9, 10, 10];
        let mut p = phase(0, vec![window("kill", 3, 5), window("pause", 6, 8)], grants.clone());
        let checker = |ratio: f64| Availability { ratio: Some(ratio), grants_in_faults: (ratio * 40.0).round() as u64, fault_ms: 4000, grants_outside: 60, outside_ms: 6000, recovery_ms: 400, recovered: true, ..Availability::default() };
        p.availability = Some(checker(0.45));
        let mut q = phase(0, vec![window("pause", 6, 8)], grants);
        q.availability = Some(checker(0.9));
        let m = matrix(&[backend("etcd", vec![p]), backend("zookeeper", vec![q])]);
        assert_eq!(m.columns, [NO_FAULT, "kill", "pause"]);
        let kill = m.rows[0].cells[1].as_ref().unwrap();
        assert_eq!((kill.availability, kill.detail.as_deref()), (Some("degraded"), Some("no grant for 2 s")));
        let pause = m.rows[1].cells[2].as_ref().unwrap();
        assert_eq!((pause.availability, pause.detail.as_deref()), (Some("available"), Some("90% of no-fault rate")));
        let nf = m.rows[0].cells[0].as_ref().unwrap();
        assert_eq!((nf.availability, nf.detail.as_deref()), (Some("available"), Some("10 acq/s")));
        let s = &m.rows[0].sentence;
        assert!(s.starts_with("etcd: no two holders under kill, pause; degraded under kill (no grant for 2 s)"), "{s}");
        assert!(s.ends_with("recovered within 0.4 s of every heal."), "{s}");
        // Without the checker's figures, no availability word is made up.
        let bare = matrix(&[backend("etcd", vec![phase(0, vec![window("kill", 3, 5)], vec![10; 8])])]);
        assert_eq!(bare.rows[0].cells[1].as_ref().unwrap().availability, None);
    }

    #[test]
    fn broken_fencing_is_not_called_two_holders() {
        let mut p = phase(0, vec![window("kill", 3, 5)], vec![10; 8]);
        p.verdict.safety = "fencing broken".into();
        p.verdict.fencing = "broken: 3 token inversion(s)".into();
        let m = matrix(&[backend("redis", vec![p])]);
        assert_eq!(m.rows[0].cells[1].as_ref().unwrap().safety, "fencing broken");
        assert!(m.rows[0].sentence.contains("no two holders under kill, but fencing broke (3 token inversion(s))"), "{}", m.rows[0].sentence);
    }

    #[test]
    fn a_run_without_faults_has_one_column_and_says_availability_was_not_tested() {
        let m = matrix(&[backend("etcd", vec![phase(0, vec![], vec![5; 4])])]);
        assert_eq!(m.columns, [NO_FAULT]);
        assert!(m.rows[0].sentence.contains("no two holders without faults") && m.rows[0].sentence.contains("not tested"), "{}", m.rows[0].sentence);
    }
}
