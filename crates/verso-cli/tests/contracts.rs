//! The lock, check, update-lock, diff and lint against the example model: the
//! checked-in lock passes, and each kind of change flips the right report line.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use verso::fingerprint::ObjectContract;
use verso::{
    ArgSchema, FieldType, MethodKind, MethodSchema, ObjectSchema, Version, VersionedObject,
};
use verso_cli::rpc::RpcContract;
use verso_cli::{
    check, diff, execute, lint, lint_schemas, update_lock, Application, CliError, Lock, Severity,
};
use verso_rpc::conductor::{add_object_endpoints, ObjectIndirectionApi, INDIRECTION_VERSION};
use verso_rpc::{ArgSpec, ArgType, Endpoint, EndpointSpec, MethodSpec, RpcApi};

fn lock_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cyborg-model/objects.lock")
}

/// The same application as `examples/cyborg.rs`: the conductor API as declared.
fn app() -> Application {
    Application::new("cyborg", cyborg_model::registry())
        .api::<ObjectIndirectionApi>()
        .default_lock(lock_path())
}

#[test]
fn the_served_conductor_endpoint_is_the_declared_api() {
    let served = add_object_endpoints(
        Endpoint::for_api::<ObjectIndirectionApi>(),
        INDIRECTION_VERSION,
        Arc::new(cyborg_model::registry()),
        |ctx| ctx,
    );
    served
        .validate()
        .expect("serves exactly the declared methods");
    assert_eq!(served.spec(), ObjectIndirectionApi::spec());
    assert_eq!(served.version(), INDIRECTION_VERSION);
    let from_endpoint = Application::new("cyborg", cyborg_model::registry())
        .rpc_api("conductor", served.spec())
        .contracts();
    assert_eq!(from_endpoint.rpc, app().contracts().rpc);
}

fn device() -> ObjectSchema {
    cyborg_model::Device::schema().clone()
}

/// The code's contracts with Device replaced by `schema`.
fn with_device(schema: &ObjectSchema) -> Lock {
    let mut lock = app().contracts();
    lock.objects
        .insert("Device".into(), ObjectContract::from_schema(schema));
    lock
}

fn locked() -> Lock {
    Lock::read(&lock_path()).expect("the checked-in lock reads")
}

fn text(report: &verso_cli::Report) -> String {
    report.to_string()
}

#[test]
fn the_checked_in_lock_matches_the_tree() {
    let report = app().check_lock(&lock_path()).expect("lock reads");
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.entries.len(), 7, "six objects and the conductor API");
}

#[test]
fn the_lock_file_round_trips_byte_for_byte() {
    let file = std::fs::read_to_string(lock_path()).expect("lock reads");
    let lock = Lock::parse(&file, &lock_path()).expect("lock parses");
    assert_eq!(lock.render().expect("renders"), file);
    assert_eq!(lock, app().contracts());
    let again = Lock::parse(&lock.render().expect("renders"), Path::new("x")).expect("parses");
    assert_eq!(again, lock);
}

#[test]
fn the_lock_holds_ovo_fingerprints() {
    let lock = locked();
    assert_eq!(
        lock.objects["Device"].fingerprint,
        "1.2-fe5b27a5b5f3db959bc08a5f761d166b"
    );
    assert_eq!(
        lock.objects["DeployableList"].fingerprint,
        "1.0-4e6cfaa1775a9ae39ba91a68d21abc7c"
    );
}

#[test]
fn a_retyped_field_fails_the_check_and_names_it() {
    let mut s = device();
    s.fields
        .iter_mut()
        .find(|f| f.name == "vendor")
        .expect("vendor")
        .ty = FieldType::Integer;
    let report = check(&locked(), &with_device(&s));
    assert!(!report.is_ok());
    assert_eq!(report.errors(), 1);
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(e.severity, Severity::Error);
    assert!(e
        .headline
        .starts_with("fingerprint 1.2-fe5b27a5b5f3db959bc08a5f761d166b -> 1.2-"));
    assert_eq!(
        e.lines,
        vec![
            "field retyped: vendor String -> Integer".to_string(),
            "the contract changed but VERSION did not: bump the version".to_string(),
        ]
    );
    let fix = e.fix.as_deref().unwrap_or_default();
    assert!(
        fix.starts_with("bump Device's VERSION to 2.0 (the changes need a major version bump)"),
        "{fix}"
    );
    assert!(
        fix.ends_with("then run `verso objects update-lock`"),
        "{fix}"
    );
}

