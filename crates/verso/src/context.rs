//! The request context that travels with every call (oslo.context's `RequestContext`).
//!
//! On the wire the context is the dictionary `oslo_context.RequestContext.to_dict()`
//! produces; oslo.messaging prefixes each key with `_context_`. [`RequestContext::to_dict`]
//! writes the same keys, and [`RequestContext::from_dict`] keeps any key it does not know
//! in [`RequestContext::extra`], so nothing a Python peer sends is lost on the way through.

use serde_json::{Map, Value};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Who is asking, and for which request. Cheap to clone; passed by reference.
///
/// ```
/// use verso::RequestContext;
/// let ctx = RequestContext::new("req-1").with_user("alice").with_project("demo").with_role("admin");
/// let dict = ctx.to_dict();
/// assert_eq!(dict["user"], "alice");
/// assert_eq!(dict["project_id"], "demo");
/// assert_eq!(RequestContext::from_dict(&dict), ctx);
/// ```
#[derive(Clone, PartialEq, Default)]
pub struct RequestContext {
    /// The request id (`req-<uuid>` in OpenStack).
    pub request_id: String,
    /// The global request id that spans services, if the caller set one.
    pub global_request_id: Option<String>,
    /// The user id.
    pub user: Option<String>,
    /// The project (tenant) id.
    pub project: Option<String>,
    /// The domain ids, as oslo.context carries them.
    pub domain: Option<String>,
    /// The user's domain id.
    pub user_domain: Option<String>,
    /// The project's domain id.
    pub project_domain: Option<String>,
    /// Role names granted to the user.
    pub roles: Vec<String>,
    /// Whether the caller acts as an administrator.
    pub is_admin: bool,
    /// oslo.context `read_only`.
    pub read_only: bool,
    /// oslo.context `show_deleted`.
    pub show_deleted: bool,
    /// The Keystone token, never printed by `Debug`.
    pub auth_token: Option<String>,
    /// Any other key of the serialized context (service-specific keys, or keys a newer
    /// oslo.context adds), kept and sent back as they came.
    pub extra: Map<String, Value>,
    /// Service-side handles the request runs with (the conductor's database, an agent's
    /// indirection API). Never serialized, never compared.
    pub extensions: Extensions,
}

/// Typed handles attached to a context by the service that runs the request, like
/// `http::Extensions`: a conductor attaches its database, an agent its indirection API.
/// Cloning is cheap (the map is shared until written).
#[derive(Clone, Default)]
pub struct Extensions(Option<Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>);

impl Extensions {
    /// Stores `value`, replacing any earlier value of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        let map = Arc::make_mut(self.0.get_or_insert_with(Default::default));
        map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The stored value of type `T`.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.0.as_ref()?.get(&TypeId::of::<T>())?.downcast_ref()
    }
}

impl PartialEq for Extensions {
    /// Extensions are not data: two contexts are equal whatever handles they carry.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Extensions({})", self.0.as_ref().map_or(0, |m| m.len()))
    }
}

/// The keys oslo.context writes that are derived from the others; they are written by
/// [`RequestContext::to_dict`] and recomputed, not stored, when read back.
const DERIVED_KEYS: &[&str] = &["project_id", "user_identity", "is_admin_project", "tenant"];

impl RequestContext {
    /// A context for one request, with no user (an internal or anonymous call).
    pub fn new(request_id: impl Into<String>) -> Self {
        RequestContext {
            request_id: request_id.into(),
            ..Default::default()
        }
    }

    /// A context with a fresh `req-<uuid4>` request id.
    pub fn generate() -> Self {
        Self::new(format!("req-{}", uuid::Uuid::new_v4()))
    }

    /// Sets the user id.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Sets the project id.
    pub fn with_project(mut self, project: impl Into<String>) -> Self {
        self.project = Some(project.into());
        self
    }

