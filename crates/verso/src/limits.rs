//! [`DecodeLimits`]: how deep and how wide a primitive from a peer may be.
//!
//! A peer is not trusted to send reasonable documents: a primitive nested 100,000 levels
//! deep would overflow the stack of a recursive decoder, and a list of millions of tiny
//! members costs far more memory decoded than it took on the wire. Every decode entry
//! point ([`Registry::from_primitive`](crate::Registry::from_primitive),
//! [`VersionedObject::from_primitive`](crate::VersionedObject::from_primitive),
//! [`VersionedObject::from_primitive_slice`](crate::VersionedObject::from_primitive_slice))
//! checks the whole document against the limits first, without recursion and without
//! allocating, so a document over a limit is refused whole ([`Error::Limit`]) before any
//! of it is decoded.
//!
//! The defaults ([`DEFAULT_MAX_DEPTH`] 32, [`DEFAULT_MAX_MEMBERS`] 100,000) leave ample
//! room for real models: the deepest document of the Cyborg example (an RPC message whose
//! argument is an `AttachHandleList` of handles with their `Device`) is 9 levels deep, and
//! 100,000 members is ten times the largest list the benchmarks send.
//!
//! ```
//! use serde_json::json;
//! use verso::{DecodeLimits, LimitError};
//!
//! let limits = DecodeLimits { max_depth: 3, max_members: 2 };
//! assert!(limits.check_value(&json!({"a": [1, 2]})).is_ok());
//! assert_eq!(limits.check_value(&json!([[[[1]]]])), Err(LimitError::TooDeep { limit: 3 }));
//! assert_eq!(limits.check_json(br#"{"a": [1, 2, 3]}"#), Err(LimitError::TooManyMembers { limit: 2 }));
//! ```

use serde_json::Value;

/// The default [`DecodeLimits::max_depth`].
pub const DEFAULT_MAX_DEPTH: usize = 32;
/// The default [`DecodeLimits::max_members`].
pub const DEFAULT_MAX_MEMBERS: usize = 100_000;

/// Bounds on a JSON document from a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The deepest nesting of JSON lists and objects (dicts); a scalar is at depth 0,
    /// `[1]` at depth 1. Default [`DEFAULT_MAX_DEPTH`].
    pub max_depth: usize,
    /// The most members of one JSON list, or keys of one JSON object. Default
    /// [`DEFAULT_MAX_MEMBERS`].
    pub max_members: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_depth: DEFAULT_MAX_DEPTH,
            max_members: DEFAULT_MAX_MEMBERS,
        }
    }
}

/// A document over a [`DecodeLimits`] bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// Lists and objects nested deeper than the limit.
    #[error("nested deeper than the limit of {limit} levels")]
    TooDeep {
        /// [`DecodeLimits::max_depth`].
        limit: usize,
    },
    /// A list or object with more members than the limit.
    #[error("a list or dict has more than the limit of {limit} members")]
    TooManyMembers {
        /// [`DecodeLimits::max_members`].
        limit: usize,
    },
}

impl DecodeLimits {
    /// No limits at all (for documents this process built itself).
    pub const UNLIMITED: DecodeLimits = DecodeLimits {
        max_depth: usize::MAX,
        max_members: usize::MAX,
    };

    /// Checks a parsed document. Iterative: any depth is refused without recursion.
    pub fn check_value(&self, value: &Value) -> Result<(), LimitError> {
        let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
        while let Some((v, depth)) = stack.pop() {
            let (len, children): (usize, Box<dyn Iterator<Item = &Value>>) = match v {
                Value::Array(a) => (a.len(), Box::new(a.iter())),
                Value::Object(m) => (m.len(), Box::new(m.values())),
                _ => continue,
            };
            if depth >= self.max_depth {
                return Err(LimitError::TooDeep {
                    limit: self.max_depth,
                });
            }
            if len > self.max_members {
                return Err(LimitError::TooManyMembers {
                    limit: self.max_members,
                });
            }
            stack.extend(
                children
                    .filter(|c| c.is_array() || c.is_object())
                    .map(|c| (c, depth + 1)),
            );
        }
        Ok(())
    }