/// Device declared in the `cyborg_object` serial namespace (as Cyborg's classes are).
fn device_in_cyborg_object() -> ObjectSchema {
    let mut s = device();
    s.primitive_keys = cyborg_object_keys();
    s
}

fn cyborg_object_keys() -> verso::PrimitiveKeys {
    #[derive(verso::ObjectFamily)]
    #[verso(namespace = "cyborg", serial_namespace = "cyborg_object")]
    struct CyborgObject;
    <CyborgObject as verso::ObjectFamily>::PRIMITIVE_KEYS
}

#[test]
fn the_lock_records_a_serial_namespace_other_than_the_default() {
    let lock = with_device(&device_in_cyborg_object());
    let text = lock.render().expect("renders");
    assert!(
        text.contains(
            "[objects.Device]\nversion = \"1.2\"\nfingerprint = \"1.2-fe5b27a5b5f3db959bc08a5f761d166b\"\nserial_namespace = \"cyborg_object\"\n"
        ),
        "{text}"
    );
    let back = Lock::parse(&text, Path::new("x.lock")).expect("parses");
    assert_eq!(back, lock);
    assert_eq!(back.objects["Device"].serial_namespace, "cyborg_object");
    // The default is not written, and a lock without the key (every lock written before
    // it was recorded) reads as the default.
    assert_eq!(
        locked().objects["Device"].serial_namespace,
        "versioned_object"
    );
    assert!(!std::fs::read_to_string(lock_path())
        .expect("lock reads")
        .contains("serial_namespace"));
}

#[test]
fn a_changed_serial_namespace_fails_the_check_and_names_it() {
    let report = check(&locked(), &with_device(&device_in_cyborg_object()));
    assert!(!report.is_ok());
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(
        e.headline,
        "fingerprint 1.2-fe5b27a5b5f3db959bc08a5f761d166b (unchanged) (lock 1.2, code 1.2)"
    );
    assert_eq!(
        e.lines,
        vec![
            "serial namespace changed: versioned_object -> cyborg_object (peers reading \
             versioned_object.* keys cannot read the objects at any version)"
                .to_string(),
            "the contract changed but VERSION did not: bump the version".to_string(),
        ]
    );
}

#[test]
fn an_added_field_fails_the_check_until_bumped_and_recorded() {
    let mut s = device();
    let mut f = s.field("std_board_info").expect("field").clone();
    f.name = "rack";
    s.fields.push(f);
    let report = check(&locked(), &with_device(&s));
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(e.lines[0], "field added: rack String nullable (since none)");
    assert!(e.lines[1].contains("VERSION did not"));
    assert!(e.fix.as_deref().unwrap_or_default().contains(
        "bump Device's VERSION to 1.3 (the changes need a minor version bump), mark each \
         added field #[verso(since = \"1.3\")]"
    ));

    // Bumped and given a `since`: only the lock is stale.
    s.version = Version::new(1, 3);
    s.fields.last_mut().expect("rack").since = Some(Version::new(1, 3));
    let report = check(&locked(), &with_device(&s));
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(e.severity, Severity::Error);
    assert_eq!(
        e.lines,
        vec!["field added: rack String nullable (since 1.3)"]
    );
    assert_eq!(
        e.fix.as_deref(),
        Some("the version was bumped 1.2 -> 1.3: record it with `verso objects update-lock`")
    );
    let (report, write) = update_lock(Some(&locked()), &with_device(&s), false);
    assert!(report.is_ok(), "{report}");
    let written = write.expect("update-lock writes");
    assert_eq!(written.objects["Device"].version, Version::new(1, 3));
    assert!(check(&written, &with_device(&s)).is_ok());
}

