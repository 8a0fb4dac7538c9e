//! `Version`: dotted integers (`major.minor`, optionally `.patch`), compared as integer
//! tuples the way `oslo_utils.versionutils.convert_version_to_tuple` does (`1.10 > 1.2`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A version such as `1.2` or `1.1.5`. On the wire and in config it is always a string.
///
/// The text is kept as written when it is not the canonical form (`"1.01"`, `"01.2"`):
/// OVO keeps a decoded object's version string and a manifest's strings as they came, and
/// writes them back so. Equality and order are by value (`1.01 == 1.1`, as OVO's tuple
/// comparisons); [`same_text`](Self::same_text) is OVO's string comparison.
#[derive(Clone, Copy)]
pub struct Version {
    major: u32,
    minor: u32,
    patch: Option<u32>,
    /// Leading zeros written before each part (`1.01` is minor 1 with one), which is all
    /// that can make a text other than the canonical one: kept in three bytes, not text.
    zeros: [u8; 3],
}

/// A version string that is not dotted integers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// A part is not a non-negative integer; `part` is the offending text, as Python's
    /// `int()` would name it.
    #[error("invalid literal for int() with base 10: '{part}' (in version '{text}')")]
    NotAnInteger {
        /// The whole version text.
        text: String,
        /// The part that is not an integer.
        part: String,
    },
    /// Fewer than two or more than three parts (or a part with more than 255 leading zeros).
    #[error("version '{text}' must be MAJOR.MINOR or MAJOR.MINOR.PATCH")]
    WrongShape {
        /// The whole version text.
        text: String,
    },
}

impl Version {
    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Version {
            major,
            minor,
            patch: None,
            zeros: [0; 3],
        }
    }

    /// `major.minor.patch` (the `.Z` OVO reserves for stable-branch backports).
    pub const fn with_patch(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch: Some(patch),
            zeros: [0; 3],
        }
    }

    /// The major part.
    pub const fn major(&self) -> u32 {
        self.major
    }

    /// The minor part.
    pub const fn minor(&self) -> u32 {
        self.minor
    }

    /// The patch part, if the version has three parts.
    pub const fn patch(&self) -> Option<u32> {
        self.patch
    }

    /// This version with any `.patch` part removed (canonical text).
    pub const fn major_minor(&self) -> Version {
        Version::new(self.major, self.minor)
    }

    /// Whether an implementation at `self` can take something at `requested`: same major,
    /// and `requested <= self` with a missing patch read as 0 (OVO's `is_compatible`,
    /// which compares through `packaging`, and oslo.messaging's `version_is_compatible`:
    /// `1.2.0` is `1.2`).
    pub fn accepts(&self, requested: &Version) -> bool {
        let padded = |v: &Version| [v.major, v.minor, v.patch.unwrap_or(0)];
        self.major == requested.major && padded(requested) <= padded(self)
    }

    /// Whether both are the same text (OVO compares version strings with `==` to decide
    /// whether a backport is needed: `"1.01" != "1.1"`).
    pub fn same_text(&self, other: &Version) -> bool {
        (self.major, self.minor, self.patch, self.zeros)
            == (other.major, other.minor, other.patch, other.zeros)
    }

    fn parts(&self) -> ([u32; 3], usize) {
        match self.patch {
            Some(p) => ([self.major, self.minor, p], 3),
            None => ([self.major, self.minor, 0], 2),
        }
    }
}

impl PartialEq for Version {
    /// By value, as tuples: `1.01 == 1.1`, `1.1 != 1.1.0`.
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl std::hash::Hash for Version {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.major, self.minor, self.patch).hash(state);
    }
}

impl Ord for Version {
    /// Tuple order: `1.1 < 1.1.0 < 1.1.5 < 1.2 < 1.10`.
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, la) = self.parts();
        let (b, lb) = other.parts();
        a[..la].cmp(&b[..lb])
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Version {
    type Err = VersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // Every primitive header carries one, almost always plain ("1.2").
        match parse_plain(text.as_bytes()) {
            Some(v) => Ok(v),
            None => parse_general(text),
        }
    }
}

