//! TLS material a backend client presents, as PEM file paths (the endpoints file's `[x.tls]`).

use std::path::PathBuf;

use crate::LockError;

/// CA to verify servers with, and an optional client certificate and key (mutual TLS).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// The same material read into memory. Its `Debug` names which parts are present, never
/// their contents (the key is a secret).
#[derive(Clone, Default)]
pub struct TlsPem {
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key, both or neither.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPem").field("ca", &self.ca.is_some()).field("identity", &self.identity.is_some()).finish()
    }
}

impl TlsFiles {
    /// Read the files; a missing file, or a certificate without its key, is a configuration error.
    pub fn read(&self, backend: &str) -> Result<TlsPem, LockError> {
        let read = |what: &str, p: &PathBuf| {
            std::fs::read(p).map_err(|e| LockError::Config(format!("[{backend}.tls] {what} {}: {e}", p.display())))
        };
        let ca = self.ca.as_ref().map(|p| read("ca", p)).transpose()?;
        let identity = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((read("cert", c)?, read("key", k)?)),
            (None, None) => None,
            _ => return Err(LockError::Config(format!("[{backend}.tls] give both cert and key, or neither"))),
        };
        Ok(TlsPem { ca, identity })
    }
}
