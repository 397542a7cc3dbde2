//! `--connections`: per-client gives every logical client its own connection to the
//! servers, as N processes would; shared multiplexes them over the backend's own.
//!
//! Counted from the kernel, not from dlbench: the TCP sockets this process holds open to a
//! backend's server ports, before and after opening N clients (each takes and gives back
//! one lock, so connections opened on first use exist too). One test in its own binary, so
//! no other test opens or closes connections meanwhile.

use std::collections::HashSet;
use std::time::Duration;

use dlbench::cluster::local::LocalTarget;
use dlbench::connect::{self, Timeouts};
use dlbench::kind::BackendKind;
use dlbench_core::{AcquireOptions, Connections};

const N: usize = 8;

/// Inodes of the sockets this process has open.
fn own_socket_inodes() -> HashSet<u64> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect()
}

/// This process's established TCP connections to any of `ports`, by socket inode.
fn connections_to(ports: &HashSet<u16>) -> HashSet<u64> {
    let own = own_socket_inodes();
    let mut out = HashSet::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(rem), Some(st), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else { continue };
            let port = rem.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            let inode: u64 = inode.parse().unwrap_or(0);
            if *st == "01" && port.is_some_and(|p| ports.contains(&p)) && own.contains(&inode) {
                out.insert(inode);
            }
        }
    }
    out
}

fn ports(eps: &[String]) -> HashSet<u16> {
    eps.iter().filter_map(|e| e.rsplit(':').next()?.trim_end_matches('/').parse().ok()).collect()
}

/// New connections to the backend's servers that opening N clients (and one lock cycle
/// each) made, with the clients still open.
async fn new_connections(kind: BackendKind, target: &LocalTarget, mode: Connections) -> usize {
    let eps = target.endpoints();
    let ports = ports(&eps.get(kind).unwrap().endpoints);
    let backend = connect::connect_with(kind, eps, Timeouts::default(), mode, None).await.unwrap();
    assert_eq!(backend.connections(), Some(mode), "{kind}: the backend reports the mode it runs");
    // Let the backend's own channel settle (etcd's balanced channel connects to each endpoint).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = connections_to(&ports);
    let mut clients = Vec::new();
    for i in 0..N {
        let c = backend.client().await.unwrap();
        let key = dlbench_core::conformance::unique_key(&format!("conns-{kind}-{i}"));
        let lease = c.acquire(&key, &AcquireOptions::default()).await.unwrap();
        c.release(lease).await.unwrap();
        clients.push(c);
    }
    let after = connections_to(&ports);
    for c in &clients {
        c.close().await;
    }
    after.difference(&before).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_opens_a_connection_per_client_and_shared_none() {
    let kinds = [BackendKind::Redis, BackendKind::Redlock, BackendKind::Postgres, BackendKind::Etcd];
    let dir = std::env::temp_dir().join(format!("dlbench-conns-{}", std::process::id()));
    let mut target = LocalTarget::start(&dir, &kinds, Default::default()).await.expect("local servers start");
    let mut report = Vec::new();
    for kind in kinds {
        let per = new_connections(kind, &target, Connections::PerClient).await;
        let shared = new_connections(kind, &target, Connections::Shared).await;
        report.push(format!("{kind}: per-client +{per}, shared +{shared}"));
        // Per-client: at least one connection per client (Redlock: one per node each;
        // etcd: a channel each, to one endpoint or more). Shared: fewer than one per client.
        let nodes = target.endpoints().get(kind).unwrap().endpoints.len();
        let want = if kind == BackendKind::Redlock { N * nodes } else { N };
        assert!(per >= want, "{kind} per-client opened {per} connections for {N} clients, want >= {want}");
        assert!(shared < N, "{kind} shared opened {shared} connections for {N} clients, want < {N}");
    }
    eprintln!("{}", report.join("\n"));
    target.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
