//! A service's whole configuration, layered: a TOML file, environment variables, then
//! `--set` overrides, later ones winning, with each value's origin kept.
//!
//! The layering is [figment](https://docs.rs/figment)'s; verso adds what a verso service
//! needs on top:
//! - **`[upgrade_levels]` from the application's declarations.** Each RPC API the
//!   application calls is declared ([`ApiCap`]); the section has exactly those options,
//!   checked as [`caps`](crate::caps) says (quoted versions, no `auto`, no bare numbers,
//!   nothing above what the local client speaks, unknown options named). Every layer is
//!   checked, not only the value that wins.
//! - **Environment values stay text.** `<PREFIX>_<SECTION>_<KEY>` (`VERSO_DATABASE_URL`,
//!   `VERSO_UPGRADE_LEVELS_CONDUCTOR`) sets `key` of a declared section; the value is kept
//!   as the string it is, so `1.10` is never read as the number `1.1`. A typed section
//!   still reads `"10"` as a number or `"true"` as a boolean where its field is one.
//! - **Typed sections**: [`Config::section`] extracts one section into the application's
//!   serde type, naming the key and its origin when a value does not fit.
//! - **Origins**: [`Config::origin`] says where a value came from, and
//!   [`Config::show_config`] prints the effective configuration as TOML with each
//!   value's origin, passwords masked.
//!
//! ```
//! use serde::Deserialize;
//! use verso::Version;
//! use verso_rpc::caps::ApiCap;
//! use verso_rpc::config::{ConfigLoader, Origin};
//!
//! #[derive(Deserialize)]
//! struct Database { url: String, #[serde(default)] pool: u32 }
//!
//! let config = ConfigLoader::new()
//!     .api(ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)))
//!     .api(ApiCap::new("scheduler", Version::new(2, 3), Version::new(2, 0)))
//!     .section("database")
//!     .toml_str("[database]\nurl = \"postgres://accel:secret@db/accel\"\n", "accel.toml")
//!     .env_vars([("VERSO_DATABASE_POOL".to_string(), "10".to_string())])
//!     .set("upgrade_levels.scheduler=2.3")
//!     .load()?;
//! assert_eq!(config.cap("conductor"), Some(Version::new(1, 1)));
//! assert_eq!(config.cap("scheduler"), Some(Version::new(2, 3)));
//! let db: Database = config.section("database")?;
//! assert_eq!(db.pool, 10);
//! assert_eq!(config.origin("database.pool"), Some(Origin::Env("VERSO_DATABASE_POOL".into())));
//! assert!(config.show_config().contains("url = \"postgres://accel:***@db/accel\"  # file accel.toml"));
//! # Ok::<(), verso_rpc::config::ConfigError>(())
//! ```

// Below `caps`, which reports in them: `caps` imports `error`, this module imports `caps`.
pub(crate) mod error;
pub use error::{ConfigError, Origin};

use crate::caps::{ApiCap, UpgradeLevels, SECTION as UPGRADE_LEVELS};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};
use serde::de::DeserializeOwned;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use verso::Version;

/// The environment prefix when the application names none: `VERSO_<SECTION>_<KEY>`.
pub const DEFAULT_ENV_PREFIX: &str = "VERSO";

/// Builds a service's [`Config`]: what the application declares (its RPC APIs, its
/// sections, the environment prefix), then the sources in the order they win: the file,
/// the environment, the `--set` overrides.
#[derive(Debug, Clone)]
pub struct ConfigLoader {
    env_prefix: String,
    sections: Vec<String>,
    apis: Vec<ApiCap>,
    file: Option<FileSource>,
    env: Option<Vec<(String, String)>>,
    overrides: Vec<String>,
}

#[derive(Debug, Clone)]
enum FileSource {
    Path(PathBuf),
    Text { text: String, name: String },
}

impl Default for ConfigLoader {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigLoader {
    /// No APIs, no sections, environment prefix `VERSO`, the process environment.
    pub fn new() -> Self {
        ConfigLoader {
            env_prefix: DEFAULT_ENV_PREFIX.to_owned(),
            sections: Vec::new(),
            apis: Vec::new(),
            file: None,
            env: None,
            overrides: Vec::new(),
        }
    }

    /// The prefix of the environment variables (`ACCEL` reads `ACCEL_DATABASE_URL`).
    pub fn env_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.env_prefix = prefix.into();
        self
    }