#[test]
fn an_added_remotable_method_is_reported() {
    let mut s = device();
    s.methods.push(MethodSchema {
        name: "refresh",
        kind: MethodKind::Instance,
        args: vec![],
        returns: "()",
    });
    let report = check(&locked(), &with_device(&s));
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(e.lines[0], "method added: instance refresh() -> ()");
    assert!(e
        .headline
        .contains("fingerprint 1.2-fe5b27a5b5f3db959bc08a5f761d166b -> 1.2-"));
}

#[test]
fn a_changed_signature_is_reported() {
    let mut s = device();
    s.methods
        .iter_mut()
        .find(|m| m.name == "set_managed")
        .expect("set_managed")
        .args
        .push(ArgSchema {
            name: "force",
            ty: "bool",
        });
    let report = check(&locked(), &with_device(&s));
    let e = report.entry("object Device").expect("Device entry");
    assert_eq!(
        e.lines[0],
        "method signature changed: instance set_managed(mode: ManagedMode) -> () -> \
         instance set_managed(mode: ManagedMode, force: bool) -> ()"
    );
}

#[test]
fn update_lock_refuses_a_change_without_a_bump_unless_forced() {
    let mut s = device();
    s.fields.retain(|f| f.name != "model");
    let current = with_device(&s);
    let (report, write) = update_lock(Some(&locked()), &current, false);
    assert!(write.is_none());
    let e = report.entry("object Device").expect("Device entry");
    assert!(e.headline.starts_with("refused: "), "{}", e.headline);
    assert!(e.lines.contains(&"field removed: model String".to_string()));
    assert!(e.fix.as_deref().unwrap_or_default().contains("--force"));

    let (report, write) = update_lock(Some(&locked()), &current, true);
    assert!(report.is_ok());
    assert_eq!(
        report.entry("object Device").map(|e| e.severity),
        Some(Severity::Warning)
    );
    assert_eq!(write, Some(current));
}

#[test]
fn update_lock_refuses_a_removed_object_unless_forced() {
    let mut current = app().contracts();
    current.objects.remove("DeployableList");
    let (report, write) = update_lock(Some(&locked()), &current, false);
    assert!(write.is_none());
    assert!(text(&report)
        .contains("object DeployableList: refused: 1.0 is in the lock but no longer registered"));
    assert!(update_lock(Some(&locked()), &current, true).1.is_some());
}

#[test]
fn test_only_schemas_stay_out_of_the_lock() {
    #[derive(VersionedObject, Clone, Debug, PartialEq)]
    #[verso(namespace = "cyborg", version = "1.0", test_only)]
    pub struct Probe {
        pub id: verso::Field<i64>,
        pub meta: verso::ObjectMeta,
    }
    let mut registry = cyborg_model::registry();
    registry.register::<Probe>();
    let app = Application::new("cyborg", registry);
    assert!(!app.contracts().objects.contains_key("Probe"));
    assert_eq!(app.contracts().objects.len(), 6);
}

fn lock_with(objects: &[(&str, ObjectSchema)]) -> Lock {
    let mut lock = Lock::default();
    for (n, s) in objects {
        lock.objects
            .insert((*n).into(), ObjectContract::from_schema(s));
    }
    lock
}

