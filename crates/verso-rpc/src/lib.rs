//! verso-rpc: versioned RPC for services upgraded one node at a time, modelled on
//! oslo.messaging's RPC layer, typed and async.
//!
//! - [`Target`]: where a message goes (topic, server, namespace).
//! - [`RpcClient`]: `call` and `cast`, each naming the version it needs; the operator's
//!   version cap ([`caps`]) is an upper limit checked *before* anything is sent, and
//!   [`RpcClient::can_send_version`] lets a caller build an older form for older servers.
//! - [`RpcServer`]: [`Endpoint`]s registered by namespace and version, dispatched by
//!   oslo.messaging's rules (same major, minor <=), methods declared with their arguments
//!   ([`MethodSpec`], [`ArgSpec`]); errors cross the wire as [`RemoteError`]s and come back
//!   typed ([`RpcError`]).
//! - [`transport::Transport`]: the small trait a transport implements;
//!   [`transport::memory`] is the embedded one.
//!
//! Messages are oslo.messaging's dicts ([`message`]), so a Rust peer and a Python peer
//! can talk over a broker. Arguments and results are `serde_json::Value`; objects travel
//! as primitives, converted by a [`Serializer`] hook.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use verso::{RequestContext, Version};
//! use verso_rpc::{transport::memory::MemoryTransport, *};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), RpcError> {
//! let transport = Arc::new(MemoryTransport::new());
//! let conductor = Endpoint::new(Version::new(1, 1)).method(
//!     MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
//!     |ctx: RequestContext, args: Args| async move {
//!         Ok(json!({"user": ctx.user, "arg": args.value("arg")}))
//!     },
//! );
//! let server = RpcServer::new(transport.clone(), Target::new("conductor").with_server("c1"))
//!     .endpoint(conductor)?
//!     .start()
//!     .await?;
//!
//! let client = RpcClient::new(transport, Target::new("conductor")).version_cap(Version::new(1, 0));
//! let ctx = RequestContext::new("req-1").with_user("demo");
//! let reply = client.call(&ctx, "ping", "1.0", json!({"arg": 42})).await?;
//! assert_eq!(reply, json!({"user": "demo", "arg": 42}));
//!
//! // Above the cap: refused locally, nothing sent.
//! let err = client.call(&ctx, "ping", "1.1", json!({"arg": 42})).await.unwrap_err();
//! assert!(matches!(err, RpcError::VersionCap { .. }));
//! server.stop().await;
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used))]

// The derives name this crate `::verso_rpc`, also from inside it.
extern crate self as verso_rpc;

mod backport;
pub mod caps;
pub mod client;
pub mod conductor;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod layer;
pub mod message;
pub mod method;
pub mod remote;
pub mod serializer;
pub mod server;
pub mod shutdown;
mod spec;
pub mod target;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod transport;
#[cfg(test)]
mod typed_tests;

pub use client::{
    ClientService, Delivery, IntoVersion, Outgoing, Prepared, RpcClient, TransportService,
    DEFAULT_TIMEOUT,
};
pub use endpoint::{
    ArgSpec, ArgType, Args, Endpoint, EndpointSpec, Handler, HandlerResult, MethodSpec,
    Requirement, WithState,
};
pub use error::RpcError;
pub use method::{Encoder, RpcApi, RpcMethod};
pub use remote::{RemoteError, RemoteException};
pub use serializer::{NoOpSerializer, Serializer};
pub use server::{
    DispatchService, Dispatcher, RpcServer, ServerHandle, ServerService, DEFAULT_MAX_CONCURRENCY,
};
pub use target::Target;
/// The `tower` crate the pipelines are built with, for writing layers.
pub use tower;
/// `#[derive(RpcMethod)]`: see [`method`].
pub use verso_derive::RpcMethod;
