//! U2: a `dlbench lock` holder, which keeps its lock alive itself, starved of CPU or paused.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{hit, signed_s, Log, Measurement};
use crate::scenario::scripts::leftover_claims;
use crate::scenario::stage::{opts, Ctx, TTL};

/// How the holder is starved in U2.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Starve {
    /// Pinned to one CPU at the lowest priority (nice 19) beside two busy loops at the
    /// highest (nice -20, where permitted): its share of that CPU is a few per ten thousand.
    Cpu,
    /// Stopped (SIGSTOP) for two TTLs, then continued: a stop-the-world pause.
    Pause,
}

pub const STARVES: [(&str, Starve); 2] = [("CPU starved 3 TTLs", Starve::Cpu), ("paused 2 TTLs", Starve::Pause)];

/// A child process, killed by the PID we started when dropped.
struct Child(tokio::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

fn spawn(program: &str, args: &[&std::ffi::OsStr], log: &std::path::Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(std::process::Stdio::null()).stdout(out.try_clone()?).stderr(out).kill_on_drop(true);
    // SAFETY: the hook makes only async-signal-safe calls (see `die_with_parent`).
    unsafe {
        cmd.pre_exec(crate::util::die_with_parent());
    }
    Ok(Child(cmd.spawn().map_err(|e| anyhow::anyhow!("start {program}: {e}"))?))
}

/// U2 (Redisson #2665 and #5698, etcd #13156, ZooKeeper sessions lost to GC pauses): the
/// holder is a `dlbench lock` process, which keeps its lock by itself (extending every third
/// of the TTL, or by its session's keep-alive) while its command runs, and stops the command
/// when it learns the lock is gone. Starved, does it lose the lock while it believes it holds
/// it (another client granted while its command still runs)? How long until it notices? Is
/// anything of it left on the servers once it has exited?
pub async fn starved_holder(ctx: &Ctx, case: &str, how: Starve) -> anyhow::Result<Measurement> {
    let ttl = TTL;
    let log = Log::new();
    let mut holder = Holder::start(ctx, case, how, ttl, &log)?;
    holder.wait_held(ctx).await?;
    log.at("the holder holds the lock");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let fault_for = if how == Starve::Cpu { ttl * 3 } else { ttl * 2 };
    let started = Instant::now();
    let hogs = starve(how, &holder, fault_for, &log)?;
    let seen = contend(ctx, &mut holder, how, hogs, fault_for, started, &log).await?;
    let (exited, code) = seen.exit.unwrap_or((Instant::now(), -1));
    let said = std::fs::read_to_string(holder.dir.join("holder.log")).unwrap_or_default();
    let said = said.lines().filter(|l| !l.trim().is_empty()).last().unwrap_or("").trim().to_string();
    if seen.exit.is_some() {
        log.at_time(exited, format!("the holder exited {code}: {said}"));
    } else {
        log.at(format!("the holder did not exit: {said}"));
    }
    // Nothing of the holder may be left on the servers once it has gone.
    let left = leftover_claims(&*ctx.backend, &holder.key, Duration::from_secs(2)).await;
    log.at(format!("claims left on the servers: {left:?}"));
    let Holder { child, dir, cpu, pinned, work, .. } = holder;
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);

    let mut h = hit(ctx, "U2", case);
    h.values.insert("lost_while_believed".into(), if seen.believed { 1.0 } else { 0.0 });
    if let Some(g) = seen.granted_s {
        h.values.insert("other_granted_s".into(), g);
    }
    h.values.insert("holder_exit_code".into(), code as f64);
    let exit_s = signed_s(started, exited);
    h.values.insert("holder_exited_s".into(), exit_s);
    let left_n = left.as_ref().map_or(0, |v| v.len());
    h.values.insert("left_after_exit".into(), left_n as f64);
    h.figure = figure(&seen, code, exit_s, &left);
    h.ok = seen.exit.is_some() && left.is_ok();
    if seen.exit.is_none() {
        h.notes.push("the holder did not exit within 40 s of the fault's end".into());
    }
    let about = json!({ "ttl_s": ttl.as_secs_f64(), "fault_s": fault_for.as_secs_f64(), "holder": "dlbench lock (extends every TTL/3, or its session's keep-alive)", "work": format!("sleep {work}"), "cpu": if pinned { Some(cpu) } else { None } });
    Ok((h, log.evidence(about)))
}

