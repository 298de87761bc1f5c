//! `pgappliance collect` over a store holding two machines' runs and three runs it must
//! skip (no manifest, checksum mismatch, newer schema), and the per-run report and the
//! comparison page rendered in headless Chromium (screenshots kept in target/artifacts/).

use pgappliance_test_support as harness;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{describe, example, Workdir};

fn plan_named(dir: &Path, name: &str, price: f64) -> PathBuf {
    let text = std::fs::read_to_string(example("quick.toml")).expect("quick.toml");
    let text = text
        .replace("name = \"quick\"", &format!("name = \"{name}\""))
        .replace(
            "hourly_price_usd = 0.10",
            &format!("hourly_price_usd = {price}"),
        );
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).expect("plan");
    p
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("ls") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// The cache the collects of these tests share (runs are cached per store URL and key, and
/// every test's store is a fresh directory or server).
fn test_cache() -> PathBuf {
    harness::workspace().join("target/test-collect-cache")
}

fn artifacts() -> PathBuf {
    let d = harness::workspace().join("target/artifacts");
    std::fs::create_dir_all(&d).expect("artifacts dir");
    d
}

#[test]
fn collect_compares_machines_skips_bad_runs_and_pages_render_cleanly() {
    let plans = tempfile::tempdir().expect("plans");
    let store_dir = tempfile::tempdir().expect("store");
    let store = format!("file://{}", store_dir.path().display());
    let mut run_dirs = Vec::new();
    let mut workdirs = Vec::new();
    for (name, price) in [("graviton-like", 1.4464), ("x86-like", 1.808)] {
        let w = Workdir::new(name);
        let out = w
            .run_command_to(&plan_named(plans.path(), name, price), &store)
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", describe(&out));
        run_dirs.push(w.run_dir());
        workdirs.push(w);
    }
    // Runs the collector must skip, made from a real uploaded run.
    let machine = pgappliance::upload::machine_id();
    let run1 = run_dirs[0]
        .file_name()
        .expect("id")
        .to_string_lossy()
        .into_owned();
    let uploaded = store_dir
        .path()
        .join("graviton-like")
        .join(&machine)
        .join(&run1);
    let fake = |run: &str| {
        store_dir
            .path()
            .join("graviton-like")
            .join(&machine)
            .join(run)
    };
    copy_dir(&uploaded, &fake("no-manifest"));
    std::fs::remove_file(fake("no-manifest").join("manifest.json")).expect("rm");
    copy_dir(&uploaded, &fake("tampered"));
    let results = fake("tampered").join("results.json");
    let text = std::fs::read_to_string(&results).expect("results");
    // Same size, one digit of a tps figure changed.
    let at = text.find("\"tps\": ").expect("a tps figure") + "\"tps\": ".len();
    let digit = text.as_bytes()[at];
    let other = if digit == b'9' { '1' } else { '9' };
    let tampered = format!("{}{other}{}", &text[..at], &text[at + 1..]);
    assert_eq!(tampered.len(), text.len());
    std::fs::write(&results, tampered).expect("write");
    copy_dir(&uploaded, &fake("future"));
    let future = fake("future");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(future.join("results.json")).expect("r"))
            .expect("json");
    v["schema_version"] = 99.into();
    let bytes = serde_json::to_vec_pretty(&v).expect("ser");
    std::fs::write(future.join("results.json"), &bytes).expect("write");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(future.join("manifest.json")).expect("m"))
            .expect("json");
    for o in m["objects"].as_array_mut().expect("objects") {
        if o["path"] == "results.json" {
            let (size, sha) =
                pgappliance::upload::hash_file(&future.join("results.json")).expect("hash");
            o["size"] = size.into();
            o["sha256"] = sha.into();
        }
    }
    std::fs::write(
        future.join("manifest.json"),
        serde_json::to_vec_pretty(&m).expect("ser"),
    )
    .expect("write");

    let out_dir = tempfile::tempdir().expect("out");
    let out = Command::new(harness::image_binary())
        .env("XDG_CACHE_HOME", test_cache())
        .args(["collect", &store, "--out"])
        .arg(out_dir.path())
        .output()
        .expect("collect");
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("collected 2 run(s), skipped 3"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("no-manifest: no manifest yet"), "{stderr}");
    assert!(stderr.contains("tampered: checksum mismatch"), "{stderr}");
    assert!(
        stderr.contains("future: results.json has schema version 99"),
        "{stderr}"
    );

    let csv = std::fs::read_to_string(out_dir.path().join("summary.csv")).expect("csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(
        rows.len(),
        2 * (3 + 2),
        "machine × workload × clients:\n{csv}"
    );
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    for row in &rows {
        let f: Vec<&str> = row.split(',').collect();
        let tps: f64 = f[col("tps_mean")].parse().expect("tps");
        let price: f64 = f[col("hourly_price_usd")].parse().expect("price");
        let per: f64 = f[col("tps_per_dollar_hour")].parse().expect("tps per $/h");
        assert!((per - tps / price).abs() < 0.01 * per, "{row}");
    }
    let index = out_dir.path().join("index.html");
    let html = std::fs::read_to_string(&index).expect("index");
    assert!(html.contains("graviton-like") && html.contains("x86-like"));
    assert!(html.contains("tps per $/hour"));

    let report = run_dirs[0].join("report.html");
    for (page, png, min_svgs) in [
        (index.as_path(), artifacts().join("collect-index.png"), 3),
        (report.as_path(), artifacts().join("run-report.png"), 4),
    ] {
        let shown = harness::chromium_render(page, &png);
        let (dom, console) = (shown.dom, shown.console);
        assert!(
            console.is_empty(),
            "{}: console messages: {console:?}",
            page.display()
        );
        assert!(
            shown.fetches.is_empty(),
            "{}: network fetches: {:?}",
            page.display(),
            shown.fetches
        );
        let svgs = dom.matches("<svg").count();
        assert!(
            svgs >= min_svgs,
            "{}: {svgs} charts rendered",
            page.display()
        );
        let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 10_000,
            "{}: screenshot {} is {size} bytes",
            page.display(),
            png.display()
        );
        eprintln!("screenshot kept: {}", png.display());
    }
    drop(workdirs);
}

#[test]
fn the_console_and_network_checks_catch_a_broken_page() {
    let dir = tempfile::tempdir().expect("dir");
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><img src=\"http://example.invalid/chart.png\"><script>console.error('boom'); missing();</script></body></html>",
    )
    .expect("write");
    let shown = harness::chromium_render(&page, &dir.path().join("broken.png"));
    assert!(
        shown
            .console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError")),
        "{:?}",
        shown.console
    );
    assert_eq!(shown.fetches, ["http://example.invalid/chart.png"]);
}

