//! What the clients do: keys, contention, hold and think times, duration.
//!
//! A [`Workload`] is plain data (serializable, so the effective plan is written into the
//! result set); [`KeyPicker`] and [`Dist::sample`] turn it into per-client choices that a
//! seed makes repeatable.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::Distribution;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::util::{fmt_duration, parse_duration};

/// A duration that may vary per operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    Fixed(Duration),
    /// Uniform between the two bounds.
    Uniform(Duration, Duration),
    /// Exponential with this mean (Poisson arrivals, memoryless holds).
    Exp(Duration),
}

impl Dist {
    pub const ZERO: Dist = Dist::Fixed(Duration::ZERO);

    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            Dist::Fixed(d) => d,
            Dist::Uniform(a, b) if b > a => Duration::from_secs_f64(rng.random_range(a.as_secs_f64()..b.as_secs_f64())),
            Dist::Uniform(a, _) => a,
            Dist::Exp(mean) if mean.is_zero() => Duration::ZERO,
            Dist::Exp(mean) => {
                let e = rand_distr::Exp::new(1.0 / mean.as_secs_f64()).expect("positive rate");
                Duration::from_secs_f64(e.sample(rng).min(mean.as_secs_f64() * 50.0))
            }
        }
    }

    /// The largest value this can produce (for the exponential, the cap of 50 means).
    pub fn max(&self) -> Duration {
        match *self {
            Dist::Fixed(d) => d,
            Dist::Uniform(a, b) => a.max(b),
            Dist::Exp(m) => m * 50,
        }
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Fixed(d) => write!(f, "{}", fmt_duration(*d)),
            Dist::Uniform(a, b) => write!(f, "uniform({},{})", fmt_duration(*a), fmt_duration(*b)),
            Dist::Exp(m) => write!(f, "exp({})", fmt_duration(*m)),
        }
    }
}

impl FromStr for Dist {
    type Err = String;
    /// `5ms`, `uniform(1ms,10ms)`, `exp(5ms)`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let inner = |prefix: &str| s.strip_prefix(prefix).and_then(|r| r.strip_suffix(')'));
        if let Some(args) = inner("uniform(") {
            let (a, b) = args.split_once(',').ok_or_else(|| format!("{s:?}: write uniform(MIN,MAX)"))?;
            let (a, b) = (parse_duration(a)?, parse_duration(b)?);
            if b < a {
                return Err(format!("{s:?}: MIN is above MAX"));
            }
            Ok(Dist::Uniform(a, b))
        } else if let Some(m) = inner("exp(") {
            Ok(Dist::Exp(parse_duration(m)?))
        } else {
            parse_duration(s).map(Dist::Fixed)
        }
    }
}

impl Serialize for Dist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Serialize a `Duration` as `250ms` / `10s`.
pub mod dur {
    use super::*;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&fmt_duration(*d))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyDist {
    Uniform,
    /// Zipf over the key ranks with this exponent (1.0 is the classic skew).
    Zipf,
}

impl FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "zipf" => Ok(KeyDist::Zipf),
            _ => Err(format!("key distribution {s:?}: use uniform or zipf")),
        }
    }
}

/// One phase of load against one backend. Files in `workloads/` are this struct in TOML;
/// fields a file leaves out take the defaults below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    pub name: String,
    pub clients: usize,
    pub keys: usize,
    pub key_dist: KeyDist,
    /// Exponent for `zipf`.
    pub zipf_s: f64,
    pub hold: Dist,
    /// Closed loop only: the pause between a release and the next acquire.
    pub think: Dist,
    #[serde(with = "dur")]
    pub ttl: Duration,
    #[serde(with = "dur")]
    pub wait_timeout: Duration,
    /// Measured time (after warm-up); with `ops`, the longest the phase may take.
    #[serde(with = "dur")]
    pub duration: Duration,
    /// Stop after this many operations in total (warm-up included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<u64>,
    #[serde(with = "dur")]
    pub warmup: Duration,
    /// Open loop: acquisitions per second in total, scheduled at fixed intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Delay between attempts for polling backends.
    #[serde(with = "dur")]
    pub retry_interval: Duration,
    /// Seed for key choice and sampled durations; a run without one picks one and logs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Run without faults even when the plan has a nemesis: the performance rounds of the
    /// default plan (`--preset answer`), measured apart from its fault round.
    #[serde(default)]
    pub no_faults: bool,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            name: "custom".into(),
            clients: 8,
            keys: 1,
            key_dist: KeyDist::Uniform,
            zipf_s: 1.0,
            hold: Dist::ZERO,
            think: Dist::ZERO,
            ttl: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(5),
            duration: Duration::from_secs(5),
            ops: None,
            warmup: Duration::from_secs(1),
            rate: None,
            retry_interval: Duration::from_millis(2),
            seed: None,
            no_faults: false,
        }
    }
}