    /// Checks JSON text before it is parsed, in one pass without allocating. Only the
    /// structure is looked at: text that is not JSON passes or fails here as it happens
    /// and is refused by the parser afterwards.
    pub fn check_json(&self, text: &[u8]) -> Result<(), LimitError> {
        if self.plainly_within(text) {
            return Ok(());
        }
        // The member count of each open list or object; the depth is its length. Only
        // the innermost `max_depth` levels are ever open, so this stays small.
        let mut members = Levels::default();
        // Whether the innermost open container has any member yet.
        let mut empty = false;
        let mut i = 0;
        while let Some(&b) = text.get(i) {
            i += 1;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'[' | b'{' => {
                    self.first_member(&mut members, &mut empty)?;
                    if members.len() >= self.max_depth {
                        return Err(LimitError::TooDeep {
                            limit: self.max_depth,
                        });
                    }
                    members.push(0);
                    empty = true;
                }
                b']' | b'}' => {
                    members.pop();
                    empty = false;
                }
                b',' => {
                    if let Some(n) = members.last_mut() {
                        *n += 1;
                        if *n > self.max_members {
                            return Err(LimitError::TooManyMembers {
                                limit: self.max_members,
                            });
                        }
                    }
                }
                b'"' => {
                    self.first_member(&mut members, &mut empty)?;
                    i = string_end(text, i);
                }
                _ => self.first_member(&mut members, &mut empty)?,
            }
        }
        Ok(())
    }

    /// Whether `text` cannot break the limits whatever its structure, by counting bytes
    /// (a loop the compiler vectorizes, several times faster than the scan): a level
    /// over `max_depth` needs more than `max_depth` of `[` and `{`, and a container
    /// over `max_members` (at least 1) needs `max_members` commas. Bytes in strings are
    /// counted too, so this only ever errs towards scanning. Gives up at the first
    /// block that reaches either bound (a long list, deep nesting).
    #[inline(never)] // kept out of the scan's loop, whose code it would otherwise change
    fn plainly_within(&self, text: &[u8]) -> bool {
        if self.max_members == 0 {
            return false;
        }
        let (mut opens, mut commas) = (0usize, 0usize);
        // Blocks of 255, so that a byte-wide count cannot overflow.
        for block in text.chunks(255) {
            let (mut o, mut c) = (0u8, 0u8);
            for &b in block {
                // `[` and `{` are the only bytes that are `[` with 0x20 cleared.
                o += u8::from(b & !0x20 == b'[');
                c += u8::from(b == b',');
            }
            opens += usize::from(o);
            commas += usize::from(c);
            if opens > self.max_depth || commas >= self.max_members {
                return false;
            }
        }
        true
    }

    /// The first value inside a container counts as its first member (a list of `n`
    /// members has `n - 1` commas).
    fn first_member(&self, members: &mut Levels, empty: &mut bool) -> Result<(), LimitError> {
        if std::mem::take(empty) {
            if let Some(n) = members.last_mut() {
                *n = 1;
                if *n > self.max_members {
                    return Err(LimitError::TooManyMembers {
                        limit: self.max_members,
                    });
                }
            }
        }
        Ok(())
    }
}

/// The member counts of the open levels, innermost last: the first levels in place (a
/// primitive is rarely more than a dozen deep), deeper ones on the heap.
#[derive(Default)]
struct Levels {
    inline: [usize; 16],
    len: usize,
    deeper: Vec<usize>,
}

impl Levels {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, n: usize) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = n,
            None => self.deeper.push(n),
        }
        self.len += 1;
    }

    fn pop(&mut self) {
        if self.len > self.inline.len() {
            self.deeper.pop();
        }
        self.len = self.len.saturating_sub(1);
    }

    fn last_mut(&mut self) -> Option<&mut usize> {
        match self.len {
            0 => None,
            n if n <= self.inline.len() => self.inline.get_mut(n - 1),
            _ => self.deeper.last_mut(),
        }
    }
}

