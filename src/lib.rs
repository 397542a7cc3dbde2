//! dlbench: benchmark and safety-test distributed locks on real servers.
//!
//! The flow of a run, and the module that owns each step:
//!
//! - [`cli`] parses flags into one validated plan ([`run::RunPlan`]); `main` is a thin shell.
//! - [`cluster`] starts the servers of a target: [`cluster::local`] runs real etcd, ZooKeeper, Redis and
//!   PostgreSQL processes from the machine's packages, on loopback, and guarantees they stop.
//! - [`connect`] turns an [`endpoints`] file (or the local target's endpoints) into a
//!   connected backend from the `backends/` crates, all behind `dlbench_core::Backend`.
//! - [`driver`] runs a [`workload`]: clients acquire, work on the protected resource
//!   (`dlbench_core::Resource`), release; [`stats`] records latency in HDR histograms and a
//!   per-second series; [`progress`] shows it live.
//! - [`summary`] turns phase results into `summary.json` and the table; [`results`] owns
//!   the run directory and writes files atomically as the run goes.
//! - [`calibrate`] measures the servers' primitives and reference tools beside the locks,
//!   so the harness's own overhead and each lock's distance from its bound are stated.
//! - [`shard`] runs one shard of a plan (`run --shard I/N`, one of many load hosts) and
//!   merges the shards' result sets into one (`merge`); [`resource_server`] keeps the
//!   protected resource in a dedicated Redis, so holders on several hosts meet in one place.
//! - [`lockcmd`] and [`up`] are the small commands: hold a lock around a command, and keep
//!   a target running for other clients.

pub mod calibrate;
pub mod catalogue;
pub mod checker;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod connect;
pub mod cost;
pub mod driver;
pub mod durability;
pub mod endpoints;
pub mod facts;
pub mod faultlog;
pub mod history;
pub mod kind;
pub mod lockcmd;
pub mod merge;
pub mod nemesis;
pub mod phase;
pub mod progress;
pub mod report;
pub mod resource_server;
pub mod usage;
pub mod results;
pub mod run;
pub mod scenario;
pub mod shard;
pub mod soak;
pub mod stats;
pub mod summarize;
pub mod summary;
pub mod synthetic;
pub mod timescale;
pub mod trend;
pub mod up;
pub mod util;
pub mod judgement;

pub mod workload;
