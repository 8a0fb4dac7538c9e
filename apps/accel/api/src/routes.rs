//! The HTTP handlers: parse and check the request, call one [`AccelService`] operation,
//! shape the answer for the negotiated microversion.
//!
//! (Long on purpose: every v2 handler, in the order of Cyborg's API reference, so a
//! route's checks, policy and microversion gates are read together; parsing and views
//! live in their own modules.)

use crate::auth::{Authenticator, Caller};
use crate::error::{ApiError, ErrorKind};
use crate::microversion::{self, ApiVersion};
use crate::service::{AccelService, ArqState, BindProject, Binding, ListQuery, NewProfile};
use crate::views;
use crate::Limits;
use accel_conductor::db::{
    shown, ArqRow, AttributeRow, DeployableRow, DeviceProfileRow, DeviceRow, MAX_TEXT,
};
use accel_conductor::groups;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawQuery, Request, State};
use axum::http::header::HOST;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;

type Service = Arc<dyn AccelService>;
type Result<T> = std::result::Result<T, ApiError>;

mod arqs;
use arqs::{create_arqs, delete_arq, delete_arqs, get_arq, list_arqs, patch_arq, patch_arqs};

/// The router over a shared service, serving the `supported` microversions.
pub(crate) fn build(
    service: Service,
    supported: microversion::Supported,
    limits: Limits,
    auth: Authenticator,
) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/v2", get(v2))
        .route("/v2/", get(v2))
        .route("/v2/devices", get(list_devices))
        .route("/v2/devices/{uuid}", get(get_device))
        .route("/v2/devices/{uuid}/disable", post(disable_device))
        .route("/v2/devices/{uuid}/enable", post(enable_device))
        .route("/v2/deployables", get(list_deployables))
        .route("/v2/deployables/{uuid}", get(get_deployable))
        .route(
            "/v2/deployables/{uuid}/program",
            axum::routing::patch(program_deployable),
        )
        .route(
            "/v2/attributes",
            get(list_attributes).post(create_attribute),
        )
        .route(
            "/v2/attributes/{uuid}",
            get(get_attribute).delete(delete_attribute),
        )
        .route(
            "/v2/device_profiles",
            get(list_profiles)
                .post(create_profile)
                .delete(delete_profiles),
        )
        // Cyborg's `DELETE /v2/device_profiles/` (an empty name) is the collection's
        // delete without `?value=`: 400.
        .route(
            "/v2/device_profiles/",
            axum::routing::delete(delete_profiles),
        )
        .route(
            "/v2/device_profiles/{name_or_uuid}",
            get(get_profile).delete(delete_profile),
        )
        .route(
            "/v2/accelerator_requests",
            get(list_arqs)
                .post(create_arqs)
                .patch(patch_arqs)
                .delete(delete_arqs),
        )
        .route(
            "/v2/accelerator_requests/{uuid}",
            get(get_arq).patch(patch_arq).delete(delete_arq),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(service)
        .layer(axum::middleware::from_fn(microversion::layer))
        .layer(Extension(supported))
        .layer(Extension(limits))
        // Outside the version check, as keystonemiddleware is outside Cyborg's app: an
        // unauthenticated request learns nothing but 401.
        .layer(axum::middleware::from_fn(move |req: Request, next| {
            auth.clone().layer(req, next)
        }))
        .layer(CatchPanicLayer::custom(
            |_panic: Box<dyn std::any::Any + Send>| {
                tracing::error!("an accel API handler panicked");
                ApiError::new(
                    ErrorKind::Internal,
                    "internal error; the accel API log has the details",
                )
                .into_response()
            },
        ))
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorKind::NotFound, "no such resource")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorKind::MethodNotAllowed,
        "method not allowed on this resource",
    )
}

/// The one path parameter, refused with a JSON 400 when it is not UTF-8.
struct Id(String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Id> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("malformed path: {}", e.body_text())))
            .and_then(|Path(id)| {
                check_text("path", &id)?;
                Ok(Id(id))
            })
    }
}

/// The raw body, refused with a JSON error (413 over the size limit, else 400).
struct Body(Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Body> {
        Bytes::from_request(request, state)
            .await
            .map(Body)
            .map_err(|e| {
                if timed_out(&e) {
                    return ApiError::new(
                        ErrorKind::RequestTimeout,
                        "the request body stalled longer than the body read timeout",
                    );
                }
                let kind = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ErrorKind::TooLarge
                } else {
                    ErrorKind::BadRequest
                };
                ApiError::new(kind, e.body_text())
            })
    }
}

