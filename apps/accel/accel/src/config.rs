//! accel's configuration: one TOML file (`--config`), environment variables
//! (`ACCEL_<SECTION>_<KEY>`, `ACCEL_UPGRADE_LEVELS_CONDUCTOR`), then `--set
//! SECTION.KEY=VALUE`, layered by verso's configuration loader (which also checks
//! `[upgrade_levels]`); `accel config show` prints every value with its origin,
//! passwords masked.

use accel_conductor::nova::NovaOptions;
use accel_objects::rpc::{AgentApi, ConductorApi};
use serde::Deserialize;
use std::path::PathBuf;
use verso::Version;
use verso_rpc::caps::ApiCap;
use verso_rpc::config::{Config, ConfigError, ConfigLoader};

/// `[database]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Database {
    /// `sqlite://PATH` (created and migrated on first start), `postgres://...` or
    /// `mysql://...` (MariaDB 10.5 or newer).
    pub url: String,
}

impl Default for Database {
    fn default() -> Self {
        Database {
            url: "sqlite://accel.db".into(),
        }
    }
}

/// `[transport]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transport {
    /// `memory://` (one process) or `rabbit://user:pass@host:5672/`.
    pub url: String,
    /// The control exchange.
    pub control_exchange: String,
    /// Seconds a call waits for its server's next call-monitor heartbeat (oslo's
    /// `call_monitor_timeout`) before it fails as "outcome unknown": a conductor killed
    /// with calls taken is noticed in this time, not the 60 s call timeout. 0: off.
    /// RabbitMQ only.
    pub call_monitor_timeout: u64,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            url: "memory://".into(),
            control_exchange: "accel".into(),
            call_monitor_timeout: 10,
        }
    }
}

/// `[conductor]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conductor {
    /// Seconds an agent still counts after it was last heard of (a heartbeat, or a
    /// report of an agent that sends none): while it counts, an agent on older software
    /// blocks `accel upgrade finalize`. At least 1; keep it above the agents'
    /// `report_interval`, or a live agent between two heartbeats is missed.
    pub agent_liveness: u64,
    /// Seconds a stopping conductor (SIGTERM, Ctrl-C) waits for the calls it already
    /// took to finish and be answered before it exits anyway. It takes no new call
    /// meanwhile: the broker gives those to the other conductors.
    pub stop_timeout: u64,
    /// Threads that run the conductor: its handlers, its database calls and its broker
    /// connection. 1: one thread does all of it, and a call costs that one thread one
    /// wake-up (the cheapest per call; a conductor then uses at most one core, so give a
    /// deployment one conductor per core it should use: conductors share their queues).
    /// 0: one worker per core, and the broker connection on a thread of its own.
    pub threads: usize,
}

/// `[conductor] threads` unset.
pub const CONDUCTOR_THREADS: usize = 1;

impl Default for Conductor {
    fn default() -> Self {
        Conductor {
            agent_liveness: accel_conductor::runtime::AGENT_LIVENESS.as_secs(),
            stop_timeout: accel_conductor::runtime::STOP_TIMEOUT.as_secs(),
            threads: CONDUCTOR_THREADS,
        }
    }
}

/// `[api]`: where the HTTP API listens, TLS, and its limits and timeouts (each default
/// is `accel_api::Limits::default()` / `accel_api::ServeOptions::default()`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Api {
    /// Where the HTTP API listens (loopback by default).
    pub listen: String,
    /// HTTPS: the PEM certificate chain (with `tls_key_file`); unset: plain HTTP.
    pub tls_cert_file: Option<PathBuf>,
    /// HTTPS: the PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// The URL the API's links are built on (Cyborg's `[api] public_endpoint`) when
    /// clients reach it through a proxy or another name; unset: the request's `Host`.
    pub public_endpoint: Option<String>,
    /// Seconds for a request's headers to arrive (also the idle keep-alive timeout).
    pub header_read_timeout: u64,
    /// Seconds a request body may pause.
    pub body_read_timeout: u64,
    /// Seconds a request may take in all.
    pub request_timeout: u64,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Rows per page of every list: the default and largest `limit`.
    pub max_page_size: u32,
    /// Groups a device profile may have.
    pub max_groups_per_profile: usize,
    /// Accelerator requests one `POST /v2/accelerator_requests` may create.
    pub max_arqs_per_request: usize,
    /// How callers are authenticated: `keystone` (tokens, `[keystone_authtoken]`; the
    /// default of `accel api`) or `noauth` (everyone an administrator; the default of
    /// `accel all-in-one`).
    pub auth_strategy: AuthStrategyName,
    /// Let `noauth` serve on an address other than loopback (refused otherwise).
    pub noauth_allow_remote: bool,
}

