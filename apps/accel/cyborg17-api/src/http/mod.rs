//! Cyborg's v2 HTTP/JSON API as release N serves it: routes and their checks,
//! microversions 2.0 to 2.3, Keystone tokens, Cyborg 17's policy, the views, and the
//! accept loop, over [`AccelService`].
//!
//! Release N's frozen copy of what accel's N+1 crate `accel-api` had (its HTTP layer,
//! without what only N+1 uses there: its database and conductor services, TLS, policy
//! files, routers serving fewer microversions, recorded bitstreams), so release N's
//! answers do not change when N+1's API does. `tests/differential.rs` holds them to
//! Cyborg 17's own API.
//!
//! - [`microversion`]: the `OpenStack-API-Version: accelerator 2.x` header (2.1 is
//!   Cyborg's request `project_id`, 2.2 its profile lookup by name, 2.3 the device
//!   `status` field);
//! - the handlers (private) parse and check a request, call one operation of
//!   [`AccelService`], and shape the answer for the negotiated microversion;
//! - [`auth`] decides who calls (Keystone tokens, or noauth for the all-in-one and the
//!   demo) and [`policy`] what the caller may do (Cyborg 17's default rules);
//! - [`error`]: the JSON error form and the status of each [`ErrorKind`];
//! - [`server`]: the accept loop, with a bound on every edge ([`ServeOptions`]).
//!
//! Text a client sends (names, hosts, UUIDs, descriptions, group keys and values, query
//! values) is at most [`MAX_TEXT`] bytes, an instance UUID is a UUID, and a message
//! repeats at most 64 characters of it ([`shown`]).

pub mod auth;
pub mod error;
pub mod groups;
pub mod microversion;
pub mod policy;
mod routes;
pub mod server;
pub mod service;
mod views;

pub use auth::{AuthStrategy, Authenticator, Caller, KeystoneOptions};
pub use error::{ApiError, ErrorKind, ServiceError};
pub use microversion::ApiVersion;
pub use policy::Policy;
pub use server::ServeOptions;
pub use service::{AccelService, BindProject, Binding, ListQuery, NewProfile};

use std::sync::Arc;

/// The longest hostname, name, description, project id or other free text a request
/// may carry, in bytes.
pub const MAX_TEXT: usize = 255;

/// At most this many characters of a client's text go into a message.
const SHOWN: usize = 64;

/// `text`, cut to `SHOWN` characters with `...` when longer: messages echo what a
/// client sent, never all of it.
pub fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

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

/// The API's router over a shared service with these limits, its callers
/// authenticated and held to a policy by `auth`.
pub fn router_with(
    service: Arc<dyn AccelService>,
    limits: Limits,
    auth: Authenticator,
) -> axum::Router {
    routes::build(service, microversion::Supported::ALL, limits, auth)
}
