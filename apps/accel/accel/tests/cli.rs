//! The `accel` binary as an operator runs it: all-in-one serving real devices over the
//! real HTTP API, db sync and upgrade check exit codes, config show with origins.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::{ready, Killed};

/// accel's queue names are fixed (`accel-conductor`, `accel-upgrade` on every exchange),
/// so conductors of two tests on one vhost would take each other's calls (an agent's
/// heartbeats then reach the other test's conductor): the tests that start conductors
/// on RabbitMQ run one at a time.
static BROKER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn broker() -> std::sync::MutexGuard<'static, ()> {
    BROKER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn accel() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.env("RUST_LOG", "warn");
    c
}

#[test]
fn all_in_one_serves_every_agents_devices() {
    let mut child = accel()
        .args([
            "all-in-one",
            "--agents",
            "2",
            "--set",
            "api.listen=127.0.0.1:0",
            "--set",
            "agent.report_interval=1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("accel starts");
    let stdout = child.stdout.take().expect("stdout");
    let child = Killed(child);
    let mut api = None;
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(url) = line.strip_prefix("api: listening on ") {
            api = Some(url.to_owned());
            break;
        }
        lines.push(line);
    }
    let api = api.unwrap_or_else(|| panic!("no API address; output: {lines:?}"));
    assert!(
        lines
            .iter()
            .any(|l| l == "all-in-one: 2 agents reported 10 devices"),
        "{lines:?}"
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let body: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{api}/v2/devices"))
            .await
            .expect("GET")
            .json()
            .await
            .expect("json")
    });
    let devices = body["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 10, "{body}");
    for host in ["host1", "host2"] {
        assert_eq!(
            devices.iter().filter(|d| d["hostname"] == host).count(),
            5,
            "{host}"
        );
    }
    drop(child);
}

/// `[api] tls_cert_file` and `tls_key_file`: the API answers HTTPS (the test
/// certificates for localhost, `VERSO_TLS_DIR`, made by scripts/test.sh).
#[test]
fn all_in_one_serves_https_with_a_configured_certificate() {
    let tls = std::env::var_os("VERSO_TLS_DIR").map_or_else(
        || "/tmp/verso-rabbitmq-tls".into(),
        std::path::PathBuf::from,
    );
    let cert = format!("api.tls_cert_file={}", tls.join("server.pem").display());
    let key = format!("api.tls_key_file={}", tls.join("server-key.pem").display());
    let mut child = accel()
        .args([
            "all-in-one",
            "--agents",
            "1",
            "--set",
            "api.listen=127.0.0.1:0",
            "--set",
            &cert,
            "--set",
            &key,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("accel starts");
    let stdout = child.stdout.take().expect("stdout");
    let child = Killed(child);
    let url = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("api: listening on ").map(str::to_owned))
        .expect("the API's address");
    let port = url
        .strip_prefix("https://127.0.0.1:")
        .unwrap_or_else(|| panic!("not HTTPS: {url}"));
    let ca = std::fs::read(tls.join("ca.pem")).expect("the test CA");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let status = rt.block_on(async {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA"))
            .build()
            .expect("client")
            .get(format!("https://localhost:{port}/v2/devices"))
            .send()
            .await
            .expect("GET over HTTPS")
            .status()
    });
    assert_eq!(status, 200);
    drop(child);
}

#[test]
fn db_sync_and_upgrade_check_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!(
        "database.url=sqlite://{}",
        dir.path().join("a.db").display()
    );
    let check = |expect: i32, says: &str| {
        let out = accel()
            .args(["--set", &url, "upgrade", "check"])
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(expect), "{text}");
        assert!(text.contains(says), "{text}");
    };
    // A new database lacks its migrations: a warning.
    check(1, "run `accel db sync`");
    let out = accel()
        .args(["--set", &url, "db", "sync"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "made OpenStack Cyborg 17's schema with accel's additions [101, 102] in the empty database"
        ),
        "{said}"
    );
    check(0, "no component version recorded yet");
    // An unreachable database is a failure; no password form is printed.
    let out = accel()
        .args([
            "--set",
            "database.url=postgres://x:secret@127.0.0.1:1/none?password=secret2",
            "upgrade",
            "check",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("password=***"), "{stdout}");
    assert!(!stdout.contains("secret"), "{stdout}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("secret"));
}

/// Every password form a database URL can carry is masked where the binary prints the
/// URL: `config show` and start-up errors.
#[test]
fn passwords_are_masked_in_config_show_and_start_up_errors() {
    for url in [
        "postgres://accel:hunter2@db:5432/accel",
        "postgres://accel@db:5432/accel?password=hunter2",
        "postgres://db:5432/accel?user=accel&password=hunter2&sslmode=require",
        "postgres://accel:pw@db/accel?sslpassword=hunter2",
        "postgres://accel:hun/ter2@db/accel",
    ] {
        let set = format!("database.url={url}");
        let out = accel()
            .args(["--set", &set, "config", "show"])
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("***"), "{url}: {text}");
        assert!(
            !text.contains("hunter2") && !text.contains("ter2"),
            "{url}: {text}"
        );
        // A URL the binary refuses at start is printed masked too.
        let refused = url.replacen("postgres", "mssql", 1);
        let set = format!("database.url={refused}");
        let out = accel()
            .args(["--set", &set, "db", "sync"])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("unsupported database URL"), "{stderr}");
        assert!(
            !stderr.contains("hunter2") && !stderr.contains("ter2"),
            "{stderr}"
        );
    }
    // sslpassword, which the driver would log, is refused before any connection.
    let out = accel()
        .args([
            "--set",
            "database.url=postgres://accel@127.0.0.1:1/accel?sslpassword=hunter2",
            "db",
            "sync",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sslpassword is not supported"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// `[api]`, `[keystone_authtoken]`, `[oslo_policy]`, `[placement]` and `[nova]` options
/// are checked before anything starts, naming the option: keystone (the default) needs
/// its service user, noauth stays on loopback unless told otherwise, a policy file must
/// parse, Placement and Nova need their service users, an unknown `[nova]`,
/// `[placement]` or `[glance]` key is refused, a full Placement pass cannot come more
/// often than a pass.
#[test]
fn api_options_are_checked_at_start() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "\"cyborg:arq:create\": \"role:admin or\"\n").expect("write");
    let policy_set = format!("oslo_policy.policy_file={}", policy.display());
    for (sets, says) in [
        (&["api.max_connections=0"][..], "max_connections"),
        (&["api.request_timeout=0"], "request_timeout"),
        (&["api.tls_cert_file=/nonexistent/cert.pem"], "tls_key_file"),
        (&[], "[keystone_authtoken] auth_url is needed"),
        (
            &[
                "keystone_authtoken.auth_url=http://127.0.0.1:1/v3",
                "keystone_authtoken.username=accel",
            ],
            "[keystone_authtoken] password is needed",
        ),
        (
            &["api.auth_strategy=noauth", "api.listen=0.0.0.0:0"],
            "noauth_allow_remote",
        ),
        (
            &["api.auth_strategy=noauth", policy_set.as_str()],
            "cyborg:arq:create",
        ),
        (
            &["placement.auth_url=http://127.0.0.1:1/v3"],
            "[placement] username is needed",
        ),
        (
            &["nova.auth_url=http://127.0.0.1:1/v3", "nova.username=nova"],
            "[nova] password is needed",
        ),
        (
            &[
                "nova.auth_url=http://127.0.0.1:1/v3",
                "nova.username=nova",
                "nova.password=p",
                "nova.project_name=service",
                "nova.retry_attempts=0",
            ],
            "[nova] retry_attempts",
        ),
        (&["nova.retry_wait=1"], "retry_wait"),
        (&["placement.sync_intervall=5"], "sync_intervall"),
        (&["glance.endpoint=http://127.0.0.1:1"], "endpoint"),
        (
            &[
                "placement.auth_url=http://127.0.0.1:1/v3",
                "placement.username=accel",
                "placement.password=p",
                "placement.project_name=service",
                "placement.full_sync_interval=5",
            ],
            "[placement] full_sync_interval (5) must be at least sync_interval (10)",
        ),
    ] {
        let mut args: Vec<&str> = Vec::new();
        for set in sets {
            args.extend(["--set", set]);
        }
        // [placement] and [nova] are the conductor's.
        args.push(
            if says.starts_with("[placement]") || says.contains("nova") || says.contains("retry") {
                "conductor"
            } else {
                "api"
            },
        );
        let out = accel().args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sets:?}: {stderr}");
        assert!(stderr.contains(says), "{sets:?}: {stderr}");
    }
}

