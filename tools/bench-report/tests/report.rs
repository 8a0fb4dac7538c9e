//! The report tool on a fixture set of result files (one in the shape `accel bench fleet`
//! writes, one with two logarithmic axes), and its typed refusal of malformed files.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use bench_report::{load_dir, render, write, Error};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn fixture_set_renders_the_expected_markdown() {
    let loaded = load_dir(&fixtures().join("results")).expect("fixtures load");
    let report = render(&loaded).expect("renders");
    let expected = std::fs::read_to_string(fixtures().join("expected.md")).expect("expected.md");
    assert_eq!(report.markdown, expected, "got:\n{}", report.markdown);
}

#[test]
fn every_chart_is_well_formed_svg_with_its_series() {
    let loaded = load_dir(&fixtures().join("results")).expect("fixtures load");
    let report = render(&loaded).expect("renders");
    let names: Vec<&str> = report.charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["fleet-fleet-latency.svg", "rpc-inflight-throughput.svg"]
    );
    for ((name, svg), labels) in report.charts.iter().zip([
        &["heartbeat p50", "heartbeat p99"][..],
        &["verso", "oslo.messaging"][..],
    ]) {
        let doc = roxmltree::Document::parse(svg)
            .unwrap_or_else(|e| panic!("{name} is not well-formed XML: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg", "{name}");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::trim))
            .collect();
        for label in labels {
            assert!(
                texts.contains(label),
                "{name}: legend {label:?} in {texts:?}"
            );
        }
        // One line per series (plotters draws a LineSeries as a polyline).
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert!(lines >= labels.len(), "{name}: {lines} polylines");
    }
}

#[test]
fn write_puts_the_report_and_charts_in_place_and_drops_stale_charts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let charts = dir.path().join("docs/bench");
    std::fs::create_dir_all(&charts).expect("mkdir");
    std::fs::write(charts.join("gone-old.svg"), "<svg/>").expect("stale chart");
    std::fs::write(charts.join("README.txt"), "kept").expect("other file");
    let loaded = load_dir(&fixtures().join("results")).expect("fixtures load");
    write(&render(&loaded).expect("renders"), dir.path()).expect("writes");
    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    assert!(md.contains("(docs/bench/fleet-fleet-latency.svg)"));
    assert!(charts.join("fleet-fleet-latency.svg").is_file());
    assert!(charts.join("rpc-inflight-throughput.svg").is_file());
    assert!(!charts.join("gone-old.svg").exists(), "a stale chart stays");
    assert!(
        charts.join("README.txt").exists(),
        "a file that is no chart was removed"
    );
}

/// A directory holding one result file `name` with `text`, and the error loading it.
fn load_one(name: &str, text: &str) -> (tempfile::TempDir, Error) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(name), text).expect("write");
    let err = load_dir(dir.path()).expect_err("a malformed file is refused");
    (dir, err)
}

fn good() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join("results/fleet.json")).expect("fixture");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn malformed_files_are_typed_errors_naming_the_file() {
    let (dir, err) = load_one("broken.json", "{\"schema\": 1, \"bench\": ");
    assert!(matches!(&err, Error::Parse { path, .. } if path == &dir.path().join("broken.json")));
    assert!(err.to_string().contains("broken.json"), "{err}");

    let mut v = good();
    v["schema"] = 2.into();
    let (_dir, err) = load_one("fleet.json", &v.to_string());
    assert!(matches!(err, Error::Schema { found: 2, .. }), "{err}");

    let mut v = good();
    v.as_object_mut().expect("object").remove("title");
    let (_dir, err) = load_one("fleet.json", &v.to_string());
    assert!(matches!(&err, Error::Parse { .. }), "{err}");
    assert!(
        err.to_string().contains("fleet.json") && err.to_string().contains("title"),
        "{err}"
    );

    let mut v = good();
    v["charts"][0]["series"][0]["points"][0] = serde_json::json!([0, 1.0]);
    let (_dir, err) = load_one("fleet.json", &v.to_string());
    assert!(
        matches!(&err, Error::Invalid { what, .. } if what.contains("logarithmic")),
        "{err}"
    );

    let mut v = good();
    v["tables"][0]["rows"][1] = serde_json::json!(["1000", "1"]);
    let (_dir, err) = load_one("fleet.json", &v.to_string());
    assert!(
        matches!(&err, Error::Invalid { what, .. } if what.contains("row 2")),
        "{err}"
    );

    let (_dir, err) = load_one("other.json", &good().to_string());
    assert!(
        matches!(&err, Error::Invalid { what, .. } if what.contains("file's name")),
        "{err}"
    );
    assert!(err.to_string().contains("other.json"), "{err}");

    let mut v = good();
    v["targets"][0]["better"] = "sideways".into();
    let (_dir, err) = load_one("fleet.json", &v.to_string());
    assert!(matches!(&err, Error::Parse { .. }), "{err}");
}

#[test]
fn a_result_written_by_a_bench_reads_back_equal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut r = bench_report::BenchResult::new("demo", "a demo", "cargo bench --bench demo");
    r.targets.push(bench_report::Target::new(
        "ratio",
        6.0,
        5.0,
        "x",
        bench_report::Better::Higher,
    ));
    let path = r.write_to(dir.path()).expect("writes");
    assert_eq!(path, dir.path().join("demo.json"));
    assert_eq!(bench_report::load_file(&path).expect("reads"), r);
    assert!(r.machine.contains("cores"), "{}", r.machine);
}