/// `[api] auth_strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthStrategyName {
    /// Keystone tokens.
    #[default]
    Keystone,
    /// No authentication.
    Noauth,
}

/// `[keystone_authtoken]`: keystonemiddleware's options of the same names (those accel
/// uses), for `[api] auth_strategy = "keystone"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneAuthtoken {
    /// Keystone's URL, where tokens are validated (`http://keystone:5000/v3`).
    pub auth_url: Option<String>,
    /// The URL clients are told to authenticate at; unset: `auth_url`.
    pub www_authenticate_uri: Option<String>,
    /// `password`, the only plugin accel has.
    pub auth_type: String,
    /// The API's service user.
    pub username: Option<String>,
    /// Its password.
    pub password: Option<String>,
    /// Its project (`service`).
    pub project_name: Option<String>,
    /// The user's domain.
    pub user_domain_name: String,
    /// The project's domain.
    pub project_domain_name: String,
    /// Seconds a token's validation is kept (never past its expiry).
    pub token_cache_time: u64,
    /// Roles that make a service token one.
    pub service_token_roles: Vec<String>,
    /// Refuse service tokens without one of `service_token_roles`.
    pub service_token_roles_required: bool,
    /// Seconds to connect to Keystone.
    pub http_connect_timeout: u64,
    /// Seconds for one Keystone request.
    pub http_request_timeout: u64,
    /// Retries of a Keystone request that could not connect or timed out.
    pub http_request_max_retries: u32,
    /// CA certificates (PEM) for an https Keystone.
    pub cafile: Option<PathBuf>,
}

impl Default for KeystoneAuthtoken {
    fn default() -> Self {
        let d = accel_api::KeystoneOptions::new("", "", "", "");
        KeystoneAuthtoken {
            auth_url: None,
            www_authenticate_uri: None,
            auth_type: "password".into(),
            username: None,
            password: None,
            project_name: None,
            user_domain_name: d.auth.user_domain_name,
            project_domain_name: d.auth.project_domain_name,
            token_cache_time: d.token_cache_time.as_secs(),
            service_token_roles: d.service_token_roles,
            service_token_roles_required: d.service_token_roles_required,
            http_connect_timeout: d.auth.connect_timeout.as_secs(),
            http_request_timeout: d.auth.request_timeout.as_secs(),
            http_request_max_retries: d.auth.max_retries,
            cafile: None,
        }
    }
}

impl KeystoneAuthtoken {
    /// The options, or what is missing.
    pub fn options(&self) -> Result<accel_api::KeystoneOptions, String> {
        if self.auth_type != "password" {
            return Err(format!(
                "[keystone_authtoken] auth_type {:?}: accel has the password plugin only",
                self.auth_type
            ));
        }
        const NEEDED_FOR: &str = "for [api] auth_strategy = \"keystone\"";
        let secs = |name: &str, v: u64| {
            if v == 0 {
                Err(format!("[keystone_authtoken] {name} must be at least 1"))
            } else {
                Ok(std::time::Duration::from_secs(v))
            }
        };
        let user = ServiceUser {
            section: "keystone_authtoken",
            needed_for: NEEDED_FOR,
            auth_url: &self.auth_url,
            username: &self.username,
            password: &self.password,
            project_name: &self.project_name,
            user_domain_name: &self.user_domain_name,
            project_domain_name: &self.project_domain_name,
            region_name: &None,
            interface: "public",
            cafile: &self.cafile,
        };
        let mut auth = user
            .auth_options()?
            .ok_or_else(|| format!("[keystone_authtoken] auth_url is needed {NEEDED_FOR}"))?;
        auth.connect_timeout = secs("http_connect_timeout", self.http_connect_timeout)?;
        auth.request_timeout = secs("http_request_timeout", self.http_request_timeout)?;
        auth.max_retries = self.http_request_max_retries;
        Ok(accel_api::KeystoneOptions {
            auth,
            www_authenticate_uri: self.www_authenticate_uri.clone(),
            token_cache_time: secs("token_cache_time", self.token_cache_time)?,
            service_token_roles: self.service_token_roles.clone(),
            service_token_roles_required: self.service_token_roles_required,
        })
    }
}

