//! Test support (feature `testing`) for the crates whose tests run Cyborg 17's own code
//! as a peer: the test virtualenv's Python (`VERSO_TEST_PYTHON`, default the
//! workspace's `.venv`), the test broker (`VERSO_TEST_RABBIT_URL`), a transport on
//! Cyborg's control exchange, `python/cyborg_peer.py`, and (with `keystone`) a
//! bitstream uploaded to the test Glance. A missing Python or broker
//! fails the test with what to start; nothing is skipped.

#![allow(clippy::expect_used)]

use crate::rpc::CONTROL_EXCHANGE;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::transport::Transport;

/// The test broker's URL.
pub fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

/// The Python with openstack-cyborg 17.0.0 (`requirements-test.txt`).
pub fn python() -> PathBuf {
    let python = std::env::var_os("VERSO_TEST_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        python.exists(),
        "no Python at {}: create the venv with requirements-test.txt (scripts/test.sh does) or set VERSO_TEST_PYTHON",
        python.display()
    );
    python
}

/// `python/cyborg_peer.py`: Cyborg's own report path (`send`) and serializer (`serve`).
pub fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cyborg_peer.py")
}

/// A transport to the test broker on Cyborg's control exchange (`cyborg`).
pub async fn cyborg_transport() -> Arc<dyn Transport> {
    let mut config = AmqpConfig::from_url(&rabbit_url()).expect("the test broker URL");
    config.control_exchange = CONTROL_EXCHANGE.to_owned();
    Arc::new(
        AmqpTransport::connect_with(config)
            .await
            .unwrap_or_else(|e| panic!("RabbitMQ (scripts/test.sh starts it): {e}")),
    )
}

/// A real Cyborg agent's report, once: `python/cyborg_peer.py send` (Cyborg's fake
/// driver's discovery through Cyborg's `ConductorAPI.report_data`) to `topic` as
/// `host`; the primitives it sent. Fails the test unless Cyborg's call returned `None`.
pub async fn cyborg_agent_reports(topic: &str, host: &str) -> serde_json::Value {
    cyborg_agent_reports_devices(topic, host, false).await
}

/// [`cyborg_agent_reports`], and with `with_nic` the report also holds an SR-IOV NIC
/// whose two virtual functions are deployables of their own (`h_nic_vf1`, `h_nic_vf2`
/// for host `h`, one `PCI` handle and `rc`/`trait0` attributes each), as Cyborg's Intel
/// NIC driver reports them (`python/cyborg_devices.py`).
pub async fn cyborg_agent_reports_devices(
    topic: &str,
    host: &str,
    with_nic: bool,
) -> serde_json::Value {
    cyborg_agent_sends(topic, host, &[if with_nic { "--with-nic" } else { "" }]).await
}

/// [`cyborg_agent_reports_devices`] with the NIC, the fake FPGA named after `host`
/// (`<host>_FakeDevice`) as the agent of that host names it, where the others name it
/// after the sending process's own host.
pub async fn cyborg_agent_reports_as_host(topic: &str, host: &str) -> serde_json::Value {
    cyborg_agent_sends(topic, host, &["--with-nic", "--fpga-named-after-host"]).await
}

async fn cyborg_agent_sends(topic: &str, host: &str, flags: &[&str]) -> serde_json::Value {
    let mut cmd = tokio::process::Command::new(python());
    cmd.arg(peer_script())
        .args(["send", "--transport-url", &rabbit_url(), "--topic", topic])
        .args(["--host", host])
        .args(flags.iter().filter(|f| !f.is_empty()));
    let out = cmd
        .kill_on_drop(true)
        .output()
        .await
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "reply null"),
        "Cyborg's report_data failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sent "))
        .expect("a sent line");
    serde_json::from_str(sent).expect("JSON")
}

