//! `DateTime`: the value of a DateTime field, with OVO's exact text form.
//!
//! OVO writes `%Y-%m-%dT%H:%M:%S` (fraction dropped, not rounded) followed by `Z` when the
//! value's time zone is named UTC (parsed from `Z` or from no offset at all), otherwise the
//! value's own offset as `+HH:MM`. An explicit `+00:00` therefore stays `+00:00`. The
//! instant is never converted. This type remembers which of the two the value is, so a
//! value read from a Python peer is written back to it unchanged.

use chrono::{FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc};
use std::fmt;

/// A timezone-aware instant with microsecond precision, as a Python `datetime`.
///
/// ```
/// use verso::DateTime;
/// let t: DateTime = "2024-03-01T12:34:56.5+0200".parse()?;
/// assert_eq!(t.to_ovo_string(), "2024-03-01T12:34:56+02:00");
/// assert_eq!(t.to_isoformat(), "2024-03-01T12:34:56.500000+02:00");
/// let z: DateTime = "2024-03-01T12:34:56".parse()?;
/// assert_eq!(z.to_ovo_string(), "2024-03-01T12:34:56Z");
/// # Ok::<(), verso::DateTimeError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateTime {
    value: chrono::DateTime<FixedOffset>,
    /// The zone is UTC by name (`Z`, no offset, or made from `chrono::Utc`), written `Z`.
    utc_named: bool,
    /// The offset was written `-00:00` (or `-00`, `-0000`): OVO keeps the zone's name, so
    /// it writes `-00:00` back, not `+00:00`.
    negative_zero: bool,
}

/// Text that is not an ISO 8601 date and time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unable to parse date string '{text}'")]
pub struct DateTimeError {
    /// The text that did not parse.
    pub text: String,
}

impl DateTime {
    /// The current time, in UTC.
    pub fn now() -> Self {
        Utc::now().into()
    }

    /// A value at a fixed offset (written with that offset, even `+00:00`).
    pub fn from_fixed(value: chrono::DateTime<FixedOffset>) -> Self {
        DateTime {
            value,
            utc_named: false,
            negative_zero: false,
        }
    }

    /// The instant with its offset.
    pub fn as_chrono(&self) -> chrono::DateTime<FixedOffset> {
        self.value
    }

    /// Whether the zone is UTC by name (written `Z`).
    pub fn is_utc_named(&self) -> bool {
        self.utc_named
    }

