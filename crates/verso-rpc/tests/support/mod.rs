//! What the interop, TLS and Python agent suites share: the broker and Python probes
//! (each panics with what to do when its service is missing: these tests never skip),
//! the Python oslo.messaging peer (`interop/peer.py`), a verso server like the Python one,
//! the example binaries and children that must say `ready`, topics, temporary files and
//! waiting helpers. `raw` is a second AMQP client (lapin) that reads
//! and writes the wire directly, and a proxy whose connections can be cut.
#![allow(dead_code)] // each suite uses part of it

mod raw;
#[allow(unused_imports)] // the TLS suite needs no raw peer
pub use raw::*;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use verso::{Field, ObjectMeta, Version, VersionedObject};
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport, BrokerHost};
use verso_rpc::transport::Transport;
use verso_rpc::{
    ArgSpec, ArgType, Args, Endpoint, MethodSpec, RemoteError, RpcServer, ServerHandle, Target,
};

/// The object both peers know (`InteropThing` in peer.py); 1.1 added `tags`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "verso_interop", name = "InteropThing", version = "1.1")]
pub struct InteropThing {
    pub id: Field<i64>,
    pub name: Field<String>,
    #[verso(since = "1.1")]
    pub tags: Field<Vec<String>>,
    pub meta: ObjectMeta,
}

pub struct Env {
    pub url: String,
    pub python: PathBuf,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/peer.py")
}

impl Env {
    /// The broker and the Python peer; panics with what to do if either is missing.
    pub fn get() -> Env {
        let url = std::env::var("VERSO_TEST_RABBIT_URL")
            .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into());
        let config = AmqpConfig::from_url(&url)
            .unwrap_or_else(|e| panic!("VERSO_TEST_RABBIT_URL is not usable: {e}"));
        require_reachable(
            &config.hosts[0],
            "VERSO_TEST_RABBIT_URL",
            "The interop tests need a real broker: run \
             crates/verso-rpc/interop/start-rabbitmq.sh (after apt-get install -y \
             rabbitmq-server), or .ci/run, or point VERSO_TEST_RABBIT_URL at one.",
        );
        Env {
            url,
            python: python(),
        }
    }

    /// A new connection to the broker; panics with the reason when it cannot connect.
    pub async fn amqp(&self) -> Arc<AmqpTransport> {
        Arc::new(
            AmqpTransport::connect(&self.url)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// [`Env::amqp`] as the transport trait object the servers and clients take.
    pub async fn transport(&self) -> Arc<dyn Transport> {
        self.amqp().await
    }

    /// One oslo.messaging client call or cast; its JSON line.
    pub fn py_client(&self, topic: &str, args: &[&str]) -> Value {
        py_client(&self.python, &self.url, topic, args)
    }

    /// An oslo.messaging server, stopped when dropped.
    pub fn py_server(&self, topic: &str, server: &str, record: Option<&Path>) -> PyServer {
        let mut cmd = Command::new(&self.python);
        cmd.arg(peer_script())
            .args([
                "server", "--url", &self.url, "--topic", topic, "--server", server,
            ])
            .stderr(Stdio::inherit());
        if let Some(r) = record {
            cmd.arg("--record").arg(r);
        }
        start_ready(cmd, "peer.py server")
    }

    /// The rpc_client example, built by `cargo test` beside this test binary.
    pub fn example_client(&self, topic: &str, args: &[&str]) -> Output {
        Command::new(example_binary("rpc_client"))
            .args([
                "--transport-url",
                &self.url,
                "--topic",
                topic,
                "--timeout",
                "15",
            ])
            .args(args)
            .output()
            .expect("run rpc_client")
    }
}

/// A child process (a Python peer, an example binary), killed when dropped.
pub struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python oslo.messaging server [`Env::py_server`] starts.
pub type PyServer = Running;

/// Starts `cmd` and waits (a minute at most) for its first line of output, which must be
/// `ready`; panics naming `what` otherwise.
pub fn start_ready(mut cmd: Command, what: &str) -> Running {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(l) if l.trim() == "ready" => Running(child),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not get ready: {other:?}")
        }
    }
}

/// The example binary `name`, which `cargo test -p verso-rpc` builds beside the test
/// binaries.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: `cargo test -p verso-rpc` builds the examples",
        bin.display()
    );
    bin
}

/// A topic no other test (or earlier run) uses.
pub fn unique_topic(name: &str) -> String {
    format!("verso-test-{name}-{}", uuid::Uuid::new_v4().simple())
}

/// A temporary directory, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("verso-test-")
        .tempdir()
        .expect("temp dir")
}

/// A temporary file holding `contents`, removed when dropped.
pub fn temp_file(suffix: &str, contents: &[u8]) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut f = tempfile::Builder::new()
        .prefix("verso-test-")
        .suffix(suffix)
        .tempfile()
        .expect("temp file");
    f.write_all(contents).expect("write the temp file");
    f
}

/// Panics, saying what to do, when nothing listens at `host` (named by `variable`).
pub fn require_reachable(host: &BrokerHost, variable: &str, what_to_do: &str) {
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(&(host.host.as_str(), host.port))
        .map(|addrs| {
            addrs
                .into_iter()
                .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(3)).is_ok())
        })
        .unwrap_or(false);
    assert!(
        reachable,
        "RabbitMQ is not reachable at {host} ({variable}). {what_to_do}"
    );
}

