//! Reading Cyborg's oslo.config file (INI): an option's value, and a keystoneauth
//! section (`[placement]`, `[nova]`, `[glance]`, `[keystone_authtoken]`) as a service
//! user's [`AuthOptions`]; release N's frozen copy of `accel_keystone::oslo` (N+1's).
//!
//! keystoneauth section (`[placement]`, `[nova]`, `[glance]`, `[keystone_authtoken]`) as
//! a service user's [`AuthOptions`], as Cyborg's `cyborg.conf` holds them. Shared by
//! the Rust replacements of Cyborg 17's services, which read Cyborg's own file.
//!
//! keystoneauth's options read: `auth_url`, `username`, `password`, `project_name`,
//! `user_domain_name` (or `user_domain_id`), `project_domain_name` (or
//! `project_domain_id`), `region_name`, `valid_interfaces` (the first one), `cafile`,
//! and `endpoint_override`.

use super::AuthOptions;
use ini::Ini;
use std::path::{Path, PathBuf};

/// Why a configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A required option is missing or empty.
    #[error("[{section}] {option} is required")]
    Missing {
        /// Its section.
        section: &'static str,
        /// The option.
        option: &'static str,
    },
    /// An option's value cannot be used.
    #[error("[{section}] {option} = {value:?}: {reason}")]
    Invalid {
        /// Its section.
        section: &'static str,
        /// The option.
        option: &'static str,
        /// The value (a URL with its password hidden).
        value: String,
        /// Why.
        reason: String,
    },
}

/// Reads and parses the file at `path`.
pub fn load(path: &Path) -> Result<Ini, ConfigError> {
    Ini::load_from_file(path).map_err(|e| ConfigError::File {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Parses `text` (tests, and files read by other means); `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Ini, ConfigError> {
    Ini::load_from_str(text).map_err(|e| ConfigError::File {
        path: PathBuf::from(origin),
        reason: e.to_string(),
    })
}

/// A keystoneauth section (`[placement]`, `[nova]`): the service user and where the
/// service is.
#[derive(Clone, Debug)]
pub struct ServiceAuth {
    /// The session's options.
    pub auth: AuthOptions,
    /// The service's endpoint instead of the catalog's.
    pub endpoint_override: Option<String>,
}

/// An option's value (`[DEFAULT]` is a section like the others in the file; options
/// before any section header count as `[DEFAULT]`'s too).
pub fn get<'a>(ini: &'a Ini, section: &str, option: &str) -> Option<&'a str> {
    let found = ini.get_from(Some(section), option).or_else(|| {
        (section == "DEFAULT")
            .then(|| ini.get_from(None::<&str>, option))
            .flatten()
    });
    found.map(str::trim).filter(|v| !v.is_empty())
}

/// A keystoneauth section (`[placement]`, `[nova]`, `[keystone_authtoken]`): `None` when it
/// names no `auth_url`; refused when it does but lacks the user, password or project.
pub fn service(ini: &Ini, section: &'static str) -> Result<Option<ServiceAuth>, ConfigError> {
    let Some(auth_url) = get(ini, section, "auth_url") else {
        return Ok(None);
    };
    let need = |option: &'static str| {
        get(ini, section, option)
            .map(str::to_owned)
            .ok_or(ConfigError::Missing { section, option })
    };
    let mut auth = AuthOptions::new(
        auth_url,
        &need("username")?,
        &need("password")?,
        &need("project_name")?,
    );
    if let Some(d) = get(ini, section, "user_domain_name").or(get(ini, section, "user_domain_id")) {
        auth.user_domain_name = d.to_owned();
    }
    if let Some(d) =
        get(ini, section, "project_domain_name").or(get(ini, section, "project_domain_id"))
    {
        auth.project_domain_name = d.to_owned();
    }
    auth.region_name = get(ini, section, "region_name").map(str::to_owned);
    if let Some(i) = get(ini, section, "valid_interfaces") {
        if let Some(first) = i.split(',').map(str::trim).find(|s| !s.is_empty()) {
            auth.interface = first.to_owned();
        }
    }
    auth.cafile = get(ini, section, "cafile").map(PathBuf::from);
    Ok(Some(ServiceAuth {
        auth,
        endpoint_override: get(ini, section, "endpoint_override").map(str::to_owned),
    }))
}