/// Rewrites one object of a run in a file store and gives the manifest its new size and
/// sha256, as an uploader would have.
fn rewrite_object(run: &Path, rel: &str, bytes: &[u8]) {
    std::fs::write(run.join(rel), bytes).expect("write");
    let manifest = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("m")).expect("json");
    let (size, sha) = pgappliance::upload::hash_file(&run.join(rel)).expect("hash");
    for o in m["objects"].as_array_mut().expect("objects") {
        if o["path"] == rel {
            o["size"] = size.into();
            o["sha256"] = sha.clone().into();
        }
    }
    std::fs::write(&manifest, serde_json::to_vec_pretty(&m).expect("ser")).expect("write");
}

fn set_manifest_field(run: &Path, rel: &str, field: &str, value: serde_json::Value) {
    let manifest = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("m")).expect("json");
    for o in m["objects"].as_array_mut().expect("objects") {
        if o["path"] == rel {
            o[field] = value.clone();
        }
    }
    std::fs::write(&manifest, serde_json::to_vec_pretty(&m).expect("ser")).expect("write");
}

fn set_manifest_top(run: &Path, field: &str, value: serde_json::Value) {
    let manifest = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("m")).expect("json");
    m[field] = value;
    std::fs::write(&manifest, serde_json::to_vec_pretty(&m).expect("ser")).expect("write");
}

/// A reader of RFC 4180 (quoted fields with doubled quotes, CRLF records).
fn read_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {
                chars.next();
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    records
}

#[test]
fn collect_skips_each_bad_run_with_its_reason_and_never_panics() {
    use std::os::unix::ffi::OsStrExt;
    let plans = tempfile::tempdir().expect("plans");
    let store_dir = tempfile::tempdir().expect("store");
    let store = format!("file://{}", store_dir.path().display());
    let w = Workdir::new("collect-bad");
    let out = w
        .run_command_to(&plan_named(plans.path(), "good", 1.0), &store)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", describe(&out));
    let run_id = w
        .run_dir()
        .file_name()
        .expect("id")
        .to_string_lossy()
        .into_owned();
    let machine = pgappliance::upload::machine_id();
    let uploaded = store_dir.path().join("good").join(&machine).join(&run_id);
    let variant = |name: &str| {
        let dir = store_dir.path().join("variants").join(&machine).join(name);
        copy_dir(&uploaded, &dir);
        dir
    };
    // A results.json made different (another appliance name, so not a duplicate) with the
    // manifest updated to match.
    let renamed = |dir: &Path, appliance: &str| {
        let mut v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("results.json")).expect("results"),
        )
        .expect("json");
        v["appliance"] = appliance.into();
        rewrite_object(dir, "results.json", &serde_json::to_vec(&v).expect("ser"));
    };
    let mut expected: Vec<(&str, &str)> = Vec::new();
    for (name, sha) in [
        ("sha-short", "abc".to_string()),
        ("sha-empty", String::new()),
        ("sha-multibyte", format!("a{}", "é".repeat(63))),
    ] {
        let dir = variant(name);
        set_manifest_field(&dir, "results.json", "sha256", sha.into());
        expected.push((name, "which is not 64 hex digits"));
    }
    let dir = variant("symlink-loop");
    std::os::unix::fs::symlink("..", dir.join("raw").join("loop")).expect("symlink");
    expected.push(("symlink-loop", "cannot list"));
    let dir = variant("non-utf8");
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff-name.txt");
    std::fs::write(dir.join("raw").join(name), b"x").expect("non-UTF-8 name");
    expected.push(("non-utf8", "cannot list"));
    let dir = variant("oversized");
    renamed(&dir, "oversized");
    let big = std::fs::File::create(dir.join("results.json")).expect("create");
    big.set_len((64 << 20) + 1).expect("sparse 64 MiB + 1");
    set_manifest_field(&dir, "results.json", "size", ((64u64 << 20) + 1).into());
    expected.push(("oversized", "more than the 64 MiB collect reads"));
    // The same run copied under another machine id (its manifest saying so).
    let copy = store_dir
        .path()
        .join("good")
        .join("zz-copy-machine")
        .join(&run_id);
    copy_dir(&uploaded, &copy);
    set_manifest_top(&copy, "machine_id", "zz-copy-machine".into());
    // A run with a name a CSV must quote, stored under its own name (quotes and line
    // breaks, which a file store's keys cannot hold, are csv.rs's round-trip test's).
    let awkward = "a, b";
    let dir = store_dir.path().join(awkward).join(&machine).join(&run_id);
    copy_dir(&uploaded, &dir);
    renamed(&dir, awkward);
    set_manifest_top(&dir, "appliance", awkward.into());

    let out_dir = tempfile::tempdir().expect("out");
    let out = Command::new(harness::image_binary())
        .env("XDG_CACHE_HOME", test_cache())
        .args(["collect", &store, "--out"])
        .arg(out_dir.path())
        .output()
        .expect("collect");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains(&format!(
            "collected 2 run(s), skipped {}",
            expected.len() + 1
        )),
        "{stdout}{stderr}"
    );
    for (name, words) in expected {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("/{name}: ")))
            .unwrap_or_else(|| panic!("{name} skipped: {stderr}"));
        assert!(line.contains(words), "{name}: {line}");
    }
    assert!(
        stderr.contains(&format!(
            "good/{machine}/{run_id} (appliance good, run id {run_id}): counted once"
        )),
        "the copy under another machine id is a duplicate: {stderr}"
    );

    let csv = std::fs::read_to_string(out_dir.path().join("summary.csv")).expect("csv");
    let records = read_csv(&csv);
    let width = records[0].len();
    assert!(records.iter().all(|r| r.len() == width), "{csv:?}");
    let machines: std::collections::BTreeSet<&str> =
        records[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(machines, ["good", awkward].into_iter().collect(), "{csv:?}");
}

#[test]
fn collect_from_a_store_that_does_not_exist_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("no-such-store");
    let out = Command::new(harness::image_binary())
        .env("XDG_CACHE_HOME", test_cache())
        .args(["collect", &format!("file://{}", missing.display()), "--out"])
        .arg(dir.path().join("out"))
        .output()
        .expect("collect");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-store"), "{stderr}");
    assert!(!missing.exists(), "collect does not create the store");
    assert!(!dir.path().join("out").exists(), "nothing written");
}

