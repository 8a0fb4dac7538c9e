//! [`FieldValue`] for the types fields hold: text, integers, floats, booleans, UUIDs,
//! times, and options, lists and string-keyed maps of them.

use super::{
    invalid, type_error, DecodeContext, FieldType, FieldValue, JsonSeed, MemberSeed, Result, BLOCK,
};
use crate::context::RequestContext;
use crate::datetime::DateTime;
use crate::manifest::VersionManifest;
use crate::sink::Sink;
use crate::version::Version;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

impl FieldValue for String {
    fn field_type() -> FieldType {
        FieldType::String
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.str(self);
    }
    /// Like OVO's `String.coerce`, numbers and booleans are turned into their text.
    fn from_primitive_owned_in(value: Value, cx: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::String(s) => Ok(s),
            other => Self::from_primitive_in(&other, cx),
        }
    }
    fn from_json_str(s: &str) -> Result<Self> {
        Ok(s.to_owned())
    }
    fn from_json_i64(v: i64) -> Result<Self> {
        Ok(v.to_string())
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => match n.as_f64() {
                // An integer literal beyond 64 bits reaches us as a float (serde_json
                // has no big integers here): its Python text (str(int)) is unknowable,
                // so it is refused rather than written as other digits.
                Some(f) if n.is_f64() && f.abs() >= 9_223_372_036_854_775_808.0 => {
                    Err(invalid(format!(
                        "{n} is beyond the 64-bit integer range a String field takes from a number"
                    )))
                }
                Some(f) if n.is_f64() => Ok(python_float_repr(f)),
                _ => Ok(n.to_string()),
            },
            Value::Bool(b) => Ok(if *b { "True" } else { "False" }.into()),
            other => Err(type_error("string", other)),
        }
    }
}

/// Python's `repr(float)` (which `str()` is): the shortest digits that round-trip,
/// positional when the decimal exponent is in `-4..16` (`0.0001`, `1e+16` is not), else
/// scientific with a signed two-digit-minimum exponent (`1e-07`, `1.5e+16`).
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{:02}", exp.unsigned_abs()));
    }
    out
}

impl FieldValue for i64 {
    fn field_type() -> FieldType {
        FieldType::Integer
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.i64(*self);
    }
    /// Like OVO's `Integer.coerce` (`int(value)`): integral strings are accepted.
    fn from_json_i64(v: i64) -> Result<Self> {
        Ok(v)
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.is_finite() && f.abs() < 9.2e18)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| type_error("integer", value)),
            Value::String(s) => s
                .trim()
                .parse()
                .map_err(|_| invalid(format!("invalid literal for int() with base 10: '{s}'"))),
            other => Err(type_error("integer", other)),
        }
    }
}

impl FieldValue for f64 {
    fn field_type() -> FieldType {
        FieldType::Float
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        // JSON has no NaN or infinity; OVO would write them as bare words no parser
        // reads: the sink writes null.
        out.f64(*self);
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::Number(n) => n.as_f64().ok_or_else(|| type_error("float", value)),
            Value::String(s) => match s.trim().parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(f),
                // OVO would hold NaN or an infinity and write them as the non-JSON words
                // NaN / Infinity: refused (a deliberate difference).
                Ok(_) => Err(invalid(format!(
                    "'{s}' is not a finite float (NaN and infinities are not JSON)"
                ))),
                Err(_) => Err(invalid(format!("could not convert string to float: '{s}'"))),
            },
            other => Err(type_error("float", other)),
        }
    }
}

impl FieldValue for bool {
    fn field_type() -> FieldType {
        FieldType::Boolean
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.bool(*self);
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        value.as_bool().ok_or_else(|| type_error("boolean", value))
    }
}

impl FieldValue for Uuid {
    fn field_type() -> FieldType {
        FieldType::Uuid
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.plain_str(|text| {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            text.extend_from_slice(self.hyphenated().encode_lower(&mut buf).as_bytes());
        });
    }
    fn from_json_str(s: &str) -> Result<Self> {
        uuid_from_canonical(s)
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        let s = value
            .as_str()
            .ok_or_else(|| type_error("UUID string", value))?;
        uuid_from_canonical(s)
    }
}