/// Runs `python/cyborg_peer.py <mode>` against the conductor on `topic` for `host`
/// with `extra` arguments: a Cyborg agent with the seed spec. Its standard output, or a
/// panic with both streams when it failed.
async fn seed_spec_agent(mode: &str, topic: &str, host: &str, extra: &[&str]) -> String {
    let out = tokio::process::Command::new(python())
        .arg(peer_script())
        .args([mode, "--transport-url", &rabbit_url(), "--topic", topic])
        .args(["--host", host])
        .args(extra)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "cyborg_peer.py {mode} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What one object call of the seed spec's agent answered: the object after
/// (`Ok(primitive)`) or the remote error (`Err((kind, message))`).
pub type SeedSpecOutcome = Result<serde_json::Value, (String, String)>;

fn outcomes(stdout: &str) -> Vec<SeedSpecOutcome> {
    stdout
        .lines()
        .filter_map(|line| {
            if let Some(rest) = line.strip_prefix("ok ") {
                Some(Ok(serde_json::from_str(rest).expect("a primitive")))
            } else {
                line.strip_prefix("error ").map(|rest| {
                    let (kind, message) = rest.split_once(' ').unwrap_or((rest, ""));
                    Err((kind.to_owned(), message.to_owned()))
                })
            }
        })
        .collect()
}

/// `(list version, members' primitives)` of a `list` line.
fn listed(stdout: &str) -> (String, serde_json::Value) {
    let rest = stdout
        .lines()
        .find_map(|l| l.strip_prefix("list "))
        .unwrap_or_else(|| panic!("no list in:\n{stdout}"));
    let (version, members) = rest.split_once(' ').expect("version and members");
    (
        version.to_owned(),
        serde_json::from_str(members).expect("members"),
    )
}

/// A Cyborg agent with the seed spec asking the conductor on `topic` for `host`'s
/// devices (`python/cyborg_peer.py devices`: `DeviceList.get_by_hostname` through
/// oslo.versionedobjects' indirection at conductor RPC 1.1), its `Device` class at
/// `device_version` when given: `(list version, members' primitives)`.
pub async fn cyborg_agent_lists_devices(
    topic: &str,
    host: &str,
    device_version: Option<&str>,
) -> (String, serde_json::Value) {
    let extra: Vec<&str> = device_version
        .map(|v| vec!["--device-version", v])
        .unwrap_or_default();
    listed(&seed_spec_agent("devices", topic, host, &extra).await)
}

/// The same agent's read of `host`'s attach handles (`AttachHandleList.get_by_hostname`).
pub async fn cyborg_agent_lists_handles(topic: &str, host: &str) -> (String, serde_json::Value) {
    listed(&seed_spec_agent("handles", topic, host, &[]).await)
}

/// The managed-mode feature: the agent reads `host`'s handles and calls
/// `AttachHandle.update_managed(managed)` on `handle`; with `stale`, it reads twice and
/// updates the second read after the first (two outcomes).
pub async fn cyborg_agent_sets_managed(
    topic: &str,
    host: &str,
    handle: &str,
    managed: bool,
    stale: bool,
) -> Vec<SeedSpecOutcome> {
    let mut extra = vec![
        "--handle",
        handle,
        "--managed",
        if managed { "yes" } else { "no" },
    ];
    if stale {
        extra.push("--stale");
    }
    outcomes(&seed_spec_agent("set-managed", topic, host, &extra).await)
}

/// How [`cyborg_agent_cleans`] calls a cleanup step a second time, if at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Again {
    /// Once.
    No,
    /// Again from the device as read, in the same request context (a retry).
    Retry,
    /// Again from the device as read, in another request context (another runner).
    Other,
}

/// The NVMe cleanup feature: the agent reads `host`'s devices and calls
/// `Device.cleanup_<step>()` (`started`, `succeeded`, `failed` with `reason`) on
/// `device`, and `again` as said.
pub async fn cyborg_agent_cleans(
    topic: &str,
    host: &str,
    device: &str,
    step: &str,
    reason: &str,
    again: Again,
) -> Vec<SeedSpecOutcome> {
    let mut extra = vec!["--device", device, "--step", step, "--reason", reason];
    match again {
        Again::No => {}
        Again::Retry => extra.push("--retry"),
        Again::Other => extra.push("--other"),
    }
    outcomes(&seed_spec_agent("cleanup", topic, host, &extra).await)
}

