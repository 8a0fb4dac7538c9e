//! Placement as Cyborg 17's conductor keeps it (`conductor/manager.py` and
//! `common/placement_client.py`): each deployable a provider named like the
//! deployable, with UUID `uuid3(NAMESPACE_DNS, name)`, under the provider named like the
//! host (Nova's compute node); an inventory of the deployable's `rc` attribute with
//! `total` = `max_unit` = its accelerators; its `trait*` attributes as traits. Each call
//! and its order are Cyborg's, so Placement ends where Cyborg's own conductor leaves it.

use accel_cyborg17::keystone::{Session, SessionError};
use reqwest::Method;
use serde_json::{json, Value};

/// Why a Placement call failed.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// No token or no endpoint.
    #[error("Placement: {0}")]
    Session(#[from] SessionError),
    /// The host has no provider in Placement (Cyborg's
    /// `PlacementResourceProviderNotFound`).
    #[error("Placement has no resource provider named {0}")]
    NoComputeNode(String),
    /// Placement answered a call with an error status.
    #[error("Placement refused {what}: HTTP {status}: {body}")]
    Refused {
        /// The call.
        what: String,
        /// Its status.
        status: u16,
        /// Placement's answer.
        body: String,
    },
    /// The deployable has no `rc` attribute, so nothing to offer.
    #[error("deployable {0} has no rc attribute")]
    NoResourceClass(String),
}

impl PlacementError {
    /// The name of the Cyborg 17 exception that stands for this error.
    pub fn cyborg_exception(&self) -> &'static str {
        match self {
            PlacementError::NoComputeNode(_) => "PlacementResourceProviderNotFound",
            PlacementError::Refused { status: 409, .. } => "ResourceProviderInUse",
            PlacementError::NoResourceClass(_) => "InvalidResourceClass",
            _ => "PlacementServerError",
        }
    }
}

/// The provider UUID Cyborg gives a deployable: `uuid3(NAMESPACE_DNS, name)`.
pub fn rp_uuid(name: &str) -> String {
    uuid::Uuid::new_v3(&uuid::Uuid::NAMESPACE_DNS, name.as_bytes()).to_string()
}

/// The inventory Cyborg writes for `total` units of `resource_class`.
fn inventory(resource_class: &str, total: i64) -> Value {
    json!({ resource_class: { "total": total, "max_unit": total } })
}

/// Placement's client with a service user's session.
#[derive(Clone, Debug)]
pub struct Placement {
    session: Session,
    endpoint_override: Option<String>,
}

impl Placement {
    /// A client; its endpoint is `endpoint_override` or the catalog's `placement`.
    pub fn new(session: Session, endpoint_override: Option<String>) -> Placement {
        Placement {
            session,
            endpoint_override: endpoint_override.map(|e| e.trim_end_matches('/').to_owned()),
        }
    }

    /// One call at `microversion` (Placement's 1.0 when `None`): status and JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value), PlacementError> {
        let endpoint = match &self.endpoint_override {
            Some(e) => e.clone(),
            None => self.session.endpoint("placement").await?,
        };
        let url = format!("{endpoint}{path}");
        let http = self.session.http();
        let response = self
            .session
            .send(|token| {
                let mut r = http
                    .request(method.clone(), &url)
                    .header("X-Auth-Token", token);
                if let Some(v) = microversion {
                    r = r.header("OpenStack-API-Version", format!("placement {v}"));
                }
                match body {
                    Some(b) => r.json(b),
                    None => r,
                }
            })
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    async fn expect(
        &self,
        method: Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, PlacementError> {
        let (status, value) = self.call(method.clone(), path, microversion, body).await?;
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            Err(PlacementError::Refused {
                what: format!("{method} {path}"),
                status,
                body: value.to_string(),
            })
        }
    }