#[test]
fn a_name_that_is_not_utf8_at_any_level_of_a_file_store_skips_only_itself() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("store");
    let bad = std::ffi::OsStr::from_bytes(b"bad\xffname");
    // Its sibling run (no manifest yet), a run, a machine and an appliance named in bytes
    // that are not UTF-8, and a stray file beside the runs.
    for d in [
        store.join("app/machine/run-1"),
        store.join("app/machine").join(bad),
        store.join("app").join(bad).join("run-2"),
        store.join(bad).join("machine/run-3"),
    ] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(store.join("app/machine/stray.txt"), b"x").expect("stray");
    let out = Command::new(harness::image_binary())
        .env("XDG_CACHE_HOME", test_cache())
        .args(["collect", &format!("file://{}", store.display()), "--out"])
        .arg(dir.path().join("out"))
        .output()
        .expect("collect");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped app/machine/run-1: no manifest yet"),
        "{stderr}"
    );
    for key in ["app/machine/bad", "app/bad", "bad"] {
        assert!(
            stderr.contains(&format!("skipped {key}\u{fffd}name"))
                && stderr.contains("bad\\xffname is not UTF-8"),
            "{key}: {stderr}"
        );
    }
    assert!(!stderr.contains("stray"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("collected 0 run(s), skipped 4"));
}

#[test]
fn a_collect_of_a_store_without_runs_can_be_written_over_by_the_next() {
    // Seen on the docs walk of 2026-12-02: `wait --teardown` collected a store that held no
    // run yet, and the next `collect --out` into the same directory was refused for the
    // empty runs/ the first had left.
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).expect("mkdir");
    let out = dir.path().join("cmp");
    for round in 1..=2 {
        let o = Command::new(harness::image_binary())
            .env("XDG_CACHE_HOME", test_cache())
            .args(["collect", &format!("file://{}", store.display()), "--out"])
            .arg(&out)
            .output()
            .expect("collect");
        assert_eq!(o.status.code(), Some(0), "round {round}: {}", describe(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("collected 0 run(s)"),
            "round {round}: {}",
            describe(&o)
        );
    }
    assert!(out.join("index.html").is_file());
}

#[test]
fn collect_from_a_bucket_that_does_not_exist_is_an_error() {
    let weed = harness::seaweed::SeaweedFs::start();
    let dir = tempfile::tempdir().expect("dir");
    let out = Command::new(harness::image_binary())
        .env("XDG_CACHE_HOME", test_cache())
        .args(["collect", "s3://no-such-bucket/results", "--out"])
        .arg(dir.path().join("out"))
        .args(["--endpoint", &weed.endpoint(), "--credentials-file"])
        .arg(weed.credentials_file())
        .output()
        .expect("collect");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("s3://no-such-bucket/results"), "{stderr}");
    assert!(!dir.path().join("out").exists(), "nothing written");
}

// ---- The finding, regressions, several stores: runs with figures chosen by the test ----

use pgappliance::plan::{Builtin, Checksums};
use pgappliance::synthetic::{fleet_run, run_objects, Figures, SyntheticPoint, SyntheticRun};

/// Writes a synthetic run into a file store as an uploader would (manifest last).
fn put_file_run(root: &Path, machine: &str, run: &SyntheticRun) -> PathBuf {
    let dir = root.join(&run.appliance).join(machine).join(&run.run_id);
    for (rel, bytes) in run_objects(run, machine).expect("synthetic run") {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write object");
    }
    dir
}

fn collect_with(cache: &Path, args: &[&str]) -> std::process::Output {
    Command::new(harness::image_binary())
        .arg("collect")
        .args(args)
        .arg("--cache")
        .arg(cache)
        .output()
        .expect("collect")
}

fn point(
    workload: &str,
    builtin: Builtin,
    checksums: Option<Checksums>,
    clients: u32,
    tps: f64,
    p99_ms: f64,
) -> SyntheticPoint {
    SyntheticPoint {
        workload: workload.into(),
        builtin,
        checksums,
        clients,
        repeat: 1,
        figures: Figures { tps, p99_ms },
    }
}

/// Scenario B's shape: read-write and read-only at 16 clients with data checksums off and
/// on; and scenario A's, a scaling sweep from 10 to 1000 clients.
fn study_run(
    appliance: &str,
    run_id: &str,
    price: f64,
    speed_rw: f64,
    speed_ro: f64,
) -> SyntheticRun {
    let mut points = Vec::new();
    for (cs, cost) in [(Checksums::Off, 0.0), (Checksums::On, 0.017)] {
        points.push(point(
            "rw",
            Builtin::TpcbLike,
            Some(cs),
            16,
            10_000.0 * speed_rw * (1.0 - cost),
            4.0 / speed_rw,
        ));
        points.push(point(
            "ro",
            Builtin::SelectOnly,
            Some(cs),
            16,
            100_000.0 * speed_ro * (1.0 - cost),
            0.4 / speed_ro,
        ));
    }
    for clients in [10u32, 25, 50, 100, 250, 500, 1000] {
        let tps = 44_132.0 * speed_rw * (f64::from(clients) / 1000.0).powf(0.3);
        points.push(point(
            "scaling",
            Builtin::TpcbLike,
            None,
            clients,
            tps,
            f64::from(clients) / 40.0,
        ));
    }
    SyntheticRun {
        appliance: appliance.into(),
        run_id: run_id.into(),
        started_at: format!("2026-11-{}T10:00:00Z", &run_id[run_id.len() - 2..]),
        hourly_price_usd: price,
        points: repeated(points),
    }
}

/// Each point as three repeats, its tps times 1, 1.004 and 0.996 (a CV of 0.4 %): enough
/// for an interval, narrow enough for a verdict on the study's differences.
fn repeated(points: Vec<SyntheticPoint>) -> Vec<SyntheticPoint> {
    let mut out = Vec::new();
    for (i, f) in [1.0, 1.004, 0.996].into_iter().enumerate() {
        for p in &points {
            let mut p = p.clone();
            p.repeat = i as u32 + 1;
            p.figures.tps *= f;
            out.push(p);
        }
    }
    out
}

fn assert_clean_page(page: &Path, png_name: &str) -> String {
    let png = artifacts().join(png_name);
    let shown = harness::chromium_render(page, &png);
    assert!(
        shown.console.is_empty(),
        "{}: console: {:?}",
        page.display(),
        shown.console
    );
    assert!(
        shown.fetches.is_empty(),
        "{}: fetches: {:?}",
        page.display(),
        shown.fetches
    );
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "{}: screenshot is {size} bytes",
        png.display()
    );
    eprintln!("screenshot kept: {}", png.display());
    shown.dom
}

