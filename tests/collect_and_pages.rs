//! `pgappliance collect` over a store holding two machines' runs and three runs it must
//! skip (no manifest, checksum mismatch, newer schema), and the per-run report and the
//! comparison page rendered in headless Chromium (screenshots kept in target/artifacts/).

#[path = "harness/mod.rs"]
mod harness;

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
        let (dom, console) = harness::chromium_render(page, &png);
        assert!(
            console.is_empty(),
            "{}: console messages: {console:?}",
            page.display()
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
fn the_console_check_catches_a_broken_page() {
    let dir = tempfile::tempdir().expect("dir");
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>console.error('boom'); missing();</script></body></html>",
    )
    .expect("write");
    let (_, console) = harness::chromium_render(&page, &dir.path().join("broken.png"));
    assert!(
        console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError")),
        "{console:?}"
    );
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
    // The same run copied under another machine id.
    copy_dir(
        &uploaded,
        &store_dir
            .path()
            .join("good")
            .join("zz-copy-machine")
            .join(&run_id),
    );
    // A run with names a CSV must quote.
    let awkward = "a, \"quoted\"\nname";
    renamed(&variant("awkward"), awkward);

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
