//! TLS end to end: Redis, etcd, PostgreSQL and MariaDB servers that accept only TLS with a client
//! certificate (mutual TLS), reached through an endpoints section's `[x.tls]`, the way an
//! external target is. A lock cycle works with the CA and the client certificate, and fails
//! without the client certificate, so the TLS path is really in use.
//!
//! Certificates come from the `openssl` command line (Debian package `openssl`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use dlbench::connect::{self, Timeouts};
use dlbench::endpoints::{Endpoints, Section, Tls};
use dlbench::kind::BackendKind;
use dlbench::cluster::local::ports::PortClaims;
use dlbench::cluster::local::process::{Process, Spec};
use dlbench::cluster::local::LocalTarget;
use dlbench_core::{AcquireOptions, Backend};

struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl (Debian package openssl)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1, and a client certificate with CN `postgres`
/// (PostgreSQL's `cert` auth maps the CN to the user name).
fn pki(dir: &Path) -> Pki {
    std::fs::create_dir_all(dir).unwrap();
    openssl(dir, &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=dlbench test CA"]);
    for (name, cn, ext) in [
        ("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
        ("client", "postgres", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), format!("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n{ext}")).unwrap();
        let (key, csr, crt, extf) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.ext"));
        openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", &format!("/CN={cn}")]);
        openssl(dir, &["x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", &crt, "-days", "2", "-extfile", &extf]);
    }
    Pki {
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    }
}

fn section(endpoint: String, tls: Tls) -> Section {
    Section { endpoints: vec![endpoint], tls: Some(tls), ..Default::default() }
}

async fn cycle(kind: BackendKind, s: Section) -> Result<(), String> {
    let mut eps = Endpoints::default();
    eps.set(kind, s);
    let t = Timeouts { connect: Duration::from_secs(5), request: Duration::from_secs(5) };
    let backend: Arc<dyn Backend> = connect::connect(kind, &eps, t, None).await.map_err(|e| e.to_string())?;
    let client = backend.client().await.map_err(|e| e.to_string())?;
    let opts = AcquireOptions::default().with_ttl(Duration::from_secs(5));
    let lease = client.acquire("tls-lock", &opts).await.map_err(|e| e.to_string())?;
    client.release(lease).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// With the CA and the client certificate the cycle works; without the client certificate
/// the server refuses; without the CA the client refuses the server.
async fn check(kind: BackendKind, endpoint: String, pki: &Pki) {
    let full = Tls { ca: Some(pki.ca.clone()), cert: Some(pki.client_cert.clone()), key: Some(pki.client_key.clone()) };
    cycle(kind, section(endpoint.clone(), full.clone())).await.unwrap_or_else(|e| panic!("{kind} over mutual TLS: {e}"));
    let no_client = Tls { cert: None, key: None, ..full.clone() };
    let r = cycle(kind, section(endpoint.clone(), no_client)).await;
    assert!(r.is_err(), "{kind}: a lock cycle without a client certificate must be refused");
    let no_ca = Tls { ca: None, ..full };
    let r = cycle(kind, section(endpoint, no_ca)).await;
    assert!(r.is_err(), "{kind}: a server signed by an unknown CA must not be trusted");
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlbench-tls-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn wait_log(p: &Process, needle: &str) {
    for _ in 0..200 {
        if p.log_tail(50).contains(needle) {
            return;
        }
        assert!(p.is_running(), "server exited: {}", p.log_tail(20));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("server never logged {needle:?}: {}", p.log_tail(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_mutual_tls() {
    let dir = scratch("redis");
    let pki = pki(&dir.join("pki"));
    let port = PortClaims::new().claim().unwrap();
    let spec = Spec::new("redis-tls", "/usr/bin/redis-server", dir.join("log")).args([
        "--port".to_string(),
        "0".into(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        pki.server_cert.display().to_string(),
        "--tls-key-file".into(),
        pki.server_key.display().to_string(),
        "--tls-ca-cert-file".into(),
        pki.ca.display().to_string(),
        "--tls-auth-clients".into(),
        "yes".into(),
        "--save".into(),
        "".into(),
        "--dir".into(),
        dir.display().to_string(),
    ]);
    let p = Process::start(spec).expect("start redis-server");
    wait_log(&p, "Ready to accept connections").await;
    check(BackendKind::Redis, format!("127.0.0.1:{port}"), &pki).await;
    p.stop(Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_over_mutual_tls() {
    let dir = scratch("etcd");
    let pki = pki(&dir.join("pki"));
    let mut claims = PortClaims::new();
    let (client, peer) = (claims.claim().unwrap(), claims.claim().unwrap());
    let curl = format!("https://127.0.0.1:{client}");
    let purl = format!("http://127.0.0.1:{peer}");
    let spec = Spec::new("etcd-tls", "/usr/bin/etcd", dir.join("log")).args([
        "--name".to_string(),
        "tls".into(),
        "--data-dir".into(),
        dir.join("data").display().to_string(),
        "--listen-client-urls".into(),
        curl.clone(),
        "--advertise-client-urls".into(),
        curl,
        "--listen-peer-urls".into(),
        purl.clone(),
        "--initial-advertise-peer-urls".into(),
        purl.clone(),
        "--initial-cluster".into(),
        format!("tls={purl}"),
        "--cert-file".into(),
        pki.server_cert.display().to_string(),
        "--key-file".into(),
        pki.server_key.display().to_string(),
        "--trusted-ca-file".into(),
        pki.ca.display().to_string(),
        "--client-cert-auth".into(),
    ]);
    let p = Process::start(spec).expect("start etcd");
    wait_log(&p, "ready to serve client requests").await;
    check(BackendKind::Etcd, format!("127.0.0.1:{client}"), &pki).await;
    p.stop(Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_mutual_tls() {
    let dir = scratch("pg");
    let target = LocalTarget::start(&dir, &[BackendKind::Postgres], Default::default()).await.expect("start postgres");
    let node = target.nodes_of(BackendKind::Postgres)[0].clone();
    let pki = pki(&dir.join("pki"));
    // The server reads its key as its own user, and only from a private file.
    let owner = std::fs::metadata(&node.data).map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap();
    let gid = std::fs::metadata(&node.data).map(|m| std::os::unix::fs::MetadataExt::gid(&m)).unwrap();
    for (from, to) in [(&pki.server_cert, "server.crt"), (&pki.server_key, "server.key"), (&pki.ca, "root.crt")] {
        let dst = node.data.join(to);
        std::fs::copy(from, &dst).unwrap();
        std::os::unix::fs::chown(&dst, Some(owner), Some(gid)).unwrap();
        std::fs::set_permissions(&dst, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    // TLS with a client certificate from loopback; plain TCP refused; the socket for setup.
    std::fs::write(
        node.data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 cert\nhost all all 127.0.0.1/32 reject\n",
    )
    .unwrap();
    let plain = target.endpoints().get(BackendKind::Postgres).unwrap().endpoints[0].clone();
    {
        use sqlx::ConnectOptions;
        let (h, port) = plain.rsplit_once(':').unwrap();
        let mut c = sqlx::postgres::PgConnectOptions::new()
            .host(h)
            .port(port.parse().unwrap())
            .username("postgres")
            .database("postgres")
            .connect()
            .await
            .expect("plain connection before TLS is switched on");
        for q in ["ALTER SYSTEM SET ssl = on", "ALTER SYSTEM SET ssl_ca_file = 'root.crt'", "SELECT pg_reload_conf()"] {
            sqlx::query(q).execute(&mut c).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    check(BackendKind::Postgres, plain, &pki).await;
    drop(target);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_over_mutual_tls() {
    let dir = scratch("mariadb");
    let pki = pki(&dir.join("pki"));
    let bins = dlbench::cluster::local::bins::find(&[BackendKind::Mariadb]).expect("mariadb-server installed");
    let port = PortClaims::new().claim().unwrap();
    // dlbench's own node, as the local target prepares it, started with TLS on.
    let plan = dlbench::cluster::local::mariadb::prepare(
        bins.mariadb_install_db.as_ref().unwrap(),
        bins.mariadbd.as_ref().unwrap(),
        &dir,
        &dir.join("logs"),
        port,
        None,
        &[],
    )
    .expect("prepare mariadb");
    let spec = plan
        .spec
        .arg(format!("--ssl-ca={}", pki.ca.display()))
        .arg(format!("--ssl-cert={}", pki.server_cert.display()))
        .arg(format!("--ssl-key={}", pki.server_key.display()));
    let p = Process::start(spec).expect("start mariadbd");
    wait_log(&p, "ready for connections").await;
    // From now on the server admits dlbench only with a client certificate its CA signed
    // (asked over a plain connection, before the requirement holds).
    let out = Command::new("mariadb")
        .args(["--no-defaults", "--skip-ssl", "-h", "127.0.0.1", "-P", &port.to_string(), "-u", "dlbench", "-e"])
        .arg("ALTER USER 'dlbench'@'127.0.0.1' REQUIRE X509")
        .output()
        .expect("run the mariadb client (Debian package mariadb-client)");
    assert!(out.status.success(), "ALTER USER: {}", String::from_utf8_lossy(&out.stderr));
    check(BackendKind::Mariadb, format!("127.0.0.1:{port}"), &pki).await;
    check(BackendKind::MariadbGetLock, format!("127.0.0.1:{port}"), &pki).await;
    p.stop(Duration::from_secs(3));
}
