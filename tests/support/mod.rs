//! One local target per test binary, shared by every test in it.
//!
//! Tests each run in their own tokio runtime, so only endpoints are shared: the servers are
//! started once on a helper thread, and each test connects its own clients. The servers are
//! stopped when the test process exits (an `atexit` hook stops them gracefully; if the
//! process is killed instead, the kernel's parent-death signal kills them).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dlbench::connect::{self, Timeouts};
use dlbench::endpoints::{Endpoints, Section};
use dlbench::kind::BackendKind;
use dlbench::cluster::local::LocalTarget;
use dlbench_core::{Backend, LockError};

static TARGET: Mutex<Option<LocalTarget>> = Mutex::new(None);
static ENDPOINTS: OnceLock<(Endpoints, PathBuf)> = OnceLock::new();

extern "C" fn stop_target() {
    if let Ok(mut g) = TARGET.lock() {
        if let Some(mut t) = g.take() {
            t.stop();
            let _ = std::fs::remove_dir_all(t.dir.parent().unwrap_or(&t.dir));
        }
    }
}

/// Endpoints of the shared local target (all five backends), starting it on first use.
pub fn endpoints() -> &'static Endpoints {
    &ENDPOINTS
        .get_or_init(|| {
            std::thread::spawn(|| {
                let dir = std::env::temp_dir().join(format!("dlbench-test-{}", std::process::id()));
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let target = rt
                    .block_on(LocalTarget::start(&dir, &BackendKind::REAL, Default::default()))
                    .unwrap_or_else(|e| panic!("local target did not start: {e}"));
                let eps = target.endpoints().clone();
                eprintln!("test servers: {}", eps.to_toml().replace('\n', " "));
                *TARGET.lock().unwrap() = Some(target);
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(stop_target) };
                (eps, dir)
            })
            .join()
            .expect("target start-up thread")
        })
        .0
}

/// A backend connected to the shared servers.
pub async fn backend(kind: BackendKind) -> Arc<dyn Backend> {
    let eps = endpoints();
    connect::connect(kind, eps, Timeouts::default(), None)
        .await
        .unwrap_or_else(|e| panic!("connect {kind}: {e}"))
}

/// A backend pointed at loopback ports nobody listens on.
pub async fn dead(kind: BackendKind) -> Result<Arc<dyn Backend>, LockError> {
    let n = match kind {
        BackendKind::Redlock => 5,
        BackendKind::Etcd | BackendKind::Zookeeper => 3,
        _ => 1,
    };
    let mut e = Endpoints::default();
    e.set(kind, Section::new((0..n).map(|_| dlbench_core::conformance::dead_endpoint()).collect()));
    connect::connect(kind, &e, Timeouts { connect: Duration::from_secs(2), request: Duration::from_secs(3) }, None).await
}
