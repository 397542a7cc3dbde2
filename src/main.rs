//! The `dlbench` binary: everything lives in the library; see `dlbench::cli`.

fn main() {
    // The power-loss layer's daemon rides in this binary (one binary carries every feature):
    // the local target starts it as `dlbench __faultfs-layer BACKING MOUNTPOINT`, before any
    // thread exists, as the daemon's signal handling needs.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == dlbench_faultfs::daemon::ARG) {
        std::process::exit(dlbench_faultfs::daemon::main(args.collect()));
    }
    dlbench::usage::tune_allocator();
    std::process::exit(dlbench::cli::main());
}
