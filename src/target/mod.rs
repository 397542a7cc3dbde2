//! Targets: where the servers run. `local` (dlbench starts them) is the embedded default.

pub mod local;
