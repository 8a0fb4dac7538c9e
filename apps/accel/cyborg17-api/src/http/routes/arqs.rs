//! The accelerator request handlers: create, list (Nova's `bind_state=resolved`), show,
//! `PATCH` (bind and unbind, Cyborg's JSON patch form, one request or many) and delete
//! (one, by instance, or several), with Cyborg 17's rules for each.

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArqsIn {
    device_profile_name: String,
    #[serde(default)]
    device_profile_group_id: Option<i64>,
}

pub(super) async fn create_arqs(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    Body(body): Body,
) -> Result<Response> {
    caller.may("cyborg:arq:create")?;
    let input: ArqsIn = json_body(&body)?;
    // The requests belong to the caller's project (noauth: X-Project-Id's).
    let project = caller.project_id();
    if let Some(p) = project {
        check_text("project id", p)?;
    }
    // One request per unit of every group's resources (or of the named group's): refused
    // before any is created when that is more than one POST may create.
    let profile = service.profile(&input.device_profile_name).await?;
    let count: u64 = match input.device_profile_group_id {
        None => profile.groups.iter().map(groups::arq_count).sum(),
        Some(g) => usize::try_from(g)
            .ok()
            .and_then(|i| profile.groups.get(i))
            .map_or(0, groups::arq_count),
    };
    if count > limits.max_arqs_per_request as u64 {
        return Err(ApiError::bad_request(format!(
            "device profile {:?} asks for {count} accelerator requests, more than one POST creates ({}: [api] max_arqs_per_request){}",
            shown(&input.device_profile_name),
            limits.max_arqs_per_request,
            if input.device_profile_group_id.is_none() {
                "; name a group with device_profile_group_id"
            } else {
                ""
            }
        )));
    }
    let arqs = service
        .create_arqs(
            &input.device_profile_name,
            input.device_profile_group_id,
            project,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"arqs": arqs.iter().map(|a| views::arq(a, &base)).collect::<Vec<_>>()})),
    )
        .into_response())
}

pub(super) async fn list_arqs(
    caller: Caller,
    State(service): State<Service>,
    Extension(limits): Extension<Limits>,
    Base(base): Base,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    caller.may("cyborg:arq:get_all")?;
    let pairs = query_pairs(raw)?;
    let query = ListQuery {
        project_id: caller.project_scope()?.map(str::to_owned),
        ..list_query(&pairs, &limits)?
    };
    let instance = pairs.get("instance").filter(|v| !v.is_empty());
    if let Some(i) = instance {
        check_instance("instance", i)?;
    }
    // Nova's `?bind_state=resolved` (Cyborg's only bind state filter): the requests whose
    // bind has ended (`Bound`, `BindFailed`, `Deleting`); for an instance, 423 Locked
    // while any of its requests (on the page read) has not.
    let resolved = match pairs.get("bind_state").map(String::as_str) {
        None | Some("") => false,
        Some("resolved") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "bind_state {:?}: the only bind state filter is resolved",
                shown(other)
            )))
        }
    };
    let arqs = service.arqs(instance.map(String::as_str), &query).await?;
    let ended = |a: &&ArqRow| {
        matches!(
            a.state,
            ArqState::Bound | ArqState::BindFailed | ArqState::Deleting
        )
    };
    if resolved && instance.is_some() && !arqs.iter().all(|a| ended(&a)) {
        return Ok(StatusCode::LOCKED.into_response());
    }
    let mut extra: Vec<(&'static str, String)> = instance
        .map(|i| ("instance", i.clone()))
        .into_iter()
        .collect();
    if resolved {
        extra.push(("bind_state", "resolved".to_owned()));
    }
    // Without an instance the filter applies to the page read; `next` follows the page
    // read, so walking the links reaches every resolved request.
    Ok(page_shown(
        &base,
        "accelerator_requests",
        "arqs",
        &query,
        PageRead::of(&arqs),
        arqs.iter().filter(|a| !resolved || ended(a)),
        |a| views::arq(a, &base),
        &extra,
    )
    .into_response())
}

pub(super) async fn get_arq(
    caller: Caller,
    State(service): State<Service>,
    Base(base): Base,
    Id(uuid): Id,
) -> Result<Json<Value>> {
    caller.may("cyborg:arq:get_one")?;
    let a = visible_arq(&service, &caller, &uuid).await?;
    Ok(Json(views::arq(&a, &base)))
}

