//! The words a verdict is made of, as types: each enum serializes to the word summary.json
//! has always carried (so result sets written before still read), and `as_str` is the one
//! place each word is spelled.

use serde::{Deserialize, Serialize};

/// The safety word of a phase or a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
pub enum SafetyWord {
    /// No violation, holders exposed enough of the time to see one.
    #[serde(rename = "safe")]
    Safe,
    /// No violation, but holders were inside too little of the time (weak evidence).
    #[serde(rename = "no violation seen")]
    NoViolationSeen,
    /// Nothing entered the protected resource.
    #[serde(rename = "not tested")]
    NotTested,
    /// Two holders, every stale write refused by fencing, nothing broken.
    #[serde(rename = "safe with fencing")]
    SafeWithFencing,
    /// A checker could not decide.
    #[serde(rename = "unknown")]
    Unknown,
    /// Tokens went backwards or a legitimate holder was refused.
    #[serde(rename = "fencing broken")]
    FencingBroken,
    /// Two holders, and nothing stopped the stale writes.
    #[serde(rename = "unsafe", alias = "violated")]
    Unsafe,
}

impl SafetyWord {
    pub const ALL: [SafetyWord; 7] = [
        SafetyWord::Safe,
        SafetyWord::NoViolationSeen,
        SafetyWord::NotTested,
        SafetyWord::SafeWithFencing,
        SafetyWord::Unknown,
        SafetyWord::FencingBroken,
        SafetyWord::Unsafe,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SafetyWord::Safe => "safe",
            SafetyWord::NoViolationSeen => "no violation seen",
            SafetyWord::NotTested => "not tested",
            SafetyWord::SafeWithFencing => "safe with fencing",
            SafetyWord::Unknown => "unknown",
            SafetyWord::FencingBroken => "fencing broken",
            SafetyWord::Unsafe => "unsafe",
        }
    }

    /// How bad it is as a violation (for `compare`): no violation, whatever the strength of
    /// the evidence, 0; safe with fencing 1; unknown 2; fencing broken 3; unsafe 4.
    pub fn violation_rank(self) -> u8 {
        match self {
            SafetyWord::Safe | SafetyWord::NoViolationSeen | SafetyWord::NotTested => 0,
            SafetyWord::SafeWithFencing => 1,
            SafetyWord::Unknown => 2,
            SafetyWord::FencingBroken => 3,
            SafetyWord::Unsafe => 4,
        }
    }
}

impl std::fmt::Display for SafetyWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How strongly the evidence speaks for "no second holder".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strength {
    /// Holders were inside enough of the time (or the lock refused every attempt) for a
    /// second holder to have been seen.
    Strong,
    Weak,
    /// Nothing entered the resource.
    None,
}

impl Strength {
    pub fn as_str(self) -> &'static str {
        match self {
            Strength::Strong => "strong",
            Strength::Weak => "weak",
            Strength::None => "none",
        }
    }
}

impl std::fmt::Display for Strength {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The AP / CP class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Class {
    /// Consistent (no two holders, state kept) and available under the faults.
    #[serde(rename = "CP+A")]
    CpA,
    /// Consistent, not available under the faults.
    #[serde(rename = "CP")]
    Cp,
    /// Available, not consistent.
    #[serde(rename = "AP")]
    Ap,
    #[serde(rename = "neither")]
    Neither,
    /// Safety could not be decided.
    #[serde(rename = "unknown")]
    Unknown,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::CpA => "CP+A",
            Class::Cp => "CP",
            Class::Ap => "AP",
            Class::Neither => "neither",
            Class::Unknown => "unknown",
        }
    }

    pub fn of(consistent: bool, available: bool) -> Class {
        match (consistent, available) {
            (true, true) => Class::CpA,
            (true, false) => Class::Cp,
            (false, true) => Class::Ap,
            (false, false) => Class::Neither,
        }
    }

    /// Whether it says consistent: what a CP claim is checked against.
    pub fn consistent(self) -> bool {
        matches!(self, Class::CpA | Class::Cp)
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The availability word: the grant rate under faults against the no-fault rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AvailWord {
    Available,
    Degraded,
    Unavailable,
}

impl AvailWord {
    pub fn of_ratio(r: f64) -> AvailWord {
        if r >= super::AVAILABLE_RATIO {
            AvailWord::Available
        } else if r >= super::DEGRADED_RATIO {
            AvailWord::Degraded
        } else {
            AvailWord::Unavailable
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AvailWord::Available => "available",
            AvailWord::Degraded => "degraded",
            AvailWord::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for AvailWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A grant rate as a share of the no-fault rate, one way in every output.
pub fn grant_rate(ratio: f64) -> String {
    format!("grant rate {:.0}% of the no-fault rate", ratio * 100.0)
}

/// A word compares equal to its spelling, so a reader or a test can ask `safety == "safe"`.
macro_rules! spelled {
    ($($t:ty),*) => {$(
        impl PartialEq<&str> for $t {
            fn eq(&self, o: &&str) -> bool {
                self.as_str() == *o
            }
        }
        impl PartialEq<str> for $t {
            fn eq(&self, o: &str) -> bool {
                self.as_str() == o
            }
        }
    )*};
}
spelled!(SafetyWord, Strength, Class, AvailWord);