/// Cyborg's conductor calling host `host`'s agent: `python/cyborg_peer.py agent`, Cyborg
/// 17's own `AgentAPI` calling `method` (`create_vgpu_mdev`, `remove_vgpu_mdev`, or
/// `fpga_program` with `uuid` as the bitstream). `Ok(reply)` (JSON), or `Err((exception
/// class, message))` for the remote error Cyborg's client raised, the class as
/// `module.Name` (`cyborg.common.exception.InvalidUUID`).
pub async fn cyborg_calls_agent(
    host: &str,
    method: &str,
    pci: &str,
    mdev_type: &str,
    uuid: &str,
) -> Result<serde_json::Value, (String, String)> {
    let out = tokio::process::Command::new(python())
        .arg(peer_script())
        .args(["agent", "--transport-url", &rabbit_url(), "--host", host])
        .args([
            "--method", method, "--pci", pci, "--type", mdev_type, "--uuid", uuid,
        ])
        .kill_on_drop(true)
        .output()
        .await
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cyborg_peer.py agent failed:\n{stdout}\n{stderr}"
    );
    for line in stdout.lines() {
        if let Some(reply) = line.strip_prefix("reply ") {
            return Ok(serde_json::from_str(reply).expect("JSON"));
        }
        if let Some(error) = line.strip_prefix("error ") {
            let (class, message) = error.split_once(' ').unwrap_or((error, ""));
            return Err((class.to_owned(), message.to_owned()));
        }
    }
    panic!("no reply or error line:\n{stdout}\n{stderr}");
}

/// The test venv's `cyborg-agent`: openstack-cyborg 17.0.0's own agent service
/// (`cyborg/cmd/agent.py`), beside [`python`].
pub fn cyborg_agent_script() -> PathBuf {
    python().with_file_name("cyborg-agent")
}

/// The `cyborg.conf` of a Cyborg 17 agent with Cyborg's fake driver, as an operator
/// writes it: the broker, the host (its RPC server name on `cyborg-agent`), and the
/// Placement credentials the agent needs at start (it looks up its compute node's
/// resource provider, named `host` here, and refuses to start without one). Placement
/// is found in `keystone_url`'s catalog; `user` is a service user, admin in project
/// `service`. The log goes to `log_file`.
pub fn cyborg_agent_config(
    host: &str,
    keystone_url: &str,
    user: &str,
    password: &str,
    log_file: &Path,
) -> String {
    cyborg_agent_config_with(host, keystone_url, user, password, log_file, "fake_driver")
}

/// [`cyborg_agent_config`] with Cyborg's `[agent] enabled_drivers` = `drivers` (such as
/// `nvidia_gpu_driver`), and oslo.privsep's daemon started without sudo as the test's
/// user (`[cyborg_sys_admin] helper_command`): Cyborg's real drivers run `lspci` through
/// it, which finds the `lspci` of the service's `PATH`
/// ([`CyborgService::start_with_path`]).
pub fn cyborg_agent_config_with(
    host: &str,
    keystone_url: &str,
    user: &str,
    password: &str,
    log_file: &Path,
    drivers: &str,
) -> String {
    format!(
        "[DEFAULT]\n\
         transport_url = {rabbit}\n\
         host = {host}\n\
         log_file = {log}\n\
         \n\
         [agent]\n\
         enabled_drivers = {drivers}\n\
         resource_provider_name = {host}\n\
         resource_provider_startup_retries = 0\n\
         \n\
         [cyborg_sys_admin]\n\
         helper_command = {helper}\n\
         \n\
         {placement}",
        rabbit = rabbit_url(),
        log = log_file.display(),
        helper = python().with_file_name("privsep-helper").display(),
        placement = placement_section(keystone_url, user, password),
    )
}

