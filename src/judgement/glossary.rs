//! The one glossary: every word a reader meets in dlbench's tables, with what it means, as
//! the code computes it. The page renders it (`report::html`), `dlbench run --help` prints
//! it, `summary.md` lists its columns' meanings from it, and `docs/glossary.md` is generated from it
//! (a test fails when the file is stale). The thresholds are this module's parent's
//! constants, written in here, so a definition cannot drift from the rule it names.

use std::sync::OnceLock;

use super::{AVAILABLE_RATIO, DEGRADED_RATIO, WEAK_EXPOSURE};
use crate::stats::Quantile;

/// The sections, in order, each with its terms.
pub const SECTIONS: [&str; 5] = ["The run table", "Verdicts", "Faults and the AP / CP table", "Checks and anomalies", "compare"];

/// (section index, term, meaning), in reading order.
pub fn entries() -> Vec<(usize, &'static str, String)> {
    let weak = pct(WEAK_EXPOSURE);
    let (avail, degraded) = (pct(AVAILABLE_RATIO), pct(DEGRADED_RATIO));
    vec![
        (0, "acq/s", "successful acquisitions per second in the measured window (warm-up excluded)".into()),
        (0, "p50 / p99 / p99.9", format!("acquire latency of the successful acquires in the measured window, from the call (in an open loop: from when it was due) to the lock being held, from an HDR histogram; timed-out and failed acquires keep latency series of their own in summary.json (timeout_latency_us, error_latency_us). A percentile is shown only where at least one acquisition lies above it (p99 from {} acquisitions, p99.9 from {}); below that it reads \"-\" with the number n, since the figure would be the maximum itself", Quantile::P99.min_samples(), Quantile::P999.min_samples())),
        (0, "handoff p50", "median time from one holder's release to the next holder's grant of the same key; \"-\" when no client ever waited".into()),
        (0, "fair", "Jain's fairness index of acquisitions across clients: 1 is perfectly even, 1/clients is one client taking everything".into()),
        (0, "errors", "operations that failed for a reason other than a contended lock (its wait timeout, or a try-lock finding the key held): acquires refused by an unreachable server, a lost session or an unknown outcome, releases that failed (one that found the lock already gone included), and clients that could not connect; counted over the measured window, as acq/s and timeouts are (warm-up excluded). Wait timeouts and acquires cut short by dlbench (Ctrl-C, the end-of-phase drain) are counted apart (timeouts, cancelled in summary.json)".into()),
        (0, "overlaps", "critical sections that began while another holder of the same key was inside, seen at the protected resource (one clock: exact)".into()),
        (0, "lost upd", "each critical section reads a counter, holds, and writes it back plus one; a write that finds the counter changed since its read is a lost update: two holders at once".into()),
        (0, "stale tok", "fencing tokens presented out of order at the resource (a token not above the highest seen from another holder); n/a where the lock has no tokens".into()),
        (0, "expo %", format!("exposure: how much of the wall time some holder was inside its section (mean over keys). A second holder granted at a random moment is seen only if it finds one inside, so below {weak} a double grant would likely go unseen")),
        (0, "verdict", "the judgement of the phase: one of the safety words below, then every other axis that failed or could not decide (NOT RECOVERED, failed acquire took effect, unknown)".into()),
        (1, "safe", format!("no overlap or lost update, every checker valid, and holders exposed at least {weak} of the time")),
        (1, "no violation seen (weak)", format!("no overlap or lost update, but holders were inside less than {weak} of the time: a second holder would likely have gone unseen")),
        (1, "not tested", "nothing was inside the protected resource (or, for a class, no fault took effect or availability was not measured): no evidence either way".into()),
        (1, "unsafe", "two holders at once: an overlap, a lost update, or a checker's proof of one".into()),
        (1, "safe with fencing", "the lock let two holders in, and fencing refused every stale write with no token going backwards and no legitimate holder refused".into()),
        (1, "fencing broken", "tokens went backwards or a legitimate holder's write was refused (a token counter reset by a restart)".into()),
        (1, "unknown", "a checker could not decide (an operation's outcome is unknown, a fault was never healed)".into()),
        (1, "failed acquire took effect", "the contention checker saw an acquire reported failed while no other client could have held the key: the failure may have taken the lock".into()),
        (1, "evidence", format!("strong (exposure at least {weak}), weak (below), none (nothing entered the resource). Under a fault it is judged over the fault's own span (its start to its heal plus the granted TTL), during the fault and after its heal apart: each part is strong when holders were inside at least {weak} of it, or when the lock granted nothing in it while clients asked (a lock that refuses during a kill is not thereby weak); where it granted a while and was silent the rest (half a second or more without a grant: a frozen or dead server), the clients kept waiting in the silence count with the holders")),
        (2, "fault took effect", "a fault counts only where dlbench saw it act, on the servers: a killed process gone, a paused one stopped (state T), a cut or a delay that held traffic back (bytes the proxies held, a probe that went unanswered), a clock the server reports moved, a promotion the replica reports. One shown to do nothing is listed as no effect, one nothing could check as unchecked, one the target cannot apply as skipped: none of them opens a window that counts. Faults of the holder (a paused or cut-off client) and a scenario's own choreography never give the servers a class; they are judged by the scenario's expectation".into()),
        (2, "fault window", "one fault from its start to its heal, judged on its own: its grant rate against the no-fault rate, its recovery after the heal, and its safety over the span in which it could cause a second grant (its start to its heal plus the granted TTL). A fault whose target means nothing on a backend (a leader on Redlock, a follower on one node) hits a named stand-in, which its label shows (kill:leader -> redlock-2); a plan where it means nothing on every backend is refused".into()),
        (2, "quiet time", "the time from a phase's first grant to its last outside every fault that may have acted, from its start to the later of its span's end and its first grant after the heal: where the no-fault rate and the no-fault cell come from".into()),
        (2, "grant rate", format!("the grant rate inside the windows of the faults that count over the no-fault rate of the same phase (its quiet time), as a share: available at {avail} or more, degraded at {degraded} or more, unavailable below; printed as the share first (0% (unavailable): the grant rate was 0%). Not the share of fault seconds with a grant")),
        (2, "fault seconds with a grant", "the share of whole seconds inside fault windows in which at least one acquire succeeded (summary.json: success_seconds_pct); with holds of seconds it is low even when the lock is fine, so the availability word does not use it".into()),
        (2, "recovery", "after each heal that counts, the time to the next grant wherever it came (past the next fault's start, into the drain): recovered in N ms; cut short by the next fault at T (the next fault started before that grant and inside that room, so the figure includes it: reported, not judged); NOT recovered: no grant in all the time after the heal, which covered the granted TTL and the servers' election or restart time (to the phase's end, or to a next fault that came after that room: the grant that came later is reported, not taken as a recovery); not judged: the phase ended, or was interrupted, before that room had passed. A phase without a fault never says NOT recovered. The nemesis leaves that room after every heal, and a plan whose phases cannot hold it is refused with the shortest --duration that does".into()),
        (2, "longest gap", "the longest stretch without a successful acquire, after the first one".into()),
        (2, "lost upd (no fence)", "in the AP / CP table (lost upd on the terminal): lost updates at the resource without fencing, the side a lock's own exclusion must protect".into()),
        (2, "fencing", "what the fenced resource showed: n/a (no tokens), not exercised (no stale write arrived), refused N stale write(s), or broken".into()),
        (2, "claims", "the class the design promises (CP: consistent under partition, at the cost of availability; AP: available, at the cost of safety)".into()),
        (2, "observed", "the class the fault windows that count showed: CP (no two holders and the state kept, not available: degraded or unavailable), CP+A (no two holders and available), AP (two holders or lost state, and available), neither (two holders or lost state, not available), unknown (a checker could not decide); marked (contradicts) when a CP claim let two holders in or lost its state (tokens went back); not established when the evidence was weak; not tested when no fault counted".into()),
        (3, "valid / invalid / unknown", "a checker's answer; unknown means the history could not decide (no evidence either way)".into()),
        (3, "anomaly", "a flag from the per-second series: seconds with no acquisition, a max over 10x the p99, a stall past the wait timeout, a rate that never settled. Seconds inside a fault window, and after its heal until the rate came back, are not judged: a rate that fell there is the fault's effect (see avail), not an anomaly".into()),
        (4, "improved / unchanged / regressed", "compare's word for one metric of one backend · workload · client count: with 3 or more runs per side a change counts when the medians differ by more than the metric's threshold and a one-sided Mann-Whitney U test, after Holm's adjustment over the comparison, says so; with fewer runs the thresholds alone decide".into()),
        (4, "regressed (safety)", "a new overlap or lost update, or a safety verdict turning worse: a regression whatever the thresholds".into()),
    ]
}

