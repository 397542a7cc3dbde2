//! The history: every operation's invocation and completion, every critical section as the
//! resource saw it, and every nemesis event, streamed to `history.jsonl` as the run goes.
//!
//! Jepsen's vocabulary: an operation is invoked by a process and completes `ok`, `fail`
//! (definitely no effect) or `info` (unknown). Times are monotonic nanoseconds since the
//! segment's start. A `meta` record opens a segment (one backend, one workload); records
//! after it belong to it. Lines are appended to in-memory shards and written by a flusher
//! thread every 50 ms, so a killed run leaves a readable prefix (a reader skips a torn last
//! line).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The error an acquire ends with when the run was interrupted or the phase's drain bound
/// passed: recorded as `info` (its outcome is unknown), and recognised by the checkers as
/// cut short by dlbench, not failed by the lock.
pub const CANCELLED: &str = "cancelled: the run was interrupted or the phase's drain bound passed";

/// What a segment is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub backend: String,
    pub workload: String,
    pub keys: Vec<String>,
    /// Lock TTL in milliseconds: how long an unknown acquire may hold the lock.
    pub ttl_ms: u64,
    /// The backend hands out fencing tokens.
    pub fencing_tokens: bool,
    /// Wall-clock time of the segment's start (RFC 3339).
    pub started_at: String,
    /// A failed acquire can leave claims that block others without holding the lock: the
    /// independent nodes of an AP design (Redlock's split vote). Elsewhere only a holder,
    /// or an acquire whose outcome is unknown, can refuse another client.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split_votes: bool,
    /// What the servers grant for `ttl_ms` (asked of them when the segment opened): etcd rounds
    /// up to seconds and has a minimum, ZooKeeper negotiates its session timeout, advisory and
    /// `GET_LOCK` locks have none. Absent in histories that predate it or when the servers did
    /// not answer; `ttl_ms` stands in then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_ttl: Option<dlbench_core::GrantedTtl>,
    /// A scenario's choreography (a holder paused, a node restarted on cue): its faults are
    /// the script's, judged by the scenario's expectation, never a test of availability.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub choreographed: bool,
    /// What the servers need after a fault heals, besides the TTL, before they can grant
    /// again (an election, a restart): recovery is judged only past the TTL and this.
    /// Absent in histories that predate it (the TTL alone then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_allowance_ms: Option<u64>,
}

impl Meta {
    /// How long past its end an acquire of unknown outcome may hold the lock, in nanoseconds:
    /// the granted TTL, else the requested one; `None` when the lock has no TTL at all (it
    /// lives while its connection does, so no window bounds it).
    pub fn window_ns(&self) -> Option<u64> {
        match self.granted_ttl {
            Some(g) => g.ms().map(|ms| ms * 1_000_000),
            None => Some(self.ttl_ms * 1_000_000),
        }
    }

    /// The phase this segment belongs to: its backend and its first key (a phase's keys are
    /// named after its run, workload, sweep point and repeat, so no two phases share one).
    /// Checks are paired with phases by it, never by position.
    pub fn phase_id(&self) -> String {
        phase_id(&self.backend, self.keys.first().map(String::as_str).unwrap_or(""))
    }
}