/// `accel all-in-one`'s agents speak Cyborg's wire to its own conductor: a configuration
/// that leaves them no such conductor is refused at start (exit 2), naming why.
#[test]
fn all_in_one_refuses_a_cyborg_wire_it_cannot_serve() {
    for (set, says) in [
        (
            "cyborg.serve_agents=false",
            "[cyborg] report_to_cyborg (its agents on Cyborg's wire) needs [cyborg] serve_agents",
        ),
        (
            "upgrade_levels.cyborg_conductor=1.0",
            "cyborg_conductor below 1.1 names a Cyborg 17 conductor",
        ),
    ] {
        let out = accel()
            .args(["--set", set, "all-in-one"])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {stderr}");
        assert!(stderr.contains(says), "{set}: {stderr}");
    }
}

#[test]
fn fpga_programming_options_are_checked_when_the_agent_starts() {
    for (sets, says) in [
        (
            &["fpga.program_command=/usr/local/bin/program-fpga"][..],
            "[glance] auth_url is needed with [fpga] program_command",
        ),
        (
            &[
                "fpga.program_command=/usr/local/bin/program-fpga",
                "glance.auth_url=http://127.0.0.1:1/v3",
                "glance.username=accel",
            ],
            "[glance] password is needed with [fpga] program_command",
        ),
        (
            &[
                "fpga.program_command=/usr/local/bin/program-fpga",
                "fpga.program_timeout=0",
                "glance.auth_url=http://127.0.0.1:1/v3",
                "glance.username=accel",
                "glance.password=p",
                "glance.project_name=service",
            ],
            "[fpga] program_timeout",
        ),
    ] {
        let mut args: Vec<&str> = Vec::new();
        for set in sets {
            args.extend(["--set", set]);
        }
        // Refused before the agent reaches for the broker (there is none at this URL).
        args.extend(["--set", "transport.url=rabbit://guest:guest@127.0.0.1:1/"]);
        args.extend([
            "agent",
            "--once",
            "--host",
            "h",
            "--sysfs-root",
            "/nonexistent",
        ]);
        let out = accel().args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sets:?}: {stderr}");
        assert!(stderr.contains(says), "{sets:?}: {stderr}");
    }
}

