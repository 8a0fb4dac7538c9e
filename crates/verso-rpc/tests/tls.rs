//! TLS against a real RabbitMQ TLS listener, with and without client certificates, and
//! with a Python oslo.messaging client over TLS.
//!
//! The broker: `VERSO_TEST_RABBIT_TLS_URL` (default
//! `rabbit://guest:guest@localhost:5671/?ssl=1&ssl_ca_file=$VERSO_TLS_DIR/ca.pem`). The
//! certificates: `VERSO_TLS_DIR` (default `/tmp/verso-rabbitmq-tls`), made by
//! `interop/make-test-certs.sh`. `interop/start-rabbitmq.sh` makes both (its listener
//! checks client certificates against the test CA but also takes clients without one).
//! Python: `VERSO_TEST_PYTHON` (default `.venv/bin/python`). `.ci/run` sets all of it up;
//! a missing broker, certificate or Python FAILS these tests (never skips).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use serde_json::json;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{
    py_client, python, recv, require_reachable, start_verso_server, temp_file, unique_topic,
};
use verso::RequestContext;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpError, AmqpTransport, TlsOptions};
use verso_rpc::{RpcClient, Target};

// ---- 1. verso to verso over TLS --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_and_cast_over_tls() {
    let env = Env::get();
    let topic = unique_topic("call-cast");
    let server_t = env.connect(env.config()).await;
    let (server, mut casts) = start_verso_server(server_t, &topic, "tls-1").await;

    let client_t = env.connect(env.config()).await;
    let ctx = RequestContext::new("req-tls").with_user("tls-client");
    let client = RpcClient::new(client_t.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(15));
    let got = client
        .call(&ctx, "ping", "1.0", json!({"arg": {"over": "tls"}}))
        .await
        .expect("call over TLS");
    assert_eq!(got["arg"], json!({"over": "tls"}));
    assert_eq!(got["user"], "tls-client", "{got}");

    client
        .cast(&ctx, "record", "1.0", json!({"arg": "cast over tls"}))
        .await
        .expect("cast over TLS");
    assert_eq!(recv(&mut casts).await, json!("cast over tls"));

    // The certificate names 127.0.0.1 too: the same over an IP address.
    let mut by_ip = env.config();
    by_ip.hosts[0].host = "127.0.0.1".into();
    let ip_t = env.connect(by_ip).await;
    let got = RpcClient::new(ip_t, Target::new(topic.clone()))
        .timeout(Duration::from_secs(15))
        .call(&ctx, "ping", "1.0", json!({"arg": 2}))
        .await
        .expect("call over TLS by IP address");
    assert_eq!(got["arg"], 2);

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_tls_clients_share_the_broker() {
    let env = Env::get();
    let topic = unique_topic("plain-beside-tls");
    let server_t = env.connect(env.config()).await;
    let (server, _casts) = start_verso_server(server_t, &topic, "tls-2").await;

    // The plain listener beside the TLS one (VERSO_TEST_RABBIT_URL, as interop.rs).
    let plain_url = std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into());
    let plain = AmqpConfig::from_url(&plain_url).expect("VERSO_TEST_RABBIT_URL");
    assert!(
        plain.tls.is_none(),
        "VERSO_TEST_RABBIT_URL is the plain listener"
    );
    let plain_t = env.connect(plain).await;
    let got = RpcClient::new(plain_t, Target::new(topic.clone()))
        .timeout(Duration::from_secs(15))
        .call(
            &RequestContext::new("req-plain"),
            "ping",
            "1.0",
            json!({"arg": "plain"}),
        )
        .await
        .expect("a plain client calls a TLS server");
    assert_eq!(got["arg"], "plain");

    server.stop().await;
}

