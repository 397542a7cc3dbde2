//! Driving a running `dlbench-faultfs` from Rust, by the PID that started it.
//!
//! SIGUSR1 is the power loss: the daemon drops every unsynced write, unmounts (lazily, so a
//! descriptor still open cannot keep the mount) and exits 0; BACKING then holds exactly what
//! was durable. SIGTERM (or SIGINT) is an orderly stop: it syncs everything first, as an
//! operating system does before it powers off. The inverse of a power loss is a new mount of
//! the same BACKING.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The source the mount table shows for this layer (its type is `fuse`, or
/// `fuse.dlbench-faultfs` where fusermount3 mounted it).
pub const SOURCE: &str = "dlbench-faultfs";

/// The signal that cuts the power.
pub const POWER_LOSS: libc::c_int = libc::SIGUSR1;

/// `path` made absolute with its parent resolved (a dead FUSE mount cannot itself be
/// resolved: stat on it fails with ENOTCONN).
pub fn absolute(path: &Path) -> io::Result<PathBuf> {
    let abs = std::path::absolute(path)?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok(parent.canonicalize()?.join(name)),
        _ => Ok(abs),
    }
}

/// Undoes the mount table's octal escapes (a space is `\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let code = u8::from_str_radix(&field[i + 1..i + 4], 8).unwrap_or(b'?');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a faultfs mount sits on `mountpoint` now.
pub fn mounted(mountpoint: &Path) -> io::Result<bool> {
    let target = absolute(mountpoint)?;
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(table.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let mut tail = line.split(" - ").nth(1).unwrap_or("").split(' ');
        let (fstype, source) = (tail.next().unwrap_or(""), tail.next().unwrap_or(""));
        fields.get(4).is_some_and(|m| Path::new(&unescape(m)) == target)
            && fstype.starts_with("fuse")
            && unescape(source) == SOURCE
    }))
}

/// Waits until `mountpoint` is mounted (`want` true) or gone (`want` false).
pub fn wait_mounted(mountpoint: &Path, want: bool, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if mounted(mountpoint)? == want {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let what = if want { "mounted" } else { "unmounted" };
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{} was not {what} within {timeout:?}", mountpoint.display()),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Cuts the power of the daemon `pid`; the caller then waits for that child to exit.
pub fn power_loss(pid: u32) -> io::Result<()> {
    signal(pid, POWER_LOSS)
}

/// Asks the daemon `pid` for an orderly stop (everything synced, then unmounted).
pub fn stop(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGTERM)
}

/// Detaches whatever is mounted on `mountpoint` (for a daemon that died without
/// unmounting: its mount answers ENOTCONN until detached).
pub fn detach(mountpoint: &Path) -> io::Result<()> {
    let path = std::ffi::CString::new(absolute(mountpoint)?.into_os_string().into_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
