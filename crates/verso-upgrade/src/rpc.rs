//! Gates on RPC methods: a layer of the server pipeline that refuses a method until its
//! version is finalized (Ozone's `DisallowedUntilLayoutVersion`), with the typed
//! [`NotSupportedBeforeFinalization`], which reaches the caller as itself
//! (`RemoteError::downcast`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use serde_json::json;
//! use verso::{RequestContext, Version};
//! use verso_rpc::{transport::memory::MemoryTransport, Endpoint, MethodSpec, RpcClient, RpcError, RpcServer, Target};
//! use verso_upgrade::{component_versions, FileStore, NotSupportedBeforeFinalization, VersionManager};
//! use verso_upgrade::rpc::FinalizationGates;
//!
//! component_versions! {
//!     /// Agent versions.
//!     pub enum V: "agent" { Initial = 1 => "first", Cleanup = 2 => "cleanup_device" }
//! }
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("agent.version");
//! std::fs::write(&path, r#"{"format": 1, "component": "agent", "apparent": 1}"#)?;
//! let versions = VersionManager::<V>::open(FileStore::new(&path)).await?;
//!
//! let transport = Arc::new(MemoryTransport::new());
//! let endpoint = Endpoint::new(Version::new(1, 1))
//!     .method(MethodSpec::new("cleanup_device", Version::new(1, 1)), |_c, _a| async { Ok(json!("started")) });
//! let server = RpcServer::new(transport.clone(), Target::new("agent"))
//!     .endpoint(endpoint)?
//!     .layer(FinalizationGates::new(&versions).method("cleanup_device", V::Cleanup, "NVMe cleanup"))
//!     .start()
//!     .await?;
//! let client = RpcClient::new(transport, Target::new("agent"));
//! let ctx = RequestContext::new("req-1");
//! let err = client.call(&ctx, "cleanup_device", "1.1", json!({})).await.unwrap_err();
//! let RpcError::Remote(remote) = err else { panic!("not remote") };
//! assert_eq!(remote.downcast::<NotSupportedBeforeFinalization>().map(|e| e.required), Some(2));
//! versions.finalize().await?;
//! assert_eq!(client.call(&ctx, "cleanup_device", "1.1", json!({})).await?, json!("started"));
//! server.stop().await;
//! # Ok(()) }
//! ```

use crate::error::NotSupportedBeforeFinalization;
use crate::manager::{Gate, VersionManager};
use crate::version::ComponentVersion;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};
use verso_rpc::message::Request;
use verso_rpc::tower::{Layer, Service};
use verso_rpc::{RemoteError, RemoteException, RpcError};

impl RemoteException for NotSupportedBeforeFinalization {
    const KIND: &'static str = "NotSupportedBeforeFinalization";
    const MODULE: &'static str = "verso_upgrade";
}

/// A server layer refusing gated methods until their versions are finalized. Each gate
/// registers with the version manager, so the version counts as used.
pub struct FinalizationGates<V: ComponentVersion> {
    manager: VersionManager<V>,
    gates: Arc<HashMap<String, Gate<V>>>,
}

impl<V: ComponentVersion> Clone for FinalizationGates<V> {
    fn clone(&self) -> Self {
        FinalizationGates {
            manager: self.manager.clone(),
            gates: self.gates.clone(),
        }
    }
}

impl<V: ComponentVersion> std::fmt::Debug for FinalizationGates<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinalizationGates")
            .field("methods", &self.gates.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<V: ComponentVersion> FinalizationGates<V> {
    /// No gated methods yet.
    pub fn new(manager: &VersionManager<V>) -> Self {
        FinalizationGates {
            manager: manager.clone(),
            gates: Arc::new(HashMap::new()),
        }
    }

    /// Refuses `method` until `version` is finalized, naming `feature`.
    pub fn method(mut self, method: &str, version: V, feature: &str) -> Self {
        let gate = self.manager.gate(version, feature);
        Arc::make_mut(&mut self.gates).insert(method.to_owned(), gate);
        self
    }
}

impl<V: ComponentVersion, S> Layer<S> for FinalizationGates<V> {
    type Service = Gated<V, S>;

    fn layer(&self, inner: S) -> Self::Service {
        Gated {
            gates: self.gates.clone(),
            inner,
        }
    }
}

/// The service [`FinalizationGates`] wraps around the server's.
pub struct Gated<V: ComponentVersion, S> {
    gates: Arc<HashMap<String, Gate<V>>>,
    inner: S,
}

impl<V: ComponentVersion, S: Clone> Clone for Gated<V, S> {
    fn clone(&self) -> Self {
        Gated {
            gates: self.gates.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<V, S> Service<Request> for Gated<V, S>
where
    V: ComponentVersion,
    S: Service<Request, Response = Value, Error = RpcError>,
    S::Future: Send + 'static,
{
    type Response = Value;
    type Error = RpcError;
    type Future = futures::future::BoxFuture<'static, Result<Value, RpcError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if let Some(Err(refusal)) = self.gates.get(&request.method).map(Gate::check) {
            tracing::warn!(method = %request.method, %refusal, "refused before finalization");
            let remote = RemoteError::from_exception(&refusal);
            return Box::pin(async move { Err(RpcError::Remote(Box::new(remote))) });
        }
        Box::pin(self.inner.call(request))
    }
}