/// The `cyborg.conf` of a Cyborg 17 conductor (`host` is its RPC server name) on the
/// SQLite database `database` (made by [`cyborg_conductor_schema`]), reaching Placement
/// as [`cyborg_agent_config`]'s agent does (it makes the deployables' providers under
/// each host's compute node inside `report_data`).
pub fn cyborg_conductor_config(
    host: &str,
    database: &Path,
    keystone_url: &str,
    user: &str,
    password: &str,
    log_file: &Path,
) -> String {
    let connection = format!("sqlite:///{}", database.display());
    cyborg_conductor_config_on(host, &connection, keystone_url, user, password, log_file)
}

/// [`cyborg_conductor_config`] on any database Cyborg's `[database] connection` takes
/// (SQLAlchemy's URL form: `mysql+pymysql://...` for MariaDB).
pub fn cyborg_conductor_config_on(
    host: &str,
    connection: &str,
    keystone_url: &str,
    user: &str,
    password: &str,
    log_file: &Path,
) -> String {
    format!(
        "[DEFAULT]\n\
         transport_url = {rabbit}\n\
         host = {host}\n\
         log_file = {log}\n\
         \n\
         [database]\n\
         connection = {connection}\n\
         \n\
         {placement}",
        rabbit = rabbit_url(),
        log = log_file.display(),
        placement = placement_section(keystone_url, user, password),
    )
}

fn placement_section(keystone_url: &str, user: &str, password: &str) -> String {
    format!(
        "[placement]\n\
         auth_type = password\n\
         auth_url = {keystone_url}\n\
         username = {user}\n\
         password = {password}\n\
         project_name = service\n\
         user_domain_name = Default\n\
         project_domain_name = Default\n\
         region_name = RegionOne\n"
    )
}

/// `python/cyborg_conductor.py`: Cyborg's schema, and what Cyborg's conductor stored.
pub fn conductor_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cyborg_conductor.py")
}

fn run_conductor_script(args: &[&str]) -> String {
    run_script(&conductor_script(), args)
}