/// The workloads shipped in `workloads/`, compiled in so `--workload NAME` works anywhere.
pub const SHIPPED: &[(&str, &str)] = &[
    ("hot-key", include_str!("../workloads/hot-key.toml")),
    ("many-keys", include_str!("../workloads/many-keys.toml")),
    ("zipf", include_str!("../workloads/zipf.toml")),
    ("long-hold", include_str!("../workloads/long-hold.toml")),
    ("open-loop", include_str!("../workloads/open-loop.toml")),
];

pub fn shipped_names() -> String {
    SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// A shipped workload by name, or a TOML file by path.
pub fn load(spec: &str) -> Result<Workload, String> {
    let (text, origin, stem) = if let Some((name, text)) = SHIPPED.iter().find(|(n, _)| *n == spec) {
        (text.to_string(), format!("workload {name}"), name.to_string())
    } else if std::path::Path::new(spec).is_file() {
        let text = std::fs::read_to_string(spec).map_err(|e| format!("cannot read workload file {spec}: {e}"))?;
        let stem = std::path::Path::new(spec).file_stem().and_then(|s| s.to_str()).unwrap_or("custom").to_string();
        (text, format!("workload file {spec}"), stem)
    } else {
        return Err(format!("no workload {spec:?}: name a shipped one ({}) or a TOML file", shipped_names()));
    };
    let mut w: Workload = toml::from_str(&text).map_err(|e| format!("{origin}: {}", e.message().replace('\n', " ")))?;
    if w.name == Workload::default().name {
        w.name = stem;
    }
    w.validate().map_err(|e| format!("{origin}: {e}"))?;
    Ok(w)
}

/// Command-line values that replace a workload's own.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub clients: Option<usize>,
    pub keys: Option<usize>,
    pub key_dist: Option<KeyDist>,
    pub hold: Option<Dist>,
    pub think: Option<Dist>,
    pub ttl: Option<Duration>,
    pub wait_timeout: Option<Duration>,
    pub duration: Option<Duration>,
    pub ops: Option<u64>,
    pub warmup: Option<Duration>,
    pub rate: Option<f64>,
    pub seed: Option<u64>,
}

impl Overrides {
    pub fn apply(&self, w: &mut Workload) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { w.$f = v; } )* };
        }
        set!(clients, keys, key_dist, hold, think, ttl, wait_timeout, duration, warmup);
        if self.ops.is_some() {
            w.ops = self.ops;
        }
        if self.rate.is_some() {
            w.rate = self.rate;
        }
        if self.seed.is_some() {
            w.seed = self.seed;
        }
    }
}

impl Workload {
    /// Reject plans that cannot run, with a message naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.clients == 0 {
            return Err("clients must be at least 1".into());
        }
        if self.keys == 0 {
            return Err("keys must be at least 1".into());
        }
        if self.duration.is_zero() {
            return Err("duration must be above zero".into());
        }
        if self.ttl < Duration::from_millis(100) {
            return Err(format!("ttl {} is too short (at least 100ms)", fmt_duration(self.ttl)));
        }
        if self.key_dist == KeyDist::Zipf && !(self.zipf_s > 0.0) {
            return Err("zipf exponent must be above zero".into());
        }
        if let Some(r) = self.rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err(format!("rate {r} must be a positive number of acquisitions per second"));
            }
        }
        if self.ops == Some(0) {
            return Err("ops must be at least 1".into());
        }
        Ok(())
    }

    /// The lock name for key index `i` in run `run`; names never nest (etcd would treat
    /// `a` and `a/b` as sharing a prefix).
    pub fn key_name(&self, run: &str, i: usize) -> String {
        format!("dlbench-{run}-{}-k{i}", self.name)
    }

    /// One line describing the phase, for progress output.
    pub fn describe(&self) -> String {
        let mut s = format!("{} clients, {} key(s)", self.clients, self.keys);
        if self.keys > 1 && self.key_dist == KeyDist::Zipf {
            s.push_str(&format!(" zipf({})", self.zipf_s));
        }
        if let Some(r) = self.rate {
            s.push_str(&format!(", open loop {r}/s"));
        }
        if self.hold != Dist::ZERO {
            s.push_str(&format!(", hold {}", self.hold));
        }
        match self.ops {
            Some(n) => s.push_str(&format!(", {n} ops (at most {})", fmt_duration(self.duration))),
            None => s.push_str(&format!(", {}", fmt_duration(self.duration))),
        }
        if !self.warmup.is_zero() {
            s.push_str(&format!(" + {} warm-up", fmt_duration(self.warmup)));
        }
        if let Some(seed) = self.seed {
            s.push_str(&format!(", seed {seed}"));
        }
        s
    }
}