/// A UUID field's text must be the canonical lower-case hyphenated form. OVO keeps
/// whatever text it is given (upper case, no hyphens, braces, `urn:uuid:`) and writes it
/// back as is; verso holds a parsed `Uuid` and writes the canonical form, so it refuses
/// the other forms rather than send back text other than it received (a deliberate
/// difference, README "Deliberate differences from oslo.versionedobjects").
fn uuid_from_canonical(s: &str) -> Result<Uuid> {
    // 36 bytes are only ever the hyphenated form to `uuid`'s parser (hyphens at 8, 13,
    // 18 and 23, hex digits of either case elsewhere, table-driven): with no upper-case
    // letter, that is the canonical form. (A byte-by-byte check cost five times as much.)
    // (The fold, without an early exit, is vectorized.)
    if s.len() == 36 && !s.bytes().fold(false, |up, b| up | b.is_ascii_uppercase()) {
        if let Ok(u) = Uuid::try_parse_ascii(s.as_bytes()) {
            return Ok(u);
        }
    }
    Err(invalid(if Uuid::parse_str(s).is_ok() {
        format!("{s} is not a UUID in canonical form (lower-case, hyphenated)")
    } else {
        format!("{s} is not a valid UUID")
    }))
}

impl FieldValue for DateTime {
    fn field_type() -> FieldType {
        FieldType::DateTime
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.plain_str(|text| self.write_ovo(text));
    }
    fn from_json_str(s: &str) -> Result<Self> {
        s.parse()
            .map_err(|e: crate::datetime::DateTimeError| invalid(e.to_string()))
    }
    fn from_primitive_in(value: &Value, _: DecodeContext<'_>) -> Result<Self> {
        let s = value
            .as_str()
            .ok_or_else(|| type_error("datetime string", value))?;
        s.parse()
            .map_err(|e: crate::datetime::DateTimeError| invalid(e.to_string()))
    }
    fn describe(&self) -> Value {
        Value::String(self.to_isoformat())
    }
}

