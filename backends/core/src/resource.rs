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
//!
//! Fencing is judged, not assumed. The fenced register cannot lose an update while every
//! section presents a token (it refuses any request below the highest token seen), so its
//! lost-update count alone proves nothing. What can go wrong with fencing is the tokens:
//! - a **token inversion**: a section enters, its holder's lease still valid, with a token not
//!   above one an earlier section of the key presented (a counter reset by a restart, tokens
//!   repeated or regressing);
//! - a **legitimate write refused**: the register refuses a section because of a token that an
//!   *earlier* section presented, while the refused holder's lease was valid at entry: the
//!   current holder locked out by a token from the past.
//!
//! A refusal caused by a section that entered *later* is a **stale write refused**: the
//! refused holder had been superseded, which is what fencing is for.
//!
//! Exposure: each cell also adds up the time some holder was inside, so a phase can say how
//! much of its wall time a second holder would have been caught in.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{FencingToken, Lease};

/// The protected resource: one cell per key.
#[derive(Debug)]
pub struct Resource {
    cells: Vec<Cell>,
    epoch: Instant,
}

#[derive(Debug, Default)]
struct Cell {
    state: Mutex<CellState>,
}

#[derive(Debug, Default)]
struct CellState {
    plain: u64,
    fenced: u64,
    seq: u64,
    /// Sections inside now.
    inside: u32,
    /// Sections that have entered so far: a section's rank in entry order.
    entered: u64,
    /// Highest token presented to the register so far, and the entry rank of its section.
    max_token: Option<(u64, u64)>,
    /// Highest token any section entered with, and that section's entry rank.
    max_entered: Option<(u64, u64)>,
    /// Since when some holder has been inside (ns since the epoch), while one is.
    busy_since: Option<u64>,
    busy_ns: u64,
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
    /// Of `rejected`: sections refused because of an earlier section's token while their own
    /// lease was valid: legitimate holders refused (fencing broken).
    #[serde(default)]
    pub legit_refused: u64,
    /// Sections that entered with a valid lease and a token not above one an earlier section
    /// of the key presented.
    #[serde(default)]
    pub token_inversions: u64,
    /// Sections whose holder's lease was already lost (or past its validity) at entry.
    #[serde(default)]
    pub entered_expired: u64,
    /// Writes to the plain register.
    pub writes: u64,
}

impl CellStats {
    pub fn add(&mut self, o: &CellStats) {
        self.sections += o.sections;
        self.overlaps += o.overlaps;
        self.lost_updates += o.lost_updates;
        self.lost_updates_fenced += o.lost_updates_fenced;
        self.stale_tokens += o.stale_tokens;
        self.rejected += o.rejected;
        self.legit_refused += o.legit_refused;
        self.token_inversions += o.token_inversions;
        self.entered_expired += o.entered_expired;
        self.writes += o.writes;
    }

    /// Refusals of superseded holders: the ones fencing exists for.
    pub fn stale_refused(&self) -> u64 {
        self.rejected.saturating_sub(self.legit_refused)
    }
}

/// Totals over all keys, plus the final plain counters, so a reader can check
/// `counter_sum + lost_updates == writes`, and the time holders spent inside.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceStats {
    #[serde(flatten)]
    pub total: CellStats,
    pub counter_sum: u64,
    /// Number of keys (cells).
    #[serde(default)]
    pub keys: u64,
    /// Wall time from the resource's creation to these stats.
    #[serde(default)]
    pub elapsed_ns: u64,
    /// Summed over keys: time some holder of the key was inside.
    #[serde(default)]
    pub busy_ns: u64,
    /// The busiest key's inside time.
    #[serde(default)]
    pub busiest_key_ns: u64,
}

impl ResourceStats {
    /// Mean over keys of the fraction of wall time some holder was inside: roughly the chance
    /// that a second holder, granted at a random moment, lands on a holder inside and is seen.
    pub fn exposure(&self) -> Option<f64> {
        (self.keys > 0 && self.elapsed_ns > 0).then(|| self.busy_ns as f64 / (self.keys as f64 * self.elapsed_ns as f64))
    }

    /// The same fraction for the busiest key.
    pub fn busiest_key_exposure(&self) -> Option<f64> {
        (self.elapsed_ns > 0).then(|| self.busiest_key_ns as f64 / self.elapsed_ns as f64)
    }