/// Any version text, or why it is not one.
fn parse_general(text: &str) -> Result<Version, VersionError> {
    let mut parts = [0u32; 3];
    let mut n = 0;
    for part in text.split('.') {
        if n == 3 {
            return Err(VersionError::WrongShape { text: text.into() });
        }
        // Python's int() accepts surrounding whitespace and a sign; a version never
        // needs either, so only plain digits are taken.
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(VersionError::NotAnInteger {
                text: text.into(),
                part: part.into(),
            });
        }
        parts[n] = part.parse().map_err(|_| VersionError::NotAnInteger {
            text: text.into(),
            part: part.into(),
        })?;
        n += 1;
    }
    if n < 2 {
        return Err(VersionError::WrongShape { text: text.into() });
    }
    let mut v = Version {
        major: parts[0],
        minor: parts[1],
        patch: (n == 3).then_some(parts[2]),
        zeros: [0; 3],
    };
    // Leading zeros ("1.01") make a text other than the canonical one: keep them.
    for (i, part) in text.split('.').enumerate() {
        let digits = part.trim_start_matches('0');
        let zeros = part.len() - digits.len().max(1);
        v.zeros[i] =
            u8::try_from(zeros).map_err(|_| VersionError::WrongShape { text: text.into() })?;
    }
    Ok(v)
}

/// The common case in one pass: two or three parts of one to nine digits, none with a
/// leading zero. `None` for any other text, which the general parse reads (or refuses)
/// the same as before.
fn parse_plain(text: &[u8]) -> Option<Version> {
    let mut parts = [0u32; 3];
    // The part being read, and how many digits it has so far.
    let mut n = 0;
    let mut digits = 0;
    for &b in text {
        match b {
            // A tenth digit could overflow; a digit after a leading 0 is a leading zero.
            b'0'..=b'9' if digits < 9 && !(digits == 1 && parts[n] == 0) => {
                parts[n] = parts[n] * 10 + u32::from(b - b'0');
                digits += 1;
            }
            b'.' if digits > 0 && n < 2 => {
                n += 1;
                digits = 0;
            }
            _ => return None,
        }
    }
    (n >= 1 && digits > 0).then_some(Version {
        major: parts[0],
        minor: parts[1],
        patch: (n == 2).then_some(parts[2]),
        zeros: [0; 3],
    })
}

impl TryFrom<&str> for Version {
    type Error = VersionError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl Version {
    /// Appends the version text (as [`Display`](fmt::Display) writes it) to `out`
    /// without going through `fmt`: every primitive header carries one.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        let parts = [Some(self.major), Some(self.minor), self.patch];
        for (i, part) in parts.iter().enumerate() {
            let Some(p) = part else { break };
            if i > 0 {
                out.push(b'.');
            }
            out.extend(std::iter::repeat_n(b'0', usize::from(self.zeros[i])));
            write_u32(out, *p);
        }
    }
}

