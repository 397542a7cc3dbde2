//! MariaDB x1: `mariadb-install-db` into the runtime directory, a bootstrap run that creates
//! the `dlbench` user (on 127.0.0.1) and database, then the server on 127.0.0.1.
//!
//! The password, when there is one, reaches the bootstrap run on its standard input and is
//! stored only as the server's hash in its data directory (removed at stop): no file holds
//! it, and the server's command line does not name it.
//!
//! Health and version come from the server's greeting, which it sends before any
//! authentication, so the probes need no credentials (an external server's user may not be
//! ours).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::process::Spec;
use super::NodePlan;

/// The user and database the local target creates.
pub const USER: &str = "dlbench";
pub const DATABASE: &str = "dlbench";

fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// Run the server as root only when we are root (it refuses otherwise unless told).
fn as_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn run(cmd: &mut Command, what: &str, stdin: Option<&str>) -> Result<(), String> {
    let mut child = cmd
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("run {what}: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).map_err(|e| format!("{what}: write its input: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // The last line naming an error, else the last line.
        let last = err.lines().filter(|l| l.to_ascii_lowercase().contains("error")).last().or(err.lines().last()).unwrap_or("").trim();
        return Err(format!("{what} failed ({last})"));
    }
    Ok(())
}

/// Initialize the data directory (synchronously) and return the server's spec.
/// `durability`: (variable, value) pairs, each a `--variable=value` (none: the defaults).
pub fn prepare(install_db: &Path, mariadbd: &Path, dir: &Path, logs: &Path, port: u16, password: Option<&str>, durability: &[(&str, &str)]) -> Result<NodePlan, String> {
    let home = dir.join("mariadb-1");
    let data = home.join("data");
    std::fs::create_dir_all(&home).map_err(|e| format!("create {}: {e}", home.display()))?;
    let root = as_root();
    let mut install = Command::new(install_db);
    install.arg("--no-defaults").arg(format!("--datadir={}", data.display())).arg("--skip-test-db");
    install.arg("--auth-root-authentication-method=socket");
    if root {
        install.arg("--user=root");
    }
    run(&mut install, "mariadb-install-db", None)?;
    let identified = password.map(|p| format!(" IDENTIFIED BY {}", sql_string(p))).unwrap_or_default();
    let sql = format!(
        "FLUSH PRIVILEGES;\nCREATE USER '{USER}'@'127.0.0.1'{identified};\nGRANT ALL ON *.* TO '{USER}'@'127.0.0.1';\nCREATE DATABASE {DATABASE};\n"
    );
    let mut boot = Command::new(mariadbd);
    boot.arg("--no-defaults").arg("--bootstrap").arg(format!("--datadir={}", data.display()));
    if root {
        boot.arg("--user=root");
    }
    run(&mut boot, "mariadbd --bootstrap", Some(&sql))?;
    let mut spec = Spec::new("mariadb-1", mariadbd, logs.join("mariadb-1").join("log")).args([
        "--no-defaults".to_string(),
        format!("--datadir={}", data.display()),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--socket={}", home.join("sock").display()),
        format!("--pid-file={}", home.join("pid").display()),
        // The user is 'dlbench'@'127.0.0.1': match it by address, never by DNS.
        "--skip-name-resolve".into(),
        "--max-connections=300".into(),
    ]);
    for (k, v) in durability {
        spec = spec.arg(format!("--{k}={v}"));
    }
    if root {
        spec = spec.arg("--user=root");
    }
    Ok(NodePlan { spec, client_addr: format!("127.0.0.1:{port}"), data, clock_file: None })
}

/// The server's greeting: protocol 10, then its version, NUL-terminated ("5.5.5-" is
/// MariaDB's prefix for old clients).
pub async fn greeting(ep: &str, within: Duration) -> Result<String, String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(ep).await.map_err(|e| format!("{ep}: {e}"))?;
        let mut buf = vec![0u8; 256];
        let mut n = 0;
        while n < 5 || !buf[5..n].contains(&0) {
            let got = s.read(&mut buf[n..]).await.map_err(|e| format!("{ep}: {e}"))?;
            if got == 0 || n + got >= buf.len() {
                return Err(format!("{ep}: not a MariaDB/MySQL greeting"));
            }
            n += got;
        }
        match buf[4] {
            10 => {}
            // An error packet: the server refuses (too many connections, host blocked).
            0xff => return Err(format!("{ep}: refused: {}", String::from_utf8_lossy(&buf[7.min(n)..n]).trim())),
            _ => return Err(format!("{ep}: not a MariaDB/MySQL greeting")),
        }
        let end = buf[5..n].iter().position(|&b| b == 0).unwrap() + 5;
        let v = String::from_utf8_lossy(&buf[5..end]).to_string();
        Ok(v.strip_prefix("5.5.5-").map(str::to_string).unwrap_or(v))
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer"))?
}

pub async fn healthy(endpoints: &[String], within: Duration) -> Result<(), String> {
    for ep in endpoints {
        greeting(ep, within).await?;
    }
    Ok(())
}

pub async fn version(ep: &str, within: Duration) -> Result<String, String> {
    greeting(ep, within).await
}

/// One global variable as the server reports it (`SELECT @@GLOBAL.name`), logged in as `user`.
pub async fn variable(ep: &str, user: &str, password: Option<&str>, name: &str, within: Duration) -> Result<String, String> {
    use sqlx::ConnectOptions;
    let (host, port) = ep.rsplit_once(':').unwrap_or((ep, "3306"));
    let mut o = sqlx::mysql::MySqlConnectOptions::new().host(host).port(port.parse().unwrap_or(3306)).username(user);
    if let Some(pw) = password {
        o = o.password(pw);
    }
    let fut = async {
        let mut c = o.connect().await.map_err(|e| e.to_string())?;
        let v: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT CAST(@@GLOBAL.{name} AS CHAR)"))).fetch_one(&mut c).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(v)
    };
    tokio::time::timeout(within, fut).await.map_err(|_| format!("{ep}: no answer"))?
}
