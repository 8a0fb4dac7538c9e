//! FPGAs programmed at bind, as Cyborg 17's `FPGAExtARQ` programs them: a request whose
//! profile group names a bitstream (`accel:bitstream_id`, a Glance image's UUID) or a
//! function (`accel:function_id`, which one image's `accel:function_id` property names)
//! has its FPGA programmed by its host's agent before the bind answers, with the image's
//! metadata read from Glance here; the deployable then records the bitstream
//! (`deployables.bitstream_id`, Cyborg's column) and, when the image names a function,
//! the function's trait as an attribute ([`FUNCTION_ATTRIBUTE`]), which the Placement
//! sync gives the deployable's provider (`CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>`,
//! the trait before it gone with the attribute's old value). A deployable that already
//! has the bitstream is bound without programming.
//!
//! [`crate::service::Shared::bind`] does it; [`Programming::of`] reads what a group asks.

use accel_keystone::{Service, Session};
use serde_json::Value;
use std::collections::BTreeMap;

/// The profile group key naming a bitstream image.
pub const BITSTREAM_ID: &str = "accel:bitstream_id";
/// The profile group key (and image property) naming a function.
pub const FUNCTION_ID: &str = "accel:function_id";
/// The prefix of the traits a programmed FPGA's provider gets.
pub const FUNCTION_TRAIT: &str = "CUSTOM_FPGA_FUNCTION_ID";
/// The attribute holding a programmed deployable's function trait: a `trait` key, so
/// the Placement sync gives its value to the provider
/// ([`crate::placement::class_and_traits`]); no agent reports it, so reports keep it.
pub const FUNCTION_ATTRIBUTE: &str = "trait_fpga_function";

/// The trait of function `function_id` programmed by driver `driver_name`: upper case,
/// every character Placement does not take in a trait name (`-`, `.`, ...) an `_`.
pub fn function_trait(driver_name: &str, function_id: &str) -> String {
    let part = |s: &str| {
        s.to_uppercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect::<String>()
    };
    format!(
        "{FUNCTION_TRAIT}_{}_{}",
        part(driver_name),
        part(function_id)
    )
}

/// What a profile group asks to be programmed at bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Programming {
    /// Nothing: the bind only allocates.
    None,
    /// This bitstream (a Glance image's UUID).
    Bitstream(String),
    /// The one image whose `accel:function_id` property is this.
    Function(String),
}

impl Programming {
    /// What `group` asks; naming both a bitstream and a function is refused (which
    /// would be programmed is not said), with the message.
    pub fn of(group: &BTreeMap<String, String>) -> Result<Programming, String> {
        match (group.get(BITSTREAM_ID), group.get(FUNCTION_ID)) {
            (None, None) => Ok(Programming::None),
            (Some(b), None) => Ok(Programming::Bitstream(b.clone())),
            (None, Some(f)) => Ok(Programming::Function(f.clone())),
            (Some(_), Some(_)) => Err(format!(
                "the profile group sets both {BITSTREAM_ID} and {FUNCTION_ID}; only one may be set"
            )),
        }
    }
}

/// Glance's image metadata, as the conductor's `[glance]` service user reads it.
#[derive(Clone, Debug)]
pub struct Glance {
    service: Service,
}

impl Glance {
    /// Glance at `endpoint_override`, or the catalog's `image` service.
    pub fn new(session: Session, endpoint_override: Option<String>) -> Glance {
        Glance {
            service: Service::new(session, "image", endpoint_override),
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, Value), String> {
        let endpoint = self
            .service
            .endpoint()
            .await
            .map_err(|e| format!("Glance's endpoint: {e}"))?;
        let url = format!("{endpoint}{path}");
        let session = self.service.session();
        let http = session.http();
        let response = session
            .send(|token| http.get(&url).header("X-Auth-Token", token))
            .await
            .map_err(|e| format!("Glance: GET {path}: {e}"))?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// The image `id`'s metadata (its `id` and properties), or why not: Glance has no
    /// such image, or did not answer.
    pub async fn image(&self, id: &str) -> Result<Value, String> {
        match self.get(&format!("/v2/images/{id}")).await? {
            (200, body) => Ok(body),
            (404, _) => Err(format!("bitstream {id} not found in Glance")),
            (status, body) => Err(format!(
                "Glance: GET /v2/images/{id}: HTTP {status}: {body}"
            )),
        }
    }

    /// The one image whose `accel:function_id` property is `function_id`, or why not
    /// (none or several: which to program is not said).
    pub async fn image_of_function(&self, function_id: &str) -> Result<Value, String> {
        let path = format!("/v2/images?{FUNCTION_ID}={function_id}");
        let (status, body) = self.get(&path).await?;
        if status != 200 {
            return Err(format!("Glance: GET {path}: HTTP {status}: {body}"));
        }
        match body["images"].as_array().map(Vec::as_slice) {
            Some([one]) => Ok(one.clone()),
            other => Err(format!(
                "{} images in Glance have {FUNCTION_ID} {function_id}, where one must",
                other.map_or(0, <[Value]>::len)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_trait_is_a_trait_placement_takes() {
        assert_eq!(
            function_trait("xclmgmt", "a53a9c3e-1f2d.v2"),
            "CUSTOM_FPGA_FUNCTION_ID_XCLMGMT_A53A9C3E_1F2D_V2"
        );
        assert!(accel_objects::traits::is_custom_name(&function_trait(
            "intel-fpga",
            "f"
        )));
    }

    #[test]
    fn a_group_asks_for_a_bitstream_a_function_or_nothing() {
        let g = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            Programming::of(&g(&[("resources:FPGA", "1")])),
            Ok(Programming::None)
        );
        assert_eq!(
            Programming::of(&g(&[(BITSTREAM_ID, "b")])),
            Ok(Programming::Bitstream("b".into()))
        );
        assert_eq!(
            Programming::of(&g(&[(FUNCTION_ID, "f")])),
            Ok(Programming::Function("f".into()))
        );
        let both = Programming::of(&g(&[(BITSTREAM_ID, "b"), (FUNCTION_ID, "f")]));
        assert!(both.is_err_and(|e| e.contains("only one")));
    }
}
