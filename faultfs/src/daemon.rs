//! The layer's daemon: `dlbench-faultfs [--keep-unsynced-on-power-loss] BACKING MOUNTPOINT`,
//! also carried by the `dlbench` binary itself (its hidden first argument [`ARG`]), so that
//! `cargo install --path .` and `cargo run --release` bring power loss with them.
//!
//! Mounts MOUNTPOINT mirroring BACKING; file data written there reaches BACKING only when
//! it is synced. SIGUSR1 = power loss (unsynced writes dropped, unmount, exit 0);
//! SIGTERM / SIGINT / SIGHUP = orderly stop (everything synced, unmount, exit 0).
//! `--keep-unsynced-on-power-loss` is the wrong layer on purpose, for the tests.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::control;
use crate::fs::FaultFs;
use fuser::{MountOption, SessionACL};

const USAGE: &str = "usage: dlbench-faultfs [--keep-unsynced-on-power-loss] BACKING MOUNTPOINT";

struct Args {
    backing: PathBuf,
    mountpoint: PathBuf,
    keep_unsynced: bool,
}

fn parse(args: Vec<OsString>) -> Result<Args, String> {
    let mut keep_unsynced = false;
    let mut paths = Vec::new();
    for arg in args {
        match arg.to_str() {
            Some("--keep-unsynced-on-power-loss") => keep_unsynced = true,
            Some("-h" | "--help") => return Err(USAGE.to_string()),
            Some(s) if s.starts_with('-') => return Err(format!("unknown option {s}; {USAGE}")),
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [backing, mountpoint] = <[PathBuf; 2]>::try_from(paths)
        .map_err(|p| format!("expected BACKING and MOUNTPOINT, got {} paths; {USAGE}", p.len()))?;
    for (what, path) in [("BACKING", &backing), ("MOUNTPOINT", &mountpoint)] {
        if !path.is_dir() {
            return Err(format!("{what} {} is not a directory; create it first", path.display()));
        }
    }
    let backing = backing.canonicalize().map_err(|e| format!("BACKING: {e}"))?;
    let mountpoint = control::absolute(&mountpoint).map_err(|e| format!("MOUNTPOINT: {e}"))?;
    Ok(Args { backing, mountpoint, keep_unsynced })
}

fn signal_set() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [control::POWER_LOSS, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// The next control signal, or None after `timeout`.
fn next_signal(set: &libc::sigset_t, timeout: Duration) -> Option<libc::c_int> {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: timeout.as_nanos() as i64 };
    let sig = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (sig > 0).then_some(sig)
}

fn run(args: Args) -> Result<(), String> {
    // The control signals are blocked before any thread exists, so every thread inherits
    // the mask and only the wait below takes them.
    let set = signal_set();
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let fs = FaultFs::new(&args.backing, args.keep_unsynced)
        .map_err(|e| format!("cannot open BACKING {}: {e}", args.backing.display()))?;
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(control::SOURCE.to_string()),
        MountOption::Subtype(control::SOURCE.to_string()),
        // The kernel checks permissions against the attributes: servers that run as another
        // user (PostgreSQL, MariaDB) reach files the daemon (root) creates in their name.
        MountOption::DefaultPermissions,
    ];
    config.acl = SessionACL::All;
    let session = fuser::Session::new(fs.clone(), &args.mountpoint, &config).map_err(|e| {
        format!("cannot mount on {} (is /dev/fuse there, and are you root?): {e}", args.mountpoint.display())
    })?;
    let background = session.spawn().map_err(|e| format!("cannot start the session: {e}"))?;
    eprintln!(
        "faultfs: pid {} mounted {} on {}",
        std::process::id(),
        args.backing.display(),
        args.mountpoint.display()
    );
    loop {
        match next_signal(&set, Duration::from_millis(200)) {
            Some(control::POWER_LOSS) => {
                let lost = fs.power_loss();
                let _ = control::detach(&args.mountpoint);
                let verb = if args.keep_unsynced { "kept (wrong layer)" } else { "dropped" };
                eprintln!(
                    "faultfs: power loss: {verb} {} unsynced bytes in {} files",
                    lost.bytes, lost.files
                );
                return Ok(());
            }
            Some(_) => return stop(&fs, &args, "stopped"),
            // Unmounted from outside (umount): an orderly stop too.
            None if background.guard.is_finished() => return stop(&fs, &args, "unmounted"),
            None => {}
        }
    }
}

fn stop(fs: &FaultFs, args: &Args, how: &str) -> Result<(), String> {
    let synced = fs.stop().map_err(|e| format!("sync before stop failed: {e}"))?;
    let _ = control::detach(&args.mountpoint);
    eprintln!("faultfs: {how}: synced {} bytes in {} files", synced.bytes, synced.files);
    Ok(())
}


/// The first argument that makes the `dlbench` binary run this daemon instead of its CLI.
pub const ARG: &str = "__faultfs-layer";

/// Run the daemon on `args` (without the program name); returns the exit status. Call it
/// before any thread starts: the control signals are blocked for every thread the session
/// spawns, so only the daemon's wait takes them.
pub fn main(args: Vec<OsString>) -> i32 {
    match parse(args).and_then(run) {
        // Exit at once: the background session's destructors would try to unmount again.
        Ok(()) => std::process::exit(0),
        Err(msg) => {
            eprintln!("dlbench-faultfs: {msg}");
            2
        }
    }
}
