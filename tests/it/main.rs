//! dlbench's integration tests: one binary, one module per subject (as rust-analyzer and
//! cargo keep theirs). One binary links the crate once instead of once per file, and its
//! tests share what they can: the local target of `support` is started once for every test
//! that only needs *a* set of servers.
//!
//! `cargo test --release --workspace` runs them; `cargo test --release --test it MODULE::`
//! runs one module (e.g. `real_servers::`); `python3 scripts/test-times.py` shows where the
//! time goes.
//!
//! Tests run on libtest's threads (the machine's cores, or RUST_TEST_THREADS). Tests that
//! start servers of their own and load them hold `common::heavy()` for their whole run, so
//! two such runs never share the cores (their timing assertions are about order, but a
//! starved server still misses a heartbeat); tests on `support`'s servers and light tests
//! fill the gaps beside them.

mod common;
mod support;

mod calibrate;
mod check_memory;
mod checker;
mod cli;
mod compare_rule;
mod compose;
mod connections;
mod driver;
mod durability;
mod expiry;
mod external;
mod faults;
mod first_use;
mod lifecycle;
mod mutation;
mod nats;
mod peers;
mod power_loss;
mod power_scenarios;
mod readme;
mod real_servers;
mod report;
mod report_page;
mod shard;
mod soak;
mod target_costs;
mod tls;
mod trend;
mod users;
