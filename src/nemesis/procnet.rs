//! Which local process owns the other end of a loopback connection.
//!
//! A proxy accepting a connection from 127.0.0.1:P looks up the socket whose local port is
//! P (and remote port is the proxy's) in /proc/net/tcp, then finds which of the server
//! processes has that socket open. That tells an etcd member's peer connection from a
//! client's, so a partition can cut node-to-node links without root or iptables.

use std::path::Path;

/// The inode of the TCP socket `127.0.0.1:local -> *:remote`.
pub fn socket_inode(local_port: u16, remote_port: u16) -> Option<u64> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let port = |s: &str| s.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if port(f[1]) == Some(local_port) && port(f[2]) == Some(remote_port) {
                return f[9].parse().ok();
            }
        }
    }
    None
}

/// The first of `pids` with socket `inode` open.
pub fn owner_of(inode: u64, pids: impl IntoIterator<Item = i32>) -> Option<i32> {
    let want = format!("socket:[{inode}]");
    for pid in pids {
        let Ok(dir) = std::fs::read_dir(Path::new("/proc").join(pid.to_string()).join("fd")) else { continue };
        for e in dir.flatten() {
            if std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_our_own_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, peer) = l.accept().unwrap();
        let inode = socket_inode(peer.port(), l.local_addr().unwrap().port()).expect("socket listed");
        assert_eq!(owner_of(inode, [std::process::id() as i32]), Some(std::process::id() as i32));
        assert_eq!(owner_of(inode, [1]), None);
        drop(c);
    }
}