/// Runs the test venv's Python on `script` with `args`; its output (it must succeed).
fn run_script(script: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The JSON line a peer script prints last.
fn last_json_line(out: &str) -> serde_json::Value {
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Makes Cyborg's tables in the database of `config` (a [`cyborg_conductor_config`])
/// with Cyborg's own `create_schema`.
pub fn cyborg_conductor_schema(config: &Path) {
    let config = config.to_str().expect("a UTF-8 path");
    let out = run_conductor_script(&["schema", "--config", config]);
    assert!(out.contains("schema ready"), "{out}");
}

/// Makes Cyborg's tables in the database of `config` as a Cyborg 17 deployment does:
/// its `cyborg-dbsync upgrade` (Cyborg's alembic migrations, which run on MySQL/MariaDB).
pub fn cyborg_dbsync_upgrade(config: &Path) {
    let dbsync = python().with_file_name("cyborg-dbsync");
    let out = std::process::Command::new(&dbsync)
        .arg("--config-file")
        .arg(config)
        .arg("upgrade")
        .output()
        .expect("cyborg-dbsync runs");
    assert!(
        out.status.success(),
        "cyborg-dbsync upgrade failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fills the database of `config` through Cyborg 17's own conductor code
/// (`python/cyborg_conductor.py fill`): the fake driver's FPGA on each of `hosts` (whose
/// compute node providers must exist in Placement), two device profiles, their requests,
/// one bound on the first host and one on the last, the last host's device in
/// maintenance.
pub fn cyborg_fill(config: &Path, hosts: &[&str]) {
    let config = config.to_str().expect("a UTF-8 path");
    let mut args = vec!["fill", "--config", config];
    for host in hosts {
        args.extend(["--host", host]);
    }
    let out = run_conductor_script(&args);
    assert!(out.contains("filled"), "{out}");
}

/// Everything the database of `config` holds, read through Cyborg 17's own objects
/// (`python/cyborg_conductor.py dump`): `{devices, profiles, arqs}`.
pub fn cyborg_dump(config: &Path) -> serde_json::Value {
    let config = config.to_str().expect("a UTF-8 path");
    last_json_line(&run_conductor_script(&["dump", "--config", config]))
}

/// Writes `dir/cyborg.conf`, a configuration for Cyborg's own code reading the database
/// at `connection` (SQLAlchemy's URL: `sqlite:////path`, `mysql+pymysql://...`) and
/// logging to `dir/cyborg.log`; returns its path.
pub fn write_cyborg_database_config(dir: &Path, connection: &str) -> PathBuf {
    let path = dir.join("cyborg.conf");
    let conf = format!(
        "[DEFAULT]\n\
         log_file = {log}\n\
         \n\
         [database]\n\
         connection = {connection}\n",
        log = dir.join("cyborg.log").display(),
    );
    std::fs::write(&path, conf).expect("write cyborg.conf");
    path
}

/// What Cyborg 17's own objects read of the tables accel's schema shares with Cyborg's,
/// from the database of `config` (`python/cyborg_conductor.py read`): `{control_paths,
/// deployables, handles, profiles}`, each sorted by UUID.
pub fn cyborg_read(config: &Path) -> serde_json::Value {
    let config = config.to_str().expect("a UTF-8 path");
    last_json_line(&run_conductor_script(&["read", "--config", config]))
}

fn schema_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cyborg_schema.py")
}

/// Runs the statements of `file` on the database at `url` (SQLAlchemy's form) in one
/// transaction (`python/cyborg_schema.py apply`).
pub fn cyborg_schema_apply(url: &str, file: &Path) {
    let file = file.to_str().expect("a UTF-8 path");
    let out = run_script(&schema_script(), &["apply", "--url", url, "--file", file]);
    assert!(out.starts_with("applied "), "{out}");
}

/// The schema facts of the database at `--reference` that the one at `--candidate` lacks
/// and the reverse (`python/cyborg_schema.py compare` with `args`): `{missing, extra,
/// facts}`.
pub fn cyborg_schema_compare(args: &[&str]) -> serde_json::Value {
    last_json_line(&run_script(
        &schema_script(),
        &[&["compare"], args].concat(),
    ))
}

/// Runs one SQL statement with the test venv's Python on the server of `server_url`,
/// connected by the Python lines `connect` (which read the URL as `sys.argv[1]` and
/// leave the connection in `c`), and commits.
fn execute_with(connect: &str, server_url: &str, sql: &str) {
    let script = format!("import sys\n{connect}\nc.cursor().execute(sys.argv[2])\nc.commit()\n");
    let out = std::process::Command::new(python())
        .args(["-c", &script, server_url, sql])
        .output()
        .expect("the test Python runs");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs one SQL statement on the MySQL/MariaDB server of `server_url`
/// (`mysql://user:pass@host:port/`, the test server's `VERSO_TEST_MYSQL_URL`) with the
/// test venv's PyMySQL.
pub fn mysql_execute(server_url: &str, sql: &str) {
    execute_with(
        "import urllib.parse, pymysql\n\
         u = urllib.parse.urlsplit(sys.argv[1])\n\
         c = pymysql.connect(host=u.hostname, port=u.port or 3306, \
         user=urllib.parse.unquote(u.username), password=urllib.parse.unquote(u.password or ''))",
        server_url,
        sql,
    );
}

/// Runs one SQL statement outside a transaction (`CREATE DATABASE` can run in none) on
/// the PostgreSQL server of `server_url` (`postgres://user:pass@host:port/db`, the test
/// cluster's `VERSO_TEST_POSTGRES_URL`) with the test venv's psycopg2.
pub fn postgres_execute(server_url: &str, sql: &str) {
    execute_with(
        "import psycopg2\nc = psycopg2.connect(sys.argv[1])\nc.autocommit = True",
        server_url,
        sql,
    );
}

/// A sequence of reports of `host` built with Cyborg 17's own driver objects
/// (`python/cyborg_conductor.py reports`): a list of `{what, devices}`, `devices` the
/// `DriverDevice` primitives an agent's `report_data` carries.
pub fn cyborg_reports(host: &str) -> serde_json::Value {
    last_json_line(&run_conductor_script(&["reports", "--host", host]))
}

/// Cyborg 17's own conductor (`ConductorManager.report_data`) applies the report in
/// `file` for `host` on the database and Placement of `config`
/// (`python/cyborg_conductor.py report`): `Err` with Cyborg's traceback when it raised.
pub fn cyborg_report(config: &Path, host: &str, file: &Path) -> Result<(), String> {
    let out = std::process::Command::new(python())
        .arg(conductor_script())
        .arg("report")
        .arg("--config")
        .arg(config)
        .args(["--host", host, "--file"])
        .arg(file)
        .output()
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && stdout.contains("reported") {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Cyborg 17's API's calls of its conductor (`python/cyborg_conductor.py requests`) on
/// the database of `config`: to Cyborg's own `ConductorManager` in the script's process,
/// or with `topic` over RabbitMQ through Cyborg's `ConductorAPI` to the conductor serving
/// it. `{calls, profiles, arqs, handles}`.
pub fn cyborg_requests(config: &Path, host: &str, topic: Option<&str>) -> serde_json::Value {
    let config = config.to_str().expect("a UTF-8 path");
    let mut args = vec!["requests", "--config", config, "--host", host];
    if let Some(topic) = topic {
        args.extend(["--topic", topic]);
    }
    last_json_line(&run_conductor_script(&args))
}

/// `host`'s rows in the database of `config`, read by Cyborg 17's database API
/// (`python/cyborg_conductor.py snapshot`): `{devices, counts}`.
pub fn cyborg_snapshot(config: &Path, host: &str) -> serde_json::Value {
    let config = config.to_str().expect("a UTF-8 path");
    last_json_line(&run_conductor_script(&[
        "snapshot", "--config", config, "--host", host,
    ]))
}

/// What the Cyborg conductor of `config` stored of `host`, read through Cyborg's own
/// objects (`python/cyborg_conductor.py inventory`): its devices in control-path order,
/// each with its deployables, their attributes and attach handles.
pub fn cyborg_inventory(config: &Path, host: &str) -> serde_json::Value {
    let config = config.to_str().expect("a UTF-8 path");
    last_json_line(&run_conductor_script(&[
        "inventory",
        "--config",
        config,
        "--host",
        host,
    ]))
}

/// A running Cyborg 17 service of the test venv (`cyborg-agent`, `cyborg-conductor`:
/// the package's own console scripts) on `--config-file <config>`. oslo.service forks
/// a worker that outlives a killed master, so the service runs in its own process
/// group and the whole group is killed when this is dropped.
pub struct CyborgService {
    child: std::process::Child,
    log_file: PathBuf,
}

/// The agent service (the type its tests were written with).
pub type CyborgAgentService = CyborgService;

impl CyborgService {
    /// Starts the agent on `config` (see [`cyborg_agent_config`]), logging to
    /// `log_file`.
    pub fn start(config: &Path, log_file: &Path) -> CyborgService {
        CyborgService::start_script(&cyborg_agent_script(), config, log_file, None)
    }

    /// [`CyborgService::start`] with `dir` first in the service's `PATH` (a fixture
    /// host's `lspci`, for Cyborg's real drivers).
    pub fn start_with_path(config: &Path, log_file: &Path, dir: &Path) -> CyborgService {
        CyborgService::start_script(&cyborg_agent_script(), config, log_file, Some(dir))
    }

    /// Starts the conductor on `config` (see [`cyborg_conductor_config`]), logging to
    /// `log_file`.
    pub fn start_conductor(config: &Path, log_file: &Path) -> CyborgService {
        CyborgService::start_script(
            &python().with_file_name("cyborg-conductor"),
            config,
            log_file,
            None,
        )
    }

    fn start_script(
        script: &Path,
        config: &Path,
        log_file: &Path,
        path_first: Option<&Path>,
    ) -> CyborgService {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(script);
        if let Some(dir) = path_first {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![dir.to_owned()];
            dirs.extend(std::env::split_paths(&path));
            command.env(
                "PATH",
                std::env::join_paths(dirs).expect("a PATH of UTF-8 directories"),
            );
        }
        let child = command
            .arg("--config-file")
            .arg(config)
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", script.display()));
        CyborgService {
            child,
            log_file: log_file.to_owned(),
        }
    }

    /// Whether the service has ended (the agent does at start when Placement has no
    /// provider for it, for one): its status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("the service's status")
    }

    /// Whether the log says the service's RPC server is up (oslo.messaging has
    /// declared its queues then).
    pub fn serving(&self) -> bool {
        std::fs::read_to_string(&self.log_file)
            .is_ok_and(|log| log.contains("Created RPC server for service"))
    }

    /// The service's log's last lines, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log_file).unwrap_or_default();
        let lines: Vec<&str> = log.lines().filter(|l| !l.contains(" DEBUG ")).collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for CyborgService {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.child.wait();
    }
}

/// Calls the agent of `host` (topic `cyborg-agent`, server `host`) the way accel's
/// conductor will: `fpga_program`, here with a bitstream that is no UUID, which Cyborg's
/// `AgentManager` refuses before anything else. Its answer (an `InvalidUUID` remote
/// error from a live agent) or the call's error (a timeout when nobody serves it).
pub async fn cyborg_agent_answers_fpga_program(
    host: &str,
) -> Result<serde_json::Value, verso_rpc::RpcError> {
    use crate::rpc::AGENT_TOPIC;
    use verso_rpc::{RpcClient, Target};
    let client = RpcClient::new(
        cyborg_transport().await,
        Target::new(AGENT_TOPIC).with_server(host),
    )
    .timeout(std::time::Duration::from_secs(20));
    client
        .call(
            &verso::RequestContext::new("req-accel-test"),
            "fpga_program",
            "1.0",
            serde_json::json!({
                "controlpath_id": {"cpid_type": "PCI", "cpid_info": "{}"},
                "bitstream_uuid": "not-a-uuid",
                "driver_name": "fake",
            }),
        )
        .await
}

/// A new image in the Glance at `glance` (its URL), made as `session`'s user; with
/// `data`, uploaded (Glance then hashes it and makes it active). Its id.
#[cfg(feature = "keystone")]
pub async fn glance_image(
    session: &crate::keystone::Session,
    glance: &str,
    data: Option<&[u8]>,
) -> Result<String, crate::keystone::SessionError> {
    let http = session.http().clone();
    let body = serde_json::json!({"name": "accel-test-bitstream", "disk_format": "raw", "container_format": "bare"});
    let created: serde_json::Value = session
        .send(|token| {
            http.post(format!("{glance}/v2/images"))
                .header("X-Auth-Token", token)
                .json(&body)
        })
        .await?
        .json()
        .await
        .map_err(|e| {
            crate::keystone::SessionError::Malformed(format!("Glance's new image: {e}"))
        })?;
    let id = created["id"]
        .as_str()
        .ok_or_else(|| {
            crate::keystone::SessionError::Malformed(format!(
                "Glance's new image has no id: {created}"
            ))
        })?
        .to_owned();
    if let Some(data) = data {
        let uploaded = session
            .send(|token| {
                http.put(format!("{glance}/v2/images/{id}/file"))
                    .header("X-Auth-Token", token)
                    .header("Content-Type", "application/octet-stream")
                    .body(data.to_vec())
            })
            .await?;
        if uploaded.status().as_u16() != 204 {
            return Err(crate::keystone::SessionError::Malformed(format!(
                "Glance refused the upload of {id}: HTTP {}",
                uploaded.status()
            )));
        }
    }
    Ok(id)
}