/// The request with `uuid` if the caller may see it: another project's is 404, as if
/// it did not exist (its existence is not the caller's to know).
async fn visible_arq(service: &Service, caller: &Caller, uuid: &str) -> Result<ArqRow> {
    let arq = service.arq(uuid).await?;
    match caller.project_scope()? {
        Some(project) if arq.project_id.as_deref() != Some(project) => Err(ApiError::new(
            ErrorKind::NotFound,
            format!("accelerator request {} not found", shown(uuid)),
        )),
        _ => Ok(arq),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchOp {
    path: String,
    op: String,
    #[serde(default)]
    value: Option<Value>,
}

/// What a patch asks of one request.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    Bind(Binding),
    Unbind,
}

const PATCH_PATHS: [&str; 4] = [
    "/hostname",
    "/device_rp_uuid",
    "/instance_uuid",
    "/project_id",
];

/// One request's patch: all `add` (a bind: hostname and instance_uuid, device_rp_uuid
/// and project_id optional) or all `remove` (an unbind), each path at most once. Who
/// may name a project, and from which microversion, [`apply_patch`] decides.
fn change_of(uuid: &str, ops: Vec<PatchOp>) -> Result<Change> {
    let bad = |why: String| {
        ApiError::bad_request(format!(
            "patch of accelerator request {}: {why}",
            shown(uuid)
        ))
    };
    if ops.is_empty() {
        return Err(bad("no operations".into()));
    }
    let mut values: BTreeMap<String, Option<Value>> = BTreeMap::new();
    let mut kind: Option<String> = None;
    for op in ops {
        if !PATCH_PATHS.contains(&op.path.as_str()) {
            return Err(bad(format!(
                "unknown path {:?} (known: {})",
                op.path,
                PATCH_PATHS.join(", ")
            )));
        }
        if op.op != "add" && op.op != "remove" {
            return Err(bad(format!(
                "unknown op {:?} (add binds, remove unbinds)",
                op.op
            )));
        }
        match &kind {
            Some(k) if *k != op.op => {
                return Err(bad("mixes add and remove: a patch binds or unbinds".into()))
            }
            _ => kind = Some(op.op.clone()),
        }
        if values.insert(op.path.clone(), op.value).is_some() {
            return Err(bad(format!("{} given twice", op.path)));
        }
    }
    if kind.as_deref() == Some("remove") {
        return Ok(Change::Unbind);
    }
    let text = |path: &str, required: bool| -> Result<Option<String>> {
        match values.get(path) {
            None if required => Err(bad(format!("a bind needs {path}"))),
            None => Ok(None),
            Some(Some(Value::String(s))) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("{path} needs a non-empty string value"))),
        }
    };
    let binding = Binding {
        hostname: text("/hostname", true)?.unwrap_or_default(),
        instance_uuid: text("/instance_uuid", true)?.unwrap_or_default(),
        device_rp_uuid: text("/device_rp_uuid", false)?,
        project: match text("/project_id", false)? {
            Some(p) => BindProject::Patch(p),
            None => BindProject::Unchanged,
        },
    };
    check_text("/hostname", &binding.hostname).map_err(|e| bad(e.message))?;
    if let Some(rp) = &binding.device_rp_uuid {
        check_text("/device_rp_uuid", rp).map_err(|e| bad(e.message))?;
    }
    check_instance("/instance_uuid", &binding.instance_uuid).map_err(|e| bad(e.message))?;
    Ok(Change::Bind(binding))
}

pub(super) async fn patch_arqs(
    caller: Caller,
    State(service): State<Service>,
    Extension(version): Extension<ApiVersion>,
    Body(body): Body,
) -> Result<StatusCode> {
    caller.may("cyborg:arq:update")?;
    let patch: BTreeMap<String, Vec<PatchOp>> = json_body(&body)?;
    apply_patch(&service, &caller, version, patch).await
}

/// `PATCH /v2/accelerator_requests/{uuid}`, what openstacksdk and the OpenStack clients
/// send: the body is the collection's form (`{uuid: [ops]}`) and must name this request
/// only.
pub(super) async fn patch_arq(
    caller: Caller,
    State(service): State<Service>,
    Extension(version): Extension<ApiVersion>,
    Id(uuid): Id,
    Body(body): Body,
) -> Result<StatusCode> {
    caller.may("cyborg:arq:update")?;
    let patch: BTreeMap<String, Vec<PatchOp>> = json_body(&body)?;
    if patch.keys().any(|k| *k != uuid) {
        return Err(ApiError::bad_request(format!(
            "the patch of accelerator request {} must name that request only",
            shown(&uuid)
        )));
    }
    apply_patch(&service, &caller, version, patch).await
}

