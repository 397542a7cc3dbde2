use std::time::Duration;

/// Why an acquire, release or extend did not succeed.
///
/// The split that matters is [`LockError::is_definite`]: a definite error means the operation
/// had no effect (the lock was not taken), an indeterminate one means it may have (a request
/// that timed out after it left). Jepsen records the first as `fail` and the second as `info`.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LockError {
    /// The wait timeout elapsed; our claim (if any) was withdrawn, so the lock is not held.
    #[error("not acquired: wait timeout of {0:?} elapsed")]
    Timeout(Duration),
    /// A try-once acquire found the lock held by someone else.
    #[error("not acquired: lock is held by another client")]
    Busy,
    /// The service refused or could not be reached before anything was written.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The session or lease backing this client is gone; any lock it held is lost.
    #[error("session lost: {0}")]
    SessionLost(String),
    /// Release or extend of a lock this client no longer holds.
    #[error("lock not held: {0}")]
    NotHeld(String),
    /// The request may or may not have taken effect.
    #[error("outcome unknown: {0}")]
    Indeterminate(String),
    /// Bad configuration or arguments; retrying will not help.
    #[error("configuration: {0}")]
    Config(String),
}

impl LockError {
    /// True when the operation definitely had no effect.
    pub fn is_definite(&self) -> bool {
        !matches!(self, LockError::Indeterminate(_))
    }

    /// True for the two ways of "someone else holds it", as opposed to a fault.
    pub fn is_contention(&self) -> bool {
        matches!(self, LockError::Timeout(_) | LockError::Busy)
    }

    /// Short stable name, used as a counter label in results.
    pub fn kind(&self) -> &'static str {
        match self {
            LockError::Timeout(_) => "timeout",
            LockError::Busy => "busy",
            LockError::Unavailable(_) => "unavailable",
            LockError::SessionLost(_) => "session_lost",
            LockError::NotHeld(_) => "not_held",
            LockError::Indeterminate(_) => "indeterminate",
            LockError::Config(_) => "config",
        }
    }
}