/// The holder process: `dlbench lock` on the measurement's key, running `sleep` as its
/// command, with its own directory (endpoints file, output).
struct Holder {
    child: Child,
    pid: i32,
    dir: std::path::PathBuf,
    key: String,
    /// The CPU a CPU-starved holder and its busy loops are pinned to (the last one).
    cpu: String,
    pinned: bool,
    work: &'static str,
}

impl Holder {
    /// Start the holder: pinned to the last CPU at nice 19 when it is to be starved of CPU.
    fn start(ctx: &Ctx, case: &str, how: Starve, ttl: Duration, log: &Log) -> anyhow::Result<Holder> {
        let slug = case.replace(' ', "-");
        let dir = ctx.target.dir.join(format!("u2-{}-{slug}", ctx.kind));
        std::fs::create_dir_all(&dir)?;
        let eps = dir.join("endpoints.toml");
        crate::util::write_atomic(&eps, ctx.target.endpoints().to_toml().as_bytes())?;
        let key = ctx.key(&format!("U2-{slug}"));
        let exe = std::env::current_exe()?;
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
        let cpu = (cpus - 1).to_string();
        let ttl_arg = format!("{}ms", ttl.as_millis());
        let work = "20";
        let mut args: Vec<&std::ffi::OsStr> = Vec::new();
        let pinned = how == Starve::Cpu;
        if pinned {
            args.extend(["-c", cpu.as_str(), "nice", "-n", "19"].map(std::ffi::OsStr::new));
            args.push(exe.as_os_str());
        }
        args.extend(["lock", "--endpoints"].map(std::ffi::OsStr::new));
        args.push(eps.as_os_str());
        args.extend(["--backend", ctx.kind.name(), "--ttl", ttl_arg.as_str(), key.as_str(), "--", "sleep", work].map(std::ffi::OsStr::new));
        let program = if pinned { "taskset".to_string() } else { exe.display().to_string() };
        let child = spawn(&program, &args, &dir.join("holder.log"))?;
        let pid = child.0.id().unwrap_or(0) as i32;
        log.at(format!("holder started: dlbench lock --ttl {ttl_arg} {key} -- sleep {work}{} (pid {pid})", if pinned { format!(", on CPU {cpu} at nice 19") } else { String::new() }));
        Ok(Holder { child, pid, dir, key, cpu, pinned, work })
    }

