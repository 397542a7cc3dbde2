//! Fault-injecting TCP proxies: how dlbench partitions and slows a cluster without root.
//!
//! Every link that a fault may cut goes through a proxy on loopback: clients to each node,
//! and (for etcd and ZooKeeper) each node to its peers. A proxy knows which node it leads
//! to, and learns who is on the other side of each connection it accepts (a client group,
//! or a node, see [`super::procnet`]). [`Net`] holds the rules every proxy consults:
//!
//! - a cut link stops forwarding in both directions: bytes are held, not dropped, as a
//!   network that loses packets makes TCP retransmit until the partition heals;
//! - a delayed node has every byte to and from it held for the delay (per chunk, so
//!   throughput is kept).
//!
//! `heal` removes every rule; held bytes then flow again.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub type NodeId = usize;

/// Who is on the connecting side of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// A dlbench client of this group (0: the shared clients; others: dedicated).
    Client(u32),
    Node(NodeId),
}

#[derive(Debug, Default)]
struct Rules {
    cut: HashSet<(Side, NodeId)>,
    delay: HashMap<NodeId, Duration>,
    /// Every byte between a client group and any node held this long.
    client_delay: HashMap<u32, Duration>,
}

/// The rules and the proxies that obey them.
pub struct Net {
    rules: RwLock<Rules>,
    changed: watch::Sender<u64>,
    /// Server processes by pid, to recognise node-to-node connections.
    owners: Mutex<HashMap<i32, NodeId>>,
    proxies: Mutex<Vec<JoinHandle<()>>>,
    /// What clients sent towards the servers: reads the proxies made (about one per request,
    /// as clients write each request at once with nodelay) and bytes. Node-to-node links
    /// are not counted.
    sent_reads: AtomicU64,
    sent_bytes: AtomicU64,
    /// What the rules in force held back since the last heal: the evidence that a cut or a
    /// delay stopped real traffic (not the rule's own flag). Touched only where a rule acts.
    held: Mutex<Held>,
}

/// Traffic a rule held back since the last heal, per link (who connects, which node).
#[derive(Debug, Default, Clone)]
pub struct Held {
    /// Bytes a cut held, and connections it kept from reaching the node.
    pub cut: HashMap<(Side, NodeId), (u64, u64)>,
    /// Bytes a delay held.
    pub delayed: HashMap<(Side, NodeId), u64>,
}

impl Held {
    /// Bytes and connections a cut held on the links that `pick` selects.
    pub fn cut_on(&self, pick: impl Fn(Side, NodeId) -> bool) -> (u64, u64) {
        self.cut.iter().filter(|((s, n), _)| pick(*s, *n)).fold((0, 0), |(b, c), (_, (x, y))| (b + x, c + y))
    }
    /// Bytes a delay held on the links that `pick` selects.
    pub fn delayed_on(&self, pick: impl Fn(Side, NodeId) -> bool) -> u64 {
        self.delayed.iter().filter(|((s, n), _)| pick(*s, *n)).map(|(_, b)| b).sum()
    }
}

impl Net {
    pub fn new() -> Arc<Net> {
        Arc::new(Net {
            rules: RwLock::default(),
            changed: watch::channel(0).0,
            owners: Mutex::default(),
            proxies: Mutex::default(),
            sent_reads: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            held: Mutex::default(),
        })
    }

    fn bump(&self) {
        self.changed.send_modify(|g| *g += 1);
    }

    /// Record that process `pid` is node `node` (called on every start and restart).
    pub fn set_owner(&self, pid: i32, node: NodeId) {
        let mut o = self.owners.lock().unwrap();
        o.retain(|_, n| *n != node);
        o.insert(pid, node);
    }

    fn is_cut(&self, from: Side, to: NodeId) -> bool {
        self.rules.read().unwrap().cut.contains(&(from, to))
    }

    fn delay(&self, a: Side, to: NodeId) -> Duration {
        let r = self.rules.read().unwrap();
        let d = r.delay.get(&to).copied().unwrap_or_default();
        match a {
            Side::Node(n) => d.max(r.delay.get(&n).copied().unwrap_or_default()),
            Side::Client(g) => d.max(r.client_delay.get(&g).copied().unwrap_or_default()),
        }
    }

