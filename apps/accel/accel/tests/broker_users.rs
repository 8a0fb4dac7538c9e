//! Least-privilege broker users (issue 28, item 11): the permissions and topic
//! permissions `docs/operator-guide.md` ("Trust model and hardening") gives each
//! component kind, read from that page and set on a RabbitMQ vhost of this test's own,
//! are enough for a conductor, an agent and an API to serve a request's whole life (a
//! report, a profile, a request created, bound, unbound and its NVMe handle cleaned by
//! the agent on the conductor's `cleanup_device` cast, deleted), with the agent on
//! Cyborg's wire (its default: two control exchanges), and they refuse what the page
//! says they refuse.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{rabbitmqctl, rabbitmqctl_output, ready, Killed};
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::transport::Transport;
use verso_rpc::Target;

/// accel's control exchange, one of the two the page's topic permissions name.
const EXCHANGE: &str = "accel";
/// Cyborg's control exchange, the other.
const CYBORG_EXCHANGE: &str = "cyborg";

/// A component kind's permissions as the operator guide gives them.
#[derive(Debug, Default)]
struct Documented {
    /// configure, write, read.
    resources: Option<[String; 3]>,
    /// (exchange, topic write, topic read), one per exchange the page names.
    topics: Vec<(String, [String; 2])>,
}

/// The rows of the guide's two tables for `user`: `| `user` | `re` | ... |`, with `\|`
/// standing for `|` inside a cell.
fn documented(user: &str) -> Documented {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/operator-guide.md"),
    )
    .expect("the operator guide");
    let mut found = Documented::default();
    let head = format!("| `{user}` |");
    // The exchange of the topic table below: "Topic permissions on the control exchange `x`".
    let mut exchange = None;
    for line in guide.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Topic permissions on the control exchange `") {
            exchange = rest.split('`').next().map(str::to_owned);
        }
        let Some(rest) = line.strip_prefix(&head) else {
            continue;
        };
        let cells: Vec<String> = rest
            .replace("\\|", "\u{0}")
            .split('|')
            .map(|c| c.trim().trim_matches('`').replace('\u{0}', "|"))
            .filter(|c| !c.is_empty())
            .collect();
        match cells.as_slice() {
            [c, w, r] => found.resources = Some([c.clone(), w.clone(), r.clone()]),
            [w, r] => found.topics.push((
                exchange.clone().expect("a topic table under its exchange"),
                [w.clone(), r.clone()],
            )),
            other => panic!("a row of {user} with {} cells: {line}", other.len()),
        }
    }
    found
}

/// A vhost and three users of this run, deleted at the end.
struct Broker {
    vhost: String,
    /// (component kind, user name).
    users: Vec<(&'static str, String)>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = rabbitmqctl_output(&["delete_vhost", &self.vhost]);
        for (_, u) in &self.users {
            let _ = rabbitmqctl_output(&["delete_user", u]);
        }
    }
}

impl Broker {
    /// The vhost, with a user per component kind holding exactly the guide's permissions.
    fn new() -> Broker {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut broker = Broker {
            vhost: format!("accel-users-{id}"),
            users: Vec::new(),
        };
        rabbitmqctl(&["add_vhost", &broker.vhost]);
        for kind in ["accel-conductor", "accel-agent", "accel-api"] {
            let doc = documented(kind);
            let [configure, write, read] = doc.resources.expect("its permissions row");
            assert!(!doc.topics.is_empty(), "{kind}: its topic permissions rows");
            let user = format!("{kind}-{id}");
            rabbitmqctl(&["add_user", &user, &password(&user)]);
            broker.users.push((kind, user.clone()));
            rabbitmqctl(&[
                "set_permissions",
                "-p",
                &broker.vhost,
                &user,
                &configure,
                &write,
                &read,
            ]);
            for (exchange, [topic_write, topic_read]) in &doc.topics {
                rabbitmqctl(&[
                    "set_topic_permissions",
                    "-p",
                    &broker.vhost,
                    &user,
                    exchange,
                    topic_write,
                    topic_read,
                ]);
            }
        }
        broker
    }

    /// The `[transport] url` of component kind `kind` (`accel-agent`, ...).
    fn url(&self, kind: &str) -> String {
        let (_, user) = self
            .users
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("a user of that kind");
        format!(
            "rabbit://{user}:{}@127.0.0.1:5672/{}",
            password(user),
            self.vhost
        )
    }
}

fn password(user: &str) -> String {
    format!("pw-{user}")
}

/// `accel` with `sets` and `args`, its stdout piped.
fn spawn(sets: &[String], args: &[&str]) -> Killed {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.env("RUST_LOG", "warn");
    for s in sets {
        c.args(["--set", s]);
    }
    Killed(
        c.args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("accel starts"),
    )
}

