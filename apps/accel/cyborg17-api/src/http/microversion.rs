//! Microversion negotiation: the `OpenStack-API-Version: accelerator 2.x` header.
//! Release N's frozen copy of `accel_api::microversion` (N+1's), so the versions release
//! N serves do not change when N+1's do.
//!
//! The supported range is declared once, here ([`MIN`], [`MAX`]); everything else (the
//! version documents, the 406 message, the response headers) reads it from here.
//!
//! - no header, or a header without an `accelerator` entry: [`MIN`];
//! - `accelerator latest`: [`MAX`];
//! - `accelerator 2.1`: that version, if it lies in `MIN..=MAX`;
//! - anything else (another major, a minor out of range, text that is not `X.Y`): 406,
//!   with a message naming the supported range.
//!
//! Every response carries `OpenStack-API-Version: accelerator <version served>`,
//! `Vary: OpenStack-API-Version` and, as Cyborg's, the range served:
//! `OpenStack-API-Minimum-Version: 2.0`, `OpenStack-API-Maximum-Version: <max>`.

use crate::http::error::{ApiError, ErrorKind};
use axum::extract::Request;
use axum::http::header::VARY;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::fmt;

/// The service type named in the header.
pub const SERVICE_TYPE: &str = "accelerator";

/// The header's name (lower case, as HTTP/2 and `http` spell it).
pub const HEADER: HeaderName = HeaderName::from_static("openstack-api-version");

/// The oldest microversion served: what a request without the header gets.
pub const MIN: ApiVersion = ApiVersion::new(2, 0);

/// The newest microversion served: what `latest` gets.
pub const MAX: ApiVersion = ApiVersion::new(2, 3);

/// Cyborg's 2.1: an ARQ's `project_id` (accel shows it at every version).
pub const PROJECT_ID: ApiVersion = ApiVersion::new(2, 1);

/// Cyborg's 2.2: a device profile looked up by name (accel allows it at every version).
pub const PROFILE_BY_NAME: ApiVersion = ApiVersion::new(2, 2);

/// Cyborg's 2.3: a device's `status` (`enabled`, or `maintaining` after
/// `POST /v2/devices/{uuid}/disable`); accel adds `inventory_status` (`available`;
/// `missing` or `lost` when its host's reports dropped it while in use).
pub const DEVICE_STATUS: ApiVersion = ApiVersion::new(2, 3);

/// The range a router serves: [`MIN`] up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Supported {
    /// The newest version served (what `latest` gets).
    pub max: ApiVersion,
}

impl Supported {
    /// Everything this build has: [`MIN`] to [`MAX`].
    pub const ALL: Supported = Supported { max: MAX };
}

/// A microversion, `MAJOR.MINOR`, compared as a pair of integers (`2.10 > 2.9`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    /// Major.
    pub major: u16,
    /// Minor.
    pub minor: u16,
}

impl ApiVersion {
    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> ApiVersion {
        ApiVersion { major, minor }
    }

    /// True when this request's version has the feature introduced at `since`.
    pub fn at_least(self, since: ApiVersion) -> bool {
        self >= since
    }

    /// Parses `X.Y` (decimal digits, no sign, no leading zeros except `0` itself).
    pub fn parse(text: &str) -> Option<ApiVersion> {
        let (major, minor) = text.split_once('.')?;
        Some(ApiVersion::new(number(major)?, number(minor)?))
    }
}

