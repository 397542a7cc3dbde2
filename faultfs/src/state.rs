//! What the file system holds between requests: the inodes the kernel knows, the open
//! handles, and every file's unsynced writes; and the two ends of a mount's life (power loss
//! and a clean stop).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use fuser::{Errno, FileType};

use crate::backing;
use crate::content::Content;

/// A backing inode's identity: (device, inode number).
pub type Key = (u64, u64);

#[derive(Debug)]
pub struct Node {
    pub fd: OwnedFd,
    pub key: Key,
    lookups: u64,
}

#[derive(Debug)]
pub struct Handle {
    pub key: Key,
    /// Opened with O_SYNC or O_DSYNC: every write is made durable before it returns.
    pub sync: bool,
}

/// What a power loss (or a clean stop) did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Files that had unsynced writes.
    pub files: u64,
    /// Their unsynced bytes (dirty pages).
    pub bytes: u64,
}

#[derive(Debug)]
pub struct State {
    nodes: HashMap<u64, Node>,
    by_key: HashMap<Key, u64>,
    next_ino: u64,
    /// Keyed by the backing inode, not the FUSE one: the kernel may forget an inode and look
    /// it up again while its unsynced writes must live on.
    contents: HashMap<Key, Content>,
    handles: HashMap<u64, Handle>,
    dirs: HashMap<u64, Vec<(u64, FileType, OsString)>>,
    next_fh: u64,
    /// Set by a power loss or a stop: nothing reaches BACKING after it.
    pub dead: bool,
}

pub fn key_of(st: &libc::stat) -> Key {
    (st.st_dev, st.st_ino)
}

impl State {
    pub fn new(root: OwnedFd) -> io::Result<Self> {
        let key = key_of(&backing::stat_fd(root.as_raw_fd())?);
        let mut nodes = HashMap::new();
        // The root is never forgotten: one lookup that no forget balances.
        nodes.insert(1, Node { fd: root, key, lookups: 1 });
        Ok(Self {
            nodes,
            by_key: HashMap::from([(key, 1)]),
            next_ino: 2,
            contents: HashMap::new(),
            handles: HashMap::new(),
            dirs: HashMap::new(),
            next_fh: 1,
            dead: false,
        })
    }

    pub fn node(&self, ino: u64) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub fn fd(&self, ino: u64) -> Result<RawFd, Errno> {
        Ok(self.node(ino)?.fd.as_raw_fd())
    }

    /// Counts one kernel lookup of the backing inode `fd` points at; returns its FUSE inode.
    pub fn remember(&mut self, fd: OwnedFd, st: &libc::stat) -> u64 {
        let key = key_of(st);
        if let Some(&ino) = self.by_key.get(&key) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.lookups += 1;
                return ino;
            }
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Node { fd, key, lookups: 1 });
        self.by_key.insert(key, ino);
        ino
    }

    pub fn forget(&mut self, ino: u64, n: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else { return };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 || ino == 1 {
            return;
        }
        let key = node.key;
        self.nodes.remove(&ino);
        self.by_key.remove(&key);
        // A clean file's contents are all in BACKING; a dirty one's must outlive the inode.
        if self.contents.get(&key).is_some_and(|c| !c.is_dirty()) {
            self.contents.remove(&key);
        }
    }

    /// The contents of the regular file `ino`, opening its backing copy the first time.
    pub fn content(&mut self, ino: u64) -> Result<&mut Content, Errno> {
        let (key, fd) = {
            let node = self.node(ino)?;
            (node.key, node.fd.as_raw_fd())
        };
        if !self.contents.contains_key(&key) {
            let file = backing::reopen(fd, libc::O_RDWR)?;
            self.contents.insert(key, Content::open(file)?);
        }
        Ok(self.contents.get_mut(&key).expect("inserted above"))
    }

    /// Adopts a file just created (its descriptor doubles as the backing copy).
    pub fn adopt(&mut self, key: Key, file: std::fs::File) -> Result<(), Errno> {
        if !self.contents.contains_key(&key) {
            self.contents.insert(key, Content::open(file)?);
        }
        Ok(())
    }

    /// The size the servers see for `key`, where it differs from BACKING's.
    pub fn size_of(&self, key: Key) -> Option<u64> {
        self.contents.get(&key).map(Content::size)
    }

    pub fn open_handle(&mut self, key: Key, sync: bool) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, Handle { key, sync });
        fh
    }

    pub fn handle(&self, fh: u64) -> Result<&Handle, Errno> {
        self.handles.get(&fh).ok_or(Errno::EBADF)
    }

    pub fn close_handle(&mut self, fh: u64) {
        self.handles.remove(&fh);
    }

    pub fn content_by_key(&mut self, key: Key) -> Result<&mut Content, Errno> {
        self.contents.get_mut(&key).ok_or(Errno::EBADF)
    }

    pub fn open_dir(&mut self, ino: u64) -> Result<u64, Errno> {
        let entries = backing::list_dir(&self.node(ino)?.fd)?;
        let fh = self.next_fh;
        self.next_fh += 1;
        self.dirs.insert(fh, entries);
        Ok(fh)
    }

    pub fn dir(&self, fh: u64) -> Result<&[(u64, FileType, OsString)], Errno> {
        self.dirs.get(&fh).map(Vec::as_slice).ok_or(Errno::EBADF)
    }

    pub fn close_dir(&mut self, fh: u64) {
        self.dirs.remove(&fh);
    }

    /// The power loss: every unsynced write is dropped; BACKING keeps what was durable.
    /// With `keep_unsynced` (the deliberately wrong layer the tests must catch) they are
    /// written to BACKING instead.
    pub fn power_loss(&mut self, keep_unsynced: bool) -> Outcome {
        self.dead = true;
        let mut outcome = Outcome::default();
        for (_, mut content) in self.contents.drain() {
            if content.is_dirty() {
                outcome.files += 1;
                outcome.bytes += content.unsynced_bytes();
                if keep_unsynced {
                    let _ = content.sync();
                }
            }
        }
        outcome
    }

    /// An orderly shutdown syncs like an operating system does before it powers off.
    pub fn stop(&mut self) -> io::Result<Outcome> {
        self.dead = true;
        let mut outcome = Outcome::default();
        for (_, mut content) in self.contents.drain() {
            if content.is_dirty() {
                outcome.files += 1;
                outcome.bytes += content.sync()?;
            }
        }
        Ok(outcome)
    }
}
