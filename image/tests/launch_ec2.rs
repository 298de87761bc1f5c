//! `pgappliance launch --ec2` against moto_server (moto 5.2.5) with request authentication
//! on: the payload is uploaded to the store and presigned, RunInstances carries the
//! build's user-data, the tags and terminate on shutdown, and the launch waits until the
//! instance runs; the user-data's presigned PUT takes an install failure report, which
//! `wait` names; a wrong secret is refused.
//!
//! The store is SeaweedFS holding the same key pair as moto's IAM user (one account, as on
//! AWS): moto 5.2.5's S3 answers 500 to every presigned GET while authentication is on
//! (`KeyError: 'HTTP_AUTHORIZATION'` in its log, also for URLs boto3 presigns), so it
//! cannot show that the presigned payload URL downloads.

use std::path::Path;
use std::process::{Command, Output};

use pgappliance_test_support::launch::*;

fn launch(dir: &Path, plan: &Path, moto: &Moto, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let ami = moto.ami();
    let mut c = launch_command(dir, plan);
    c.args([
        "--ec2",
        "--image-id",
        ami.trim(),
        "--instance-type",
        "m6g.large",
    ])
    .args([
        "--ec2-endpoint",
        &moto.endpoint(),
        "--ec2-region",
        "us-east-1",
    ])
    .args(["--ec2-wait", "60s"])
    .args(extra)
    .env("SOURCE_DATE_EPOCH", "1700000000")
    .env_remove("AWS_ACCESS_KEY_ID")
    .env_remove("AWS_SECRET_ACCESS_KEY")
    .env_remove("AWS_ENDPOINT_URL")
    .env_remove("AWS_ENDPOINT_URL_EC2")
    .env_remove("AWS_REGION")
    .env_remove("AWS_PROFILE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run pgappliance launch")
}

