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
        // Only containers are stacked, each with its depth.
        let mut stack: Vec<(&Value, usize)> = Vec::new();
        let mut next = Some((value, 0usize));
        while let Some((v, depth)) = next.take().or_else(|| stack.pop()) {
            let len = match v {
                Value::Array(a) => a.len(),
                Value::Object(m) => m.len(),
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
            let nested = |c: &&Value| c.is_array() || c.is_object();
            match v {
                Value::Array(a) => stack.extend(a.iter().filter(nested).map(|c| (c, depth + 1))),
                Value::Object(m) => stack.extend(m.values().filter(nested).map(|c| (c, depth + 1))),
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks JSON text before it is parsed, in one pass without allocating. Only the
    /// structure is looked at: text that is not JSON passes or fails here as it happens
    /// and is refused by the parser afterwards.
    pub fn check_json(&self, text: &[u8]) -> Result<(), LimitError> {
        // The commas of each open list or object, innermost last; the depth is its
        // length. A container with n commas has n + 1 members. Only the innermost
        // `max_depth` levels are ever open, so this stays small.
        let mut commas: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let b = text[i];
            i += 1;
            // Most bytes are not structural: one table lookup passes them.
            if !STRUCTURAL[usize::from(b)] {
                continue;
            }
            match b {
                b'[' | b'{' => {
                    if commas.len() >= self.max_depth {
                        return Err(LimitError::TooDeep {
                            limit: self.max_depth,
                        });
                    }
                    commas.push(0);
                }
                b']' | b'}' => {
                    // With no member allowed, a container without commas may still
                    // hold one: it is empty only if its opener comes right before.
                    let closed = commas.pop();
                    if self.max_members == 0 && closed == Some(0) {
                        let before = text[..i - 1]
                            .iter()
                            .rev()
                            .find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
                        if !matches!(before, Some(b'[' | b'{') | None) {
                            return Err(self.too_many());
                        }
                    }
                }
                b',' => {
                    if let Some(n) = commas.last_mut() {
                        *n += 1;
                        if *n >= self.max_members {
                            return Err(self.too_many());
                        }
                    }
                }
                // b'"': skip the string, escapes included. Most of a primitive's bytes
                // are in strings, and memchr passes over them several at a time.
                _ => loop {
                    let rest = text.get(i..).unwrap_or_default();
                    match memchr::memchr2(b'"', b'\\', rest) {
                        None => return Ok(()),
                        Some(at) if rest[at] == b'"' => {
                            i += at + 1;
                            break;
                        }
                        // A backslash escapes the byte after it.
                        Some(at) => i += at + 2,
                    }
                },
            }
        }
        Ok(())
    }

    fn too_many(&self) -> LimitError {
        LimitError::TooManyMembers {
            limit: self.max_members,
        }
    }
}

/// The bytes [`DecodeLimits::check_json`] acts on outside strings: brackets, braces,
/// commas and the quote that starts a string.
static STRUCTURAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b',' as usize] = true;
    t[b'"' as usize] = true;
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(one.check_json(b"[1]").is_err());
        assert!(one.check_json(b"{\"a\":1}").is_err());
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
