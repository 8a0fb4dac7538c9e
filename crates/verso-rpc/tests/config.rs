//! A service's configuration as its binary reads it: an application that calls a third
//! RPC API (`scheduler`) declares it, and its cap is read from a file, the environment
//! and `--set` with the same rules as `conductor`'s; the application's own sections are
//! typed and every value says where it came from.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde::Deserialize;
use std::io::Write;
use std::process::Command;
use verso::Version;
use verso_rpc::caps::ApiCap;
use verso_rpc::config::{ConfigError, ConfigLoader, Origin};

fn accel() -> ConfigLoader {
    ConfigLoader::new()
        .api(ApiCap::new(
            "conductor",
            Version::new(1, 2),
            Version::new(1, 1),
        ))
        .api(ApiCap::new("agent", Version::new(1, 0), Version::new(1, 0)))
        .api(ApiCap::new(
            "scheduler",
            Version::new(2, 3),
            Version::new(2, 0),
        ))
        .section("database")
        .section("transport")
        .env_vars([])
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_declared_api_gets_its_cap_from_every_source() {
    // The default.
    let c = accel().load().expect("defaults");
    assert_eq!(c.cap("scheduler"), Some(Version::new(2, 0)));
    assert_eq!(c.origin("upgrade_levels.scheduler"), Some(Origin::Default));

    // The file.
    let f = file("[upgrade_levels]\nscheduler = \"2.1\"\n");
    let path = f.path().display().to_string();
    let c = accel().file(f.path()).load().expect("file");
    assert_eq!(c.cap("scheduler"), Some(Version::new(2, 1)));
    assert_eq!(
        c.origin("upgrade_levels.scheduler"),
        Some(Origin::File(path.clone()))
    );

    // The environment wins over the file.
    let env = vars(&[("VERSO_UPGRADE_LEVELS_SCHEDULER", "2.2")]);
    let c = accel()
        .file(f.path())
        .env_vars(env.clone())
        .load()
        .expect("env");
    assert_eq!(c.cap("scheduler"), Some(Version::new(2, 2)));
    assert_eq!(
        c.origin("upgrade_levels.scheduler"),
        Some(Origin::Env("VERSO_UPGRADE_LEVELS_SCHEDULER".into()))
    );

    // --set wins over both.
    let c = accel()
        .file(f.path())
        .env_vars(env)
        .set("upgrade_levels.scheduler=2.3")
        .load()
        .expect("--set");
    assert_eq!(c.cap("scheduler"), Some(Version::new(2, 3)));
    assert_eq!(c.origin("upgrade_levels.scheduler"), Some(Origin::Cli));
    // The other caps are untouched.
    assert_eq!(c.cap("conductor"), Some(Version::new(1, 1)));
    assert!(c
        .show_config()
        .contains("scheduler = \"2.3\"  # command line"));
}

#[test]
fn a_declared_api_has_the_same_rules() {
    let refused = |text: &str| {
        let f = file(text);
        accel().file(f.path()).load().expect_err(text)
    };
    assert!(matches!(
        refused("[upgrade_levels]\nscheduler = 2.10\n"),
        ConfigError::CapBareNumber { value, .. } if value == "2.10"
    ));
    assert!(matches!(
        refused("[upgrade_levels]\nscheduler = \"auto\"\n"),
        ConfigError::CapAuto { .. }
    ));
    assert!(matches!(
        refused("[upgrade_levels]\nscheduler = \"2.4\"\n"),
        ConfigError::CapNotSupported { local_max, .. } if local_max == Version::new(2, 3)
    ));
    assert!(matches!(
        refused("[upgrade_levels]\nscheduler = \"1.0\"\n"),
        ConfigError::CapNotSupported { .. }
    ));
    let e = refused("[upgrade_levels]\nschedular = \"2.0\"\n");
    assert!(
        e.to_string()
            .contains("known options: conductor, agent, scheduler"),
        "{e}"
    );
    // An API this application does not declare is unknown here.
    let e = ConfigLoader::new()
        .env_vars([])
        .api(ApiCap::new(
            "conductor",
            Version::new(1, 2),
            Version::new(1, 1),
        ))
        .set("scheduler=2.0")
        .load()
        .expect_err("undeclared");
    assert!(matches!(e, ConfigError::CapUnknownOption { .. }), "{e:?}");
}

#[derive(Debug, Deserialize)]
struct Transport {
    url: String,
    #[serde(default)]
    heartbeat: u64,
}

#[test]
fn the_services_sections_are_layered_the_same_way() {
    let f = file(
        "[transport]\nurl = \"rabbit://accel:secret@rabbit:5672/\"\nheartbeat = 60\n\
         [database]\nurl = \"postgres://accel:pw@db/accel\"\n",
    );
    let c = accel()
        .file(f.path())
        .env_vars(vars(&[("VERSO_TRANSPORT_HEARTBEAT", "30")]))
        .set("database.url=postgres://accel:other@db2/accel")
        .load()
        .expect("valid");
    let t: Transport = c.section("transport").expect("typed");
    assert_eq!(t.url, "rabbit://accel:secret@rabbit:5672/");
    assert_eq!(t.heartbeat, 30, "the environment's text read as a number");
    let shown = c.show_config();
    assert!(
        !shown.contains("secret") && !shown.contains("other@"),
        "{shown}"
    );
    assert!(
        shown.contains("url = \"postgres://accel:***@db2/accel\"  # command line"),
        "{shown}"
    );
    assert!(
        shown.contains("heartbeat = \"30\"  # environment VERSO_TRANSPORT_HEARTBEAT"),
        "{shown}"
    );
}

/// The show_config example reads the process environment, as a service binary does.
#[test]
fn the_example_reads_the_process_environment() {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target directory")
        .join("examples")
        .join(format!("show_config{}", std::env::consts::EXE_SUFFIX));
    let out = Command::new(bin)
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env("VERSO_UPGRADE_LEVELS_SCHEDULER", "2.2")
        .env("VERSO_DATABASE_URL", "postgres://accel:from-env@db/accel")
        .args([
            "--config",
            "crates/verso-rpc/examples/accel.toml",
            "--show-config",
        ])
        .output()
        .expect("run show_config");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {:?}", out.stderr);
    assert!(
        stdout.contains("scheduler = \"2.2\"  # environment VERSO_UPGRADE_LEVELS_SCHEDULER"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("url = \"postgres://accel:***@db/accel\"  # environment VERSO_DATABASE_URL"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("from-env") && !stdout.contains("password"),
        "{stdout}"
    );
}
