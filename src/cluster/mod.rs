//! Clusters: where the servers of a target run. (Not `target/`: that is Cargo's build
//! directory, and tools that skip build outputs would skip this code too.)
//!
//! - [`local`], the embedded default: dlbench starts real server processes itself.
//! - [`compose`]: the services of `docker-compose.yml`, found through Docker.
//! - [`external`]: endpoints the user names in a TOML file.
//!
//! Each offers the same things to a run: endpoints for the clients, and [`crate::nemesis::Faults`]
//! for the nemesis.

pub mod compose;
pub mod external;
pub mod found;
pub mod local;
pub mod medium;
pub mod probe;