/// Polls `f` every 100 ms until it returns `Some`, for at most `limit`.
async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn the_documented_broker_users_run_a_deployment_and_refuse_the_rest() {
    let broker = Broker::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let erased = dir.path().join("erased");
    let cleanup = dir.path().join("cleanup.sh");
    std::fs::write(
        &cleanup,
        format!("#!/bin/sh\necho \"$@\" >> {}\n", erased.display()),
    )
    .expect("cleanup script");
    let mut perms = std::fs::metadata(&cleanup).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&cleanup, perms).expect("chmod");
    let api_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr").port()
    };
    let common = vec![
        format!(
            "database.url=sqlite://{}",
            dir.path().join("accel.db").display()
        ),
        format!("transport.control_exchange={EXCHANGE}"),
        format!("agent.state_dir={}", dir.path().display()),
        // Only the conductor's cast (agent API 1.1, allowed by the cap of the wire the
        // agent reports on: Cyborg's, by default) can start the cleanup this test waits
        // for.
        "agent.scan_interval=3600".to_owned(),
        "upgrade_levels.cyborg_agent=1.1".to_owned(),
        format!("nvme.cleanup_command={}", cleanup.display()),
        format!("api.listen=127.0.0.1:{api_port}"),
    ];
    let with = |kind: &str| {
        let mut sets = common.clone();
        sets.push(format!("transport.url={}", broker.url(kind)));
        sets
    };
    let mut conductor = spawn(&with("accel-conductor"), &["conductor"]);
    ready(&mut conductor.0, "conductor: serving");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agent/tests/fixtures/sysfs/host1"
    );
    let _agent = spawn(
        &with("accel-agent"),
        &["agent", "--host", "h1", "--sysfs-root", fixture],
    );
    let mut api = spawn(
        &with("accel-api"),
        &["--set", "api.auth_strategy=noauth", "api"],
    );
    ready(&mut api.0, "api: listening");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{api_port}/v2");
        let get = |path: String| {
            let http = http.clone();
            async move {
                let r = http.get(path).send().await.expect("GET");
                let status = r.status().as_u16();
                (status, r.json::<serde_json::Value>().await.expect("JSON"))
            }
        };
        // The agent reported (agent -> conductor call, conductor's reply).
        eventually("the agent's devices", Duration::from_secs(30), || {
            let base = base.clone();
            async move {
                let (_, body) = get(format!("{base}/devices?hostname=h1")).await;
                let n = body["devices"].as_array().map_or(0, Vec::len);
                (n > 0).then_some(())
            }
        })
        .await;
        // API -> conductor: a profile, a request, a bind.
        let r = http
            .post(format!("{base}/device_profiles"))
            .json(&serde_json::json!([{"name": "ssd", "groups": [{"resources:SSD": "1"}]}]))
            .send()
            .await
            .expect("POST profile");
        assert_eq!(r.status().as_u16(), 201, "{:?}", r.text().await);
        let r = http
            .post(format!("{base}/accelerator_requests"))
            .json(&serde_json::json!({"device_profile_name": "ssd"}))
            .send()
            .await
            .expect("POST request");
        assert_eq!(r.status().as_u16(), 201);
        let body: serde_json::Value = r.json().await.expect("JSON");
        let arq = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
        let instance = uuid::Uuid::new_v4().to_string();
        let patch = |ops: serde_json::Value| {
            let http = http.clone();
            let url = format!("{base}/accelerator_requests");
            let body = serde_json::json!({ arq.clone(): ops });
            async move {
                let r = http.patch(url).json(&body).send().await.expect("PATCH");
                let status = r.status().as_u16();
                (status, r.text().await.unwrap_or_default())
            }
        };
        let (status, text) = patch(serde_json::json!([
            {"path": "/hostname", "op": "add", "value": "h1"},
            {"path": "/instance_uuid", "op": "add", "value": instance},
        ]))
        .await;
        assert!(matches!(status, 200 | 202), "bind: {status} {text}");
        let (_, bound) = get(format!("{base}/accelerator_requests/{arq}")).await;
        assert_eq!(bound["state"], "Bound", "{bound}");
        // Unbinding releases the SSD: the conductor casts cleanup_device to the agent,
        // which runs the cleanup command and tells the conductor.
        let (status, text) = patch(serde_json::json!([
            {"path": "/hostname", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ]))
        .await;
        assert!(matches!(status, 200 | 202), "unbind: {status} {text}");
        eventually("the agent's cleanup", Duration::from_secs(30), || {
            let erased = erased.clone();
            async move {
                std::fs::read_to_string(&erased)
                    .ok()
                    .filter(|s| !s.is_empty())
            }
        })
        .await;
        let r = http
            .delete(format!("{base}/accelerator_requests?arqs={arq}"))
            .send()
            .await
            .expect("DELETE");
        assert_eq!(r.status().as_u16(), 204);

        // What the permissions refuse: the agent's user cannot serve the conductor's
        // topics on either exchange, the API's user cannot serve anything.
        for (kind, exchange, target) in [
            ("accel-agent", EXCHANGE, Target::new("accel-conductor")),
            (
                "accel-agent",
                CYBORG_EXCHANGE,
                Target::new("cyborg-conductor"),
            ),
            (
                "accel-agent",
                EXCHANGE,
                Target::new("accel-agent").with_server("h1"),
            ),
            (
                "accel-agent",
                CYBORG_EXCHANGE,
                Target::new("cyborg-agent").with_server("h1"),
            ),
            ("accel-api", EXCHANGE, Target::new("accel-conductor")),
            (
                "accel-api",
                CYBORG_EXCHANGE,
                Target::new("cyborg-conductor"),
            ),
        ] {
            let config = AmqpConfig::from_url(&broker.url(kind))
                .expect("URL")
                .with_control_exchange(exchange);
            let transport: Arc<dyn Transport> =
                Arc::new(AmqpTransport::connect_with(config).await.expect("RabbitMQ"));
            let refused = transport.listen(&target).await;
            // The agent's user may serve its own host's topic; the others are refused.
            if kind == "accel-agent" && target.server.is_some() {
                assert!(refused.is_ok(), "{kind} serves its own host's topic");
                continue;
            }
            let e = refused.err().unwrap_or_else(|| {
                panic!("{kind} may serve {target:?} with the documented permissions")
            });
            assert!(e.to_string().contains("ACCESS_REFUSED"), "{kind}: {e}");
        }
    });
}
