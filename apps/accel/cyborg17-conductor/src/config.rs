//! The conductor's configuration, read from Cyborg 17's own `cyborg.conf` (oslo.config's
//! INI): the file a `cyborg-conductor` runs with runs this conductor unchanged.
//!
//! | section | option | used for |
//! |---|---|---|
//! | `[DEFAULT]` | `transport_url` | RabbitMQ (`rabbit://user:pass@host:port/vhost`), exchange `cyborg` |
//! | `[DEFAULT]` | `host` | the conductor's RPC server name (default: the machine's host name) |
//! | `[database]` | `connection` | SQLAlchemy's URL: `mysql+pymysql://...`, `mysql://...`, `sqlite:////path` |
//! | `[placement]` | keystoneauth's password options, `endpoint_override` | the deployables' resource providers (without a service user there: none made, see below) |
//! | `[nova]` | the same | `accelerator-request-bound` events at bind (without a service user there: none sent) |
//! | `[glance]` | `endpoint_override` (default: the `[placement]` user's catalog's `image`) | bitstreams of FPGAs programmed at bind |
//! | `[agent]` | `rpc_timeout` (this conductor's, seconds; default 60) | calls to agents (mediated devices, FPGA programming) |
//!
//! Without Placement and Nova (a file with no `auth_url` in `[placement]` or `[nova]`,
//! as an all-in-one such as `accel demo` runs) the conductor still works on its
//! database: each deployable is named its provider's UUID (the name-based one Cyborg
//! gives the provider it makes) but no provider is made, and binds end without an
//! event to Nova. Cyborg 17's own conductor needs both; this one says so at start
//! ([`Config::without_openstack`]), so a deployment that forgot them sees it.
//!
//! keystoneauth's options are `auth_url`, `username`, `password`, `project_name`,
//! `user_domain_name` (or `user_domain_id`), `project_domain_name` (or
//! `project_domain_id`), `region_name`, `valid_interfaces` (first one), `cafile`.

pub use accel_cyborg17::keystone::oslo::{get, service, ConfigError, ServiceAuth};
use ini::Ini;
use std::path::Path;
use std::time::Duration;

/// What the conductor runs with.
#[derive(Clone, Debug)]
pub struct Config {
    /// `[DEFAULT] transport_url`.
    pub transport_url: String,
    /// `[DEFAULT] host`.
    pub host: Option<String>,
    /// `[database] connection`, as sqlx opens it.
    pub database_url: String,
    /// `[placement]`, when the file has a service user there.
    pub placement: Option<ServiceAuth>,
    /// `[nova]`, when the file has a service user there.
    pub nova: Option<ServiceAuth>,
    /// Glance's endpoint instead of the catalog's `image`.
    pub glance_endpoint: Option<String>,
    /// How long a call to an agent may take.
    pub agent_timeout: Duration,
}

/// SQLAlchemy's `[database] connection` as the URL sqlx opens: the driver suffix
/// (`mysql+pymysql`) dropped, `sqlite:////abs` (SQLAlchemy's four slashes for an
/// absolute path) as `sqlite:///abs`. `None` for a backend Cyborg 17 does not run on.
pub fn sqlx_url(connection: &str) -> Option<String> {
    let (scheme, rest) = connection.split_once("://")?;
    let backend = scheme.split('+').next().unwrap_or(scheme);
    match backend {
        "mysql" | "mariadb" => Some(format!("mysql://{rest}")),
        "sqlite" => {
            let path = rest.strip_prefix('/')?;
            if path.is_empty() {
                None
            } else {
                Some(format!("sqlite://{path}"))
            }
        }
        _ => None,
    }
}