#[test]
fn config_show_names_origins_and_masks_passwords() {
    let out = accel()
        .args([
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../accel.toml"),
            "--set",
            "database.url=postgres://accel:hunter2@db:5432/accel",
            "config",
            "show",
        ])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("accel.toml"), "{text}");
    assert!(text.contains("command line"), "{text}");
    // "auto" is refused: caps are pinned by the operator.
    let out = accel()
        .args(["--set", "upgrade_levels.conductor=auto", "config", "show"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto"));
}

/// The conductor (a real process) on RabbitMQ (`VERSO_TEST_RABBIT_URL`, started by
/// scripts/test.sh) and a SQLite file whose conductor record is pre-finalized.
#[test]
fn agents_heartbeat_and_one_ahead_of_its_conductor_exits_with_the_reason() {
    let _broker = broker();
    use accel_conductor::DbVersionStore;
    use verso_upgrade::store::{PersistedState, VersionStore};
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    // A vhost of its own: no late message of another test reaches its conductors.
    let vhost = support::Vhost::new();
    let rabbit = vhost.url.clone();
    let sets = [
        format!("database.url={db_url}"),
        format!("transport.url={rabbit}"),
        format!(
            "transport.control_exchange=accel-test-{}",
            uuid::Uuid::new_v4().simple()
        ),
        format!("agent.state_dir={}", dir.path().display()),
    ];
    let with_sets = |c: &mut Command| {
        for s in &sets {
            c.args(["--set", s]);
        }
    };
    // Release N+1's conductor, still pre-finalized at release N's version.
    let mut sync = accel();
    with_sets(&mut sync);
    assert!(sync
        .args(["db", "sync"])
        .status()
        .expect("db sync")
        .success());
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let db = accel_conductor::Db::connect(&db_url).await.expect("db");
            let record = PersistedState {
                format: 1,
                component: "accel".into(),
                apparent: 1,
                finalizing: None,
            };
            DbVersionStore::new(db, "accel")
                .save(&record)
                .await
                .expect("seed the record");
        });
    let mut conductor = accel();
    with_sets(&mut conductor);
    let mut child = conductor
        .arg("conductor")
        .stdout(Stdio::piped())
        .spawn()
        .expect("conductor starts");
    let stdout = child.stdout.take().expect("stdout");
    let _conductor = Killed(child);
    let ready = BufReader::new(stdout)
        .lines()
        .next()
        .expect("a line")
        .expect("text");
    assert!(ready.starts_with("conductor: serving"), "{ready}");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agent/tests/fixtures/sysfs/host1"
    );

    // A fresh agent starts at the conductor's version and reports.
    let mut fresh = accel();
    with_sets(&mut fresh);
    let out = fresh
        .args(["agent", "--once", "--host", "h2", "--sysfs-root", fixture])
        .output()
        .expect("agent runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record =
        std::fs::read_to_string(dir.path().join("agent-h2.version")).expect("agent record");
    let record: serde_json::Value = serde_json::from_str(&record).expect("json");
    assert_eq!(
        record["apparent"], 1,
        "a fresh agent never starts above its conductor"
    );

    // An agent whose record is ahead of the conductor's is fenced and exits with why.
    std::fs::write(
        dir.path().join("agent-h1.version"),
        r#"{"format": 1, "component": "accel", "apparent": 2}"#,
    )
    .expect("write");
    let mut ahead = accel();
    with_sets(&mut ahead);
    let out = ahead
        .args(["agent", "--once", "--host", "h1", "--sysfs-root", fixture])
        .output()
        .expect("agent runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("refused by the conductor")
            && stderr.contains("never finalizes before its server"),
        "{stderr}"
    );

    // A feature that needs object indirection, with the conductor's API pinned to 1.0
    // (on either wire): the agent refuses to start with the configuration error naming
    // what to change.
    for (wire, option) in [
        ("cyborg.report_to_cyborg=false", "conductor"),
        ("cyborg.report_to_cyborg=true", "cyborg_conductor"),
    ] {
        let mut pinned = accel();
        with_sets(&mut pinned);
        let out = pinned
            .args(["--set", "pci.managed=false", "--set", wire])
            .args(["--set", &format!("upgrade_levels.{option}=1.0")])
            .args(["agent", "--once", "--host", "h3", "--sysfs-root", fixture])
            .output()
            .expect("agent runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{wire}: {stderr}");
        assert!(
            stderr.contains("PCI unmanaged mode ([pci] managed = false) needs object indirection (conductor RPC 1.1)")
                && stderr.contains(&format!("[upgrade_levels] {option} is 1.0")),
            "{wire}: {stderr}"
        );
    }
}