/// Declares a section that holds a keystoneauth service user (`auth_url`, `username`,
/// `password`, `project_name`, `user_domain_name`, `project_domain_name`,
/// `region_name`, `interface`, `endpoint_override`, `cafile`: the options Cyborg's
/// sections of the same names have) beside its own options, each with its default, and
/// its [`ServiceUser`]. One struct per section, not a shared struct under
/// `#[serde(flatten)]`: serde's `deny_unknown_fields` does not work through `flatten`,
/// and a misspelt option must be refused.
macro_rules! service_user_section {
    (
        $(#[$doc:meta])*
        pub struct $name:ident {
            $( $(#[$fdoc:meta])* pub $field:ident : $ty:ty = $default:expr, )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            /// Keystone's URL; unset: the section is off.
            pub auth_url: Option<String>,
            /// The service user.
            pub username: Option<String>,
            /// Its password.
            pub password: Option<String>,
            /// Its project.
            pub project_name: Option<String>,
            /// The user's domain.
            pub user_domain_name: String,
            /// The project's domain.
            pub project_domain_name: String,
            /// The region of the service's catalog endpoint.
            pub region_name: Option<String>,
            /// The catalog interface: public, internal or admin.
            pub interface: String,
            /// The service's URL, instead of the catalog's.
            pub endpoint_override: Option<String>,
            /// CA certificates (PEM) for https.
            pub cafile: Option<PathBuf>,
            $( $(#[$fdoc])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                let d = accel_conductor::keystone::AuthOptions::new("", "", "", "");
                $name {
                    auth_url: None,
                    username: None,
                    password: None,
                    project_name: None,
                    user_domain_name: d.user_domain_name,
                    project_domain_name: d.project_domain_name,
                    region_name: None,
                    interface: d.interface,
                    endpoint_override: None,
                    cafile: None,
                    $( $field: $default, )*
                }
            }
        }

        impl $name {
            /// The section's service user; `needed_for` says when its credentials are
            /// needed, as a refusal names them.
            fn service_user(
                &self,
                section: &'static str,
                needed_for: &'static str,
            ) -> ServiceUser<'_> {
                ServiceUser {
                    section,
                    needed_for,
                    auth_url: &self.auth_url,
                    username: &self.username,
                    password: &self.password,
                    project_name: &self.project_name,
                    user_domain_name: &self.user_domain_name,
                    project_domain_name: &self.project_domain_name,
                    region_name: &self.region_name,
                    interface: &self.interface,
                    cafile: &self.cafile,
                }
            }
        }
    };
}

service_user_section! {
    /// `[placement]`: the service user the conductor keeps resource providers in
    /// Placement with (keystoneauth's option names, as Cyborg's `[placement]`; the user
    /// needs Placement's admin or service role), and how often. Off unless `auth_url`
    /// is set.
    pub struct Placement {
        /// Seconds between two passes of the reconciler (each reads the hosts the
        /// database marked as changed).
        pub sync_interval: u64 = 10,
        /// Seconds between two passes that read the whole inventory (the safety net for
        /// a change no trigger marked); at least `sync_interval`.
        pub full_sync_interval: u64 = 600,
    }
}

impl Placement {
    /// The client and the reconciler's schedule, or `None` when Placement is off.
    pub fn client(
        &self,
    ) -> Result<
        Option<(
            accel_conductor::placement::Placement,
            accel_conductor::placement::Schedule,
        )>,
        String,
    > {
        let user = self.service_user("placement", "with auth_url");
        let Some(session) = user.session()? else {
            return Ok(None);
        };
        if self.sync_interval == 0 {
            return Err("[placement] sync_interval must be at least 1 (seconds)".into());
        }
        if self.full_sync_interval < self.sync_interval {
            return Err(format!(
                "[placement] full_sync_interval ({}) must be at least sync_interval ({}) (seconds)",
                self.full_sync_interval, self.sync_interval
            ));
        }
        Ok(Some((
            accel_conductor::placement::Placement::new(session, self.endpoint_override.clone()),
            accel_conductor::placement::Schedule {
                interval: std::time::Duration::from_secs(self.sync_interval),
                full_interval: std::time::Duration::from_secs(self.full_sync_interval),
            },
        )))
    }
}

service_user_section! {
    /// `[nova]`: the service user the conductor tells Nova with when accelerator
    /// requests are bound (`accelerator-request-bound` events; keystoneauth's option
    /// names, as Cyborg's `[nova]`; the user needs the role Nova's external events
    /// policy asks, admin or service), and how hard it retries. Off unless `auth_url`
    /// is set.
    pub struct Nova {
        /// Attempts to send one instance's events (the first included).
        pub retry_attempts: u32 = NovaOptions::default().attempts,
        /// Seconds before the first retry, doubled before each next one.
        pub retry_backoff: f64 = NovaOptions::default().backoff.as_secs_f64(),
        /// Seconds after the first attempt past which no retry starts.
        pub retry_deadline: u64 = NovaOptions::default().deadline.as_secs(),
        /// Instances' events waiting to be sent; beyond, the oldest are dropped.
        pub queue_size: usize = NovaOptions::default().queue_size,
    }
}

impl Nova {
    /// The session and the notifier's options, or `None` when Nova is not told.
    pub fn options(
        &self,
    ) -> Result<
        Option<(
            accel_conductor::keystone::Session,
            accel_conductor::nova::NovaOptions,
        )>,
        String,
    > {
        if self.auth_url.as_deref().is_none_or(str::is_empty) {
            return Ok(None);
        }
        if self.retry_attempts == 0 {
            return Err("[nova] retry_attempts must be at least 1".into());
        }
        if self.queue_size == 0 {
            return Err("[nova] queue_size must be at least 1".into());
        }
        let backoff = std::time::Duration::try_from_secs_f64(self.retry_backoff)
            .map_err(|_| "[nova] retry_backoff: a number of seconds, 0 or more".to_owned())?;
        let user = self.service_user("nova", "with auth_url");
        let Some(session) = user.session()? else {
            return Ok(None);
        };
        Ok(Some((
            session,
            accel_conductor::nova::NovaOptions {
                endpoint_override: self.endpoint_override.clone(),
                attempts: self.retry_attempts,
                backoff,
                deadline: std::time::Duration::from_secs(self.retry_deadline),
                queue_size: self.queue_size,
                ..accel_conductor::nova::NovaOptions::default()
            },
        )))
    }
}

/// The keystoneauth options of a service user, as `[keystone_authtoken]` and the
/// [`service_user_section!`] sections have them.
struct ServiceUser<'a> {
    section: &'static str,
    /// Why the user, password and project are needed, as the refusal says it.
    needed_for: &'static str,
    auth_url: &'a Option<String>,
    username: &'a Option<String>,
    password: &'a Option<String>,
    project_name: &'a Option<String>,
    user_domain_name: &'a str,
    project_domain_name: &'a str,
    region_name: &'a Option<String>,
    interface: &'a str,
    cafile: &'a Option<PathBuf>,
}

impl ServiceUser<'_> {
    /// The session, `None` without `auth_url` ([`ServiceUser::auth_options`]).
    fn session(&self) -> Result<Option<accel_conductor::keystone::Session>, String> {
        let Some(options) = self.auth_options()? else {
            return Ok(None);
        };
        accel_conductor::keystone::Session::new(options)
            .map(Some)
            .map_err(|e| format!("[{}] {e}", self.section))
    }

    /// The options, `None` without `auth_url`; a missing user, password or project is
    /// refused, naming the section's option.
    fn auth_options(&self) -> Result<Option<accel_conductor::keystone::AuthOptions>, String> {
        let Some(auth_url) = self.auth_url.as_deref().filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        let need = |name: &str, v: &Option<String>| {
            v.clone()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("[{}] {name} is needed {}", self.section, self.needed_for))
        };
        let mut options = accel_conductor::keystone::AuthOptions::new(
            auth_url,
            &need("username", self.username)?,
            &need("password", self.password)?,
            &need("project_name", self.project_name)?,
        );
        options.user_domain_name = self.user_domain_name.to_owned();
        options.project_domain_name = self.project_domain_name.to_owned();
        options.region_name = self.region_name.clone();
        options.interface = self.interface.to_owned();
        options.cafile = self.cafile.clone();
        Ok(Some(options))
    }
}