// ---- 2. client certificates -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_in_every_pem_key_form() {
    let env = Env::get();
    let topic = unique_topic("client-cert");
    // The server presents a client certificate too.
    let server_t = env
        .connect(env.with_client_cert("client.pem", "client-key.pem"))
        .await;
    let (server, _casts) = start_verso_server(server_t, &topic, "tls-cert").await;
    let ctx = RequestContext::new("req-tls-cert");

    for (cert, key) in [
        ("client.pem", "client-key.pem"),       // RSA, PKCS#8
        ("client.pem", "client-key.rsa.pem"),   // RSA, PKCS#1
        ("client-ec.pem", "client-ec-key.pem"), // P-256, SEC1
    ] {
        let config = env.with_client_cert(cert, key);
        config.tls.as_ref().unwrap().check().expect(key);
        let t = env.connect(config).await;
        let got = RpcClient::new(t.clone(), Target::new(topic.clone()))
            .timeout(Duration::from_secs(15))
            .call(&ctx, "ping", "1.0", json!({"arg": key}))
            .await
            .unwrap_or_else(|e| panic!("call with {cert} and {key}: {e}"));
        assert_eq!(got["arg"], key);
        t.close().await;
    }

    // The certificate is really presented: one of a CA the broker does not trust is
    // refused by the broker (without one, the broker lets the client in).
    let refused = env.with_client_cert("other-client.pem", "other-client-key.pem");
    let started = Instant::now();
    match AmqpTransport::connect_with(refused).await {
        // A TLS alert or, under TLS 1.3, a socket closed after the handshake: either way
        // the error points at the certificate.
        Err(AmqpError::Connect { detail, .. }) => {
            assert!(
                detail.contains("refused the client certificate"),
                "{detail}"
            )
        }
        Err(other) => panic!("expected Connect, got {other:?}"),
        Ok(_) => panic!("the broker took a client certificate of an untrusted CA"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // A key that is not the certificate's: a typed error before anything is sent.
    let mismatched = env.with_client_cert("client.pem", "client-ec-key.pem");
    match mismatched.tls.as_ref().unwrap().check() {
        Err(AmqpError::ClientKey { path, detail }) => {
            assert!(path.ends_with("client-ec-key.pem"), "{path}");
            assert!(detail.contains("client.pem"), "{detail}");
        }
        other => panic!("expected ClientKey, got {other:?}"),
    }
    // connect_with checks the files first: the same typed error, no broker tried.
    match AmqpTransport::connect_with(mismatched).await {
        Err(AmqpError::ClientKey { path, .. }) => {
            assert!(path.ends_with("client-ec-key.pem"), "{path}")
        }
        Err(other) => panic!("expected ClientKey, got {other:?}"),
        Ok(_) => panic!("connected with a key that is not the certificate's"),
    }

    // ssl_cert_file alone, holding the key after the certificate, as oslo.messaging
    // (Python's load_cert_chain) takes it: the certificate is presented, since the one of
    // an untrusted CA in the same form is refused.
    let combined = env.combined("client.pem", "client-key.pem");
    let config = AmqpConfig::from_url(&format!(
        "{}&ssl_cert_file={}",
        env.url,
        q(&combined.path().to_string_lossy())
    ))
    .expect("a certificate file alone");
    assert_eq!(config.tls.as_ref().unwrap().key_file, None);
    let t = env.connect(config).await;
    let got = RpcClient::new(t.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(15))
        .call(&ctx, "ping", "1.0", json!({"arg": "combined"}))
        .await
        .expect("call with the key inside ssl_cert_file");
    assert_eq!(got["arg"], "combined");
    t.close().await;
    let other = env.combined("other-client.pem", "other-client-key.pem");
    let refused = AmqpConfig::from_url(&format!(
        "{}&ssl_cert_file={}",
        env.url,
        q(&other.path().to_string_lossy())
    ))
    .expect("url");
    match AmqpTransport::connect_with(refused).await {
        Err(AmqpError::Connect { .. }) => {}
        Err(other) => panic!("expected Connect, got {other:?}"),
        Ok(_) => panic!("the broker took a client certificate of an untrusted CA"),
    }
    // Without its key, a certificate file alone is a typed error before anything is sent.
    let keyless = AmqpConfig::from_url(&format!(
        "{}&ssl_cert_file={}",
        env.url,
        q(&env.file("client.pem"))
    ))
    .expect("url");
    match AmqpTransport::connect_with(keyless).await {
        Err(AmqpError::ClientCert { path, detail }) => {
            assert!(path.ends_with("client.pem"), "{path}");
            assert!(detail.contains("no ssl_key_file"), "{detail}");
        }
        Err(other) => panic!("expected ClientCert, got {other:?}"),
        Ok(_) => panic!("connected with a certificate and no key"),
    }

    // A key without its certificate: refused when the URL is read.
    let key_only = format!(
        "{}&ssl_key_file={}",
        env.url,
        q(&env.file("client-key.pem"))
    );
    assert!(matches!(
        AmqpConfig::from_url(&key_only),
        Err(AmqpError::InvalidOption { .. })
    ));

    server.stop().await;
}

// ---- 3. verification failures ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_broker_is_a_quick_typed_error_without_the_password() {
    let env = Env::get();
    const SECRET: &str = "tls-test-secret-pw";

    // The broker's certificate is of the test CA; trust another CA only.
    let mut wrong_ca = env.config();
    wrong_ca.hosts[0].password = SECRET.into();
    wrong_ca.tls = Some(TlsOptions {
        ca_file: Some(env.file("other-ca.pem")),
        ..TlsOptions::default()
    });
    // ssl=true without ssl_ca_file: the system's CAs, which do not know the test CA.
    let mut system_roots = env.config();
    system_roots.hosts[0].password = SECRET.into();
    system_roots.tls = Some(TlsOptions::default());
    // The TLS port spoken to without TLS (named as such when it is the usual 5671).
    let mut plain = env.config();
    let tls_port_hint = (plain.hosts[0].port == 5671).then_some("usually RabbitMQ's TLS port");
    plain.hosts[0].password = SECRET.into();
    plain.tls = None;

    // The broker by a name its certificate does not have (the IPv4-mapped IPv6 form of
    // 127.0.0.1: the same socket, another address to verify).
    let mut wrong_name = env.config();
    wrong_name.hosts[0].host = "::ffff:127.0.0.1".into();
    wrong_name.hosts[0].password = SECRET.into();

    for (what, config, want) in [
        ("wrong CA", wrong_ca, Some("certificate")),
        ("wrong name", wrong_name, Some("not valid for name")),
        ("system CAs", system_roots, None),
        ("no TLS", plain, tls_port_hint),
    ] {
        let started = Instant::now();
        let result = AmqpTransport::connect_with(config).await;
        let took = started.elapsed();
        let e = match result {
            Err(e @ AmqpError::Connect { .. }) => e,
            Err(other) => panic!("{what}: expected Connect, got {other:?}"),
            Ok(_) => panic!("{what}: connected"),
        };
        assert!(took < Duration::from_secs(5), "{what}: took {took:?}");
        let text = format!("{e} {e:?}");
        assert!(!text.contains(SECRET), "{what}: password in {text}");
        if let Some(w) = want {
            assert!(e.to_string().contains(w), "{what}: {e}");
        }
    }
}

