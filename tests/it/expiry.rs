//! Expiry, measured: what a dead holder costs everyone else. For every backend design, one
//! `dlbench lock` process holds a lock (kept alive as it documents: keep-alive, session pings,
//! or an extension every third of the TTL) while a second one waits for it; the holder's
//! process group is then killed with SIGKILL (no release, no graceful session close: a
//! crash), and the time from the kill to the waiter's grant is the lock's expiry in practice,
//! printed beside the configured TTL. The assertions are the properties, not the timings:
//! no grant while the holder lived (longer than one TTL, so its keep-alive was exercised),
//! and a grant after it died, without anyone releasing.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{dlbench, scratch, sigint, up, wait_exit};

const TTL: &str = "3s";
const BACKENDS: [&str; 12] = ["postgres", "pg-advisory", "pg-advisory-xact", "mariadb", "mariadb-get-lock", "redis", "redisson", "redlock", "zookeeper", "etcd", "etcd-v3lock", "nats"];

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Wait for `path` to appear while `child` runs.
fn wait_for(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_killed_holder_frees_its_lock_only_by_expiry_and_the_delay_is_measured() {
    let dir = scratch("expiry");
    let (mut server, ep) = up(&dir, &["--backends", "all"], &[]);
    // The designs are measured side by side (each its own lock name and processes), so the
    // test lasts one design's wait, not eleven.
    let one = |backend: &'static str| -> (&'static str, f64) {
        let held = dir.join(format!("{backend}.held"));
        let granted = dir.join(format!("{backend}.granted"));
        let name = format!("expiry-{backend}");
        let lock = |marker: &str, wait: bool| {
            let mut c = dlbench();
            c.arg("lock").arg("--endpoints").arg(&ep).args(["--backend", backend, "--ttl", TTL]);
            if wait {
                c.args(["--wait", "60s"]);
            }
            c.args([name.as_str(), "--", "sh", "-c", marker]);
            c
        };
        // The holder in a process group of its own: the kill takes dlbench and its command.
        let mut holder = lock(&format!("touch '{}'; exec sleep 600", held.display()), false).process_group(0).spawn().unwrap();
        assert!(wait_for(&held, Duration::from_secs(60)), "{backend}: the holder never held");
        // The waiter stamps the moment it is granted (seconds since the epoch).
        let mut waiter = lock(&format!("date +%s.%N > '{}'", granted.display()), true).spawn().unwrap();
        // Longer than one TTL: the holder's keep-alive must keep the waiter out.
        std::thread::sleep(Duration::from_secs(4));
        assert!(!granted.exists(), "{backend}: the waiter was granted while the holder lived and kept its lock");
        assert!(waiter.try_wait().unwrap().is_none(), "{backend}: the waiter gave up early");
        let killed = now_s();
        // SAFETY: signalling the process group of our own child.
        unsafe { libc::kill(-(holder.id() as i32), libc::SIGKILL) };
        holder.wait().unwrap();
        let status = wait_exit(&mut waiter, Duration::from_secs(90));
        assert!(status.success(), "{backend}: the waiter was never granted after the holder died ({status})");
        let at: f64 = std::fs::read_to_string(&granted).unwrap().trim().parse().unwrap();
        let delay = at - killed;
        assert!(delay > -0.05, "{backend}: granted {delay:.3} s before the holder was killed");
        (backend, delay)
    };
    let rows: Vec<(&str, f64)> = std::thread::scope(|s| {
        let threads: Vec<_> = BACKENDS.iter().map(|&b| s.spawn(move || one(b))).collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    sigint(&server);
    wait_exit(&mut server, Duration::from_secs(60));
    let mut table = format!("| backend | configured TTL / session timeout | holder killed -> next grant |\n|---|---|---:|\n");
    for (b, d) in &rows {
        table.push_str(&format!("| {b} | {TTL} | {d:.2} s |\n"));
    }
    println!("{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
