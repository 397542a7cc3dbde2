//! One logical client of the KV lock: create and update conditional on the subject's last
//! sequence, release by erasing our own sequence (see the crate docs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::header::{HeaderMap, HeaderValue, NATS_EXPECTED_LAST_SUBJECT_SEQUENCE};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::Context;
use async_trait::async_trait;
use bytes::Bytes;
use dlbench_core::{AcquireOptions, DistLock, Lease, LeaseHandle, LockError};

use crate::{read_error, Bucket, Buckets, NatsConfig, SKIP_REVISION_CHECK};

/// The KV header that marks a message as a delete (what `Store::delete` sends).
const KV_OPERATION: &str = "KV-Operation";

/// A lock name as a KV key: KV keys are subject tokens (`[-/_=.A-Za-z0-9]`, no leading or
/// trailing dot), and a dot would split one lock name into nested tokens. Every other
/// byte, and `=` and `.`, is written `=HH`, so two names never map to one key.
pub(crate) fn kv_key(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'/' {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

/// What the stream leader holds for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    /// A holder's message at this revision.
    Held(u64),
    /// Free: no message at all (0), or a delete marker at this revision.
    Free(u64),
}

/// Why a conditional write did not happen.
enum WriteError {
    /// The subject's last sequence was not the one we expected: someone else wrote.
    Moved,
    Lock(LockError),
}

/// What a held lock carries: its key, its bucket and the revision we last wrote (renews
/// move it).
struct Held {
    key: String,
    bucket: Bucket,
    revision: AtomicU64,
}

pub(crate) struct NatsLock {
    js: Context,
    buckets: Arc<Buckets>,
    cfg: NatsConfig,
    /// A test-only hook (see [`SKIP_REVISION_CHECK`]).
    unchecked: bool,
}

impl NatsLock {
    pub(crate) fn new(js: Context, buckets: Arc<Buckets>, cfg: NatsConfig) -> Self {
        let unchecked = std::env::var(SKIP_REVISION_CHECK).is_ok_and(|v| v == "1");
        if unchecked {
            eprintln!("dlbench: test hook {SKIP_REVISION_CHECK} is set: nats renew and release skip the revision check");
        }
        NatsLock { js, buckets, cfg, unchecked }
    }

    fn subject(b: &Bucket, key: &str) -> String {
        format!("$KV.{}.{}", b.name, kv_key(key))
    }

    /// Publish `value` (a put) or a delete marker to `key`, only if the subject's last
    /// sequence is `expected` (0: no message); `None` writes unconditionally (the test hook).
    /// The new revision on success. A reply lost after the publish left is an unknown
    /// outcome; "no responders" and a refusal before sending are definite.
    async fn write(&self, b: &Bucket, key: &str, value: Option<&str>, expected: Option<u64>) -> Result<u64, WriteError> {
        let mut headers = HeaderMap::new();
        if let Some(rev) = expected {
            headers.insert(NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, HeaderValue::from(rev));
        }
        if value.is_none() {
            headers.insert(KV_OPERATION, "DEL");
        }
        let payload = Bytes::from(value.unwrap_or_default().to_string());
        let fail = |what: &str, e: &dyn std::fmt::Display| format!("nats {what} {key}: {e}");
        let ack = self
            .js
            .publish_with_headers(Self::subject(b, key), headers, payload)
            .await
            .map_err(|e| WriteError::Lock(LockError::Unavailable(fail("publish to", &e))))?;
        match ack.await {
            Ok(a) => Ok(a.sequence),
            Err(e) => Err(match e.kind() {
                PublishErrorKind::WrongLastSequence => WriteError::Moved,
                // Nobody listens on the subject: no stream leader took it, or the stream is
                // gone (a cluster that lost its data): the next acquire makes it again.
                PublishErrorKind::StreamNotFound => {
                    self.buckets.forget(b.ttl);
                    WriteError::Lock(LockError::Unavailable(fail("no stream for", &e)))
                }
                _ => WriteError::Lock(LockError::Indeterminate(fail("write to", &e))),
            }),
        }
    }

    /// The key's newest message, asked of the stream leader (a direct get may be served by
    /// a replica that lags, and the lock's checks need the leader's view).
    pub(crate) async fn last(&self, b: &Bucket, key: &str) -> Result<Last, LockError> {
        let subject = Self::subject(b, key);
        let read = b.stream.get_last_raw_message_by_subject(&subject);
        let msg = match tokio::time::timeout(self.cfg.request_timeout, read).await {
            Err(_) => return Err(LockError::Unavailable(format!("nats read {key}: no reply within {:?}", self.cfg.request_timeout))),
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return read_error(e).map_or(Ok(Last::Free(0)), Err),
        };
        let op = msg.headers.get(KV_OPERATION).map(|v| v.as_str().to_string());
        Ok(match op.as_deref() {
            Some("DEL") | Some("PURGE") => Last::Free(msg.sequence),
            _ => Last::Held(msg.sequence),
        })
    }

    /// One acquire attempt: create if the key has no message. `None`: held. Never over a
    /// delete marker: that write would expect the marker's sequence, and a 2.9 server
    /// checks an expected sequence other than 0 only before it proposes the write, so
    /// waiters racing over one marker are all accepted (nats-server #4320); a create
    /// expecting 0 is checked where the write is applied, in log order.
    async fn try_create(&self, b: &Bucket, key: &str, token: &str) -> Result<Option<u64>, LockError> {
        match self.write(b, key, Some(token), self.expected(0)).await {
            Ok(rev) => Ok(Some(rev)),
            Err(WriteError::Moved) => Ok(None),
            Err(WriteError::Lock(e)) => Err(e),
        }
    }

    /// Release: erase our own message by its sequence (a stream message delete, through
    /// the stream's log). It removes nothing else: once another write replaced ours, or
    /// max_age dropped it, the sequence names no message and the answer is "not held".
    /// The key is then empty, so the next create expects 0.
    async fn erase(&self, b: &Bucket, key: &str, rev: u64) -> Result<(), LockError> {
        use async_nats::jetstream::stream::DeleteMessageErrorKind as K;
        let within = self.cfg.request_timeout;
        let r = tokio::time::timeout(within, b.stream.delete_message(rev)).await;
        match r {
            Err(_) => Err(LockError::Indeterminate(format!("nats release {key}: no reply within {within:?}"))),
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(LockError::NotHeld(format!("{key}: revision {rev} was not erased"))),
            Ok(Err(e)) => match e.kind() {
                K::JetStream(j) if j.error_code() == async_nats::jetstream::ErrorCode::SEQUENCE_NOT_FOUND || j.code() == 404 || j.to_string().contains("no message found") => {
                    Err(LockError::NotHeld(format!("{key}: revision {rev} is gone (replaced or expired)")))
                }
                K::TimedOut => Err(LockError::Indeterminate(format!("nats release {key}: {e}"))),
                _ => Err(LockError::Indeterminate(format!("nats release {key}: {e}"))),
            },
        }
    }

    fn expected(&self, rev: u64) -> Option<u64> {
        (!self.unchecked).then_some(rev)
    }

}

/// The longest a holder may count on: the asked TTL, cut to its bucket's (a renewal asking
/// a longer TTL than the bucket the lock lives in).
fn validity(b: &Bucket, ttl: Duration) -> Duration {
    ttl.min(b.ttl)
}

fn held(lease: &Lease) -> Result<&Held, LockError> {
    lease.handle.data::<Held>().ok_or_else(|| LockError::Config("not a nats lease".into()))
}

#[async_trait]
impl DistLock for NatsLock {
    async fn acquire(&self, key: &str, opts: &AcquireOptions) -> Result<Lease, LockError> {
        let invoked_at = Instant::now();
        let token = format!("{:032x}", rand::random::<u128>());
        // The bucket whose max age is the TTL asked: the lock expires when it was asked to.
        let b = self.buckets.ensure(&self.js, &self.cfg, opts.ttl).await?;
        let (rev, attempt_at) = dlbench_core::poll(opts, invoked_at, || self.try_create(&b, key, &token)).await?;
        let valid_until = attempt_at + validity(&b, opts.ttl);
        let handle = LeaseHandle::new(token).with_data(Held { key: key.to_string(), bucket: b, revision: AtomicU64::new(rev) });
        Ok(Lease::granted(key, Some(rev), invoked_at, valid_until, handle))
    }

    async fn release(&self, lease: Lease) -> Result<(), LockError> {
        let h = held(&lease)?;
        let rev = h.revision.load(Ordering::SeqCst);
        if self.unchecked {
            // The test hook: a plain KV delete, whoever holds the key.
            return match self.write(&h.bucket, &h.key, None, None).await {
                Ok(_) | Err(WriteError::Moved) => Ok(()),
                Err(WriteError::Lock(e)) => Err(e),
            };
        }
        self.erase(&h.bucket, &h.key, rev).await
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let sent = Instant::now();
        let h = held(lease)?;
        let rev = h.revision.load(Ordering::SeqCst);
        match self.write(&h.bucket, &h.key, Some(&lease.handle.id), self.expected(rev)).await {
            Ok(new) => {
                h.revision.store(new, Ordering::SeqCst);
                lease.valid_until = sent + validity(&h.bucket, ttl);
                Ok(())
            }
            Err(WriteError::Moved) => Err(LockError::NotHeld(format!("{}: revision {rev} is no longer the last", h.key))),
            Err(WriteError::Lock(e)) => Err(e),
        }
    }

    /// Nothing to stop: the lock lives in its bucket until the max age runs out.
    async fn abandon(&self) {}

    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::kv_key;

    #[test]
    fn names_become_single_token_keys_and_never_collide() {
        assert_eq!(kv_key("dlbench-run-1-k0"), "dlbench-run-1-k0");
        assert_eq!(kv_key("a.b"), "a=2Eb");
        assert_eq!(kv_key("a:b c"), "a=3Ab=20c");
        assert_ne!(kv_key("a=2Eb"), kv_key("a.b"));
    }
}
