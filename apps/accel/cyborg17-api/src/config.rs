//! The API's configuration, read from Cyborg 17's own `cyborg.conf`: what the conductor
//! reads ([`accel_cyborg17_conductor::config::Config`]: the broker, the database,
//! `[placement]`, `[agent] rpc_timeout` for the calls to the conductor and agents), and
//! the API's own sections.
//!
//! | section | option | used for |
//! |---|---|---|
//! | `[api]` | `host_ip` (default `127.0.0.1`), `port` (default `6666`) | where it listens, as `cyborg-api` |
//! | `[api]` | `public_endpoint` | the URL links are built on |
//! | `[keystone_authtoken]` | keystonemiddleware's `auth_url`, `username`, `password`, `project_name`, domains, `www_authenticate_uri`, `service_token_roles`, `service_token_roles_required` | callers' tokens checked with Keystone |
//! | `[api]` | `auth_strategy = noauth` (accel's; Cyborg chooses by its paste pipeline) | no authentication: every caller an administrator; only without `[keystone_authtoken]` |

use crate::http::{AuthStrategy, KeystoneOptions, PublicEndpoint};
use accel_cyborg17_conductor::config::{self as conductor, get, service, ConfigError};
use ini::Ini;
use std::net::SocketAddr;
use std::path::Path;

/// What the API runs with.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The conductor's view of the file: broker, database, Placement, call timeout.
    pub common: conductor::Config,
    /// `[api] host_ip` and `port`.
    pub listen: SocketAddr,
    /// `[api] public_endpoint`.
    pub public_endpoint: Option<PublicEndpoint>,
    /// Keystone tokens (`[keystone_authtoken]`) or none (`[api] auth_strategy = noauth`).
    pub auth: AuthStrategy,
}

impl ApiConfig {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<ApiConfig, ConfigError> {
        let ini = accel_cyborg17::keystone::oslo::load(path)?;
        ApiConfig::from_ini(&ini)
    }

    /// Reads an already parsed file.
    pub fn from_ini(ini: &Ini) -> Result<ApiConfig, ConfigError> {
        let common = conductor::Config::from_ini(ini)?;
        let host = get(ini, "api", "host_ip").unwrap_or("127.0.0.1");
        let port = match get(ini, "api", "port") {
            None => 6666,
            Some(p) => p.parse::<u16>().map_err(|e| ConfigError::Invalid {
                section: "api",
                option: "port",
                value: p.to_owned(),
                reason: e.to_string(),
            })?,
        };
        let ip = host
            .parse()
            .map_err(|e: std::net::AddrParseError| ConfigError::Invalid {
                section: "api",
                option: "host_ip",
                value: host.to_owned(),
                reason: e.to_string(),
            })?;
        let public_endpoint = get(ini, "api", "public_endpoint")
            .map(|e| {
                PublicEndpoint::parse(e).map_err(|reason| ConfigError::Invalid {
                    section: "api",
                    option: "public_endpoint",
                    value: e.to_owned(),
                    reason,
                })
            })
            .transpose()?;
        let auth = match service(ini, "keystone_authtoken")? {
            Some(s) => {
                let mut options = KeystoneOptions::new(
                    &s.auth.auth_url,
                    &s.auth.username,
                    &s.auth.password,
                    &s.auth.project_name,
                );
                options.auth = s.auth;
                options.www_authenticate_uri =
                    get(ini, "keystone_authtoken", "www_authenticate_uri").map(str::to_owned);
                if let Some(roles) = get(ini, "keystone_authtoken", "service_token_roles") {
                    options.service_token_roles = roles
                        .split(',')
                        .map(str::trim)
                        .filter(|r| !r.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                if let Some(v) = get(ini, "keystone_authtoken", "service_token_roles_required") {
                    options.service_token_roles_required = v.eq_ignore_ascii_case("true");
                }
                AuthStrategy::Keystone(Box::new(options))
            }
            None if get(ini, "api", "auth_strategy") == Some("noauth") => AuthStrategy::Noauth,
            None => {
                return Err(ConfigError::Missing {
                    section: "keystone_authtoken",
                    option: "auth_url",
                })
            }
        };
        Ok(ApiConfig {
            common,
            listen: SocketAddr::new(ip, port),
            public_endpoint,
            auth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n\
        [database]\nconnection = sqlite:////tmp/cyborg.sqlite\n\
        [placement]\nauth_url = http://keystone/v3\nusername = cyborg\npassword = p\n\
        project_name = service\n";

    fn read(extra: &str) -> Result<ApiConfig, ConfigError> {
        let ini = accel_cyborg17::keystone::oslo::parse(&format!("{BASE}{extra}"), "test")?;
        ApiConfig::from_ini(&ini)
    }

    #[test]
    fn cyborgs_api_options_are_read() {
        let c = read(
            "[api]\nhost_ip = 0.0.0.0\nport = 6667\npublic_endpoint = https://cyborg.example:6666\n\
             [keystone_authtoken]\nauth_url = http://keystone/v3\nusername = cyborg\n\
             password = p\nproject_name = service\nservice_token_roles_required = True\n",
        )
        .expect("a good file");
        assert_eq!(c.listen.to_string(), "0.0.0.0:6667");
        assert_eq!(
            c.public_endpoint.as_ref().map(PublicEndpoint::as_str),
            Some("https://cyborg.example:6666")
        );
        match c.auth {
            AuthStrategy::Keystone(k) => {
                assert_eq!(k.auth.username, "cyborg");
                assert!(k.service_token_roles_required);
            }
            AuthStrategy::Noauth => panic!("the file names Keystone"),
        }
    }

    #[test]
    fn no_keystone_is_refused_unless_noauth_is_asked_for() {
        let e = read("").expect_err("no [keystone_authtoken]");
        assert_eq!(e.to_string(), "[keystone_authtoken] auth_url is required");
        let c = read("[api]\nauth_strategy = noauth\n").expect("noauth asked for");
        assert!(matches!(c.auth, AuthStrategy::Noauth));
        assert_eq!(c.listen.to_string(), "127.0.0.1:6666");
        let e = read("[api]\nauth_strategy = noauth\nport = lots\n").expect_err("bad port");
        assert!(e.to_string().starts_with("[api] port = \"lots\""), "{e}");
    }
}
