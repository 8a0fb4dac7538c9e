//! Who is calling: Keystone tokens (`[keystone_authtoken]`) or no authentication
//! (`[api] auth_strategy = noauth`), as a layer in front of every handler. Release N's
//! frozen copy of `accel_api::auth` (N+1's), on release N's own Keystone session, so who
//! may call release N does not change when N+1's authentication does.
//!
//! # Keystone
//!
//! As keystonemiddleware's `auth_token` does for Cyborg: every request except version
//! discovery (`/`, `/v2`) carries a token in `X-Auth-Token`. The layer asks Keystone
//! whether it is valid (`GET /v3/auth/tokens` with the token in `X-Subject-Token`,
//! authenticated by the API's own service user, `[keystone_authtoken]`), and keeps the
//! answer, valid or not, for `token_cache_time` (never past the token's expiry): a
//! client's next calls cost no Keystone round trip. What Keystone says about the token
//! (user, project, roles) becomes the request's [`Caller`]; headers a client sends about
//! itself (`X-Project-Id`, `X-Roles`) are ignored.
//!
//! | answer | when |
//! |---|---|
//! | 401 `Unauthorized`, with `WWW-Authenticate: Keystone uri="..."` | no token, or Keystone does not know it (invalid, expired, revoked) |
//! | 503 `ServiceUnavailable` | Keystone cannot be reached or refuses the service user: retry later |
//!
//! A service token (`X-Service-Token`, which Nova sends beside the user's) is validated
//! the same way; an invalid one is 401. Its roles are the policy's `service_roles`. If
//! it has one of `service_token_roles`, the user token may have expired (a long build
//! outlives a token: keystonemiddleware's `allow_expired`). With
//! `service_token_roles_required`, a service token without those roles is refused.
//!
//! Such a token also makes the request a *service request* ([`Caller::require_service`]),
//! which Cyborg 17 asks of what only Nova may do on a user's behalf: bind and unbind
//! (`PATCH`), delete an instance's requests (`DELETE ?instance=`) and delete a bound
//! request. A user's own token, whatever its roles, is not one: Nova sends the
//! instance owner's token with its own as `X-Service-Token`
//! (`[service_user] send_service_user_token = true`).
//!
//! # noauth
//!
//! For the all-in-one and the demo: every caller is an administrator held to no policy
//! rule (a policy file is still loaded and checked) and taken as a service request
//! (there is no token to tell Nova from anyone), seeing every project's requests,
//! and the project of the requests it creates is the `X-Project-Id` header's value when
//! there is one.

use crate::http::error::{ApiError, ErrorKind};
use crate::http::policy::{Credentials, Policy};
use accel_cyborg17::keystone::{expires_in, AuthOptions, Session, SessionError};
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How callers are authenticated.
#[derive(Clone, Debug)]
pub enum AuthStrategy {
    /// No authentication: every caller is an administrator (all-in-one, demo, tests).
    Noauth,
    /// Keystone tokens, validated with these options.
    Keystone(Box<KeystoneOptions>),
}

/// `[keystone_authtoken]`: keystonemiddleware's options of the same names.
#[derive(Clone, Debug)]
pub struct KeystoneOptions {
    /// The API's service user and how Keystone is reached (`auth_url`, `username`,
    /// `password`, `project_name`, domains, `cafile`, and keystonemiddleware's
    /// `http_connect_timeout`, `http_request_timeout`, `http_request_max_retries` as
    /// the session's timeouts and retries).
    pub auth: AuthOptions,
    /// The URL clients are told to get tokens from (`WWW-Authenticate`); unset: `auth_url`.
    pub www_authenticate_uri: Option<String>,
    /// How long a validation is kept (never past the token's expiry).
    pub token_cache_time: Duration,
    /// Roles that make a service token one (`service`).
    pub service_token_roles: Vec<String>,
    /// Refuse a service token without one of `service_token_roles`.
    pub service_token_roles_required: bool,
}

