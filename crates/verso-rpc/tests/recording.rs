//! `verso_rpc::testing` from outside the crate (the `testing` feature): a client capped by
//! the configuration sends nothing above its cap, and what it sends is recorded.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use std::sync::Arc;
use verso::{RequestContext, Version};
use verso_rpc::caps::ApiCap;
use verso_rpc::config::ConfigLoader;
use verso_rpc::testing::{Recording, Sent};
use verso_rpc::{Endpoint, MethodSpec, RpcClient, RpcError, RpcServer, Target};

#[tokio::test]
async fn a_call_above_the_configured_cap_sends_nothing() {
    let config = ConfigLoader::new()
        .api(ApiCap::new(
            "scheduler",
            Version::new(2, 3),
            Version::new(2, 0),
        ))
        .env_vars([])
        .set("upgrade_levels.scheduler=2.1")
        .load()
        .expect("valid");
    let t = Recording::default();
    let server = RpcServer::new(
        Arc::new(t.clone()),
        Target::new("scheduler").with_server("s1"),
    )
    .endpoint(Endpoint::new(Version::new(2, 3)).method(
        MethodSpec::new("select", Version::new(2, 0)),
        |_ctx, _args| async { Ok(json!("host1")) },
    ))
    .expect("valid")
    .start()
    .await
    .expect("listening");
    let client = RpcClient::new(
        Arc::new(t.clone()),
        Target::new("scheduler").with_version(Version::new(2, 3)),
    )
    .version_cap(config.cap("scheduler").expect("declared"));
    let ctx = RequestContext::new("req-1");

    let err = client
        .call(&ctx, "select", "2.2", json!({}))
        .await
        .expect_err("above the cap");
    assert!(err.is_version_cap(), "{err:?}");
    assert_eq!(t.count(), 0, "nothing sent");

    let got = client
        .call(&ctx, "select", "2.1", json!({}))
        .await
        .expect("at the cap");
    assert_eq!(got, json!("host1"));
    assert_eq!(t.versions(), ["2.1"]);
    assert!(matches!(t.last(), Some((Sent::Call, _, _))));
    assert!(!matches!(err, RpcError::Transport { .. }));
    server.stop().await;
}