/// Binds and unbinds: every request's patch is checked before any is applied, and
/// every request must be one the caller may see. As Cyborg 17, a bind records a
/// project: the patch's `/project_id` (microversion 2.1, administrators only) or the
/// binding caller's own.
async fn apply_patch(
    service: &Service,
    caller: &Caller,
    version: ApiVersion,
    patch: BTreeMap<String, Vec<PatchOp>>,
) -> Result<StatusCode> {
    if patch.is_empty() {
        return Err(ApiError::bad_request(
            "the patch names no accelerator request",
        ));
    }
    let mut changes = Vec::with_capacity(patch.len());
    for (uuid, ops) in patch {
        let mut change = change_of(&uuid, ops)?;
        if let Change::Bind(b) = &mut change {
            if let BindProject::Patch(_) = b.project {
                if !version.at_least(microversion::PROJECT_ID) {
                    return Err(ApiError::new(
                        ErrorKind::NotAcceptable,
                        format!(
                            "Request not acceptable. The minimal required API version \
                             should be {}",
                            microversion::PROJECT_ID
                        ),
                    ));
                }
                if !caller.credentials.is_admin {
                    return Err(ApiError::new(
                        ErrorKind::Forbidden,
                        "Access was denied to the following resource: cyborg:arq:update",
                    ));
                }
            } else {
                b.project = caller.project_id().map_or(BindProject::Unchanged, |p| {
                    BindProject::Caller(p.to_owned())
                });
            }
        }
        changes.push((uuid, change));
    }
    // As Cyborg 17: binding and unbinding are Nova's, on the user's behalf.
    caller.require_service()?;
    if caller.project_scope()?.is_some() {
        for (uuid, _) in &changes {
            visible_arq(service, caller, uuid).await?;
        }
    }
    refuse_additional_binds(service, &changes).await?;
    for (uuid, change) in changes {
        match change {
            Change::Bind(b) => service.bind(&uuid, &b).await.map(drop)?,
            Change::Unbind => service.unbind(&uuid).await.map(drop)?,
        }
    }
    Ok(StatusCode::ACCEPTED)
}

/// As Cyborg: an instance that has accelerator requests gets no more by a later bind
/// (hot add is not supported). Requests bound in one patch are one set, and a patch
/// whose requests all have the instance already (a retry, whole or in part) binds as
/// before.
async fn refuse_additional_binds(service: &Service, changes: &[(String, Change)]) -> Result<()> {
    let mut instances: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (uuid, change) in changes {
        if let Change::Bind(b) = change {
            instances
                .entry(b.instance_uuid.as_str())
                .or_default()
                .push(uuid.as_str());
        }
    }
    for (instance, in_patch) in instances {
        let query = ListQuery {
            limit: HELD_PER_INSTANCE,
            ..ListQuery::default()
        };
        let held = service.arqs(Some(instance), &query).await?;
        let joins = in_patch.iter().any(|u| !held.iter().any(|a| a.uuid == *u));
        let other = held.iter().find(|a| !in_patch.contains(&a.uuid.as_str()));
        if let (true, Some(other)) = (joins, other) {
            return Err(ApiError::bad_request(format!(
                "instance {} already has accelerator requests ({}); cannot bind more",
                shown(instance),
                other.uuid
            )));
        }
    }
    Ok(())
}

/// How many of an instance's requests the hot-add check reads: far above what one
/// instance holds (`[api] max_arqs_per_request` is 64 by default).
const HELD_PER_INSTANCE: u32 = 10_000;