/// `[oslo_policy]`: the policy file (oslo.policy's YAML or JSON; its rules override
/// Cyborg's defaults).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OsloPolicy {
    /// The file; unset: the defaults alone.
    pub policy_file: Option<PathBuf>,
}

impl Default for Api {
    fn default() -> Self {
        let limits = accel_api::Limits::default();
        let serve = accel_api::ServeOptions::default();
        Api {
            listen: accel_api::DEFAULT_LISTEN.into(),
            tls_cert_file: None,
            tls_key_file: None,
            public_endpoint: None,
            header_read_timeout: serve.header_read_timeout.as_secs(),
            body_read_timeout: serve.body_read_timeout.as_secs(),
            request_timeout: serve.request_timeout.as_secs(),
            max_connections: serve.max_connections,
            max_page_size: limits.max_page_size,
            max_groups_per_profile: limits.max_groups_per_profile,
            max_arqs_per_request: limits.max_arqs_per_request,
            auth_strategy: AuthStrategyName::default(),
            noauth_allow_remote: false,
        }
    }
}

impl Api {
    /// The API's limits and server options; a zero or a lone TLS file is refused with
    /// the option named.
    pub fn options(&self) -> Result<(accel_api::Limits, accel_api::ServeOptions), String> {
        let positive = |name: &str, v: u64| {
            if v == 0 {
                Err(format!("[api] {name} must be at least 1"))
            } else {
                Ok(v)
            }
        };
        let secs = |name: &str, v: u64| positive(name, v).map(std::time::Duration::from_secs);
        let tls = match (&self.tls_cert_file, &self.tls_key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                Some(accel_api::server::tls_config(cert, key).map_err(|e| e.to_string())?)
            }
            _ => {
                return Err(
                    "[api] tls_cert_file and tls_key_file go together: set both or neither".into(),
                )
            }
        };
        let limits = accel_api::Limits {
            max_page_size: positive("max_page_size", u64::from(self.max_page_size))? as u32,
            max_groups_per_profile: positive(
                "max_groups_per_profile",
                self.max_groups_per_profile as u64,
            )? as usize,
            max_arqs_per_request: positive(
                "max_arqs_per_request",
                self.max_arqs_per_request as u64,
            )? as usize,
        };
        let public_endpoint = self
            .public_endpoint
            .as_deref()
            .map(|u| {
                accel_api::PublicEndpoint::parse(u)
                    .map_err(|e| format!("[api] public_endpoint {e}"))
            })
            .transpose()?;
        let serve = accel_api::ServeOptions {
            public_endpoint,
            header_read_timeout: secs("header_read_timeout", self.header_read_timeout)?,
            body_read_timeout: secs("body_read_timeout", self.body_read_timeout)?,
            request_timeout: secs("request_timeout", self.request_timeout)?,
            max_connections: positive("max_connections", self.max_connections as u64)? as usize,
            tls,
        };
        Ok((limits, serve))
    }
}