#[test]
fn diff_between_releases_judges_each_change() {
    let old = lock_with(&[("Device", device())]);

    // A field added with a minor bump and a since: fine.
    let mut added = device();
    let mut f = added.field("std_board_info").expect("field").clone();
    f.name = "rack";
    f.since = Some(Version::new(1, 3));
    added.fields.push(f);
    added.version = Version::new(1, 3);
    let r = diff(&old, &lock_with(&[("Device", added.clone())]));
    assert!(r.is_ok(), "{r}");
    let e = r.entry("object Device").expect("entry");
    assert_eq!(e.severity, Severity::Note);
    assert!(e.headline.starts_with("1.2 -> 1.3 (minor bump)"));
    assert_eq!(
        e.lines,
        vec!["field added: rack String nullable (since 1.3): fine with a minor bump (backported by since 1.3)"]
    );

    // A field removed with a minor bump: needs a major one.
    let mut removed = device();
    removed.fields.retain(|f| f.name != "vendor");
    removed.version = Version::new(1, 3);
    let r = diff(&old, &lock_with(&[("Device", removed.clone())]));
    assert!(!r.is_ok());
    let e = r.entry("object Device").expect("entry");
    assert_eq!(
        e.lines[0],
        "field removed: vendor String: needs a major version bump"
    );
    assert_eq!(
        e.lines[1],
        "ERROR: field removed: vendor String: needs a major version bump"
    );
    removed.version = Version::new(2, 0);
    assert!(diff(&old, &lock_with(&[("Device", removed)])).is_ok());

    // A retyped field, a changed method and a version that went backwards.
    let mut back = device();
    back.fields
        .iter_mut()
        .find(|f| f.name == "hostname")
        .expect("hostname")
        .nullable = true;
    back.version = Version::new(1, 1);
    let r = diff(&old, &lock_with(&[("Device", back)]));
    let e = r.entry("object Device").expect("entry");
    assert!(e
        .headline
        .starts_with("1.2 -> 1.1 (version went backwards)"));
    assert!(e
        .lines
        .contains(&"ERROR: version went backwards: 1.2 -> 1.1".to_string()));

    // A non-nullable field without a default added in a minor version: a warning.
    let mut required = added;
    if let Some(f) = required.fields.iter_mut().find(|f| f.name == "rack") {
        f.nullable = false;
    }
    let r = diff(&old, &lock_with(&[("Device", required)]));
    assert!(r.is_ok());
    let e = r.entry("object Device").expect("entry");
    assert_eq!(e.severity, Severity::Warning);
    assert!(e.lines[0].contains("non-nullable without a default"));

    // Objects added and removed.
    let r = diff(&Lock::default(), &old);
    assert_eq!(
        r.entry("object Device").map(|e| e.headline.as_str()),
        Some("added at 1.2")
    );
    let r = diff(&old, &Lock::default());
    assert!(!r.is_ok());
}

fn api(version: Version, args: Vec<ArgSpec>) -> RpcContract {
    let mut m = MethodSpec::new("build", Version::new(1, 0));
    for a in args {
        m = m.arg(a);
    }
    RpcContract::from_spec(&EndpointSpec {
        namespace: None,
        version,
        methods: vec![m],
    })
}

fn rpc_lock(c: RpcContract) -> Lock {
    let mut lock = Lock::default();
    lock.rpc.insert("agent".into(), c);
    lock
}