    /// Add another phase's counts (exposure then weighs each by its wall time and keys).
    pub fn add(&mut self, o: &ResourceStats) {
        // Combine so that `exposure()` is the key-time weighted mean of the two.
        let (a, b) = (self.keys * self.elapsed_ns, o.keys * o.elapsed_ns);
        self.total.add(&o.total);
        self.counter_sum += o.counter_sum;
        self.busy_ns += o.busy_ns;
        self.busiest_key_ns = self.busiest_key_ns.max(o.busiest_key_ns);
        self.elapsed_ns += o.elapsed_ns;
        self.keys = if self.elapsed_ns > 0 { (a + b) / self.elapsed_ns } else { self.keys.max(o.keys) };
    }
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
    /// The holder's lease was already lost or past its validity when it entered.
    pub lease_lost: bool,
    /// Entered with a valid lease and a token not above an earlier section's.
    pub inversion: bool,
    /// Refused because of an earlier section's token while its lease was valid.
    pub legit_refused: bool,
}

impl Resource {
    pub fn new(keys: usize) -> Self {
        Resource {
            cells: (0..keys.max(1)).map(|_| Cell::default()).collect(),
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
    /// has one), as a holder whose lease is valid. Leave with [`Section::exit`] (or by
    /// dropping the section).
    pub fn enter(&self, key: usize, token: Option<FencingToken>) -> Section<'_> {
        self.enter_as(key, token, true)
    }

    /// Enter as the holder of `lease`: its token, and whether it was still valid (not lost,
    /// not past `valid_until`) as it entered.
    pub fn enter_lease(&self, key: usize, lease: &Lease) -> Section<'_> {
        self.enter_as(key, lease.token, !lease.is_lost())
    }

    /// Enter with an explicit token and lease validity.
    pub fn enter_as(&self, key: usize, token: Option<FencingToken>, lease_valid: bool) -> Section<'_> {
        let cell = &self.cells[key];
        let token = token.map(|t| t.0);
        let mut rec = SectionRecord { key, token, lease_lost: !lease_valid, ..Default::default() };
        let rank = {
            let mut st = cell.state.lock().unwrap();
            let now = self.now_ns();
            rec.enter_ns = now;
            st.entered += 1;
            let rank = st.entered;
            st.stats.sections += 1;
            rec.overlapped = st.inside > 0;
            if rec.overlapped {
                st.stats.overlaps += 1;
            } else {
                st.busy_since = Some(now);
            }
            st.inside += 1;
            if !lease_valid {
                st.stats.entered_expired += 1;
            }
            if let Some(t) = token {
                if lease_valid && st.max_entered.is_some_and(|(m, _)| t <= m) {
                    rec.inversion = true;
                    st.stats.token_inversions += 1;
                }
                if st.max_entered.is_none_or(|(m, _)| t > m) {
                    st.max_entered = Some((t, rank));
                }
            }
            rank
        };
        Section { cell, rank, fenced_read: None, exited: false, resource: self, rec }
    }

    pub fn cell_stats(&self, key: usize) -> CellStats {
        self.cells[key].state.lock().unwrap().stats
    }

    pub fn stats(&self) -> ResourceStats {
        let now = self.now_ns();
        let mut out = ResourceStats { keys: self.cells.len() as u64, elapsed_ns: now, ..Default::default() };
        for c in &self.cells {
            let st = c.state.lock().unwrap();
            out.total.add(&st.stats);
            out.counter_sum += st.plain;
            let busy = st.busy_ns + st.busy_since.map_or(0, |s| now.saturating_sub(s));
            out.busy_ns += busy;
            out.busiest_key_ns = out.busiest_key_ns.max(busy);
        }
        out
    }
}

/// An open critical section.
#[derive(Debug)]
pub struct Section<'a> {
    resource: &'a Resource,
    cell: &'a Cell,
    /// Rank in the cell's entry order.
    rank: u64,
    /// The fenced register's value at our read, unless the read was refused.
    fenced_read: Option<u64>,
    exited: bool,
    rec: SectionRecord,
}