#[test]
fn the_index_leads_with_the_finding_and_renders_cleanly_at_2_and_200_runs() {
    let store = tempfile::tempdir().expect("store");
    let cache = tempfile::tempdir().expect("cache");
    let url = format!("file://{}", store.path().display());
    let m5d = study_run("m5d.8xlarge", "20261101T100000Z-0001", 1.808, 1.0, 1.0);
    let m6gd = study_run("m6gd.8xlarge", "20261101T110000Z-0002", 1.4464, 1.19, 1.30);
    let first = put_file_run(store.path(), "i-0m5d", &m5d);
    put_file_run(store.path(), "i-0m6gd", &m6gd);
    harness::validate_results_schema(&first.join("results.json"))
        .expect("a synthetic results.json is schema-valid");

    let out_dir = tempfile::tempdir().expect("out");
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &url,
            "--out",
            out_dir.path().to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let html = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index");
    for want in [
        "rw: m6gd.8xlarge is faster than m5d.8xlarge: +19.0 % (+1",
        ") at 16 clients; at 20.0 % cheaper per hour it gives +48.",
        "ro: m6gd.8xlarge is faster than m5d.8xlarge: +30.0 % (+",
        "Data checksums on against off: m5d.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % (\u{2212}",
        "; m6gd.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % (",
        "scaling: m6gd.8xlarge is faster than m5d.8xlarge: +19.0 % (",
        ") by the geometric mean over 7 client counts (10, 25, 50, 100, 250, 500, 1000)",
        "baseline <b>m5d.8xlarge</b>",
        "class=\"error-bar\"",
    ] {
        assert!(html.contains(want), "index lacks {want:?}");
    }
    let findings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("findings.json")).expect("findings.json"),
    )
    .expect("findings.json is JSON");
    let rw = findings["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|e| e["workload"] == "rw" && e["against"] == "baseline" && e["checksums"] == "off")
        .expect("rw against the baseline");
    assert_eq!(rw["verdict"], "faster");
    assert_eq!(
        (rw["n"].as_u64(), rw["n_baseline"].as_u64()),
        (Some(3), Some(3))
    );
    let (lo, hi) = (
        rw["ci_low"].as_f64().expect("ci_low"),
        rw["ci_high"].as_f64().expect("ci_high"),
    );
    assert!(lo < 1.19 && 1.19 < hi && lo > 1.05, "{lo} … {hi}");
    // The finding comes before the charts; one tps chart per workload; a log client axis
    // only where counts span 10x; every legend entry whole.
    assert!(html.find("id=\"finding\"") < html.find("scaling: tps by clients"));
    assert_eq!(html.matches(": tps by clients</title>").count(), 3);
    assert_eq!(
        html.matches("clients (log scale)").count(),
        2,
        "scaling's tps and p99 charts"
    );
    assert!(html.contains("</span>m6gd.8xlarge</li>"));
    let csv = read_csv(&std::fs::read_to_string(out_dir.path().join("summary.csv")).expect("csv"));
    for col in ["p90_ms", "p99_9_ms", "max_ms"] {
        let i = csv[0].iter().position(|h| h == col).expect(col);
        assert!(
            csv[1..].iter().all(|r| r[i].parse::<f64>().is_ok()),
            "{col} filled"
        );
    }
    let dom = assert_clean_page(&out_dir.path().join("index.html"), "collect-2-runs.png");
    assert!(dom.contains("class=\"finding-table\""));
    let pages: Vec<PathBuf> = std::fs::read_dir(out_dir.path().join("runs"))
        .expect("runs/")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    let page = pages
        .iter()
        .find(|p| p.to_string_lossy().contains("m6gd"))
        .expect("m6gd page");
    let dom = assert_clean_page(page, "collect-run-page.png");
    assert!(dom.contains("tps per interval") && dom.contains("latency percentiles"));
    assert!(html.contains(&format!(
        "href=\"runs/{}\"",
        page.file_name().expect("name").to_string_lossy()
    )));

    // 200 runs of 8 machines: every run with --all-runs, the latest of each by default.
    let fleet = tempfile::tempdir().expect("fleet");
    for n in 0..200 {
        let mut run = fleet_run(n, 8);
        run.appliance = format!(
            "{}.a-long-machine-name-that-a-legend-must-show-whole",
            run.appliance
        );
        put_file_run(fleet.path(), "i-fleet", &run);
    }
    let fleet_url = format!("file://{}", fleet.path().display());
    let all = tempfile::tempdir().expect("out");
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &fleet_url,
            "--all-runs",
            "--out",
            all.path().to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("collected 200 run(s), skipped 0; showing 200 (every run)"),
        "{stdout}"
    );
    let dom = assert_clean_page(&all.path().join("index.html"), "collect-200-runs.png");
    assert!(dom.contains("class=\"finding-table\""));
    assert!(dom.contains("machine-007.a-long-machine-name-that-a-legend-must-show-whole (20260101T000199Z-00c7)</li>"));
    let latest = tempfile::tempdir().expect("out");
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &fleet_url,
            "--out",
            latest.path().to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .contains("showing 8 (the latest run of each machine); fetched 0, 200 from the cache"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(latest.path().join("index.html")).expect("index");
    assert!(html.contains("192 older run(s) not shown"));
}