/// `[agent]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Agent {
    /// This host's name (default: the machine's).
    pub host: Option<String>,
    /// Where sysfs is.
    pub sysfs_root: PathBuf,
    /// Seconds between inventory reports (and heartbeats).
    pub report_interval: u64,
    /// Where the agent keeps its component-version record (`agent-HOST.version`).
    pub state_dir: PathBuf,
    /// Seconds between rediscoveries (reported when changed) and scans for this host's
    /// NVMe handles left in `cleaning`.
    pub scan_interval: u64,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            host: None,
            sysfs_root: PathBuf::from("/sys"),
            report_interval: 60,
            state_dir: PathBuf::from("/var/lib/accel"),
            scan_interval: 10,
        }
    }
}

/// `[pci]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pci {
    /// The PCI managed mode guests get: `true` (libvirt detaches and reattaches the
    /// device) or `false` (VFIO variant drivers: the operator binds the driver; needs
    /// `[upgrade_levels] conductor = "1.1"` and a finalized upgrade).
    pub managed: bool,
}

impl Default for Pci {
    fn default() -> Self {
        Pci { managed: true }
    }
}

/// `[nvme]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Nvme {
    /// The command that erases a released NVMe namespace, run with its device path as
    /// the last argument; exit 0 means clean. Unset: the built-in nvme-cli sanitize or
    /// secure-erase format, checked against the controller's capabilities.
    pub cleanup_command: Option<String>,
    /// Seconds a cleanup may take; a longer one is killed and the device goes to `error`.
    pub cleanup_timeout: u64,
}