impl KeystoneOptions {
    /// The options for a service user, with keystonemiddleware's defaults for the rest.
    pub fn new(auth_url: &str, username: &str, password: &str, project_name: &str) -> Self {
        KeystoneOptions {
            auth: AuthOptions::new(auth_url, username, password, project_name),
            www_authenticate_uri: None,
            token_cache_time: Duration::from_secs(300),
            service_token_roles: vec!["service".into()],
            service_token_roles_required: false,
        }
    }
}

/// Why the authentication layer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// `[keystone_authtoken]` is incomplete or wrong.
    #[error("[keystone_authtoken] {0}")]
    Options(String),
    /// The CA file could not be read or holds no certificate.
    #[error("[keystone_authtoken] cafile {path}: {why}")]
    CaFile {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

/// The caller of one request and the policy it is held to: the extractor handlers take.
#[derive(Clone, Debug)]
pub struct Caller {
    /// What the policy checks.
    pub credentials: Credentials,
    /// `None` under noauth: no rule is checked, every project's requests are seen.
    policy: Option<Arc<Policy>>,
    /// A valid service token with one of `service_token_roles` came with the request
    /// (noauth: always).
    service_request: bool,
}

impl Caller {
    /// 403 unless the policy allows the caller `rule` (noauth: always allowed).
    pub fn may(&self, rule: &str) -> Result<(), ApiError> {
        match &self.policy {
            Some(policy) => policy.enforce(rule, &self.credentials),
            None => Ok(()),
        }
    }

    /// 403 unless a service token came with the request (see the module docs): what
    /// Cyborg 17 lets only Nova do on a user's behalf; refused with Cyborg's message.
    pub fn require_service(&self) -> Result<(), ApiError> {
        if self.service_request {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorKind::Forbidden,
            "This operation requires a service token. Use the Compute API to manage \
             instance accelerators.",
        ))
    }

    /// Whether a service token came with the request ([`Caller::require_service`]).
    pub fn is_service_request(&self) -> bool {
        self.service_request
    }

    /// Whether the caller sees and changes every project's accelerator requests
    /// (policy rule `accel:arq:all_projects`: administrators and Nova's service role;
    /// everyone under noauth), rather than only its own project's.
    pub fn sees_all_projects(&self) -> bool {
        match &self.policy {
            Some(p) => p.allows(ALL_PROJECTS, &self.credentials),
            None => true,
        }
    }

    /// The project the caller's token is scoped to (noauth: `X-Project-Id`).
    pub fn project_id(&self) -> Option<&str> {
        self.credentials.project_id.as_deref()
    }

    /// The project whose requests the caller is limited to: `None` when it sees every
    /// project's.
    pub fn project_scope(&self) -> Result<Option<&str>, ApiError> {
        if self.sees_all_projects() {
            return Ok(None);
        }
        self.project_id().map(Some).ok_or_else(|| {
            ApiError::new(
                ErrorKind::Forbidden,
                "a token scoped to a project is needed for accelerator requests",
            )
        })
    }
}

/// The rule of project isolation (see [`Caller::sees_all_projects`]).
pub const ALL_PROJECTS: &str = "accel:arq:all_projects";

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Caller, ApiError> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            // The router always has the layer; a router built without it fails closed.
            ApiError::new(ErrorKind::Unauthorized, "the request is not authenticated")
        })
    }
}

/// The layer's state: the strategy, its Keystone client and cache, the policy.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    policy: Arc<Policy>,
    keystone: Option<Keystone>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field(
                "keystone",
                &self
                    .inner
                    .keystone
                    .as_ref()
                    .map(|k| k.session.keystone_url()),
            )
            .finish()
    }
}

impl Authenticator {
    /// The layer for `strategy`, holding callers to `policy`.
    pub fn new(strategy: AuthStrategy, policy: Policy) -> Result<Authenticator, AuthError> {
        let keystone = match strategy {
            AuthStrategy::Noauth => None,
            AuthStrategy::Keystone(options) => Some(Keystone::new(*options)?),
        };
        Ok(Authenticator {
            inner: Arc::new(Inner {
                policy: Arc::new(policy),
                keystone,
            }),
        })
    }

