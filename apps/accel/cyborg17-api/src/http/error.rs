//! Errors: [`ServiceError`], what an [`AccelService`](crate::http::AccelService) returns, and
//! [`ApiError`], the JSON error a client receives (release N's frozen copy of
//! `accel_api::error`, N+1's, so release N's errors do not change when N+1's do):
//!
//! ```json
//! {"error": {"status": 404, "type": "NotFound", "message": "device 1b3e... not found"},
//!  "error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"device 1b3e... not found\", \"debuginfo\": null}"}
//! ```
//!
//! `error` is accel's typed form; `error_message` is Cyborg's (a JSON text, as its WSME
//! errors are), for Cyborg's clients.
//!
//! | [`ErrorKind`] | status |
//! |---|---|
//! | `BadRequest` (bad JSON, unknown patch path, bad limit, a group the database refuses) | 400 |
//! | `NotFound` (also an unknown path) | 404 |
//! | `MethodNotAllowed` | 405 |
//! | `NotAcceptable` (a microversion outside the supported range) | 406 |
//! | `RequestTimeout` (a request body that stalled longer than the body read timeout) | 408 |
//! | `TooLarge` (a body over 2 MiB) | 413 |
//! | `Duplicate`, `InvalidTransition`, `NoFreeHandle`, `ProfileInUse` | 409 |
//! | `Internal` (the database failed; logged at error, the message is generic) | 500 |
//! | `Unavailable` (the database or the conductor cannot be reached: nothing was done, retry later) | 503 |
//! | `OutcomeUnknown` (the conductor took a write and its answer was lost: it timed out, went silent or the broker dropped; or the request outlived the request timeout; or the write was made and reading it back failed; or the database dropped during a direct write; the message says whether a retry is safe) | 503 |

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A boxed error kept as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, as a client can act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or names something invalid (400).
    BadRequest,
    /// No valid token came with the request (401).
    Unauthorized,
    /// The policy does not allow the caller this (403).
    Forbidden,
    /// Nothing has that id (404).
    NotFound,
    /// The resource does not take that method (405).
    MethodNotAllowed,
    /// The microversion asked for is not served (406).
    NotAcceptable,
    /// The request body is larger than the API takes (413).
    TooLarge,
    /// The request body stalled (408).
    RequestTimeout,
    /// A unique name is taken (409).
    Duplicate,
    /// The accelerator request is in a state that does not allow the change (409).
    InvalidTransition,
    /// No free device matches an accelerator request on the host (409).
    NoFreeHandle,
    /// A device profile is used by accelerator requests (409).
    ProfileInUse,
    /// The service behind the API cannot be reached (503).
    Unavailable,
    /// A write was sent to the conductor and no answer came: it may or may not have
    /// happened (503; the message says whether retrying is safe).
    OutcomeUnknown,
    /// An FPGA could not be programmed (500, as Cyborg's `FPGAProgramError`; the reason
    /// in the message).
    ProgramFailed,
    /// A failure the client cannot fix (500).
    Internal,
}

impl ErrorKind {
    /// The HTTP status.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::Duplicate
            | ErrorKind::InvalidTransition
            | ErrorKind::NoFreeHandle
            | ErrorKind::ProfileInUse => StatusCode::CONFLICT,
            ErrorKind::Unavailable | ErrorKind::OutcomeUnknown => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ProgramFailed | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `type` of the JSON error.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "BadRequest",
            ErrorKind::Unauthorized => "Unauthorized",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::NotFound => "NotFound",
            ErrorKind::MethodNotAllowed => "MethodNotAllowed",
            ErrorKind::NotAcceptable => "NotAcceptable",
            ErrorKind::TooLarge => "RequestTooLarge",
            ErrorKind::RequestTimeout => "RequestTimeout",
            ErrorKind::Duplicate => "Duplicate",
            ErrorKind::InvalidTransition => "InvalidTransition",
            ErrorKind::NoFreeHandle => "NoFreeHandle",
            ErrorKind::ProfileInUse => "ProfileInUse",
            ErrorKind::Unavailable => "ServiceUnavailable",
            ErrorKind::OutcomeUnknown => "OutcomeUnknown",
            ErrorKind::ProgramFailed => "FPGAProgramError",
            ErrorKind::Internal => "InternalError",
        }
    }
}

/// An error of an [`AccelService`](crate::http::AccelService) operation: a kind, a message
/// for the client, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// What the client is told (for `Internal`, the log gets it instead).
    pub message: String,
    /// The cause.
    #[source]
    pub source: Option<BoxError>,
}

impl ServiceError {
    /// An error without a cause.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ServiceError {
        ServiceError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// An error with its cause.
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> ServiceError {
        ServiceError {
            kind,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorKind::BadRequest, message)
    }
}

/// The error a client receives, as JSON with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl ApiError {
    /// An error of that kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::BadRequest, message)
    }
}

/// The message and its causes, joined.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        match e.kind {
            ErrorKind::Internal => {
                tracing::error!(error = %chain(&e), "accel API request failed");
                ApiError::new(
                    ErrorKind::Internal,
                    "internal error; the accel API log has the details",
                )
            }
            ErrorKind::Unavailable | ErrorKind::OutcomeUnknown => {
                tracing::error!(error = %chain(&e), "accel API backend unavailable");
                ApiError::new(e.kind, e.message)
            }
            kind => ApiError::new(kind, e.message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.kind.status();
        // Cyborg's clients (python-cyborgclient, Nova's logs) read `error_message`: a JSON
        // text with `faultcode` and `faultstring`, as Cyborg's WSME errors are.
        let fault = json!({
            "faultcode": if status.is_server_error() { "Server" } else { "Client" },
            "faultstring": self.message,
            "debuginfo": null,
        });
        let body = json!({
            "error": {
                "status": status.as_u16(),
                "type": self.kind.name(),
                "message": self.message,
            },
            "error_message": fault.to_string(),
        });
        (status, Json(body)).into_response()
    }
}
