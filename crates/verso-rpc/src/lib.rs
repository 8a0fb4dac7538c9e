//! verso-rpc: versioned RPC for services upgraded one node at a time, modelled on
//! oslo.messaging's RPC layer, typed and async.
//!
//! **Declare each method once, as a type.** A method is its argument struct with
//! `#[derive(RpcMethod)]` ([`RpcMethod`]: the name, the version that introduced it, each
//! argument with the version that added it and, if optional, its default, the reply
//! type); an API is the list of its methods at its newest version ([`RpcApi`]). The
//! server's endpoint, the client's calls, the lock file's `[rpc.*]` tables and the
//! `[upgrade_levels]` option are all built from those declarations, so client and server
//! cannot disagree on a name, a version or an argument:
//!
//! - [`Endpoint::for_api`] is the endpoint of an API, refused at registration unless it
//!   serves exactly the API's methods; [`Endpoint::handle`] adds each method's handler,
//!   which gets the decoded argument struct and returns the typed reply (or a
//!   [`RemoteError`], see [`RemoteException`] for the application's own error types);
//!   [`Endpoint::with_state`] hands every handler a clone of shared state.
//! - [`RpcClient::for_api`] is a client of an API on a topic; [`RpcClient::call_method`]
//!   sends a method value at the lowest version its arguments need (an argument at its
//!   default is left out for older servers) and returns the typed reply;
//!   [`RpcClient::cast_method`] does not wait.
//! - The operator's cap ([`caps`], read by [`config::ConfigLoader`] from `[upgrade_levels]`)
//!   is an upper limit checked *before* anything is sent: a call above it fails with
//!   [`RpcError::VersionCap`] and nothing goes on the wire, never relabelled, never run
//!   elsewhere. [`RpcClient::can_send`] and [`RpcClient::can_send_version`] answer from
//!   the cap alone, for a caller that builds an older form for older servers itself.
//! - [`RpcServer`] dispatches by oslo.messaging's rules (same major, minor at or below
//!   the endpoint's), checks and defaults the arguments, and answers failures in oslo's
//!   form; they come back typed ([`RpcError::Remote`]).
//!
//! ```
//! use std::sync::Arc;
//! use verso::{RequestContext, Version};
//! use verso_rpc::{transport::memory::MemoryTransport, Endpoint, MethodSpec, RpcApi, RpcClient,
//!     RpcError, RpcMethod, RpcServer, Target};
//!
//! /// Whether a host answers; 1.1 added `detail`.
//! #[derive(RpcMethod, Debug)]
//! #[rpc(since = "1.0", reply = String)]
//! struct Ping {
//!     host: String,
//!     #[rpc(since = "1.1", default = false)]
//!     detail: bool,
//! }
//!
//! struct Conductor;
//! impl RpcApi for Conductor {
//!     const NAME: &'static str = "conductor";
//!     const VERSION: Version = Version::new(1, 1);
//!     fn methods() -> Vec<&'static MethodSpec> {
//!         vec![Ping::spec()]
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), RpcError> {
//! let transport = Arc::new(MemoryTransport::new());
//! let endpoint = Endpoint::for_api::<Conductor>()
//!     .handle(|_ctx, p: Ping| async move { Ok(format!("{} up, detail={}", p.host, p.detail)) });
//! let server = RpcServer::new(transport.clone(), Target::new("conductor"))
//!     .endpoint(endpoint)?
//!     .start()
//!     .await?;
//!
//! // An operator pinned this API at 1.0 (`[upgrade_levels] conductor = "1.0"`).
//! let client = RpcClient::for_api::<Conductor>(transport, "conductor").version_cap(Version::new(1, 0));
//! let ctx = RequestContext::new("req-1");
//! let reply = client.call_method(&ctx, Ping { host: "h1".into(), detail: false }).await?;
//! assert_eq!(reply, "h1 up, detail=false"); // sent at 1.0: `detail` at its default
//!
//! // `detail` set needs 1.1: refused here, nothing sent.
//! let err = client.call_method(&ctx, Ping { host: "h1".into(), detail: true }).await.unwrap_err();
//! assert!(matches!(err, RpcError::VersionCap { .. }));
//! server.stop().await;
//! # Ok(()) }
//! ```
//!
//! **Underneath**, everything is the untyped oslo.messaging model, usable directly where
//! no Rust declaration exists (a tool that calls any method by name, a peer's API known
//! only at run time): [`Endpoint::new`] with [`Endpoint::method`] (a [`MethodSpec`] of
//! [`ArgSpec`]s and a handler of `serde_json` values), [`RpcClient::call`] and
//! [`RpcClient::cast`] with a method name, a version and a JSON object. Messages are
//! oslo.messaging's dicts ([`message`]), so a Rust peer and a Python peer talk over one
//! broker; objects travel as OVO primitives, and [`conductor`] serves and calls
//! oslo.versionedobjects' object indirection.
//!
//! **Pipelines and transports.** The client and the server are [`tower`] services built
//! from verso's layers ([`layer`]); [`RpcClient::layer`] and [`RpcServer::layer`] add the
//! application's. A [`transport::Transport`] carries requests:
//! [`transport::memory`] in-process, and RabbitMQ with oslo.messaging's wire (module
//! `transport::amqp`, cargo feature `amqp`, on by default; without it the crate has no
//! AMQP or TLS dependency); [`transport::transport_from_url`] picks one by URL. Feature
//! `testing` adds `testing`, a transport that records what was sent.
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
