//! `[upgrade_levels]`: the operator's version caps, one per RPC API.
//!
//! During a rolling upgrade the operator pins what new code may send to old code:
//!
//! ```toml
//! [upgrade_levels]
//! conductor = "1.1"   # every conductor client's cap (default "1.1")
//! agent = "1.0"       # every agent client's cap (default "1.0")
//! ```
//!
//! Values are quoted `MAJOR.MINOR` strings. Refused, with a message that says what to
//! write: malformed values (`"1"`, `"1.x"`, `""`), versions the local client does not
//! speak (above its newest, or of another major), `"auto"` (automatic discovery is not
//! supported), bare TOML numbers (`1.10` would read as `1.1`), unknown options.
//!
//! Sources, later ones winning: defaults, the TOML file, environment variables
//! (`VERSO_UPGRADE_LEVELS_CONDUCTOR`, `VERSO_UPGRADE_LEVELS_AGENT`), command-line
//! overrides (`conductor=1.0` or `upgrade_levels.conductor=1.0`).
//! [`UpgradeLevels::show_config`] renders the effective caps and where each came from.
//!
//! ```
//! use verso::Version;
//! use verso_rpc::caps::{Limits, UpgradeLevels};
//!
//! let limits = Limits { conductor: Version::new(1, 2), agent: Version::new(1, 0) };
//! let mut levels = UpgradeLevels::defaults(limits)?;
//! levels.apply_toml_str("[upgrade_levels]\nconductor = \"1.0\"\n", "accel.toml")?;
//! levels.apply_env_from([("VERSO_UPGRADE_LEVELS_CONDUCTOR".to_string(), "1.2".to_string())])?;
//! assert_eq!(levels.conductor(), Version::new(1, 2));
//! assert_eq!(levels.agent(), Version::new(1, 0));
//!
//! let err = levels.apply_toml_str("[upgrade_levels]\nconductor = 1.10\n", "accel.toml").unwrap_err();
//! assert!(err.to_string().contains("quote it"));
//! # Ok::<(), verso_rpc::RpcError>(())
//! ```

use crate::RpcError;
use std::fmt;
use std::path::Path;
use verso::Version;

/// The option for conductor clients' cap.
pub const CONDUCTOR: &str = "conductor";
/// The option for agent clients' cap.
pub const AGENT: &str = "agent";
/// The options of `[upgrade_levels]`.
pub const OPTIONS: [&str; 2] = [CONDUCTOR, AGENT];
/// The default conductor cap.
pub const DEFAULT_CONDUCTOR: Version = Version::new(1, 1);
/// The default agent cap.
pub const DEFAULT_AGENT: Version = Version::new(1, 0);
/// The prefix of the environment overrides (`VERSO_UPGRADE_LEVELS_CONDUCTOR`, ...).
pub const ENV_PREFIX: &str = "VERSO_UPGRADE_LEVELS_";
/// The TOML section.
pub const SECTION: &str = "upgrade_levels";

/// The newest version each local client speaks: a cap above it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The newest conductor API version the local conductor client speaks.
    pub conductor: Version,
    /// The newest agent API version the local agent client speaks.
    pub agent: Version,
}

/// Where a cap's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The built-in default.
    Default,
    /// A config file.
    File(String),
    /// An environment variable.
    Env(String),
    /// The command line.
    Cli,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(p) => write!(f, "file {p}"),
            Origin::Env(v) => write!(f, "environment {v}"),
            Origin::Cli => f.write_str("command line"),
        }
    }
}

/// One effective cap and its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The cap.
    pub version: Version,
    /// Where it came from.
    pub origin: Origin,
}

/// The effective `[upgrade_levels]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeLevels {
    conductor: Level,
    agent: Level,
    limits: Limits,
}

impl UpgradeLevels {
    /// The defaults (`conductor = "1.1"`, `agent = "1.0"`), checked against `limits`.
    pub fn defaults(limits: Limits) -> Result<Self, RpcError> {
        let mut levels = UpgradeLevels {
            conductor: Level {
                version: DEFAULT_CONDUCTOR,
                origin: Origin::Default,
            },
            agent: Level {
                version: DEFAULT_AGENT,
                origin: Origin::Default,
            },
            limits,
        };
        levels.set(CONDUCTOR, &DEFAULT_CONDUCTOR.to_string(), Origin::Default)?;
        levels.set(AGENT, &DEFAULT_AGENT.to_string(), Origin::Default)?;
        Ok(levels)
    }

    /// Defaults, then the file (if given), then the process environment.
    pub fn load(limits: Limits, file: Option<&Path>) -> Result<Self, RpcError> {
        let mut levels = Self::defaults(limits)?;
        if let Some(path) = file {
            levels.apply_file(path)?;
        }
        levels.apply_env()?;
        Ok(levels)
    }