impl Section<'_> {
    /// Present the token; true when it is stale. A refusal caused by a section that entered
    /// before this one, while this holder's lease was valid, refuses a legitimate holder.
    fn present(&mut self, st: &mut CellState) -> bool {
        let Some(t) = self.rec.token else { return false };
        let refuser = match st.max_token {
            Some((max, rank)) if t < max || (t == max && rank != self.rank) => Some(rank),
            _ => None,
        };
        match refuser {
            Some(rank) => {
                if !self.rec.stale {
                    self.rec.stale = true;
                    st.stats.stale_tokens += 1;
                    if rank < self.rank && !self.rec.lease_lost {
                        self.rec.legit_refused = true;
                        st.stats.legit_refused += 1;
                    }
                }
                true
            }
            None => {
                st.max_token = Some((t, self.rank));
                false
            }
        }
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
            let mut st = self.cell.state.lock().unwrap();
            let now = self.resource.now_ns();
            self.rec.exit_ns = now;
            st.inside -= 1;
            if st.inside == 0 {
                if let Some(since) = st.busy_since.take() {
                    st.busy_ns += now.saturating_sub(since);
                }
            }
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
        assert!(!ro.legit_refused && !ro.inversion, "the superseded holder is stale, not legitimate");
        assert!(!rn.stale && !rn.rejected && !rn.inversion);
        assert!(rn.read_seq < ro.write_seq);
        let st = r.stats();
        assert_eq!((st.total.lost_updates, st.total.lost_updates_fenced, st.total.rejected, st.total.stale_tokens), (1, 0, 1, 1));
    }

    /// A stale read is refused at once, so the stale section cannot clobber the fenced
    /// register even if the newer holder writes first.
    #[test]
    fn a_stale_read_is_refused() {
        let r = Resource::new(1);
        let mut old = section(&r, Some(8));
        let mut new = section(&r, Some(9));
        new.read();
        old.read();
        new.write_incremented();
        old.write_incremented();
        assert!(old.record().rejected && !old.record().legit_refused);
        drop((old, new));
        assert_eq!(r.stats().total.lost_updates_fenced, 0);
    }

    /// A token counter reset (a Redis restart without persistence): the next holder, its
    /// lease valid, presents a token below one seen before. The register refuses it, and that
    /// refusal is a legitimate holder refused, not a stale write caught.
    #[test]
    fn a_token_reset_refuses_a_legitimate_holder() {
        let r = Resource::new(1);
        let mut a = section(&r, Some(100));
        a.read();
        a.write_incremented();
        drop(a);
        let mut b = section(&r, Some(1));
        b.read();
        b.write_incremented();
        let rb = b.record();
        drop(b);
        assert!(rb.inversion && rb.legit_refused && rb.rejected);
        let st = r.stats().total;
        assert_eq!((st.token_inversions, st.legit_refused, st.rejected, st.stale_refused()), (1, 1, 1, 0));
    }

    /// A holder that entered with a lease it had already lost (granted after expiry) is not a
    /// legitimate holder: its refusal is a stale write caught, not an inversion.
    #[test]
    fn an_expired_lease_entering_late_is_stale_not_an_inversion() {
        let r = Resource::new(1);
        let mut a = r.enter_as(0, Some(FencingToken(11)), true);
        a.read();
        a.write_incremented();
        drop(a);
        let mut b = r.enter_as(0, Some(FencingToken(10)), false);
        b.read();
        let rb = b.record();
        drop(b);
        assert!(rb.lease_lost && rb.rejected && !rb.inversion && !rb.legit_refused);
        let st = r.stats().total;
        assert_eq!((st.token_inversions, st.legit_refused, st.stale_refused(), st.entered_expired), (0, 0, 1, 1));
    }

    /// Exposure adds up the time some holder was inside, overlaps counted once.
    #[test]
    fn exposure_counts_the_union_of_sections() {
        let r = Resource::new(2);
        let mut a = r.enter(0, None);
        std::thread::sleep(Duration::from_millis(20));
        let mut b = r.enter(0, None);
        std::thread::sleep(Duration::from_millis(20));
        a.exit();
        b.exit();
        let busy = {
            let st = r.stats();
            st.busy_ns
        };
        let inside = b.record().exit_ns - a.record().enter_ns;
        assert_eq!(busy, inside, "the union of two overlapping sections, once");
        drop((a, b));
        std::thread::sleep(Duration::from_millis(20));
        let st = r.stats();
        let e = st.exposure().unwrap();
        // One key of two was busy for `inside` out of `elapsed`.
        let want = inside as f64 / (2.0 * st.elapsed_ns as f64);
        assert!((e - want).abs() < 1e-9, "{e} vs {want}");
        assert!(e < 0.5 && st.busiest_key_exposure().unwrap() > e);
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
        assert!(b.record().inversion && b.record().legit_refused, "a repeated token is an inversion");
    }
}