    /// OVO's wire text (`DateTime.to_primitive`): no fraction, `Z` or `+HH:MM`.
    pub fn to_ovo_string(&self) -> String {
        let mut out = Vec::with_capacity(25);
        self.write_ovo(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Python's `datetime.isoformat()`: `.ffffff` only when there are microseconds, and the
    /// offset always as `+HH:MM` (UTC is `+00:00`).
    pub fn to_isoformat(&self) -> String {
        let mut out = Vec::with_capacity(32);
        self.write_text(&mut out, true, false);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends [`to_ovo_string`](Self::to_ovo_string) to `out` without allocating.
    pub(crate) fn write_ovo(&self, out: &mut Vec<u8>) {
        self.write_text(out, false, self.utc_named);
    }

    /// `%Y-%m-%dT%H:%M:%S`, then `.ffffff` (if `micros` and non-zero), then `Z` (if `z`)
    /// or the offset as `+HH:MM`. Written without a format-string parse.
    fn write_text(&self, out: &mut Vec<u8>, micros: bool, z: bool) {
        use chrono::{Datelike, Timelike};
        use std::io::Write;
        let t = self.value;
        let two = |out: &mut Vec<u8>, n: u32| {
            out.push(b'0' + (n / 10 % 10) as u8);
            out.push(b'0' + (n % 10) as u8);
        };
        match u32::try_from(t.year()) {
            // OVO's strftime("%Y") (glibc) does not pad: year 1 is written "1".
            Ok(y) if micros && y < 1000 => {
                out.extend(std::iter::repeat_n(
                    b'0',
                    4 - y.max(1).ilog10() as usize - 1,
                ));
                crate::version::write_u32(out, y);
            }
            Ok(y) => crate::version::write_u32(out, y),
            Err(_) if micros => {
                let _ = write!(out, "{:04}", t.year());
            }
            Err(_) => {
                let _ = write!(out, "{}", t.year());
            }
        }
        for (sep, n) in [
            (b'-', t.month()),
            (b'-', t.day()),
            (b'T', t.hour()),
            (b':', t.minute()),
            (b':', t.second()),
        ] {
            out.push(sep);
            two(out, n);
        }
        let us = t.timestamp_subsec_micros();
        if micros && us != 0 {
            let _ = write!(out, ".{us:06}");
        }
        if z {
            out.push(b'Z');
        } else {
            let secs = t.offset().local_minus_utc();
            let m = secs.unsigned_abs() / 60;
            // isoformat() writes a zero offset as +00:00 whatever its name.
            let sign = if secs < 0 || (self.negative_zero && !micros) {
                b'-'
            } else {
                b'+'
            };
            out.push(sign);
            two(out, m / 60);
            out.push(b':');
            two(out, m % 60);
        }
    }
}

impl From<chrono::DateTime<Utc>> for DateTime {
    fn from(value: chrono::DateTime<Utc>) -> Self {
        DateTime {
            value: value.with_timezone(&Utc.fix()),
            utc_named: true,
            negative_zero: false,
        }
    }
}

impl std::str::FromStr for DateTime {
    type Err = DateTimeError;

    /// Parses the common part of what the `iso8601` package accepts for OVO:
    /// `YYYY-MM-DD`, optionally `T` (or a space) and `HH:MM[:SS[.fraction]]`, optionally
    /// `Z`, `±HH:MM`, `±HHMM` or `±HH`. No offset means UTC. The fraction is kept to
    /// microseconds (truncated). Year 0 does not exist in Python and is refused; `t` and
    /// `z` are refused as iso8601 refuses them. The reduced and basic forms iso8601 also
    /// takes (`2024`, `2024-3-5`, `20240301T1234`) are refused: a deliberate difference
    /// (README, "Deliberate differences from oslo.versionedobjects").
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text).ok_or_else(|| DateTimeError { text: text.into() })
    }
}

fn parse(text: &str) -> Option<DateTime> {
    let b = text.as_bytes();
    // Hand-rolled digit reading: this runs for every DateTime field of every decode.
    let num = |s: &[u8]| -> Option<u32> {
        if s.is_empty() || s.len() > 9 {
            return None;
        }
        s.iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = num(&b[0..4])?;
    if year == 0 {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(year as i32, num(&b[5..7])?, num(&b[8..10])?)?;
    let mut rest = &b[10..];
    let (mut h, mut mi, mut s, mut micros) = (0, 0, 0, 0);
    if let Some((&sep, tail)) = rest.split_first() {
        if sep == b'T' || sep == b' ' {
            if tail.len() < 5 || tail[2] != b':' {
                return None;
            }
            h = num(&tail[0..2])?;
            mi = num(&tail[3..5])?;
            rest = &tail[5..];
            if rest.first() == Some(&b':') {
                if rest.len() < 3 {
                    return None;
                }
                s = num(&rest[1..3])?;
                rest = &rest[3..];
                if matches!(rest.first(), Some(b'.') | Some(b',')) {
                    let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if digits == 0 {
                        return None;
                    }
                    let frac = &rest[1..1 + digits.min(6)];
                    micros = num(frac)? * 10u32.pow(6 - frac.len() as u32);
                    rest = &rest[1 + digits..];
                }
            }
        }
    }
    let time = NaiveTime::from_hms_micro_opt(h, mi, s, micros)?;
    let naive = NaiveDateTime::new(date, time);
    let (offset, utc_named) = match rest {
        [] | [b'Z'] => (0, true),
        [sign @ (b'+' | b'-'), tz @ ..] => {
            let (hh, mm) = match tz {
                [a, b] => (num(&[*a, *b])?, 0),
                [a, b, c, d] => (num(&[*a, *b])?, num(&[*c, *d])?),
                [a, b, b':', c, d] => (num(&[*a, *b])?, num(&[*c, *d])?),
                _ => return None,
            };
            if hh > 23 || mm > 59 {
                return None;
            }
            let secs = (hh * 3600 + mm * 60) as i32;
            (if *sign == b'-' { -secs } else { secs }, false)
        }
        _ => return None,
    };
    let negative_zero = offset == 0 && rest.first() == Some(&b'-');
    let tz = FixedOffset::east_opt(offset)?;
    let value = tz.from_local_datetime(&naive).single()?;
    Some(DateTime {
        value,
        utc_named,
        negative_zero,
    })
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_ovo_string())
    }
}

impl fmt::Debug for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DateTime({})", self.to_isoformat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> DateTime {
        s.parse().expect("parses")
    }

    #[test]
    fn ovo_text_forms() {
        assert_eq!(
            dt("2024-03-01T12:34:56Z").to_ovo_string(),
            "2024-03-01T12:34:56Z"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56.999999Z").to_ovo_string(),
            "2024-03-01T12:34:56Z"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56").to_ovo_string(),
            "2024-03-01T12:34:56Z"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56+00:00").to_ovo_string(),
            "2024-03-01T12:34:56+00:00"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56+0200").to_ovo_string(),
            "2024-03-01T12:34:56+02:00"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56-05:30").to_ovo_string(),
            "2024-03-01T12:34:56-05:30"
        );
        assert_eq!(dt("2024-03-01").to_ovo_string(), "2024-03-01T00:00:00Z");
    }

    #[test]
    fn negative_zero_offset_and_short_years_written_as_ovo_does() {
        // OVO keeps the zone name "-00:00"; isoformat() still says +00:00.
        let t = dt("2024-03-01T12:34:56-00:00");
        assert_eq!(t.to_ovo_string(), "2024-03-01T12:34:56-00:00");
        assert_eq!(t.to_isoformat(), "2024-03-01T12:34:56+00:00");
        assert_eq!(
            dt("2024-03-01T12:34:56-0000").to_ovo_string(),
            "2024-03-01T12:34:56-00:00"
        );
        // strftime("%Y") does not pad the year.
        let old = dt("0001-01-17T21:35:58Z");
        assert_eq!(old.to_ovo_string(), "1-01-17T21:35:58Z");
        assert_eq!(old.to_isoformat(), "0001-01-17T21:35:58+00:00");
    }

    #[test]
    fn isoformat_keeps_micros() {
        assert_eq!(
            dt("2024-03-01T12:34:56.123456Z").to_isoformat(),
            "2024-03-01T12:34:56.123456+00:00"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56.1Z").to_isoformat(),
            "2024-03-01T12:34:56.100000+00:00"
        );
        assert_eq!(
            dt("2024-03-01T12:34:56Z").to_isoformat(),
            "2024-03-01T12:34:56+00:00"
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "yesterday",
            "2024-13-01",
            "2024-03-01T25:00:00",
            "2024-03-01T12:34:56+2",
            "2024-03-01T12:34:56Zjunk",
            "2024-03-01T12:3",
            "0000-01-01T00:00:00Z",
            "2024-03-01t12:34:56Z",
            "2024-03-01T12:34:56z",
        ] {
            assert_eq!(
                bad.parse::<DateTime>(),
                Err(DateTimeError { text: bad.into() }),
                "{bad}"
            );
        }
    }
}