impl<T: FieldValue> FieldValue for Option<T> {
    fn field_type() -> FieldType {
        T::field_type()
    }
    fn nullable() -> bool {
        true
    }
    fn child_schema() -> Option<fn() -> &'static crate::schema::ObjectSchema> {
        T::child_schema()
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        match self {
            Some(v) => v.encode(out),
            None => out.null(),
        }
    }
    fn from_primitive_owned_in(value: Value, cx: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::Null => Ok(None),
            v => T::from_primitive_owned_in(v, cx).map(Some),
        }
    }
    fn from_json_str(s: &str) -> Result<Self> {
        T::from_json_str(s).map(Some)
    }
    fn from_json_i64(v: i64) -> Result<Self> {
        T::from_json_i64(v).map(Some)
    }
    fn from_json_seq<'de, A: serde::de::SeqAccess<'de>>(
        seq: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<Self>, A::Error> {
        Ok(T::from_json_seq(seq, cx)?.map(Some))
    }
    fn from_json_map<'de, A: serde::de::MapAccess<'de>>(
        map: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<Self>, A::Error> {
        Ok(T::from_json_map(map, cx)?.map(Some))
    }
    fn write_backport(
        &self,
        out: &mut Vec<u8>,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        match self {
            Some(v) => v.write_backport(out, to, manifest),
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
    fn from_primitive_in(value: &Value, cx: DecodeContext<'_>) -> Result<Self> {
        match value {
            Value::Null => Ok(None),
            v => T::from_primitive_in(v, cx).map(Some),
        }
    }
    fn describe(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::describe)
    }
    fn has_changes(&self) -> bool {
        self.as_ref().is_some_and(T::has_changes)
    }
    fn reset_changes_recursive(&mut self) {
        if let Some(v) = self {
            v.reset_changes_recursive();
        }
    }
    fn backport(
        &self,
        primitive: &mut Value,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        match self {
            Some(v) => v.backport(primitive, to, manifest),
            None => Ok(()),
        }
    }
    fn attach_context(&mut self, ctx: &RequestContext) {
        if let Some(v) = self {
            v.attach_context(ctx);
        }
    }
}

impl<T: FieldValue> FieldValue for Vec<T> {
    fn field_type() -> FieldType {
        match T::field_type() {
            FieldType::Object(name) => FieldType::ListOfObjects(name),
            other => FieldType::List(Box::new(other)),
        }
    }
    fn child_schema() -> Option<fn() -> &'static crate::schema::ObjectSchema> {
        T::child_schema()
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.begin_list(self.len());
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.next();
            }
            v.encode(out);
        }
        out.end_list();
    }
    fn write_backport(
        &self,
        out: &mut Vec<u8>,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        out.push(b'[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.write_backport(out, to, manifest)?;
        }
        out.push(b']');
        Ok(())
    }
    fn from_primitive_in(value: &Value, cx: DecodeContext<'_>) -> Result<Self> {
        let items = value.as_array().ok_or_else(|| type_error("list", value))?;
        items.iter().map(|v| T::from_primitive_in(v, cx)).collect()
    }
    fn from_json_seq<'de, A: serde::de::SeqAccess<'de>>(
        mut seq: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<Self>, A::Error> {
        // As `from_primitive`: the first member's error is the list's; the rest of the
        // list is still read (the parser must get past it).
        // Members are appended by the seed (objects decoded in place). After an error
        // the list is refused whole: the members read so far are dropped and the rest
        // are only read past.
        //
        // The number of members is not known until the end. A long list is read into
        // blocks of a fixed size and moved once into a list of the exact size: growing
        // one list by doubling re-allocates (and, for lists of megabytes, has the
        // system map and fault in fresh pages for) about twice its final size.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(BLOCK));
        let mut blocks: Vec<Vec<T>> = Vec::new();
        while let Some(item) = seq.next_element_seed(MemberSeed(&mut items, cx))? {
            if let Err(e) = item {
                drop((items, blocks));
                while seq.next_element_seed(JsonSeed::<T>::member(cx))?.is_some() {}
                return Ok(Err(e));
            }
            if items.len() == BLOCK {
                blocks.push(std::mem::replace(&mut items, Vec::with_capacity(BLOCK)));
            }
        }
        if blocks.is_empty() {
            return Ok(Ok(items));
        }
        let mut all = Vec::with_capacity(blocks.len() * BLOCK + items.len());
        for block in blocks {
            all.extend(block);
        }
        all.extend(items);
        Ok(Ok(all))
    }
    fn describe(&self) -> Value {
        Value::Array(self.iter().map(T::describe).collect())
    }
    fn has_changes(&self) -> bool {
        self.iter().any(T::has_changes)
    }
    fn reset_changes_recursive(&mut self) {
        self.iter_mut().for_each(T::reset_changes_recursive);
    }
    fn backport(
        &self,
        primitive: &mut Value,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        let Some(items) = primitive.as_array_mut() else {
            return Ok(());
        };
        for (item, prim) in self.iter().zip(items.iter_mut()) {
            item.backport(prim, to, manifest)?;
        }
        Ok(())
    }
    fn attach_context(&mut self, ctx: &RequestContext) {
        self.iter_mut().for_each(|v| v.attach_context(ctx));
    }
}

impl<V: FieldValue> FieldValue for BTreeMap<String, V> {
    fn field_type() -> FieldType {
        FieldType::Dict(Box::new(V::field_type()))
    }
    #[inline]
    fn encode<S: Sink>(&self, out: &mut S) {
        out.begin_map();
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                out.next();
            }
            out.key(k);
            v.encode(out);
        }
        out.end_map();
    }
    fn from_primitive_in(value: &Value, cx: DecodeContext<'_>) -> Result<Self> {
        let map = value.as_object().ok_or_else(|| type_error("dict", value))?;
        map.iter()
            .map(|(k, v)| Ok((k.clone(), V::from_primitive_in(v, cx)?)))
            .collect()
    }
    fn describe(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.describe()))
                .collect(),
        )
    }
}
