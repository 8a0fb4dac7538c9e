//! Release N's frozen copy of what accel's N+1 crate `accel-keystone` had: a service
//! user's Keystone session (a token fetched with a password, renewed a minute before it
//! expires or when a service answers 401, and the endpoints of its catalog), and
//! [`oslo`], Cyborg's `cyborg.conf` read. Copied, not shared, so release N does not
//! change when N+1's Keystone client does (feature `keystone`: the three services').
//!
//! The options are keystoneauth's names (`auth_url`, `username`, `password`,
//! `project_name`, `user_domain_name`, `project_domain_name`, `region_name`,
//! `interface`), as a `[placement]`, `[nova]`, `[glance]` or `[keystone_authtoken]`
//! section of Cyborg's configuration has them.

pub mod oslo;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An OpenStack service as a service user calls it: the session, and the service's
/// endpoint, from the session's catalog by service type or at the operator's
/// `endpoint_override`.
#[derive(Clone, Debug)]
pub struct Service {
    session: Session,
    service_type: &'static str,
    endpoint_override: Option<String>,
}

impl Service {
    /// `service_type` (`image`, ...) through `session`, or at `endpoint_override`.
    pub fn new(
        session: Session,
        service_type: &'static str,
        endpoint_override: Option<String>,
    ) -> Service {
        Service {
            session,
            service_type,
            endpoint_override: endpoint_override.map(|u| u.trim_end_matches('/').to_owned()),
        }
    }

    /// The session its calls go through.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Its endpoint's URL, without a trailing slash.
    pub async fn endpoint(&self) -> Result<String, SessionError> {
        match &self.endpoint_override {
            Some(url) => Ok(url.clone()),
            None => self.session.endpoint(self.service_type).await,
        }
    }
}

/// How to authenticate to Keystone as a service user (the password plugin).
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// Keystone's URL (`http://keystone:5000` or `.../v3`).
    pub auth_url: String,
    /// The service user.
    pub username: String,
    /// Its password.
    pub password: String,
    /// The project its token is scoped to.
    pub project_name: String,
    /// The user's domain, by name.
    pub user_domain_name: String,
    /// The project's domain, by name.
    pub project_domain_name: String,
    /// The region whose endpoints are used; unset: the first of each service.
    pub region_name: Option<String>,
    /// Which endpoints: `public`, `internal` or `admin`.
    pub interface: String,
    /// CA certificates (PEM) for https; unset: the system's.
    pub cafile: Option<PathBuf>,
    /// Time to connect.
    pub connect_timeout: Duration,
    /// Time for one request in all.
    pub request_timeout: Duration,
    /// Retries of a request that could not connect or timed out.
    pub max_retries: u32,
}

impl AuthOptions {
    /// A service user's options, with keystoneauth's defaults for the rest.
    pub fn new(auth_url: &str, username: &str, password: &str, project_name: &str) -> Self {
        AuthOptions {
            auth_url: auth_url.to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
            project_name: project_name.to_owned(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
            region_name: None,
            interface: "public".into(),
            cafile: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_retries: 3,
        }
    }
}

/// Why a call through the session failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The options are incomplete or wrong.
    #[error("{0}")]
    Options(String),
    /// A service could not be reached (after the retries).
    #[error("{url} cannot be reached: {why}")]
    Unreachable {
        /// Where.
        url: String,
        /// Why.
        why: String,
    },
    /// Keystone refused the service user (wrong password, user or project).
    #[error("Keystone at {url} refused user {user:?} (HTTP {status}): check its options")]
    Refused {
        /// Keystone's URL.
        url: String,
        /// The user.
        user: String,
        /// Keystone's status.
        status: u16,
    },
    /// The catalog has no endpoint of that service type and interface.
    #[error("the service catalog has no {interface} endpoint of type {service_type}{}", region.as_ref().map(|r| format!(" in region {r}")).unwrap_or_default())]
    NoEndpoint {
        /// The service type.
        service_type: String,
        /// The interface.
        interface: String,
        /// The region asked for.
        region: Option<String>,
    },
    /// An answer that is not what the API documents.
    #[error("{0}")]
    Malformed(String),
}

/// A service user's token and catalog, shared by every call (cheap to clone).
#[derive(Clone)]
pub struct Session {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    /// Keystone's base URL, without `/v3`.
    base: String,
    options: AuthOptions,
    http: reqwest::Client,
    held: tokio::sync::Mutex<Option<Held>>,
}

struct Held {
    token: String,
    catalog: Value,
    refresh_at: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("auth_url", &self.inner.base)
            .field("username", &self.inner.options.username)
            .finish()
    }
}