/// Whether reading the body failed because it stalled (the server's body read timeout).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// `http://<Host>` for links, or nothing (relative links) without a usable Host header.
fn base(headers: &HeaderMap) -> String {
    headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .map(|h| format!("http://{h}"))
        .unwrap_or_default()
}

/// The URL links are built on: the configured [`PublicEndpoint`](crate::PublicEndpoint)
/// (an extension [`crate::server::serve`] adds), else `http://` and the `Host` header.
struct Base(String);

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> std::result::Result<Base, Self::Rejection> {
        Ok(Base(
            match parts.extensions.get::<crate::PublicEndpoint>() {
                Some(endpoint) => endpoint.as_str().to_owned(),
                None => base(&parts.headers),
            },
        ))
    }
}

/// Text with a NUL character is refused: PostgreSQL cannot store it, and no name,
/// host or UUID has one. So is text over [`MAX_TEXT`] bytes (every name, host, UUID,
/// description, group key and value, query value), before any work and without echoing
/// it: the database would refuse it later, or store and repeat it.
fn check_text(what: &str, text: &str) -> Result<()> {
    if text.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "{what}: NUL characters are not allowed"
        )));
    }
    if text.len() > MAX_TEXT {
        return Err(ApiError::bad_request(format!(
            "{what}: a text of {} bytes; at most {MAX_TEXT}",
            text.len()
        )));
    }
    Ok(())
}

/// An instance UUID (a bind's `/instance_uuid`, `?instance=`): anything else is a 400, as
/// in Cyborg, whose API types these parameters as UUIDs.
fn check_instance(what: &str, text: &str) -> Result<()> {
    check_text(what, text)?;
    uuid::Uuid::parse_str(text)
        .map(drop)
        .map_err(|_| ApiError::bad_request(format!("{what} {:?} is not a UUID", shown(text))))
}

fn check_json(value: &Value) -> Result<()> {
    match value {
        Value::String(s) => check_text("request body", s),
        Value::Array(items) => items.iter().try_for_each(check_json),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            check_text("request body", k)?;
            check_json(v)
        }),
        _ => Ok(()),
    }
}

/// The query string's pairs (the last of a repeated key wins).
fn query_pairs(raw: Option<String>) -> Result<BTreeMap<String, String>> {
    let raw = raw.unwrap_or_default();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&raw)
        .map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))?;
    for (k, v) in &pairs {
        check_text("query string", k)?;
        // `arqs` is a comma-separated list: its items are checked where it is split.
        if k != "arqs" {
            check_text("query string", v)?;
        }
    }
    Ok(pairs.into_iter().collect())
}

/// A JSON body, whatever the content type says; malformed JSON is a 400.
fn json_body<T: DeserializeOwned>(body: &Bytes) -> Result<T> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed request body: {e}")))?;
    check_json(&value)?;
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("malformed request body: {e}")))
}

/// `limit` and `marker` (and the device filters): a page of at most `limit` rows
/// (default and maximum: the configured page size) after the row whose UUID is `marker`.
fn list_query(pairs: &BTreeMap<String, String>, limits: &Limits) -> Result<ListQuery> {
    let max = limits.max_page_size.max(1);
    let limit = match pairs.get("limit") {
        None => max,
        Some(text) => match text.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit {:?}: a whole number from 1 to {max}",
                    shown(text)
                )))
            }
        },
    };
    let non_empty = |key: &str| pairs.get(key).filter(|v| !v.is_empty()).cloned();
    let names = match pairs.get("name") {
        Some(list) => names_of("name", list)?,
        None => Vec::new(),
    };
    Ok(ListQuery {
        hostname: non_empty("hostname"),
        device_type: non_empty("type"),
        vendor: non_empty("vendor"),
        names,
        limit,
        marker: non_empty("marker"),
        project_id: None,
    })
}

/// A comma-separated list of names or UUIDs (`?name=a,b`, `?value=a,b`, `?arqs=u1,u2`),
/// each checked as text; refused when it names nothing.
fn names_of(what: &str, list: &str) -> Result<Vec<String>> {
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(ApiError::bad_request(format!("{what} names nothing")));
    }
    for n in &names {
        check_text(what, n)?;
    }
    Ok(names)
}

/// A row of a paged list: its UUID is the next page's marker.
trait Listed {
    fn uuid(&self) -> &str;
}