    /// Declares an RPC API the application's clients call: an `[upgrade_levels]` option.
    pub fn api(mut self, api: ApiCap) -> Self {
        self.apis.push(api);
        self
    }

    /// Declares a section of the application's own (`database`): the environment and
    /// `--set` may set its keys. A file may hold any section.
    pub fn section(mut self, name: impl Into<String>) -> Self {
        self.sections.push(name.into());
        self
    }

    /// Reads this TOML file (`--config FILE`).
    pub fn file(mut self, path: impl AsRef<Path>) -> Self {
        self.file = Some(FileSource::Path(path.as_ref().to_owned()));
        self
    }

    /// Reads this file if there is one (an optional `--config`).
    pub fn maybe_file(self, path: Option<impl AsRef<Path>>) -> Self {
        match path {
            Some(p) => self.file(p),
            None => self,
        }
    }

    /// Reads TOML text instead of a file; `name` stands for the file in origins and errors.
    pub fn toml_str(mut self, text: impl Into<String>, name: impl Into<String>) -> Self {
        self.file = Some(FileSource::Text {
            text: text.into(),
            name: name.into(),
        });
        self
    }

    /// Reads these variables instead of the process environment.
    pub fn env_vars(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env = Some(vars.into_iter().collect());
        self
    }

    /// One command-line override, `SECTION.KEY=VALUE` (`upgrade_levels.conductor=1.0`,
    /// `database.url=...`); a bare `KEY=VALUE` is an `[upgrade_levels]` option.
    pub fn set(mut self, assignment: impl Into<String>) -> Self {
        self.overrides.push(assignment.into());
        self
    }

    /// Several [`set`](Self::set)s (`--set` repeated), in order.
    pub fn overrides(mut self, assignments: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.overrides
            .extend(assignments.into_iter().map(Into::into));
        self
    }

    /// Reads and checks every source.
    pub fn load(self) -> Result<Config, ConfigError> {
        let mut levels = UpgradeLevels::defaults(self.apis.iter().cloned())?;
        let mut figment = Figment::new();
        if let Some(file) = &self.file {
            let layer = TomlLayer::read(file)?;
            layer.apply_caps(&mut levels)?;
            figment = figment.merge(layer);
        }
        let vars = match &self.env {
            Some(vars) => vars.clone(),
            // vars_os: a non-UTF-8 variable elsewhere in the environment must not panic.
            None => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        };
        let mut env = self.env_layers(vars);
        // In the order of their names, as the process environment has none.
        env.sort_by_key(|layer| layer.origin.to_string());
        for layer in env.into_iter().chain(self.cli_layers()?) {
            if layer.section == UPGRADE_LEVELS {
                levels.set(&layer.key, &layer.value, layer.origin.clone())?;
            }
            figment = figment.merge(layer);
        }
        Ok(Config {
            figment,
            levels,
            sections: self.sections,
        })
    }

    /// The sections the environment and `--set` may name, longest first (so that a
    /// section whose name starts with another's is matched whole).
    fn known_sections(&self) -> Vec<&str> {
        let mut known: Vec<&str> = std::iter::once(UPGRADE_LEVELS)
            .chain(self.sections.iter().map(String::as_str))
            .collect();
        known.sort_by_key(|s| std::cmp::Reverse(s.len()));
        known
    }

    fn env_layers(&self, vars: Vec<(String, String)>) -> Vec<ValueLayer> {
        let prefix = format!("{}_", self.env_prefix);
        let known = self.known_sections();
        vars.into_iter()
            .filter_map(|(name, value)| {
                let rest = name.strip_prefix(&prefix)?;
                let section = known.iter().find(|s| {
                    rest.len() > s.len() + 1
                        && rest.as_bytes()[s.len()] == b'_'
                        && rest[..s.len()].eq_ignore_ascii_case(s)
                })?;
                Some(ValueLayer {
                    section: (*section).to_owned(),
                    key: rest[section.len() + 1..].to_ascii_lowercase(),
                    value,
                    origin: Origin::Env(name.clone()),
                })
            })
            .collect()
    }