impl Default for Nvme {
    fn default() -> Self {
        Nvme {
            cleanup_command: None,
            cleanup_timeout: 3600,
        }
    }
}

/// `[fpga]`: how `accel agent` programs an FPGA with a bitstream from Glance.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Fpga {
    /// The tool that writes a bitstream to an FPGA, run with the card's PCI address and
    /// the downloaded bitstream file as its last two arguments; exit 0 means
    /// programmed. Unset: programming is refused as not supported.
    pub program_command: Option<String>,
    /// Seconds the tool may take; a longer run is killed and counts as failed.
    pub program_timeout: u64,
    /// The largest bitstream downloaded, in bytes.
    pub max_bitstream_bytes: u64,
}

impl Default for Fpga {
    fn default() -> Self {
        Fpga {
            program_command: None,
            program_timeout: 600,
            max_bitstream_bytes: 1 << 30,
        }
    }
}

service_user_section! {
    /// `[glance]`: the service user `accel agent` downloads bitstreams from Glance with
    /// (keystoneauth's option names, as Cyborg's `[glance]`; the user must be able to
    /// read the bitstream images), and `accel conductor` reads their metadata with for
    /// FPGAs programmed at bind. Needed with `[fpga] program_command`.
    pub struct Glance {}
}

impl AccelConfig {
    /// The conductor's Glance (`[glance]`), for FPGAs programmed at bind; `None`
    /// without `[glance] auth_url`. Incomplete credentials are refused, naming the
    /// option.
    pub fn conductor_glance(&self) -> Result<Option<accel_conductor::fpga::Glance>, String> {
        let g = &self.glance;
        if g.auth_url.as_deref().is_none_or(str::is_empty) {
            return Ok(None);
        }
        let user = g.service_user("glance", "with auth_url");
        Ok(user.session()?.map(|session| {
            accel_conductor::fpga::Glance::new(session, g.endpoint_override.clone())
        }))
    }

    /// The agent's FPGA programmer from `[fpga]` and `[glance]`, working in `work_dir`;
    /// `None` without `[fpga] program_command`. A program command without `[glance]
    /// auth_url` (or with incomplete credentials) is refused, naming the option.
    pub fn fpga_programmer(
        &self,
        work_dir: PathBuf,
    ) -> Result<Option<accel_agent::fpga::Programmer>, String> {
        let command: Vec<String> = self
            .fpga
            .program_command
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if command.is_empty() {
            return Ok(None);
        }
        let g = &self.glance;
        let user = g.service_user("glance", "with [fpga] program_command");
        let session = user.session()?.ok_or_else(|| {
            "[glance] auth_url is needed with [fpga] program_command (bitstreams are Glance images)"
                .to_owned()
        })?;
        if self.fpga.program_timeout == 0 || self.fpga.max_bitstream_bytes == 0 {
            return Err("[fpga] program_timeout and max_bitstream_bytes must be at least 1".into());
        }
        let glance = accel_agent::fpga::Glance::new(session, g.endpoint_override.clone());
        Ok(accel_agent::fpga::Programmer::new(
            glance,
            accel_agent::fpga::FpgaOptions {
                program_command: command,
                program_timeout: std::time::Duration::from_secs(self.fpga.program_timeout),
                max_bitstream_bytes: self.fpga.max_bitstream_bytes,
                work_dir,
            },
        ))
    }
}

