//! `[upgrade_levels]`: the operator's version caps, one per RPC API the application calls.
//!
//! The application declares each RPC API its clients call ([`ApiCap`]: the option's name,
//! the newest version the client speaks, the default cap), and the section has exactly
//! those options. During a rolling upgrade the operator pins what new code may send to
//! old code:
//!
//! ```toml
//! [upgrade_levels]
//! conductor = "1.1"   # every conductor client's cap
//! agent = "1.0"       # every agent client's cap
//! scheduler = "2.3"   # any API the application declares
//! ```
//!
//! Values are quoted `MAJOR.MINOR` strings. Refused, with a message that says what to
//! write: malformed values (`"1"`, `"1.x"`, `""`), versions the local client does not
//! speak (above its newest, or of another major), `"auto"` (automatic discovery is not
//! supported), bare TOML numbers (`1.10` would read as `1.1`), options no API declares.
//!
//! The values are read from the service's whole configuration by
//! [`config::ConfigLoader`](crate::config::ConfigLoader) (a file, environment variables
//! `VERSO_UPGRADE_LEVELS_<NAME>`, `--set upgrade_levels.<name>=VERSION`); this module
//! holds the declarations, the checks and the effective caps.
//!
//! ```
//! use verso::Version;
//! use verso_rpc::caps::{Origin, ApiCap, UpgradeLevels};
//! use verso_rpc::config::ConfigError;
//!
//! let mut levels = UpgradeLevels::defaults([
//!     ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)),
//!     ApiCap::new("scheduler", Version::new(2, 3), Version::new(2, 0)),
//! ])?;
//! assert_eq!(levels.cap("conductor"), Some(Version::new(1, 1)));
//! levels.set("scheduler", "2.3", Origin::Cli)?;
//! assert_eq!(levels.cap("scheduler"), Some(Version::new(2, 3)));
//! // Above what the client speaks, and an API that does not exist:
//! let too_new = levels.set("scheduler", "2.4", Origin::Cli);
//! assert!(matches!(too_new, Err(ConfigError::CapNotSupported { .. })));
//! let unknown = levels.set("schedular", "2.0", Origin::Cli);
//! assert!(matches!(unknown, Err(ConfigError::CapUnknownOption { .. })));
//! # Ok::<(), verso_rpc::config::ConfigError>(())
//! ```

use crate::config::error::ConfigError;
pub use crate::config::error::Origin;
use std::fmt::Write as _;
use verso::Version;

/// The TOML section.
pub(crate) const SECTION: &str = "upgrade_levels";

/// One RPC API the application's clients call, as `[upgrade_levels]` knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCap {
    name: String,
    newest: Version,
    default_cap: Version,
}

impl ApiCap {
    /// The API `name` (its option in `[upgrade_levels]`, lower case), whose local client
    /// speaks up to `newest`, capped at `default_cap` unless the operator says otherwise.
    pub fn new(name: impl Into<String>, newest: Version, default_cap: Version) -> Self {
        ApiCap {
            name: name.into(),
            newest,
            default_cap,
        }
    }

    /// The cap declaration of a typed API ([`crate::RpcApi`]): its name and newest
    /// version come from the one declaration the client and server are built from.
    pub fn for_api<A: crate::RpcApi>(default_cap: Version) -> Self {
        ApiCap::new(A::NAME, A::VERSION, default_cap)
    }

    /// The option's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The newest version the local client speaks: a cap above it is refused.
    pub fn newest(&self) -> Version {
        self.newest
    }

    /// The cap when none is configured.
    pub fn default_cap(&self) -> Version {
        self.default_cap
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

/// The effective `[upgrade_levels]`: one cap per declared API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeLevels {
    apis: Vec<(ApiCap, Level)>,
}

impl UpgradeLevels {
    /// Every API at its default cap, each checked against the API's newest version. Two
    /// APIs of one name, or a name that cannot be an option (empty, or other than lower
    /// case ASCII letters, digits and `_`), are refused.
    pub fn defaults(apis: impl IntoIterator<Item = ApiCap>) -> Result<Self, ConfigError> {
        let mut levels = UpgradeLevels { apis: Vec::new() };
        for api in apis {
            let name = api.name.as_str();
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid || levels.index(name).is_some() {
                return Err(ConfigError::InvalidApi {
                    name: name.to_owned(),
                    detail: if valid {
                        "declared twice".into()
                    } else {
                        "an option name is lower case ASCII letters, digits and '_'".into()
                    },
                });
            }
            let level = Level {
                version: api.default_cap,
                origin: Origin::Default,
            };
            let default = api.default_cap.to_string();
            levels.apis.push((api, level));
            let option = levels.apis[levels.apis.len() - 1].0.name.clone();
            levels.set(&option, &default, Origin::Default)?;
        }
        Ok(levels)
    }

    /// The cap of API `name`, if the application declared it.
    pub fn cap(&self, name: &str) -> Option<Version> {
        self.level(name).map(|l| l.version)
    }

    /// The cap of API `name` with its origin.
    pub fn level(&self, name: &str) -> Option<&Level> {
        self.index(name).map(|i| &self.apis[i].1)
    }

    /// The declared APIs, in declaration order.
    pub fn apis(&self) -> impl Iterator<Item = &ApiCap> {
        self.apis.iter().map(|(api, _)| api)
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.apis.iter().position(|(api, _)| api.name == name)
    }