#[test]
fn rpc_contracts_need_the_right_bump() {
    let v10 = Version::new(1, 0);
    let v11 = Version::new(1, 1);
    let base = || vec![ArgSpec::required("host", ArgType::String)];
    let old = rpc_lock(api(v10, base()));

    // An optional argument added with a minor bump and since: accepted.
    let mut args = base();
    args.push(ArgSpec::optional("dry_run", ArgType::Bool, false).since(v11));
    let r = diff(&old, &rpc_lock(api(v11, args.clone())));
    assert!(r.is_ok(), "{r}");
    assert_eq!(
        r.entry("rpc agent").map(|e| e.lines.clone()),
        Some(vec![
            "method build: argument added: dry_run: bool optional (default false) since 1.1: fine with a minor bump".to_string()
        ])
    );

    // The same without a version bump: check fails.
    let r = check(&old, &rpc_lock(api(v10, args)));
    let e = r.entry("rpc agent").expect("entry");
    assert_eq!(e.severity, Severity::Error);
    assert!(e.lines.contains(
        &"methods or arguments changed but the RPC version is still 1.0: bump it".to_string()
    ));
    assert!(e
        .fix
        .as_deref()
        .unwrap_or_default()
        .starts_with("bump the agent RPC API to 1.1"));

    // Optional argument added without since: servers at 1.0 reject it.
    let mut args = base();
    args.push(ArgSpec::optional("dry_run", ArgType::Bool, false));
    let r = diff(&old, &rpc_lock(api(v11, args)));
    assert!(!r.is_ok());
    assert!(text(&r).contains("argument dry_run of build is new but declares since 1.0"));

    // Removed, made required, retyped: each needs a major bump.
    let cases: Vec<(Vec<ArgSpec>, &str)> = vec![
        (
            vec![],
            "method build: argument removed: host: string required",
        ),
        (
            vec![ArgSpec::required("host", ArgType::Int)],
            "method build: argument host retyped string -> int",
        ),
    ];
    for (args, line) in cases {
        let r = diff(&old, &rpc_lock(api(v11, args.clone())));
        assert!(!r.is_ok(), "{r}");
        assert!(
            text(&r).contains(&format!("{line}: needs a major version bump")),
            "{r}"
        );
        assert!(diff(&old, &rpc_lock(api(Version::new(2, 0), args))).is_ok());
    }
    let opt = rpc_lock(api(
        v10,
        vec![ArgSpec::optional("host", ArgType::String, "localhost")],
    ));
    let r = diff(&opt, &rpc_lock(api(v11, base())));
    assert!(
        text(&r).contains("method build: argument host made required: needs a major version bump")
    );

    // A method removed.
    let none = rpc_lock(RpcContract {
        version: v11,
        namespace: None,
        methods: vec![],
    });
    let r = diff(&old, &none);
    assert!(text(&r).contains(
        "method removed: build(host: string required) since 1.0: needs a major version bump"
    ));
}

#[test]
fn the_conductor_api_change_is_caught_by_check() {
    let mut current = app().contracts();
    if let Some(c) = current.rpc.get_mut("conductor") {
        if let Some(m) = c.methods.iter_mut().find(|m| m.name == "object_action") {
            m.args.retain(|a| a.name != "kwargs");
        }
    }
    let r = check(&locked(), &current);
    let e = r.entry("rpc conductor").expect("entry");
    assert_eq!(e.severity, Severity::Error);
    assert_eq!(
        e.lines[0],
        "method object_action: argument removed: kwargs: any nullable optional (default null)"
    );
}

#[test]
fn lint_reports_exactly_the_models_intentional_gaps() {
    let findings = lint(app().registry(), Some(&locked()));
    let report: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        report,
        vec![
            "AttachHandleList.objects [list-no-child-versions]: list has a relationship table on \
             `objects` [(\"1.0\", \"1.1\"), (\"1.1\", \"1.2\")] but no child_versions: without a \
             manifest the table decides, but a manifest that lacks AttachHandle sends the members \
             at 1.0\n    fix: declare child_versions = [(\"1.0\", \"1.1\"), (\"1.1\", \"1.2\")] on \
             the list (the same pairs)",
            "DeployableList.objects [list-no-child-rule]: list has no child-version rule: no \
             child_versions and no relationship table on `objects`, so OVO backports every \
             Deployable member to 1.0\n    fix: declare child_versions = [(\"1.0\", \"<Deployable \
             version>\")] on the list, one entry per list version",
        ]
    );
    // The same without the lock: nothing found needs it on this model.
    assert_eq!(lint(app().registry(), None), findings);
}

fn lint_rules(schemas: &[&ObjectSchema], lock: Option<&Lock>) -> Vec<(String, String)> {
    lint_schemas(schemas, lock)
        .into_iter()
        .map(|f| {
            (
                format!("{}.{}", f.object, f.field.unwrap_or_default()),
                f.rule.to_string(),
            )
        })
        .collect()
}