/// Appends `n` in decimal.
pub(crate) fn write_u32(out: &mut Vec<u8>, mut n: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.zeros == [0; 3] {
            return match self.patch {
                Some(p) => write!(f, "{}.{}.{}", self.major, self.minor, p),
                None => write!(f, "{}.{}", self.major, self.minor),
            };
        }
        let parts = [Some(self.major), Some(self.minor), self.patch];
        for (i, part) in parts.iter().enumerate() {
            let Some(p) = part else { break };
            if i > 0 {
                f.write_str(".")?;
            }
            for _ in 0..self.zeros[i] {
                f.write_str("0")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({self})")
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    /// Only strings: a bare number (`1.1` in TOML or JSON) is refused, since `1.10` would
    /// read as `1.1`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Version;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quoted version string such as \"1.1\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Version, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Version, E> {
                Err(E::custom(format!(
                    "version {n} is a bare number; quote it (\"{n}\"), since 1.10 would read as 1.1"
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Version, E> {
                Err(E::custom(format!(
                    "version {n} is a bare number; write a quoted MAJOR.MINOR string such as \"{n}.0\""
                )))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Version, E> {
                Err(E::custom(format!(
                    "version {n} is a bare number; write a quoted MAJOR.MINOR string"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().expect("valid version")
    }

    #[test]
    fn orders_as_integer_tuples() {
        assert!(v("1.10") > v("1.2"));
        assert!(v("1.1") < v("1.1.0"));
        assert!(v("1.1.5") < v("1.2"));
        assert!(v("2.0") > v("1.99"));
    }

    #[test]
    fn accepts_older_minor_of_same_major_only() {
        assert!(v("1.2").accepts(&v("1.0")));
        assert!(v("1.2").accepts(&v("1.2")));
        assert!(v("1.2").accepts(&v("1.1.5")));
        assert!(!v("1.2").accepts(&v("1.2.1")));
        assert!(!v("1.2").accepts(&v("1.3")));
        assert!(!v("1.2").accepts(&v("0.9")));
        assert!(!v("2.0").accepts(&v("1.0")));
    }

    #[test]
    fn the_one_pass_parse_agrees_with_the_general_one() {
        let parts = [
            "",
            "0",
            "00",
            "1",
            "01",
            "10",
            "007",
            "2",
            "123456789",
            "0123456789",
            "1234567890",
            "4294967295",
            "4294967296",
            "x",
            " 1",
            "1 ",
            "+1",
            "-1",
            "1x",
        ];
        let mut texts: Vec<String> = parts.iter().map(|p| (*p).to_owned()).collect();
        for a in parts {
            for b in parts {
                texts.push(format!("{a}.{b}"));
                for c in parts {
                    texts.push(format!("{a}.{b}.{c}"));
                    texts.push(format!("{a}.{b}.{c}.1"));
                }
            }
        }
        let mut plain = 0;
        for t in &texts {
            let general = parse_general(t);
            match parse_plain(t.as_bytes()) {
                Some(v) => {
                    plain += 1;
                    let g = general.unwrap_or_else(|e| panic!("{t}: {e}"));
                    assert!(v.same_text(&g) && v == g, "{t}");
                    assert_eq!(v.to_string(), *t);
                }
                None => assert!(
                    general.is_err()
                        || t.split('.')
                            .any(|p| p.len() > 9 || p.starts_with('0') && p.len() > 1),
                    "{t} is plain but was left to the general parse"
                ),
            }
        }
        assert!(plain > 100, "{plain}");
    }

    #[test]
    fn rejects_malformed_text() {
        assert!(
            matches!("1.x".parse::<Version>(), Err(VersionError::NotAnInteger { part, .. }) if part == "x")
        );
        assert!(matches!(
            "1".parse::<Version>(),
            Err(VersionError::WrongShape { .. })
        ));
        assert_eq!(
            "1.2.3.4".parse::<Version>(),
            Err(VersionError::WrongShape {
                text: "1.2.3.4".into()
            })
        );
        for (text, part) in [("", ""), ("1.-2", "-2"), ("1. 2", " 2")] {
            assert_eq!(
                text.parse::<Version>(),
                Err(VersionError::NotAnInteger {
                    text: text.into(),
                    part: part.into()
                })
            );
        }
    }

    #[test]
    fn text_is_kept_as_written() {
        let odd = v("1.01");
        assert_eq!(odd.to_string(), "1.01");
        assert_eq!(odd, v("1.1"));
        assert!(!odd.same_text(&v("1.1")));
        assert!(odd.same_text(&v("1.01")));
        assert_eq!(v("01.2.00").to_string(), "01.2.00");
        assert!(!v("1.2.0").same_text(&v("1.2")));
        assert_eq!(
            v("1.0000000000000000000001").to_string(),
            "1.0000000000000000000001"
        );
        assert_eq!(v("0.000").to_string(), "0.000");
        let zeros = format!("1.{}1", "0".repeat(300));
        assert_eq!(
            zeros.parse::<Version>(),
            Err(VersionError::WrongShape {
                text: zeros.clone()
            })
        );
    }

    #[test]
    fn a_missing_patch_is_zero_for_compatibility() {
        assert!(v("1.2").accepts(&v("1.2.0")));
        assert!(v("1.2.0").accepts(&v("1.2")));
        assert!(!v("1.2").accepts(&v("1.2.1")));
        assert!(v("1.2").accepts(&v("1.02")));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "1.0", "1.10", "1.1.5", "0.9", "1.01", "00.1", "0.0", "1.00.010",
        ] {
            assert_eq!(v(s).to_string(), s);
        }
    }

    #[test]
    fn serde_refuses_bare_numbers() {
        assert_eq!(
            serde_json::from_str::<Version>("\"1.1\"").ok(),
            Some(v("1.1"))
        );
        let err = serde_json::from_str::<Version>("1.1").expect_err("float refused");
        assert!(err.to_string().contains("quote"), "{err}");
    }
}
