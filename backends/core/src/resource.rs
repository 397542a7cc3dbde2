//! The protected resource: where mutual exclusion is measured rather than assumed.
//!
//! Every critical section enters a cell (one per key), reads a counter, sleeps for the hold
//! time, and writes the counter back plus one. All clients share this process's clock and
//! memory, so overlaps are exact: a second section entering while one is inside is an
//! overlap, and a write that finds the counter changed since its read is a lost update.
//! Fencing tokens are presented with every read and write; a token below the highest one
//! seen (or equal to it but from another section) is stale. With fencing enforced the stale
//! request is rejected, which is what a fenced storage service would do.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::FencingToken;

/// The protected resource: one cell per key.
#[derive(Debug)]
pub struct Resource {
    cells: Vec<Cell>,
    fencing: bool,
    next_section: AtomicU64,
}

#[derive(Debug, Default)]
struct Cell {
    inside: AtomicU32,
    state: Mutex<CellState>,
}

#[derive(Debug, Default)]
struct CellState {
    counter: u64,
    /// Highest token presented so far, and the section that presented it.
    max_token: Option<(u64, u64)>,
    stats: CellStats,
}

/// Counts for one key.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CellStats {
    /// Sections that entered.
    pub sections: u64,
    /// Sections that entered while another was inside.
    pub overlaps: u64,
    /// Writes that found the counter changed since their read.
    pub lost_updates: u64,
    /// Reads or writes that presented a stale token.
    pub stale_tokens: u64,
    /// Stale requests refused because fencing was enforced.
    pub rejected: u64,
    /// Writes that took effect.
    pub writes: u64,
}

impl CellStats {
    fn add(&mut self, o: &CellStats) {
        self.sections += o.sections;
        self.overlaps += o.overlaps;
        self.lost_updates += o.lost_updates;
        self.stale_tokens += o.stale_tokens;
        self.rejected += o.rejected;
        self.writes += o.writes;
    }
}

/// Totals over all keys, plus the final counters so a reader can check
/// `sum(counters) + lost_updates == writes`.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResourceStats {
    #[serde(flatten)]
    pub total: CellStats,
    pub counter_sum: u64,
}

/// What one critical section observed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SectionOutcome {
    pub overlapped: bool,
    pub lost_update: bool,
    pub stale: bool,
    pub rejected: bool,
}

impl Resource {
    /// `keys` cells; `fencing` decides whether stale tokens are refused or only counted.
    pub fn new(keys: usize, fencing: bool) -> Self {
        Resource {
            cells: (0..keys.max(1)).map(|_| Cell::default()).collect(),
            fencing,
            next_section: AtomicU64::new(1),
        }
    }

    pub fn keys(&self) -> usize {
        self.cells.len()
    }

    pub fn fencing(&self) -> bool {
        self.fencing
    }

    /// Enter the critical section for key index `key`, presenting `token` (if the backend
    /// has one). The section ends when the returned guard is dropped.
    pub fn enter(&self, key: usize, token: Option<FencingToken>) -> Section<'_> {
        let cell = &self.cells[key];
        let before = cell.inside.fetch_add(1, Ordering::SeqCst);
        let id = self.next_section.fetch_add(1, Ordering::Relaxed);
        let overlapped = before > 0;
        {
            let mut st = cell.state.lock().unwrap();
            st.stats.sections += 1;
            if overlapped {
                st.stats.overlaps += 1;
            }
        }
        Section {
            resource: self,
            cell,
            id,
            token,
            read_value: None,
            outcome: SectionOutcome { overlapped, ..Default::default() },
        }
    }

    pub fn cell_stats(&self, key: usize) -> CellStats {
        self.cells[key].state.lock().unwrap().stats
    }

    pub fn stats(&self) -> ResourceStats {
        let mut out = ResourceStats::default();
        for c in &self.cells {
            let st = c.state.lock().unwrap();
            out.total.add(&st.stats);
            out.counter_sum += st.counter;
        }
        out
    }
}

/// An open critical section; dropping it leaves the section.
#[derive(Debug)]
pub struct Section<'a> {
    resource: &'a Resource,
    cell: &'a Cell,
    id: u64,
    token: Option<FencingToken>,
    read_value: Option<u64>,
    outcome: SectionOutcome,
}

