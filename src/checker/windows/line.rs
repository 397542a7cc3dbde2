//! The windows' time line: counts and times in buckets of at least 10 ms, so a phase of
//! any length is swept in bounded memory.

const MS: u64 = 1_000_000;
/// The most buckets a time line keeps (a 24-hour segment: 0.43 s each).
pub const BUCKETS: u64 = 200_000;
const MIN_WIDTH: u64 = 10 * MS;

/// A time line in buckets.
pub(super) struct Line {
    pub(super) width: u64,
    pub(super) grants: Vec<u32>,
    pub(super) refused: Vec<u32>,
    pub(super) sections: Vec<u32>,
    pub(super) overlaps: Vec<u32>,
    pub(super) steps_back: Vec<u32>,
    /// Nanoseconds some holder was inside, summed over keys.
    pub(super) inside: Vec<u64>,
    /// Nanoseconds some client was waiting on an acquire (any key).
    pub(super) asking: Vec<u64>,
    /// Acquires invoked.
    pub(super) attempts: Vec<u32>,
}

impl Line {
    pub(super) fn new(end_ns: u64) -> Line {
        let width = (end_ns / BUCKETS + 1).max(MIN_WIDTH);
        let n = (end_ns / width + 2) as usize;
        Line { width, grants: vec![0; n], refused: vec![0; n], sections: vec![0; n], overlaps: vec![0; n], steps_back: vec![0; n], inside: vec![0; n], asking: vec![0; n], attempts: vec![0; n] }
    }

    pub(super) fn at(&self, t: u64) -> usize {
        ((t / self.width) as usize).min(self.grants.len() - 1)
    }

    /// Add `[a, b)` to a time line (inside, asking), bucket by bucket.
    pub(super) fn add_time(line: &mut [u64], width: u64, a: u64, b: u64) {
        let mut t = a;
        while t < b {
            let i = ((t / width) as usize).min(line.len() - 1);
            let edge = ((i as u64 + 1) * width).min(b).max(t + 1);
            line[i] += edge - t;
            t = edge;
        }
    }

    /// The sum of `v` over `[a, b)`, buckets cut by the interval counted pro rata.
    pub(super) fn sum<T: Copy + Into<f64>>(&self, v: &[T], a: u64, b: u64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let (i, j) = (self.at(a), self.at(b.saturating_sub(1)));
        let mut s = 0.0;
        for k in i..=j {
            let (lo, hi) = (k as u64 * self.width, (k as u64 + 1) * self.width);
            let part = (hi.min(b) - lo.max(a)) as f64 / self.width as f64;
            s += v[k].into() * part;
        }
        s
    }

    /// The end of the last bucket in `[a, b)` that holds a grant (cut to `b`).
    pub(super) fn last_grant_end(&self, a: u64, b: u64) -> Option<u64> {
        if b <= a {
            return None;
        }
        (self.at(a)..=self.at(b - 1)).rev().find(|&k| self.grants[k] > 0).map(|k| ((k as u64 + 1) * self.width).min(b).max(a))
    }

    /// The share of `[a, b)` a second holder would have been seen in: the time holders were
    /// inside (per key), and within each silence of at least `silence` (no grant at all: a
    /// frozen server, a dead one, its thaw a moment before the fault's stamp) the time some
    /// client was kept waiting, where that is more (a wrong grant would have gone to one of
    /// them). The short gaps between grants of a working lock are not silences: there only
    /// the holders count. Buckets cut pro rata.
    pub(super) fn covered(&self, a: u64, b: u64, nkeys: f64, silence: u64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let (i, j) = (self.at(a), self.at(b.saturating_sub(1)));
        // Each bucket's run of grant-free buckets, by its length in time.
        let mut silent = vec![false; j - i + 1];
        let mut k = i;
        while k <= j {
            if self.grants[k] > 0 {
                k += 1;
                continue;
            }
            let from = k;
            while k <= j && self.grants[k] == 0 {
                k += 1;
            }
            let long = ((k - from) as u64 * self.width) >= silence;
            silent[from - i..k - i].iter_mut().for_each(|x| *x = long);
        }
        let t: f64 = (i..=j)
            .map(|k| {
                let (lo, hi) = (k as u64 * self.width, (k as u64 + 1) * self.width);
                let part = (hi.min(b) - lo.max(a)) as f64 / self.width as f64;
                let inside = self.inside[k] as f64 / nkeys;
                let held = if silent[k - i] { inside.max(self.asking[k] as f64) } else { inside };
                held.min(self.width as f64) * part
            })
            .sum();
        (t / (b - a) as f64).min(1.0)
    }

    /// Time on a time line (inside, asking) within `[a, b)`, buckets cut pro rata.
    pub(super) fn sum_time(&self, line: &[u64], a: u64, b: u64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let (i, j) = (self.at(a), self.at(b.saturating_sub(1)));
        (i..=j)
            .map(|k| {
                let (lo, hi) = (k as u64 * self.width, (k as u64 + 1) * self.width);
                line[k] as f64 * (hi.min(b) - lo.max(a)) as f64 / self.width as f64
            })
            .sum()
    }
}
