//! The nine steps of the rolling upgrade, over a [`Deployment`] whose release N is
//! OpenStack Cyborg 17 in Rust and whose release N+1 is accel, in this process (or with
//! accel's components as processes over a real broker).

use super::deployment::{components, discovered, host_name, Deployment, PATIENCE, SCAN_INTERVAL};
use super::report::Timeline;
use super::{DemoOptions, Error};
use serde_json::{json, Value};
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::RpcError;
use verso_upgrade::admin::Finalize;

/// Runs the scenario; the report says what passed. An error is returned only when the
/// demo cannot run at all (no scratch directory, say).
pub async fn run(options: &DemoOptions, quiet: bool) -> Result<super::Report, Error> {
    if let Some(url) = &options.database_url {
        if !(url.starts_with("sqlite:") || url.starts_with("mysql:")) {
            return Err(format!(
                "release N is OpenStack Cyborg 17, which runs on MySQL/MariaDB or SQLite: give --database-url mysql://USER:PASS@HOST/DB (an empty database) or none (SQLite), not {}",
                accel_conductor::db::redact_url(url)
            )
            .into());
        }
    }
    let tmp = tempfile::Builder::new().prefix("accel-demo-").tempdir()?;
    let scratch = tmp.path().to_owned();
    let db_url = options
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", scratch.join("accel.db").display()));
    let transport_url = options
        .transport_url
        .clone()
        .unwrap_or_else(|| "memory://".into());
    let mut t = Timeline::new(
        options.agents,
        verso_rpc::transport::amqp::redact(&transport_url),
        accel_conductor::db::redact_url(&db_url),
        quiet,
    );
    t.release_n_is_cyborg_in_rust();
    let hosts: Vec<String> = (1..=options.agents).map(host_name).collect();
    for (i, h) in hosts.iter().enumerate() {
        accel_agent::fixture::write_tree(
            &scratch.join("sysfs").join(h),
            &accel_agent::fixture::sample_host(i as u32 + 1),
        )?;
    }
    let mut d = Deployment::new(scratch, db_url, transport_url, hosts).await?;
    // Every other host keeps Cyborg's wire at release N+1 (Cyborg 17 plus the seed
    // spec); the others move to accel's.
    d.cyborg_wire_hosts = d.hosts.iter().step_by(2).cloned().collect();
    let outcome = steps(&mut d, &mut t).await;
    if let Ok(status) = d.status().await {
        t.components(components(&status));
    }
    let error = match outcome {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    let report = t.finish(error);
    if options.keep {
        let api = d.api.as_ref().map_or("-", |a| a.base.as_str()).to_owned();
        let kept = tmp.keep();
        println!(
            "\nthe deployment keeps running: API {api}, database {}, files in {}; Ctrl-C ends it",
            d.db_url,
            kept.display()
        );
        verso_rpc::shutdown::shutdown_signal().await;
    }
    d.shutdown().await;
    Ok(report)
}

/// The device profiles the demo makes, by the resource class accel's and Cyborg's
/// drivers give the fixture hosts' GPUs and NVMe SSDs.
const PROFILES: [(&str, &str); 2] = [("demo-gpu", "PGPU"), ("demo-ssd", "CUSTOM_SSD")];

/// What step 1 made, checked again later.
struct Baseline {
    devices: u64,
    bound: Vec<String>,
    spare_gpu: String,
}

async fn steps(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    let base = release_n(d, t).await?;
    verify_release_n(d, t, &base).await?;
    upgrade_conductor(d, t, &base).await?;
    pinned_agent_refuses(d, t).await?;
    upgrade_agents(d, t, &base).await?;
    before_finalization(d, t).await?;
    finalize(d, t).await?;
    after_finalization(d, t).await?;
    destroy(d, t).await?;
    Ok(())
}

/// The resource provider of a deployable of `host` whose resource class is `rc`, as
/// the API lists it (the `n`th such, in name order): what Nova binds to.
pub(super) async fn provider(
    d: &Deployment,
    host: &str,
    rc: &str,
    n: usize,
) -> Result<String, Error> {
    let (status, body) = d
        .http(reqwest::Method::GET, "/v2/deployables", None)
        .await?;
    if status != 200 {
        return Err(format!("GET /v2/deployables: {status} {body}").into());
    }
    let prefix = format!("{host}_");
    let mut found: Vec<(String, String)> = Vec::new();
    for dep in body["deployables"].as_array().into_iter().flatten() {
        let name = dep["name"].as_str().unwrap_or_default();
        let attributes: Vec<Value> =
            serde_json::from_str(dep["attributes_list"].as_str().unwrap_or("[]"))?;
        let of_rc = attributes.iter().any(|a| a["rc"] == rc);
        if name.starts_with(&prefix) && of_rc {
            let rp = dep["rp_uuid"]
                .as_str()
                .ok_or_else(|| format!("deployable {name} has no provider"))?;
            found.push((name.to_owned(), rp.to_owned()));
        }
    }
    found.sort();
    found
        .into_iter()
        .nth(n)
        .map(|(_, rp)| rp)
        .ok_or_else(|| format!("{host} has no deployable of {rc} (the {n}th)").into())
}

/// Binds `arq` on `host` to its deployable of `rc`, as Nova does (with the provider).
pub(super) async fn bind_on(d: &Deployment, arq: &str, host: &str, rc: &str) -> Result<u16, Error> {
    let rp = provider(d, host, rc, 0).await?;
    d.bind_to(arq, host, Some(&rp)).await
}

/// Step 1.
async fn release_n(d: &mut Deployment, t: &mut Timeline) -> Result<Baseline, Error> {
    let n = d.hosts.len();
    t.step(
        1,
        format!(
            "release N, OpenStack Cyborg 17 (in Rust): conductor, API and {n} agents start on a fresh database"
        ),
    );
    let made = d.start_conductor_n().await?;
    t.expect_eq(
        "Cyborg 17's conductor made Cyborg 17's schema in the empty database",
        made,
        true,
    )?;
    d.start_api_n().await?;
    let bar = t.bar(n as u64, "Cyborg 17 agents");
    let mut devices = 0;
    let mut reported = 0;
    for host in d.hosts.clone() {
        devices += discovered(&d.sysfs(&host))?;
        match d.start_agent_n(&host).await? {
            accel_cyborg17_agent::run::Reported::Devices(k) => reported += k as u64,
            other => return Err(format!("{host}'s first report: {other:?}").into()),
        }
        bar.inc(1);
    }
    t.finish_bar(bar, "Cyborg 17 agents started");
    t.note(
        "release N runs without Placement and Nova (this demo runs no OpenStack): each \
         deployable is named its provider's UUID, none is made, and binds end without \
         Nova's event",
    );
    t.expect_eq(
        "devices reported by the Cyborg 17 agents (report_data)",
        reported,
        devices,
    )?;
    let census = d.census().await?;
    t.expect_eq(
        "devices in Cyborg 17's database",
        census.devices as u64,
        devices,
    )?;
    let mut created = 0;
    for (name, rc) in PROFILES {
        let (status, _) = d
            .http(
                reqwest::Method::POST,
                "/v2/device_profiles",
                Some(json!([{"name": name, "groups": [{format!("resources:{rc}"): "1"}]}])),
            )
            .await?;
        created += usize::from(status == 201);
    }
    t.expect_eq(
        "device profiles created through Cyborg 17's API",
        created,
        2,
    )?;
    let mut bound = Vec::new();
    for host in d.hosts.clone() {
        let arq = d.create_arq("demo-gpu").await?;
        if bind_on(d, &arq, &host, "PGPU").await? == 202 {
            bound.push(arq);
        }
    }
    let ssd = d.create_arq("demo-ssd").await?;
    if bind_on(d, &ssd, &d.hosts[0].clone(), "CUSTOM_SSD").await? == 202 {
        bound.push(ssd);
    }
    let spare_gpu = d.create_arq("demo-gpu").await?;
    t.expect_eq(
        "requests bound through Cyborg 17's API (one GPU per host, one SSD), as Nova binds",
        bound.len(),
        n + 1,
    )?;
    let census = d
        .wait_for("the binds to finish", |c| {
            c.arqs_in("Bound") == (n + 1) as i64
        })
        .await?;
    t.expect_eq(
        "requests Bound (database)",
        census.arqs_in("Bound"),
        (n + 1) as i64,
    )?;
    Ok(Baseline {
        devices,
        bound,
        spare_gpu,
    })
}

/// Checks step 1's results in the database and through the API; a read that fails is
/// that failure (not a zero that would read as a wrong count).
async fn check_baseline(
    d: &Deployment,
    t: &mut Timeline,
    base: &Baseline,
    extra_bound: usize,
) -> Result<(), Error> {
    let census = d.census().await?;
    let bound = (base.bound.len() + extra_bound) as i64;
    t.expect_eq(
        "devices in the database",
        census.devices as u64,
        base.devices,
    )?;
    let listed = d.api_count("/v2/devices", "devices").await?;
    t.expect_eq("devices listed by the API", listed as u64, base.devices)?;
    t.expect_eq(
        "attach handles in use (database)",
        census.handles_in_use,
        bound,
    )?;
    t.expect_eq("requests Bound (database)", census.arqs_in("Bound"), bound)?;
    let states = d.arq_states().await?;
    t.expect_eq(
        "requests Bound (API)",
        states.get("Bound").copied().unwrap_or(0) as i64,
        bound,
    )?;
    Ok(())
}

/// Step 2.
async fn verify_release_n(d: &Deployment, t: &mut Timeline, base: &Baseline) -> Result<(), Error> {
    t.step(2, "verify release N: the API and the database agree");
    check_baseline(d, t, base, 0).await?;
    let census = d.census().await?;
    t.expect_eq(
        "Cyborg 17's schema alone (none of accel's additions, such as the NVMe cleanup columns)",
        census.handles_cleaning.is_none(),
        true,
    )?;
    Ok(())
}

/// Step 3.
async fn upgrade_conductor(
    d: &mut Deployment,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    t.step(
        3,
        "the database, conductor and API go to accel N+1, back to Cyborg 17 and forward again; Cyborg 17's agents keep working",
    );
    d.stop_api().await;
    d.stop_conductor().await;
    sync_in_place(d, t).await?;
    start_next_control_plane(
        d,
        t,
        "conductor software/apparent version (pre-finalized: Cyborg 17 is release N)",
    )
    .await?;
    for host in d.hosts.clone() {
        d.wait_agent(&host, 1).await?;
    }
    t.check(
        "every Cyborg 17 agent reports to accel's conductor and counts as release N",
        true,
        format!("{} hosts at software 1, from their reports", d.hosts.len()),
    )?;
    let host = d.hosts[1].clone();
    let status = bind_on(d, &base.spare_gpu, &host, "PGPU").await?;
    t.expect_eq(
        format!("accel binds a request on {host}, a Cyborg 17 agent's host (HTTP status)"),
        status,
        202,
    )?;
    backport_example(d, t).await?;
    check_baseline(d, t, base, 1).await?;
    roll_back_and_forward(d, t, base).await?;
    Ok(())
}

/// Before finalization the control plane may go back to release N: Cyborg 17's
/// conductor and API run on the database accel took in place (accel's additions
/// default or are filled by triggers, so Cyborg's writes need not know them), read
/// what accel wrote, and change it; accel's then come back and read Cyborg's changes.
async fn roll_back_and_forward(
    d: &mut Deployment,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    t.note("rollback before finalization: Cyborg 17's conductor and API replace accel's again");
    d.stop_api().await;
    d.stop_conductor().await;
    let made = d.start_conductor_n().await?;
    t.check(
        "Cyborg 17's conductor runs on the database accel took in place",
        !made,
        match made {
            true => "it made a schema: the database was empty",
            false => "Cyborg 17's schema with accel's additions, as it was",
        },
    )?;
    d.start_api_n().await?;
    check_baseline(d, t, base, 1).await?;
    let host = d.hosts[1].clone();
    let unbound = d.unbind(&base.spare_gpu).await?;
    let census = d
        .wait_for("Cyborg 17 to unbind the request accel bound", |c| {
            c.arqs_in("Bound") == base.bound.len() as i64
        })
        .await?;
    t.expect_eq(
        format!("Cyborg 17's API unbinds the request accel bound on {host} (HTTP status, handles in use)"),
        format!("{unbound}, {} in use", census.handles_in_use),
        format!("202, {} in use", base.bound.len()),
    )?;
    let rebound = bind_on(d, &base.spare_gpu, &host, "PGPU").await?;
    d.wait_for("Cyborg 17 to bind the request again", |c| {
        c.arqs_in("Bound") == base.bound.len() as i64 + 1
    })
    .await?;
    t.expect_eq(
        format!("Cyborg 17's API binds it again on {host} (HTTP status)"),
        rebound,
        202,
    )?;
    t.note("forward again: accel's conductor and API replace Cyborg 17's");
    d.stop_api().await;
    d.stop_conductor().await;
    start_next_control_plane(
        d,
        t,
        "conductor software/apparent version after the rollback (still pre-finalized)",
    )
    .await?;
    check_baseline(d, t, base, 1).await?;
    Ok(())
}

/// accel's conductor and API start (N+1, at release N's apparent version until
/// finalized: Cyborg 17 is release N); `check` names the check of that version.
pub(super) async fn start_next_control_plane(
    d: &mut Deployment,
    t: &mut Timeline,
    check: &str,
) -> Result<(), Error> {
    d.start_conductor_next(None).await?;
    d.start_api_next().await?;
    let status = d.status().await?;
    t.expect_eq(
        check,
        format!("{}/{}", status.server.software, status.server.apparent),
        "2/1".to_owned(),
    )?;
    Ok(())
}

/// `accel db sync` takes release N's database, Cyborg 17's, in place: checked to add
/// accel's additions and nothing else.
pub(super) async fn sync_in_place(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    let synced = d.sync_in_place().await?;
    t.expect_eq(
        "accel db sync took Cyborg 17's database in place (accel's additions applied, the deployment at release N)",
        synced,
        format!(
            "Cyborg17 {:?}, at release N",
            accel_conductor::db::addition_versions()
        ),
    )?;
    Ok(())
}

/// What a peer one version behind receives for an object N+1 has moved on from: the
/// host's attach handles through the conductor's object indirection on Cyborg's topic,
/// once at N+1's manifest and once with `AttachHandle` at Cyborg 17's version (1.0, an
/// agent that has the seed spec's indirection but not yet its handle fields).
async fn backport_example(d: &Deployment, t: &mut Timeline) -> Result<(), Error> {
    use accel_objects::cyborg::INDIRECTION_VERSION;
    use verso::indirection::IndirectionApi;
    let client = verso_rpc::RpcClient::for_api::<accel_objects::cyborg::ConductorApi>(
        d.cyborg_transport.clone(),
        accel_cyborg17::rpc::CONDUCTOR_TOPIC,
    );
    let conductor = verso_rpc::conductor::ConductorApi::new(client, INDIRECTION_VERSION);
    let ctx = RequestContext::new("req-demo-backport");
    let host = json!(d.hosts[0]);
    let newest = accel_objects::cyborg::registry()
        .manifest("AttachHandleList")
        .ok_or("AttachHandleList is not registered")?;
    let cyborg_17 = accel_cyborg17::objects::registry();
    let handle_17 = cyborg_17
        .schema("AttachHandle")
        .ok_or("Cyborg 17 has no AttachHandle")?
        .version;
    let mut older = newest.clone();
    older.insert("AttachHandle", handle_17);
    let call = |manifest| {
        conductor.object_class_action_versions(
            &ctx,
            "AttachHandleList",
            "get_by_hostname",
            manifest,
            vec![host.clone()],
            serde_json::Map::new(),
        )
    };
    let before = call(&newest).await?;
    let after = call(&older).await?;
    let first = |v: &Value| v["cyborg_object.data"]["objects"][0].clone();
    let describe = |o: &Value| {
        let mut fields: Vec<&str> = o["cyborg_object.data"]
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        fields.sort_unstable();
        format!(
            "AttachHandle {} {{{}}}",
            o["cyborg_object.version"].as_str().unwrap_or("?"),
            fields.join(", ")
        )
    };
    t.note(format!(
        "an attach handle as release N+1 sends it:     {}\nthe same, backported to Cyborg 17's version: {}",
        describe(&first(&before)),
        describe(&first(&after))
    ));
    let handle = first(&after);
    let loaded = cyborg_17.from_primitive(&handle);
    t.check(
        "Cyborg 17's registry loads the backported attach handle",
        loaded.is_ok() && handle["cyborg_object.version"] == handle_17.to_string(),
        match &loaded {
            Ok(_) => format!(
                "AttachHandle {} of a list of {}",
                handle["cyborg_object.version"].as_str().unwrap_or("?"),
                after["cyborg_object.data"]["objects"]
                    .as_array()
                    .map_or(0, Vec::len)
            ),
            Err(e) => e.to_string(),
        },
    )?;
    Ok(())
}

/// The line of a component's output (a log, an error) that says `needle`, or all of it.
fn line_with(output: &str, needle: &str) -> String {
    output
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or(output.trim())
        .to_owned()
}

/// Step 4.
async fn pinned_agent_refuses(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        4,
        "an N+1 agent with PCI unmanaged mode but [upgrade_levels] conductor = 1.0 refuses to start",
    );
    // A host that moves to accel's wire (the pin is accel's conductor API's).
    let host = d.hosts[1].clone();
    let probe_state = d.scratch.join("probe");
    let message = match &d.launcher {
        None => {
            let mut config = d.agent_config_next(&host);
            config.pci_managed = false;
            config.conductor_cap = Some(Version::new(1, 0));
            config.state_dir = probe_state;
            match accel_agent::service::start(config, d.transport.clone()).await {
                Ok(agent) => {
                    agent.stop().await;
                    None
                }
                Err(e) => Some(e.to_string()),
            }
        }
        Some(l) => {
            let mut a = d.agent_args_next(&host, &probe_state);
            for setting in ["pci.managed=false", "upgrade_levels.conductor=1.0"] {
                a.extend(["--set".to_owned(), setting.to_owned()]);
            }
            let done = l.run("agent-pinned", &a, PATIENCE).await?;
            t.expect_eq("accel agent exit code", done.code.unwrap_or(-1), 2)?;
            Some(done.output)
        }
    };
    match message {
        None => t.check("the pinned agent refused to start", false, "it started")?,
        Some(message) => {
            // The error's line: "1.1" alone also matches a log line's timestamp.
            let line = line_with(&message, "[upgrade_levels] conductor");
            t.note(format!("accel agent: {line}"));
            t.check(
                "refused, naming the required version and the option",
                line.contains("1.1") && line.contains("[upgrade_levels] conductor"),
                "the error names conductor RPC 1.1 and [upgrade_levels] conductor",
            )?;
        }
    }
    Ok(())
}

