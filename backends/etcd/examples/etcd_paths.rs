//! Where does an etcd lock cycle's time go? The same load on the same cluster through two
//! paths, each printing the JSON line `peers/go/etcd-mutex` prints, so
//! `scripts/etcd-paths.sh` can set them beside Go's:
//!
//! - `--mode rpc`: the RPCs of an uncontended lock cycle and nothing else: each client its
//!   own channel and lease, its own keys (no contention), the claim transaction Go's
//!   `Mutex.Lock` sends, then a delete; Go's `-mode rpc` sends the same through `clientv3`.
//!   Rust against Go here is `etcd-client` on tonic against grpc-go.
//! - `--mode lock`: this crate's lock (per-client channel and session), acquire + release
//!   on a key chosen uniformly from `--keys`, with no driver, resource or history around it;
//!   Go's `-mode mutex` is `concurrency.Mutex` on the same keys.
//!
//!     cargo run --release -p dlbench-etcd --example etcd_paths -- \
//!         --endpoints 127.0.0.1:2379 --mode rpc --clients 8 --seconds 5
use std::time::{Duration, Instant};

use dlbench_core::{AcquireOptions, Backend, Connections};
use dlbench_etcd::{EtcdBackend, EtcdConfig};
use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};

struct Args {
    endpoints: Vec<String>,
    mode: String,
    clients: usize,
    keys: u64,
    seconds: f64,
    warmup: f64,
    prefix: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        endpoints: Vec::new(),
        mode: "rpc".into(),
        clients: 8,
        keys: 64,
        seconds: 5.0,
        warmup: 1.0,
        prefix: format!("paths-{}", std::process::id()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |what: &str| format!("{flag}: {v:?} is not {what}");
        match flag.as_str() {
            "--endpoints" => a.endpoints = v.split(',').map(String::from).collect(),
            "--mode" if v == "rpc" || v == "lock" => a.mode = v,
            "--mode" => return Err(bad("rpc or lock")),
            "--clients" => a.clients = v.parse().map_err(|_| bad("a whole number"))?,
            "--keys" => a.keys = v.parse().map_err(|_| bad("a whole number"))?,
            "--seconds" => a.seconds = v.parse().map_err(|_| bad("a number"))?,
            "--warmup" => a.warmup = v.parse().map_err(|_| bad("a number"))?,
            "--prefix" => a.prefix = v,
            _ => return Err(format!("unknown flag {flag} (--endpoints --mode --clients --keys --seconds --warmup --prefix)")),
        }
    }
    if a.endpoints.is_empty() {
        return Err("--endpoints host:port[,host:port...] is required".into());
    }
    Ok(a)
}

/// What one client counted in the measured window.
#[derive(Default)]
struct Count {
    done: u64,
    errors: u64,
    lat_us: Vec<f64>,
}

impl Count {
    fn record(&mut self, t0: Instant, t1: Instant, begin: Instant, end: Instant) {
        if t1 >= begin && t1 <= end {
            self.done += 1;
            if t0 >= begin {
                self.lat_us.push((t1 - t0).as_secs_f64() * 1e6);
            }
        }
    }
}

/// Go's `Mutex.Lock` transaction on our own key, then Go's `Unlock` (a delete).
async fn rpc_client(mut c: Client, i: usize, a: &Args, begin: Instant, end: Instant) -> anyhow::Result<Count> {
    let lease = c.lease_grant(10, None).await?.id();
    let (mut keeper, _stream) = c.lease_keep_alive(lease).await?;
    let mut n = Count::default();
    let mut k = 0u64;
    let mut last_keepalive = Instant::now();
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        if last_keepalive.elapsed() > Duration::from_secs(3) {
            keeper.keep_alive().await?;
            last_keepalive = Instant::now();
        }
        let pfx = format!("/{}-rpc-{i}-{}/", a.prefix, k % a.keys);
        k += 1;
        let my_key = format!("{pfx}{lease:x}");
        let first = GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend).with_limit(1);
        let txn = Txn::new()
            .when([Compare::create_revision(my_key.as_str(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(my_key.as_str(), "", Some(PutOptions::new().with_lease(lease))),
                TxnOp::get(pfx.as_str(), Some(first.clone())),
            ])
            .or_else([TxnOp::get(my_key.as_str(), None), TxnOp::get(pfx.as_str(), Some(first))]);
        if c.txn(txn).await.is_err() {
            n.errors += 1;
            continue;
        }
        let t1 = Instant::now();
        if c.delete(my_key, None).await.is_err() {
            n.errors += 1;
        }
        n.record(t0, t1, begin, end);
    }
    c.lease_revoke(lease).await?;
    Ok(n)
}