    /// The conductor clients' cap.
    pub fn conductor(&self) -> Version {
        self.conductor.version
    }

    /// The agent clients' cap.
    pub fn agent(&self) -> Version {
        self.agent.version
    }

    /// The cap of `option` with its origin.
    pub fn level(&self, option: &str) -> Option<&Level> {
        match option {
            CONDUCTOR => Some(&self.conductor),
            AGENT => Some(&self.agent),
            _ => None,
        }
    }

    /// The limits the caps are checked against.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Sets `option` from a string value, checking it.
    pub fn set(&mut self, option: &str, value: &str, origin: Origin) -> Result<(), RpcError> {
        let limit = match option {
            CONDUCTOR => self.limits.conductor,
            AGENT => self.limits.agent,
            _ => {
                return Err(RpcError::CapUnknownOption {
                    option: option.to_owned(),
                    origin: origin.to_string(),
                    known: OPTIONS.join(", "),
                })
            }
        };
        let version = parse_cap(option, value, &origin)?;
        if version.major() != limit.major() || version > limit {
            return Err(RpcError::CapNotSupported {
                option: option.to_owned(),
                value: version,
                local_max: limit,
                origin: origin.to_string(),
            });
        }
        let level = Level { version, origin };
        match option {
            CONDUCTOR => self.conductor = level,
            _ => self.agent = level,
        }
        Ok(())
    }

    /// Applies the `[upgrade_levels]` section of a TOML document (other sections are
    /// ignored; a missing section changes nothing). `name` names the source in errors.
    pub fn apply_toml_str(&mut self, text: &str, name: &str) -> Result<(), RpcError> {
        let origin = Origin::File(name.to_owned());
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| RpcError::ConfigFile {
                path: name.to_owned(),
                detail: e.message().to_owned(),
            })?;
        let section = match doc.get(SECTION) {
            None => return Ok(()),
            Some(toml::Value::Table(t)) => t,
            Some(other) => {
                return Err(RpcError::ConfigFile {
                    path: name.to_owned(),
                    detail: format!("'{SECTION}' must be a table, got a {}", other.type_str()),
                })
            }
        };
        // Check everything before changing anything, so a bad file leaves no half-state.
        let mut staged = self.clone();
        for (option, value) in section {
            match value {
                toml::Value::String(s) => staged.set(option, s, origin.clone())?,
                toml::Value::Float(x) => {
                    // Quote what the operator wrote (`1.10`), not what the float became.
                    let raw = raw_literal(text, option).unwrap_or_else(|| x.to_string());
                    let suggestion = if raw.contains('.') {
                        raw.clone()
                    } else {
                        format!("{raw}.0")
                    };
                    return Err(bare_number(option, &raw, suggestion, &origin));
                }
                toml::Value::Integer(n) => {
                    let raw = raw_literal(text, option).unwrap_or_else(|| n.to_string());
                    return Err(bare_number(option, &raw, format!("{n}.0"), &origin));
                }
                other => {
                    return Err(RpcError::CapWrongType {
                        option: option.clone(),
                        origin: origin.to_string(),
                        found: other.type_str().to_owned(),
                    })
                }
            }
        }
        *self = staged;
        Ok(())
    }

    /// Applies the `[upgrade_levels]` section of a TOML file.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), RpcError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| RpcError::ConfigFile {
            path: name.clone(),
            detail: e.to_string(),
        })?;
        self.apply_toml_str(&text, &name)
    }

    /// Applies `VERSO_UPGRADE_LEVELS_*` variables from the process environment.
    pub fn apply_env(&mut self) -> Result<(), RpcError> {
        // vars_os: a non-UTF-8 variable elsewhere in the environment must not panic.
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        self.apply_env_from(vars)
    }

    /// Applies `VERSO_UPGRADE_LEVELS_*` variables from `vars` (others are ignored).
    pub fn apply_env_from(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), RpcError> {
        let mut vars: Vec<_> = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .collect();
        vars.sort();
        for (name, value) in vars {
            let option = name[ENV_PREFIX.len()..].to_ascii_lowercase();
            self.set(&option, &value, Origin::Env(name))?;
        }
        Ok(())
    }

    /// Applies one command-line override, `conductor=1.0` or `upgrade_levels.conductor=1.0`.
    pub fn apply_cli(&mut self, assignment: &str) -> Result<(), RpcError> {
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(RpcError::CapMalformed {
                option: assignment.to_owned(),
                value: String::new(),
                origin: Origin::Cli.to_string(),
                detail: "an override is OPTION=VERSION, such as conductor=1.0".into(),
            });
        };
        let key = key.trim();
        let option = key
            .strip_prefix(SECTION)
            .and_then(|k| k.strip_prefix('.'))
            .unwrap_or(key);
        self.set(option, value.trim().trim_matches('"'), Origin::Cli)
    }

    /// The effective caps as a TOML `[upgrade_levels]` section, with each value's origin,
    /// for a `--show-config` option.
    ///
    /// ```
    /// # use verso::Version;
    /// # use verso_rpc::caps::{Limits, UpgradeLevels};
    /// let levels = UpgradeLevels::defaults(Limits { conductor: Version::new(1, 2), agent: Version::new(1, 0) })?;
    /// let shown = levels.show_config();
    /// assert!(shown.contains("conductor = \"1.1\"  # default"));
    /// // It is TOML that reads back to the same caps.
    /// let mut again = UpgradeLevels::defaults(levels.limits())?;
    /// again.apply_toml_str(&shown, "shown")?;
    /// assert_eq!(again.conductor(), levels.conductor());
    /// # Ok::<(), verso_rpc::RpcError>(())
    /// ```
    pub fn show_config(&self) -> String {
        format!(
            "[{SECTION}]\n\
             # newest versions this build speaks: conductor {}, agent {}\n\
             {CONDUCTOR} = \"{}\"  # {}\n\
             {AGENT} = \"{}\"  # {}\n",
            self.limits.conductor,
            self.limits.agent,
            self.conductor.version,
            self.conductor.origin,
            self.agent.version,
            self.agent.origin,
        )
    }
}

