//! The FIFO check: grants that jump a key's queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Per-key arrival order, to count grants that jump the queue.
///
/// A grant is out of order when its client arrived after the key's previous grant while
/// another client, which was already waiting before that grant, is still waiting: a FIFO
/// lock hands the key to the oldest waiter. Arrival is when the client called acquire, so a
/// waiter that called within one round trip of the previous grant may not have reached the
/// server yet; requiring it to have waited since before that grant keeps that race small.
pub(super) struct FifoTracker {
    keys: Vec<Mutex<KeyQueue>>,
    violations: AtomicU64,
}

#[derive(Default)]
struct KeyQueue {
    waiting: HashMap<usize, Instant>,
    last_grant: Option<Instant>,
}

impl FifoTracker {
    pub(super) fn new(keys: usize) -> Self {
        FifoTracker { keys: (0..keys).map(|_| Mutex::default()).collect(), violations: AtomicU64::new(0) }
    }
    pub(super) fn arrive(&self, key: usize, client: usize, at: Instant) {
        self.keys[key].lock().unwrap().waiting.insert(client, at);
    }
    pub(super) fn leave(&self, key: usize, client: usize) {
        self.keys[key].lock().unwrap().waiting.remove(&client);
    }
    pub(super) fn granted(&self, key: usize, client: usize, arrived: Instant) {
        let mut q = self.keys[key].lock().unwrap();
        q.waiting.remove(&client);
        if let Some(prev) = q.last_grant {
            if arrived > prev && q.waiting.values().any(|&w| w < prev) {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
        }
        q.last_grant = Some(Instant::now());
    }
    /// Grants out of order so far.
    pub(super) fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fifo_tracker_counts_a_late_arrival_served_first() {
        let f = FifoTracker::new(1);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        f.arrive(0, 1, at(0));
        f.arrive(0, 2, at(0)); // 2 queues behind 1
        f.granted(0, 1, at(0)); // 1 is served first: in order
        assert_eq!(f.violations.load(Ordering::Relaxed), 0);
        std::thread::sleep(Duration::from_millis(2));
        f.arrive(0, 1, Instant::now()); // 1 comes back after its grant
        f.granted(0, 1, Instant::now()); // ...and barges in ahead of 2: out of order
        assert_eq!(f.violations.load(Ordering::Relaxed), 1);
        f.granted(0, 2, at(0));
        assert_eq!(f.violations.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn fifo_tracker_accepts_arrival_order() {
        let f = FifoTracker::new(1);
        let t0 = Instant::now();
        f.arrive(0, 1, t0);
        f.arrive(0, 2, t0 + Duration::from_millis(1));
        f.granted(0, 1, t0);
        f.granted(0, 2, t0 + Duration::from_millis(1));
        f.arrive(0, 1, Instant::now());
        f.granted(0, 1, Instant::now());
        assert_eq!(f.violations.load(Ordering::Relaxed), 0);
    }
}