impl Section<'_> {
    /// Present the token; returns false when the request must be refused.
    fn admit(&mut self, st: &mut CellState) -> bool {
        let Some(FencingToken(t)) = self.token else { return true };
        let stale = match st.max_token {
            Some((max, owner)) => t < max || (t == max && owner != self.id),
            None => false,
        };
        if stale {
            st.stats.stale_tokens += 1;
            self.outcome.stale = true;
            if self.resource.fencing {
                st.stats.rejected += 1;
                self.outcome.rejected = true;
                return false;
            }
        } else {
            st.max_token = Some((t, self.id));
        }
        true
    }

    /// Read the counter. `None` when fencing refused the token.
    pub fn read(&mut self) -> Option<u64> {
        let mut st = self.cell.state.lock().unwrap();
        if !self.admit(&mut st) {
            return None;
        }
        self.read_value = Some(st.counter);
        Some(st.counter)
    }

    /// Write `read + 1`. Returns false when fencing refused it or nothing was read.
    pub fn write_incremented(&mut self) -> bool {
        let Some(read) = self.read_value else { return false };
        let mut st = self.cell.state.lock().unwrap();
        if !self.admit(&mut st) {
            return false;
        }
        if st.counter != read {
            // Someone wrote since our read: overwriting loses their increment, as an
            // unprotected store would.
            st.stats.lost_updates += 1;
            self.outcome.lost_update = true;
        }
        st.counter = read + 1;
        st.stats.writes += 1;
        true
    }

    /// The standard critical section: read, hold for `hold`, write back plus one. A zero
    /// hold still yields once between read and write, so a second holder gets the chance
    /// to interleave and be caught.
    pub async fn read_sleep_write(&mut self, hold: Duration) -> SectionOutcome {
        if self.read().is_some() {
            if hold.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(hold).await;
            }
            self.write_incremented();
        }
        self.outcome
    }

    pub fn outcome(&self) -> SectionOutcome {
        self.outcome
    }
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        self.cell.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_sections_are_clean() {
        let r = Resource::new(1, true);
        for t in 1..=5 {
            let mut s = r.enter(0, Some(FencingToken(t)));
            assert!(s.read().is_some());
            assert!(s.write_incremented());
        }
        let st = r.stats();
        assert_eq!(st.total.sections, 5);
        assert_eq!(st.total.overlaps, 0);
        assert_eq!(st.total.lost_updates, 0);
        assert_eq!(st.total.stale_tokens, 0);
        assert_eq!(st.counter_sum, 5);
    }

    #[test]
    fn interleaved_sections_show_overlap_and_lost_update() {
        let r = Resource::new(1, false);
        let mut a = r.enter(0, None);
        let mut b = r.enter(0, None);
        a.read();
        b.read();
        assert!(a.write_incremented());
        assert!(b.write_incremented());
        let (oa, ob) = (a.outcome(), b.outcome());
        drop((a, b));
        assert!(!oa.overlapped && ob.overlapped);
        assert!(!oa.lost_update && ob.lost_update);
        let st = r.stats();
        assert_eq!((st.total.overlaps, st.total.lost_updates, st.counter_sum), (1, 1, 1));
    }

    #[test]
    fn fencing_rejects_the_superseded_holder() {
        let r = Resource::new(1, true);
        let mut old = r.enter(0, Some(FencingToken(5)));
        old.read();
        let mut new = r.enter(0, Some(FencingToken(6)));
        new.read();
        assert!(!old.write_incremented(), "token 5 after 6 must be refused");
        assert!(new.write_incremented());
        assert!(old.outcome().rejected && old.outcome().stale);
        drop((old, new));
        let st = r.stats();
        assert_eq!((st.total.rejected, st.total.lost_updates, st.counter_sum), (1, 0, 1));
    }

    #[test]
    fn equal_tokens_from_two_sections_are_stale() {
        let r = Resource::new(1, false);
        let mut a = r.enter(0, Some(FencingToken(7)));
        a.read();
        a.write_incremented();
        drop(a);
        let mut b = r.enter(0, Some(FencingToken(7)));
        b.read();
        assert!(b.outcome().stale);
        assert!(!b.outcome().rejected, "without fencing, stale is counted, not refused");
    }
}