    /// Whether tokens are checked.
    pub fn is_keystone(&self) -> bool {
        self.inner.keystone.is_some()
    }

    /// The middleware: a [`Caller`] in the request's extensions, or 401/503.
    pub async fn layer(self, mut req: Request, next: Next) -> Response {
        let path = req.uri().path();
        let public = matches!(path, "/" | "/v2" | "/v2/");
        let caller = match &self.inner.keystone {
            None => Ok(Some(noauth_caller(req.headers()))),
            Some(_) if public => Ok(None),
            Some(keystone) => keystone
                .caller(req.headers(), &self.inner.policy)
                .await
                .map(Some),
        };
        match caller {
            Ok(Some(caller)) => {
                req.extensions_mut().insert(caller);
                next.run(req).await
            }
            Ok(None) => next.run(req).await,
            Err(e) => e.into_response(),
        }
    }
}

/// noauth's caller: an administrator held to no policy, of `X-Project-Id`'s project
/// when sent.
fn noauth_caller(headers: &HeaderMap) -> Caller {
    let project = headers
        .get("x-project-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    Caller {
        credentials: Credentials {
            roles: vec!["admin".into(), "member".into(), "reader".into()],
            project_id: project,
            is_admin: true,
            ..Credentials::default()
        },
        policy: None,
        service_request: true,
    }
}

/// What Keystone said about a token.
#[derive(Clone, Debug)]
enum Validation {
    Valid(Arc<Identity>),
    Invalid,
}

/// A valid token's identity.
#[derive(Clone, Debug)]
struct Identity {
    user_id: String,
    project_id: Option<String>,
    domain_id: Option<String>,
    roles: Vec<String>,
    expires: Option<Instant>,
    system_scope: Option<String>,
}

/// Keystone's answer to an authentication failure, as keystonemiddleware's.
struct Refusal {
    error: ApiError,
    www_authenticate: Option<HeaderValue>,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = self.error.into_response();
        if let Some(v) = self.www_authenticate {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, v);
        }
        response
    }
}

struct Keystone {
    session: Session,
    options: KeystoneOptions,
    www_authenticate: Option<HeaderValue>,
    cache: moka::sync::Cache<[u8; 32], (Validation, Instant)>,
}

/// The most tokens whose validation is kept.
const CACHE_ENTRIES: u64 = 100_000;

impl Keystone {
    fn new(options: KeystoneOptions) -> Result<Keystone, AuthError> {
        let session = Session::new(options.auth.clone()).map_err(|e| match e {
            SessionError::Options(m) if m.starts_with("cafile") => AuthError::CaFile {
                path: options
                    .auth
                    .cafile
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                why: m,
            },
            SessionError::Options(m) if m.ends_with("is needed") => {
                AuthError::Options(format!("{m} to validate tokens (the API's service user)"))
            }
            other => AuthError::Options(other.to_string()),
        })?;
        let uri = options
            .www_authenticate_uri
            .clone()
            .unwrap_or_else(|| session.keystone_url().to_owned());
        let www_authenticate = HeaderValue::from_str(&format!("Keystone uri=\"{uri}\"")).ok();
        let cache = moka::sync::Cache::builder()
            .max_capacity(CACHE_ENTRIES)
            .time_to_live(options.token_cache_time)
            .build();
        Ok(Keystone {
            session,
            options,
            www_authenticate,
            cache,
        })
    }

    fn unauthorized(&self, message: &str) -> Refusal {
        Refusal {
            error: ApiError::new(ErrorKind::Unauthorized, message),
            www_authenticate: self.www_authenticate.clone(),
        }
    }

