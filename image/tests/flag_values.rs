//! The duration flags of `launch`, `wait`, `build` and `credentials` as an operator mistypes
//! them: a zero, a typo of a unit, a value past what the flag can mean. Each is a usage error
//! (exit 2) naming the flag and the value, before anything is built, read or started. And a
//! launch whose flags cannot work together is refused naming the flag that is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml")
}

/// `launch PLAN --ec2` with every flag it needs (an image and an instance type).
fn ec2_launch(plan: &str) -> Vec<&str> {
    vec![
        "launch",
        plan,
        "--out",
        "out",
        "--daemon-binary",
        "pgapplianced",
        "--ec2",
        "--image-id",
        "ami-1",
        "--instance-type",
        "t3.micro",
    ]
}

/// Runs pgappliance in `dir`; its exit status and stderr.
fn pgappliance(dir: &Path, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .args(args)
        .current_dir(dir)
        .env_remove("AWS_ACCESS_KEY_ID")
        .output()
        .expect("run pgappliance");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `flag value` must be refused as a usage error whose message names both and says `why`,
/// leaving `dir` as it was.
fn refused(dir: &Path, args: &[&str], flag: &str, value: &str, why: &str) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend([flag, value]);
    let before = std::fs::read_dir(dir).expect("dir").count();
    let (code, stderr) = pgappliance(dir, &all);
    assert_eq!(code, 2, "{flag} {value}: a usage error: {stderr}");
    assert!(
        stderr.contains(&format!("'{value}' for '{flag}")) && stderr.contains(why),
        "{flag} {value}: names the flag, the value and `{why}`: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir).expect("dir").count(),
        before,
        "{flag} {value}: nothing written"
    );
}

#[test]
fn launch_duration_flags_refuse_zero_and_values_past_their_meaning() {
    let dir = tempfile::tempdir().expect("tmp");
    let plan = plan().display().to_string();
    let ipmi = [
        "launch",
        plan.as_str(),
        "--out",
        "out",
        "--daemon-binary",
        "pgapplianced",
        "--ipmi",
        "127.0.0.1:1",
    ];
    for flag in ["--power-wait", "--bmc-timeout", "--url-lifetime"] {
        refused(dir.path(), &ipmi, flag, "0", "above zero");
        refused(dir.path(), &ipmi, flag, "0s", "above zero");
        refused(dir.path(), &ipmi, flag, "5 parsecs", "unknown time unit");
    }
    // A deadline that far would overflow the clock (a panic after the build).
    refused(
        dir.path(),
        &ipmi,
        "--power-wait",
        "1000000000y",
        "longer than a year",
    );
    // S3 refuses a presigned URL valid longer than 7 days when the server boots with it.
    refused(dir.path(), &ipmi, "--url-lifetime", "8d", "7 days");
    let ec2 = ec2_launch(&plan);
    refused(dir.path(), &ec2, "--ec2-wait", "0", "above zero");
    refused(dir.path(), &ec2, "--ec2-wait", "400d", "longer than a year");
}

#[test]
fn wait_duration_flags_refuse_zero_and_values_past_their_meaning() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("record.json"), "not read").expect("record");
    let wait = ["wait", "record.json"];
    for flag in ["--timeout", "--interval", "--heartbeat", "--bmc-timeout"] {
        refused(dir.path(), &wait, flag, "0", "above zero");
        refused(dir.path(), &wait, flag, "1000000000y", "longer than a year");
    }
    refused(
        dir.path(),
        &wait,
        "--heartbeat",
        "5 parsecs",
        "unknown time unit",
    );
}

#[test]
fn credentials_ttl_refuses_zero() {
    let dir = tempfile::tempdir().expect("tmp");
    let plan = plan().display().to_string();
    refused(
        dir.path(),
        &["credentials", plan.as_str(), "--out", "keys"],
        "--credentials-ttl",
        "0",
        "above zero",
    );
}