/// `ssl=true` against the plain port: the broker's AMQP header is no TLS record, and the
/// error says so and where TLS usually is, instead of rustls's `InvalidContentType`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_the_plain_port_says_it_is_not_tls() {
    let env = Env::get();
    let plain_url = std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into());
    let plain = AmqpConfig::from_url(&plain_url).expect("VERSO_TEST_RABBIT_URL");
    let mut config = env.config();
    config.hosts = plain.hosts.clone();
    let started = Instant::now();
    let e = match AmqpTransport::connect_with(config).await {
        Err(e @ AmqpError::Connect { .. }) => e,
        Err(other) => panic!("expected Connect, got {other:?}"),
        Ok(_) => panic!("TLS to the plain port connected"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let text = e.to_string();
    assert!(text.contains("looks like a plain AMQP port"), "{text}");
    assert!(
        text.contains("5671") && text.contains("remove ssl=true"),
        "{text}"
    );
    let broker = plain.hosts[0].to_string();
    assert_eq!(text.matches(&broker).count(), 1, "the broker once: {text}");
}

/// `ssl_ca_file` replaces the system's CAs, it does not add to them; without it the system's
/// are used. Checked in a child process of this test binary whose system CAs are the test
/// CA (`SSL_CERT_FILE`), since the environment of this one is shared by every test.
#[test]
fn ssl_ca_file_replaces_the_system_cas() {
    const CHILD: &str = "VERSO_TLS_TEST_CHILD";
    let env = Env::get();
    if std::env::var_os(CHILD).is_none() {
        let out = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "ssl_ca_file_replaces_the_system_cas",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("SSL_CERT_FILE", env.file("ca.pem"))
            .env_remove("SSL_CERT_DIR")
            .output()
            .expect("run the child test");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // No ssl_ca_file: the system's CAs, here the test CA.
        let mut system = env.config();
        system.tls = Some(TlsOptions::default());
        let t = AmqpTransport::connect_with(system)
            .await
            .unwrap_or_else(|e| panic!("system CAs from SSL_CERT_FILE: {e}"));
        t.close().await;
        // ssl_ca_file of another CA: the system's (the test CA) no longer count.
        let mut other = env.config();
        other.tls = Some(TlsOptions {
            ca_file: Some(env.file("other-ca.pem")),
            ..TlsOptions::default()
        });
        match AmqpTransport::connect_with(other).await {
            Err(AmqpError::Connect { .. }) => {}
            Err(e) => panic!("expected Connect, got {e:?}"),
            Ok(_) => panic!("ssl_ca_file was added to the system's CAs instead of replacing them"),
        }
    });
}