/// Step 5.
async fn upgrade_agents(
    d: &mut Deployment,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    let n = d.hosts.len();
    let size = n.div_ceil(3).max(1);
    t.step(
        5,
        format!(
            "replace Cyborg 17's agents by accel's N+1 in batches of {size}; then raise the agent caps"
        ),
    );
    let hosts = d.hosts.clone();
    for (b, batch) in hosts.chunks(size).enumerate() {
        let bar = t.bar(
            batch.len() as u64,
            format!("batch {}: {}", b + 1, batch.join(", ")),
        );
        for host in batch {
            d.stop_agent(host).await;
            d.start_agent_next(host).await?;
            bar.inc(1);
        }
        t.finish_bar(bar, format!("batch {} on N+1", b + 1));
        let status = d.status().await?;
        let upgraded = status
            .clients
            .iter()
            .filter(|m| batch.contains(&m.id) && m.software == 2 && m.apparent == 1)
            .count();
        t.expect_eq(
            format!("batch {}: agents on software 2, apparent 1", b + 1),
            upgraded,
            batch.len(),
        )?;
    }
    let census = d.census().await?;
    t.expect_eq(
        "devices after the agents' upgrade",
        census.devices as u64,
        base.devices,
    )?;
    d.stop_conductor().await;
    d.start_conductor_next(Some(Version::new(1, 1))).await?;
    let reported = d.report_all().await?;
    t.expect_eq(
        "conductor restarted with [upgrade_levels] agent and cyborg_agent = 1.1; every agent answers",
        reported,
        base.devices,
    )?;
    Ok(())
}