macro_rules! listed {
    ($($row:ty),*) => {$(
        impl Listed for $row {
            fn uuid(&self) -> &str {
                &self.uuid
            }
        }
    )*};
}
listed!(
    DeviceRow,
    DeployableRow,
    AttributeRow,
    DeviceProfileRow,
    ArqRow
);

/// A list answer: `{key: items}`, and when the page is full a `next` link to the page
/// after the last row (`/v2/{collection}`, the same filters, `extra` and `limit`, the
/// last row as `marker`).
fn page<T: Listed>(
    base: &str,
    collection: &str,
    key: &str,
    query: &ListQuery,
    rows: &[T],
    view: impl Fn(&T) -> Value,
    extra: &[(&'static str, String)],
) -> Json<Value> {
    let read = PageRead::of(rows);
    page_shown(base, collection, key, query, read, rows.iter(), view, extra)
}

/// What the database returned for a page, before any filter the handler applies after
/// reading: whether the page was full decides `next`, and its last row is the marker,
/// so a page the filter shortened (even to nothing) still links to the rest.
struct PageRead {
    rows: usize,
    last: Option<String>,
}

impl PageRead {
    fn of<T: Listed>(rows: &[T]) -> Self {
        PageRead {
            rows: rows.len(),
            last: rows.last().map(|r| r.uuid().to_owned()),
        }
    }
}

/// [`page`] of the rows `shown`, a filtered part of the page `read`.
#[allow(clippy::too_many_arguments)]
fn page_shown<'a, T: 'a>(
    base: &str,
    collection: &str,
    key: &str,
    query: &ListQuery,
    read: PageRead,
    shown: impl Iterator<Item = &'a T>,
    view: impl Fn(&T) -> Value,
    extra: &[(&'static str, String)],
) -> Json<Value> {
    let mut body = json!({ key: shown.map(view).collect::<Vec<_>>() });
    if let Some(last) = read.last.filter(|_| read.rows >= query.limit as usize) {
        let mut pairs: Vec<(&str, String)> = extra.to_vec();
        if let Some(h) = &query.hostname {
            pairs.push(("hostname", h.clone()));
        }
        if let Some(t) = &query.device_type {
            pairs.push(("type", t.clone()));
        }
        if let Some(v) = &query.vendor {
            pairs.push(("vendor", v.clone()));
        }
        if !query.names.is_empty() {
            pairs.push(("name", query.names.join(",")));
        }
        pairs.push(("limit", query.limit.to_string()));
        pairs.push(("marker", last));
        let qs = serde_urlencoded::to_string(&pairs).unwrap_or_default();
        body["next"] = Value::String(format!("{base}/v2/{collection}?{qs}"));
    }
    Json(body)
}

// ---- versions ------------------------------------------------------------------------

async fn root(
    Extension(supported): Extension<microversion::Supported>,
    Base(base): Base,
) -> Json<Value> {
    Json(views::root(&base, supported.max))
}

/// `GET /v2`: the version's document as Cyborg 17 answers it (its fields at the top)
/// and, beside them, under `version` as keystoneauth's discovery reads a versioned
/// endpoint's.
async fn v2(
    Extension(supported): Extension<microversion::Supported>,
    Base(base): Base,
) -> Json<Value> {
    let version = views::v2(&base, supported.max);
    let mut body = version.clone();
    body["version"] = version;
    Json(body)
}

// ---- devices and deployables ---------------------------------------------------------

async fn list_devices(
    caller: Caller,
    State(service): State<Service>,
    Extension(version): Extension<ApiVersion>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    caller.may("cyborg:device:get_all")?;
    let query = list_query(&query_pairs(raw)?, &limits)?;
    let rows = service.devices(&query).await?;
    Ok(page(
        &base,
        "devices",
        "devices",
        &query,
        &rows,
        |d| views::device(d, version, &base),
        &[],
    ))
}

async fn get_device(
    caller: Caller,
    State(service): State<Service>,
    Extension(version): Extension<ApiVersion>,
    Base(base): Base,
    Id(uuid): Id,
) -> Result<Json<Value>> {
    caller.may("cyborg:device:get_one")?;
    let d = service.device(&uuid).await?;
    Ok(Json(views::device(&d, version, &base)))
}

/// `POST /v2/devices/{uuid}/disable` (Cyborg's): the device goes into maintenance and is
/// given to no new request; 204, as Cyborg 17 answers (its handler declares 200, but
/// returns no body, which its framework answers with 204).
async fn disable_device(
    caller: Caller,
    State(service): State<Service>,
    Id(uuid): Id,
) -> Result<StatusCode> {
    caller.may("cyborg:device:disable")?;
    service.set_device_maintaining(&uuid, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v2/devices/{uuid}/enable`: back in service.
async fn enable_device(
    caller: Caller,
    State(service): State<Service>,
    Id(uuid): Id,
) -> Result<StatusCode> {
    caller.may("cyborg:device:enable")?;
    service.set_device_maintaining(&uuid, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_deployables(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    caller.may("cyborg:deployable:get_all")?;
    let query = list_query(&query_pairs(raw)?, &limits)?;
    let rows = service.deployables(&query).await?;
    Ok(page(
        &base,
        "deployables",
        "deployables",
        &query,
        &rows,
        |d| views::deployable(d, &base),
        &[],
    ))
}

async fn get_deployable(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Id(uuid): Id,
) -> Result<Json<Value>> {
    caller.may("cyborg:deployable:get_one")?;
    Ok(Json(deployable_view(&service, &uuid, &base).await?))
}

/// The deployable `uuid` as Cyborg shows it.
async fn deployable_view(service: &Service, uuid: &str, base: &str) -> Result<Value> {
    Ok(views::deployable(&service.deployable(uuid).await?, base))
}

/// `PATCH /v2/deployables/{uuid}/program`, Cyborg's body: `[{"path": "/bitstream_id",
/// "op": "replace", "value": [{"image_uuid": "<Glance image>"}]}]`. Answers the
/// deployable once its agent has programmed it.
async fn program_deployable(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Id(uuid): Id,
    Body(body): Body,
) -> Result<Json<Value>> {
    caller.may("cyborg:deployable:program")?;
    let value: Value = json_body(&body)?;
    let image = value
        .get(0)
        .and_then(|p| p.get("value"))
        .and_then(|v| v.get(0))
        .and_then(|v| v.get("image_uuid"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ApiError::bad_request(
                "a program request is [{\"path\": \"/bitstream_id\", \"op\": \"replace\", \
                 \"value\": [{\"image_uuid\": \"<UUID>\"}]}]",
            )
        })?;
    let image = uuid::Uuid::parse_str(image)
        .map_err(|_| ApiError::bad_request(format!("image_uuid {image:?} is not a UUID")))?
        .to_string();
    service.program_deployable(&uuid, &image).await?;
    Ok(Json(deployable_view(&service, &uuid, &base).await?))
}

// ---- attributes ----------------------------------------------------------------------

/// `GET /v2/attributes[?deployable_id=N][&key=K]`, as Cyborg's, paged like every list.
async fn list_attributes(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    caller.may("cyborg:attribute:get_all")?;
    let pairs = query_pairs(raw)?;
    let query = list_query(&pairs, &limits)?;
    let deployable_id = match pairs.get("deployable_id").filter(|v| !v.is_empty()) {
        None => None,
        Some(text) => Some(deployable_id(text)?),
    };
    let key = pairs.get("key").filter(|v| !v.is_empty());
    if let Some(key) = key {
        check_text("key", key)?;
    }
    let rows = service
        .attributes(deployable_id, key.map(String::as_str), &query)
        .await?;
    let mut extra = Vec::new();
    if let Some(id) = deployable_id {
        extra.push(("deployable_id", id.to_string()));
    }
    if let Some(key) = key {
        extra.push(("key", key.clone()));
    }
    Ok(page(
        &base,
        "attributes",
        "attributes",
        &query,
        &rows,
        |a| views::attribute(a, &base),
        &extra,
    ))
}

async fn get_attribute(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Id(uuid): Id,
) -> Result<Json<Value>> {
    caller.may("cyborg:attribute:get_one")?;
    let a = service.attribute(&uuid).await?;
    Ok(Json(views::attribute(&a, &base)))
}

/// Cyborg's attribute body: `{"deployable_id": N, "key": "...", "value": "..."}`; the id
/// may come as text (`openstack accelerator device attribute create` sends `"5"`), as Cyborg's
/// integer field takes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttributeIn {
    deployable_id: IntOrText,
    key: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrText {
    Int(i64),
    Text(String),
}

impl IntOrText {
    fn id(&self) -> Result<i64> {
        match self {
            IntOrText::Int(n) => Ok(*n),
            IntOrText::Text(t) => deployable_id(t.trim()),
        }
    }
}

/// A deployable's database id given as text (a query parameter, or the CLI's body).
fn deployable_id(text: &str) -> Result<i64> {
    text.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "deployable_id {:?}: a deployable's database id, a whole number",
            shown(text)
        ))
    })
}

/// The longest key and value Cyborg's `attributes` columns hold (`String(255)`).
const ATTRIBUTE_TEXT_MAX: usize = 255;

async fn create_attribute(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Body(body): Body,
) -> Result<Response> {
    caller.may("cyborg:attribute:create")?;
    // openstacksdk (and so `openstack accelerator device attribute create`) wraps the
    // attribute in `{"attribute": {...}}`; Cyborg's own form is the bare object.
    let mut value: Value = json_body(&body)?;
    if let Some(inner) = value
        .as_object_mut()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.remove("attribute"))
    {
        value = inner;
    }
    let a: AttributeIn = serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("malformed attribute: {e}")))?;
    for (what, text) in [("key", &a.key), ("value", &a.value)] {
        check_text(what, text)?;
        if text.is_empty() || text.chars().count() > ATTRIBUTE_TEXT_MAX {
            return Err(ApiError::bad_request(format!(
                "attribute {what}: 1 to {ATTRIBUTE_TEXT_MAX} characters"
            )));
        }
    }
    let created = service
        .create_attribute(a.deployable_id.id()?, &a.key, &a.value)
        .await?;
    Ok((StatusCode::CREATED, Json(views::attribute(&created, &base))).into_response())
}

async fn delete_attribute(
    caller: Caller,
    State(service): State<Service>,
    Id(uuid): Id,
) -> Result<StatusCode> {
    caller.may("cyborg:attribute:delete")?;
    service.delete_attribute(&uuid).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- device profiles -----------------------------------------------------------------

async fn list_profiles(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    caller.may("cyborg:device_profile:get_all")?;
    let query = list_query(&query_pairs(raw)?, &limits)?;
    let rows = service.profiles(&query).await?;
    Ok(page(
        &base,
        "device_profiles",
        "device_profiles",
        &query,
        &rows,
        |p| views::profile(p, &base),
        &[],
    ))
}

async fn get_profile(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Id(name_or_uuid): Id,
) -> Result<Json<Value>> {
    caller.may("cyborg:device_profile:get_one")?;
    let p = service.profile(&name_or_uuid).await?;
    Ok(Json(
        json!({"device_profile": views::profile_one(&p, &base)}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileIn {
    name: String,
    groups: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    description: Option<String>,
}

async fn create_profile(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    Body(body): Body,
) -> Result<Response> {
    caller.may("cyborg:device_profile:create")?;
    // Cyborg takes a list of one profile; a bare profile object is taken too.
    let value: Value = json_body(&body)?;
    let one = match value {
        Value::Array(mut items) if items.len() == 1 => items.pop().unwrap_or(Value::Null),
        Value::Array(items) => {
            return Err(ApiError::bad_request(format!(
                "create one device profile per request (the list has {})",
                items.len()
            )))
        }
        other => other,
    };
    let p: ProfileIn = serde_json::from_value(one)
        .map_err(|e| ApiError::bad_request(format!("malformed device profile: {e}")))?;
    if p.groups.len() > limits.max_groups_per_profile {
        return Err(ApiError::bad_request(format!(
            "a device profile has at most {} groups (this one has {}): [api] max_groups_per_profile",
            limits.max_groups_per_profile,
            p.groups.len()
        )));
    }
    let created = service
        .create_profile(NewProfile {
            name: p.name,
            groups: p.groups,
            description: p.description,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(views::profile(&created, &base))).into_response())
}

async fn delete_profile(
    caller: Caller,
    State(service): State<Service>,
    Id(name_or_uuid): Id,
) -> Result<StatusCode> {
    caller.may("cyborg:device_profile:delete")?;
    service.delete_profile(&name_or_uuid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v2/device_profiles?value=a,b`: Cyborg's form for several profiles, by name
/// or UUID, deleted one after another (a missing one stops there with 404).
async fn delete_profiles(
    caller: Caller,
    State(service): State<Service>,
    RawQuery(raw): RawQuery,
) -> Result<StatusCode> {
    caller.may("cyborg:device_profile:delete")?;
    let pairs = query_pairs(raw)?;
    let Some(list) = pairs.get("value") else {
        return Err(ApiError::bad_request(
            "name the profiles to delete: ?value=NAME,NAME or /v2/device_profiles/{uuid}",
        ));
    };
    for name_or_uuid in names_of("value", list)? {
        service.delete_profile(&name_or_uuid).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
