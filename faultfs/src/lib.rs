//! dlbench-faultfs: a FUSE layer under a server's data directory that keeps every write apart
//! until the server makes it durable (fsync, fdatasync, O_SYNC / O_DSYNC, msync), so that a
//! "power loss" can drop what was never synced (issue 36). The daemon (`daemon`, run by this
//! crate's binary or by `dlbench` itself) mounts it; `control`
//! is how a Rust caller drives the binary by the PID it started.

pub mod backing;
pub mod content;
pub mod control;
pub mod daemon;
pub mod fs;
pub mod state;