/// Step 6.
async fn before_finalization(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        6,
        "before finalization: the gated feature is refused; one host goes back to Cyborg 17's agent",
    );
    let refused = gated_feature(d).await;
    t.check(
        "PCI unmanaged mode refused before finalization",
        matches!(&refused, Err(kind) if kind == "NotSupportedBeforeFinalization"),
        format!("{refused:?}"),
    )?;
    let last = d.hosts.last().cloned().ok_or("no hosts")?;
    d.stop_agent(&last).await;
    let first = d.start_agent_n(&last).await?;
    t.note(format!(
        "{last}'s reports count it as release N once its N+1 agent's last heartbeat is \
         older than the conductor's [conductor] agent_liveness ({} s here, 180 s by \
         default): a live heartbeat outranks a report, which N+1's agents on Cyborg's \
         wire send too",
        d.agent_liveness.as_secs()
    ));
    let back = d.wait_agent(&last, 1).await;
    t.check(
        format!("{last} back on Cyborg 17's agent, reporting, counted as release N"),
        back.is_ok(),
        match back {
            Ok(()) => format!("{last}: software 1 (first report: {first:?})"),
            Err(e) => e.to_string(),
        },
    )?;
    Ok(())
}

/// Tries the feature release N+1 gates on finalization, as an agent would: marking a
/// free PCI handle of the first host unmanaged. `Err(kind)` is the typed refusal.
pub(super) async fn gated_feature(d: &Deployment) -> Result<(), String> {
    // An agent's context: object methods of namespace `cyborg` run on the conductor.
    let ctx = accel_agent::service::conductor_context(d.transport.clone(), None);
    let handles = accel_objects::AttachHandleList::get_by_host(&ctx, d.hosts[0].clone())
        .await
        .map_err(|e| format!("get_by_host: {e}"))?;
    let mut handle = verso::ObjectList::iter(&handles)
        .find(|h| h.is_in_use() == Ok(false))
        .cloned()
        .ok_or("the host has no free handle")?;
    handle.meta.context = Some(Box::new(ctx));
    let revision = handle.current_revision().map_err(|e| e.to_string())?;
    handle
        .update_managed(false, revision)
        .await
        .map_err(|e| e.kind().to_owned())
}

