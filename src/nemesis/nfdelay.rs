//! The delay fault where the kernel has no netem: hold a node's packets in a netfilter queue.
//!
//! `dlbench delay-node --delay 100ms` runs in the network namespace of a server container
//! (the compose target starts it from the bench image with `docker run --network
//! container:NAME --cap-add NET_ADMIN`). Every packet in and out of the namespace's network
//! interface (not loopback) goes to a netfilter queue (iptables `NFQUEUE`, with
//! `--queue-bypass`, so packets flow again if this process dies); each is held for the
//! delay and let go in arrival order. Unlike a redirecting proxy this also slows the
//! connections that were open before the fault (clients' pools, Raft and ZAB peer links),
//! as `tc netem` would. SIGTERM (`docker stop`) lets every held packet go, removes the
//! rules and exits.
//!
//! A packet crossing the node is held once on the way in and once on the way out, so a
//! round trip to a delayed node takes two delays longer, as on the local target's proxies.
//! The hold is exact to about a millisecond (the queue is polled).

use std::collections::VecDeque;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The queue number (per network namespace, so one per delayed node).
pub const QUEUE: u16 = 4711;
/// The line printed once the rules are in place: the compose target waits for it.
pub const READY: &str = "dlbench delay-node: holding";
const COMMENT: &str = "dlbench-delay";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The interface the default route leaves by (eth0 in a container), from /proc/net/route.
fn default_dev() -> anyhow::Result<String> {
    let routes = std::fs::read_to_string("/proc/net/route").context("cannot read /proc/net/route")?;
    routes
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 1 && f[1] == "00000000")
        .map(|f| f[0].to_string())
        .context("no default route in this network namespace")
}

fn rule(dev: &str, chain: &str) -> Vec<String> {
    let dir = if chain == "INPUT" { "-i" } else { "-o" };
    [chain, dir, dev, "-m", "comment", "--comment", COMMENT, "-j", "NFQUEUE", "--queue-num", &QUEUE.to_string(), "--queue-bypass"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn iptables(bin: &str, op: &str, args: &[String]) -> Result<(), String> {
    let out = Command::new(bin).arg("-w").arg(op).args(args).output().map_err(|e| format!("cannot run {bin}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{bin} {op} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Delete this program's rules, however many an earlier, killed instance left.
fn remove_rules(bin: &str, dev: &str) {
    for chain in ["INPUT", "OUTPUT"] {
        for _ in 0..16 {
            if iptables(bin, "-D", &rule(dev, chain)).is_err() {
                break;
            }
        }
    }
}

/// Hold every packet through the default interface for `delay`, until SIGTERM/SIGINT or
/// `max` (a bound, so a sidecar whose dlbench died does not slow the node for ever).
pub fn run(delay: Duration, max: Duration) -> anyhow::Result<i32> {
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let dev = default_dev()?;
    let mut q = open_queue()?;
    let bin = insert_rules(&dev)?;
    println!("{READY} {dev} for {} ms each way", delay.as_millis());
    use std::io::Write;
    let _ = std::io::stdout().flush();

    let mut held: VecDeque<(Instant, nfq::Message)> = VecDeque::new();
    let mut passed = 0u64;
    let result = hold(&mut q, delay, max, &mut held, &mut passed)?;
    let_go(&mut q, held, bin, &dev);
    println!("dlbench delay-node: released {dev} after {passed} packets");
    result.map(|_| 0)
}

/// The queue, bound and set to pass packets' metadata only, and to let them through when full.
fn open_queue() -> anyhow::Result<nfq::Queue> {
    let mut q = nfq::Queue::open().context("cannot open a netfilter queue socket (needs CAP_NET_ADMIN: run with --cap-add NET_ADMIN)")?;
    q.bind(QUEUE).with_context(|| format!("cannot bind netfilter queue {QUEUE} (another delay-node in this namespace?)"))?;
    // Metadata only: the verdict does not change the packet, so its bytes need not cross.
    q.set_copy_range(QUEUE, 0)?;
    q.set_queue_max_len(QUEUE, 200_000)?;
    // A full queue lets packets through rather than dropping them: a delay, not a loss.
    q.set_fail_open(QUEUE, true)?;
    q.set_nonblocking(true);
    Ok(q)
}

/// Send `dev`'s packets both ways to the queue; which iptables took the rules.
fn insert_rules(dev: &str) -> anyhow::Result<&'static str> {
    // Debian's iptables is the nf_tables one; the legacy one where that is refused.
    let mut bin = "iptables";
    remove_rules(bin, dev);
    if let Err(e) = iptables(bin, "-I", &rule(dev, "INPUT")) {
        bin = "iptables-legacy";
        remove_rules(bin, dev);
        if let Err(e2) = iptables(bin, "-I", &rule(dev, "INPUT")) {
            bail!("cannot queue packets: {e}; {e2}");
        }
    }
    if let Err(e) = iptables(bin, "-I", &rule(dev, "OUTPUT")) {
        remove_rules(bin, dev);
        bail!("cannot queue packets: {e}");
    }
    Ok(bin)
}

/// Hold each packet for `delay` and let it go in arrival order, until a stop signal or
/// `max`. The inner result is a failure to read the queue (the rules still come off); the
/// outer one a failure to let a packet go.
fn hold(
    q: &mut nfq::Queue,
    delay: Duration,
    max: Duration,
    held: &mut VecDeque<(Instant, nfq::Message)>,
    passed: &mut u64,
) -> anyhow::Result<anyhow::Result<()>> {
    let started = Instant::now();
    while !STOP.load(Ordering::SeqCst) && started.elapsed() < max {
        if let Err(e) = receive(q, delay, held) {
            return Ok(Err(e));
        }
        let now = Instant::now();
        while held.front().is_some_and(|(t, _)| *t <= now) {
            let (_, m) = held.pop_front().unwrap();
            q.verdict(m)?;
            *passed += 1;
        }
        let wait = held.front().map_or(Duration::from_millis(1), |(t, _)| t.saturating_duration_since(now));
        std::thread::sleep(wait.clamp(Duration::from_micros(100), Duration::from_millis(1)));
    }
    Ok(Ok(()))
}

/// Take every packet waiting in the queue, each to be let go `delay` from now.
fn receive(q: &mut nfq::Queue, delay: Duration, held: &mut VecDeque<(Instant, nfq::Message)>) -> anyhow::Result<()> {
    loop {
        match q.recv() {
            Ok(mut m) => {
                m.set_verdict(nfq::Verdict::Accept);
                held.push_back((Instant::now() + delay, m));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(anyhow::Error::from(e).context("reading the netfilter queue")),
        }
    }
}

/// Let go: what is held now, then the rules, then whatever was queued meanwhile.
fn let_go(q: &mut nfq::Queue, held: VecDeque<(Instant, nfq::Message)>, bin: &str, dev: &str) {
    for (_, m) in held {
        let _ = q.verdict(m);
    }
    remove_rules(bin, dev);
    let drain_until = Instant::now() + Duration::from_millis(50);
    while Instant::now() < drain_until {
        match q.recv() {
            Ok(m) => {
                let _ = q.verdict(m);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    let _ = q.unbind(QUEUE);
}