    /// Cut `node` off from clients of group 0 and from every node in `peers`.
    pub fn isolate(&self, node: NodeId, peers: &[NodeId]) {
        {
            let mut r = self.rules.write().unwrap();
            r.cut.insert((Side::Client(0), node));
            for &p in peers.iter().filter(|&&p| p != node) {
                r.cut.insert((Side::Node(p), node));
                r.cut.insert((Side::Node(node), p));
            }
        }
        self.bump();
    }

    /// Cut every link between a node of `a` and a node of `b` (clients keep both sides).
    pub fn split(&self, a: &[NodeId], b: &[NodeId]) {
        {
            let mut r = self.rules.write().unwrap();
            for &x in a {
                for &y in b {
                    r.cut.insert((Side::Node(x), y));
                    r.cut.insert((Side::Node(y), x));
                }
            }
        }
        self.bump();
    }

    /// Cut the clients of `group` off from `nodes`.
    pub fn cut_clients(&self, group: u32, nodes: &[NodeId]) {
        {
            let mut r = self.rules.write().unwrap();
            for &n in nodes {
                r.cut.insert((Side::Client(group), n));
            }
        }
        self.bump();
    }

    /// Cut the link from node `from` to node `to` (one direction of initiation).
    pub fn cut_link(&self, from: NodeId, to: NodeId) {
        self.rules.write().unwrap().cut.insert((Side::Node(from), to));
        self.bump();
    }

    /// Hold every byte to and from `node` for `d`.
    pub fn slow(&self, node: NodeId, d: Duration) {
        self.rules.write().unwrap().delay.insert(node, d);
        self.bump();
    }

    /// Hold every byte between the clients of `group` and every node for `d` (each way).
    pub fn slow_clients(&self, group: u32, d: Duration) {
        self.rules.write().unwrap().client_delay.insert(group, d);
        self.bump();
    }

    /// Remove every rule.
    pub fn heal(&self) {
        {
            let mut r = self.rules.write().unwrap();
            r.cut.clear();
            r.delay.clear();
            r.client_delay.clear();
        }
        *self.held.lock().unwrap() = Held::default();
        self.bump();
    }

    /// What the rules held back since the last heal.
    pub fn held(&self) -> Held {
        self.held.lock().unwrap().clone()
    }

    fn hold_cut(&self, from: Side, to: NodeId, bytes: u64, conns: u64) {
        let mut h = self.held.lock().unwrap();
        let e = h.cut.entry((from, to)).or_default();
        e.0 += bytes;
        e.1 += conns;
    }

    fn hold_delayed(&self, from: Side, to: NodeId, bytes: u64) {
        *self.held.lock().unwrap().delayed.entry((from, to)).or_default() += bytes;
    }

    /// True when no rule is in force.
    pub fn is_healed(&self) -> bool {
        let r = self.rules.read().unwrap();
        r.cut.is_empty() && r.delay.is_empty() && r.client_delay.is_empty()
    }