/// Runs `accel` with `sets` and `args`; (exit code, stdout, stderr).
fn accel_with(sets: &[String], args: &[&str]) -> (Option<i32>, String, String) {
    let mut c = accel();
    for s in sets {
        c.args(["--set", s]);
    }
    let out = c.args(args).output().expect("accel runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Three `accel conductor` processes (serving Cyborg's agents too) on one PostgreSQL
/// database and RabbitMQ, a release N agent (Cyborg 17's, in Rust) that reports once (its
/// interval is 60 s) and sends no heartbeat, so one conductor heard it: `accel upgrade
/// finalize`, whichever conductor takes it, is refused naming the agent (exit 1), and
/// `accel upgrade status` from any conductor shows it. Once the host runs release N+1's agent, `finalize --wait` finalizes the
/// whole deployment (exit 0). Without a broker configured, exit 2. One conductor runs
/// with `[conductor] threads = 0`, the others on one thread.
#[test]
fn accel_upgrade_finalize_decides_on_the_agents_every_conductor_heard() {
    let _broker = broker();
    use accel_conductor::DbVersionStore;
    use verso_upgrade::store::{PersistedState, VersionStore};
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db_url = rt.block_on(accel_conductor::testing::postgres_database());
    let dir = tempfile::tempdir().expect("tempdir");
    // A vhost of its own: no late message of another test reaches its conductors.
    let vhost = support::Vhost::new();
    let rabbit = vhost.url.clone();
    let exchange = format!("accel-test-{}", uuid::Uuid::new_v4().simple());
    let cyborg_exchange = format!("cyborg-test-{}", uuid::Uuid::new_v4().simple());
    let sets = vec![
        format!("database.url={db_url}"),
        format!("transport.url={rabbit}"),
        format!("transport.control_exchange={exchange}"),
        "cyborg.serve_agents=true".to_owned(),
        format!("cyborg.control_exchange={cyborg_exchange}"),
        format!("agent.state_dir={}", dir.path().display()),
        "agent.report_interval=1".to_owned(),
        "conductor.agent_liveness=30".to_owned(),
    ];
    let (code, _, err) = accel_with(&sets, &["db", "sync"]);
    assert_eq!(code, Some(0), "{err}");
    // Release N+1 over release N's record: pre-finalized.
    rt.block_on(async {
        let db = accel_conductor::Db::connect(&db_url).await.expect("db");
        DbVersionStore::new(db.clone(), "accel")
            .save(&PersistedState {
                format: 1,
                component: "accel".into(),
                apparent: 1,
                finalizing: None,
            })
            .await
            .expect("seed the record");
        db.close().await;
    });
    let mut conductors = Vec::new();
    for i in 0..3 {
        let mut c = accel();
        for s in &sets {
            c.args(["--set", s]);
        }
        // The first on a runtime of a worker per core, the others on one thread (the
        // default): both serve, and one deployment may mix them.
        if i == 0 {
            c.args(["--set", "conductor.threads=0"]);
        }
        let mut child = c
            .arg("conductor")
            .stdout(Stdio::piped())
            .spawn()
            .expect("conductor starts");
        ready(&mut child, "conductor: serving");
        conductors.push(Killed(child));
    }
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agent/tests/fixtures/sysfs/host1"
    );
    let n = rt.block_on(async {
        let transport = verso_rpc::transport::transport_from_url(&rabbit, Some(&cyborg_exchange))
            .await
            .expect("the broker");
        let config = accel_cyborg17_agent::config::AgentConfig {
            transport_url: rabbit.clone(),
            host: "n-host".into(),
            rpc_timeout: std::time::Duration::from_secs(30),
            report_interval: std::time::Duration::from_secs(60),
            sysfs_root: fixture.into(),
            fpga: None,
        };
        let agent = accel_cyborg17_agent::run::start_with(&config, transport)
            .await
            .expect("Cyborg 17's agent starts");
        let first = agent.first_report().await;
        assert!(
            matches!(first, accel_cyborg17_agent::run::Reported::Devices(_)),
            "{first:?}"
        );
        agent
    });

    // Four finalize calls reach the three conductors in turn: every one refuses.
    for i in 0..4 {
        let (code, out, err) = accel_with(&sets, &["upgrade", "finalize"]);
        assert_eq!(code, Some(1), "call {i}: {out}{err}");
        assert!(
            out.contains("blocker: agent n-host on n-host (software 1"),
            "call {i}: {out}"
        );
    }
    for i in 0..3 {
        let (code, out, err) = accel_with(&sets, &["upgrade", "status", "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let status: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(status["state"], "pre_finalized", "call {i}: {status:#}");
        let clients = status["clients"].as_array().expect("clients");
        assert_eq!(clients.len(), 1, "call {i}: {status:#}");
        assert_eq!(
            (
                &clients[0]["id"],
                &clients[0]["software"],
                &clients[0]["live"]
            ),
            (&"n-host".into(), &1.into(), &true.into()),
            "call {i}: {status:#}"
        );
        assert!(clients[0]["heard_by"]
            .as_str()
            .is_some_and(|h| !h.is_empty()));
    }

    // The host is upgraded: release N+1's agent takes its record over.
    rt.block_on(n.stop());
    let mut next = accel();
    for s in &sets {
        next.args(["--set", s]);
    }
    let _next = Killed(
        next.args(["agent", "--host", "n-host", "--sysfs-root", fixture])
            .stdout(Stdio::null())
            .spawn()
            .expect("N+1 agent starts"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = loop {
        let (code, out, err) =
            accel_with(&sets, &["upgrade", "finalize", "--wait", "--timeout", "60"]);
        match code {
            Some(0) => break out,
            // Until the new agent's first heartbeat replaces the old one's row.
            Some(1) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => panic!("finalize --wait: {other:?}: {out}{err}"),
        }
    };
    assert!(out.contains("deployment: finalized"), "{out}");
    assert!(out.contains("agents finalized: 1/1"), "{out}");
    let (code, out, _) = accel_with(&sets, &["upgrade", "status"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("deployment: finalized"), "{out}");
    drop(conductors);

    // No broker configured: nothing to reach, exit 2 with what to set.
    let (code, _, err) = accel_with(&[], &["upgrade", "status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("transport.url"), "{err}");
}

/// `accel db clear-cleanup`: an NVMe device whose erase failed is put back in the pool
/// (exit 0, the handle named), once (then exit 1); an unknown device is exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_clear_cleanup_puts_a_failed_device_back() {
    use accel_conductor::db::Release;
    use accel_conductor::handles::CleanupResult;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.db");
    let db = accel_conductor::Db::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("database");
    db.migrate().await.expect("migrations");
    let ssd = accel_conductor::testing::reported_device("0000:3c:00.0", "SSD", "144d", "a80a", 1);
    db.report("h1", &[ssd]).await.expect("report");
    let groups = vec![[("resources:SSD".to_owned(), "1".to_owned())]
        .into_iter()
        .collect()];
    db.create_profile("ssd", groups, None)
        .await
        .expect("profile");
    let arq = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&arq.uuid, "h1", "inst-1", None)
        .await
        .expect("bind");
    db.unbind_with(&arq.uuid, Release::CleanSsd)
        .await
        .expect("release");
    let h = db.cleaning_handles("h1").await.expect("cleaning").remove(0);
    db.finish_cleanup(
        &h.uuid,
        h.revision,
        &CleanupResult::Failed("erase failed".into()),
    )
    .await
    .expect("failed");
    db.close().await;

    let url = format!("database.url=sqlite://{}", path.display());
    let run = |device: &str| {
        let out = accel()
            .args(["--set", &url, "db", "clear-cleanup", "--device", device])
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run(&h.device_uuid);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(&format!("cleared attach handle {}", h.uuid)),
        "{text}"
    );
    let (code, text) = run(&h.device_uuid);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("no failed cleanup"), "{text}");
    let (code, text) = run("00000000-0000-4000-8000-000000000000");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("no device"), "{text}");

    let db = accel_conductor::Db::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("database");
    let again = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&again.uuid, "h1", "inst-2", None)
        .await
        .expect("allocatable again");
}