#[test]
fn lint_finds_a_family_with_two_serial_namespaces() {
    let device = device_in_cyborg_object();
    let handle = cyborg_model::AttachHandle::schema().clone();
    let deployable = cyborg_model::Deployable::schema().clone();
    let found = lint_rules(&[&device, &handle, &deployable], None);
    assert!(
        found.contains(&("Device.".into(), "serial-namespace-mixed".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&("Deployable.".into(), "serial-namespace-mixed".into())),
        "{found:?}"
    );
    // AttachHandle's device field is cyborg_model's Device, still in versioned_object.
    assert!(
        found.contains(&("AttachHandle.".into(), "serial-namespace-mixed".into())),
        "{found:?}"
    );
    // One serial namespace for the whole family: nothing to say.
    let found = lint_rules(&[&handle, &deployable], None);
    assert!(
        !found.iter().any(|(_, r)| r == "serial-namespace-mixed"),
        "{found:?}"
    );
}

#[test]
fn lint_finds_a_field_added_without_since_through_the_lock() {
    let mut s = device();
    s.version = Version::new(1, 3);
    let mut f = s.field("hostname").expect("hostname").clone();
    f.name = "rack";
    s.fields.push(f);
    let found = lint_rules(&[&s], Some(&locked()));
    assert_eq!(
        found,
        vec![
            ("Device.rack".to_string(), "field-without-since".to_string()),
            (
                "Device.rack".to_string(),
                "required-field-without-default".to_string()
            ),
        ]
    );
    let f = &lint_schemas(&[&s], Some(&locked()))[0];
    assert!(f.message.contains("not in the locked 1.2 contract"), "{f}");
    assert_eq!(
        f.fix,
        "mark it #[verso(since = \"1.3\")] (the version that added it)"
    );
    // Without the lock it cannot be seen: the schema alone does not say.
    assert!(lint_rules(&[&s], None).is_empty());
}

#[test]
fn lint_finds_broken_relationship_tables() {
    let device = device();
    let handle = || cyborg_model::AttachHandle::schema().clone();
    let v = Version::new;
    let with_table = |t: Vec<(Version, Version)>| {
        let mut s = handle();
        if let Some(f) = s.fields.iter_mut().find(|f| f.name == "device") {
            f.relationships = t;
        }
        s
    };

    let none = with_table(vec![]);
    assert_eq!(
        lint_rules(&[&none, &device], None),
        vec![(
            "AttachHandle.device".to_string(),
            "object-field-no-relationship".to_string()
        )]
    );
    let backwards = with_table(vec![(v(1, 1), v(1, 2)), (v(1, 2), v(1, 1))]);
    assert!(lint_rules(&[&backwards, &device], None).contains(&(
        "AttachHandle.device".into(),
        "relationship-backwards".into()
    )));

    let mut gap = with_table(vec![(v(1, 1), v(1, 1)), (v(1, 3), v(1, 2))]);
    gap.version = v(1, 3);
    assert_eq!(
        lint_rules(&[&gap, &device], None),
        vec![("AttachHandle.device".into(), "relationship-gap".into())]
    );
    let late = with_table(vec![(v(1, 2), v(1, 2))]);
    let f = lint_schemas(&[&late, &device], None);
    assert_eq!(f.len(), 1);
    assert!(
        f[0].message
            .contains("start at 1.2 but the field exists since 1.1"),
        "{}",
        f[0]
    );

    let mut newer_device = device.clone();
    newer_device.version = v(1, 3);
    let f = lint_schemas(&[&handle(), &newer_device], None);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].rule, "relationship-stale");
    assert_eq!(
        f[0].fix,
        "give AttachHandle version 1.3 with an entry (\"1.3\", \"1.3\")"
    );

    let future = with_table(vec![
        (v(1, 1), v(1, 1)),
        (v(1, 2), v(1, 2)),
        (v(1, 3), v(1, 4)),
    ]);
    let rules = lint_rules(&[&future, &device], None);
    assert_eq!(
        rules
            .iter()
            .filter(|(_, r)| r == "relationship-range")
            .count(),
        2,
        "{rules:?}"
    );
}