    /// Start a proxy on `listener` to node `to` at `backend`, for clients of `group`.
    /// With `identify`, connections from server processes are recognised as node links.
    pub fn spawn_proxy(self: &Arc<Self>, listener: TcpListener, to: NodeId, backend: Arc<Mutex<SocketAddr>>, group: u32, identify: bool) {
        let net = self.clone();
        let front = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, peer)) = listener.accept().await else { continue };
                let _ = conn.set_nodelay(true);
                let from = if identify { net.identify(peer.port(), front, group) } else { Side::Client(group) };
                let target = *backend.lock().unwrap();
                tokio::spawn(serve(net.clone(), conn, from, to, target));
            }
        });
        self.proxies.lock().unwrap().push(task);
    }

    fn identify(&self, peer_port: u16, front: u16, group: u32) -> Side {
        let owners: Vec<(i32, NodeId)> = self.owners.lock().unwrap().iter().map(|(p, n)| (*p, *n)).collect();
        let found = super::procnet::socket_inode(peer_port, front)
            .and_then(|inode| super::procnet::owner_of(inode, owners.iter().map(|(p, _)| *p)));
        match found.and_then(|pid| owners.iter().find(|(p, _)| *p == pid)) {
            Some((_, n)) => Side::Node(*n),
            None => Side::Client(group),
        }
    }

    /// What every client has sent towards the servers so far: (proxy reads, bytes). Reads
    /// stand in for requests (a read can carry several pipelined ones, or part of a large
    /// one); the difference over a window is the clients' traffic in it.
    pub fn client_traffic(&self) -> (u64, u64) {
        (self.sent_reads.load(Ordering::Relaxed), self.sent_bytes.load(Ordering::Relaxed))
    }

    /// Stop every proxy (their listeners close; open connections end with their tasks).
    pub fn shutdown(&self) {
        for t in self.proxies.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Wait until the link is not cut.
async fn wait_open(net: &Net, from: Side, to: NodeId, rx: &mut watch::Receiver<u64>) {
    while net.is_cut(from, to) {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn serve(net: Arc<Net>, client: TcpStream, from: Side, to: NodeId, backend: SocketAddr) {
    let mut rx = net.changed.subscribe();
    // A cut link does not even reach the server: the connection hangs as a SYN would.
    if net.is_cut(from, to) {
        net.hold_cut(from, to, 0, 1);
        wait_open(&net, from, to, &mut rx).await;
    }
    let Ok(server) = TcpStream::connect(backend).await else {
        // The node is down: reset the client's connection at once, as the dead node's
        // kernel would have refused it. (A zero linger resets on close; it does not block,
        // which is what the deprecation warns about.)
        #[allow(deprecated)]
        let _ = client.set_linger(Some(Duration::ZERO));
        return;
    };
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let count = matches!(from, Side::Client(_));
    let mut a = tokio::spawn(pump(net.clone(), cr, sw, from, to, count));
    let mut b = tokio::spawn(pump(net, sr, cw, from, to, false));
    // When either direction ends, the connection is over: stop the other too (dropping a
    // JoinHandle would leave it running, holding its half open).
    tokio::select! {
        _ = &mut a => b.abort(),
        _ = &mut b => a.abort(),
    }
}

/// Copy one direction, obeying cuts and delays. Chunks go through a channel to a writer
/// task so a delay holds each chunk without slowing the ones behind it.
async fn pump(net: Arc<Net>, mut r: tokio::net::tcp::OwnedReadHalf, mut w: tokio::net::tcp::OwnedWriteHalf, from: Side, to: NodeId, count: bool) {
    let (tx, mut chunks) = tokio::sync::mpsc::channel::<(Instant, Vec<u8>)>(64);
    let writer = {
        let net = net.clone();
        tokio::spawn(async move {
            let mut rx = net.changed.subscribe();
            while let Some((at, buf)) = chunks.recv().await {
                let d = net.delay(from, to);
                if !d.is_zero() {
                    net.hold_delayed(from, to, buf.len() as u64);
                    tokio::time::sleep_until((at + d).into()).await;
                }
                if net.is_cut(from, to) {
                    net.hold_cut(from, to, buf.len() as u64, 0);
                    wait_open(&net, from, to, &mut rx).await;
                }
                if w.write_all(&buf).await.is_err() {
                    return;
                }
            }
            let _ = w.shutdown().await;
        })
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if count {
                    net.sent_reads.fetch_add(1, Ordering::Relaxed);
                    net.sent_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        a
    }

    async fn roundtrip(s: &mut TcpStream, within: Duration) -> bool {
        s.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        tokio::time::timeout(within, s.read_exact(&mut b)).await.is_ok()
    }

    #[tokio::test]
    async fn cut_holds_bytes_and_heal_releases_them() {
        let net = Net::new();
        let backend = echo_server().await;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = l.local_addr().unwrap();
        net.spawn_proxy(l, 0, Arc::new(Mutex::new(backend)), 0, false);
        let mut c = TcpStream::connect(front).await.unwrap();
        assert!(roundtrip(&mut c, Duration::from_secs(2)).await, "open link echoes");
        net.cut_clients(0, &[0]);
        assert!(!roundtrip(&mut c, Duration::from_millis(300)).await, "cut link must not answer");
        assert_eq!(net.held().cut_on(|s, n| s == Side::Client(0) && n == 0), (4, 0), "the cut's evidence: the 4-byte request it held");
        net.heal();
        assert_eq!(net.held().cut_on(|_, _| true), (0, 0), "a heal starts the evidence afresh");
        let mut b = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), c.read_exact(&mut b)).await.expect("held bytes arrive after heal").unwrap();
        assert_eq!(&b, b"ping");
        // Another client group is unaffected by a cut of group 0.
        net.cut_clients(0, &[0]);
        let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front2 = l2.local_addr().unwrap();
        net.spawn_proxy(l2, 0, Arc::new(Mutex::new(backend)), 7, false);
        let mut c2 = TcpStream::connect(front2).await.unwrap();
        assert!(roundtrip(&mut c2, Duration::from_secs(2)).await);
        assert_eq!(net.held().cut_on(|_, _| true), (0, 0), "a cut that stopped nothing holds no evidence");
        // A new connection over a cut link is held before it reaches the node.
        let _c3 = TcpStream::connect(front).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(net.held().cut_on(|s, _| s == Side::Client(0)), (0, 1));
        net.heal();
    }

    #[tokio::test]
    async fn client_traffic_counts_what_clients_send_not_the_replies() {
        let net = Net::new();
        let backend = echo_server().await;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = l.local_addr().unwrap();
        net.spawn_proxy(l, 0, Arc::new(Mutex::new(backend)), 0, false);
        let mut c = TcpStream::connect(front).await.unwrap();
        assert_eq!(net.client_traffic(), (0, 0));
        assert!(roundtrip(&mut c, Duration::from_secs(2)).await);
        assert!(roundtrip(&mut c, Duration::from_secs(2)).await);
        let (reads, bytes) = net.client_traffic();
        assert_eq!(bytes, 8, "two 4-byte requests; the echoed replies are not the client's");
        assert!((1..=2).contains(&reads), "{reads} reads");
    }

    #[tokio::test]
    async fn slow_clients_delays_that_group_only() {
        let net = Net::new();
        let backend = echo_server().await;
        for group in [0, 7] {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let front = l.local_addr().unwrap();
            net.spawn_proxy(l, 0, Arc::new(Mutex::new(backend)), group, false);
            let mut c = TcpStream::connect(front).await.unwrap();
            net.slow_clients(7, Duration::from_millis(200));
            let t = Instant::now();
            assert!(roundtrip(&mut c, Duration::from_secs(3)).await);
            if group == 7 {
                assert!(t.elapsed() >= Duration::from_millis(400), "group 7, both directions: {:?}", t.elapsed());
            } else {
                // No upper bound on a timing here (a shared machine): the rule itself.
                assert_eq!(net.delay(Side::Client(0), 0), Duration::ZERO, "group 0 is not slowed");
                assert_eq!(net.delay(Side::Client(7), 0), Duration::from_millis(200));
            }
            assert!(!net.is_healed());
            net.heal();
            assert!(net.is_healed());
        }
    }

    #[tokio::test]
    async fn delay_holds_each_chunk() {
        let net = Net::new();
        let backend = echo_server().await;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = l.local_addr().unwrap();
        net.spawn_proxy(l, 0, Arc::new(Mutex::new(backend)), 0, false);
        let mut c = TcpStream::connect(front).await.unwrap();
        net.slow(0, Duration::from_millis(200));
        let t = Instant::now();
        assert!(roundtrip(&mut c, Duration::from_secs(3)).await);
        assert!(t.elapsed() >= Duration::from_millis(400), "two directions, 200 ms each: {:?}", t.elapsed());
        assert_eq!(net.held().delayed_on(|_, n| n == 0), 8, "the request and its echo, 4 bytes each way, both held");
        net.heal();
        assert_eq!(net.held().delayed_on(|_, _| true), 0);
    }
}
