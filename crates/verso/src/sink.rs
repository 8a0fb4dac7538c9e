//! Where an encode walk writes. Each field type encodes itself once, against [`Sink`]
//! ([`FieldValue::encode`](crate::FieldValue::encode), an object's fields and envelope
//! likewise), and the two sinks make the two forms of a primitive: a
//! `serde_json::Value` ([`ValueSink`]) and JSON text written straight to a buffer
//! ([`JsonSink`], the hot path of every call), as one serde `Serialize` serves every
//! format.

use crate::schema::PrimitiveKeys;
use crate::version::Version;
use serde_json::{Map, Value};

/// What an encode walk writes to: JSON values, lists and maps, in order.
///
/// A map's entries are a key ([`key`](Self::key), [`plain_key`](Self::plain_key) or
/// [`field_key`](Self::field_key)) followed by one value. The walk says where one
/// member or entry ends and the next begins ([`next`](Self::next)), as it knows
/// without keeping state: the sinks then keep none either.
pub trait Sink {
    /// Between two members of a list or two entries of a map.
    fn next(&mut self);
    /// `null`.
    fn null(&mut self);
    /// A boolean.
    fn bool(&mut self, v: bool);
    /// An integer.
    fn i64(&mut self, v: i64);
    /// A float; `null` when it is not finite (JSON has no NaN or infinity).
    fn f64(&mut self, v: f64);
    /// A string.
    fn str(&mut self, v: &str);
    /// A string whose UTF-8 text `write` appends, and which needs no JSON escaping (a
    /// UUID, a date, a version): the text sink writes it in place, without a `String`.
    fn plain_str(&mut self, write: impl FnOnce(&mut Vec<u8>));
    /// Starts a list of `len` members.
    fn begin_list(&mut self, len: usize);
    /// Ends the innermost list.
    fn end_list(&mut self);
    /// Starts a map.
    fn begin_map(&mut self);
    /// The key of the next map entry.
    fn key(&mut self, k: &str);
    /// A key that needs no JSON escaping (a primitive's keys, which the derive checks).
    fn plain_key(&mut self, k: &str);
    /// A field's key: its name, and the JSON text `"name":` the derive wrote for it.
    fn field_key(&mut self, name: &'static str, json: &'static [u8]);
    /// Ends the innermost map.
    fn end_map(&mut self);
    /// A value already built (what a `make_compatible` hook left).
    fn value(&mut self, v: Value);
    /// Opens an object primitive: the map, its name, namespace and version under `keys`,
    /// and the key of its data.
    fn primitive_header(
        &mut self,
        keys: &PrimitiveKeys,
        name: &str,
        namespace: &str,
        version: &Version,
    ) {
        self.begin_map();
        self.plain_key(keys.name);
        self.str(name);
        self.next();
        self.plain_key(keys.namespace);
        self.str(namespace);
        self.next();
        self.plain_key(keys.version);
        self.plain_str(|text| version.write_text(text));
        self.next();
        self.plain_key(keys.data);
    }
}

/// Writes JSON text to a buffer it holds (not borrows: every write is then one
/// indirection, as a `&mut Vec<u8>` argument's).
pub struct JsonSink {
    out: Vec<u8>,
}

impl JsonSink {
    /// A sink appending to `out`.
    pub fn new(out: Vec<u8>) -> Self {
        JsonSink { out }
    }

    /// The text written, after what the buffer held.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// Runs `write` with a sink appending to `out`.
    #[inline]
    pub fn append<R>(out: &mut Vec<u8>, write: impl FnOnce(&mut JsonSink) -> R) -> R {
        let mut sink = JsonSink::new(std::mem::take(out));
        let r = write(&mut sink);
        *out = sink.out;
        r
    }

    /// One whole value, which `write` appends as JSON text (a field written by its own
    /// code, as a backport does).
    #[inline]
    pub(crate) fn raw<R>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        write(&mut self.out)
    }
}