/// A share as a whole percent: 0.2 -> "20%".
fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Every term and its meaning, in reading order (built once).
pub fn glossary() -> &'static [(&'static str, String)] {
    static G: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    G.get_or_init(|| entries().into_iter().map(|(_, t, m)| (t, m)).collect())
}

/// The meaning of one term (None for a word the glossary does not hold).
pub fn meaning(term: &str) -> Option<&'static str> {
    glossary().iter().find(|(t, _)| *t == term).map(|(_, m)| m.as_str())
}

/// `docs/glossary.md`: a heading per section, a bullet per term.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Glossary\n\n<!-- Generated from src/judgement/glossary.rs; a test fails when this file is stale: \
         regenerate it with `UPDATE_GLOSSARY=1 cargo test --release --lib glossary`. -->\n\n\
         Every word in dlbench's tables, as the code computes it. The same text is the report page's \
         glossary and the end of `dlbench run --help`.\n",
    );
    let all = entries();
    for (i, title) in SECTIONS.iter().enumerate() {
        s.push_str(&format!("\n## {title}\n\n"));
        for (_, term, meaning) in all.iter().filter(|e| e.0 == i) {
            s.push_str(&format!("- **{term}**: {meaning}.\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/glossary.md is the glossary as generated: an edit here without regenerating it
    /// fails (UPDATE_GLOSSARY=1 writes it).
    #[test]
    fn the_docs_glossary_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/glossary.md");
        let now = markdown();
        if std::env::var_os("UPDATE_GLOSSARY").is_some() {
            std::fs::write(path, &now).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(committed == now, "docs/glossary.md is stale: regenerate it with `UPDATE_GLOSSARY=1 cargo test --release --lib glossary`");
    }

    /// Every term once, every section used, the thresholds written from the constants.
    #[test]
    fn every_term_once_with_the_thresholds_it_names() {
        let g = glossary();
        for (i, (t, _)) in g.iter().enumerate() {
            assert!(!g[..i].iter().any(|(u, _)| u == t), "{t} twice");
        }
        let all = entries();
        assert!((0..SECTIONS.len()).all(|i| all.iter().any(|e| e.0 == i)));
        assert!(meaning("grant rate").unwrap().contains("at 80% or more") && meaning("grant rate").unwrap().contains("at 30% or more"));
        assert!(meaning("safe").unwrap().contains("at least 20%"));
        assert!(meaning("errors").unwrap().contains("Wait timeouts") && meaning("errors").unwrap().contains("measured window"));
        assert!(meaning("no such word").is_none());
    }
}