/// The index just past the `"` that closes the string whose text starts at `i` (the
/// length of `text` when it is not closed). Most of a primitive's bytes are string
/// text, so it is skipped eight bytes at a time, looking only for `"` and `\\`.
fn string_end(text: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    loop {
        if let Some(chunk) = text.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let v = u64::from_le_bytes(word);
            let hits =
                zero_byte(v ^ (ONES * u64::from(b'"'))) | zero_byte(v ^ (ONES * u64::from(b'\\')));
            if hits == 0 {
                i += 8;
                continue;
            }
            // The lowest flagged byte is exact (a borrow only flags bytes above it).
            i += (hits.trailing_zeros() / 8) as usize;
        }
        match text.get(i) {
            None => return text.len(),
            Some(b'"') => return i + 1,
            // An escape: the next byte is part of it, whatever it is.
            Some(b'\\') => i += 2,
            Some(_) => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_ends_are_found_across_words_and_escapes() {
        for (text, from, end) in [
            (&br#""abc" x"#[..], 1, 5),
            (br#""0123456789abcdef" x"#, 1, 18),
            (br#""01234\"6789abcdef" x"#, 1, 19),
            (br#""0123456\\" x"#, 1, 11),
            (br#""0123456789abcdef\"#, 1, 18),
            (br#""unclosed text here"#, 1, 19),
        ] {
            assert_eq!(
                string_end(text, from),
                end,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    /// The scan alone, without the `plainly_within` shortcut: the reference the
    /// shortcut must agree with on any bytes.
    fn reference(limits: &DecodeLimits, text: &[u8]) -> Result<(), LimitError> {
        let first_member = |members: &mut Vec<usize>, empty: &mut bool| {
            if std::mem::take(empty) {
                if let Some(n) = members.last_mut() {
                    *n = 1;
                    if *n > limits.max_members {
                        return Err(LimitError::TooManyMembers {
                            limit: limits.max_members,
                        });
                    }
                }
            }
            Ok(())
        };
        let mut members: Vec<usize> = Vec::new();
        let mut empty = false;
        let mut i = 0;
        while let Some(&b) = text.get(i) {
            i += 1;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'[' | b'{' => {
                    first_member(&mut members, &mut empty)?;
                    if members.len() >= limits.max_depth {
                        return Err(LimitError::TooDeep {
                            limit: limits.max_depth,
                        });
                    }
                    members.push(0);
                    empty = true;
                }
                b']' | b'}' => {
                    members.pop();
                    empty = false;
                }
                b',' => {
                    if let Some(n) = members.last_mut() {
                        *n += 1;
                        if *n > limits.max_members {
                            return Err(LimitError::TooManyMembers {
                                limit: limits.max_members,
                            });
                        }
                    }
                }
                b'"' => {
                    first_member(&mut members, &mut empty)?;
                    i = string_end(text, i);
                }
                _ => first_member(&mut members, &mut empty)?,
            }
        }
        Ok(())
    }

    #[test]
    fn the_byte_count_shortcut_agrees_with_the_scan_on_any_bytes() {
        // xorshift: the same cases on every run, no dependency.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"[]{},\":\\ a1\n";
        let (mut errors, mut counted) = (0, 0);
        for case in 0..40_000 {
            let len = (next() % if case % 10 == 0 { 2000 } else { 60 }) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let limits = DecodeLimits {
                max_depth: (next() % 24) as usize,
                max_members: (next() % 12) as usize,
            };
            let got = limits.check_json(&text);
            assert_eq!(
                got,
                reference(&limits, &text),
                "{limits:?} {}",
                String::from_utf8_lossy(&text)
            );
            errors += usize::from(got.is_err());
            counted += usize::from(limits.plainly_within(&text));
        }
        // Both outcomes, and both ways to pass, are well represented.
        assert!((5_000..35_000).contains(&errors), "{errors}");
        assert!((2_000..30_000).contains(&counted), "{counted}");
    }

    fn nested(open: &str, close: &str, depth: usize) -> Vec<u8> {
        let mut s = open.repeat(depth).into_bytes();
        s.extend_from_slice(close.repeat(depth).as_bytes());
        s
    }

    #[test]
    fn depth_counts_lists_and_objects_alike_in_both_checks() {
        let limits = DecodeLimits {
            max_depth: 3,
            max_members: 10,
        };
        for (doc, ok) in [
            (json!(1), true),
            (json!([]), true),
            (json!({"a": [{}]}), true),
            (json!({"a": [{"b": 1}]}), true),
            (json!({"a": [{"b": []}]}), false),
            (json!([[[[]]]]), false),
        ] {
            let text = serde_json::to_vec(&doc).expect("json");
            assert_eq!(limits.check_value(&doc).is_ok(), ok, "{doc}");
            assert_eq!(limits.check_json(&text).is_ok(), ok, "{doc}");
        }
    }

    #[test]
    fn members_are_counted_per_container_and_strings_are_skipped() {
        let limits = DecodeLimits {
            max_depth: 10,
            max_members: 3,
        };
        for (text, ok) in [
            (r#"[1, 2, 3]"#, true),
            (r#"[1, 2, 3, 4]"#, false),
            (r#"[[1, 2, 3], [1, 2, 3], [1, 2, 3]]"#, true),
            (r#"{"a": 1, "b": 2, "c": 3}"#, true),
            (r#"{"a": 1, "b": 2, "c": 3, "d": 4}"#, false),
            (r#"["a,b,c,d,e", "[[[[[[[[[[[[", "\"],[,"]"#, true),
            (r#"[[], {}, []]"#, true),
            (r#"[[], {}, [], []]"#, false),
        ] {
            let doc: Value = serde_json::from_str(text).expect(text);
            assert_eq!(limits.check_json(text.as_bytes()).is_ok(), ok, "{text}");
            assert_eq!(limits.check_value(&doc).is_ok(), ok, "{text}");
        }
        let one = DecodeLimits {
            max_depth: 10,
            max_members: 0,
        };
        assert!(one.check_json(b"[]").is_ok());
        for text in [&b"[1]"[..], b"{\"a\":1}"] {
            assert_eq!(
                one.check_json(text),
                Err(LimitError::TooManyMembers { limit: 0 })
            );
        }
    }

    #[test]
    fn a_hundred_thousand_levels_are_refused_without_recursing() {
        let limits = DecodeLimits::default();
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let text = nested(open, close, 100_000);
            assert_eq!(
                limits.check_json(&text),
                Err(LimitError::TooDeep { limit: 32 })
            );
        }
        // A Value that deep cannot come from serde_json (its parser stops at 128), but
        // code can build one.
        let mut deep = json!(1);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(
            limits.check_value(&deep),
            Err(LimitError::TooDeep { limit: 32 })
        );
        // Dropping it recursively would overflow the stack: take it apart by hand.
        while let Value::Array(mut a) = deep {
            deep = a.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn unlimited_accepts_anything() {
        assert!(DecodeLimits::UNLIMITED
            .check_json(&nested("[", "]", 1000))
            .is_ok());
    }
}
