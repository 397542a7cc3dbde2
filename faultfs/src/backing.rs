//! The system calls on BACKING. Every inode is held by an O_PATH descriptor, so a rename
//! elsewhere never leaves a stale path behind; names are resolved relative to the parent's
//! descriptor (the *at calls), and data is opened through /proc/self/fd.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};

pub fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The path that reopens `fd` (an O_PATH descriptor) with real access.
pub fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

/// An O_PATH descriptor for `name` in the directory `dir` (for the root: `dir` = AT_FDCWD).
pub fn open_path_at(dir: RawFd, name: &CString) -> io::Result<OwnedFd> {
    let fd = check(unsafe {
        libc::openat(dir, name.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the inode behind an O_PATH descriptor for data.
pub fn reopen(fd: RawFd, flags: libc::c_int) -> io::Result<File> {
    let path = proc_path(fd);
    let raw = check(unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) })?;
    Ok(unsafe { File::from_raw_fd(raw) })
}

pub fn stat_fd(fd: RawFd) -> io::Result<libc::stat> {
    stat_at(fd, c"", libc::AT_EMPTY_PATH)
}

pub fn stat_at(dir: RawFd, name: &std::ffi::CStr, flags: libc::c_int) -> io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags | libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

pub fn kind(mode: libc::mode_t) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// FUSE attributes from a backing stat, with the size the servers see.
pub fn attr(ino: u64, st: &libc::stat, size: u64) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512).max(st.st_blocks as u64),
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: kind(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: 4096,
        flags: 0,
    }
}

pub fn mkdir_at(dir: RawFd, name: &CString, mode: u32) -> io::Result<()> {
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) }).map(drop)
}

pub fn mknod_at(dir: RawFd, name: &CString, mode: u32, rdev: u32) -> io::Result<()> {
    check(unsafe { libc::mknodat(dir, name.as_ptr(), mode, rdev as libc::dev_t) }).map(drop)
}

pub fn symlink_at(target: &CString, dir: RawFd, name: &CString) -> io::Result<()> {
    check(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }).map(drop)
}

pub fn unlink_at(dir: RawFd, name: &CString, flags: libc::c_int) -> io::Result<()> {
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), flags) }).map(drop)
}

pub fn rename_at(
    dir: RawFd,
    name: &CString,
    new_dir: RawFd,
    new_name: &CString,
    flags: u32,
) -> io::Result<()> {
    check(unsafe { libc::renameat2(dir, name.as_ptr(), new_dir, new_name.as_ptr(), flags) })
        .map(drop)
}

/// A new name for the inode behind `fd` (an O_PATH descriptor).
pub fn link_at(fd: RawFd, new_dir: RawFd, new_name: &CString) -> io::Result<()> {
    let path = proc_path(fd);
    check(unsafe {
        libc::linkat(libc::AT_FDCWD, path.as_ptr(), new_dir, new_name.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    })
    .map(drop)
}

/// Gives a new node to the user who asked for it (the daemon runs as root).
pub fn chown_at(dir: RawFd, name: &CString, uid: u32, gid: u32) -> io::Result<()> {
    check(unsafe { libc::fchownat(dir, name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) })
        .map(drop)
}

pub fn chown_fd(fd: RawFd, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let (uid, gid) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
    check(unsafe {
        libc::fchownat(fd, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
    })
    .map(drop)
}

pub fn chmod_fd(fd: RawFd, mode: u32) -> io::Result<()> {
    let path = proc_path(fd);
    check(unsafe { libc::chmod(path.as_ptr(), mode & 0o7777) }).map(drop)
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as i64 }
        }
    }
}

pub fn utimes_fd(fd: RawFd, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>) -> io::Result<()> {
    let path = proc_path(fd);
    let times = [timespec(atime), timespec(mtime)];
    check(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

pub fn readlink_fd(fd: RawFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let n = unsafe {
        libc::readlinkat(fd, c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len())
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Creates (or opens) `name` in `dir` for data; `true` when this call created it.
pub fn create_at(dir: RawFd, name: &CString, flags: i32, mode: u32) -> io::Result<(File, bool)> {
    let base = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let fd = unsafe { libc::openat(dir, name.as_ptr(), base | libc::O_CREAT | libc::O_EXCL, mode) };
    if fd >= 0 {
        return Ok((unsafe { File::from_raw_fd(fd) }, true));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EEXIST) || flags & libc::O_EXCL != 0 {
        return Err(err);
    }
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), base) })?;
    Ok((unsafe { File::from_raw_fd(fd) }, false))
}

pub fn statvfs_fd(fd: RawFd) -> io::Result<libc::statvfs> {
    let path = proc_path(fd);
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    Ok(st)
}

/// The entries of a directory, for readdir: (inode, kind, name), "." and ".." first.
pub fn list_dir(fd: &OwnedFd) -> io::Result<Vec<(u64, FileType, std::ffi::OsString)>> {
    use std::os::unix::fs::DirEntryExt;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let mut out = vec![
        (1, FileType::Directory, ".".into()),
        (1, FileType::Directory, "..".into()),
    ];
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let kind = FileType::from_std(ty).unwrap_or(FileType::RegularFile);
        out.push((entry.ino(), kind, entry.file_name()));
    }
    Ok(out)
}