/// Step 7.
async fn finalize(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        7,
        "finalize: refused while an agent runs N; upgrade it; conductor first, then every agent",
    );
    let last = d.hosts.last().cloned().ok_or("no hosts")?;
    finalize_refused(
        d,
        t,
        "finalization refused; the blocker",
        vec![last.clone()],
    )
    .await?;
    d.stop_agent(&last).await;
    d.start_agent_next(&last).await?;
    let ctx = RequestContext::new("req-demo-finalize");
    let state = d.upgrade.call_method(&ctx, Finalize {}).await?;
    let status = d.status().await?;
    let agents_finalized_then = status.clients_finalized;
    t.expect_eq(
        "conductor finalized first (apparent version)",
        status.server.apparent,
        2,
    )?;
    t.note(format!(
        "finalize answered {state:?}; agents finalized at that moment: {agents_finalized_then}/{}",
        d.hosts.len()
    ));
    agents_finalized(d, t).await
}

/// Asks to finalize where it must be refused: the check `name` passes when the
/// refusal's blockers are `expected` (in any order).
pub(super) async fn finalize_refused(
    d: &Deployment,
    t: &mut Timeline,
    name: &str,
    mut expected: Vec<String>,
) -> Result<(), Error> {
    let ctx = RequestContext::new("req-demo-finalize");
    match d.upgrade.call_method(&ctx, Finalize {}).await {
        Err(RpcError::Remote(r)) => {
            let mut blockers = r
                .downcast::<verso_upgrade::admin::FinalizeRefused>()
                .map(|f| f.blockers.into_iter().map(|b| b.id).collect::<Vec<_>>())
                .unwrap_or_default();
            blockers.sort();
            expected.sort();
            t.note(format!("accel upgrade finalize: {}", r.message));
            t.expect_eq(name, blockers.join(","), expected.join(","))?;
        }
        other => {
            t.check("finalization refused", false, format!("{other:?}"))?;
        }
    }
    Ok(())
}

