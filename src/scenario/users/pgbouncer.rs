//! U6: session advisory locks through PgBouncer's transaction pooling, and the safe setups
//! beside it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlbench_core::Resource;
use serde_json::json;

use super::{hit, Log, Measurement};
use crate::kind::BackendKind;
use crate::scenario::stage::Ctx;

/// The U6 cases on a backend: (case, pooling mode, transaction-level lock, expect trouble).
pub fn poolings(kind: BackendKind) -> Vec<(&'static str, &'static str, bool, bool)> {
    match kind {
        BackendKind::PgAdvisory => vec![
            ("transaction pooling", "transaction", false, true),
            ("session pooling", "session", false, false),
        ],
        BackendKind::PgAdvisoryXact => vec![("transaction pooling, transaction lock", "transaction", true, false)],
        _ => vec![],
    }
}

/// Where PgBouncer is, if installed (Debian keeps it in /usr/sbin).
pub fn pgbouncer_bin() -> Option<std::path::PathBuf> {
    crate::cluster::local::bins::which("pgbouncer").or_else(|| {
        let p = std::path::PathBuf::from("/usr/sbin/pgbouncer");
        p.exists().then_some(p)
    })
}

/// The advisory lock key U6 uses.
const U6_KEY: i64 = 917_006;
const U6_CLIENTS: usize = 4;
const U6_FOR: Duration = Duration::from_secs(4);

/// A PgBouncer started for one case, stopped (by its pid) when dropped.
struct Bouncer(Arc<crate::cluster::local::process::Process>);

impl Drop for Bouncer {
    fn drop(&mut self) {
        self.0.stop(Duration::from_secs(2));
    }
}

/// U6: four clients take and release one advisory lock through PgBouncer for a few
/// seconds; the resource counts double grants; refused unlocks and locks left on the
/// server once every client has gone are counted. Transaction pooling with the session
/// lock is expected to break; session pooling, and the transaction lock, are not.
pub async fn pgbouncer(ctx: &Ctx, case: &str, mode: &str, xact: bool, trouble: bool) -> anyhow::Result<Measurement> {
    let bin = pgbouncer_bin().ok_or_else(|| anyhow::anyhow!("pgbouncer is not installed (apt-get install pgbouncer)"))?;
    anyhow::ensure!(ctx.target.password().is_none(), "U6 runs on dlbench's own PostgreSQL without a password");
    let (setup, spec) = Setup::write(ctx, case, mode, &bin)?;
    let log = Log::new();
    let bouncer = Bouncer(crate::cluster::local::process::Process::start(spec)?);
    log.at(format!("pgbouncer started, pool_mode = {mode}, default_pool_size = 2, pid {}", bouncer.0.pid));
    setup.wait_listening(&bouncer).await?;
    let counts = Counts { resource: Resource::new(1), grants: AtomicU64::new(0), refused_unlocks: AtomicU64::new(0), errors: Mutex::default() };
    let lock_fn = if xact { "pg_try_advisory_xact_lock" } else { "pg_try_advisory_lock" };
    let until = Instant::now() + U6_FOR;
    futures::future::join_all((0..U6_CLIENTS).map(|i| client(i, setup.port, xact, lock_fn, until, &counts, &log))).await;
    // Every client has gone. What PostgreSQL still holds for the key lives on PgBouncer's
    // server connections: stranded, until those connections close.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stranded = stranded(setup.pg_port.parse()?).await?;
    log.at(format!("every client gone: {stranded} advisory lock(s) on the key still held on the server"));
    drop(bouncer);
    log.at("pgbouncer stopped");
    let _ = std::fs::remove_dir_all(&setup.dir);

    let stats = counts.resource.stats().total;
    let grants = counts.grants.load(Ordering::Relaxed);
    let refused = counts.refused_unlocks.load(Ordering::Relaxed);
    let errors = counts.errors.into_inner().unwrap();
    let mut h = hit(ctx, "U6", case);
    h.values.insert("grants".into(), grants as f64);
    h.values.insert("overlaps".into(), stats.overlaps as f64);
    h.values.insert("lost_updates".into(), stats.lost_updates as f64);
    h.values.insert("refused_unlocks".into(), refused as f64);
    h.values.insert("stranded".into(), stranded as f64);
    h.values.insert("errors".into(), errors.len() as f64);
    let broken = stats.overlaps > 0 || refused > 0 || stranded > 0;
    h.figure = format!(
        "{} double grant(s) in {grants} grants, {refused} unlock(s) refused, {stranded} lock(s) stranded after every client left{}",
        stats.overlaps,
        if errors.is_empty() { String::new() } else { format!(", {} client error(s): {}", errors.len(), errors[0]) }
    );
    h.expected = Some(if trouble { "double grants, refused unlocks or stranded locks".into() } else { "none of them, and no error".into() });
    h.ok = grants > 0 && if trouble { broken } else { !broken && errors.is_empty() };
    if grants == 0 {
        h.notes.push("no client was ever granted the lock: nothing measured".into());
    }
    let about = json!({ "pool_mode": mode, "default_pool_size": 2, "clients": U6_CLIENTS, "seconds": U6_FOR.as_secs_f64(), "lock": lock_fn, "key": U6_KEY, "pgbouncer": bin.display().to_string() });
    Ok((h, log.evidence(about)))
}

/// One case's PgBouncer before it starts: its directory and configuration, the port it
/// listens on (claimed until the case ends) and PostgreSQL's.
struct Setup {
    dir: std::path::PathBuf,
    port: u16,
    pg_port: String,
    _ports: crate::cluster::local::ports::PortClaims,
}

