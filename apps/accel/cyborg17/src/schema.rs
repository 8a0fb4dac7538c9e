//! Cyborg 17's database schema as SQL, one script per backend (the files of
//! `apps/accel/cyborg17/schema/`), each ending stamped with Cyborg's alembic head
//! [`ALEMBIC_HEAD`]: what a database looks like after `cyborg-dbsync upgrade` (MariaDB)
//! or Cyborg's `create_schema` (SQLite). `tests/schema.rs` checks each against what
//! Cyborg's own code makes.

/// The alembic revision of Cyborg 17's schema (`alembic_version.version_num`).
pub const ALEMBIC_HEAD: &str = "b47c8f2d1e3a";

/// The schema on MySQL/MariaDB (exactly what `cyborg-dbsync upgrade` makes).
pub const MYSQL: &str = include_str!("../schema/mysql.sql");

/// The schema on SQLite (what Cyborg's `create_schema` makes).
pub const SQLITE: &str = include_str!("../schema/sqlite.sql");

/// The schema on PostgreSQL (the SQLite one in PostgreSQL's types; Cyborg itself never
/// made a PostgreSQL schema).
pub const POSTGRES: &str = include_str!("../schema/postgres.sql");

/// Python's `json.dumps` of a JSON value with its default separators (`", "`, `": "`)
/// and `ensure_ascii`: the text Cyborg writes into `profile_json`.
pub fn python_json(value: &serde_json::Value) -> String {
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{08}' => out.push_str("\\b"),
                '\u{0c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    fn walk(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Null => out.push_str("null"),
            serde_json::Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            serde_json::Value::Number(n) => out.push_str(&n.to_string()),
            serde_json::Value::String(s) => string(s, out),
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    walk(item, out);
                }
                out.push(']');
            }
            serde_json::Value::Object(map) => {
                out.push('{');
                for (i, (k, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    string(k, out);
                    out.push_str(": ");
                    walk(item, out);
                }
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn profile_json_is_pythons_text() {
        let v = json!({"groups": [{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}]});
        assert_eq!(
            python_json(&v),
            r#"{"groups": [{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}]}"#
        );
        assert_eq!(
            python_json(&json!(["é", null, 2])),
            r#"["\u00e9", null, 2]"#
        );
    }
}