impl Session {
    /// A session with `options` (no request is made until the first call).
    pub fn new(options: AuthOptions) -> Result<Session, SessionError> {
        let trimmed = options.auth_url.trim_end_matches('/');
        let base = trimmed.strip_suffix("/v3").unwrap_or(trimmed).to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SessionError::Options(format!(
                "auth_url {:?}: an http:// or https:// URL of Keystone",
                options.auth_url
            )));
        }
        for (name, value) in [
            ("username", &options.username),
            ("password", &options.password),
            ("project_name", &options.project_name),
        ] {
            if value.is_empty() {
                return Err(SessionError::Options(format!("{name} is needed")));
            }
        }
        if !matches!(options.interface.as_str(), "public" | "internal" | "admin") {
            return Err(SessionError::Options(format!(
                "interface {:?}: public, internal or admin",
                options.interface
            )));
        }
        let http = client(&options)?;
        Ok(Session {
            inner: std::sync::Arc::new(Inner {
                base,
                options,
                http,
                held: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// Keystone's base URL (without `/v3`).
    pub fn keystone_url(&self) -> &str {
        &self.inner.base
    }

    /// The HTTP client (with the options' timeouts and CA).
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// The service user's token; a new one when `renew`, or a minute before it expires.
    pub async fn token(&self, renew: bool) -> Result<String, SessionError> {
        let mut held = self.inner.held.lock().await;
        if let Some(h) = held.as_ref() {
            if !renew && h.refresh_at > Instant::now() {
                return Ok(h.token.clone());
            }
        }
        let fresh = self.authenticate().await?;
        let token = fresh.token.clone();
        *held = Some(fresh);
        Ok(token)
    }

    /// The URL of `service_type`'s endpoint in the token's catalog (the options'
    /// interface and region), without a trailing slash.
    pub async fn endpoint(&self, service_type: &str) -> Result<String, SessionError> {
        self.token(false).await?;
        let held = self.inner.held.lock().await;
        let catalog = held.as_ref().map(|h| &h.catalog).unwrap_or(&Value::Null);
        let o = &self.inner.options;
        catalog
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["type"] == service_type)
            .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
            .find(|e| {
                e["interface"] == o.interface.as_str()
                    && o.region_name
                        .as_deref()
                        .is_none_or(|r| e["region_id"] == r || e["region"] == r)
            })
            .and_then(|e| e["url"].as_str())
            .map(|u| u.trim_end_matches('/').to_owned())
            .ok_or_else(|| SessionError::NoEndpoint {
                service_type: service_type.to_owned(),
                interface: o.interface.clone(),
                region: o.region_name.clone(),
            })
    }

    /// Sends `request(token)` with the service user's token, retried when it could not
    /// connect or timed out; once more with a new token when the service answers 401.
    pub async fn send(
        &self,
        request: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SessionError> {
        let token = self.token(false).await?;
        let response = self.retried(|| request(&token)).await?;
        if response.status().as_u16() != 401 {
            return Ok(response);
        }
        let token = self.token(true).await?;
        self.retried(|| request(&token)).await
    }

    /// One request, retried (with a short backoff) when it could not connect or timed
    /// out.
    pub async fn retried(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SessionError> {
        let mut attempt = 0;
        loop {
            let builder = request();
            let url = builder
                .try_clone()
                .and_then(|b| b.build().ok())
                .map(|r| r.url().to_string())
                .unwrap_or_default();
            match builder.send().await {
                Ok(r) => return Ok(r),
                Err(e)
                    if (e.is_connect() || e.is_timeout())
                        && attempt < self.inner.options.max_retries =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                }
                Err(e) => {
                    return Err(SessionError::Unreachable {
                        url,
                        why: e.to_string(),
                    })
                }
            }
        }
    }

    /// `POST /v3/auth/tokens` with the password, scoped to the project.
    async fn authenticate(&self) -> Result<Held, SessionError> {
        let o = &self.inner.options;
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": o.username,
                "domain": {"name": o.user_domain_name},
                "password": o.password,
            }}},
            "scope": {"project": {
                "name": o.project_name,
                "domain": {"name": o.project_domain_name},
            }},
        }});
        let url = format!("{}/v3/auth/tokens", self.inner.base);
        let response = self
            .retried(|| self.inner.http.post(&url).json(&body))
            .await?;
        let status = response.status().as_u16();
        if status != 201 {
            return Err(SessionError::Refused {
                url: self.inner.base.clone(),
                user: o.username.clone(),
                status,
            });
        }
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| SessionError::Malformed("Keystone issued no X-Subject-Token".into()))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| SessionError::Malformed(format!("Keystone's token is not JSON: {e}")))?;
        // Renewed a minute before it expires (an hour on when Keystone does not say).
        let lifetime =
            expires_in(&body["token"]["expires_at"]).unwrap_or(Duration::from_secs(3600));
        Ok(Held {
            token,
            catalog: body["token"]["catalog"].clone(),
            refresh_at: Instant::now() + lifetime.saturating_sub(Duration::from_secs(60)),
        })
    }
}

/// An HTTP client with the options' timeouts and CA file.
fn client(options: &AuthOptions) -> Result<reqwest::Client, SessionError> {
    let mut http = reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .timeout(options.request_timeout);
    if let Some(path) = &options.cafile {
        let ca_err =
            |why: String| SessionError::Options(format!("cafile {}: {why}", path.display()));
        let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
        let certs =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_err("no PEM certificate in it".into()));
        }
        for c in certs {
            http = http.add_root_certificate(c);
        }
    }
    http.build()
        .map_err(|e| SessionError::Options(format!("HTTP client: {e}")))
}

/// How long until an RFC 3339 time (Keystone's `expires_at`); `None` if unreadable.
pub fn expires_in(value: &Value) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(value.as_str()?).ok()?;
    let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(left.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let mut o = AuthOptions::new("keystone:5000", "u", "p", "service");
        assert!(
            matches!(Session::new(o.clone()), Err(SessionError::Options(m)) if m.contains("auth_url"))
        );
        o.auth_url = "http://127.0.0.1:5000/v3/".into();
        let s = Session::new(o.clone()).expect("ok");
        assert_eq!(s.keystone_url(), "http://127.0.0.1:5000");
        o.password = String::new();
        assert!(
            matches!(Session::new(o.clone()), Err(SessionError::Options(m)) if m.contains("password"))
        );
        o.password = "p".into();
        o.interface = "private".into();
        assert!(
            matches!(Session::new(o), Err(SessionError::Options(m)) if m.contains("interface"))
        );
        assert_eq!(
            expires_in(&json!("2000-01-01T00:00:00Z")),
            Some(Duration::ZERO)
        );
        assert_eq!(expires_in(&json!("soon")), None);
    }
}