#[test]
fn lint_finds_a_required_field_without_default_in_a_minor_version() {
    let mut s = device();
    if let Some(f) = s.fields.iter_mut().find(|f| f.name == "vendor_board_info") {
        f.nullable = false;
    }
    let f = lint_schemas(&[&s], None);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].rule, "required-field-without-default");
    assert_eq!(f[0].field.as_deref(), Some("vendor_board_info"));
    assert!(f[0].fix.contains("default"));
}

fn run(app: Option<&Application>, args: &[&str]) -> (Result<bool, CliError>, String) {
    let mut out = Vec::new();
    let argv = std::iter::once("verso").chain(args.iter().copied());
    let r = execute(app, argv, &mut out);
    (r, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn cli_commands_against_the_example_lock() {
    let app = app();
    let (r, out) = run(Some(&app), &["objects", "check"]);
    assert!(matches!(r, Ok(true)), "{out}");

    let (r, out) = run(Some(&app), &["objects", "list", "--json"]);
    assert!(matches!(r, Ok(true)));
    let listed: Lock = serde_json::from_str(&out).expect("list --json is the lock's data");
    assert_eq!(listed, app.contracts());

    let (r, out) = run(Some(&app), &["objects", "list"]);
    assert!(matches!(r, Ok(true)));
    assert!(
        out.contains("Device 1.2 1.2-fe5b27a5b5f3db959bc08a5f761d166b\n"),
        "{out}"
    );

    let (r, out) = run(Some(&app), &["objects", "lint"]);
    assert!(matches!(r, Ok(false)));
    assert!(out.ends_with("2 finding(s)\n"), "{out}");

    let lock = lock_path();
    let lock = lock.to_str().expect("utf-8 path");
    let (r, out) = run(None, &["objects", "diff", lock, lock]);
    assert!(matches!(r, Ok(true)), "{out}");
    assert!(
        out.contains("0 error(s), 7 unchanged of 7 contract(s)"),
        "{out}"
    );

    let (r, _) = run(None, &["objects", "check"]);
    assert!(matches!(r, Err(CliError::NoApplication { .. })));
    let (r, _) = run(Some(&app), &["objects", "frobnicate"]);
    assert!(matches!(r, Err(CliError::Usage(_))));
}

#[test]
fn cli_check_fails_on_a_stale_lock_and_update_lock_repairs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("objects.lock");
    let mut stale = locked();
    if let Some(d) = stale.objects.get_mut("Device") {
        d.fields.retain(|f| f.name != "hostname");
        d.fingerprint = "1.2-00000000000000000000000000000000".into();
    }
    stale.write(&path).expect("writes");
    let path_s = path.to_str().expect("utf-8 path");

    let (r, out) = run(Some(&app()), &["objects", "check", "--lock", path_s]);
    assert!(matches!(r, Ok(false)), "{out}");
    assert!(
        out.contains(
            "ERROR object Device: fingerprint 1.2-00000000000000000000000000000000 -> \
         1.2-fe5b27a5b5f3db959bc08a5f761d166b (lock 1.2, code 1.2)\n    - field added: \
         hostname String (since none)\n"
        ),
        "{out}"
    );
    assert!(out.contains("bump Device's VERSION to 1.3"), "{out}");

    let (r, out) = run(Some(&app()), &["objects", "update-lock", "--lock", path_s]);
    assert!(matches!(r, Ok(false)), "{out}");
    assert!(out.contains("not written"), "{out}");
    let (r, out) = run(
        Some(&app()),
        &["objects", "update-lock", "--force", "--lock", path_s],
    );
    assert!(matches!(r, Ok(true)), "{out}");
    let (r, out) = run(Some(&app()), &["objects", "check", "--lock", path_s]);
    assert!(matches!(r, Ok(true)), "{out}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("reads"),
        std::fs::read_to_string(lock_path()).expect("reads")
    );

    let (r, _) = run(
        Some(&app()),
        &["objects", "check", "--lock", "/nonexistent/objects.lock"],
    );
    assert!(matches!(r, Err(CliError::ReadLock { .. })));
}