#[test]
fn a_regression_check_marks_slower_verdicts_after_the_finding_and_can_fail() {
    let store = tempfile::tempdir().expect("store");
    let cache = tempfile::tempdir().expect("cache");
    let url = format!("file://{}", store.path().display());
    let base = study_run("db1", "20261101T100000Z-0001", 1.0, 1.0, 1.0);
    let mut newer = study_run("db1", "20261102T100000Z-0002", 1.0, 1.0, 1.0);
    for p in &mut newer.points {
        match (p.workload.as_str(), p.clients, p.checksums) {
            // tps 10 % down.
            ("scaling", 250, _) => p.figures.tps *= 0.90,
            // tps 4 % down: within 5 %.
            ("scaling", 500, _) => p.figures.tps *= 0.96,
            // p99 25 % up, tps level.
            ("ro", 16, Some(Checksums::Off)) => p.figures.p99_ms *= 1.25,
            _ => {}
        }
    }
    put_file_run(store.path(), "i-1", &base);
    put_file_run(store.path(), "i-1", &newer);
    let out_dir = tempfile::tempdir().expect("out");
    let out_arg = out_dir.path().to_str().expect("utf-8");
    let check = |extra: &[&str]| {
        let mut args = vec!["--store", url.as_str(), "--out", out_arg];
        args.extend_from_slice(extra);
        collect_with(cache.path(), &args)
    };
    let out = check(&["--baseline", "20261101T100000Z-0001", "--threshold", "5%"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let regressed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("regressed: "))
        .collect();
    assert_eq!(regressed.len(), 2, "{stdout}");
    // Each leads with what regressed, worst first.
    assert!(
        regressed[0].starts_with("regressed: tps \u{2212}10.0 % (\u{2212}")
            && regressed[0].contains(") slower: ")
            && regressed[0].contains("scaling at 250 clients (latency p99 "),
        "worst first: {stdout}"
    );
    assert!(
        regressed[1].starts_with("regressed: latency p99 +25.0 % (+25.0 … +25.0) higher: ")
            && regressed[1].contains("ro (checksums off) at 16 clients (tps +0.0 % (\u{2212}0.")
            && regressed[1].ends_with(") same)"),
        "{stdout}"
    );
    // The finding's sentences are on stdout too, not only in the page.
    assert!(
        stdout.lines().any(|l| l.starts_with("finding: scaling: ")),
        "{stdout}"
    );
    // Said from the verdicts, an unchanged figure or price in words, never as 0.0 %.
    let findings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("finding: "))
        .collect();
    assert!(
        findings.iter().all(|l| !l.contains("+0.0 %"))
            && findings.iter().any(|l| l.starts_with("finding: ro: ")
                && l.contains(" is the same as db1 (20261101T100000Z-0001) within ±5 %: as fast as db1 (20261101T100000Z-0001) (")
                && l.contains("; at the same price it gives the same tps per dollar-hour (")),
        "{stdout}"
    );
    assert!(
        !stdout.contains("scaling at 500 clients"),
        "4 % down is within 5 %: {stdout}"
    );
    assert!(
        stdout
            .contains("2 point(s) regressed by more than 5 % against db1 (20261101T100000Z-0001)"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index");
    let table = html
        .find("id=\"regression-table\"")
        .expect("regression table");
    assert!(
        html.find("id=\"finding\"").expect("finding") < table,
        "the finding stays first"
    );
    // The baseline run is shown beside the latest run although it is not its machine's latest.
    assert!(stdout.contains("showing 2"), "{stdout}");

    let out = check(&[
        "--baseline",
        "20261101T100000Z-0001",
        "--threshold",
        "5",
        "--fail-on-regression",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let out = check(&[
        "--baseline",
        "20261101T100000Z-0001",
        "--threshold",
        "30%",
        "--fail-on-regression",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 point(s) regressed by more than 30 %"));
    // The same drop measured once a side: listed as unconfirmed, never failing the check.
    let single = tempfile::tempdir().expect("store");
    let single_url = format!("file://{}", single.path().display());
    for run in [&base, &newer] {
        let mut once = run.clone();
        once.points.retain(|p| p.repeat == 1);
        put_file_run(single.path(), "i-1", &once);
    }
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &single_url,
            "--out",
            out_arg,
            "--baseline",
            "20261101T100000Z-0001",
            "--threshold",
            "5%",
            "--fail-on-regression",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("unconfirmed: tps \u{2212}10.0 % (one sample): db1 (20261102T100000Z-0002) scaling at 250 clients")
            && stdout.contains("0 point(s) regressed by more than 5 %")
            && stdout.contains("2 more moved past 5 % without a verdict that says so"),
        "{stdout}"
    );
    let out = check(&["--baseline", "no-such-run", "--threshold", "5%"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("baseline \"no-such-run\" is neither a machine nor a run id"));
    let out = check(&["--threshold", "five"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threshold \"five\""));
    // A results.json rewritten in the store after it was cached (same size, one figure
    // changed) is fetched again and found out, not taken from the cache.
    let results = store
        .path()
        .join("db1/i-1/20261102T100000Z-0002/results.json");
    let text = std::fs::read_to_string(&results).expect("results");
    let at = text.find("\"tps\": ").expect("a tps figure") + "\"tps\": ".len();
    let other = if text.as_bytes()[at] == b'9' {
        '1'
    } else {
        '9'
    };
    std::fs::write(
        &results,
        format!("{}{other}{}", &text[..at], &text[at + 1..]),
    )
    .expect("tamper");
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("db1/i-1/20261102T100000Z-0002: checksum mismatch"),
        "{stderr}"
    );
    let out = check(&["--fail-on-regression"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses it without --threshold: {}",
        describe(&out)
    );
}

/// Machines measured with seeded noise (CV 3 %, three repeats a point) at scenario A's
/// client counts: `speed` times the same true tps.
fn noisy_run(
    rng: &mut pgappliance::compare::stats::SplitMix64,
    appliance: &str,
    run_id: &str,
    speed: f64,
) -> SyntheticRun {
    let mut points = Vec::new();
    for clients in [10u32, 25, 50, 100, 250, 500, 1000] {
        let truth = 44_132.0 * speed * (f64::from(clients) / 1000.0).powf(0.3);
        for (i, tps) in rng.repeats(truth, 0.03, 3).into_iter().enumerate() {
            let mut p = point(
                "scaling",
                Builtin::TpcbLike,
                None,
                clients,
                tps,
                f64::from(clients) / 40.0,
            );
            p.repeat = i as u32 + 1;
            points.push(p);
        }
    }
    SyntheticRun {
        appliance: appliance.into(),
        run_id: run_id.into(),
        started_at: format!("2026-11-{}T10:00:00Z", &run_id[run_id.len() - 2..]),
        hourly_price_usd: 1.0,
        points,
    }
}

/// Two identical machines (the same true tps, each repeat with its own noise) are never
/// called faster or slower, at any client count or on the whole, over many seeds; a
/// machine 40 % faster is `faster` at every client count. Read from findings.json.
#[test]
fn identical_machines_are_never_faster_or_slower_and_a_large_difference_always_is() {
    let out_dir = tempfile::tempdir().expect("out");
    let cache = tempfile::tempdir().expect("cache");
    for seed in 0..8u64 {
        let mut rng = pgappliance::compare::stats::SplitMix64::new(seed);
        let store = tempfile::tempdir().expect("store");
        let url = format!("file://{}", store.path().display());
        put_file_run(
            store.path(),
            "i-a",
            &noisy_run(&mut rng, "twin-a", "20261101T100000Z-0001", 1.0),
        );
        put_file_run(
            store.path(),
            "i-b",
            &noisy_run(&mut rng, "twin-b", "20261101T100000Z-0002", 1.0),
        );
        put_file_run(
            store.path(),
            "i-f",
            &noisy_run(&mut rng, "fast", "20261101T100000Z-0003", 1.4),
        );
        let out = collect_with(
            cache.path(),
            &[
                "--store",
                &url,
                "--out",
                out_dir.path().to_str().expect("utf-8"),
                "--baseline",
                "twin-a",
                "--threshold",
                "5%",
                "--fail-on-regression",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "seed {seed}: {}",
            describe(&out)
        );
        let findings: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out_dir.path().join("findings.json")).expect("findings"),
        )
        .expect("json");
        let entries = findings["findings"].as_array().expect("findings");
        let of = |machine: &str, scope: &str| -> Vec<&serde_json::Value> {
            entries
                .iter()
                .filter(|e| e["machine"] == machine && e["scope"] == scope)
                .collect()
        };
        let twins = of("twin-b", "point");
        assert_eq!(twins.len(), 7, "seed {seed}");
        for e in twins.iter().chain(&of("twin-b", "geometric_mean")) {
            assert!(
                e["verdict"] != "faster" && e["verdict"] != "slower",
                "seed {seed}: {e}"
            );
            assert_eq!(e["n"].as_u64().unwrap_or(3), 3);
        }
        let fast = of("fast", "point");
        assert_eq!(fast.len(), 7, "seed {seed}");
        for e in &fast {
            assert_eq!(e["verdict"], "faster", "seed {seed}: {e}");
        }
        assert_eq!(of("fast", "geometric_mean")[0]["verdict"], "faster");
        let html = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index");
        assert!(
            html.contains("fast is faster than twin-a: +"),
            "seed {seed}"
        );
    }
}

#[test]
fn collect_reads_a_lab_store_and_a_bucket_at_once_and_fetches_only_new_runs() {
    use object_store::ObjectStoreExt;
    let weed = harness::seaweed::SeaweedFs::start();
    let lab = tempfile::tempdir().expect("lab");
    let cache = tempfile::tempdir().expect("cache");
    let lab_url = format!("file://{}", lab.path().display());
    let bucket_url = format!("s3://{}/campaign", harness::seaweed::BUCKET);
    put_file_run(
        lab.path(),
        "bmc-1",
        &study_run("altra-q80", "20261101T100000Z-0001", 0.0, 1.0, 1.0),
    );
    put_file_run(
        lab.path(),
        "bmc-1",
        &study_run("altra-q80", "20261102T100000Z-0002", 0.0, 1.1, 1.1),
    );
    let creds = weed.credentials_file();
    let bucket = pgappliance::upload::Store::open(&pgappliance::upload::StoreConfig {
        url: bucket_url.clone(),
        endpoint: Some(weed.endpoint()),
        region: "us-east-1".into(),
        credentials: pgappliance::plan::Credentials::File,
        credentials_file: Some(creds.display().to_string()),
        credentials_profile: "default".into(),
        caller: None,
    })
    .expect("open the bucket");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let upload = |run: &SyntheticRun| {
        runtime.block_on(async {
            for (rel, bytes) in run_objects(run, "i-0abc").expect("objects") {
                let path = bucket.path(&[&run.appliance, "i-0abc", &run.run_id, &rel]);
                bucket.objects.put(&path, bytes.into()).await.expect("put");
            }
        })
    };
    upload(&study_run(
        "m6gd.8xlarge",
        "20261101T120000Z-0003",
        1.4464,
        1.19,
        1.3,
    ));
    let out_dir = tempfile::tempdir().expect("out");
    let creds_arg = creds.to_str().expect("utf-8");
    let endpoint = weed.endpoint();
    let collect = |extra: &[&str]| {
        let mut args = vec![
            "--store",
            lab_url.as_str(),
            "--store",
            bucket_url.as_str(),
            "--endpoint",
            "-",
            "--endpoint",
            endpoint.as_str(),
            "--credentials-file",
            "-",
            "--credentials-file",
            creds_arg,
            "--out",
            out_dir.path().to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        collect_with(cache.path(), &args)
    };
    let out = collect(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("collected 3 run(s), skipped 0; showing 2 (the latest run of each machine); fetched 3, 0 from the cache"),
        "{stdout}"
    );
    // The files it names are where --out put them, not the staging directory they were
    // written in.
    assert!(
        stdout.contains(&format!(
            "wrote {}, ",
            out_dir.path().join("index.html").display()
        )),
        "{stdout}"
    );
    let csv = read_csv(&std::fs::read_to_string(out_dir.path().join("summary.csv")).expect("csv"));
    let col = |name: &str| csv[0].iter().position(|h| h == name).expect(name);
    let runs: BTreeSet<&str> = csv[1..].iter().map(|r| r[col("run_id")].as_str()).collect();
    assert_eq!(
        runs,
        ["20261102T100000Z-0002", "20261101T120000Z-0003"]
            .into_iter()
            .collect::<BTreeSet<_>>()
    );
    let keys: BTreeSet<&str> = csv[1..]
        .iter()
        .map(|r| r[col("run_key")].as_str())
        .collect();
    assert!(
        keys.contains(format!("{bucket_url}/m6gd.8xlarge/i-0abc/20261101T120000Z-0003").as_str()),
        "{keys:?}"
    );
    let row = csv[1..]
        .iter()
        .find(|r| r[col("workload")] == "scaling" && r[col("clients")] == "1000")
        .expect("row");
    assert_eq!(row[col("p99_ms")], "25.000");
    assert_eq!(row[col("p99_9_ms")], "37.500");
    assert_eq!(row[col("max_ms")], "75.000");
    assert_eq!(row[col("p90_ms")], "16.667");

    let out = collect(&["--all-runs"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("showing 3 (every run); fetched 0, 3 from the cache"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index");
    assert!(
        html.contains("altra-q80 (20261101T100000Z-0001)")
            && html.contains("altra-q80 (20261102T100000Z-0002)")
    );
    upload(&study_run(
        "m6gd.8xlarge",
        "20261103T120000Z-0004",
        1.4464,
        1.2,
        1.3,
    ));
    let out = collect(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("collected 4 run(s), skipped 0; showing 2 (the latest run of each machine); fetched 1, 3 from the cache"), "{stdout}");
    // Store options must come once or once per store.
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &lab_url,
            "--store",
            &bucket_url,
            "--store",
            "file:///nowhere",
            "--endpoint",
            "-",
            "--endpoint",
            &endpoint,
            "--out",
            "/nonexistent-out",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--endpoint is given 2 times for 3 stores")
    );
}

#[test]
fn collect_replaces_only_a_directory_of_its_own() {
    let store = tempfile::tempdir().expect("store");
    let cache = tempfile::tempdir().expect("cache");
    let url = format!("file://{}", store.path().display());
    put_file_run(
        store.path(),
        "i-1",
        &study_run("db1", "20261101T100000Z-0001", 1.0, 1.0, 1.0),
    );
    let dir = tempfile::tempdir().expect("dir");
    let collect_into = |out: &Path| {
        collect_with(
            cache.path(),
            &["--store", &url, "--out", out.to_str().expect("utf-8")],
        )
    };
    // Someone's directory, directly or through a link: refused, nothing touched.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).expect("mkdir");
    std::fs::write(theirs.join("index.html"), "their page").expect("write");
    std::fs::write(theirs.join("summary.csv"), "their figures").expect("write");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&theirs, &link).expect("symlink");
    for out_dir in [&theirs, &link] {
        let out = collect_into(out_dir);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("2 entries that pgappliance did not write: index.html, summary.csv"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("index.html")).expect("read"),
            "their page"
        );
        assert_eq!(
            std::fs::read_to_string(theirs.join("summary.csv")).expect("read"),
            "their figures"
        );
        assert!(!theirs.join("runs").exists());
    }
    // Its own: written, then replaced by the next collect.
    let mine = dir.path().join("cmp");
    for _ in 0..2 {
        let out = collect_into(&mine);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(mine.join("index.html").is_file() && mine.join(".pgappliance-build").is_file());
    }
    // A file added to it makes it someone's again.
    std::fs::write(mine.join("runs/notes.txt"), "mine").expect("write");
    let out = collect_into(&mine);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("runs/notes.txt (not written by collect's pages)"),
        "{}",
        describe(&out)
    );
}

/// Writes these results into a file store under `appliance/machine/dir` (manifest last).
fn put_results(root: &Path, machine: &str, dir: &str, r: &pgappliance::results::RunResults) {
    let base = root.join(&r.appliance).join(machine).join(dir);
    for (rel, bytes) in pgappliance::synthetic::results_objects(r, machine) {
        let path = base.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write object");
    }
}

#[test]
fn collect_skips_runs_whose_figures_or_identity_are_wrong_and_neutralises_formulas() {
    use pgappliance::synthetic::run_results;
    let store = tempfile::tempdir().expect("store");
    let cache = tempfile::tempdir().expect("cache");
    let out_dir = tempfile::tempdir().expect("out");
    let results = |appliance: &str, run_id: &str, day: &str| {
        let mut run = study_run("good", run_id, 1.0, 1.0, 1.0);
        run.started_at = format!("2026-11-{day}T10:00:00Z");
        // Names a plan would refuse can still be in a store.
        let mut r = run_results(&run).expect("synthetic");
        r.appliance = appliance.into();
        r
    };
    let machine = "mach";
    let good = results("good", "r-01", "01");
    put_results(store.path(), machine, "r-01", &good);
    // (appliance, how the results are damaged, words of the reason)
    type Damage = fn(&mut pgappliance::results::RunResults);
    let cases: [(&str, Damage, &str); 8] = [
        (
            "tps-huge",
            |r| r.points[0].summary.as_mut().expect("summary").tps = 1e308,
            "has tps 1e308",
        ),
        (
            "tps-negative",
            |r| r.points[0].summary.as_mut().expect("summary").tps = -5.0,
            "has tps -5",
        ),
        (
            "latency-negative",
            |r| r.points[1].latency.as_mut().expect("latency").p99_ms = Some(-1.0),
            "latency p99 -1",
        ),
        (
            "price-negative",
            |r| r.hourly_price_usd = -1.0,
            "hourly price -1",
        ),
        (
            "points-twice",
            |r| {
                let mut copy = r.points[0].clone();
                copy.id = format!("{}-again", copy.id);
                r.points.push(copy);
            },
            "one measurement would count as two repeats",
        ),
        (
            "point-id-twice",
            |r| {
                let mut copy = r.points[0].clone();
                copy.repeat = 2;
                r.points.push(copy);
            },
            "lists point",
        ),
        (
            "not-a-date",
            |r| r.started_at = "zzz-latest".into(),
            "started_at \"zzz-latest\" is not an RFC 3339 time",
        ),
        (
            "finished-not-a-date",
            |r| r.finished_at = Some("yesterday".into()),
            "finished_at \"yesterday\"",
        ),
    ];
    for (appliance, damage, _) in &cases {
        let mut r = results(appliance, "r-09", "09");
        damage(&mut r);
        put_results(store.path(), machine, "r-09", &r);
    }
    // A copy of the good run under another run id, claiming the good run's identity and
    // sorting first: it must not take the good run's place.
    put_results(store.path(), machine, "r-00-copy", &good);
    // A copy whose manifest claims the good run's key but is stored under another machine.
    let mut other = results("good", "r-05", "05");
    other.points.truncate(3);
    put_results(store.path(), machine, "r-05", &other);
    let moved = store.path().join("good/aa-machine/r-05");
    std::fs::create_dir_all(moved.parent().expect("parent")).expect("mkdir");
    std::fs::rename(store.path().join("good").join(machine).join("r-05"), &moved).expect("move");
    // A machine whose name a spreadsheet would execute.
    let formula = "=1+2";
    put_results(
        store.path(),
        machine,
        "r-03",
        &results(formula, "r-03", "03"),
    );

    let url = format!("file://{}", store.path().display());
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &url,
            "--out",
            out_dir.path().to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let skipped = |key: &str, words: &str| {
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&format!("skipped {key}: ")))
            .unwrap_or_else(|| panic!("{key} skipped: {stderr}"));
        assert!(line.contains(words), "{key}: {line}");
    };
    for (appliance, _, words) in &cases {
        skipped(&format!("{appliance}/{machine}/r-09"), words);
    }
    skipped(
        &format!("good/{machine}/r-00-copy"),
        "manifest.json's run id is \"r-01\", but the run is stored under \"r-00-copy\"",
    );
    skipped(
        "good/aa-machine/r-05",
        "manifest.json's machine id is \"mach\", but the run is stored under \"aa-machine\"",
    );
    assert!(
        stdout.contains(&format!("collected 2 run(s), skipped {}", cases.len() + 2)),
        "{stdout}{stderr}"
    );
    let index = std::fs::read_to_string(out_dir.path().join("index.html")).expect("index");
    assert!(
        index.contains("r-00-copy") && index.contains("not an RFC 3339 time"),
        "skipped runs are shown"
    );
    let csv = std::fs::read_to_string(out_dir.path().join("summary.csv")).expect("csv");
    let records = read_csv(&csv);
    let machines: BTreeSet<&str> = records[1..].iter().map(|r| r[0].as_str()).collect();
    let neutralised = format!("'{formula}");
    assert_eq!(
        machines,
        ["good", neutralised.as_str()].into_iter().collect(),
        "{csv:?}"
    );
}

/// Real local runs, at least three repeats a point in rounds (adaptive, up to eight while a
/// point's interval is wider than ±4 %: a 1-client point on a busy 2-core machine varies by
/// tens of percent), each round after a warm-up, two runs at a time so that both runs of a
/// pair go through the same phases at the same moments and share the host's noise: two
/// identical "machines" are never `faster` or `slower` than each other, and
/// `synchronous_commit = off` against `on` (a pair of its own) on the tpcb workload is
/// never slower, ahead at every client count and `faster` at one at least (its commits
/// wait for no WAL flush). Short points at
/// scale 1.
#[test]
fn real_runs_twins_are_never_judged_different_and_synchronous_commit_off_is_faster() {
    let plans = tempfile::tempdir().expect("plans");
    let plan = |name: &str, synchronous_commit: &str| {
        let text = std::fs::read_to_string(example("quick.toml")).expect("quick.toml");
        let start = text.find("[[workloads]]").expect("workloads");
        let end = text.find("[upload]").expect("upload");
        let text = format!(
            "{}[[workloads]]\nname = \"tpcb\"\nbuiltin = \"tpcb-like\"\nclients = [1, 4]\nthreads = \"auto\"\nduration = \"4s\"\nwarmup = \"2s\"\nrepeats = {{ min = 3, max = 8, ci_pct = 4.0 }}\n\n{}",
            &text[..start],
            &text[end..]
        )
        .replace("name = \"quick\"", &format!("name = \"{name}\""))
        .replace("scale = 2", "scale = 1")
        .replace(
            "huge_pages = \"off\"",
            &format!("huge_pages = \"off\"\nsynchronous_commit = \"{synchronous_commit}\""),
        );
        let p = plans.path().join(format!("{name}.toml"));
        std::fs::write(&p, text).expect("plan");
        p
    };
    // Runs a pair at once into a store of its own, collects it against `baseline`, and
    // returns the other run's point entries of findings.json.
    let pair = |runs: [(&str, &str); 2]| -> Vec<serde_json::Value> {
        let store_dir = tempfile::tempdir().expect("store");
        let store = format!("file://{}", store_dir.path().display());
        let workdirs: Vec<Workdir> = runs.iter().map(|(name, _)| Workdir::new(name)).collect();
        let children: Vec<std::process::Child> = runs
            .iter()
            .zip(&workdirs)
            .map(|((name, sc), w)| {
                w.run_command_to(&plan(name, sc), &store)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("run")
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().expect("wait");
            assert!(out.status.success(), "{}", describe(&out));
        }
        let out_dir = tempfile::tempdir().expect("out");
        let cache = tempfile::tempdir().expect("cache");
        let out = collect_with(
            cache.path(),
            &[
                &store,
                "--out",
                out_dir.path().to_str().expect("utf-8"),
                "--baseline",
                runs[0].0,
                "--threshold",
                "5%",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let findings: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out_dir.path().join("findings.json")).expect("findings"),
        )
        .expect("json");
        let entries: Vec<serde_json::Value> = findings["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|e| e["machine"] == runs[1].0 && e["scope"] == "point")
            .cloned()
            .collect();
        assert_eq!(entries.len(), 2, "{findings}");
        for e in &entries {
            assert!(
                e["n"].as_u64() >= Some(3) && e["n_baseline"].as_u64() >= Some(3),
                "{e}"
            );
        }
        entries
    };
    for e in pair([("twin-a", "on"), ("twin-b", "on")]) {
        assert!(
            e["verdict"] != "faster" && e["verdict"] != "slower",
            "twins judged different: {e}"
        );
    }
    // synchronous_commit = off is never judged slower, its ratio is above 1 at every client
    // count, and the verdict is `faster` at one count at least. Asking `faster` at both
    // failed under stress (2026-12-02, stress-ng on one core and five builds beside it): at
    // 1 client the eight repeats gave an interval of 0.88–1.82, rightly inconclusive.
    let entries = pair([("commit-on", "on"), ("commit-off", "off")]);
    for e in &entries {
        assert!(e["verdict"] != "slower", "{e}");
        assert!(e["ratio"].as_f64().expect("ratio") > 1.0, "{e}");
    }
    assert!(
        entries.iter().any(|e| e["verdict"] == "faster"),
        "off was faster at no client count: {entries:?}"
    );
}

/// `collect --history` over twelve runs of one machine and plan whose tps fell 20 % from
/// the seventh on: every client count's series has its change at the seventh run, with its
/// size; the shown comparison is unchanged (the latest run).
#[test]
fn collect_history_finds_the_run_where_the_machine_changed() {
    let store = tempfile::tempdir().expect("store");
    let url = format!("file://{}", store.path().display());
    let mut rng = pgappliance::compare::stats::SplitMix64::new(12);
    for n in 1..=12u32 {
        let speed = if n <= 6 { 1.0 } else { 0.8 };
        put_file_run(
            store.path(),
            "i-h",
            &noisy_run(
                &mut rng,
                "hist",
                &format!("20261101T100000Z-00{n:02}"),
                speed,
            ),
        );
    }
    let out_dir = tempfile::tempdir().expect("out");
    let cache = tempfile::tempdir().expect("cache");
    let out = collect_with(
        cache.path(),
        &[
            "--store",
            &url,
            "--out",
            out_dir.path().to_str().expect("utf-8"),
            "--history",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for clients in [10u32, 25, 50, 100, 250, 500, 1000] {
        let line = stdout
            .lines()
            .find(|l| {
                l.starts_with("change: hist plan ")
                    && l.contains(&format!(" scaling at {clients} clients: tps \u{2212}"))
                    && l.contains("from run 20261101T100000Z-0007 on")
            })
            .unwrap_or_else(|| panic!("no change at run 7 for {clients} clients: {stdout}"));
        // −20 % at CV 3 % with six runs a side: the shift is measured within a few percent.
        let shift: f64 = line
            .split("tps \u{2212}")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .expect("shift");
        assert!((shift - 20.0).abs() < 4.0, "{line}");
        assert!(
            line.contains("6 run(s) before since 20261101T100000Z-0001"),
            "{line}"
        );
    }
    assert!(
        stdout.contains("history: 7 series over 1 machine and plan group(s)"),
        "{stdout}"
    );
}