/// The Python with oslo.messaging and oslo.versionedobjects (`VERSO_TEST_PYTHON`, or the
/// workspace's `.venv`); panics with what to do if it is missing.
pub fn python() -> PathBuf {
    let python = std::env::var_os("VERSO_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let probe = Command::new(&python)
        .args([
            "-c",
            "import oslo_messaging, oslo_versionedobjects, oslo_config",
        ])
        .output();
    match probe {
        Ok(o) if o.status.success() => python,
        other => panic!(
            "the Python oslo.messaging peer is missing: {} cannot import \
             oslo_messaging/oslo_versionedobjects ({other:?}). Create it with \
             `python3 -m venv .venv && .venv/bin/pip install oslo.messaging \
             oslo.versionedobjects` at the workspace root (or run .ci/run), or set \
             VERSO_TEST_PYTHON to a python that has them.",
            python.display()
        ),
    }
}

/// One `interop/peer.py` client call or cast through the broker at `url`; its JSON line.
pub fn py_client(python: &Path, url: &str, topic: &str, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(peer_script())
        .args(["client", "--url", url, "--topic", topic])
        .args(args)
        .output()
        .expect("run peer.py client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "peer.py client printed no JSON ({e}): stdout {stdout:?} stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub async fn wait_lines(path: &Path, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path) {
            let lines: Vec<Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if lines.len() >= n {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let text = std::fs::read_to_string(path).unwrap_or_default();
                return text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} did not get {n} records", path.display())
}

pub async fn recv(rx: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(15), rx.recv())
        .await
        .expect("a cast within 15 s")
        .expect("server alive")
}

/// A verso server like the Python one: ping, echo_thing, fail, record (casts go to
/// the returned channel), sleep.
/// Calls `ping` until it is answered (with its argument), for up to `within`; every
/// failure before must be one `expected` accepts.
pub async fn ping_until_served(
    client: &verso_rpc::RpcClient,
    ctx: &verso::RequestContext,
    within: Duration,
    expected: impl Fn(&verso_rpc::RpcError) -> bool,
) {
    let deadline = std::time::Instant::now() + within;
    loop {
        match client.call(ctx, "ping", "1.0", json!({"arg": 2})).await {
            Ok(v) => {
                assert_eq!(v["arg"], 2);
                return;
            }
            Err(e) if std::time::Instant::now() < deadline => {
                assert!(expected(&e), "unexpected failure: {e:?}");
                eprintln!("not served yet: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("not served within {within:?}: {e:?}"),
        }
    }
}

/// Serves a fresh topic on `t` and calls it through `t`: the transport still works.
pub async fn serves_and_calls(t: &Arc<AmqpTransport>) {
    let topic = unique_topic("still-works");
    let (server, _casts) = start_verso_server(t.clone(), &topic, "w1").await;
    let reply = verso_rpc::RpcClient::new(t.clone(), verso_rpc::Target::new(topic))
        .timeout(Duration::from_secs(20))
        .call(
            &verso::RequestContext::new("req-still-works"),
            "ping",
            "1.0",
            json!({"arg": 5}),
        )
        .await
        .expect("the transport still serves and calls");
    assert_eq!(reply["arg"], 5);
    server.stop().await;
}

pub async fn start_verso_server(
    transport: Arc<dyn Transport>,
    topic: &str,
    server: &str,
) -> (ServerHandle, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let name = server.to_owned();
    let endpoint = Endpoint::new(Version::new(1, 1))
        .method(
            MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
            move |ctx: verso::RequestContext, args: Args| {
                let reply = json!({"arg": args.value("arg"), "server": name,
                    "peer": "verso", "user": ctx.user});
                async move { Ok(reply) }
            },
        )
        .method(
            MethodSpec::new("echo_thing", Version::new(1, 1))
                .arg(ArgSpec::required("thing", ArgType::Any)),
            |_ctx, args: Args| async move {
                let p = args.value("thing").cloned().unwrap_or_default();
                let mut t = InteropThing::from_primitive(&p).map_err(|e| {
                    RemoteError::new("InvalidThing", "verso_interop", e.to_string())
                })?;
                let upper = t.name.get().map(|n| n.to_uppercase()).unwrap_or_default();
                t.name = upper.into();
                let mut tags = t.tags.get().cloned().unwrap_or_default();
                tags.push("rs".into());
                t.tags = tags.into();
                Ok(verso::FieldValue::to_primitive(&t))
            },
        )
        .method(
            MethodSpec::new("fail", Version::new(1, 1)).arg(ArgSpec::required("arg", ArgType::Any)),
            |_ctx, args: Args| {
                let m = args.value("arg").cloned().unwrap_or_default();
                async move {
                    Err(RemoteError::new(
                        "InteropError",
                        "verso_interop",
                        m.to_string(),
                    ))
                }
            },
        )
        .method(
            MethodSpec::new("record", Version::new(1, 0))
                .arg(ArgSpec::required("arg", ArgType::Any)),
            move |_ctx, args: Args| {
                let _ = tx.send(args.value("arg").cloned().unwrap_or_default());
                async move { Ok(Value::Null) }
            },
        )
        .method(
            MethodSpec::new("sleep", Version::new(1, 1))
                .arg(ArgSpec::required("arg", ArgType::Int)),
            |_ctx, args: Args| async move {
                let secs = args.value("arg").and_then(Value::as_u64).unwrap_or(1);
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Ok(json!(secs))
            },
        );
    let handle = RpcServer::new(transport, Target::new(topic).with_server(server))
        .endpoint(endpoint)
        .expect("endpoint")
        .start()
        .await
        .expect("server starts");
    (handle, rx)
}