    /// Adds a role.
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.roles.push(role.into());
        self
    }

    /// Marks the context as an administrator's.
    pub fn with_admin(mut self, is_admin: bool) -> Self {
        self.is_admin = is_admin;
        self
    }

    /// Attaches a service-side handle (see [`Extensions`]).
    pub fn with_extension<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// The attached handle of type `T`.
    pub fn extension<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.extensions.get()
    }

    /// Whether the user holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// The dictionary oslo.context's `to_dict()` writes (same keys, same derived values).
    pub fn to_dict(&self) -> Map<String, Value> {
        self.dict_entries()
            .map(|(k, v)| (k.to_owned(), v.to_value()))
            .collect()
    }

    /// The entries of [`to_dict`](Self::to_dict), in order (the keys of
    /// [`extra`](Self::extra) last, so one of them that repeats a known key wins, as in
    /// the dictionary), without building it: a peer's message writer serializes them
    /// straight into its JSON ([`DictValue`] is `Serialize`).
    pub fn dict_entries(&self) -> impl Iterator<Item = (&str, DictValue<'_>)> {
        fn text(v: &Option<String>) -> DictValue<'_> {
            DictValue::Text(v.as_deref())
        }
        let dash = |v: &Option<String>| v.as_deref().unwrap_or("-").to_owned();
        let identity = format!(
            "{} {} {} {} {}",
            dash(&self.user),
            dash(&self.project),
            dash(&self.domain),
            dash(&self.user_domain),
            dash(&self.project_domain)
        );
        [
            ("user", text(&self.user)),
            ("project_id", text(&self.project)),
            ("system_scope", DictValue::Text(None)),
            ("project", text(&self.project)),
            ("domain", text(&self.domain)),
            ("user_domain", text(&self.user_domain)),
            ("project_domain", text(&self.project_domain)),
            ("is_admin", DictValue::Bool(self.is_admin)),
            ("read_only", DictValue::Bool(self.read_only)),
            ("show_deleted", DictValue::Bool(self.show_deleted)),
            ("auth_token", text(&self.auth_token)),
            ("request_id", DictValue::Text(Some(&self.request_id))),
            ("global_request_id", text(&self.global_request_id)),
            ("resource_uuid", DictValue::Text(None)),
            ("roles", DictValue::Roles(&self.roles)),
            ("user_identity", DictValue::Owned(identity)),
            ("is_admin_project", DictValue::Bool(true)),
        ]
        .into_iter()
        .chain(
            self.extra
                .iter()
                .map(|(k, v)| (k.as_str(), DictValue::Json(v))),
        )
    }

    /// Rebuilds a context from a dictionary in oslo.context's form. Unknown keys go to
    /// [`extra`](Self::extra); values of the wrong JSON type are treated as absent.
    pub fn from_dict(d: &Map<String, Value>) -> Self {
        let s = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
        let b = |k: &str| d.get(k).and_then(Value::as_bool).unwrap_or(false);
        const KNOWN: &[&str] = &[
            "user",
            "system_scope",
            "project",
            "domain",
            "user_domain",
            "project_domain",
            "is_admin",
            "read_only",
            "show_deleted",
            "auth_token",
            "request_id",
            "global_request_id",
            "resource_uuid",
            "roles",
        ];
        let extra = d
            .iter()
            .filter(|(k, _)| !KNOWN.contains(&k.as_str()) && !DERIVED_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        RequestContext {
            request_id: s("request_id").unwrap_or_default(),
            global_request_id: s("global_request_id"),
            user: s("user").or_else(|| s("user_id")),
            project: s("project")
                .or_else(|| s("project_id"))
                .or_else(|| s("tenant")),
            domain: s("domain"),
            user_domain: s("user_domain"),
            project_domain: s("project_domain"),
            roles: d
                .get("roles")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            is_admin: b("is_admin"),
            read_only: b("read_only"),
            show_deleted: b("show_deleted"),
            auth_token: s("auth_token"),
            extra,
            extensions: Extensions::default(),
        }
    }
}

/// A value of [`RequestContext::dict_entries`]: what the dictionary holds, borrowed.
#[derive(Debug, Clone, PartialEq)]
pub enum DictValue<'a> {
    /// A string, or `null`.
    Text(Option<&'a str>),
    /// A string made for the dictionary (`user_identity`).
    Owned(String),
    /// A boolean.
    Bool(bool),
    /// A list of strings (`roles`).
    Roles(&'a [String]),
    /// A value kept as the peer sent it ([`RequestContext::extra`]).
    Json(&'a Value),
}

impl DictValue<'_> {
    /// The JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            DictValue::Text(t) => t.map_or(Value::Null, |t| Value::String(t.to_owned())),
            DictValue::Owned(t) => Value::String(t.clone()),
            DictValue::Bool(b) => Value::Bool(*b),
            DictValue::Roles(r) => Value::Array(r.iter().cloned().map(Value::String).collect()),
            DictValue::Json(v) => (*v).clone(),
        }
    }
}

impl serde::Serialize for DictValue<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            DictValue::Text(t) => t.serialize(serializer),
            DictValue::Owned(t) => serializer.serialize_str(t),
            DictValue::Bool(b) => serializer.serialize_bool(*b),
            DictValue::Roles(r) => r.serialize(serializer),
            DictValue::Json(v) => v.serialize(serializer),
        }
    }
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestContext")
            .field("request_id", &self.request_id)
            .field("user", &self.user)
            .field("project", &self.project)
            .field("roles", &self.roles)
            .field("is_admin", &self.is_admin)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "***"))
            .field("extra", &self.extra)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dict_round_trip_keeps_unknown_keys() {
        let mut ctx = RequestContext::new("req-1")
            .with_user("u")
            .with_project("p")
            .with_role("member");
        ctx.extra
            .insert("service_catalog".into(), Value::Array(vec![]));
        let back = RequestContext::from_dict(&ctx.to_dict());
        assert_eq!(back, ctx);
    }

    #[test]
    fn python_dict_is_understood() {
        let d: Map<String, Value> = serde_json::from_str(
            r#"{"user": "demo-user", "project_id": "demo-project", "project": "demo-project",
                "is_admin": false, "request_id": "req-11", "roles": ["reader"],
                "user_identity": "demo-user demo-project - - -", "is_admin_project": true}"#,
        )
        .expect("valid json");
        let ctx = RequestContext::from_dict(&d);
        assert_eq!(ctx.user.as_deref(), Some("demo-user"));
        assert_eq!(ctx.project.as_deref(), Some("demo-project"));
        assert!(ctx.has_role("reader"));
        assert!(ctx.extra.is_empty());
        assert_eq!(
            ctx.to_dict()["user_identity"],
            "demo-user demo-project - - -"
        );
    }

    #[test]
    fn debug_hides_token() {
        let mut ctx = RequestContext::new("r");
        ctx.auth_token = Some("secret".into());
        assert!(!format!("{ctx:?}").contains("secret"));
    }
}