    /// Sets the cap of `option` from a string value, checking it.
    pub fn set(&mut self, option: &str, value: &str, origin: Origin) -> Result<(), ConfigError> {
        let Some(index) = self.index(option) else {
            return Err(ConfigError::CapUnknownOption {
                option: option.to_owned(),
                origin: origin.to_string(),
                known: self.apis().map(ApiCap::name).collect::<Vec<_>>().join(", "),
            });
        };
        let limit = self.apis[index].0.newest;
        let version = parse_cap(option, value, &origin)?;
        if version.major() != limit.major() || version > limit {
            return Err(ConfigError::CapNotSupported {
                option: option.to_owned(),
                value: version,
                local_max: limit,
                origin: origin.to_string(),
            });
        }
        self.apis[index].1 = Level { version, origin };
        Ok(())
    }

    /// The effective caps as a TOML `[upgrade_levels]` section, with each value's origin,
    /// for a `--show-config` option. It reads back to the same caps.
    ///
    /// ```
    /// # use verso::Version;
    /// # use verso_rpc::caps::{ApiCap, UpgradeLevels};
    /// let levels = UpgradeLevels::defaults([
    ///     ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)),
    /// ])?;
    /// assert!(levels.show_config().contains("conductor = \"1.1\"  # default"));
    /// # Ok::<(), verso_rpc::config::ConfigError>(())
    /// ```
    pub fn show_config(&self) -> String {
        let newest = self
            .apis
            .iter()
            .map(|(api, _)| format!("{} {}", api.name, api.newest))
            .collect::<Vec<_>>()
            .join(", ");
        let mut out = format!("[{SECTION}]\n# newest versions this build speaks: {newest}\n");
        for (api, level) in &self.apis {
            let _ = writeln!(
                out,
                "{} = \"{}\"  # {}",
                api.name, level.version, level.origin
            );
        }
        out
    }
}

fn parse_cap(option: &str, value: &str, origin: &Origin) -> Result<Version, ConfigError> {
    let malformed = |detail: String| ConfigError::CapMalformed {
        option: option.to_owned(),
        value: value.to_owned(),
        origin: origin.to_string(),
        detail,
    };
    if value.is_empty() {
        return Err(malformed("the value is empty".into()));
    }
    if value.eq_ignore_ascii_case("auto") {
        return Err(ConfigError::CapAuto {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn apis() -> [ApiCap; 2] {
        [
            ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)),
            ApiCap::new("agent", Version::new(1, 0), Version::new(1, 0)),
        ]
    }

    fn levels() -> UpgradeLevels {
        UpgradeLevels::defaults(apis()).expect("defaults fit the limits")
    }

    #[test]
    fn defaults_are_the_declared_ones() {
        let l = levels();
        assert_eq!(l.cap("conductor"), Some(Version::new(1, 1)));
        assert_eq!(l.cap("agent"), Some(Version::new(1, 0)));
        assert_eq!(l.cap("scheduler"), None);
        assert_eq!(
            l.level("conductor").map(|l| &l.origin),
            Some(&Origin::Default)
        );
    }

    #[test]
    fn bad_declarations_are_refused() {
        let above = ApiCap::new("conductor", Version::new(1, 0), Version::new(1, 1));
        assert!(matches!(
            UpgradeLevels::defaults([above]),
            Err(ConfigError::CapNotSupported { .. })
        ));
        let [c, _] = apis();
        assert!(matches!(
            UpgradeLevels::defaults([c.clone(), c]),
            Err(ConfigError::InvalidApi { .. })
        ));
        for bad in ["", "Conductor", "con.ductor", "a-b"] {
            let api = ApiCap::new(bad, Version::new(1, 0), Version::new(1, 0));
            assert!(
                matches!(
                    UpgradeLevels::defaults([api]),
                    Err(ConfigError::InvalidApi { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in ["1", "1.x", "", "1.1.1", "v1.1", " 1.1"] {
            assert!(
                matches!(levels().set("conductor", bad, Origin::Cli), Err(ConfigError::CapMalformed { ref value, .. }) if value == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn auto_is_refused_with_a_clear_message() {
        let e = levels()
            .set("agent", "auto", Origin::File("f.toml".into()))
            .expect_err("refused");
        assert!(matches!(e, ConfigError::CapAuto { .. }));
        assert!(
            e.to_string()
                .contains("automatic version discovery is not supported"),
            "{e}"
        );
    }

    #[test]
    fn above_local_max_or_other_major_is_refused() {
        for bad in ["1.3", "2.0", "0.9"] {
            assert!(
                matches!(levels().set("conductor", bad, Origin::Cli), Err(ConfigError::CapNotSupported { local_max, .. }) if local_max == Version::new(1, 2)),
                "{bad}"
            );
        }
        assert!(matches!(
            levels().set("agent", "1.1", Origin::Cli),
            Err(ConfigError::CapNotSupported { .. })
        ));
    }

    #[test]
    fn unknown_options_name_the_known_ones() {
        let e = levels()
            .set(
                "condutor",
                "1.0",
                Origin::Env("VERSO_UPGRADE_LEVELS_CONDUTOR".into()),
            )
            .expect_err("refused");
        assert!(
            matches!(&e, ConfigError::CapUnknownOption { known, .. } if known == "conductor, agent"),
            "{e:?}"
        );
    }

    #[test]
    fn show_config_names_values_and_origins() {
        let mut l = levels();
        l.set("agent", "1.0", Origin::Cli).expect("valid");
        assert_eq!(
            l.show_config(),
            "[upgrade_levels]\n\
             # newest versions this build speaks: conductor 1.2, agent 1.0\n\
             conductor = \"1.1\"  # default\n\
             agent = \"1.0\"  # command line\n"
        );
    }
}
