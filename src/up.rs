//! `dlbench up`: start the local target and keep it running until Ctrl-C.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::kind::BackendKind;
use crate::results::RunDir;
use crate::cluster::local::{bins, LocalTarget, TargetOptions};
use crate::util::write_atomic;

pub async fn up(
    backends: Vec<BackendKind>,
    endpoints: Option<PathBuf>,
    out: PathBuf,
    options: TargetOptions,
    password_env: Option<String>,
    cancel: CancellationToken,
) -> anyhow::Result<i32> {
    let real: Vec<BackendKind> = backends.into_iter().filter(|k| *k != BackendKind::Memory).collect();
    bins::find(&real)?;
    let dir = RunDir::create(&out, "up-")?;
    eprintln!("dlbench up: starting {} under {}", crate::kind::names(&real), dir.path.display());
    let target = tokio::select! {
        t = LocalTarget::start(&dir.path, &real, options) => t?,
        _ = cancel.cancelled() => return Ok(130),
    };
    let mut eps = target.endpoints().clone();
    if let Some(var) = &password_env {
        // The file names where the password is, never the password.
        for k in [BackendKind::Redis, BackendKind::Redlock, BackendKind::Postgres, BackendKind::Mariadb, BackendKind::Etcd, BackendKind::Nats] {
            if let Some(mut s) = eps.get(k).cloned() {
                s.password_env = Some(var.clone());
                if k == BackendKind::Etcd {
                    s.user = Some("root".into());
                }
                if k == BackendKind::Nats {
                    s.user = Some(crate::cluster::local::nats::USER.into());
                }
                eps.set(k, s);
            }
        }
    }
    let toml = eps.to_toml();
    if let Some(p) = &endpoints {
        write_atomic(p, toml.as_bytes()).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
        eprintln!("dlbench up: endpoints written to {}", p.display());
    }
    print!("{toml}");
    use std::io::Write;
    std::io::stdout().flush()?;
    eprintln!("dlbench up: {} servers running; Ctrl-C stops them", target.nodes().len());
    cancel.cancelled().await;
    eprintln!("dlbench up: stopping");
    drop(target);
    Ok(0)
}