    /// The caller of a request with these headers.
    async fn caller(&self, headers: &HeaderMap, policy: &Arc<Policy>) -> Result<Caller, Refusal> {
        let token = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let Some(user_token) = token("x-auth-token") else {
            return Err(self.unauthorized("the request you have made requires authentication"));
        };
        let service = match token("x-service-token") {
            None => None,
            Some(t) => match self.validate(t, false).await? {
                Validation::Valid(identity) => Some(identity),
                Validation::Invalid => {
                    return Err(self.unauthorized("the service token is not valid"))
                }
            },
        };
        let privileged_service = service.as_ref().is_some_and(|s| {
            s.roles.iter().any(|r| {
                self.options
                    .service_token_roles
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(r))
            })
        });
        if service.is_some() && self.options.service_token_roles_required && !privileged_service {
            return Err(self.unauthorized(
                "the service token has none of [keystone_authtoken] service_token_roles",
            ));
        }
        let user = match self.validate(user_token, false).await? {
            Validation::Valid(identity) => identity,
            // A valid service token lets an expired user token through (a long build).
            Validation::Invalid if privileged_service => {
                match self.validate(user_token, true).await? {
                    Validation::Valid(identity) => identity,
                    Validation::Invalid => return Err(self.unauthorized("the token is not valid")),
                }
            }
            Validation::Invalid => return Err(self.unauthorized("the token is not valid")),
        };
        let is_admin = user.roles.iter().any(|r| r.eq_ignore_ascii_case("admin"));
        Ok(Caller {
            credentials: Credentials {
                roles: user.roles.clone(),
                user_id: Some(user.user_id.clone()),
                project_id: user.project_id.clone(),
                domain_id: user.domain_id.clone(),
                is_admin,
                service_roles: service
                    .as_ref()
                    .map(|s| s.roles.clone())
                    .unwrap_or_default(),
                service_user_id: service.as_ref().map(|s| s.user_id.clone()),
                service_project_id: service.as_ref().and_then(|s| s.project_id.clone()),
                system_scope: user.system_scope.clone(),
            },
            policy: Some(policy.clone()),
            service_request: privileged_service,
        })
    }

    /// Keystone's verdict on `token`, from the cache when it has one.
    async fn validate(&self, token: &str, allow_expired: bool) -> Result<Validation, Refusal> {
        let key: [u8; 32] = Sha256::new()
            .chain_update([u8::from(allow_expired)])
            .chain_update(token.as_bytes())
            .finalize()
            .into();
        let now = Instant::now();
        if let Some((verdict, until)) = self.cache.get(&key) {
            if until > now {
                return Ok(verdict);
            }
            self.cache.invalidate(&key);
        }
        let verdict = self.ask(token, allow_expired).await?;
        let mut until = now + self.options.token_cache_time;
        if let Validation::Valid(identity) = &verdict {
            if let Some(expires) = identity.expires.filter(|_| !allow_expired) {
                until = until.min(expires);
            }
        }
        self.cache.insert(key, (verdict.clone(), until));
        Ok(verdict)
    }

    /// `GET /v3/auth/tokens` for `token`, with the service user's token (renewed once
    /// when Keystone refuses it).
    async fn ask(&self, token: &str, allow_expired: bool) -> Result<Validation, Refusal> {
        let url = format!(
            "{}/v3/auth/tokens{}",
            self.session.keystone_url(),
            if allow_expired {
                "?allow_expired=1"
            } else {
                ""
            }
        );
        let http = self.session.http();
        let response = self
            .session
            .send(|service_token| {
                http.get(&url)
                    .header("X-Auth-Token", service_token)
                    .header("X-Subject-Token", token)
            })
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot validate a token with Keystone");
                unavailable(match e {
                    SessionError::Refused { .. } => {
                        "the API cannot authenticate to Keystone ([keystone_authtoken])".to_owned()
                    }
                    _ => "Keystone cannot be reached to validate the token; retry later".to_owned(),
                })
            })?;
        match response.status().as_u16() {
            200 => {
                let body: Value = response.json().await.map_err(|e| {
                    unavailable(format!("Keystone's token validation is not JSON: {e}"))
                })?;
                identity_of(&body)
                    .map(|i| Validation::Valid(Arc::new(i)))
                    .ok_or_else(|| {
                        unavailable("Keystone's token validation has no user".to_owned())
                    })
            }
            404 => Ok(Validation::Invalid),
            401 => Err(unavailable(
                "Keystone refuses the API's service user ([keystone_authtoken])".to_owned(),
            )),
            status => Err(unavailable(format!(
                "Keystone answered {status} to a token validation"
            ))),
        }
    }
}

