//! What the `accel` binary's process tests share: a child process killed when dropped,
//! waiting for its first stdout line, an agent started and ready, polling with a
//! deadline, and an all-in-one behind the test Keystone.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]
#![allow(dead_code)]

use accel_conductor::keystone::{AuthOptions, Session};
use accel_conductor::placement::Placement;
use std::io::{BufRead, BufReader};
use std::process::Child;

/// A child process, killed and reaped when dropped (a failed test leaves none behind).
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for the first line of `child`'s stdout, which must start with `prefix` (the
/// process is ready), and returns it; the rest is read and dropped so the child never
/// blocks on a full pipe.
pub fn ready(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = lines.next().expect("a line").expect("text");
    assert!(line.starts_with(prefix), "{line}");
    std::thread::spawn(move || for _ in lines {});
    line
}

/// Starts `accel agent --host host --sysfs-root sysfs` on the test broker with `env`
/// (`ACCEL_...` variables), its state in `dir/state` and its log in `dir/agent.log`, and
/// waits for its first stdout line (the one it says once serving), which must start with
/// `agent <host>: <said>`, and returns it; the agent's log is the failure's message
/// otherwise.
pub fn accel_agent(
    dir: &std::path::Path,
    host: &str,
    sysfs: &std::path::Path,
    env: &[(&str, String)],
    said: &str,
) -> (Killed, String) {
    let log = dir.join("agent.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["agent", "--host", host, "--sysfs-root"])
        .arg(sysfs)
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .env("ACCEL_AGENT_STATE_DIR", dir.join("state"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("accel agent starts");
    let stdout = child.stdout.take().expect("stdout");
    let agent = Killed(child);
    let wanted = format!("agent {host}: {said}");
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let line = lines
        .next()
        .filter(|l| l.starts_with(&wanted))
        .unwrap_or_else(|| {
            panic!(
                "the agent did not say {wanted:?} first:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
    std::thread::spawn(move || for _ in lines {});
    (agent, line)
}

/// Polls `check` every 100 ms until it gives a value; after `within`, panics naming
/// `what`, with `log()` (a service's log) in the message.
pub async fn eventually<T, Fut>(
    within: std::time::Duration,
    what: &str,
    log: impl Fn() -> String,
    mut check: impl FnMut() -> Fut,
) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} within {within:?}:\n{}",
            log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub fn keystone_url() -> String {
    std::env::var("VERSO_TEST_KEYSTONE_URL").unwrap_or_else(|_| {
        panic!(
            "this test needs the test Keystone: run scripts/start-keystone.sh (scripts/test.sh does) \
             and set VERSO_TEST_KEYSTONE_URL"
        )
    })
}

pub fn python() -> String {
    std::env::var("VERSO_TEST_PYTHON").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../.venv/bin/python").to_owned()
    })
}

/// The first ```toml block after the operator guide's authentication heading.
pub fn guide_block() -> String {
    let guide = include_str!("../../../../../docs/operator-guide.md");
    let section = guide
        .split("## Authentication, policy and projects")
        .nth(1)
        .expect("the operator guide has the authentication section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block in it");
    block.to_owned()
}

/// The guide's block, pointed at the test Keystone with the test service user.
pub fn auth_config() -> String {
    let mut out = String::new();
    for line in guide_block().lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let line = match key {
            "auth_url" => format!("auth_url = \"{}\"", keystone_url()),
            "www_authenticate_uri" => format!("www_authenticate_uri = \"{}\"", keystone_url()),
            "password" => "password = \"verso-accel\"".to_owned(),
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `accel all-in-one` with `agents` agents on a SQLite file in `dir`, its API behind the
/// test Keystone with the operator guide's options: the process and the API's URL.
pub fn all_in_one_with_keystone(dir: &std::path::Path, agents: u32) -> (Killed, String) {
    all_in_one_with_keystone_and(dir, agents, "")
}

/// [`all_in_one_with_keystone`] with more configuration (whole TOML tables) after it.
pub fn all_in_one_with_keystone_and(
    dir: &std::path::Path,
    agents: u32,
    more: &str,
) -> (Killed, String) {
    use std::process::{Command, Stdio};
    let config = dir.join("accel.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"sqlite://{}\"\n\n[api]\nlisten = \"127.0.0.1:0\"\n{}",
            dir.join("accel.db").display(),
            // The guide's block starts with its own [api] table: merge the two.
            auth_config().replacen("[api]\n", "", 1) + "\n" + more
        ),
    )
    .expect("write config");
    let mut aio = Killed(
        Command::new(env!("CARGO_BIN_EXE_accel"))
            .arg("--config")
            .arg(&config)
            .args(["all-in-one", "--agents", &agents.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("all-in-one starts"),
    );
    let stdout = aio.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the all-in-one says where the API listens")
            .expect("text");
        if let Some(url) = line.strip_prefix("api: listening on ") {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (aio, base)
}

/// `accel conductor` on `db_url` serving Cyborg's conductor API (`ACCEL_CYBORG_SERVE_AGENTS`
/// = `serve_agents`) on the test broker, with more configuration in `env` (`ACCEL_...`
/// variables), once it is ready: it has said it serves Cyborg's conductor API (it has
/// bound `cyborg-conductor` then), or, not serving it, accel's own topics. Serving it,
/// the conductor runs as an operator migrating from Cyborg 17 runs it: on a database
/// Cyborg 17 made, with Cyborg's rows (here release N's `db sync` makes it when `db_url`
/// is empty, and a device profile is its row), which it takes in place at release N.
pub fn cyborg_conductor(db_url: &str, serve_agents: bool, env: &[(&str, String)]) -> Killed {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    if serve_agents {
        let url = db_url.to_owned();
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .expect("runtime")
                .block_on(async {
                    let store = accel_cyborg17_conductor::db::Store::connect(&url)
                        .await
                        .expect("the database");
                    if store.sync().await.expect("Cyborg 17's schema") {
                        let db = accel_conductor::Db::connect(&url)
                            .await
                            .expect("the database");
                        sqlx::query(
                            "INSERT INTO device_profiles (uuid, name, profile_json, created_at) \
                             VALUES ($1, 'migrated-from-cyborg', '{\"groups\": []}', \
                             '2026-12-07 05:00:00')",
                        )
                        .bind(uuid::Uuid::new_v4().to_string())
                        .execute(db.pool())
                        .await
                        .expect("a row of Cyborg's");
                        db.close().await;
                    }
                })
        })
        .join()
        .expect("Cyborg 17's database made");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("conductor")
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .env("ACCEL_DATABASE_URL", db_url)
        .env("ACCEL_CYBORG_SERVE_AGENTS", serve_agents.to_string())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("accel conductor starts");
    let stdout = child.stdout.take().expect("piped");
    let conductor = Killed(child);
    let wanted = if serve_agents {
        "conductor: serving Cyborg's conductor API on cyborg-conductor"
    } else {
        "conductor: serving accel-conductor"
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        let _ = tx.send(lines.any(|l| l.starts_with(wanted)));
        // Keep reading so the conductor never blocks on a full pipe.
        for _ in lines {}
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    match rx.recv_timeout(deadline - Instant::now()) {
        Ok(true) => conductor,
        Ok(false) => panic!("the conductor ended without saying {wanted:?}"),
        Err(_) => panic!("the conductor did not say {wanted:?} within 60 s"),
    }
}

/// `accel upgrade finalize` on the test broker is refused (exit 1) naming `host` as a
/// member still at release N (`software 1`).
pub fn finalize_refused_naming(host: &str) {
    let finalize = std::process::Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["upgrade", "finalize"])
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .output()
        .expect("accel upgrade finalize runs");
    let said = String::from_utf8_lossy(&finalize.stdout);
    assert_eq!(finalize.status.code(), Some(1), "{said}");
    assert!(said.contains(host) && said.contains("software 1"), "{said}");
}

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: scripts/test.sh starts the test services and sets it")
    })
}

/// Placement as the test's service user (accel's: admin in project `service`).
pub fn placement() -> Placement {
    Placement::new(service_session(), Some(env("VERSO_TEST_PLACEMENT_URL")))
}

/// The tests' service user's Keystone session (accel: admin in project `service`).
pub fn service_session() -> Session {
    Session::new(AuthOptions::new(
        &env("VERSO_TEST_KEYSTONE_URL"),
        "accel",
        "verso-accel",
        "service",
    ))
    .expect("a Keystone session")
}

/// An active image in the test Glance holding `data`: an FPGA bitstream.
pub async fn bitstream(data: &[u8]) -> String {
    accel_keystone::testing::glance_image(
        &service_session(),
        &env("VERSO_TEST_GLANCE_URL"),
        Some(data),
    )
    .await
    .expect("an image in Glance")
}

/// An FPGA programming tool for `[fpga] program_command` in `dir`, and the file it
/// writes when run (`<PCI address> <sha256 of the bitstream file>`): the tool and the
/// file.
pub fn fpga_tool(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let record = dir.join("programmed");
    let tool = dir.join("program-fpga");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\nprintf '%s ' \"$1\" > {r}\nsha256sum \"$2\" | cut -d' ' -f1 >> {r}\n",
            r = record.display()
        ),
    )
    .expect("write the tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (tool, record)
}

/// A compute node provider made for one run and its tree, deleted when dropped (the
/// test Placement outlives the run; a failed run leaves nothing either).
pub struct ComputeNode {
    placement: Placement,
    /// Its provider's UUID.
    pub uuid: String,
}

impl ComputeNode {
    /// Makes the compute node provider of `host` (named after it).
    pub async fn create(placement: &Placement, host: &str) -> ComputeNode {
        let (status, node) = placement
            .call(
                reqwest::Method::POST,
                "/resource_providers",
                Some(&serde_json::json!({ "name": host })),
            )
            .await
            .expect("Placement answers");
        assert_eq!(status, 200, "{node}");
        ComputeNode {
            placement: placement.clone(),
            uuid: node["uuid"]
                .as_str()
                .expect("the provider's uuid")
                .to_owned(),
        }
    }
}

impl Drop for ComputeNode {
    fn drop(&mut self) {
        let placement = self.placement.clone();
        let root = self.uuid.clone();
        // Drop cannot await: the deletes run on a runtime of their own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(placement.delete_tree(&root));
        })
        .join();
    }
}