#[test]
fn instances_run_with_the_user_data_tags_and_terminate_on_shutdown() {
    let moto = Moto::start();
    let weed = seaweed::SeaweedFs::start_on(
        seaweed::Ports::pick(),
        Some((moto.access_key.clone(), moto.secret_key.clone())),
    );
    let dir = tempfile::tempdir().expect("tmp");
    let creds = weed.credentials_file();
    let o = launch(
        dir.path(),
        &altra_plan(dir.path()),
        &moto,
        &[
            "--store",
            &format!("s3://{}/lab", seaweed::BUCKET),
            "--endpoint",
            &weed.endpoint(),
            "--region",
            "us-east-1",
            "--credentials-file",
            &creds.display().to_string(),
            // The same key pair for EC2, given separately: EC2 is never signed with the
            // store's keys.
            "--ec2-credentials-file",
            &creds.display().to_string(),
        ],
        &[],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(!text.contains(&moto.secret_key), "{text}");
    let id = launch_id(&o);

    let store = weed.store("lab");
    let rec = stored_record(&store, &id);
    let started = &rec["targets"][0]["started"];
    assert_eq!(rec["targets"][0]["method"], "ec2", "{rec}");
    assert_eq!(started["state"], "running", "{rec}");
    assert_eq!(
        rec["payload_object"],
        format!("lab/launches/{id}/payload.tar.gz")
    );
    let instance = started["instances"][0]
        .as_str()
        .expect("instance")
        .to_string();

    let described: serde_json::Value = serde_json::from_str(&moto.aws(&[
        "ec2",
        "describe-instances",
        "--instance-ids",
        &instance,
    ]))
    .expect("json");
    let inst = &described["Reservations"][0]["Instances"][0];
    assert_eq!(inst["State"]["Name"], "running", "{inst}");
    let tags: Vec<(String, String)> = inst["Tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|t| {
            (
                t["Key"].as_str().unwrap_or("").to_string(),
                t["Value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        tags.contains(&("pgappliance:plan".into(), "altra-q80".into())),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("pgappliance:launch".into(), id.clone())),
        "{tags:?}"
    );
    let attr = |a: &str| -> serde_json::Value {
        serde_json::from_str(&moto.aws(&[
            "ec2",
            "describe-instance-attribute",
            "--instance-id",
            &instance,
            "--attribute",
            a,
        ]))
        .expect("json")
    };
    assert_eq!(
        attr("instanceInitiatedShutdownBehavior")["InstanceInitiatedShutdownBehavior"]["Value"],
        "terminate"
    );
    let user_data_b64 = attr("userData")["UserData"]["Value"]
        .as_str()
        .expect("user data")
        .to_string();
    let decoded = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(user_data_b64.as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64");
    let built = read_to_string(&dir.path().join("out/user-data.yaml"));
    assert_eq!(String::from_utf8_lossy(&decoded.stdout), built);

    // The presigned payload URL in the user-data downloads the exact payload, unsigned.
    let presigned = |name: &str| {
        built
            .split_whitespace()
            .map(|w| w.trim_matches(|c| matches!(c, '"' | '\'' | ';')))
            .find(|w| {
                w.starts_with(&weed.endpoint())
                    && w.contains(&format!("/{name}?"))
                    && w.contains("X-Amz-Signature=")
            })
            .unwrap_or_else(|| panic!("no presigned URL of {name} in the user-data:\n{built}"))
            .to_string()
    };
    let url = presigned("payload.tar.gz");
    let fetched = dir.path().join("fetched.tar.gz");
    let c = Command::new("curl")
        .args(["-sS", "--fail", "-o"])
        .arg(&fetched)
        .arg(&url)
        .output()
        .expect("curl");
    assert!(c.status.success(), "{}", describe(&c));
    assert_eq!(
        std::fs::read(&fetched).expect("fetched"),
        std::fs::read(dir.path().join("out/payload.tar.gz")).expect("built")
    );

    // An instance whose install fails PUTs its report through the other presigned URL, to
    // the record's failure object beside the appliance's failure bundles; `wait` then ends
    // at once, naming it, instead of waiting for a status object that never comes.
    let failure_object = format!("lab/altra-q80/failed/{id}/install-failed.txt");
    assert_eq!(rec["failure_object"], failure_object, "{rec}");
    // It outlives the payload URL (24 h by default): an expired payload URL is reported.
    assert!(url.contains("X-Amz-Expires=86400"), "{url}");
    assert!(
        presigned("install-failed.txt").contains("X-Amz-Expires=604800"),
        "{built}"
    );
    let report = "pgappliance install failed on ip-10-0-0-5 (machine 0f1e): the payload's sha256 is 00, not 11";
    let c = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "-X",
            "PUT",
            "-H",
            "Content-Type: text/plain",
        ])
        .args(["--data-binary", report])
        .arg(presigned("install-failed.txt"))
        .output()
        .expect("curl");
    assert!(c.status.success(), "{}", describe(&c));
    let stored = runtime()
        .block_on(async {
            use object_store::ObjectStoreExt;
            store
                .objects
                .get(&object_store::path::Path::from(failure_object.as_str()))
                .await?
                .bytes()
                .await
        })
        .expect("the report in the store");
    assert_eq!(String::from_utf8_lossy(&stored), report);
    let w = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .args([
            "wait",
            &id,
            "--store",
            &format!("s3://{}/lab", seaweed::BUCKET),
        ])
        .args(["--endpoint", &weed.endpoint(), "--region", "us-east-1"])
        .arg("--credentials-file")
        .arg(&creds)
        .args(["--interval", "1s", "--timeout", "60s"])
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .expect("wait");
    let text = describe(&w);
    assert_eq!(w.status.code(), Some(1), "{text}");
    // It ended on the failure report, not on its --timeout.
    assert!(!text.contains("TIMED OUT"), "{text}");
    assert!(
        text.contains(&format!(
            "{instance}: FAILED the install failed ({failure_object}): {report}"
        )),
        "{text}"
    );
}

#[test]
fn a_wrong_secret_is_refused_and_recorded() {
    let moto = Moto::start();
    let dir = tempfile::tempdir().expect("tmp");
    let files = dir.path().join("records");
    let wrong = "wrong-Secret-5521";
    // The record goes to a directory here: the plan's own store (a store given with
    // --store must be one the servers reach too).
    let plan = altra_plan(dir.path());
    let text = read_to_string(&plan).replace(
        "store = \"s3://pgappliance-results/altra\"",
        &format!("store = \"file://{}\"", files.display()),
    );
    std::fs::write(&plan, text).expect("plan");
    let o = launch(
        dir.path(),
        &plan,
        &moto,
        &["--payload-url", "https://files.lab/payload.tar.gz"],
        &[
            ("AWS_ACCESS_KEY_ID", moto.access_key.as_str()),
            ("AWS_SECRET_ACCESS_KEY", wrong),
        ],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("EC2 RunInstances at"), "{text}");
    assert!(text.contains("AuthFailure"), "{text}");
    assert!(!text.contains(wrong), "{text}");
    // Which credentials: the key id and where it came from, never the secret.
    assert!(
        text.contains(&format!(
            "refused key {} from the environment (AWS_ACCESS_KEY_ID)",
            moto.access_key
        )),
        "{text}"
    );
    let rec = read_to_string(
        &files
            .join("launches")
            .join(format!("{}.json", launch_id(&o))),
    );
    assert!(rec.contains("AuthFailure") && !rec.contains(wrong), "{rec}");
    let running: serde_json::Value =
        serde_json::from_str(&moto.aws(&["ec2", "describe-instances"])).expect("json");
    assert_eq!(running["Reservations"].as_array().map(Vec::len), Some(0));
}

/// A plan made for the cloud (`credentials = "instance-role"`) launched from a machine
/// that is no instance: the plan's setting is the appliance's, this machine uses its own
/// keys, one set for the store (`--credentials-file`) and another for EC2 (the
/// environment's), and `--store` is the store the appliance writes to: the packed plan
/// names it, the record says so and `wait` reads it from there.
#[test]
fn an_instance_role_plan_launches_with_this_machines_keys_to_the_store_given() {
    let moto = Moto::start();
    // The store's keys are not EC2's.
    let weed = seaweed::SeaweedFs::start();
    assert_ne!(weed.access_key, moto.access_key);
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let plan = dir.path().join("m6gd.toml");
    // The example's sysbench-tpcc archive from the repository's pinned copy.
    let text = read_to_string(&workspace().join("examples/m6gd-8xlarge.toml")).replace(
        "file:///srv/pgappliance/",
        &format!(
            "file://{}/",
            workspace().join("third_party/sysbench-tpcc").display()
        ),
    );
    std::fs::write(&plan, &text).expect("plan");
    assert!(text.contains("credentials = \"instance-role\""), "{text}");
    assert!(text.contains("store = \"s3://pgappliance-results/graviton-vs-x86\""));
    let store = format!("s3://{}/cloud", seaweed::BUCKET);
    let endpoint = weed.endpoint();
    let store_keys = weed.credentials_file().display().to_string();
    let home = home.display().to_string();
    let o = launch(
        dir.path(),
        &plan,
        &moto,
        &[
            "--store",
            &store,
            "--endpoint",
            &endpoint,
            "--region",
            "us-east-1",
            "--credentials-file",
            &store_keys,
        ],
        &[
            ("HOME", &home),
            ("AWS_ACCESS_KEY_ID", &moto.access_key),
            ("AWS_SECRET_ACCESS_KEY", &moto.secret_key),
            // Were the metadata service asked, it would be here: nothing listens.
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9"),
        ],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(!text.contains("169.254.169.254"), "{text}");
    assert!(
        text.contains(&format!(
            "store            the appliance uploads to {store} (--store; the plan's s3://pgappliance-results/graviton-vs-x86 replaced in the packed plan)"
        )),
        "{text}"
    );
    let id = launch_id(&o);
    // What next repeats how this machine reached the store.
    assert!(
        text.contains(&format!(
            "next: `pgappliance wait {id} --store {store} --endpoint {} --region us-east-1 --credentials-file {}`",
            weed.endpoint(),
            weed.credentials_file().display()
        )),
        "{text}"
    );

    // The packed plan uploads to the store given, reached at the endpoint given, with the
    // plan's own credentials setting (the instance role) for the appliance.
    let listing = Command::new("tar")
        .args(["-xzOf"])
        .arg(dir.path().join("out/payload.tar.gz"))
        .arg("etc/pgappliance/plan.toml")
        .output()
        .expect("tar");
    assert!(listing.status.success(), "{}", describe(&listing));
    let packed = String::from_utf8_lossy(&listing.stdout).to_string();
    assert!(packed.contains(&format!("store = \"{store}\"")), "{packed}");
    assert!(
        packed.contains(&format!("endpoint = \"{}\"", weed.endpoint())),
        "{packed}"
    );
    assert!(
        packed.contains("credentials = \"instance-role\""),
        "{packed}"
    );

    // The record is in the store given and says where the target uploads.
    let s = weed.store("cloud");
    let bytes = runtime()
        .block_on(async {
            use object_store::ObjectStoreExt;
            s.objects
                .get(&s.path(&["launches", &format!("{id}.json")]))
                .await?
                .bytes()
                .await
        })
        .expect("record in the store given");
    let rec: serde_json::Value = serde_json::from_slice(&bytes).expect("record");
    assert_eq!(rec["upload"]["store"], store, "{rec}");
    assert_eq!(rec["upload"]["endpoint"], weed.endpoint(), "{rec}");
    assert_eq!(rec["targets"][0]["uploads_to"], store, "{rec}");
    assert_eq!(rec["targets"][0]["started"]["state"], "running", "{rec}");

    // `wait` given only the record's copy reads the targets' store from it.
    let copy = dir.path().join("record.json");
    std::fs::write(&copy, &bytes).expect("copy");
    let w = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("wait")
        .arg(&copy)
        .arg("--credentials-file")
        .arg(weed.credentials_file())
        .args(["--interval", "1s", "--timeout", "1s"])
        .env("HOME", &home)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .expect("wait");
    let text = describe(&w);
    assert_eq!(w.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("watching {store}")), "{text}");
    assert!(text.contains("TIMED OUT after 1s"), "{text}");
}

/// A store that refuses the keys is one line: the store's code and message read from its
/// answer (not the XML, not repeated), which keys (id and where they came from, never the
/// secret) and the fix.
#[test]
fn a_store_refusing_the_keys_says_so_in_one_line_naming_them() {
    let weed = seaweed::SeaweedFs::start();
    let dir = tempfile::tempdir().expect("tmp");
    let wrong = dir.path().join("wrong.credentials");
    std::fs::write(
        &wrong,
        format!(
            "access_key_id = {}\nsecret_access_key = Wrong-Secret-7731\n",
            weed.access_key
        ),
    )
    .expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let o = launch_command(dir.path(), &altra_plan(dir.path()))
        .args([
            "--ec2",
            "--image-id",
            "ami-1",
            "--instance-type",
            "m6g.large",
        ])
        // Never reached: the payload's upload fails first.
        .args([
            "--ec2-endpoint",
            "http://127.0.0.1:9",
            "--ec2-region",
            "us-east-1",
        ])
        .args(["--store", &format!("s3://{}/lab", seaweed::BUCKET)])
        .args(["--endpoint", &weed.endpoint(), "--region", "us-east-1"])
        .arg("--credentials-file")
        .arg(&wrong)
        .env("AWS_ACCESS_KEY_ID", "AKIAEC2ONLY")
        .env("AWS_SECRET_ACCESS_KEY", "ec2-secret")
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .expect("launch");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(!text.contains("Wrong-Secret-7731"), "{text}");
    assert!(
        !text.contains("<?xml") && !text.contains("<Code>"),
        "{text}"
    );
    let keys = format!(
        "refused key {} from --credentials-file {}",
        weed.access_key,
        wrong.display()
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("SignatureDoesNotMatch"))
        .collect();
    assert!(!lines.is_empty(), "{text}");
    for l in &lines {
        assert_eq!(l.matches("SignatureDoesNotMatch").count(), 1, "{l}");
        assert!(l.contains("403") && l.contains(&keys), "{l}");
        assert!(l.contains("check the secret"), "{l}");
    }
}
