//! `amqp::run_io_on`: a process whose runtime is one thread puts the broker's tasks on
//! it, so a call is served and answered without a `verso-amqp` thread. A test binary of
//! its own: where the broker's tasks run is chosen once per process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use serde_json::json;
use std::time::Duration;
use support::*;
use verso::RequestContext;
use verso_rpc::transport::amqp::{run_io_on, IoRuntimeChosen};
use verso_rpc::{RpcClient, Target};

/// This process's threads called `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

#[test]
fn one_thread_runs_the_broker_tasks_the_server_and_the_client() {
    let env = Env::get();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    run_io_on(rt.handle().clone()).expect("no connection was opened before");
    rt.block_on(async {
        let topic = unique_topic("io-one-thread");
        let t = env.amqp().await;
        let (server, mut casts) = start_verso_server(t.clone(), &topic, "s1").await;
        let client =
            RpcClient::new(t.clone(), Target::new(topic.as_str())).timeout(Duration::from_secs(20));
        let ctx = RequestContext::new("req-one-thread");
        for n in 0..5 {
            let reply = client
                .call(&ctx, "ping", "1.0", json!({"arg": n}))
                .await
                .expect("answered on the one thread");
            assert_eq!(reply["arg"], n);
        }
        client
            .cast(&ctx, "record", "1.0", json!({"arg": "cast"}))
            .await
            .expect("cast");
        assert_eq!(recv(&mut casts).await, json!("cast"));
        assert_eq!(
            threads_named("verso-amqp"),
            0,
            "the broker's tasks run on the runtime given to run_io_on"
        );
        // Chosen once: a second choice is refused, the first stays.
        assert_eq!(
            run_io_on(tokio::runtime::Handle::current()),
            Err(IoRuntimeChosen)
        );
        server.stop().await;
        t.close().await;
    });
}