/// `[cyborg]`: OpenStack Cyborg's wire, which accel's agents and conductor speak by
/// default (docs/cyborg-compatibility.md, "Cyborg's wire by default").
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cyborg {
    /// Whether `accel conductor` serves Cyborg's conductor API (topic
    /// `cyborg-conductor`: Cyborg 17's `report_data` and the seed spec's object
    /// indirection, 1.1), which accel's agents and Cyborg 17's agents report on. Default
    /// true; false serves accel's own agent wire only.
    pub serve_agents: bool,
    /// Whether `accel agent` also serves Cyborg's agent API (topic `cyborg-agent`,
    /// server = the host name: mdev creation and removal) for a Cyborg 17 conductor
    /// still running during a migration.
    pub serve_conductor: bool,
    /// Whether `accel agent` speaks Cyborg's wire (default true) rather than accel's
    /// own. With `[upgrade_levels] cyborg_conductor` unset or 1.1 and above (accel's conductor),
    /// it is release N+1 on Cyborg's wire: Cyborg's `report_data` on
    /// `cyborg-conductor`, the PCI managed mode and NVMe cleanups through the seed
    /// spec's object indirection, Cyborg's agent API with `cleanup_device` served, and
    /// heartbeats on accel's upgrade API. At 1.0 (a Cyborg 17 conductor: the host's
    /// agent is replaced while Cyborg's conductor still runs) it only reports and
    /// serves Cyborg 17's agent API, and does not talk to accel's conductor at all (no
    /// heartbeat, no version record: Cyborg has neither). False: accel's own wire
    /// (`accel-conductor`, `accel-agent`, exchange `[transport] control_exchange`).
    pub report_to_cyborg: bool,
    /// The control exchange Cyborg's services use, on `[transport] url`'s broker.
    pub control_exchange: String,
}

impl Default for Cyborg {
    fn default() -> Self {
        Cyborg {
            serve_agents: true,
            serve_conductor: false,
            report_to_cyborg: true,
            control_exchange: accel_cyborg17::rpc::CONTROL_EXCHANGE.into(),
        }
    }
}

/// The whole configuration.
#[derive(Debug)]
pub struct AccelConfig {
    /// `[database]`.
    pub database: Database,
    /// `[transport]`.
    pub transport: Transport,
    /// `[conductor]`.
    pub conductor: Conductor,
    /// `[api]`.
    pub api: Api,
    /// `[agent]`.
    pub agent: Agent,
    /// `[pci]`.
    pub pci: Pci,
    /// `[nvme]`.
    pub nvme: Nvme,
    /// `[fpga]`.
    pub fpga: Fpga,
    /// `[glance]`.
    pub glance: Glance,
    /// `[cyborg]`.
    pub cyborg: Cyborg,
    /// `[keystone_authtoken]`.
    pub keystone_authtoken: KeystoneAuthtoken,
    /// `[oslo_policy]`.
    pub oslo_policy: OsloPolicy,
    /// `[placement]`.
    pub placement: Placement,
    /// `[nova]`.
    pub nova: Nova,
    /// The layered configuration (caps, origins).
    pub layers: Config,
}

/// The RPC APIs accel's clients call, with their default caps: agents call the
/// conductor at its newest (1.6: object indirection, unchanged reports by digest,
/// device maintenance, attributes, FPGA programming, a bind's project; conductors are
/// upgraded first);
/// the conductor calls agents at 1.0 until the operator raises `[upgrade_levels] agent`
/// once every agent runs release N+1 (1.1 `cleanup_device`, 1.2 `program_fpga`).
///
/// An agent on Cyborg's wire (`[cyborg] report_to_cyborg`, the default) calls Cyborg's
/// conductor API under `[upgrade_levels] cyborg_conductor`, at its newest (1.2: 1.1 the
/// seed spec, 1.2 accel's `report_unchanged`, both served by accel's conductor) by default as every conductor API is (conductors
/// are upgraded first); 1.0 when the host's agent is replaced while a Cyborg 17
/// conductor still runs (it serves only 1.0). The conductor casts Cyborg's agent
/// API 1.1 `cleanup_device` to such agents under `[upgrade_levels] cyborg_agent`, 1.0 by
/// default (a Cyborg 17 agent serves only 1.0; the agents' scan finds the device).
pub fn apis() -> [ApiCap; 4] {
    [
        ApiCap::for_api::<ConductorApi>(accel_objects::rpc::CONDUCTOR_VERSION),
        ApiCap::for_api::<AgentApi>(Version::new(1, 0)),
        ApiCap::new(
            accel_agent::service::CYBORG_CONDUCTOR_CAP,
            <accel_objects::cyborg::ConductorApi as verso_rpc::RpcApi>::VERSION,
            <accel_objects::cyborg::ConductorApi as verso_rpc::RpcApi>::VERSION,
        ),
        ApiCap::new(
            accel_conductor::runtime::CYBORG_AGENT_CAP,
            <accel_objects::cyborg::AgentApi as verso_rpc::RpcApi>::VERSION,
            Version::new(1, 0),
        ),
    ]
}

