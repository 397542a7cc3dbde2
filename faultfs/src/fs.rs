//! The FUSE file system: BACKING mirrored at the mount point, file data held back until it
//! is synced.
//!
//! What is held back, and why: file *data* (write, pwrite, append, a truncate, fallocate's new
//! size, the pages an mmap dirties) stays in memory until the file's fsync / fdatasync (msync
//! arrives as one), or goes down at once for a handle opened O_SYNC / O_DSYNC. Names (create,
//! mkdir, rename, link, unlink, rmdir, symlink) and attributes (chmod, chown, times) go to
//! BACKING at once: this is LazyFS's model too (its cache holds pages, not the namespace),
//! and it is the kind of loss a journaling file system gives: after a crash a file renamed
//! into place without an fsync of its data exists but is empty (ext4 without auto_da_alloc,
//! XFS). A layer that also lost un-fsynced names would be harsher; this one does not.
//!
//! The kernel side: no direct_io and no writeback cache. Every write(2) therefore reaches
//! this daemon before it returns (so nothing unsynced hides in the kernel), the kernel page
//! cache stays coherent with writes (bbolt reads its file through a read-only mmap while it
//! writes it with pwrite), and a shared writable mmap works: its dirty pages come here as
//! writes when the kernel writes them back, and msync(MS_SYNC) sends them then an fsync.
//! syncfs(2) and sync(2) never reach a FUSE daemon (the kernel forwards syncfs to virtiofs
//! only), so they make nothing durable here: only a file's own fsync does.

use std::ffi::{CString, OsStr};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::backing::{self, cstr};
use crate::state::{key_of, Outcome, State};

/// How long the kernel may cache names and attributes. Only this mount changes BACKING
/// while it is mounted, so a short cache is safe.
const TTL: Duration = Duration::from_secs(1);

/// The file system and the handle a controller keeps to end it.
#[derive(Debug, Clone)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
    keep_unsynced: bool,
}

impl FaultFs {
    /// `keep_unsynced` builds the wrong layer on purpose: a power loss writes the unsynced
    /// data to BACKING instead of dropping it (the tests show they catch it).
    pub fn new(backing_root: &std::path::Path, keep_unsynced: bool) -> std::io::Result<Self> {
        let root = backing::open_path_at(libc::AT_FDCWD, &cstr(backing_root.as_os_str())?)?;
        let state = State::new(root)?;
        Ok(Self { state: Arc::new(Mutex::new(state)), keep_unsynced })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lock on the state, refused once the power is gone.
    fn live(&self) -> Result<MutexGuard<'_, State>, Errno> {
        let state = self.lock();
        if state.dead {
            return Err(Errno::EIO);
        }
        Ok(state)
    }

    pub fn power_loss(&self) -> Outcome {
        self.lock().power_loss(self.keep_unsynced)
    }

    pub fn stop(&self) -> std::io::Result<Outcome> {
        self.lock().stop()
    }

    fn attr_of(state: &State, ino: u64) -> Result<fuser::FileAttr, Errno> {
        let node = state.node(ino)?;
        let st = backing::stat_fd(node.fd.as_raw_fd())?;
        let size = state.size_of(node.key).unwrap_or(st.st_size as u64);
        Ok(backing::attr(ino, &st, size))
    }

    /// Counts a lookup of `name` in `parent` and returns its attributes.
    fn entry(state: &mut State, parent: u64, name: &OsStr) -> Result<fuser::FileAttr, Errno> {
        let dir = state.fd(parent)?;
        let name = cstr(name)?;
        let st = backing::stat_at(dir, &name, 0)?;
        let fd = backing::open_path_at(dir, &name)?;
        let ino = state.remember(fd, &st);
        Self::attr_of(state, ino)
    }

    fn lookup_entry(&self, parent: INodeNo, name: &OsStr) -> Result<fuser::FileAttr, Errno> {
        Self::entry(&mut *self.live()?, parent.0, name)
    }

