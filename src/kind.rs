//! The backend names dlbench knows, and parsing them from the command line.

use std::fmt;
use std::str::FromStr;

/// A lock backend by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Postgres,
    Redis,
    Redlock,
    Zookeeper,
    Etcd,
    Memory,
}

impl BackendKind {
    /// The five real backends, in the order the table lists them.
    pub const REAL: [BackendKind; 5] =
        [BackendKind::Postgres, BackendKind::Redis, BackendKind::Redlock, BackendKind::Zookeeper, BackendKind::Etcd];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Postgres => "postgres",
            BackendKind::Redis => "redis",
            BackendKind::Redlock => "redlock",
            BackendKind::Zookeeper => "zookeeper",
            BackendKind::Etcd => "etcd",
            BackendKind::Memory => "memory",
        }
    }

    pub fn all_names() -> String {
        let mut v: Vec<&str> = Self::REAL.iter().map(|k| k.name()).collect();
        v.push("memory");
        v.join(", ")
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" | "pg" => Ok(BackendKind::Postgres),
            "redis" => Ok(BackendKind::Redis),
            "redlock" => Ok(BackendKind::Redlock),
            "zookeeper" | "zk" => Ok(BackendKind::Zookeeper),
            "etcd" => Ok(BackendKind::Etcd),
            "memory" => Ok(BackendKind::Memory),
            other => Err(format!("unknown backend {other:?}; valid backends: {}", Self::all_names())),
        }
    }
}

/// Parse `a,b,c` or `all` (the five real backends).
pub fn parse_list(s: &str) -> Result<Vec<BackendKind>, String> {
    if s.trim() == "all" {
        return Ok(BackendKind::REAL.to_vec());
    }
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let k: BackendKind = part.parse()?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err(format!("no backend named; valid backends: {}", BackendKind::all_names()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_backend_names_the_valid_ones() {
        let e = parse_list("etcd,nosuch").unwrap_err();
        assert!(e.contains("nosuch") && e.contains("zookeeper") && e.contains("redlock"), "{e}");
    }

    #[test]
    fn all_means_the_five_real_backends() {
        let v = parse_list("all").unwrap();
        assert_eq!(v.len(), 5);
        assert!(!v.contains(&BackendKind::Memory));
    }
}