/// A RabbitMQ vhost of one test, the test broker's `guest` allowed everything on it,
/// deleted when dropped. Queues are named by topic whatever the control exchange
/// (`cyborg-conductor` is one queue for every exchange bound to it), so only a vhost of
/// its own keeps another test's late messages (a report a killed conductor left
/// unacknowledged) out of a test that counts what its conductors heard.
pub struct Vhost {
    name: String,
    /// `VERSO_TEST_RABBIT_URL` on this vhost.
    pub url: String,
}

/// `rabbitmqctl args` on the test broker's node, whatever its outcome (for clean-ups).
pub fn rabbitmqctl_output(args: &[&str]) -> std::process::Output {
    let node = std::env::var("RABBITMQ_NODENAME").unwrap_or_else(|_| "rabbit@localhost".into());
    std::process::Command::new("rabbitmqctl")
        .args(["-q", "-n", &node])
        .args(args)
        .output()
        .expect("rabbitmqctl runs (scripts/test.sh installs RabbitMQ)")
}

/// `rabbitmqctl args` on the test broker's node, which must succeed.
pub fn rabbitmqctl(args: &[&str]) -> std::process::Output {
    let out = rabbitmqctl_output(args);
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Vhost {
    pub fn new() -> Vhost {
        let name = format!("accel-test-{}", uuid::Uuid::new_v4().simple());
        rabbitmqctl(&["add_vhost", &name]);
        rabbitmqctl(&["set_permissions", "-p", &name, "guest", ".*", ".*", ".*"]);
        let base = std::env::var("VERSO_TEST_RABBIT_URL")
            .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into());
        let url = format!("{}/{name}", base.trim_end_matches('/'));
        Vhost { name, url }
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = rabbitmqctl_output(&["delete_vhost", &self.name]);
    }
}
