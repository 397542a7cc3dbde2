//! `dlbench lock`: hold a lock while a command runs, like `etcdctl lock NAME -- CMD`.
//!
//! NAME is used verbatim as the etcd lock name, the Redis key and (with a leading `/` added
//! when missing) the ZooKeeper lock directory, so other clients of the same recipe contend
//! with it. While the command runs the lock is kept: session backends by their keep-alive,
//! TTL backends by extending every third of the TTL.
//!
//! The command is stopped rather than left running without the lock:
//! - if the lock is lost, the command gets SIGTERM at once and dlbench exits 1 once it has
//!   ended;
//! - SIGTERM or SIGHUP to dlbench: the command gets SIGTERM (a second signal: SIGKILL) while
//!   the lock is still kept; once it has ended the lock is released and dlbench exits
//!   128 + the signal's number (143, 129);
//! - SIGINT (Ctrl-C) reaches the command from the terminal; dlbench waits for it as usual;
//! - if dlbench itself dies (SIGKILL), the kernel kills the command (parent-death signal),
//!   before the lock's TTL can hand the lock to someone else;
//! - a release at the end that finds the lock already gone exits 1: the command may have
//!   run without it.

use std::path::Path;
use std::time::Duration;

use dlbench_core::{AcquireOptions, DistLock, Lease, LockError};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::connect::{self, Timeouts};
use crate::endpoints::Endpoints;
use crate::kind::BackendKind;

/// Below this, keeping a lock alive from a shell is all refresh and no hold: extensions go
/// every third of the TTL and one slow round trip loses the lock.
pub const MIN_TTL: Duration = Duration::from_millis(100);

pub struct LockArgs<'a> {
    pub endpoints: &'a Path,
    pub backend: BackendKind,
    pub name: &'a str,
    pub ttl: Duration,
    pub wait: Option<Duration>,
    pub lock_delay: Duration,
    pub command: &'a [String],
}

/// SIGTERM and SIGHUP, which stop the command.
struct StopSignals {
    term: Signal,
    hup: Signal,
}

impl StopSignals {
    fn install() -> anyhow::Result<Self> {
        Ok(StopSignals { term: signal(SignalKind::terminate())?, hup: signal(SignalKind::hangup())? })
    }

    /// The next SIGTERM or SIGHUP, as its number.
    async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// Send `sig` to the command, by the PID we spawned (none once it has been reaped).
fn signal_child(child: &tokio::process::Child, sig: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling our own child by the PID we spawned.
        unsafe { libc::kill(pid as i32, sig) };
    }
}

pub async fn lock(a: LockArgs<'_>) -> anyhow::Result<i32> {
    let (program, args) = check(&a)?;
    let endpoints = Endpoints::load(a.endpoints)?;
    // From here on SIGTERM and SIGHUP no longer kill us outright: each is handled below.
    let mut stops = StopSignals::install()?;
    let (client, mut lease) = match acquire(&a, &endpoints, &mut stops).await? {
        Ok(held) => held,
        Err(code) => return Ok(code),
    };
    let mut cmd = command(&a, program, args, &lease);
    // Ctrl-C reaches the command too (same terminal); we wait for it to finish. Listening
    // keeps SIGINT from killing dlbench while the command still runs under the lock.
    let mut int = signal(SignalKind::interrupt())?;
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = client.release(lease).await;
            client.close().await;
            anyhow::bail!("cannot run {program}: {e}");
        }
    };
    let (status, stopped_by) = keep(&a, client.as_ref(), &mut lease, &mut child, &mut stops, &mut int).await?;
    let Some(status) = status else {
        signal_child(&child, libc::SIGTERM);
        let _ = child.wait().await;
        client.close().await;
        return Ok(1);
    };
    let released = client.release(lease).await;
    client.close().await;
    match released {
        Ok(()) => {}
        Err(e @ (LockError::NotHeld(_) | LockError::SessionLost(_))) => {
            eprintln!("dlbench lock: {:?} was already gone when the command ended ({e}); it may have run without the lock", a.name);
            return Ok(1);
        }
        Err(e) => eprintln!("dlbench lock: release of {:?} failed: {e}", a.name),
    }
    if let Some(sig) = stopped_by {
        return Ok(128 + sig);
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Refuse what cannot work before anything connects; the command and its arguments.
fn check<'a>(a: &LockArgs<'a>) -> anyhow::Result<(&'a String, &'a [String])> {
    if a.ttl < MIN_TTL {
        anyhow::bail!("--ttl {:?} is too short: a lock held from the shell needs at least {:?}", a.ttl, MIN_TTL);
    }
    if !a.lock_delay.is_zero() && !a.backend.lock_delay() {
        let has: Vec<&str> = BackendKind::ALL.iter().filter(|k| k.lock_delay()).map(|k| k.name()).collect();
        anyhow::bail!("--lock-delay: {} has no lock-delay (it is offered by: {}); drop the flag or pick one of those", a.backend, has.join(", "));
    }
    a.command.split_first().ok_or_else(|| anyhow::anyhow!("no command given after --"))
}