#[test]
fn an_ec2_launch_to_a_store_that_cannot_presign_names_payload_url_before_building() {
    let dir = tempfile::tempdir().expect("tmp");
    let plan = plan().display().to_string();
    let store = format!("file://{}", dir.path().join("store").display());
    let mut args = ec2_launch(&plan);
    args.extend(["--store", store.as_str()]);
    let (code, stderr) = pgappliance(dir.path(), &args);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("the store {store} cannot presign the payload"))
            && stderr.contains("give --payload-url"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists(), "nothing built");
}

#[test]
fn a_mistyped_store_flag_is_a_usage_error_naming_it_not_the_plan() {
    // `build --store bogus://x` was blamed on the plan's line (`PLAN:53:9: upload.store`).
    let dir = tempfile::tempdir().expect("tmp");
    let plan = plan().display().to_string();
    let build = [
        "build",
        plan.as_str(),
        "--out",
        "out",
        "--daemon-binary",
        "pgapplianced",
    ];
    refused(
        dir.path(),
        &build,
        "--store",
        "bogus://x",
        "is not a store URL",
    );
    let build_s3 = [&build[..], &["--store", "s3://bucket/p"][..]].concat();
    refused(
        dir.path(),
        &build_s3,
        "--endpoint",
        "ftp://x",
        "http:// or https://",
    );
    let launch = [
        "launch",
        plan.as_str(),
        "--out",
        "out",
        "--daemon-binary",
        "pgapplianced",
        "--ipmi",
        "127.0.0.1:1",
    ];
    refused(
        dir.path(),
        &launch,
        "--store",
        "bogus://x",
        "is not a store URL",
    );
    refused(
        dir.path(),
        &launch,
        "--endpoint",
        "ftp://x",
        "http:// or https://",
    );
    refused(
        dir.path(),
        &["wait", "abc"],
        "--store",
        "bogus://x",
        "is not a store URL",
    );
    refused(
        dir.path(),
        &["wait", "abc"],
        "--endpoint",
        "ftp://x",
        "http:// or https://",
    );
    refused(
        dir.path(),
        &["collect", "--out", "c"],
        "--store",
        "file://relative",
        "absolute path",
    );
}

/// A launch record as `launch` writes it (one IPMI target), with `change` made to it.
fn record_with(change: impl FnOnce(&mut serde_json::Value)) -> String {
    let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut r = serde_json::json!({
        "schema": 1,
        "launch_id": "L1",
        "plan": {"name": "quick", "file": "quick.toml", "sha256": "0"},
        "created_at": at,
        "iso_url": null,
        "iso_object": null,
        "payload_object": null,
        "targets": [{
            "address": "127.0.0.1:1",
            "method": "ipmi",
            "at": at,
            "started": {"kind": "ipmi", "host": "127.0.0.1", "port": 1, "power": "on", "not_kept": []},
            "error": null,
        }],
    });
    change(&mut r);
    r.to_string()
}

#[test]
fn wait_refuses_a_record_that_launch_never_writes_naming_the_file_and_why() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("a-dir")).expect("dir");
    for (name, text, why) in [
        // 0 targets "arrived" at once: exit 0 for a launch that started nothing.
        (
            "empty.json",
            Some(record_with(|r| r["targets"] = serde_json::json!([]))),
            "empty.json is not a launch record: it names no targets",
        ),
        (
            "climbs.json",
            Some(record_with(|r| r["plan"]["name"] = "../etc".into())),
            "climbs.json is not a launch record: its plan name \"../etc\" is not a plain name",
        ),
        (
            "missing/record.json",
            None,
            "the launch record missing/record.json does not exist",
        ),
        (
            "a-dir",
            None,
            "the launch record a-dir is not a regular file",
        ),
    ] {
        if let Some(text) = text {
            std::fs::write(dir.path().join(name), text).expect("record");
        }
        let (code, stderr) = pgappliance(dir.path(), &["wait", name, "--timeout", "1s"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stderr.contains(why), "{name}: {stderr}");
    }
}