/// A client's repeatable source of keys and durations.
pub struct KeyPicker {
    rng: StdRng,
    keys: usize,
    zipf: Option<rand_distr::Zipf<f64>>,
}

impl KeyPicker {
    /// Client `client` of a workload with seed `seed`: the same pair, the same sequence.
    pub fn new(w: &Workload, client: u64) -> Self {
        let seed = w.seed.unwrap_or(0) ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let zipf = (w.key_dist == KeyDist::Zipf && w.keys > 1)
            .then(|| rand_distr::Zipf::new(w.keys as f64, w.zipf_s).expect("validated zipf"));
        KeyPicker { rng: StdRng::seed_from_u64(seed), keys: w.keys, zipf }
    }

    pub fn next_key(&mut self) -> usize {
        if self.keys <= 1 {
            return 0;
        }
        match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as usize).saturating_sub(1).min(self.keys - 1),
            None => self.rng.random_range(0..self.keys),
        }
    }

    pub fn sample(&mut self, d: &Dist) -> Duration {
        d.sample(&mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_parses_and_prints() {
        for s in ["5ms", "uniform(1ms,10ms)", "exp(2s)"] {
            let d: Dist = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
        assert!("uniform(10ms,1ms)".parse::<Dist>().is_err());
    }

    #[test]
    fn same_seed_same_keys_other_seed_other_keys() {
        let w = Workload { keys: 100, seed: Some(42), ..Default::default() };
        let seq = |w: &Workload| {
            let mut p = KeyPicker::new(w, 3);
            (0..50).map(|_| p.next_key()).collect::<Vec<_>>()
        };
        assert_eq!(seq(&w), seq(&w));
        assert_ne!(seq(&w), seq(&Workload { seed: Some(43), ..w.clone() }));
    }

    #[test]
    fn shipped_workloads_load_and_validate() {
        for (name, _) in SHIPPED {
            let w = load(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&w.name, name);
        }
        assert!(load("open-loop").unwrap().rate.is_some());
        let lh = load("long-hold").unwrap();
        assert!(lh.hold.max() < lh.ttl && lh.hold.max() * 10 > lh.ttl * 8, "long-hold holds near the TTL");
        let e = load("nosuch").unwrap_err();
        assert!(e.contains("hot-key") && e.contains("zipf"), "{e}");
    }

    #[test]
    fn a_bad_field_in_a_file_is_named() {
        let p = std::env::temp_dir().join(format!("dlbench-wl-{}.toml", std::process::id()));
        std::fs::write(&p, "clients = 4\nhold = \"soon\"\n").unwrap();
        let e = load(p.to_str().unwrap()).unwrap_err();
        assert!(e.contains("soon"), "{e}");
        std::fs::write(&p, "client = 4\n").unwrap();
        let e = load(p.to_str().unwrap()).unwrap_err();
        assert!(e.contains("client"), "{e}");
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn overrides_replace_only_what_they_name() {
        let mut w = load("zipf").unwrap();
        Overrides { clients: Some(3), rate: Some(50.0), ..Default::default() }.apply(&mut w);
        assert_eq!((w.clients, w.keys, w.rate), (3, 1000, Some(50.0)));
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let w = Workload { keys: 1000, key_dist: KeyDist::Zipf, ..Default::default() };
        let mut p = KeyPicker::new(&w, 0);
        let hits = (0..10_000).filter(|_| p.next_key() < 10).count();
        assert!(hits > 3000, "top 1% of keys got only {hits} of 10000 picks");
    }
}