/// A URL with its password replaced by `***`, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            let auth = &url[start + 3..at];
            match auth.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..start + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl Config {
    /// What this conductor runs without, one line each, for its start: Placement
    /// (providers named, not made) and Nova (binds not announced). Empty in an
    /// OpenStack deployment.
    pub fn without_openstack(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.placement.is_none() {
            missing.push("no [placement] service user: deployables are named their providers' UUIDs, but no provider is made in Placement");
        }
        if self.nova.is_none() {
            missing.push("no [nova] service user: binds end without an accelerator-request-bound event to Nova");
        }
        missing
    }

    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let ini = accel_cyborg17::keystone::oslo::load(path)?;
        Config::from_ini(&ini)
    }

    /// Reads an already parsed file.
    pub fn from_ini(ini: &Ini) -> Result<Config, ConfigError> {
        let transport_url = get(ini, "DEFAULT", "transport_url").ok_or(ConfigError::Missing {
            section: "DEFAULT",
            option: "transport_url",
        })?;
        let connection = get(ini, "database", "connection").ok_or(ConfigError::Missing {
            section: "database",
            option: "connection",
        })?;
        let database_url = sqlx_url(connection).ok_or_else(|| ConfigError::Invalid {
            section: "database",
            option: "connection",
            value: redact(connection),
            reason:
                "Cyborg 17 runs on MySQL/MariaDB (mysql+pymysql://...) or SQLite (sqlite:////path)"
                    .into(),
        })?;
        let placement = service(ini, "placement")?;
        let agent_timeout = match get(ini, "agent", "rpc_timeout") {
            None => Duration::from_secs(60),
            Some(v) => Duration::from_secs(v.parse().map_err(|e: std::num::ParseIntError| {
                ConfigError::Invalid {
                    section: "agent",
                    option: "rpc_timeout",
                    value: v.to_owned(),
                    reason: e.to_string(),
                }
            })?),
        };
        Ok(Config {
            transport_url: transport_url.to_owned(),
            host: get(ini, "DEFAULT", "host").map(str::to_owned),
            database_url,
            placement,
            nova: service(ini, "nova")?,
            glance_endpoint: get(ini, "glance", "endpoint_override").map(str::to_owned),
            agent_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlalchemy_urls_become_sqlx_urls() {
        assert_eq!(
            sqlx_url("mysql+pymysql://cyborg:pw@db/cyborg?charset=utf8").as_deref(),
            Some("mysql://cyborg:pw@db/cyborg?charset=utf8")
        );
        assert_eq!(
            sqlx_url("sqlite:////var/lib/cyborg.sqlite").as_deref(),
            Some("sqlite:///var/lib/cyborg.sqlite")
        );
        assert_eq!(
            sqlx_url("sqlite:///cyborg.sqlite").as_deref(),
            Some("sqlite://cyborg.sqlite")
        );
        assert_eq!(sqlx_url("postgresql://x@y/z"), None);
        assert_eq!(sqlx_url("sqlite://"), None);
    }

    #[test]
    fn a_cyborg_conf_is_read_and_bad_ones_name_the_option() {
        let text = "[DEFAULT]\ntransport_url = rabbit://guest:guest@mq:5672/\nhost = c1\n\n\
                    [database]\nconnection = mysql+pymysql://cyborg:secret@db/cyborg\n\n\
                    [placement]\nauth_url = http://ks/v3\nusername = cyborg\npassword = p\n\
                    project_name = service\nuser_domain_name = Default\n\
                    project_domain_name = Default\nregion_name = RegionOne\n";
        let config = Config::from_ini(&Ini::load_from_str(text).expect("ini")).expect("config");
        assert_eq!(config.database_url, "mysql://cyborg:secret@db/cyborg");
        assert_eq!(config.host.as_deref(), Some("c1"));
        assert_eq!(
            config
                .placement
                .as_ref()
                .and_then(|p| p.auth.region_name.as_deref()),
            Some("RegionOne")
        );
        assert!(config.nova.is_none());
        assert_eq!(config.without_openstack().len(), 1);
        assert!(config.without_openstack()[0].starts_with("no [nova]"));
        assert_eq!(config.agent_timeout, Duration::from_secs(60));

        let no_db = text.replace("connection = mysql+pymysql://cyborg:secret@db/cyborg", "");
        let err = Config::from_ini(&Ini::load_from_str(&no_db).expect("ini")).expect_err("refused");
        assert_eq!(err.to_string(), "[database] connection is required");
        let pg = text.replace(
            "mysql+pymysql://cyborg:secret@db",
            "postgresql://cyborg:secret@db",
        );
        let err = Config::from_ini(&Ini::load_from_str(&pg).expect("ini")).expect_err("refused");
        assert!(
            err.to_string()
                .contains("postgresql://cyborg:***@db/cyborg"),
            "{err}"
        );
        assert!(!err.to_string().contains("secret"), "{err}");
        let alone = text
            .split("[placement]")
            .next()
            .expect("the text before [placement]");
        let config =
            Config::from_ini(&Ini::load_from_str(alone).expect("ini")).expect("no Placement");
        assert!(config.placement.is_none());
        assert_eq!(config.without_openstack().len(), 2);
        let half_nova = format!("{text}\n[nova]\nauth_url = http://ks/v3\nusername = nova\n");
        let err =
            Config::from_ini(&Ini::load_from_str(&half_nova).expect("ini")).expect_err("refused");
        assert_eq!(err.to_string(), "[nova] password is required");
    }
}