/// Connect and acquire the lock; `Err(code)` when a stop signal came first (the exit
/// status to give).
async fn acquire(
    a: &LockArgs<'_>,
    endpoints: &Endpoints,
    stops: &mut StopSignals,
) -> anyhow::Result<Result<(Box<dyn DistLock>, Lease), i32>> {
    let backend = tokio::select! {
        b = connect::connect(a.backend, endpoints, Timeouts::default(), None) => b.map_err(|e| anyhow::anyhow!("{}: {e}", a.backend))?,
        sig = stops.recv() => {
            eprintln!("dlbench lock: {} while connecting; giving up", signal_name(sig));
            return Ok(Err(128 + sig));
        }
    };
    let client = backend.client().await.map_err(|e| anyhow::anyhow!("{}: {e}", a.backend))?;
    // No --wait means wait as long as it takes, as etcdctl does.
    let wait = a.wait.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    let opts = AcquireOptions::default().with_ttl(a.ttl).with_wait(wait).with_retry_interval(Duration::from_millis(50)).with_lock_delay(a.lock_delay);
    let acquired = tokio::select! {
        r = client.acquire(a.name, &opts) => r,
        sig = stops.recv() => {
            eprintln!("dlbench lock: {} while waiting for {:?}; giving up", signal_name(sig), a.name);
            // Ends the session of a session backend, and with it a claim we may have left.
            client.close().await;
            return Ok(Err(128 + sig));
        }
    };
    let lease = acquired.map_err(|e| anyhow::anyhow!("cannot acquire {:?} on {}: {e}", a.name, a.backend))?;
    Ok(Ok((client, lease)))
}

/// The command, told the lock's name, backend and token, and killed if dlbench dies.
fn command(a: &LockArgs<'_>, program: &str, args: &[String], lease: &Lease) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).env("DLBENCH_LOCK_NAME", a.name).env("DLBENCH_LOCK_BACKEND", a.backend.name());
    if let Some(t) = lease.token {
        cmd.env("DLBENCH_LOCK_TOKEN", t.to_string());
    }
    // If dlbench dies without stopping the command (SIGKILL, a crash), the kernel kills it:
    // otherwise it would run on while the lock expires and another client takes it. The
    // signal follows the thread that forked; this runs on the thread that blocks on the
    // runtime (or a runtime worker), which lives as long as the process.
    // SAFETY: the hook makes only async-signal-safe calls (see `die_with_parent`).
    unsafe {
        cmd.pre_exec(crate::util::die_with_parent());
    }
    cmd
}

/// Keep the lock while the command runs: its exit status (none when the lock was lost or
/// could not be kept) and the stop signal that came meanwhile, if any.
async fn keep(
    a: &LockArgs<'_>,
    client: &dyn DistLock,
    lease: &mut Lease,
    child: &mut tokio::process::Child,
    stops: &mut StopSignals,
    int: &mut Signal,
) -> anyhow::Result<(Option<std::process::ExitStatus>, Option<i32>)> {
    let mut lost = lease.lost.clone();
    let mut refresh = tokio::time::interval((a.ttl / 3).max(Duration::from_millis(100)));
    refresh.tick().await;
    let mut stopped_by: Option<i32> = None;
    let status = loop {
        tokio::select! {
            s = child.wait() => break Some(s?),
            reason = lost.lost() => {
                eprintln!("dlbench lock: lost {:?}: {reason}; stopping the command", a.name);
                break None;
            }
            // Keep the lock while the command runs, also while it shuts down after a signal.
            _ = refresh.tick() => {
                if let Err(e) = client.extend(lease, a.ttl).await {
                    eprintln!("dlbench lock: could not keep {:?}: {e}; stopping the command", a.name);
                    break None;
                }
            }
            sig = stops.recv() => {
                if stopped_by.is_none() {
                    eprintln!("dlbench lock: {}; stopping the command", signal_name(sig));
                    stopped_by = Some(sig);
                    signal_child(child, libc::SIGTERM);
                } else {
                    eprintln!("dlbench lock: {} again; killing the command", signal_name(sig));
                    signal_child(child, libc::SIGKILL);
                }
            }
            _ = int.recv() => {}
        }
    };
    Ok((status, stopped_by))
}