fn number(s: &str) -> Option<u16> {
    let digits_only = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = s == "0" || !s.starts_with('0');
    if digits_only && no_leading_zero {
        s.parse().ok()
    } else {
        None
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a requested microversion is refused (answered with 406).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Well formed, but outside `MIN..=max`.
    #[error("accelerator API version {requested} is not supported: this service supports {MIN} to {max}")]
    Unsupported {
        /// What was asked for.
        requested: ApiVersion,
        /// The newest version served.
        max: ApiVersion,
    },
    /// Not `X.Y` or `latest`.
    #[error("invalid OpenStack-API-Version value {value:?}: use \"accelerator X.Y\" with X.Y from {MIN} to {max}, or \"accelerator latest\"")]
    Malformed {
        /// The header's text.
        value: String,
        /// The newest version served.
        max: ApiVersion,
    },
}

/// The version a request asks for, from its headers (see the module docs).
pub fn negotiate(headers: &HeaderMap) -> Result<ApiVersion, VersionError> {
    negotiate_within(headers, Supported::ALL)
}

/// [`negotiate`] for a router serving `supported`.
pub fn negotiate_within(
    headers: &HeaderMap,
    supported: Supported,
) -> Result<ApiVersion, VersionError> {
    let max = supported.max;
    for value in headers.get_all(&HEADER) {
        let text = value.to_str().map_err(|_| VersionError::Malformed {
            value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
            max,
        })?;
        // Several services may share one header: "compute 2.60, accelerator 2.1".
        for entry in text.split(',') {
            let mut words = entry.split_whitespace();
            let Some(service) = words.next() else {
                continue;
            };
            if !service.eq_ignore_ascii_case(SERVICE_TYPE) {
                continue;
            }
            let malformed = || VersionError::Malformed {
                value: entry.trim().to_owned(),
                max,
            };
            let (Some(version), None) = (words.next(), words.next()) else {
                return Err(malformed());
            };
            if version.eq_ignore_ascii_case("latest") {
                return Ok(max);
            }
            let requested = ApiVersion::parse(version).ok_or_else(malformed)?;
            if requested < MIN || requested > max {
                return Err(VersionError::Unsupported { requested, max });
            }
            return Ok(requested);
        }
    }
    Ok(MIN)
}

/// The `OpenStack-API-Version` value for a version.
pub fn header_value(version: ApiVersion) -> HeaderValue {
    // Digits, a dot, a space and ASCII letters: always a valid header value.
    HeaderValue::try_from(format!("{SERVICE_TYPE} {version}"))
        .unwrap_or_else(|_| HeaderValue::from_static("accelerator"))
}

/// `Vary`, and the range served as Cyborg states it on every answer:
/// `OpenStack-API-Minimum-Version` and `OpenStack-API-Maximum-Version` (bare versions).
fn add_vary(headers: &mut HeaderMap, supported: Supported) {
    headers.append(VARY, HeaderValue::from_static("OpenStack-API-Version"));
    for (name, version) in [(MIN_HEADER, MIN), (MAX_HEADER, supported.max)] {
        if let Ok(value) = HeaderValue::try_from(version.to_string()) {
            headers.insert(name, value);
        }
    }
}

/// The oldest version served, on every answer.
pub const MIN_HEADER: HeaderName = HeaderName::from_static("openstack-api-minimum-version");

/// The newest version served, on every answer.
pub const MAX_HEADER: HeaderName = HeaderName::from_static("openstack-api-maximum-version");

/// Middleware: negotiates the version (within the [`Supported`] range in the request's
/// extensions, [`Supported::ALL`] without one), puts it in the request's extensions
/// (handlers take it as `Extension<ApiVersion>`), and adds the response headers; answers
/// 406 itself for a refused version.
pub async fn layer(mut request: Request, next: Next) -> Response {
    let supported = request
        .extensions()
        .get::<Supported>()
        .copied()
        .unwrap_or(Supported::ALL);
    match negotiate_within(request.headers(), supported) {
        Ok(version) => {
            request.extensions_mut().insert(version);
            let mut response = next.run(request).await;
            let headers = response.headers_mut();
            headers.insert(HEADER, header_value(version));
            add_vary(headers, supported);
            response
        }
        Err(e) => {
            let mut response =
                ApiError::new(ErrorKind::NotAcceptable, e.to_string()).into_response();
            add_vary(response.headers_mut(), supported);
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(values: &[&str]) -> Result<ApiVersion, VersionError> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HEADER, HeaderValue::from_str(v).expect("test header"));
        }
        negotiate(&h)
    }

    #[test]
    fn negotiation() {
        assert_eq!(ask(&[]), Ok(MIN));
        assert_eq!(ask(&["accelerator 2.0"]), Ok(ApiVersion::new(2, 0)));
        assert_eq!(ask(&["accelerator 2.1"]), Ok(ApiVersion::new(2, 1)));
        assert_eq!(ask(&["Accelerator LATEST"]), Ok(MAX));
        assert_eq!(ask(&["compute 2.60"]), Ok(MIN));
        assert_eq!(
            ask(&["compute 2.60, accelerator 2.1"]),
            Ok(ApiVersion::new(2, 1))
        );
        assert_eq!(
            ask(&["compute 2.60", "accelerator 2.1"]),
            Ok(ApiVersion::new(2, 1))
        );
        assert!(matches!(
            ask(&["accelerator 2.9"]),
            Err(VersionError::Unsupported { .. })
        ));
        assert!(matches!(
            ask(&["accelerator 3.0"]),
            Err(VersionError::Unsupported { .. })
        ));
        assert!(matches!(
            ask(&["accelerator 1.0"]),
            Err(VersionError::Unsupported { .. })
        ));
        for bad in [
            "accelerator",
            "accelerator 2",
            "accelerator 2.x",
            "accelerator 2.1 2.0",
            "accelerator 02.1",
            "accelerator -2.1",
            "accelerator 99999.1",
        ] {
            assert!(
                matches!(ask(&[bad]), Err(VersionError::Malformed { .. })),
                "{bad}"
            );
        }
        assert!(ApiVersion::new(2, 10) > ApiVersion::new(2, 9));
    }

    #[test]
    fn refusals_name_the_range() {
        let e = ask(&["accelerator 2.9"]).expect_err("2.9 is refused");
        assert!(e.to_string().contains("2.0 to 2.3"), "{e}");
        let e = ask(&["accelerator banana"]).expect_err("refused");
        assert!(e.to_string().contains("2.0 to 2.3"), "{e}");
    }
}