/// Loads the configuration from `file`, the environment and `overrides`.
pub fn load(file: Option<&PathBuf>, overrides: &[String]) -> Result<AccelConfig, ConfigError> {
    let mut loader = ConfigLoader::new().env_prefix("ACCEL");
    for api in apis() {
        loader = loader.api(api);
    }
    let layers = loader
        .section("database")
        .section("transport")
        .section("conductor")
        .section("api")
        .section("agent")
        .section("pci")
        .section("nvme")
        .section("fpga")
        .section("glance")
        .section("cyborg")
        .section("keystone_authtoken")
        .section("oslo_policy")
        .section("placement")
        .section("nova")
        .maybe_file(file)
        .overrides(overrides.iter().cloned())
        .load()?;
    Ok(AccelConfig {
        database: layers.section("database")?,
        transport: layers.section("transport")?,
        conductor: layers.section("conductor")?,
        api: layers.section("api")?,
        agent: layers.section("agent")?,
        pci: layers.section("pci")?,
        nvme: layers.section("nvme")?,
        fpga: layers.section("fpga")?,
        glance: layers.section("glance")?,
        cyborg: layers.section("cyborg")?,
        keystone_authtoken: layers.section("keystone_authtoken")?,
        oslo_policy: layers.section("oslo_policy")?,
        placement: layers.section("placement")?,
        nova: layers.section("nova")?,
        layers,
    })
}

impl AccelConfig {
    /// The API's authentication and policy: `[api] auth_strategy` (when the
    /// configuration does not set it, `default`), `[keystone_authtoken]`,
    /// `[oslo_policy]`. noauth on an address other than loopback is refused unless
    /// `[api] noauth_allow_remote`.
    pub fn authenticator(
        &self,
        default: AuthStrategyName,
    ) -> Result<accel_api::Authenticator, String> {
        let strategy = match self.layers.origin("api.auth_strategy") {
            Some(verso_rpc::config::Origin::Default) | None => default,
            Some(_) => self.api.auth_strategy,
        };
        let policy = match &self.oslo_policy.policy_file {
            Some(path) => {
                accel_api::Policy::from_file(path).map_err(|e| format!("[oslo_policy] {e}"))?
            }
            None => accel_api::Policy::default(),
        };
        let strategy = match strategy {
            AuthStrategyName::Keystone => {
                accel_api::AuthStrategy::Keystone(Box::new(self.keystone_authtoken.options()?))
            }
            AuthStrategyName::Noauth => {
                if !self.api.noauth_allow_remote && !is_loopback(&self.api.listen) {
                    return Err(format!(
                        "[api] auth_strategy = \"noauth\" lets anyone who reaches {} act as an administrator: \
                         listen on loopback, use keystone, or set [api] noauth_allow_remote = true",
                        self.api.listen
                    ));
                }
                accel_api::AuthStrategy::Noauth
            }
        };
        accel_api::Authenticator::new(strategy, policy).map_err(|e| e.to_string())
    }
}

/// Whether a listen address is loopback only (`127.0.0.1:6666`, `[::1]:6666`,
/// `localhost:6666`).
fn is_loopback(listen: &str) -> bool {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(addr) => addr.ip().is_loopback(),
        Err(_) => listen
            .rsplit_once(':')
            .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost")),
    }
}
