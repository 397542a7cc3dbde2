//! The headline and the table's line, from the axes already judged: one rule, so every axis
//! that sets the exit status is named in the headline and nothing that passed reads as failed.

use crate::checker::windows::Recovery;
use crate::checker::Validity;

use super::axes::{Avail, Axes, Safety};
use super::words::{SafetyWord, Strength};
use super::{percent, FencingMode, Measured};

/// What each failed or undecided axis adds to the headline.
pub const NOT_RECOVERED: &str = "NOT RECOVERED";
pub const FAILED_ACQUIRE: &str = "failed acquire took effect";
pub const HISTORY_INVALID: &str = "history invalid";
pub const TWO_HOLDERS_UNFENCED: &str = "two holders without fencing";
pub const RECOVERY_NOT_JUDGED: &str = "recovery not judged";
pub const CONTRADICTS: &str = "CONTRADICTS";

/// The headline: the safety word, then every other axis that failed or could not decide.
pub(super) fn headline(m: &Measured, mode: FencingMode, s: &Safety, a: &Avail, x: &Axes) -> String {
    let mut parts = vec![match s.word {
        SafetyWord::NoViolationSeen => "no violation seen (weak)".to_string(),
        w => w.to_string(),
    }];
    // The lock alone let two holders in, though fencing caught it: on `both` that fails the
    // run, so it is said.
    if x.lock == Validity::Invalid && s.word == SafetyWord::SafeWithFencing {
        parts.push(TWO_HOLDERS_UNFENCED.into());
    }
    match x.availability {
        Validity::Invalid => parts.push(NOT_RECOVERED.into()),
        Validity::Unknown => parts.push(match &a.recovery {
            Some(r @ (Recovery::NotJudged { .. } | Recovery::CutShort { .. })) => r.words(),
            _ => RECOVERY_NOT_JUDGED.into(),
        }),
        Validity::Valid => {}
    }
    if x.contention == Validity::Invalid {
        parts.push(FAILED_ACQUIRE.into());
    }
    if mode == FencingMode::Off && s.fencing_broken && s.word != SafetyWord::Unsafe {
        parts.push("fencing broken (not judged: --fencing off)".into());
    }
    if x.others == Validity::Invalid {
        parts.push(HISTORY_INVALID.into());
    }
    if let Some(e) = &m.expectation {
        parts.push(if e.met { format!("as {} expects ({})", e.entry, e.words) } else { format!("{CONTRADICTS} {}'s expectation ({})", e.entry, e.words) });
    }
    let explained = parts.len() > 1 || matches!(s.word, SafetyWord::Unknown | SafetyWord::NotTested);
    if x.valid == Validity::Unknown && !explained {
        parts.push("unknown".into());
    }
    parts.join("; ")
}

/// The table's line: the headline, then the counts, the evidence, the findings, the class
/// and the faults that did not take effect.
pub(super) fn summary_line(m: &Measured, s: &Safety, a: &Avail, x: &Axes, headline: &str) -> String {
    let mut summary = headline.to_string();
    if s.lock_violated {
        summary.push_str(&format!(" ({} overlap(s), {} lost update(s) without fencing", m.counts.overlaps, m.counts.lost_updates));
        if m.has_tokens {
            summary.push_str(&format!("; fencing {}", s.fencing));
        }
        summary.push(')');
    } else if s.fencing_broken {
        summary.push_str(&format!(" ({})", s.fencing));
    }
    match (s.evidence, m.exposure) {
        (Strength::Weak, Some(e)) => summary.push_str(&format!("; weak evidence: holders inside {} of the time", percent(e))),
        (Strength::None, _) => summary.push_str("; no evidence: nothing entered the resource"),
        _ => {}
    }
    for f in &x.findings {
        summary.push_str(&format!("; {f}"));
    }
    match (a.word, &a.class_observed) {
        (Some(av), Some(c)) => summary.push_str(&format!(
            "; {av} under {}: {}, {}; claims {}, observed {c}{}{}",
            m.faults_applied.join(", "),
            a.ratio.map(super::words::grant_rate).unwrap_or_else(|| "grant rate unknown".into()),
            a.recovery.as_ref().map(Recovery::words).unwrap_or_default(),
            m.claimed,
            if a.state_lost { " (it lost its state: tokens went back)" } else { "" },
            if a.contradiction { " (CONTRADICTS the claim)" } else { "" }
        )),
        (Some(av), None) => summary.push_str(&format!(
            "; {av} under {}: {}, {}; class {} (claims {})",
            m.faults_applied.join(", "),
            a.ratio.map(super::words::grant_rate).unwrap_or_else(|| "grant rate unknown".into()),
            a.recovery.as_ref().map(Recovery::words).unwrap_or_default(),
            a.class_note.as_deref().unwrap_or("not tested"),
            m.claimed
        )),
        _ => summary.push_str(&format!("; class {} (claims {})", a.class_note.as_deref().unwrap_or("not tested"), m.claimed)),
    }
    for (what, list) in [("no effect", &m.faults_no_effect), ("unchecked", &m.faults_unchecked), ("skipped", &m.faults_skipped)] {
        if !list.is_empty() {
            summary.push_str(&format!("; {what}: {}", list.join(", ")));
        }
    }
    summary
}