    /// The provider named like the host (Cyborg's `_get_root_provider`).
    pub async fn root_provider(&self, host: &str) -> Result<String, PlacementError> {
        let path = format!("/resource_providers?name={}", encode(host));
        let found = self.expect(Method::GET, &path, None, None).await?;
        found["resource_providers"][0]["uuid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| PlacementError::NoComputeNode(host.to_owned()))
    }

    /// Cyborg's `get_placement_needed_info_and_report` for one deployable: its resource
    /// class made, its provider made under `parent` if missing, its inventory and its
    /// traits added. Returns the provider's UUID.
    pub async fn report_deployable(
        &self,
        parent: &str,
        name: &str,
        attributes: &[(&str, &str)],
        total: i64,
    ) -> Result<String, PlacementError> {
        let resource_class = attributes
            .iter()
            .find(|(k, _)| *k == "rc")
            .map(|(_, v)| *v)
            .ok_or_else(|| PlacementError::NoResourceClass(name.to_owned()))?;
        let traits: Vec<&str> = attributes
            .iter()
            .filter(|(k, _)| k.starts_with("trait"))
            .map(|(_, v)| *v)
            .collect();
        self.ensure_resource_class(resource_class).await?;
        let uuid = rp_uuid(name);
        let (status, _) = self
            .call(
                Method::GET,
                &format!("/resource_providers/{uuid}"),
                Some("1.6"),
                None,
            )
            .await?;
        if status != 200 {
            self.expect(
                Method::POST,
                "/resource_providers",
                Some("1.20"),
                Some(&json!({"uuid": uuid, "name": name, "parent_provider_uuid": parent})),
            )
            .await?;
        }
        self.update_inventory(&uuid, resource_class, total).await?;
        self.add_traits(&uuid, &traits).await?;
        Ok(uuid)
    }

    /// Makes a custom resource class (a standard one exists already).
    pub async fn ensure_resource_class(&self, name: &str) -> Result<(), PlacementError> {
        if !name.starts_with("CUSTOM_") {
            return Ok(());
        }
        self.expect(
            Method::PUT,
            &format!("/resource_classes/{name}"),
            Some("1.7"),
            None,
        )
        .await?;
        Ok(())
    }

    async fn generation(&self, uuid: &str) -> Result<Value, PlacementError> {
        let rp = self
            .expect(
                Method::GET,
                &format!("/resource_providers/{uuid}"),
                None,
                None,
            )
            .await?;
        Ok(rp["generation"].clone())
    }

    /// Replaces a provider's inventory with `total` units of `resource_class`.
    pub async fn update_inventory(
        &self,
        uuid: &str,
        resource_class: &str,
        total: i64,
    ) -> Result<(), PlacementError> {
        let body = json!({
            "resource_provider_generation": self.generation(uuid).await?,
            "inventories": inventory(resource_class, total),
        });
        self.expect(
            Method::PUT,
            &format!("/resource_providers/{uuid}/inventories"),
            None,
            Some(&body),
        )
        .await?;
        Ok(())
    }

    /// Replaces a provider's inventory with `total` units of `resource_class`, `reserved`
    /// of them held back (Cyborg's `update_rp_inventory_reserved`, Placement 1.26: the
    /// API's device disable reserves every unit, enable none; `max_unit` left to
    /// Placement's default, as Cyborg leaves it).
    pub async fn update_reserved(
        &self,
        uuid: &str,
        resource_class: &str,
        total: i64,
        reserved: i64,
    ) -> Result<(), PlacementError> {
        let body = json!({
            "resource_provider_generation": self.generation(uuid).await?,
            "inventories": { resource_class: { "total": total, "reserved": reserved } },
        });
        self.expect(
            Method::PUT,
            &format!("/resource_providers/{uuid}/inventories"),
            Some("1.26"),
            Some(&body),
        )
        .await?;
        Ok(())
    }

    async fn traits_of(&self, uuid: &str) -> Result<Vec<String>, PlacementError> {
        let found = self
            .expect(
                Method::GET,
                &format!("/resource_providers/{uuid}/traits"),
                Some("1.6"),
                None,
            )
            .await?;
        Ok(found["traits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect())
    }

    async fn put_traits(&self, uuid: &str, traits: &[String]) -> Result<(), PlacementError> {
        let body = json!({
            "resource_provider_generation": self.generation(uuid).await?,
            "traits": traits,
        });
        self.expect(
            Method::PUT,
            &format!("/resource_providers/{uuid}/traits"),
            Some("1.6"),
            Some(&body),
        )
        .await?;
        Ok(())
    }

    /// Adds traits to a provider, making the custom ones that do not exist yet
    /// (Cyborg's `add_traits_to_rp`).
    pub async fn add_traits(&self, uuid: &str, names: &[&str]) -> Result<(), PlacementError> {
        for name in names {
            let (status, _) = self
                .call(Method::GET, &format!("/traits/{name}"), Some("1.6"), None)
                .await?;
            if status != 204 && status != 200 {
                let (status, body) = self
                    .call(Method::PUT, &format!("/traits/{name}"), Some("1.6"), None)
                    .await?;
                if status != 201 && status != 204 {
                    return Err(PlacementError::Refused {
                        what: format!("PUT /traits/{name}"),
                        status,
                        body: body.to_string(),
                    });
                }
            }
        }
        let mut traits = self.traits_of(uuid).await?;
        for name in names {
            if !traits.iter().any(|t| t == name) {
                traits.push((*name).to_owned());
            }
        }
        self.put_traits(uuid, &traits).await
    }

    /// Takes every trait whose name starts with `prefix` off a provider (Cyborg's
    /// `delete_traits_with_prefixes`).
    pub async fn delete_traits_with_prefix(
        &self,
        uuid: &str,
        prefix: &str,
    ) -> Result<(), PlacementError> {
        let traits: Vec<String> = self
            .traits_of(uuid)
            .await?
            .into_iter()
            .filter(|t| !t.starts_with(prefix))
            .collect();
        self.put_traits(uuid, &traits).await
    }

    /// Takes a trait off a provider and deletes the trait itself where nothing else has
    /// it (Cyborg's `delete_trait_by_name`: a refused delete is only logged).
    pub async fn delete_trait(&self, uuid: &str, name: &str) -> Result<(), PlacementError> {
        let traits: Vec<String> = self
            .traits_of(uuid)
            .await?
            .into_iter()
            .filter(|t| t != name)
            .collect();
        self.put_traits(uuid, &traits).await?;
        let (status, body) = self
            .call(
                Method::DELETE,
                &format!("/traits/{name}"),
                Some("1.6"),
                None,
            )
            .await?;
        if status != 204 {
            tracing::info!(trait_name = name, status, %body, "Placement kept the trait");
        }
        Ok(())
    }

    /// Deletes a resource class where nothing uses it (a refused delete is only logged).
    pub async fn delete_resource_class(&self, name: &str) -> Result<(), PlacementError> {
        let (status, body) = self
            .call(
                Method::DELETE,
                &format!("/resource_classes/{name}"),
                Some("1.7"),
                None,
            )
            .await?;
        if status != 204 {
            tracing::info!(resource_class = name, status, %body, "Placement kept the resource class");
        }
        Ok(())
    }

    /// Deletes a provider and its children (Cyborg's
    /// `_delete_provider_and_sub_providers`): a provider in use is refused (409).
    pub async fn delete_tree(&self, uuid: &str) -> Result<(), PlacementError> {
        let tree = self
            .expect(
                Method::GET,
                &format!("/resource_providers?in_tree={uuid}"),
                Some("1.14"),
                None,
            )
            .await?;
        let providers = tree["resource_providers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for rp in providers.iter().rev() {
            let this = rp["uuid"].as_str().unwrap_or_default();
            if rp["parent_provider_uuid"].as_str() == Some(uuid) || this == uuid {
                self.expect(
                    Method::DELETE,
                    &format!("/resource_providers/{this}"),
                    None,
                    None,
                )
                .await?;
                tracing::info!(rp_uuid = this, "deleted a resource provider");
                if this == uuid {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// A host name as a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployables_provider_uuid_is_cyborgs() {
        // Python's uuid.uuid3(uuid.NAMESPACE_DNS, name).
        assert_eq!(
            rp_uuid("example.com"),
            "9073926b-929f-31c2-abc9-fad77ae3e8eb"
        );
        assert_eq!(
            rp_uuid("host1_nic_vf1"),
            "4205afd2-13af-359e-a976-ac1c5a97bfac"
        );
    }

    #[test]
    fn host_names_are_encoded_for_a_query() {
        assert_eq!(encode("node-1.example"), "node-1.example");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