fn parse_cap(option: &str, value: &str, origin: &Origin) -> Result<Version, RpcError> {
    let malformed = |detail: String| RpcError::CapMalformed {
        option: option.to_owned(),
        value: value.to_owned(),
        origin: origin.to_string(),
        detail,
    };
    if value.is_empty() {
        return Err(malformed("the value is empty".into()));
    }
    if value.eq_ignore_ascii_case("auto") {
        return Err(RpcError::CapAuto {
            option: option.to_owned(),
            origin: origin.to_string(),
        });
    }
    let v: Version = value.parse().map_err(|e| malformed(format!("{e}")))?;
    if v.patch().is_some() {
        return Err(malformed("a cap has no patch part".into()));
    }
    Ok(v)
}

fn bare_number(option: &str, value: &str, suggestion: String, origin: &Origin) -> RpcError {
    RpcError::CapBareNumber {
        option: option.to_owned(),
        value: value.to_owned(),
        suggestion,
        origin: origin.to_string(),
    }
}

/// The literal text of `option = ...` in the `[upgrade_levels]` section, as written.
fn raw_literal(text: &str, option: &str) -> Option<String> {
    let mut in_section = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line.trim_start_matches('[').trim_end_matches(']').trim() == SECTION;
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

    const LIMITS: Limits = Limits {
        conductor: Version::new(1, 2),
        agent: Version::new(1, 0),
    };

    fn levels() -> UpgradeLevels {
        UpgradeLevels::defaults(LIMITS).expect("defaults fit the limits")
    }

    fn toml_err(text: &str) -> RpcError {
        levels()
            .apply_toml_str(text, "test.toml")
            .expect_err("refused")
    }

    #[test]
    fn defaults_are_1_1_and_1_0() {
        let l = levels();
        assert_eq!(l.conductor(), Version::new(1, 1));
        assert_eq!(l.agent(), Version::new(1, 0));
        assert_eq!(
            l.level(CONDUCTOR).map(|l| &l.origin),
            Some(&Origin::Default)
        );
    }

    #[test]
    fn defaults_above_the_limits_are_refused() {
        let low = Limits {
            conductor: Version::new(1, 0),
            agent: Version::new(1, 0),
        };
        assert!(matches!(
            UpgradeLevels::defaults(low),
            Err(RpcError::CapNotSupported { .. })
        ));
    }

    #[test]
    fn quoted_values_are_taken_from_the_file() {
        let mut l = levels();
        l.apply_toml_str(
            "[other]\nx = 1\n[upgrade_levels]\nconductor = \"1.2\"\nagent = \"1.0\"\n",
            "f.toml",
        )
        .expect("valid");
        assert_eq!(l.conductor(), Version::new(1, 2));
        assert_eq!(
            l.level(CONDUCTOR).map(|l| &l.origin),
            Some(&Origin::File("f.toml".into()))
        );
        // No section: nothing changes.
        let mut m = levels();
        m.apply_toml_str("[database]\nurl = \"x\"\n", "f.toml")
            .expect("valid");
        assert_eq!(m, levels());
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in ["1", "1.x", "", "1.1.1", "v1.1", " 1.1"] {
            let text = format!("[upgrade_levels]\nconductor = \"{bad}\"\n");
            assert!(
                matches!(toml_err(&text), RpcError::CapMalformed { ref value, .. } if value == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn auto_is_refused_with_a_clear_message() {
        let e = toml_err("[upgrade_levels]\nagent = \"auto\"\n");
        assert!(matches!(e, RpcError::CapAuto { .. }));
        assert!(
            e.to_string()
                .contains("automatic version discovery is not supported"),
            "{e}"
        );
    }

    #[test]
    fn bare_numbers_are_refused_saying_to_quote() {
        let e = toml_err("[upgrade_levels]\nconductor = 1.10  # pinned\n");
        assert!(
            matches!(&e, RpcError::CapBareNumber { value, suggestion, .. } if value == "1.10" && suggestion == "1.10"),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("quote it"), "{msg}");
        assert!(msg.contains("1.10 would read as 1.1"), "{msg}");
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = 1\n"),
            RpcError::CapBareNumber { suggestion, .. } if suggestion == "1.0"
        ));
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = true\n"),
            RpcError::CapWrongType { .. }
        ));
    }

    #[test]
    fn above_local_max_or_other_major_is_refused() {
        for bad in ["1.3", "2.0", "0.9"] {
            let text = format!("[upgrade_levels]\nconductor = \"{bad}\"\n");
            assert!(
                matches!(toml_err(&text), RpcError::CapNotSupported { local_max, .. } if local_max == Version::new(1, 2)),
                "{bad}"
            );
        }
        assert!(matches!(
            toml_err("[upgrade_levels]\nagent = \"1.1\"\n"),
            RpcError::CapNotSupported { .. }
        ));
    }

    #[test]
    fn unknown_options_and_bad_files_are_refused() {
        assert!(matches!(
            toml_err("[upgrade_levels]\ncondutor = \"1.0\"\n"),
            RpcError::CapUnknownOption { .. }
        ));
        assert!(matches!(
            toml_err("[upgrade_levels\n"),
            RpcError::ConfigFile { .. }
        ));
        assert!(matches!(
            toml_err("upgrade_levels = 3\n"),
            RpcError::ConfigFile { .. }
        ));
        assert!(matches!(
            levels().apply_file(Path::new("/nonexistent/verso.toml")),
            Err(RpcError::ConfigFile { .. })
        ));
    }

    #[test]
    fn a_bad_file_changes_nothing() {
        let mut l = levels();
        let r = l.apply_toml_str(
            "[upgrade_levels]\nconductor = \"1.0\"\nagent = \"9.9\"\n",
            "f.toml",
        );
        assert!(r.is_err());
        assert_eq!(l, levels());
    }

    #[test]
    fn env_then_cli_override_the_file() {
        let mut l = levels();
        l.apply_toml_str("[upgrade_levels]\nconductor = \"1.2\"\n", "f.toml")
            .expect("valid");
        l.apply_env_from([
            (
                "VERSO_UPGRADE_LEVELS_CONDUCTOR".to_owned(),
                "1.0".to_owned(),
            ),
            ("PATH".to_owned(), "/bin".to_owned()),
        ])
        .expect("valid");
        assert_eq!(l.conductor(), Version::new(1, 0));
        assert_eq!(
            l.level(CONDUCTOR).map(|l| &l.origin),
            Some(&Origin::Env("VERSO_UPGRADE_LEVELS_CONDUCTOR".into()))
        );
        l.apply_cli("upgrade_levels.conductor=1.1").expect("valid");
        assert_eq!(l.conductor(), Version::new(1, 1));
        l.apply_cli("conductor=1.2").expect("valid");
        assert_eq!(l.conductor(), Version::new(1, 2));
        assert_eq!(l.level(CONDUCTOR).map(|l| &l.origin), Some(&Origin::Cli));

        assert!(matches!(
            l.apply_env_from([("VERSO_UPGRADE_LEVELS_AGENT".to_owned(), "auto".to_owned())]),
            Err(RpcError::CapAuto { .. })
        ));
        assert!(matches!(
            l.apply_env_from([("VERSO_UPGRADE_LEVELS_AGNET".to_owned(), "1.0".to_owned())]),
            Err(RpcError::CapUnknownOption { .. })
        ));
        assert!(l.apply_cli("conductor").is_err());
        assert!(l.apply_cli("conductor=").is_err());
    }

    #[test]
    fn show_config_names_values_and_origins() {
        let mut l = levels();
        l.apply_cli("agent=1.0").expect("valid");
        let shown = l.show_config();
        assert_eq!(
            shown,
            "[upgrade_levels]\n\
             # newest versions this build speaks: conductor 1.2, agent 1.0\n\
             conductor = \"1.1\"  # default\n\
             agent = \"1.0\"  # command line\n"
        );
    }
}