    fn cli_layers(&self) -> Result<Vec<ValueLayer>, ConfigError> {
        let known = self.known_sections();
        self.overrides
            .iter()
            .map(|assignment| {
                let refuse = |detail: String| ConfigError::Override {
                    assignment: assignment.clone(),
                    detail,
                };
                let Some((key, value)) = assignment.split_once('=') else {
                    return Err(refuse(
                        "an override is SECTION.KEY=VALUE, such as upgrade_levels.conductor=1.0"
                            .into(),
                    ));
                };
                let (section, key) = key.trim().split_once('.').unwrap_or((UPGRADE_LEVELS, key));
                if !known.contains(&section) {
                    return Err(refuse(format!(
                        "no section '{section}'; known sections: {}",
                        known.join(", ")
                    )));
                }
                Ok(ValueLayer {
                    section: section.to_owned(),
                    key: key.trim().to_owned(),
                    value: value.trim().trim_matches('"').to_owned(),
                    origin: Origin::Cli,
                })
            })
            .collect()
    }
}

/// The effective configuration of a service.
#[derive(Debug, Clone)]
pub struct Config {
    figment: Figment,
    levels: UpgradeLevels,
    sections: Vec<String>,
}

impl Config {
    /// The effective `[upgrade_levels]`.
    pub fn upgrade_levels(&self) -> &UpgradeLevels {
        &self.levels
    }

    /// The cap of a declared RPC API.
    pub fn cap(&self, api: &str) -> Option<Version> {
        self.levels.cap(api)
    }

    /// Section `name` as the application's type. A missing section reads as an empty
    /// table (the type's serde defaults apply); text from the environment or `--set` is
    /// read as a number or boolean where the field is one.
    pub fn section<T: DeserializeOwned>(&self, name: &str) -> Result<T, ConfigError> {
        self.figment
            .focus(name)
            .extract_lossy()
            .map_err(|e| ConfigError::Section {
                section: name.to_owned(),
                source: Box::new(e),
            })
    }

    /// Where the value of `key` (`database.url`, `upgrade_levels.conductor`) came from;
    /// `None` when no source set it (an `[upgrade_levels]` cap then has its default).
    pub fn origin(&self, key: &str) -> Option<Origin> {
        if let Some((UPGRADE_LEVELS, api)) = key.split_once('.') {
            return self.levels.level(api).map(|l| l.origin.clone());
        }
        self.figment.find_metadata(key).map(origin_of)
    }

    /// The effective configuration as TOML, each value followed by its origin: the
    /// declared sections first, then any other the file has, then `[upgrade_levels]`
    /// with every cap. Values of keys named like a password, secret or token are
    /// `"***"`, and so are the passwords of URLs (`scheme://user:***@host`).
    pub fn show_config(&self) -> String {
        let data = self
            .figment
            .data()
            .ok()
            .and_then(|mut d| d.remove(&Profile::Default))
            .unwrap_or_default();
        let mut names: Vec<&str> = self.sections.iter().map(String::as_str).collect();
        names.extend(
            data.keys()
                .map(String::as_str)
                .filter(|k| *k != UPGRADE_LEVELS && !self.sections.iter().any(|s| s == k)),
        );
        let mut out = String::new();
        for name in names {
            let Some(Value::Dict(_, section)) = data.get(name) else {
                continue;
            };
            let _ = writeln!(out, "[{name}]");
            for (key, value) in section {
                let shown = if is_secret(key) {
                    "\"***\"".to_owned()
                } else {
                    render(value)
                };
                let origin = self
                    .figment
                    .get_metadata(value.tag())
                    .map_or(Origin::Default, origin_of);
                let _ = writeln!(out, "{key} = {shown}  # {origin}");
            }
            out.push('\n');
        }
        out.push_str(&self.levels.show_config());
        out
    }
}

/// Whether a key's value is a secret not to be shown.
fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "passwd", "secret", "token"]
        .iter()
        .any(|s| key.contains(s))
}

