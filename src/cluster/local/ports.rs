//! Loopback ports that two dlbench runs on one machine will not both pick.
//!
//! Ports come from 20000..32000, below Linux's default ephemeral range, so outgoing
//! connections do not grab them between our check and the server's bind. Each chosen port
//! is claimed with an exclusive `flock` on `/tmp/dlbench-ports/<port>.lock`, held until the
//! run ends; a second run skips claimed ports, and a crashed run's claims vanish with it
//! (the kernel drops flocks when the process dies).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

const LOW: u16 = 20000;
const HIGH: u16 = 32000;

/// Ports claimed for this run; released on drop.
#[derive(Default)]
pub struct PortClaims {
    held: Vec<(u16, File)>,
    taken: HashSet<u16>,
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("dlbench-ports")
}

impl PortClaims {
    pub fn new() -> Self {
        Self::default()
    }

    /// Claim one free port.
    pub fn claim(&mut self) -> std::io::Result<u16> {
        let dir = lock_dir();
        std::fs::create_dir_all(&dir)?;
        for _ in 0..2000 {
            let port = rand::random_range(LOW..HIGH);
            if self.taken.contains(&port) {
                continue;
            }
            let path = dir.join(format!("{port}.lock"));
            let Ok(file) = OpenOptions::new().create(true).truncate(false).write(true).open(&path) else { continue };
            // SAFETY: flock on a file descriptor we own; no memory is shared.
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if !locked {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue; // someone else (not dlbench) is using it
            }
            self.taken.insert(port);
            self.held.push((port, file));
            return Ok(port);
        }
        Err(std::io::Error::other("no free loopback port in 20000..32000"))
    }

    /// Claim `n` free ports.
    pub fn claim_n(&mut self, n: usize) -> std::io::Result<Vec<u16>> {
        (0..n).map(|_| self.claim()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_claimers_never_share_a_port() {
        let mut a = PortClaims::new();
        let mut b = PortClaims::new();
        let pa: HashSet<u16> = a.claim_n(50).unwrap().into_iter().collect();
        let pb: HashSet<u16> = b.claim_n(50).unwrap().into_iter().collect();
        assert_eq!(pa.len(), 50);
        assert!(pa.is_disjoint(&pb), "ports claimed twice: {:?}", pa.intersection(&pb).collect::<Vec<_>>());
    }
}
