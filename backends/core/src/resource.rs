//! The protected resource: where mutual exclusion is measured rather than assumed.
//!
//! Every critical section enters a cell (one per key), reads a counter, holds, and writes
//! the counter back plus one. All clients share this process's clock and memory, so
//! overlaps are exact: a section entering while another is inside is an overlap, and a write
//! that finds the counter changed since its read is a lost update.
//!
//! Each cell keeps two registers driven by the same reads and writes: a plain one that takes
//! every write, and a fenced one that refuses a read or write whose fencing token is below
//! the highest seen (or equal to it but from another section), as a fenced storage service
//! would. The lock's schedule does not depend on what the resource answers, so one run gives
//! the figures without fencing and with fencing side by side. A backend without tokens
//! (Redlock) cannot be fenced: its fenced register takes every write too.
//!
//! Reads and writes carry a per-key sequence number taken under the cell's lock, so a
//! history of sections can be re-checked offline in exactly the order the resource saw.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::FencingToken;

/// The protected resource: one cell per key.
#[derive(Debug)]
pub struct Resource {
    cells: Vec<Cell>,
    next_section: AtomicU64,
    epoch: Instant,
}

#[derive(Debug, Default)]
struct Cell {
    inside: AtomicU32,
    state: Mutex<CellState>,
}

#[derive(Debug, Default)]
struct CellState {
    plain: u64,
    fenced: u64,
    seq: u64,
    /// Highest token presented so far, and the section that presented it.
    max_token: Option<(u64, u64)>,
    stats: CellStats,
}

/// Counts for one key (or all).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CellStats {
    /// Sections that entered.
    pub sections: u64,
    /// Sections that entered while another was inside.
    pub overlaps: u64,
    /// Without fencing: writes that found the counter changed since their read.
    pub lost_updates: u64,
    /// With fencing: the same, on the register that refuses stale tokens.
    pub lost_updates_fenced: u64,
    /// Sections that presented a stale token at their read or write.
    pub stale_tokens: u64,
    /// Sections the fenced register refused (their stale read or write).
    pub rejected: u64,
    /// Writes to the plain register.
    pub writes: u64,
}

impl CellStats {
    fn add(&mut self, o: &CellStats) {
        self.sections += o.sections;
        self.overlaps += o.overlaps;
        self.lost_updates += o.lost_updates;
        self.lost_updates_fenced += o.lost_updates_fenced;
        self.stale_tokens += o.stale_tokens;
        self.rejected += o.rejected;
        self.writes += o.writes;
    }
}

/// Totals over all keys, plus the final plain counters, so a reader can check
/// `counter_sum + lost_updates == writes`.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceStats {
    #[serde(flatten)]
    pub total: CellStats,
    pub counter_sum: u64,
}

/// What one critical section did and saw, in the resource's own order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SectionRecord {
    pub key: usize,
    pub token: Option<u64>,
    /// Nanoseconds since the resource was created.
    pub enter_ns: u64,
    pub exit_ns: u64,
    /// Per-key sequence number and value of the read, if any.
    pub read_seq: Option<u64>,
    pub read_value: Option<u64>,
    pub write_seq: Option<u64>,
    pub overlapped: bool,
    pub lost_update: bool,
    pub lost_update_fenced: bool,
    pub stale: bool,
    /// The fenced register refused this section's read or write.
    pub rejected: bool,
}

impl Resource {
    pub fn new(keys: usize) -> Self {
        Resource {
            cells: (0..keys.max(1)).map(|_| Cell::default()).collect(),
            next_section: AtomicU64::new(1),
            epoch: Instant::now(),
        }
    }

    pub fn keys(&self) -> usize {
        self.cells.len()
    }

    /// The instant timestamps in [`SectionRecord`] count from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Enter the critical section for key index `key`, presenting `token` (if the backend
    /// has one). Leave with [`Section::exit`] (or by dropping the section).
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
            fenced_read: None,
            exited: false,
            rec: SectionRecord {
                key,
                token: token.map(|t| t.0),
                enter_ns: self.now_ns(),
                overlapped,
                ..Default::default()
            },
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
            out.counter_sum += st.plain;
        }
        out
    }
}

/// An open critical section.
#[derive(Debug)]
pub struct Section<'a> {
    resource: &'a Resource,
    cell: &'a Cell,
    id: u64,
    /// The fenced register's value at our read, unless the read was refused.
    fenced_read: Option<u64>,
    exited: bool,
    rec: SectionRecord,
}

