//! How etcd's errors map to the lock's: which failures are definite, which leave the outcome
//! unknown, and the retry loop that carries requests across a member going away.

use std::time::{Duration, Instant};

use dlbench_core::LockError;

use crate::EtcdConfig;

/// True when the request cannot have reached a server that acted on it: refused as invalid
/// or unauthorized, or never sent because no connection could be made.
///
/// `Unavailable` alone says little: etcd answers it for "etcdserver: request timed out",
/// "leader changed" and the like after a write may have been applied, so only an
/// `Unavailable` that comes from failing to connect is definite.
pub(crate) fn is_definite(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => match s.code() {
            Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument | Code::FailedPrecondition
            | Code::ResourceExhausted => true,
            Code::Unavailable => never_connected(s),
            _ => false,
        },
        etcd_client::Error::TransportError(_)
        | etcd_client::Error::IoError(_)
        | etcd_client::Error::InvalidArgs(_)
        | etcd_client::Error::InvalidUri(_) => true,
        _ => false,
    }
}

/// The status says the client could not connect, so the request never left: tonic wraps
/// connect failures in [`tonic::ConnectError`] (kept as the status's source) and names them
/// "tcp connect error" / "error trying to connect" / "connection refused".
fn never_connected(s: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(s);
    while let Some(e) = source {
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        source = e.source();
    }
    let m = s.message().to_ascii_lowercase();
    ["tcp connect error", "error trying to connect", "connection refused"].iter().any(|p| m.contains(p))
}

/// Map an error from a request that changes nothing (or whose change was undone).
pub(crate) fn definite(e: etcd_client::Error, config: &EtcdConfig) -> LockError {
    match &e {
        etcd_client::Error::GRpcStatus(s)
            if matches!(s.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied)
                || s.message().contains("authentication failed") =>
        {
            LockError::Config(format!("etcd at {}: {}", config.endpoints.join(","), s.message()))
        }
        _ => LockError::Unavailable(format!("etcd at {}: {e}", config.endpoints.join(","))),
    }
}

/// Map an error from a request that may have written.
pub(crate) fn maybe_written(e: etcd_client::Error, config: &EtcdConfig) -> LockError {
    if is_definite(&e) {
        definite(e, config)
    } else {
        LockError::Indeterminate(format!("etcd at {}: {e}", config.endpoints.join(",")))
    }
}

/// Errors another attempt may not meet: the endpoint refused or dropped the connection,
/// the member has no leader or just lost it, the stream was cut. etcd-client keeps routing
/// to a dead endpoint until it comes back, so a request is retried until `within` has
/// passed. Every request this backend repeats is safe to repeat (reads, the claim
/// transaction that finds its own key, deletes guarded by the create revision).
pub(crate) fn retryable(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            Code::Unavailable | Code::Cancelled | Code::Unknown | Code::Aborted | Code::Internal | Code::DeadlineExceeded
        ),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) | etcd_client::Error::WatchError(_) => true,
        _ => false,
    }
}

/// What the attempts of a [`retrying`] call tell beyond the last result.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Attempts {
    /// More than one attempt was made.
    pub repeated: bool,
    /// An attempt before the last one failed in a way that may have been applied.
    pub uncertain: bool,
}

/// Run `f` until it succeeds, fails in a way that is not [`retryable`], or `within` passes
/// (then a deadline-exceeded error, whose outcome is unknown). [`Attempts`] tells whether an
/// attempt was repeated, so an idempotent write can tell "done by my first try" from "never
/// done", and whether an earlier attempt may have been applied, so a last error that is
/// definite on its own (a refused connection) is not mistaken for "nothing happened".
pub(crate) async fn retrying<T, Fut>(within: Duration, mut f: impl FnMut() -> Fut) -> (Result<T, etcd_client::Error>, Attempts)
where
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + within;
    let mut attempts = Attempts::default();
    loop {
        match tokio::time::timeout_at(deadline.into(), f()).await {
            Ok(Ok(v)) => return (Ok(v), attempts),
            Ok(Err(e)) if retryable(&e) && Instant::now() + Duration::from_millis(50) < deadline => {
                tracing::debug!("etcd: retrying after {e}");
                attempts.repeated = true;
                attempts.uncertain |= !is_definite(&e);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(e)) => return (Err(e), attempts),
            Err(_) => {
                return (Err(etcd_client::Error::GRpcStatus(tonic::Status::deadline_exceeded(format!("no answer within {within:?}")))), attempts)
            }
        }
    }
}

