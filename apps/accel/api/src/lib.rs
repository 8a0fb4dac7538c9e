//! accel's API service: OpenStack Cyborg's v2 HTTP/JSON API (devices, deployables,
//! device profiles, accelerator requests) with microversions, mounted by the `accel`
//! binary through [`router`] or [`serve`].
//!
//! # Shape
//!
//! - [`microversion`]: the `OpenStack-API-Version: accelerator 2.x` header; the supported
//!   range (2.0 to 2.3) is declared there once: 2.1 is Cyborg's request `project_id`,
//!   2.2 its profile lookup by name, 2.3 the device `status` field.
//! - the handlers (private) parse and check a request, call one operation of
//!   [`AccelService`], and shape the answer for the negotiated microversion;
//! - [`AccelService`]: the operations, in plain data and [`ServiceError`]; no database
//!   types, so an implementation may be the database or an RPC client;
//! - [`ConductorService`]: what a deployment runs: reads from the database, writes
//!   through the conductor's RPC API;
//! - [`DbService`]: the implementation over the conductor's database alone
//!   ([`accel_conductor::Db`]), for tools and tests without a conductor;
//! - [`error`]: the JSON error form and the status of each [`ErrorKind`].
//!
//! # Reads from the database, writes through the conductor
//!
//! The API reads the database directly: reads are most of an API's traffic, and reading
//! from the database lets them scale with the number of API replicas without loading the
//! conductor, which stays the one writer that agents coordinate with. Writes go through
//! the conductor's RPC API ([`ConductorService`]): a release is more than a row update
//! (an NVMe device goes through secure cleanup on its agent, which the conductor starts
//! when the deployment is finalized and the agent API cap allows it).
//!
//! # Binding
//!
//! Binds and unbinds are Nova's, as in Cyborg 17: without a service token beside the
//! user's ([`Caller::require_service`](auth::Caller::require_service)) they are 403.
//! A `PATCH /v2/accelerator_requests` bind is done before the answer: 202 when the
//! request is `Bound`; 409 `NoFreeHandle` when no free device of the profile group's
//! type is on the host, and the request is then left `BindFailed` (visible with `GET`;
//! it can be unbound and bound again, or deleted). A bind of a request in a state that
//! cannot bind (already bound to another instance, say) is 409 `InvalidTransition`.
//!
//! A patch naming several requests is checked whole first (a malformed one applies
//! nothing), then applied request by request in UUID order; the first failure is the
//! answer, and the requests before it stay bound (or unbound). `GET` shows where each is.
//!
//! # Callers, policy and projects
//!
//! [`auth`] decides who calls: Keystone tokens (`[api] auth_strategy = "keystone"`,
//! validated against Keystone and cached) or no authentication (`"noauth"`: everyone is
//! an administrator, for the all-in-one and the demo). [`policy`] decides what the
//! caller may do: every handler names its Cyborg rule (`cyborg:arq:create`, ...),
//! checked against Cyborg's defaults or the operator's policy file; 403 otherwise.
//!
//! Accelerator requests belong to the project of the token that created them (noauth:
//! the `X-Project-Id` header's). A caller sees, binds, unbinds and deletes only its own
//! project's requests, unless the policy lets it see every project's
//! (`accel:arq:all_projects`: administrators and Nova's service role); another
//! project's request is 404 to it, as if it did not exist.
//!
//! # Addresses
//!
//! The caller binds the listener: the `accel` binary's default is loopback,
//! [`DEFAULT_LISTEN`].
//!
//! # Limits
//!
//! Every edge is bounded. [`Limits`] (work per request and page sizes) is checked by
//! the handlers before any work; [`ServeOptions`] (header, body and request timeouts, a
//! connection limit, TLS) by [`server::serve`]'s accept loop. Text a client sends (names,
//! hosts, UUIDs, descriptions, group keys and values, query values) is at most 255
//! bytes, an instance UUID is a UUID, and a message repeats at most 64 characters of it.
//! A database outage is 503 (retry later), not 500.