/// See [`Meta::phase_id`].
pub fn phase_id(backend: &str, first_key: &str) -> String {
    format!("{backend}/{first_key}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Acquire,
    Release,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    Meta(Meta),
    Invoke {
        p: u64,
        f: Op,
        key: u32,
        ns: u64,
    },
    Ok {
        p: u64,
        f: Op,
        key: u32,
        ns: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
        /// A polling acquire: when the attempt that was granted was sent (its earlier
        /// attempts were refused, so it held nothing before). Absent where the grant's claim
        /// began at the invocation (a queue, a session) or in histories that predate it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u64>,
    },
    Fail {
        p: u64,
        f: Op,
        key: u32,
        ns: u64,
        error: String,
        /// The error's kind (`timeout`, `busy`, `unavailable`, ...): `timeout` and `busy` say
        /// the lock was held by someone else.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
    Info {
        p: u64,
        f: Op,
        key: u32,
        ns: u64,
        error: String,
    },
    /// A critical section as the resource saw it (see `dlbench_core::SectionRecord`).
    Section {
        p: u64,
        key: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
        enter: u64,
        exit: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_seq: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        write_seq: Option<u64>,
        /// The holder's lease was already lost (or past its validity) when it entered.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lease_lost: bool,
        /// Which protected register the section read and wrote: 0 for a run's own; in a
        /// merge of shards, the shard's index (each shard's resource is its own register,
        /// so its sequence numbers are replayed apart from the others').
        #[serde(default, skip_serializing_if = "is_zero")]
        register: u32,
    },
    /// A fault starting or ending.
    Nemesis {
        f: String,
        /// `start`, `end` or `skipped`.
        phase: crate::faultlog::Mark,
        targets: Vec<String>,
        ns: u64,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
        /// Whether it took effect (histories written before it read their `detail`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effect: Option<crate::faultlog::Effect>,
        /// Which side it acted on (histories written before it read the fault's name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<crate::faultlog::Side>,
        /// The node hit in place of the one the fault names, and why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stand_in: Option<String>,
    },
    /// The run was interrupted (Ctrl-C) at `ns`: operations in flight were cancelled (their
    /// `info` says so) and the segment ends early. `check` judges what completed and says
    /// "interrupted".
    Interrupted {
        ns: u64,
    },
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Record {
    /// Set the register a section worked on (merging shards).
    pub fn set_register(&mut self, r: u32) {
        if let Record::Section { register, .. } = self {
            *register = r;
        }
    }

    /// Move the record's times `by` nanoseconds later (merging shards onto one time line).
    pub fn shift(&mut self, by: u64) {
        match self {
            Record::Invoke { ns, .. }
            | Record::Ok { ns, .. }
            | Record::Fail { ns, .. }
            | Record::Info { ns, .. }
            | Record::Nemesis { ns, .. }
            | Record::Interrupted { ns } => *ns += by,
            Record::Section { enter, exit, .. } => {
                *enter += by;
                *exit += by;
            }
            Record::Meta(_) => {}
        }
    }

    /// A section's entry time.
    pub fn section_enter(&self) -> Option<u64> {
        match self {
            Record::Section { enter, .. } => Some(*enter),
            _ => None,
        }
    }

    pub fn ns(&self) -> Option<u64> {
        match self {
            Record::Meta(_) => None,
            Record::Invoke { ns, .. }
            | Record::Ok { ns, .. }
            | Record::Fail { ns, .. }
            | Record::Info { ns, .. }
            | Record::Nemesis { ns, .. }
            | Record::Interrupted { ns } => Some(*ns),
            Record::Section { exit, .. } => Some(*exit),
        }
    }

    /// Client `p`'s critical section as the resource recorded it.
    pub fn section(p: u64, rec: &dlbench_core::SectionRecord) -> Record {
        Record::Section {
            p,
            key: rec.key as u32,
            token: rec.token,
            enter: rec.enter_ns,
            exit: rec.exit_ns,
            read_seq: rec.read_seq,
            read: rec.read_value,
            write_seq: rec.write_seq,
            lease_lost: rec.lease_lost,
            register: 0,
        }
    }

    /// The completion of `p`'s operation: `ok` (with the token of an acquire), `fail` when
    /// the error says the operation had no effect, `info` when its outcome is unknown.
    pub fn completion(p: u64, f: Op, key: u32, ns: u64, r: Result<Option<u64>, &dlbench_core::LockError>) -> Record {
        match r {
            Ok(token) => Record::Ok { p, f, key, ns, token, attempt: None },
            Err(e) if e.is_definite() => Record::Fail { p, f, key, ns, error: e.to_string(), kind: Some(e.kind().to_string()) },
            Err(e) => Record::Info { p, f, key, ns, error: e.to_string() },
        }
    }
}

/// One backend x workload part of a history.
#[derive(Debug, Clone, Default)]
pub struct Segment {
    pub meta: Option<Meta>,
    pub records: Vec<Record>,
}

const SHARDS: usize = 8;
/// Writers wait (asynchronously) while this much is buffered and not yet on disk.
const HIGH_WATER: usize = 16 << 20;

struct Inner {
    shards: Vec<Mutex<Vec<u8>>>,
    buffered: AtomicUsize,
    closed: AtomicBool,
    wake: (Mutex<()>, Condvar),
}

/// Appends history lines; cheap to clone. Dropping the last clone does not flush: call
/// [`HistoryWriter::close`].
#[derive(Clone)]
pub struct HistoryWriter {
    inner: Arc<Inner>,
    flusher: Arc<Mutex<Option<std::thread::JoinHandle<std::io::Result<()>>>>>,
}

impl HistoryWriter {
    /// Create (or append to) `path` and start the flusher thread.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let inner = Arc::new(Inner {
            shards: (0..SHARDS).map(|_| Mutex::new(Vec::with_capacity(1 << 16))).collect(),
            buffered: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
        });
        let i2 = inner.clone();
        let handle = std::thread::Builder::new().name("dlbench-history".into()).spawn(move || flush_loop(i2, file))?;
        Ok(HistoryWriter { inner, flusher: Arc::new(Mutex::new(Some(handle))) })
    }

    /// Append one record, formatted by `f` (which writes one JSON object, no newline),
    /// into the shard of process `p`.
    pub fn append(&self, p: u64, f: impl FnOnce(&mut Vec<u8>)) {
        let mut buf = self.inner.shards[p as usize % SHARDS].lock().unwrap();
        let before = buf.len();
        f(&mut buf);
        buf.push(b'\n');
        self.inner.buffered.fetch_add(buf.len() - before, Ordering::Relaxed);
    }

    pub fn record(&self, r: &Record) {
        let p = match r {
            Record::Invoke { p, .. } | Record::Ok { p, .. } | Record::Fail { p, .. } | Record::Info { p, .. } | Record::Section { p, .. } => *p,
            _ => 0,
        };
        self.append(p, |b| serde_json::to_writer(b, r).expect("history records serialize"));
    }

    /// Wait while the flusher is far behind: history is never dropped, so a driver faster
    /// than the disk slows down instead.
    pub async fn backpressure(&self) {
        while self.inner.buffered.load(Ordering::Relaxed) > HIGH_WATER {
            self.inner.wake.1.notify_one();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Wait until everything appended so far is on disk. A new segment's `meta` must not
    /// overtake the previous segment's last records, which sit in other shards.
    pub async fn sync(&self) {
        while self.inner.buffered.load(Ordering::SeqCst) > 0 {
            self.inner.wake.1.notify_one();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Flush everything and stop the flusher.
    pub fn close(&self) -> std::io::Result<()> {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.1.notify_one();
        if let Some(h) = self.flusher.lock().unwrap().take() {
            return h.join().unwrap_or_else(|_| Err(std::io::Error::other("history flusher panicked")));
        }
        Ok(())
    }
}

fn flush_loop(inner: Arc<Inner>, file: File) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut spare = Vec::with_capacity(1 << 16);
    loop {
        let closing = inner.closed.load(Ordering::SeqCst);
        for s in &inner.shards {
            {
                let mut g = s.lock().unwrap();
                std::mem::swap(&mut *g, &mut spare);
            }
            if !spare.is_empty() {
                out.write_all(&spare)?;
                inner.buffered.fetch_sub(spare.len(), Ordering::Relaxed);
                spare.clear();
            }
        }
        out.flush()?;
        if closing {
            return Ok(());
        }
        let g = inner.wake.0.lock().unwrap();
        let _ = inner.wake.1.wait_timeout(g, Duration::from_millis(50)).unwrap();
    }
}

/// Read a history file into segments. A torn last line (a killed writer) is skipped; any
/// other bad line is an error naming its line number.
pub fn read(path: &Path) -> anyhow::Result<Vec<Segment>> {
    let mut out = Vec::new();
    for_each_segment(path, |s| out.push(s))?;
    Ok(out)
}

/// Stream a history file one segment at a time (a segment in memory at once: for checking a
/// long history use [`for_each_record`], which holds one record).
pub fn for_each_segment(path: &Path, mut f: impl FnMut(Segment)) -> anyhow::Result<()> {
    let mut current: Option<Segment> = None;
    for_each_record(path, |rec| match rec {
        Record::Meta(m) => {
            if let Some(s) = current.take() {
                f(s);
            }
            current = Some(Segment { meta: Some(m), records: Vec::new() });
        }
        r => current.get_or_insert_with(Segment::default).records.push(r),
    })?;
    if let Some(s) = current {
        f(s);
    }
    Ok(())
}

/// What reading a history file found: how many records, and whether its last line was cut
/// (a writer killed mid-line) and ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCount {
    pub records: u64,
    pub torn_tail: bool,
}

/// Stream a history file record by record. A torn last line (a killed writer) is skipped and
/// said in the count; any other bad line is an error naming its line number.
pub fn for_each_record(path: &Path, mut f: impl FnMut(Record)) -> anyhow::Result<ReadCount> {
    let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot read history {}: {e}", path.display()))?;
    let mut lines = BufReader::with_capacity(1 << 20, file).lines().enumerate().peekable();
    let mut read = ReadCount::default();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(|e| anyhow::anyhow!("{} line {}: {e}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(r) => {
                read.records += 1;
                f(r)
            }
            Err(_) if lines.peek().is_none() => {
                read.torn_tail = true;
                break;
            }
            Err(e) => anyhow::bail!("{} line {}: not a history record: {e}", path.display(), i + 1),
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_skipped() {
        let dir = std::env::temp_dir().join(format!("dlbench-hist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("history.jsonl");
        let _ = std::fs::remove_file(&p);
        let w = HistoryWriter::create(&p).unwrap();
        let meta = Meta {
            backend: "etcd".into(),
            workload: "hot-key".into(),
            keys: vec!["k0".into()],
            ttl_ms: 10_000,
            fencing_tokens: true,
            started_at: "now".into(),
            split_votes: false,
            granted_ttl: Some(dlbench_core::GrantedTtl::Session { ms: 10_000 }),
            choreographed: false,
            recovery_allowance_ms: Some(3000),
        };
        w.record(&Record::Meta(meta.clone()));
        w.record(&Record::Invoke { p: 1, f: Op::Acquire, key: 0, ns: 10 });
        w.record(&Record::Ok { p: 1, f: Op::Acquire, key: 0, ns: 20, token: Some(5), attempt: None });
        w.record(&Record::Info { p: 2, f: Op::Acquire, key: 0, ns: 30, error: "timed \"out\"".into() });
        w.close().unwrap();
        assert_eq!(for_each_record(&p, |_| ()).unwrap(), ReadCount { records: 4, torn_tail: false });
        std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"{\"type\":\"invo").unwrap();
        assert_eq!(for_each_record(&p, |_| ()).unwrap(), ReadCount { records: 4, torn_tail: true });
        let segs = read(&p).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].meta.as_ref(), Some(&meta));
        assert_eq!(segs[0].records.len(), 3);
        assert!(matches!(&segs[0].records[2], Record::Info { error, .. } if error == "timed \"out\""));
        let _ = std::fs::remove_dir_all(dir);
    }
}