impl Sink for JsonSink {
    #[inline]
    fn next(&mut self) {
        self.out.push(b',');
    }
    #[inline]
    fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }
    #[inline]
    fn bool(&mut self, v: bool) {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(itoa_i64(v, &mut [0u8; 20]));
    }
    fn f64(&mut self, v: f64) {
        match serde_json::Number::from_f64(v) {
            Some(n) => {
                let _ = serde_json::to_writer(&mut self.out, &n);
            }
            None => self.null(),
        }
    }
    #[inline]
    fn str(&mut self, v: &str) {
        write_str(&mut self.out, v);
    }
    #[inline]
    fn plain_str(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        self.out.push(b'"');
        write(&mut self.out);
        self.out.push(b'"');
    }
    #[inline]
    fn begin_list(&mut self, _len: usize) {
        self.out.push(b'[');
    }
    #[inline]
    fn end_list(&mut self) {
        self.out.push(b']');
    }
    #[inline]
    fn begin_map(&mut self) {
        self.out.push(b'{');
    }
    #[inline]
    fn key(&mut self, k: &str) {
        write_str(&mut self.out, k);
        self.out.push(b':');
    }
    #[inline]
    fn plain_key(&mut self, k: &str) {
        self.out.push(b'"');
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(b"\":");
    }
    #[inline]
    fn field_key(&mut self, _name: &'static str, json: &'static [u8]) {
        self.out.extend_from_slice(json);
    }
    #[inline]
    fn end_map(&mut self) {
        self.out.push(b'}');
    }
    fn value(&mut self, v: Value) {
        write_value(&mut self.out, &v);
    }
    // As the default, in as few writes as the text allows.
    #[inline]
    fn primitive_header(
        &mut self,
        keys: &PrimitiveKeys,
        name: &str,
        namespace: &str,
        version: &Version,
    ) {
        let out = &mut self.out;
        out.extend_from_slice(b"{\"");
        out.extend_from_slice(keys.name.as_bytes());
        out.extend_from_slice(b"\":");
        write_str(out, name);
        out.extend_from_slice(b",\"");
        out.extend_from_slice(keys.namespace.as_bytes());
        out.extend_from_slice(b"\":");
        write_str(out, namespace);
        out.extend_from_slice(b",\"");
        out.extend_from_slice(keys.version.as_bytes());
        out.extend_from_slice(b"\":\"");
        version.write_text(out);
        out.extend_from_slice(b"\",\"");
        out.extend_from_slice(keys.data.as_bytes());
        out.extend_from_slice(b"\":");
    }
}

/// Builds a `serde_json::Value`.
#[derive(Default)]
pub struct ValueSink {
    /// The lists and maps being filled, innermost last, each with the key it will be
    /// stored under in the map around it.
    open: Vec<(Open, String)>,
    /// The key of the next entry of the innermost map.
    key: String,
    done: Value,
}

enum Open {
    List(Vec<Value>),
    Map(Map<String, Value>),
}

impl ValueSink {
    /// The value written.
    pub fn finish(self) -> Value {
        self.done
    }

    #[inline]
    fn put(&mut self, v: Value) {
        match self.open.last_mut() {
            None => self.done = v,
            Some((Open::List(items), _)) => items.push(v),
            Some((Open::Map(map), _)) => {
                map.insert(std::mem::take(&mut self.key), v);
            }
        }
    }

    fn open(&mut self, container: Open) {
        let key = std::mem::take(&mut self.key);
        self.open.push((container, key));
    }

    fn close(&mut self) {
        if let Some((container, key)) = self.open.pop() {
            self.key = key;
            self.put(match container {
                Open::List(items) => Value::Array(items),
                Open::Map(map) => Value::Object(map),
            });
        }
    }
}