impl Setup {
    /// Write the configuration for pooling `mode` in a directory of its own; returns the
    /// process to start.
    fn write(ctx: &Ctx, case: &str, mode: &str, bin: &std::path::Path) -> anyhow::Result<(Setup, crate::cluster::local::process::Spec)> {
        let node = ctx.target.nodes_of(ctx.kind).into_iter().next().ok_or_else(|| anyhow::anyhow!("no PostgreSQL node"))?;
        let (pg_host, pg_port) = node.real_addr.rsplit_once(':').ok_or_else(|| anyhow::anyhow!("no port in {}", node.real_addr))?;
        let mut ports = crate::cluster::local::ports::PortClaims::new();
        let port = ports.claim()?;
        let dir = ctx.target.dir.join(format!("pgbouncer-{}", case.replace([' ', ','], "-")));
        std::fs::create_dir_all(&dir)?;
        let ini = dir.join("pgbouncer.ini");
        // Loopback only; `auth_type = any` because dlbench's own PostgreSQL trusts loopback
        // (no password anywhere on disk); sqlx's extra_float_digits start-up parameter is the
        // one PgBouncer must be told to ignore. Session pooling resets each server connection
        // (DISCARD ALL, which drops advisory locks) when its client leaves.
        std::fs::write(
            &ini,
            format!(
                "[databases]\npostgres = host={pg_host} port={pg_port} dbname=postgres user=postgres\n\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = any\n\
                 pool_mode = {mode}\ndefault_pool_size = 2\nmax_client_conn = 50\n\
                 ignore_startup_parameters = extra_float_digits\nlogfile =\npidfile =\n"
            ),
        )?;
        let mut spec = crate::cluster::local::process::Spec::new("pgbouncer", bin, dir.join("log"));
        spec = spec.arg(&ini);
        // PgBouncer refuses to run as root: as PostgreSQL's own user then.
        spec.user = crate::cluster::local::postgres::run_as().map_err(anyhow::Error::msg)?;
        if let Some((uid, gid)) = spec.user {
            for p in [&dir, &ini] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))?;
            }
        }
        Ok((Setup { dir, port, pg_port: pg_port.to_string(), _ports: ports }, spec))
    }

    /// Wait (10 s at most) until the started PgBouncer accepts connections.
    async fn wait_listening(&self, bouncer: &Bouncer) -> anyhow::Result<()> {
        let front = format!("127.0.0.1:{}", self.port);
        let ready = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(&front).await.is_err() {
            anyhow::ensure!(Instant::now() < ready && bouncer.0.is_running(), "pgbouncer did not listen on {front}: {}", std::fs::read_to_string(self.dir.join("log")).unwrap_or_default().lines().last().unwrap_or(""));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// What the clients counted together.
struct Counts {
    resource: Resource,
    grants: AtomicU64,
    refused_unlocks: AtomicU64,
    errors: Mutex<Vec<String>>,
}

fn options(port: u16) -> sqlx::postgres::PgConnectOptions {
    use sqlx::ConnectOptions;
    sqlx::postgres::PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("postgres")
        .database("postgres")
        .extra_float_digits(None)
        .disable_statement_logging()
}

/// Client `i`: takes and releases the lock through PgBouncer until `until`, a short
/// critical section on the resource each time. The simple query protocol (raw SQL):
/// PgBouncer 1.18 keeps no prepared statement across transactions, and this is how an
/// application's statements reach it.
async fn client(i: usize, port: u16, xact: bool, lock_fn: &str, until: Instant, counts: &Counts, log: &Log) {
    use sqlx::{ConnectOptions, Connection, Row};
    let Counts { resource, grants, refused_unlocks, errors } = counts;
    let run = async {
        let mut c = options(port).connect().await?;
        while Instant::now() < until {
            if xact {
                sqlx::raw_sql("BEGIN").execute(&mut c).await?;
            }
            let q = sqlx::AssertSqlSafe(format!("SELECT {lock_fn}({U6_KEY})::text"));
            let got: String = sqlx::raw_sql(q).fetch_one(&mut c).await?.try_get(0)?;
            if got == "true" {
                grants.fetch_add(1, Ordering::Relaxed);
                let mut s = resource.enter(0, None);
                s.read();
                tokio::time::sleep(Duration::from_millis(2)).await;
                s.write_incremented();
                s.exit();
                if s.record().overlapped {
                    log.at(format!("client {i} was granted the lock while another client held it"));
                }
                if xact {
                    sqlx::raw_sql("COMMIT").execute(&mut c).await?;
                } else {
                    let q = sqlx::AssertSqlSafe(format!("SELECT pg_advisory_unlock({U6_KEY})::text"));
                    let un: String = sqlx::raw_sql(q).fetch_one(&mut c).await?.try_get(0)?;
                    if un != "true" {
                        if refused_unlocks.fetch_add(1, Ordering::Relaxed) < 5 {
                            log.at(format!("client {i}'s unlock was refused: its statement ran on a server connection that does not hold the lock"));
                        }
                    }
                }
            } else {
                if xact {
                    sqlx::raw_sql("COMMIT").execute(&mut c).await?;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        c.close().await?;
        Ok::<_, anyhow::Error>(())
    };
    if let Err(e) = run.await {
        log.at(format!("client {i} failed: {e}"));
        errors.lock().unwrap().push(e.to_string());
    }
}

/// The advisory locks on the key PostgreSQL still holds, read directly (not through
/// PgBouncer) on port `direct`.
async fn stranded(direct: u16) -> anyhow::Result<i64> {
    use sqlx::{ConnectOptions, Connection, Row};
    let mut c = options(direct).connect().await?;
    let q = sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = {U6_KEY} AND pid <> pg_backend_pid()"
    ));
    let n: i64 = sqlx::raw_sql(q).fetch_one(&mut c).await?.try_get(0)?;
    let _ = c.close().await;
    Ok(n)
}