/// Waits (with a bar) until every agent has finalized; checks that all did.
pub(super) async fn agents_finalized(d: &Deployment, t: &mut Timeline) -> Result<(), Error> {
    let bar = t.bar(d.hosts.len() as u64, "agents finalized");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let status = loop {
        let status = d.status().await?;
        bar.set_position(status.clients_finalized as u64);
        if status.clients_finalized == d.hosts.len() || tokio::time::Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    t.finish_bar(bar, "agents finalized");
    t.expect_eq(
        "agents finalized",
        format!("{}/{}", status.clients_finalized, d.hosts.len()),
        format!("{}/{}", d.hosts.len(), d.hosts.len()),
    )?;
    Ok(())
}

/// Step 8.
async fn after_finalization(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        8,
        "after finalization: an NVMe release goes through cleanup on its agent (agent RPC 1.1); Cyborg 17 is fenced",
    );
    let host = d.hosts[1].clone();
    let arq = d.create_arq("demo-ssd").await?;
    t.expect_eq(
        format!("an SSD bound on {host} (HTTP status)"),
        bind_on(d, &arq, &host, "CUSTOM_SSD").await?,
        202,
    )?;
    let released = std::time::Instant::now();
    t.expect_eq("unbound (HTTP status)", d.unbind(&arq).await?, 202)?;
    let census = d.census().await?;
    t.expect_eq(
        "the released SSD's handle is cleaning, not back in the pool",
        census.handles_cleaning.unwrap_or(-1),
        1,
    )?;
    let census = d
        .wait_for("the agent's cleanup", |c| c.handles_cleaning == Some(0))
        .await?;
    t.note(format!(
        "cleaned {:.1}s after the release; the agents' periodic scan runs every {}s, so \
         the conductor's cleanup_device (agent RPC 1.1) started it",
        released.elapsed().as_secs_f64(),
        SCAN_INTERVAL.as_secs()
    ));
    t.expect_eq(
        "cleanup done by the agent: handles cleaning / failed",
        format!(
            "{}/{}",
            census.handles_cleaning.unwrap_or(-1),
            census.handles_failed_cleanup.unwrap_or(-1)
        ),
        "0/0".to_owned(),
    )?;
    // Release N after finalization: a Cyborg 17 agent on a new host is fenced (its
    // report refused, nothing of it stored), where before it would have been served.
    let late = host_name(d.hosts.len() as u32 + 1);
    accel_agent::fixture::write_tree(
        &d.sysfs(&late),
        &accel_agent::fixture::sample_host(d.hosts.len() as u32 + 1),
    )?;
    let first = d.start_agent_n(&late).await?;
    d.stop_agent(&late).await;
    t.note(format!("{late}'s Cyborg 17 agent, first report: {first:?}"));
    t.check(
        format!("{late}'s Cyborg 17 agent: its report refused (Fenced)"),
        matches!(&first, accel_cyborg17_agent::run::Reported::Failed(why) if why.contains("Fenced")),
        format!("{first:?}"),
    )?;
    let stored =
        d.db.devices(&accel_conductor::db::ListFilter {
            host: Some(late.clone()),
            ..accel_conductor::db::ListFilter::default()
        })
        .await?;
    t.expect_eq(
        format!("devices of {late} in accel's database"),
        stored.len(),
        0,
    )?;
    Ok(())
}