    /// Held once its claim is on the servers.
    async fn wait_held(&mut self, ctx: &Ctx) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if ctx.backend.claims(&self.key).await.is_ok_and(|c| !c.is_empty()) {
                return Ok(());
            }
            if let Ok(Some(st)) = self.child.0.try_wait() {
                anyhow::bail!("the holder exited before taking the lock ({st}): {}", std::fs::read_to_string(self.dir.join("holder.log")).unwrap_or_default().trim());
            }
            anyhow::ensure!(Instant::now() < deadline, "the holder did not take the lock within 20 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The fault begins: two busy loops at nice -20 on the holder's CPU (returned: dropping
/// them ends the fault), or the holder stopped.
fn starve(how: Starve, holder: &Holder, fault_for: Duration, log: &Log) -> anyhow::Result<Vec<Child>> {
    let mut hogs = Vec::new();
    let cpu = &holder.cpu;
    match how {
        Starve::Cpu => {
            for i in 0..2 {
                let a: Vec<&std::ffi::OsStr> = ["-c", cpu.as_str(), "nice", "-n", "-20", "sh", "-c", "while :; do :; done"].map(std::ffi::OsStr::new).to_vec();
                hogs.push(spawn("taskset", &a, &holder.dir.join(format!("hog-{i}.log")))?);
            }
            log.at(format!("two busy loops at nice -20 on CPU {cpu}, for {:.0} s", fault_for.as_secs_f64()));
        }
        Starve::Pause => {
            // SAFETY: our own child, by the PID we started.
            unsafe { libc::kill(holder.pid, libc::SIGSTOP) };
            log.at(format!("holder stopped (SIGSTOP) for {:.0} s", fault_for.as_secs_f64()));
        }
    }
    Ok(hogs)
}

/// What the fault showed: when another client was granted the lock (from the fault's
/// start), whether the holder still ran its command then, and when and how it exited.
struct Contest {
    granted_s: Option<f64>,
    believed: bool,
    exit: Option<(Instant, i32)>,
}

/// During the fault another client asks for the lock, the holder's exit is watched, and the
/// fault ends after `fault_for` (the busy loops stopped, or the holder continued).
async fn contend(ctx: &Ctx, holder: &mut Holder, how: Starve, hogs: Vec<Child>, fault_for: Duration, started: Instant, log: &Log) -> anyhow::Result<Contest> {
    let ttl = TTL;
    let pid = holder.pid;
    let next = ctx.backend.client().await?;
    let o = opts(ttl, fault_for + ttl).with_retry_interval(Duration::from_millis(20));
    let k = holder.key.clone();
    let grant = async {
        let r = next.acquire(&k, &o).await;
        let at = Instant::now();
        r.map(|l| (l, at))
    };
    // The holder's exit, watched as it happens: whether it was still running (sure of its
    // lock) when the other client got in, and when it noticed.
    let exited_at = Mutex::new(None::<(Instant, i32)>);
    let child = &mut holder.child;
    let watch_exit = async {
        let deadline = Instant::now() + fault_for + Duration::from_secs(40);
        loop {
            match child.0.try_wait() {
                Ok(Some(st)) => {
                    *exited_at.lock().unwrap() = Some((Instant::now(), st.code().unwrap_or(-1)));
                    return;
                }
                Ok(None) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
                _ => return,
            }
        }
    };
    let heal = async {
        tokio::time::sleep(fault_for).await;
        match how {
            Starve::Cpu => {
                drop(hogs);
                log.at("busy loops stopped");
            }
            Starve::Pause => {
                // SAFETY: our own child, by the PID we started.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                log.at("holder continued (SIGCONT)");
            }
        }
    };
    let (granted, (), ()) = tokio::join!(grant, heal, watch_exit);
    let exit = *exited_at.lock().unwrap();
    let mut believed = false;
    let granted_s = match granted {
        Ok((l, at)) => {
            believed = exit.is_none_or(|(t, _)| at < t);
            log.at_time(at, format!("another client was granted the lock{}", if believed { " while the holder still ran its command: lost while it believed it held it" } else { ", the holder having exited" }));
            let _ = next.release(l).await;
            Some(signed_s(started, at))
        }
        Err(e) => {
            log.at(format!("another client was not granted the lock: {e}"));
            None
        }
    };
    next.close().await;
    Ok(Contest { granted_s, believed, exit })
}

/// The figure: whether the lock was lost while the holder believed it held it, how the
/// holder ended, and what it left on the servers.
fn figure(seen: &Contest, code: i32, exit_s: f64, left: &Result<Vec<String>, String>) -> String {
    let lost = match seen.granted_s {
        Some(g) if seen.believed => format!("lost while it believed it held it (another client granted {g:.1} s into the fault)"),
        Some(g) => format!("another client granted {g:.1} s into the fault, after the holder exited"),
        None => "kept: no other client was granted it".into(),
    };
    let exit_txt = match code {
        0 => "the holder finished and released normally".to_string(),
        1 => format!("the holder noticed and stopped its command, {exit_s:.1} s after the fault began"),
        c => format!("the holder exited {c}"),
    };
    format!(
        "{lost}; {exit_txt}; {}",
        match left {
            Ok(v) if v.is_empty() => "nothing left on the servers".to_string(),
            Ok(v) => format!("{} claim(s) left on the servers after it exited", v.len()),
            Err(e) => format!("the servers could not be read: {e}"),
        }
    )
}