/// Map the last error of a retried write: unknown if any attempt may have been applied.
pub(crate) fn write_failed(e: etcd_client::Error, attempts: Attempts, config: &EtcdConfig) -> LockError {
    if attempts.uncertain {
        LockError::Indeterminate(format!("etcd at {}: {e} (an earlier attempt may have been applied)", config.endpoints.join(",")))
    } else {
        maybe_written(e, config)
    }
}

/// A retried release found our key gone: an earlier attempt deleted it, or the lease expired
/// and took it. The lease's remaining TTL (-1 once it is gone) tells them apart.
pub(crate) fn gone_on_retry(lease_ttl: Result<i64, etcd_client::Error>, key: &str, lease_id: i64, config: &EtcdConfig) -> Result<(), LockError> {
    match lease_ttl {
        Ok(ttl) if ttl >= 0 => Ok(()),
        Ok(_) => Err(LockError::NotHeld(format!("{key}: lease {lease_id:x} expired"))),
        Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound || s.message().contains("lease not found") => {
            Err(LockError::NotHeld(format!("{key}: lease {lease_id:x} expired")))
        }
        Err(e) => Err(LockError::Indeterminate(format!(
            "etcd at {}: {key} gone after a retried release, lease state unknown: {e}",
            config.endpoints.join(",")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EtcdConfig;

    fn status(code: tonic::Code, msg: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg))
    }

    /// etcd's own Unavailable answers come after the request reached a member, which may
    /// have applied it.
    #[test]
    fn unavailable_from_the_server_is_not_definite() {
        for msg in ["etcdserver: request timed out", "etcdserver: leader changed", "etcdserver: no leader", ""] {
            let e = status(tonic::Code::Unavailable, msg);
            assert!(!is_definite(&e), "{msg:?} was taken as definite");
            assert!(matches!(maybe_written(e, &EtcdConfig::new(vec![])), LockError::Indeterminate(_)), "{msg:?}");
        }
    }

    /// Failing to connect at all means the request never left.
    #[test]
    fn failure_to_connect_is_definite() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let from_tonic = tonic::Status::from_error(Box::new(tonic::ConnectError(Box::new(refused))));
        assert_eq!(from_tonic.code(), tonic::Code::Unavailable);
        assert!(is_definite(&etcd_client::Error::GRpcStatus(from_tonic)));
        assert!(is_definite(&status(tonic::Code::Unavailable, "tcp connect error")));
        assert!(is_definite(&status(tonic::Code::Unavailable, "error trying to connect: Connection refused (os error 111)")));
        assert!(matches!(
            maybe_written(status(tonic::Code::Unavailable, "tcp connect error"), &EtcdConfig::new(vec![])),
            LockError::Unavailable(_)
        ));
    }

    /// A write whose last attempt could not connect, after one that timed out on the
    /// server, may still have been applied.
    #[test]
    fn retried_write_after_an_uncertain_attempt_is_indeterminate() {
        let cfg = EtcdConfig::new(vec![]);
        let e = status(tonic::Code::Unavailable, "tcp connect error");
        assert!(matches!(write_failed(e, Attempts { repeated: true, uncertain: true }, &cfg), LockError::Indeterminate(_)));
        let e = status(tonic::Code::Unavailable, "tcp connect error");
        assert!(matches!(write_failed(e, Attempts { repeated: true, uncertain: false }, &cfg), LockError::Unavailable(_)));
    }

    #[test]
    fn key_gone_on_retry_is_ours_only_while_the_lease_lives() {
        let cfg = EtcdConfig::new(vec![]);
        assert_eq!(gone_on_retry(Ok(7), "k/1", 1, &cfg), Ok(()));
        assert_eq!(gone_on_retry(Ok(0), "k/1", 1, &cfg), Ok(()));
        assert!(matches!(gone_on_retry(Ok(-1), "k/1", 1, &cfg), Err(LockError::NotHeld(_))));
        let not_found = Err(status(tonic::Code::NotFound, "etcdserver: requested lease not found"));
        assert!(matches!(gone_on_retry(not_found, "k/1", 1, &cfg), Err(LockError::NotHeld(_))));
        let timed_out = Err(status(tonic::Code::Unavailable, "etcdserver: request timed out"));
        assert!(matches!(gone_on_retry(timed_out, "k/1", 1, &cfg), Err(LockError::Indeterminate(_))));
    }
}
