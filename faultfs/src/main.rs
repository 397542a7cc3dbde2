//! `dlbench-faultfs [--keep-unsynced-on-power-loss] BACKING MOUNTPOINT`
//!
//! Mounts MOUNTPOINT mirroring BACKING; file data written there reaches BACKING only when
//! it is synced. SIGUSR1 = power loss (unsynced writes dropped, unmount, exit 0);
//! SIGTERM / SIGINT / SIGHUP = orderly stop (everything synced, unmount, exit 0).
//! `--keep-unsynced-on-power-loss` is the wrong layer on purpose, for the tests.

fn main() {
    std::process::exit(dlbench_faultfs::daemon::main(std::env::args_os().skip(1).collect()));
}