/// A value as TOML, URL passwords masked.
fn render(value: &Value) -> String {
    match value {
        Value::String(_, s) if s.contains("://") => {
            toml::Value::String(crate::transport::redact(s)).to_string()
        }
        Value::String(_, s) => toml::Value::String(s.clone()).to_string(),
        Value::Char(_, c) => toml::Value::String(c.to_string()).to_string(),
        Value::Bool(_, b) => b.to_string(),
        Value::Num(_, n) => match n.to_f64() {
            Some(x) if n.to_i128().is_none() => x.to_string(),
            _ => n.to_i128().map_or_else(String::new, |i| i.to_string()),
        },
        Value::Empty(..) => "\"\"".to_owned(),
        Value::Array(_, items) => format!(
            "[{}]",
            items.iter().map(render).collect::<Vec<_>>().join(", ")
        ),
        Value::Dict(_, dict) => format!(
            "{{ {} }}",
            dict.iter()
                .map(|(k, v)| {
                    let v = if is_secret(k) {
                        "\"***\"".to_owned()
                    } else {
                        render(v)
                    };
                    format!("{k} = {v}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The metadata names of verso's layers.
const FILE: &str = "file";
const ENV: &str = "environment";
const CLI: &str = "command line";

fn origin_of(metadata: &Metadata) -> Origin {
    match (metadata.name.as_ref(), &metadata.source) {
        (FILE, Some(Source::File(path))) => Origin::File(path.display().to_string()),
        (FILE, Some(Source::Custom(name))) => Origin::File(name.clone()),
        (ENV, Some(Source::Custom(var))) => Origin::Env(var.clone()),
        (CLI, _) => Origin::Cli,
        _ => Origin::Default,
    }
}

/// The file layer: its text, kept to quote a bare number as it was written.
struct TomlLayer {
    text: String,
    name: String,
    path: Option<PathBuf>,
}

impl TomlLayer {
    fn read(source: &FileSource) -> Result<TomlLayer, ConfigError> {
        let layer = match source {
            FileSource::Path(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| ConfigError::ConfigFile {
                    path: name.clone(),
                    detail: e.to_string(),
                    source: Some(Box::new(e)),
                })?;
                TomlLayer {
                    text,
                    name,
                    path: Some(path.clone()),
                }
            }
            FileSource::Text { text, name } => TomlLayer {
                text: text.clone(),
                name: name.clone(),
                path: None,
            },
        };
        let doc: toml::Table =
            layer
                .text
                .parse()
                .map_err(|e: toml::de::Error| ConfigError::ConfigFile {
                    path: layer.name.clone(),
                    detail: e.message().to_owned(),
                    source: Some(Box::new(e)),
                })?;
        match doc.get(UPGRADE_LEVELS) {
            None | Some(toml::Value::Table(_)) => Ok(layer),
            Some(other) => Err(ConfigError::ConfigFile {
                path: layer.name.clone(),
                detail: format!(
                    "'{UPGRADE_LEVELS}' must be a table, got a {}",
                    other.type_str()
                ),
                source: None,
            }),
        }
    }

    /// Checks the file's `[upgrade_levels]` and applies it to `levels`, all or nothing.
    fn apply_caps(&self, levels: &mut UpgradeLevels) -> Result<(), ConfigError> {
        let origin = Origin::File(self.name.clone());
        let section = match Figment::from(self).find_value(UPGRADE_LEVELS) {
            Ok(Value::Dict(_, d)) => d,
            _ => return Ok(()),
        };
        let mut staged = levels.clone();
        for (option, value) in &section {
            let raw = || raw_literal(&self.text, option);
            match value {
                Value::String(_, s) => staged.set(option, s, origin.clone())?,
                Value::Num(_, n) => {
                    // Quote what the operator wrote (`1.10`), not what the float became.
                    let raw = raw().unwrap_or_else(|| render(value));
                    let suggestion = match n.to_i128() {
                        Some(i) if !raw.contains('.') => format!("{i}.0"),
                        _ if raw.contains('.') => raw.clone(),
                        _ => format!("{raw}.0"),
                    };
                    return Err(ConfigError::CapBareNumber {
                        option: option.clone(),
                        value: raw,
                        suggestion,
                        origin: origin.to_string(),
                    });
                }
                other => {
                    return Err(ConfigError::CapWrongType {
                        option: option.clone(),
                        origin: origin.to_string(),
                        found: type_name(other).to_owned(),
                    })
                }
            }
        }
        *levels = staged;
        Ok(())
    }
}

impl Provider for TomlLayer {
    fn metadata(&self) -> Metadata {
        match &self.path {
            Some(path) => Metadata::from(FILE, Source::File(path.clone())),
            None => Metadata::from(FILE, Source::Custom(self.name.clone())),
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        use figment::providers::Format as _;
        figment::providers::Toml::string(&self.text).data()
    }
}

/// One value from the environment or the command line, kept as text.
struct ValueLayer {
    section: String,
    key: String,
    value: String,
    origin: Origin,
}

impl Provider for ValueLayer {
    fn metadata(&self) -> Metadata {
        match &self.origin {
            Origin::Env(var) => Metadata::from(ENV, Source::Custom(var.clone())),
            _ => Metadata::named(CLI),
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut section = Dict::new();
        section.insert(self.key.clone(), Value::from(self.value.clone()));
        let mut top = Dict::new();
        top.insert(self.section.clone(), Value::from(section));
        Ok(Profile::Default.collect(top))
    }
}

/// The TOML type name of a value, for errors.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(..) | Value::Char(..) => "string",
        Value::Bool(..) => "boolean",
        Value::Num(..) => "number",
        Value::Empty(..) => "empty value",
        Value::Dict(..) => "table",
        Value::Array(..) => "array",
    }
}

/// The literal text of `option = ...` in the `[upgrade_levels]` section, as written.
fn raw_literal(text: &str, option: &str) -> Option<String> {
    let mut in_section = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section =
                line.trim_start_matches('[').trim_end_matches(']').trim() == UPGRADE_LEVELS;
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            if key.trim() == option {
                let value = value.split('#').next().unwrap_or("").trim();
                return (!value.is_empty()).then(|| value.to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn loader() -> ConfigLoader {
        ConfigLoader::new()
            .api(ApiCap::new(
                "conductor",
                Version::new(1, 2),
                Version::new(1, 1),
            ))
            .api(ApiCap::new("agent", Version::new(1, 0), Version::new(1, 0)))
            .env_vars([])
    }

    fn toml_err(text: &str) -> ConfigError {
        loader()
            .toml_str(text, "test.toml")
            .load()
            .expect_err("refused")
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn quoted_values_are_taken_from_the_file() {
        let c = loader()
            .toml_str(
                "[other]\nx = 1\n[upgrade_levels]\nconductor = \"1.2\"\nagent = \"1.0\"\n",
                "f.toml",
            )
            .load()
            .expect("valid");
        assert_eq!(c.cap("conductor"), Some(Version::new(1, 2)));
        assert_eq!(
            c.origin("upgrade_levels.conductor"),
            Some(Origin::File("f.toml".into()))
        );
        // No section: the defaults.
        let c = loader()
            .toml_str("[database]\nurl = \"x\"\n", "f.toml")
            .load()
            .expect("valid");
        assert_eq!(
            c.upgrade_levels(),
            loader().load().expect("valid").upgrade_levels()
        );
    }

    #[test]
    fn bare_numbers_are_refused_saying_to_quote() {
        let e = toml_err("[upgrade_levels]\nconductor = 1.10  # pinned\n");
        assert!(
            matches!(&e, ConfigError::CapBareNumber { value, suggestion, .. } if value == "1.10" && suggestion == "1.10"),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("quote it"), "{msg}");
        assert!(msg.contains("1.10 would read as 1.1"), "{msg}");
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = 1\n"),
            ConfigError::CapBareNumber { suggestion, .. } if suggestion == "1.0"
        ));
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = true\n"),
            ConfigError::CapWrongType { .. }
        ));
    }

    #[test]
    fn every_rule_applies_to_the_file() {
        assert!(matches!(
            toml_err("[upgrade_levels]\nconductor = \"1.x\"\n"),
            ConfigError::CapMalformed { .. }
        ));
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = \"auto\"\n"),
            ConfigError::CapAuto { .. }
        ));
        assert!(matches!(
            toml_err("[upgrade_levels]\nconductor = \"1.3\"\n"),
            ConfigError::CapNotSupported { .. }
        ));
        assert!(matches!(
            toml_err("[upgrade_levels]\ncondutor = \"1.0\"\n"),
            ConfigError::CapUnknownOption { .. }
        ));
    }

    #[test]
    fn bad_files_are_refused_with_their_cause() {
        assert!(matches!(
            toml_err("[upgrade_levels\n"),
            ConfigError::ConfigFile {
                source: Some(_),
                ..
            }
        ));
        assert!(matches!(
            toml_err("upgrade_levels = 3\n"),
            ConfigError::ConfigFile { .. }
        ));
        let e = loader()
            .file("/nonexistent/verso.toml")
            .load()
            .expect_err("refused");
        let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn a_bad_value_in_a_lower_layer_is_refused_even_when_overridden() {
        let e = loader()
            .toml_str("[upgrade_levels]\nconductor = \"9.9\"\n", "f.toml")
            .set("conductor=1.0")
            .load()
            .expect_err("refused");
        assert!(matches!(e, ConfigError::CapNotSupported { .. }), "{e:?}");
    }

    #[test]
    fn env_then_cli_override_the_file() {
        let base = || {
            loader()
                .toml_str("[upgrade_levels]\nconductor = \"1.2\"\n", "f.toml")
                .env_vars(env(&[
                    ("VERSO_UPGRADE_LEVELS_CONDUCTOR", "1.0"),
                    ("PATH", "/bin"),
                    ("VERSO_TEST_RABBIT_URL", "not a section"),
                ]))
        };
        let c = base().load().expect("valid");
        assert_eq!(c.cap("conductor"), Some(Version::new(1, 0)));
        assert_eq!(
            c.origin("upgrade_levels.conductor"),
            Some(Origin::Env("VERSO_UPGRADE_LEVELS_CONDUCTOR".into()))
        );
        let c = base()
            .set("upgrade_levels.conductor=1.1")
            .set("conductor=1.2")
            .load()
            .expect("valid");
        assert_eq!(c.cap("conductor"), Some(Version::new(1, 2)));
        assert_eq!(c.origin("upgrade_levels.conductor"), Some(Origin::Cli));

        let with_env = |k: &str, v: &str| loader().env_vars(env(&[(k, v)])).load();
        assert!(matches!(
            with_env("VERSO_UPGRADE_LEVELS_AGENT", "auto"),
            Err(ConfigError::CapAuto { .. })
        ));
        assert!(matches!(
            with_env("VERSO_UPGRADE_LEVELS_AGNET", "1.0"),
            Err(ConfigError::CapUnknownOption { .. })
        ));
        assert!(matches!(
            loader().set("conductor").load(),
            Err(ConfigError::Override { .. })
        ));
        assert!(matches!(
            loader().set("conductor=").load(),
            Err(ConfigError::CapMalformed { .. })
        ));
        assert!(matches!(
            loader().set("databse.url=x").load(),
            Err(ConfigError::Override { .. })
        ));
    }

    #[test]
    fn environment_values_stay_text() {
        let c = loader()
            .api(ApiCap::new(
                "scheduler",
                Version::new(1, 10),
                Version::new(1, 0),
            ))
            .env_vars(env(&[("VERSO_UPGRADE_LEVELS_SCHEDULER", "1.10")]))
            .load()
            .expect("valid");
        assert_eq!(c.cap("scheduler"), Some(Version::new(1, 10)));
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Database {
        url: String,
        #[serde(default)]
        pool: u32,
        #[serde(default)]
        password: Option<String>,
    }

    #[test]
    fn sections_are_typed_with_origins_and_secrets_masked() {
        let c = loader()
            .section("database")
            .section("pci")
            .toml_str(
                "[database]\nurl = \"postgres://accel:pw@db/accel\"\npool = 4\n\
                 [upgrade_levels]\nagent = \"1.0\"\n",
                "accel.toml",
            )
            .env_vars(env(&[
                ("VERSO_DATABASE_POOL", "10"),
                ("VERSO_DATABASE_PASSWORD", "0123"),
            ]))
            .set("pci.enabled=true")
            .load()
            .expect("valid");
        let db: Database = c.section("database").expect("typed");
        assert_eq!(
            db,
            Database {
                url: "postgres://accel:pw@db/accel".into(),
                pool: 10,
                password: Some("0123".into()),
            }
        );
        assert_eq!(
            c.origin("database.url"),
            Some(Origin::File("accel.toml".into()))
        );
        assert_eq!(c.origin("pci.enabled"), Some(Origin::Cli));
        assert_eq!(c.origin("database.nothing"), None);
        assert_eq!(
            c.show_config(),
            "[database]\n\
             password = \"***\"  # environment VERSO_DATABASE_PASSWORD\n\
             pool = \"10\"  # environment VERSO_DATABASE_POOL\n\
             url = \"postgres://accel:***@db/accel\"  # file accel.toml\n\
             \n\
             [pci]\n\
             enabled = \"true\"  # command line\n\
             \n\
             [upgrade_levels]\n\
             # newest versions this build speaks: conductor 1.2, agent 1.0\n\
             conductor = \"1.1\"  # default\n\
             agent = \"1.0\"  # file accel.toml\n"
        );
        // A value that does not fit its field names the key and where it came from.
        let bad = loader()
            .section("database")
            .env_vars(env(&[
                ("VERSO_DATABASE_URL", "x"),
                ("VERSO_DATABASE_POOL", "many"),
            ]))
            .load()
            .expect("loads");
        let e = bad.section::<Database>("database").expect_err("refused");
        let msg = e.to_string();
        assert!(msg.contains("pool"), "{msg}");
        assert!(msg.contains("VERSO_DATABASE_POOL"), "{msg}");
    }
}