    /// Makes a node with `make`, gives it to the caller's user, and looks it up.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        make: impl FnOnce(i32, &CString) -> std::io::Result<()>,
    ) -> Result<fuser::FileAttr, Errno> {
        let mut state = self.live()?;
        let dir = state.fd(parent.0)?;
        let cname = cstr(name)?;
        make(dir, &cname)?;
        backing::chown_at(dir, &cname, req.uid(), req.gid())?;
        Self::entry(&mut state, parent.0, name)
    }

    fn set_attrs(
        &self,
        ino: u64,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        size: Option<u64>,
        times: (Option<TimeOrNow>, Option<TimeOrNow>),
        fh: Option<FileHandle>,
    ) -> Result<fuser::FileAttr, Errno> {
        let mut state = self.live()?;
        let fd = state.fd(ino)?;
        if let Some(mode) = mode {
            backing::chmod_fd(fd, mode)?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            backing::chown_fd(fd, owner.0, owner.1)?;
        }
        if let Some(size) = size {
            let sync = match fh {
                Some(fh) => state.handle(fh.0).map(|h| h.sync).unwrap_or(false),
                None => false,
            };
            let content = state.content(ino)?;
            content.truncate(size);
            if sync {
                content.sync()?;
            }
        }
        if times.0.is_some() || times.1.is_some() {
            backing::utimes_fd(fd, times.0, times.1)?;
        }
        Self::attr_of(&state, ino)
    }

    fn do_open(&self, ino: u64, flags: i32) -> Result<u64, Errno> {
        let mut state = self.live()?;
        let key = state.node(ino)?.key;
        let content = state.content(ino)?;
        if flags & libc::O_TRUNC != 0 {
            content.truncate(0);
        }
        Ok(state.open_handle(key, flags & libc::O_DSYNC != 0))
    }

    fn do_create(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(fuser::FileAttr, u64), Errno> {
        let mut state = self.live()?;
        let dir = state.fd(parent)?;
        let cname = cstr(name)?;
        let (file, created) = backing::create_at(dir, &cname, flags, mode)?;
        if created {
            backing::chown_at(dir, &cname, req.uid(), req.gid())?;
        }
        let st = backing::stat_fd(file.as_raw_fd())?;
        state.adopt(key_of(&st), file)?;
        let attr = Self::entry(&mut state, parent, name)?;
        if flags & libc::O_TRUNC != 0 {
            state.content(attr.ino.0)?.truncate(0);
        }
        let fh = state.open_handle(key_of(&st), flags & libc::O_DSYNC != 0);
        Ok((Self::attr_of(&state, attr.ino.0)?, fh))
    }

    fn do_write(&self, fh: u64, off: u64, data: &[u8], flags: i32) -> Result<u32, Errno> {
        let mut state = self.live()?;
        let handle = state.handle(fh)?;
        let (key, sync) = (handle.key, handle.sync || flags & libc::O_DSYNC != 0);
        let content = state.content_by_key(key)?;
        content.write(off, data)?;
        if sync {
            content.sync()?;
        }
        Ok(data.len() as u32)
    }

    fn do_fsync(&self, ino: u64) -> Result<(), Errno> {
        let mut state = self.live()?;
        state.content(ino)?.sync()?;
        Ok(())
    }

    fn do_fallocate(&self, fh: u64, off: u64, len: u64, mode: i32) -> Result<(), Errno> {
        let mut state = self.live()?;
        let key = state.handle(fh)?.key;
        let content = state.content_by_key(key)?;
        let end = off + len;
        match mode {
            0 => {
                if end > content.size() {
                    content.truncate(end);
                }
            }
            libc::FALLOC_FL_KEEP_SIZE => {}
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                let end = end.min(content.size());
                if end > off {
                    content.write(off, &vec![0; (end - off) as usize])?;
                }
            }
            _ => return Err(Errno::from_i32(libc::EOPNOTSUPP)),
        }
        Ok(())
    }
}

fn reply_entry(reply: ReplyEntry, result: Result<fuser::FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_attr(reply: ReplyAttr, result: Result<fuser::FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.attr(&TTL, &attr),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply_entry(reply, self.lookup_entry(parent, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.live().and_then(|s| Self::attr_of(&s, ino.0)));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply_attr(reply, self.set_attrs(ino.0, mode, (uid, gid), size, (atime, mtime), fh));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = self.live().and_then(|s| Ok(backing::readlink_fd(s.fd(ino.0)?)?));
        match result {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let make = |dir, name: &CString| backing::mknod_at(dir, name, mode & !umask, rdev);
        reply_entry(reply, self.make(req, parent, name, make));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let make = |dir, name: &CString| backing::mkdir_at(dir, name, mode & !umask);
        reply_entry(reply, self.make(req, parent, name, make));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self
            .live()
            .and_then(|s| Ok(backing::unlink_at(s.fd(parent.0)?, &cstr(name)?, 0)?));
        reply_empty(reply, result);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.live().and_then(|s| {
            Ok(backing::unlink_at(s.fd(parent.0)?, &cstr(name)?, libc::AT_REMOVEDIR)?)
        });
        reply_empty(reply, result);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let result = cstr(target.as_os_str()).map_err(Errno::from).and_then(|target| {
            let make = |dir, name: &CString| backing::symlink_at(&target, dir, name);
            self.make(req, parent, link_name, make)
        });
        reply_entry(reply, result);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = self.live().and_then(|s| {
            let (from, to) = (s.fd(parent.0)?, s.fd(newparent.0)?);
            Ok(backing::rename_at(from, &cstr(name)?, to, &cstr(newname)?, flags.bits())?)
        });
        reply_empty(reply, result);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let result = self.live().and_then(|mut s| {
            backing::link_at(s.fd(ino.0)?, s.fd(newparent.0)?, &cstr(newname)?)?;
            Self::entry(&mut s, newparent.0, newname)
        });
        reply_entry(reply, result);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = self.live().and_then(|mut s| {
            let key = s.handle(fh.0)?.key;
            Ok(s.content_by_key(key)?.read(offset, size as usize)?)
        });
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.do_write(fh.0, offset, data, flags.0) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _o: LockOwner, reply: ReplyEmpty) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().close_handle(fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply_empty(reply, self.do_fsync(ino.0));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.live().and_then(|mut s| s.open_dir(ino.0)) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let state = match self.live() {
            Ok(s) => s,
            Err(e) => return reply.error(e),
        };
        let entries = match state.dir(fh.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _f: OpenFlags, reply: ReplyEmpty) {
        self.lock().close_dir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _d: bool, reply: ReplyEmpty) {
        // Names are durable as soon as they are made (see the module's note).
        reply_empty(reply, self.live().map(drop));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.live().and_then(|s| Ok(backing::statvfs_fd(s.fd(1)?)?)) {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(req, parent.0, name, mode & !umask, flags) {
            Ok((attr, fh)) => {
                reply.created(&TTL, &attr, Generation(0), FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.do_fallocate(fh.0, offset, length, mode));
    }
}