// ---- 4. a Python oslo.messaging client over TLS ---------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_calls_verso_server_over_tls() {
    let env = Env::get();
    let python = python();
    let topic = unique_topic("py-tls");
    let server_t = env
        .connect(env.with_client_cert("client.pem", "client-key.pem"))
        .await;
    let (server, mut casts) = start_verso_server(server_t, &topic, "tls-py").await;

    // oslo.messaging reads ssl, ssl_ca_file, ssl_cert_file and ssl_key_file from the URL
    // as this transport does: the same URLs serve both.
    let with_cert = format!(
        "{}&ssl_cert_file={}&ssl_key_file={}",
        env.url,
        q(&env.file("client.pem")),
        q(&env.file("client-key.pem"))
    );
    // oslo.messaging also takes the key inside ssl_cert_file, as this transport does.
    let combined = env.combined("client.pem", "client-key.pem");
    let with_combined = format!(
        "{}&ssl_cert_file={}",
        env.url,
        q(&combined.path().to_string_lossy())
    );
    for url in [env.url.as_str(), with_cert.as_str(), with_combined.as_str()] {
        let out = py_client(
            &python,
            url,
            &topic,
            &["--method", "ping", "--arg", r#"{"from": "python"}"#],
        );
        assert_eq!(out["ok"]["arg"], json!({"from": "python"}), "{url}: {out}");
        assert_eq!(out["ok"]["peer"], "verso", "{out}");
        assert_eq!(out["ok"]["user"], "py-client", "{out}");
    }
    let out = py_client(
        &python,
        &with_cert,
        &topic,
        &["--method", "record", "--arg", r#""py cast""#, "--cast"],
    );
    assert_eq!(out, json!({"ok": null}));
    assert_eq!(recv(&mut casts).await, json!("py cast"));

    server.stop().await;
}

// ---- support --------------------------------------------------------------------------

struct Env {
    url: String,
    dir: PathBuf,
}

impl Env {
    /// The TLS broker and the test certificates; panics with what to do if either is
    /// missing.
    fn get() -> Env {
        let dir = PathBuf::from(
            std::env::var("VERSO_TLS_DIR").unwrap_or_else(|_| "/tmp/verso-rabbitmq-tls".into()),
        );
        let url = std::env::var("VERSO_TEST_RABBIT_TLS_URL").unwrap_or_else(|_| {
            format!(
                "rabbit://guest:guest@localhost:5671/?ssl=1&ssl_ca_file={}",
                q(&dir.join("ca.pem").to_string_lossy())
            )
        });
        for f in [
            "ca.pem",
            "client.pem",
            "client-key.pem",
            "client-key.rsa.pem",
            "client-ec.pem",
            "client-ec-key.pem",
            "other-ca.pem",
            "other-client.pem",
            "other-client-key.pem",
        ] {
            assert!(
                dir.join(f).is_file(),
                "{} is missing (VERSO_TLS_DIR). Make the test certificates and start the \
                 broker with crates/verso-rpc/interop/start-rabbitmq.sh (or .ci/run).",
                dir.join(f).display()
            );
        }
        let config = AmqpConfig::from_url(&url)
            .unwrap_or_else(|e| panic!("VERSO_TEST_RABBIT_TLS_URL is not usable: {e}"));
        assert!(
            config.tls.is_some(),
            "VERSO_TEST_RABBIT_TLS_URL must ask for TLS (ssl=1): {config}"
        );
        require_reachable(
            &config.hosts[0],
            "VERSO_TEST_RABBIT_TLS_URL",
            "These tests need a real broker with a TLS listener: run \
             crates/verso-rpc/interop/start-rabbitmq.sh (after apt-get install -y \
             rabbitmq-server), or .ci/run.",
        );
        Env { url, dir }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    fn config(&self) -> AmqpConfig {
        AmqpConfig::from_url(&self.url).expect("checked in get()")
    }

    fn with_client_cert(&self, cert: &str, key: &str) -> AmqpConfig {
        let mut c = self.config();
        let tls = c.tls.as_mut().expect("TLS URL");
        tls.cert_file = Some(self.file(cert));
        tls.key_file = Some(self.file(key));
        c
    }

    /// A temporary PEM file of the certificate `cert` followed by its key `key`.
    fn combined(&self, cert: &str, key: &str) -> tempfile::NamedTempFile {
        let mut pem = std::fs::read(self.file(cert)).expect("certificate");
        pem.extend(std::fs::read(self.file(key)).expect("key"));
        temp_file(".pem", &pem)
    }

    async fn connect(&self, config: AmqpConfig) -> Arc<AmqpTransport> {
        Arc::new(
            AmqpTransport::connect_with(config)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }
}

/// A path as a query value of a transport URL (both parsers decode `%XX`).
fn q(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '%' | '&' | '+' | '#' | '=' | '?' | ' ' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}
