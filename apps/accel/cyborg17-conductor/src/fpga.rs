//! Programming an FPGA at bind, as Cyborg 17's `FPGAExtARQ` does it: a request whose
//! profile group names a bitstream (`accel:bitstream_id`, a Glance image) or a function
//! (`accel:function_id`, the image whose `accel:function_id` property it is) is bound
//! by a job: the image's metadata read from Glance, the FPGA programmed by its host's
//! agent (Cyborg's agent API `fpga_program`, with the device's control path), the
//! deployable's provider given the function's trait
//! (`CUSTOM_FPGA_FUNCTION_ID_<DRIVER>_<FUNCTION>`, the old function traits taken off) and
//! the deployable its `bitstream_id`; then the request is bound as any other. A
//! deployable that already has the bitstream is bound at once. The API's call returns
//! when the job starts; Nova is told when every job of the patch has ended.
//!
//! Where this is not Cyborg 17, on purpose: Glance is found in the service user's
//! catalog (or `[glance] endpoint_override`), where Cyborg opens a `devstack-admin`
//! cloud; an agent answering `false` (its tool failed) fails the bind, where Cyborg
//! binds anyway; a function id's `-` becomes `_` in the trait (Cyborg writes `_-`, which
//! Placement refuses).

use crate::placement::Placement;
use crate::requests::RequestError;
use accel_cyborg17::keystone::Session;
use reqwest::Method;
use serde_json::Value;

/// The profile group key naming a bitstream image.
pub const BITSTREAM_ID: &str = "accel:bitstream_id";
/// The profile group key (and image property) naming a function.
pub const FUNCTION_ID: &str = "accel:function_id";
/// The prefix of the traits a programmed FPGA's provider gets.
pub const FUNCTION_TRAIT: &str = "CUSTOM_FPGA_FUNCTION_ID";

/// The trait of function `function_id` programmed by driver `driver_name`.
pub fn function_trait(driver_name: &str, function_id: &str) -> String {
    format!(
        "{FUNCTION_TRAIT}_{}_{}",
        driver_name.to_uppercase(),
        function_id.to_uppercase().replace('-', "_")
    )
}

/// Glance, as the conductor's service user sees it.
#[derive(Clone, Debug)]
pub struct Glance {
    session: Session,
    endpoint_override: Option<String>,
}

impl Glance {
    /// Glance at `endpoint_override`, or the catalog's `image`.
    pub fn new(session: Session, endpoint_override: Option<String>) -> Glance {
        Glance {
            session,
            endpoint_override: endpoint_override.map(|e| e.trim_end_matches('/').to_owned()),
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, Value), RequestError> {
        let endpoint = match &self.endpoint_override {
            Some(e) => e.clone(),
            None => self
                .session
                .endpoint("image")
                .await
                .map_err(|e| RequestError::Glance(e.to_string()))?,
        };
        let url = format!("{endpoint}{path}");
        let http = self.session.http();
        let response = self
            .session
            .send(|token| {
                http.request(Method::GET, &url)
                    .header("X-Auth-Token", token)
            })
            .await
            .map_err(|e| RequestError::Glance(e.to_string()))?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// The image `id`'s metadata, or `None` when Glance has no such image.
    pub async fn image(&self, id: &str) -> Result<Option<Value>, RequestError> {
        match self.get(&format!("/v2/images/{id}")).await? {
            (200, body) => Ok(Some(body)),
            (404, _) => Ok(None),
            (status, body) => Err(RequestError::Glance(format!(
                "GET /v2/images/{id}: HTTP {status}: {body}"
            ))),
        }
    }

    /// The one image whose `accel:function_id` property is `function_id`.
    pub async fn image_of_function(&self, function_id: &str) -> Result<Value, RequestError> {
        let path = format!("/v2/images?{FUNCTION_ID}={function_id}");
        let (status, body) = self.get(&path).await?;
        if status != 200 {
            return Err(RequestError::Glance(format!(
                "GET {path}: HTTP {status}: {body}"
            )));
        }
        match body["images"].as_array().map(Vec::as_slice) {
            Some([one]) => Ok(one.clone()),
            other => Err(RequestError::ExpectedOne {
                what: "image",
                count: other.map_or(0, <[Value]>::len),
            }),
        }
    }
}

/// Glance and Placement for programming at bind.
#[derive(Clone, Debug)]
pub struct Programming {
    /// Where bitstreams are.
    pub glance: Glance,
    /// Where the function traits go.
    pub placement: Placement,
}

impl Programming {
    /// Takes every `CUSTOM_FPGA_FUNCTION_ID*` trait off provider `rp` and gives it the
    /// trait of `function_id` (Cyborg's `_update_placement`).
    pub async fn function_traits(
        &self,
        rp: &str,
        driver_name: &str,
        function_id: &str,
    ) -> Result<(), RequestError> {
        let placement_error =
            |e: crate::placement::PlacementError| RequestError::Placement(e.to_string());
        self.placement
            .delete_traits_with_prefix(rp, FUNCTION_TRAIT)
            .await
            .map_err(placement_error)?;
        let name = function_trait(driver_name, function_id);
        self.placement
            .add_traits(rp, &[name.as_str()])
            .await
            .map_err(placement_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_trait_is_a_valid_trait_name() {
        assert_eq!(
            function_trait("intel", "a53a9c3e-1f2d"),
            "CUSTOM_FPGA_FUNCTION_ID_INTEL_A53A9C3E_1F2D"
        );
    }
}