impl Sink for ValueSink {
    fn next(&mut self) {}
    fn null(&mut self) {
        self.put(Value::Null);
    }
    fn bool(&mut self, v: bool) {
        self.put(Value::Bool(v));
    }
    fn i64(&mut self, v: i64) {
        self.put(Value::from(v));
    }
    fn f64(&mut self, v: f64) {
        self.put(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number));
    }
    fn str(&mut self, v: &str) {
        self.put(Value::String(v.to_owned()));
    }
    fn plain_str(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        // Room for the longest such text (a UUID's 36 bytes, a date's 32) at once.
        let mut text = Vec::with_capacity(40);
        write(&mut text);
        // The writers are this crate's and write UTF-8 (ASCII, in fact).
        let text = String::from_utf8(text)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.put(Value::String(text));
    }
    fn begin_list(&mut self, len: usize) {
        self.open(Open::List(Vec::with_capacity(len)));
    }
    fn end_list(&mut self) {
        self.close();
    }
    fn begin_map(&mut self) {
        self.open(Open::Map(Map::new()));
    }
    fn key(&mut self, k: &str) {
        self.key = k.to_owned();
    }
    fn plain_key(&mut self, k: &str) {
        self.key(k);
    }
    fn field_key(&mut self, name: &'static str, _json: &'static [u8]) {
        self.key(name);
    }
    fn end_map(&mut self) {
        self.close();
    }
    fn value(&mut self, v: Value) {
        self.put(v);
    }
}

/// Writes `v` in decimal into `buf`, returning the digits (no allocation, no `fmt`).
pub(crate) fn itoa_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Appends a JSON value (writing to a `Vec` cannot fail).
pub(crate) fn write_value(out: &mut Vec<u8>, v: &Value) {
    let _ = serde_json::to_writer(out, v);
}

/// Appends a JSON string, escaped (copied as is when nothing needs escaping, the
/// common case for names, UUIDs and enum values).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(out, s);
    }
}

/// Whether JSON string text needs escaping (a control character, `"` or `\\`), looked
/// for eight bytes at a time: every name and string value of every encode passes here.
fn needs_escape(text: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte below `n` (n <= 128) somewhere in `v`.
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH != 0;
    let zero = |v: u64| below(v, 1);
    let mut chunks = text.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        if below(v, 0x20)
            || zero(v ^ (ONES * u64::from(b'"')))
            || zero(v ^ (ONES * u64::from(b'\\')))
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a":[1,{"b\"":null,"c":[]}],"d":{"e":2.5},"f":"x"}`, written to `out`.
    fn nested<S: Sink>(out: &mut S) {
        out.begin_map();
        out.key("a");
        out.begin_list(2);
        out.i64(1);
        out.next();
        out.begin_map();
        out.key("b\"");
        out.f64(f64::NAN);
        out.next();
        out.plain_key("c");
        out.begin_list(0);
        out.end_list();
        out.end_map();
        out.end_list();
        out.next();
        out.field_key("d", b"\"d\":");
        out.begin_map();
        out.key("e");
        out.f64(2.5);
        out.end_map();
        out.next();
        out.key("f");
        out.plain_str(|text| text.push(b'x'));
        out.end_map();
    }

    #[test]
    fn both_sinks_write_the_same_json() {
        let expected =
            serde_json::json!({"a": [1, {"b\"": null, "c": []}], "d": {"e": 2.5}, "f": "x"});
        let mut value = ValueSink::default();
        nested(&mut value);
        // A map inside a list inside a map is stored under its own key, and the outer
        // map's next key is its own again.
        assert_eq!(value.finish(), expected);
        let mut text = JsonSink::new(b"prefix ".to_vec());
        nested(&mut text);
        let text = text.into_bytes();
        assert_eq!(
            std::str::from_utf8(&text).ok(),
            Some(r#"prefix {"a":[1,{"b\"":null,"c":[]}],"d":{"e":2.5},"f":"x"}"#)
        );
    }

    #[test]
    fn escape_check_agrees_with_the_byte_by_byte_one() {
        let naive = |t: &[u8]| t.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        let mut texts: Vec<Vec<u8>> = vec![b"".to_vec(), "héllo wörld, plain".into()];
        for special in [0u8, 0x1f, b'"', b'\\', 0x20, 0x7f, 0x80, 0xff, b'!', b'#'] {
            for pos in 0..20 {
                let mut t = vec![b'a'; 20];
                t[pos] = special;
                texts.push(t);
            }
        }
        for t in &texts {
            assert_eq!(needs_escape(t), naive(t), "{t:?}");
        }
    }
}