impl Section<'_> {
    /// Present the token; true when it is stale.
    fn present(&mut self, st: &mut CellState) -> bool {
        let Some(t) = self.rec.token else { return false };
        let stale = match st.max_token {
            Some((max, owner)) => t < max || (t == max && owner != self.id),
            None => false,
        };
        if stale {
            if !self.rec.stale {
                self.rec.stale = true;
                st.stats.stale_tokens += 1;
            }
        } else {
            st.max_token = Some((t, self.id));
        }
        stale
    }

    fn refuse(&mut self, st: &mut CellState) {
        if !self.rec.rejected {
            self.rec.rejected = true;
            st.stats.rejected += 1;
        }
        self.fenced_read = None;
    }

    /// Read the counter; returns the plain register's value.
    pub fn read(&mut self) -> u64 {
        let mut st = self.cell.state.lock().unwrap();
        let stale = self.present(&mut st);
        st.seq += 1;
        self.rec.read_seq = Some(st.seq);
        self.rec.read_value = Some(st.plain);
        if stale {
            self.refuse(&mut st);
        } else {
            self.fenced_read = Some(st.fenced);
        }
        st.plain
    }

    /// Write back what was read plus one. May come after [`Section::exit`]: a write delayed
    /// in the network lands whenever it lands.
    pub fn write_incremented(&mut self) {
        let Some(read) = self.rec.read_value else { return };
        let mut st = self.cell.state.lock().unwrap();
        let stale = self.present(&mut st);
        st.seq += 1;
        self.rec.write_seq = Some(st.seq);
        if st.plain != read {
            // Someone wrote since our read: overwriting loses their increment, as an
            // unprotected store would.
            st.stats.lost_updates += 1;
            self.rec.lost_update = true;
        }
        st.plain = read + 1;
        st.stats.writes += 1;
        if stale {
            self.refuse(&mut st);
        } else if let Some(fr) = self.fenced_read {
            if st.fenced != fr {
                st.stats.lost_updates_fenced += 1;
                self.rec.lost_update_fenced = true;
            }
            st.fenced = fr + 1;
        }
    }

    /// The standard critical section: read, hold for `hold`, write back plus one. A zero
    /// hold still yields once between read and write, so a second holder gets the chance
    /// to interleave and be caught.
    pub async fn read_sleep_write(&mut self, hold: Duration) {
        self.read();
        if hold.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(hold).await;
        }
        self.write_incremented();
    }

    /// Leave the section. Idempotent.
    pub fn exit(&mut self) {
        if !self.exited {
            self.exited = true;
            self.rec.exit_ns = self.resource.now_ns();
            self.cell.inside.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// What the section did so far.
    pub fn record(&self) -> SectionRecord {
        self.rec
    }
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        self.exit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(r: &Resource, t: Option<u64>) -> Section<'_> {
        r.enter(0, t.map(FencingToken))
    }

    #[test]
    fn sequential_sections_are_clean() {
        let r = Resource::new(1);
        for t in 1..=5 {
            let mut s = section(&r, Some(t));
            s.read();
            s.write_incremented();
        }
        let st = r.stats();
        assert_eq!(st.total.sections, 5);
        assert_eq!((st.total.overlaps, st.total.lost_updates, st.total.stale_tokens, st.total.rejected), (0, 0, 0, 0));
        assert_eq!(st.counter_sum, 5);
    }

    #[test]
    fn interleaved_sections_show_overlap_and_lost_update() {
        let r = Resource::new(1);
        let mut a = section(&r, None);
        let mut b = section(&r, None);
        a.read();
        b.read();
        a.write_incremented();
        b.write_incremented();
        let (ra, rb) = (a.record(), b.record());
        drop((a, b));
        assert!(!ra.overlapped && rb.overlapped);
        assert!(!ra.lost_update && rb.lost_update);
        assert!(rb.lost_update_fenced, "without tokens the fenced register cannot refuse");
        let st = r.stats();
        assert_eq!((st.total.overlaps, st.total.lost_updates, st.counter_sum), (1, 1, 1));
    }

    /// The superseded holder read before the new one; its late write is refused by the
    /// fenced register and overwrites the new holder's on the plain one.
    #[test]
    fn fencing_refuses_the_superseded_holder() {
        let r = Resource::new(1);
        let mut old = section(&r, Some(5));
        old.read();
        let mut new = section(&r, Some(6));
        new.read();
        new.write_incremented();
        new.exit();
        old.write_incremented();
        let (ro, rn) = (old.record(), new.record());
        drop(old);
        assert!(ro.stale && ro.rejected && ro.lost_update && !ro.lost_update_fenced);
        assert!(!rn.stale && !rn.rejected);
        assert!(rn.read_seq < ro.write_seq);
        let st = r.stats();
        assert_eq!((st.total.lost_updates, st.total.lost_updates_fenced, st.total.rejected, st.total.stale_tokens), (1, 0, 1, 1));
    }

    /// A stale read is refused at once, so the stale section cannot clobber the fenced
    /// register even if the newer holder writes first.
    #[test]
    fn a_stale_read_is_refused() {
        let r = Resource::new(1);
        let mut new = section(&r, Some(9));
        new.read();
        let mut old = section(&r, Some(8));
        old.read();
        new.write_incremented();
        old.write_incremented();
        assert!(old.record().rejected);
        drop((old, new));
        assert_eq!(r.stats().total.lost_updates_fenced, 0);
    }

    #[test]
    fn equal_tokens_from_two_sections_are_stale() {
        let r = Resource::new(1);
        let mut a = section(&r, Some(7));
        a.read();
        a.write_incremented();
        drop(a);
        let mut b = section(&r, Some(7));
        b.read();
        assert!(b.record().stale && b.record().rejected);
    }
}