/// This crate's lock, acquire then release, with nothing around it.
async fn lock_client(lock: Box<dyn dlbench_core::DistLock>, i: usize, a: &Args, begin: Instant, end: Instant) -> Count {
    // The same generator on every run, a different stream per client.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1).wrapping_mul(1_000_003);
    let opts = AcquireOptions::default().with_wait(Duration::from_secs(5));
    let mut n = Count::default();
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("/{}-{}", a.prefix, x % a.keys);
        let lease = match lock.acquire(&key, &opts).await {
            Ok(l) => l,
            Err(_) => {
                n.errors += 1;
                continue;
            }
        };
        let t1 = Instant::now();
        if lock.release(lease).await.is_err() {
            n.errors += 1;
        }
        n.record(t0, t1, begin, end);
    }
    n
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = match parse() {
        Ok(a) => std::sync::Arc::new(a),
        Err(e) => {
            eprintln!("etcd_paths: {e}");
            std::process::exit(2);
        }
    };
    let mut tasks = tokio::task::JoinSet::new();
    let (begin, end);
    if a.mode == "rpc" {
        let mut conns = Vec::new();
        for _ in 0..a.clients {
            conns.push(Client::connect(a.endpoints.clone(), None).await?);
        }
        begin = Instant::now() + Duration::from_secs_f64(a.warmup);
        end = begin + Duration::from_secs_f64(a.seconds);
        for (i, c) in conns.into_iter().enumerate() {
            let a = a.clone();
            tasks.spawn(async move { rpc_client(c, i, &a, begin, end).await });
        }
    } else {
        let backend = EtcdBackend::connect_with(EtcdConfig::new(a.endpoints.clone()), Connections::PerClient).await?;
        let mut locks = Vec::new();
        for _ in 0..a.clients {
            locks.push(backend.client().await?);
        }
        begin = Instant::now() + Duration::from_secs_f64(a.warmup);
        end = begin + Duration::from_secs_f64(a.seconds);
        for (i, l) in locks.into_iter().enumerate() {
            let a = a.clone();
            tasks.spawn(async move { Ok(lock_client(l, i, &a, begin, end).await) });
        }
    }
    let (mut done, mut errors, mut lat) = (0u64, 0u64, Vec::new());
    while let Some(r) = tasks.join_next().await {
        let n = r??;
        done += n.done;
        errors += n.errors;
        lat.extend(n.lat_us);
    }
    lat.sort_by(f64::total_cmp);
    let pct = |q: f64| lat.get(((q * lat.len() as f64) as usize).min(lat.len().saturating_sub(1))).copied();
    let client = if a.mode == "rpc" { "etcd-client 0.21 (tonic) raw RPCs" } else { "dlbench-etcd lock, no driver" };
    println!(
        "{{\"client\":\"{client}\",\"mode\":\"{}\",\"clients\":{},\"keys\":{},\"acquisitions\":{done},\"seconds\":{},\"per_sec\":{},\"errors\":{errors},\"p50_us\":{},\"p99_us\":{}}}",
        a.mode,
        a.clients,
        a.keys,
        a.seconds,
        done as f64 / a.seconds,
        pct(0.5).map_or("null".into(), |v| format!("{v:.0}")),
        pct(0.99).map_or("null".into(), |v| format!("{v:.0}")),
    );
    Ok(())
}