/// Step 9.
async fn destroy(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        9,
        "destroy every request and profile; the database is clean",
    );
    let (_, body) = d
        .http(reqwest::Method::GET, "/v2/accelerator_requests", None)
        .await?;
    let uuids: Vec<String> = body["arqs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["uuid"].as_str().map(str::to_owned))
        .collect();
    let (status, _) = d
        .http(
            reqwest::Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={}", uuids.join(",")),
            None,
        )
        .await?;
    t.expect_eq(
        format!("{} requests deleted (HTTP status)", uuids.len()),
        status,
        204,
    )?;
    for name in ["demo-gpu", "demo-ssd"] {
        let (status, _) = d
            .http(
                reqwest::Method::DELETE,
                &format!("/v2/device_profiles/{name}"),
                None,
            )
            .await?;
        t.expect_eq(format!("profile {name} deleted (HTTP status)"), status, 204)?;
    }
    let census = d
        .wait_for("released SSDs to be cleaned", |c| {
            c.handles_cleaning == Some(0)
        })
        .await?;
    t.expect_eq("requests left", census.arqs_total(), 0)?;
    t.expect_eq("profiles left", census.device_profiles, 0)?;
    t.expect_eq(
        "handles in use or cleaning",
        census.handles_in_use + census.handles_cleaning.unwrap_or(0),
        0,
    )?;
    t.expect_eq(
        "handles whose cleanup failed",
        census.handles_failed_cleanup.unwrap_or(-1),
        0,
    )?;
    Ok(())
}