fn unavailable(message: String) -> Refusal {
    Refusal {
        error: ApiError::new(ErrorKind::Unavailable, message),
        www_authenticate: None,
    }
}

#[derive(Deserialize)]
struct Named {
    id: String,
    #[serde(default)]
    name: Option<String>,
}

/// The identity in Keystone's `{"token": {...}}`.
fn identity_of(body: &Value) -> Option<Identity> {
    let token = body.get("token")?;
    let user: Named = serde_json::from_value(token.get("user")?.clone()).ok()?;
    let project: Option<Named> = token
        .get("project")
        .and_then(|p| serde_json::from_value(p.clone()).ok());
    let domain: Option<Named> = token
        .get("domain")
        .and_then(|p| serde_json::from_value(p.clone()).ok());
    let roles = token
        .get("roles")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(|r| serde_json::from_value::<Named>(r.clone()).ok())
                .filter_map(|r| r.name)
                .collect()
        })
        .unwrap_or_default();
    let expires = expires_in(&token["expires_at"]).map(|left| Instant::now() + left);
    // A system-scoped token: `"system": {"all": true}`.
    let system_scope = token
        .get("system")
        .and_then(Value::as_object)
        .and_then(|s| s.keys().next().cloned());
    Some(Identity {
        user_id: user.id,
        project_id: project.map(|p| p.id),
        domain_id: domain.map(|d| d.id),
        roles,
        expires,
        system_scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identities_from_keystone_tokens() {
        let body = json!({"token": {
            "expires_at": "2999-01-01T00:00:00.000000Z",
            "user": {"id": "u1", "name": "demo-member", "domain": {"id": "default"}},
            "project": {"id": "p1", "name": "demo", "domain": {"id": "default"}},
            "roles": [{"id": "r1", "name": "member"}, {"id": "r2", "name": "reader"}],
        }});
        let i = identity_of(&body).expect("identity");
        assert_eq!(i.user_id, "u1");
        assert_eq!(i.project_id.as_deref(), Some("p1"));
        assert_eq!(i.roles, ["member", "reader"]);
        assert!(i.expires.is_some_and(|e| e > Instant::now()));
        assert!(identity_of(&json!({"token": {"roles": []}})).is_none());
    }

    #[test]
    fn options_are_checked() {
        let bad_url = KeystoneOptions::new("keystone:5000", "accel", "pw", "service");
        assert!(matches!(
            Authenticator::new(AuthStrategy::Keystone(Box::new(bad_url)), Policy::default()),
            Err(AuthError::Options(m)) if m.contains("auth_url")
        ));
        let no_password = KeystoneOptions::new("http://127.0.0.1:5000/v3", "accel", "", "service");
        assert!(matches!(
            Authenticator::new(AuthStrategy::Keystone(Box::new(no_password)), Policy::default()),
            Err(AuthError::Options(m)) if m.contains("password")
        ));
        let ok = KeystoneOptions::new("http://127.0.0.1:5000/v3/", "accel", "pw", "service");
        let a = Authenticator::new(AuthStrategy::Keystone(Box::new(ok)), Policy::default())
            .expect("ok");
        assert!(a.is_keystone());
        assert_eq!(
            a.inner.keystone.as_ref().map(|k| k.session.keystone_url()),
            Some("http://127.0.0.1:5000")
        );
    }
}