pub mod auth;
pub mod conductor_service;
pub mod db_service;
pub mod error;
pub mod microversion;
pub mod policy;
mod routes;
pub mod server;
pub mod service;
mod views;

pub use auth::{AuthStrategy, Authenticator, Caller, KeystoneOptions};
pub use conductor_service::ConductorService;
pub use db_service::DbService;
pub use error::{ApiError, ErrorKind, ServiceError};
pub use microversion::ApiVersion;
pub use policy::Policy;
pub use server::ServeOptions;
pub use service::{AccelService, BindProject, Binding, ListQuery, NewProfile};

use std::future::Future;
use std::sync::Arc;

/// Where the `accel` binary listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6666";

/// The URL the API's links are built on, as `[api] public_endpoint` gives it:
/// `http(s)://host[:port][/path]`, without a trailing slash, query or fragment. Links
/// are `<endpoint>/v2/...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicEndpoint(String);

impl PublicEndpoint {
    /// Checks and keeps `url`.
    pub fn parse(url: &str) -> Result<PublicEndpoint, String> {
        let trimmed = url.trim_end_matches('/');
        let rest = trimmed
            .strip_prefix("https://")
            .or_else(|| trimmed.strip_prefix("http://"));
        match rest {
            Some(r)
                if !r.is_empty()
                    && !r.starts_with('/')
                    && r.bytes().all(|b| b.is_ascii_graphic())
                    && !r.contains(['?', '#', '@']) =>
            {
                Ok(PublicEndpoint(trimmed.to_owned()))
            }
            _ => Err(format!(
                "{url:?}: an http:// or https:// URL with a host, no query, fragment or user"
            )),
        }
    }

    /// The URL, without a trailing slash.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The work one request may ask for, checked before any is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most rows one page of a list has: the default and the largest `limit` of
    /// every list (devices, deployables, device profiles, accelerator requests).
    pub max_page_size: u32,
    /// The most groups a device profile may have.
    pub max_groups_per_profile: usize,
    /// The most accelerator requests one `POST /v2/accelerator_requests` creates (one
    /// per group of the profile unless a group is named).
    pub max_arqs_per_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_page_size: 1000,
            max_groups_per_profile: 64,
            max_arqs_per_request: 64,
        }
    }
}

/// The API's router over a service, to mount or serve, without authentication.
pub fn router(service: impl AccelService) -> axum::Router {
    router_with(
        Arc::new(service),
        Limits::default(),
        Authenticator::noauth(),
    )
}

/// The API's router over a shared service, without authentication.
pub fn router_shared(service: Arc<dyn AccelService>) -> axum::Router {
    router_with(service, Limits::default(), Authenticator::noauth())
}

/// The API's router over a shared service with these limits, its callers
/// authenticated and held to a policy by `auth`.
pub fn router_with(
    service: Arc<dyn AccelService>,
    limits: Limits,
    auth: Authenticator,
) -> axum::Router {
    routes::build(service, microversion::Supported::ALL, limits, auth)
}

/// The API's router serving microversions up to `max` only (an older release's API:
/// accel release N serves 2.0), without authentication; `max` must be one this build
/// has.
pub fn router_up_to(
    service: Arc<dyn AccelService>,
    max: ApiVersion,
) -> Result<axum::Router, microversion::VersionError> {
    Ok(routes::build(
        service,
        microversion::Supported::up_to(max)?,
        Limits::default(),
        Authenticator::noauth(),
    ))
}

/// Serves the API on `listener` with the default limits and timeouts until the process
/// ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: impl AccelService,
) -> std::io::Result<()> {
    serve_with_shutdown(listener, service, std::future::pending()).await
}

/// Serves the API on `listener` with the default limits and timeouts until `shutdown`
/// completes, then finishes the requests under way.
pub async fn serve_with_shutdown(
    listener: tokio::net::TcpListener,
    service: impl AccelService,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    server::serve(listener, router(service), ServeOptions::default(), shutdown).await
}
