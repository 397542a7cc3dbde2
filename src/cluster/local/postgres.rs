//! PostgreSQL x1: initdb into the runtime directory, then the server, as the `postgres` user
//! when dlbench runs as root (PostgreSQL refuses to run as root). The log is opened by
//! dlbench and handed over as stdout/stderr, so it can stay in a private `--out`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::process::Spec;
use super::NodePlan;

/// (uid, gid) of the `postgres` account when we are root.
pub fn run_as() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = std::ffi::CString::new("postgres").unwrap();
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err("dlbench runs as root and PostgreSQL refuses root, but there is no `postgres` user: \
                    install the Debian package postgresql, which creates it"
            .into());
    }
    Ok(Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) }))
}

fn chown_tree(p: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(p, Some(uid), Some(gid))?;
    if p.is_dir() {
        for e in std::fs::read_dir(p)? {
            chown_tree(&e?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Run initdb (synchronously) and return the server's spec. With a password, the
/// `postgres` user needs it (SCRAM); without, loopback connections are trusted.
/// `durability`: (setting, value) pairs, each a `-c setting=value` (none: the server's defaults).
pub fn prepare(initdb: &Path, postgres: &Path, dir: &Path, logs: &Path, port: u16, password: Option<&str>, durability: &[(&str, &str)]) -> Result<NodePlan, String> {
    let home = dir.join("postgres-1");
    let data = home.join("data");
    std::fs::create_dir_all(&home).map_err(|e| format!("create {}: {e}", home.display()))?;
    let user = run_as()?;
    if let Some((uid, gid)) = user {
        chown_tree(&home, uid, gid).map_err(|e| format!("chown {}: {e}", home.display()))?;
    }
    let pwfile = home.join("initdb-password");
    let mut cmd = Command::new(initdb);
    cmd.args(["-D"]).arg(&data).args(["-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"]).env("LC_ALL", "C");
    match password {
        Some(pw) => {
            super::redis::write_private(&pwfile, &format!("{pw}\n")).map_err(|e| format!("write {}: {e}", pwfile.display()))?;
            if let Some((uid, gid)) = user {
                let _ = std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid));
            }
            cmd.arg("--auth=scram-sha-256").arg(format!("--pwfile={}", pwfile.display()));
        }
        None => {
            cmd.arg("--auth=trust");
        }
    }
    if let Some((uid, gid)) = user {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(gid);
    }
    let out = cmd.output().map_err(|e| format!("run {}: {e}", initdb.display()));
    let _ = std::fs::remove_file(&pwfile);
    let out = out?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().filter(|l| !l.trim().is_empty()).last().unwrap_or("").trim();
        return Err(format!(
            "initdb failed in {} ({last}); if the postgres user cannot reach that directory, set {} to a directory every user may pass through",
            data.display(),
            super::runtime::ENV
        ));
    }
    let mut spec = Spec::new("postgres-1", postgres, logs.join("postgres-1").join("log")).args([
        "-D".to_string(),
        data.display().to_string(),
        "-p".into(),
        port.to_string(),
        "-c".into(),
        "listen_addresses=127.0.0.1".into(),
        "-c".into(),
        format!("unix_socket_directories={}", home.display()),
        "-c".into(),
        "max_connections=300".into(),
        "-c".into(),
        "logging_collector=off".into(),
    ]);
    for (k, v) in durability {
        spec = spec.args(["-c".to_string(), format!("{k}={v}")]);
    }
    spec.user = user;
    // SIGINT is PostgreSQL's "fast" shutdown: abort transactions, stop at once.
    spec.stop_signal = libc::SIGINT;
    spec.env.push(("LC_ALL".into(), "C".into()));
    Ok(NodePlan { spec, client_addr: format!("127.0.0.1:{port}"), data, clock_file: None })
}

fn options(ep: &str, password: Option<&str>) -> sqlx::postgres::PgConnectOptions {
    let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "5432"));
    let o = sqlx::postgres::PgConnectOptions::new()
        .host(host)
        .port(port.parse().unwrap_or(5432))
        .username("postgres")
        .database("postgres");
    match password {
        Some(pw) => o.password(pw),
        None => o,
    }
}

pub async fn healthy(endpoints: &[String], password: Option<&str>, within: Duration) -> Result<(), String> {
    use sqlx::ConnectOptions;
    for ep in endpoints {
        let fut = async {
            let mut c = options(ep, password).connect().await.map_err(|e| format!("{ep}: {e}"))?;
            sqlx::query("SELECT 1").execute(&mut c).await.map_err(|e| format!("{ep}: {e}"))?;
            Ok::<_, String>(())
        };
        tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer"))??;
    }
    Ok(())
}

pub async fn version(ep: &str, password: Option<&str>, within: Duration) -> Result<String, String> {
    use sqlx::ConnectOptions;
    let fut = async {
        let mut c = options(ep, password).connect().await.map_err(|e| e.to_string())?;
        sqlx::query_scalar::<_, String>("SHOW server_version").fetch_one(&mut c).await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer"))?
}

/// One setting as the server reports it (`SHOW name`): what a compose or external server
/// runs with, and the check that the local target's durability took effect.
pub async fn show(ep: &str, password: Option<&str>, name: &str, within: Duration) -> Result<String, String> {
    use sqlx::ConnectOptions;
    let fut = async {
        let mut c = options(ep, password).connect().await.map_err(|e| e.to_string())?;
        sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!("SHOW {name}"))).fetch_one(&mut c).await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer"))?
}