/// `DELETE /v2/accelerator_requests/{uuid}` (openstacksdk's form of `?arqs=uuid`).
pub(super) async fn delete_arq(
    caller: Caller,
    State(service): State<Service>,
    Id(uuid): Id,
) -> Result<StatusCode> {
    caller.may("cyborg:arq:delete")?;
    let uuids = [uuid];
    deletable(&service, &caller, &uuids).await?;
    service.delete_arqs(&uuids).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks that each of `uuids` exists, is the caller's to see and, when bound to an
/// instance, is deleted by Nova (a service request): as Cyborg 17, deleting by UUID a
/// request that does not exist is 404 (and so is another project's), a user's delete of
/// a bound one 403, and nothing is deleted then. (A retry of a delete whose answer was
/// lost reads 404 when the first attempt did it.)
async fn deletable(service: &Service, caller: &Caller, uuids: &[String]) -> Result<()> {
    for uuid in uuids {
        let arq = visible_arq(service, caller, uuid).await?;
        if let Some(instance) = arq.instance_uuid.as_deref() {
            if !caller.is_service_request() {
                return Err(ApiError::new(
                    ErrorKind::Forbidden,
                    format!(
                        "ARQ {} is bound to instance {}. Use the Compute API to manage \
                         instance accelerators.",
                        arq.uuid, instance
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub(super) async fn delete_arqs(
    caller: Caller,
    State(service): State<Service>,
    RawQuery(raw): RawQuery,
) -> Result<StatusCode> {
    caller.may("cyborg:arq:delete")?;
    let pairs = query_pairs(raw)?;
    match (pairs.get("arqs"), pairs.get("instance")) {
        (Some(list), None) => {
            let uuids = names_of("arqs", list)?;
            deletable(&service, &caller, &uuids).await?;
            service.delete_arqs(&uuids).await?;
        }
        (None, Some(instance)) if !instance.is_empty() => {
            check_instance("instance", instance)?;
            caller.require_service()?;
            match caller.project_scope()? {
                None => service.delete_arqs_of_instance(instance).await?,
                // Only the caller's project's requests of that instance.
                Some(project) => {
                    let query = ListQuery {
                        limit: HELD_PER_INSTANCE,
                        project_id: Some(project.to_owned()),
                        ..ListQuery::default()
                    };
                    let held = service.arqs(Some(instance), &query).await?;
                    let uuids: Vec<String> = held.into_iter().map(|a| a.uuid).collect();
                    if !uuids.is_empty() {
                        service.delete_arqs(&uuids).await?;
                    }
                }
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "name what to delete: ?arqs=UUID,UUID or ?instance=UUID (one of them)",
            ))
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(v: Value) -> Vec<PatchOp> {
        serde_json::from_value(v).expect("ops")
    }

    const I1: &str = "8c8d1c3a-5a4e-4a0e-9a55-3a1f0e6c2b11";

    #[test]
    fn patches_bind_or_unbind() {
        let bind = change_of(
            "a",
            ops(json!([
                {"path": "/hostname", "op": "add", "value": "h1"},
                {"path": "/instance_uuid", "op": "add", "value": I1},
                {"path": "/device_rp_uuid", "op": "add", "value": "rp"},
            ])),
        );
        assert_eq!(
            bind,
            Ok(Change::Bind(Binding {
                hostname: "h1".into(),
                instance_uuid: I1.into(),
                device_rp_uuid: Some("rp".into()),
                project: BindProject::Unchanged,
            }))
        );
        let with_project = change_of(
            "a",
            ops(json!([
                {"path": "/hostname", "op": "add", "value": "h1"},
                {"path": "/instance_uuid", "op": "add", "value": I1},
                {"path": "/project_id", "op": "add", "value": "p1"},
            ])),
        );
        assert_eq!(
            with_project,
            Ok(Change::Bind(Binding {
                hostname: "h1".into(),
                instance_uuid: I1.into(),
                device_rp_uuid: None,
                project: BindProject::Patch("p1".into()),
            }))
        );
        let unbind = change_of("a", ops(json!([{"path": "/hostname", "op": "remove"}])));
        assert_eq!(unbind, Ok(Change::Unbind));
        for bad in [
            json!([]),
            json!([{"path": "/color", "op": "add", "value": "red"}]),
            json!([{"path": "/hostname", "op": "replace", "value": "h"}]),
            json!([{"path": "/hostname", "op": "add", "value": "h"}]),
            json!([{"path": "/hostname", "op": "add", "value": 3}, {"path": "/instance_uuid", "op": "add", "value": "i"}]),
            json!([{"path": "/hostname", "op": "add", "value": "h"}, {"path": "/instance_uuid", "op": "remove"}]),
            json!([{"path": "/hostname", "op": "remove"}, {"path": "/hostname", "op": "remove"}]),
            // The instance is a UUID, the host a bounded text.
            json!([{"path": "/hostname", "op": "add", "value": "h"}, {"path": "/instance_uuid", "op": "add", "value": "not-a-uuid"}]),
            json!([{"path": "/hostname", "op": "add", "value": "h".repeat(256)}, {"path": "/instance_uuid", "op": "add", "value": I1}]),
        ] {
            let e = change_of("a", ops(bad.clone())).expect_err("refused");
            assert_eq!(e.kind, ErrorKind::BadRequest, "{bad}");
        }
    }
}
