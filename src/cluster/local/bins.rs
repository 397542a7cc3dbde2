//! Finding the server binaries installed from Debian packages, before anything starts.

use std::path::{Path, PathBuf};

use crate::kind::BackendKind;

/// A binary that is not installed, and how to get it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{binary} not found{where_}: install the Debian package {package} (apt-get install {package})")]
pub struct Missing {
    pub binary: String,
    pub package: &'static str,
    pub where_: String,
}

/// Everything the local target runs.
#[derive(Debug, Clone, Default)]
pub struct Binaries {
    pub etcd: Option<PathBuf>,
    pub java: Option<PathBuf>,
    pub zookeeper_classpath: Option<String>,
    pub redis_server: Option<PathBuf>,
    pub initdb: Option<PathBuf>,
    pub postgres: Option<PathBuf>,
    pub mariadbd: Option<PathBuf>,
    pub mariadb_install_db: Option<PathBuf>,
    pub nats_server: Option<PathBuf>,
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Debian keeps `initdb` and `postgres` out of PATH, in /usr/lib/postgresql/<major>/bin.
/// PATH wins; then `DLBENCH_PG_BINDIR`; then the newest Debian install.
pub fn find_pg(name: &str) -> Option<PathBuf> {
    if let Some(p) = which(name) {
        return Some(p);
    }
    if let Some(dir) = std::env::var_os("DLBENCH_PG_BINDIR") {
        let p = PathBuf::from(dir).join(name);
        return is_executable(&p).then_some(p);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin").join(name))))
        .filter(|(_, p)| is_executable(p))
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

const ZK_JARS: &str = "/usr/share/java";

/// Find what `backends` need; the first thing missing is the error.
pub fn find(backends: &[BackendKind]) -> Result<Binaries, Missing> {
    let mut b = Binaries::default();
    let on_path = |bin: &str| Missing { binary: bin.into(), package: "", where_: " on PATH".into() };
    for k in BackendKind::servers(backends) {
        match k {
            BackendKind::Etcd => {
                b.etcd = Some(which("etcd").ok_or(Missing { package: "etcd-server", ..on_path("etcd") })?);
            }
            BackendKind::Zookeeper => {
                b.java = Some(which("java").ok_or(Missing { package: "zookeeper", ..on_path("java") })?);
                let dir = std::env::var("DLBENCH_ZK_JARS").unwrap_or_else(|_| ZK_JARS.to_string());
                let jar = Path::new(&dir).join("zookeeper.jar");
                if !jar.is_file() {
                    return Err(Missing {
                        binary: "zookeeper.jar".into(),
                        package: "zookeeper",
                        where_: format!(" in {dir}"),
                    });
                }
                // zookeeper.jar's manifest names its dependencies; it needs an slf4j binding.
                let mut cp = jar.display().to_string();
                for binding in ["slf4j-simple.jar", "slf4j-nop.jar", "slf4j-log4j12.jar"] {
                    let p = Path::new(&dir).join(binding);
                    if p.is_file() {
                        cp.push(':');
                        cp.push_str(&p.display().to_string());
                        break;
                    }
                }
                b.zookeeper_classpath = Some(cp);
            }
            BackendKind::Redis | BackendKind::Redlock => {
                b.redis_server =
                    Some(which("redis-server").ok_or(Missing { package: "redis-server", ..on_path("redis-server") })?);
            }
            BackendKind::Postgres => {
                let miss = |bin: &str| Missing {
                    binary: bin.into(),
                    package: "postgresql",
                    where_: " on PATH, in $DLBENCH_PG_BINDIR or in /usr/lib/postgresql/*/bin".into(),
                };
                b.initdb = Some(find_pg("initdb").ok_or_else(|| miss("initdb"))?);
                b.postgres = Some(find_pg("postgres").ok_or_else(|| miss("postgres"))?);
            }
            BackendKind::Mariadb => {
                // Debian puts the server in /usr/sbin, which a non-root PATH may lack.
                let find = |bin: &str| which(bin).or_else(|| Some(Path::new("/usr/sbin").join(bin)).filter(|p| is_executable(p)));
                let miss = |bin: &str| Missing { binary: bin.into(), package: "mariadb-server", where_: " on PATH or in /usr/sbin".into() };
                b.mariadbd = Some(find("mariadbd").ok_or_else(|| miss("mariadbd"))?);
                b.mariadb_install_db = Some(find("mariadb-install-db").ok_or_else(|| miss("mariadb-install-db"))?);
            }
            BackendKind::Nats => {
                // Debian puts it in /usr/sbin, which a non-root PATH may lack.
                let sbin = Path::new("/usr/sbin/nats-server");
                b.nats_server = Some(which("nats-server").or_else(|| is_executable(sbin).then(|| sbin.to_path_buf())).ok_or(Missing {
                    binary: "nats-server".into(),
                    package: "nats-server",
                    where_: " on PATH or in /usr/sbin".into(),
                })?);
            }
            _ => {}
        }
    }
    Ok(b)
}
