//! `pgappliance wait` against real runs: `pgapplianced run --local` of the test plans
//! uploading to a file:// store stands in for an appliance booted by a launch; the launch
//! record names an IPMI target (pyghmi's fakebmc, powered off by --teardown) or an EC2
//! instance (moto_server, terminated by --teardown).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use pgappliance_test_support::daemon_binary;
use pgappliance_test_support::launch::*;

/// A scratch directory under /var/tmp the `postgres` user can reach (local runs as root
/// run PostgreSQL as postgres).
fn workdir(tag: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix(&format!("pga-wait-{tag}-"))
        .tempdir_in("/var/tmp")
        .expect("tmp");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// A launch record of plan `appliance` created now with `targets` (as `launch` writes it).
fn record(id: &str, appliance: &str, targets: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "schema": 1,
        "launch_id": id,
        "plan": {"name": appliance, "file": format!("{appliance}.toml"), "sha256": "0"},
        "created_at": now(),
        "iso_url": null,
        "iso_object": null,
        "payload_object": null,
        "targets": targets,
    })
}

fn ipmi_target(port: u16) -> serde_json::Value {
    serde_json::json!({
        "address": format!("127.0.0.1:{port}"),
        "method": "ipmi",
        "at": now(),
        "started": {"kind": "ipmi", "host": "127.0.0.1", "port": port, "power": "on", "not_kept": []},
        "error": null,
    })
}

fn write_json(p: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, serde_json::to_vec_pretty(v).expect("json")).expect("write");
}

fn wait_cmd(record: &str, store: &str, extra: &[&str], cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pgappliance"));
    c.args(["wait", record, "--store", store, "--interval", "1s"])
        .args(extra)
        .env("XDG_CACHE_HOME", cache)
        .env("PGAPPLIANCE_BMC_USER", "admin")
        .env("PGAPPLIANCE_BMC_PASSWORD", "password")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// `pgapplianced run --local PLAN` uploading to `store`.
fn local_run(plan: &Path, work: &Path, store: &str) -> Output {
    Command::new(daemon_binary())
        .args(["run", "--local"])
        .arg(plan)
        .arg("--workdir")
        .arg(work)
        .args(["--store", store])
        .env("RUST_LOG", "info")
        .output()
        .expect("pgapplianced")
}

/// Waits for a child with a limit, killing it past the limit.
fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    child.wait_with_output().expect("output")
}

fn ipmitool(port: u16, args: &[&str]) -> String {
    let o = Command::new("ipmitool")
        .args(["-I", "lanplus", "-H", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "admin", "-E"])
        .args(args)
        .env("IPMI_PASSWORD", "password")
        .output()
        .expect("ipmitool");
    assert!(o.status.success(), "{}", describe(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_complete_run_arrives_then_teardown_powers_off_and_collects() {
    let bmc = fakebmc();
    // As the launch leaves it: powered on.
    ipmitool(bmc.port, &["chassis", "power", "on"]);
    assert!(ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is on"));
    let dir = workdir("done");
    let store = format!("file://{}/store", dir.path().display());
    let rec = dir.path().join("launch.json");
    write_json(
        &rec,
        &record("tiny-1", "tiny", serde_json::json!([ipmi_target(bmc.port)])),
    );
    // The launch precedes the run by at least a second (the record has seconds).
    std::thread::sleep(Duration::from_millis(1100));
    let out = dir.path().join("pages");
    let waiting = wait_cmd(
        &rec.display().to_string(),
        &store,
        &[
            "--timeout",
            "15m",
            "--teardown",
            "--out",
            &out.display().to_string(),
        ],
        &dir.path().join("cache"),
    )
    .spawn()
    .expect("pgappliance wait");
    let plan = workspace().join("tests/plans/tiny-bench.toml");
    let run = local_run(&plan, &dir.path().join("work"), &store);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    let o = finish(waiting, Duration::from_secs(180));
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let target = format!("127.0.0.1:{}", bmc.port);
    assert!(
        text.contains(&format!("{target}: no status object yet")),
        "{text}"
    );
    assert!(text.contains(&format!("{target}: running (run ")), "{text}");
    assert!(
        text.contains(&format!("{target}: arrived: tiny/")),
        "{text}"
    );
    assert!(text.contains("launch tiny-1: 1 of 1 arrived"), "{text}");
    assert!(
        text.contains(&format!("{target}: teardown: powered off")),
        "{text}"
    );
    assert!(
        ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is off"),
        "{text}"
    );
    assert!(out.join("index.html").is_file(), "{text}");
    let csv = read_to_string(&out.join("summary.csv"));
    assert!(csv.lines().count() >= 2, "{csv}");
}

#[test]
fn a_failed_run_is_reported_with_its_step_and_error() {
    let dir = workdir("failed");
    let store = format!("file://{}/store", dir.path().display());
    let rec = dir.path().join("launch.json");
    // Port 1 has no BMC: without --teardown nothing talks to it.
    write_json(
        &rec,
        &record("bad-1", "bad-setting", serde_json::json!([ipmi_target(1)])),
    );
    std::thread::sleep(Duration::from_millis(1100));
    let waiting = wait_cmd(
        &rec.display().to_string(),
        &store,
        &["--timeout", "10m"],
        &dir.path().join("cache"),
    )
    .spawn()
    .expect("pgappliance wait");
    let plan = workspace().join("tests/plans/bad-setting.toml");
    let run = local_run(&plan, &dir.path().join("work"), &store);
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    let o = finish(waiting, Duration::from_secs(120));
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("127.0.0.1:1: FAILED refused at step tuning: "),
        "{text}"
    );
    assert!(text.contains("geqo_threshold"), "{text}");
    assert!(
        text.contains("127.0.0.1:1: next: the appliance refused a value of the plan: fix the plan")
            && text.contains("resuming cannot help"),
        "{text}"
    );
    assert!(text.contains("launch bad-1: 0 of 1 arrived"), "{text}");
}

#[test]
fn a_target_without_a_status_times_out_by_name_and_a_record_is_found_by_id() {
    let dir = workdir("timeout");
    let store_dir = dir.path().join("store");
    let store = format!("file://{}", store_dir.display());
    let failed_launch = serde_json::json!({
        "address": "https://10.0.0.9", "method": "redfish", "at": now(),
        "started": null, "error": "the BMC at https://10.0.0.9 did not answer",
    });
    write_json(
        &store_dir.join("launches/tiny-2.json"),
        &record(
            "tiny-2",
            "tiny",
            serde_json::json!([ipmi_target(1), failed_launch]),
        ),
    );
    // A run of the same appliance from before the launch is not taken for this one.
    write_json(
        &store_dir.join("tiny/old-machine/20200101T000000Z.status.json"),
        &serde_json::json!({
            "schema_version": 1, "appliance": "tiny", "machine_id": "old-machine",
            "run_id": "20200101T000000Z", "state": "running", "step": "sweep", "text": null,
            "points_done": 1, "points_total": 2, "last_tps": null, "boots": 1, "failure": null,
            "started_at": "2020-01-01T00:00:00Z", "updated_at": now(), "stored_as": null,
            "identity": null,
        }),
    );
    let cache = dir.path().join("cache");
    let started = Instant::now();
    let o = wait_cmd(
        "tiny-2",
        &store,
        &["--timeout", "3s", "--heartbeat", "1s"],
        &cache,
    )
    .output()
    .expect("wait");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    // Its output is a pipe: a heartbeat line says it is still at work, and since when (the
    // polls are at least --interval apart, so one passes --heartbeat before the timeout).
    assert!(
        text.lines().any(|l| l.starts_with("wait: ")
            && l.contains(" elapsed of 3s; 127.0.0.1:1: no status object yet")),
        "{text}"
    );
    // A guard against waiting past --timeout (a wait that ignored it would last hours), not
    // a timing: any slowness of the machine fits in it.
    assert!(started.elapsed() < Duration::from_secs(300), "{text}");
    assert!(
        text.contains("127.0.0.1:1: TIMED OUT after 3s: last no status object yet"),
        "{text}"
    );
    // What to look at, and that the server is still on with its CD.
    assert!(
        text.contains(
            "127.0.0.1:1: next: nothing reached the store from this server: look at its console"
        ) && text.contains(&format!("check that the server reaches {store}"))
            && text.contains("it is still on, with the CD inserted"),
        "{text}"
    );
    assert!(
        !text.contains("https://10.0.0.9: next: nothing reached"),
        "{text}"
    );
    assert!(
        text.contains("https://10.0.0.9: FAILED not started by the launch: the BMC at https://10.0.0.9 did not answer"),
        "{text}"
    );
    assert!(!text.contains("old-machine"), "{text}");

    let o = wait_cmd("tiny-3", &store, &["--timeout", "3s"], &cache)
        .output()
        .expect("wait");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("no launch tiny-3 in file://"), "{text}");
    assert!(text.contains("launches/tiny-3.json is not there"), "{text}");

    let newer = dir.path().join("newer.json");
    write_json(&newer, &serde_json::json!({"schema": 2, "launch_id": "x"}));
    let o = wait_cmd(&newer.display().to_string(), &store, &[], &cache)
        .output()
        .expect("wait");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("is a launch record of schema 2; this pgappliance reads schema 1"),
        "{text}"
    );
}

#[test]
fn teardown_terminates_the_ec2_instance() {
    let moto = Moto::start();
    let ami = moto.ami();
    let run: serde_json::Value = serde_json::from_str(&moto.aws(&[
        "ec2",
        "run-instances",
        "--image-id",
        ami.trim(),
        "--instance-type",
        "m6g.large",
        "--count",
        "1",
    ]))
    .expect("json");
    let id = run["Instances"][0]["InstanceId"]
        .as_str()
        .expect("instance id")
        .to_string();
    let dir = workdir("ec2");
    let store = format!("file://{}/store", dir.path().display());
    let rec = dir.path().join("launch.json");
    write_json(
        &rec,
        &record(
            "tiny-ec2",
            "tiny",
            serde_json::json!([{
                "address": moto.endpoint(), "method": "ec2", "at": now(), "error": null,
                "started": {"kind": "ec2", "endpoint": moto.endpoint(), "region": "us-east-1",
                    "image_id": ami.trim(), "instance_type": "m6g.large", "instances": [id],
                    "state": "running", "payload_url": "https://example.invalid/payload.tar.gz"},
            }]),
        ),
    );
    let o = wait_cmd(
        &rec.display().to_string(),
        &store,
        &[
            "--timeout",
            "2s",
            "--teardown",
            "--out",
            &dir.path().join("pages").display().to_string(),
        ],
        &dir.path().join("cache"),
    )
    .env("AWS_ACCESS_KEY_ID", &moto.access_key)
    .env("AWS_SECRET_ACCESS_KEY", &moto.secret_key)
    .output()
    .expect("wait");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "timed out: {text}");
    assert!(
        text.contains(&format!("{id}: TIMED OUT after 2s")),
        "{text}"
    );
    assert!(
        text.contains(&format!("teardown: {id} shutting-down"))
            || text.contains(&format!("teardown: {id} terminated")),
        "{text}"
    );
    assert!(!text.contains(&moto.secret_key), "{text}");
    let described: serde_json::Value =
        serde_json::from_str(&moto.aws(&["ec2", "describe-instances", "--instance-ids", &id]))
            .expect("json");
    let state = &described["Reservations"][0]["Instances"][0]["State"]["Name"];
    assert!(
        state == "terminated" || state == "shutting-down",
        "{described}"
    );
}

#[test]
fn a_redfish_launch_records_the_system_uuid_and_teardown_ejects_and_powers_off() {
    let bmc = sushy();
    let www = tempfile::tempdir().expect("www");
    std::fs::write(www.path().join("a.iso"), "iso").expect("iso");
    let server = http_server(www.path());
    let dir = workdir("redfish");
    let files = dir.path().join("store");
    let store = format!("file://{}", files.display());
    let bmc_url = format!("https://127.0.0.1:{}", bmc.port);
    let o = launch_command(dir.path(), &altra_plan(dir.path()))
        .args(["--bmc", &bmc_url, "--bmc-ca"])
        .arg(bmc.dir.path().join("cert.pem"))
        .args([
            "--iso-url",
            &format!("http://127.0.0.1:{}/a.iso", server.port),
        ])
        .args(["--store", &store])
        .env("PGAPPLIANCE_BMC_USER", BMC_USER)
        .env("PGAPPLIANCE_BMC_PASSWORD", BMC_PASSWORD)
        .output()
        .expect("launch");
    // 2: sushy's fake driver keeps the boot override Continuous (docs/launch.md).
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    // The store given is the one the appliance writes to; a file:// one only when shared.
    assert!(
        describe(&o).contains(&format!("warning: --store {store}: the servers write their runs to that directory on their own disks")),
        "{}",
        describe(&o)
    );
    let id = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("launch "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no launch id: {}", describe(&o)))
        .to_string();
    let rec: serde_json::Value = serde_json::from_str(&read_to_string(
        &files.join("launches").join(format!("{id}.json")),
    ))
    .expect("record");
    let systems = redfish_get(&bmc, "/redfish/v1/Systems");
    let system = systems["Members"][0]["@odata.id"]
        .as_str()
        .expect("member")
        .to_string();
    let uuid = redfish_get(&bmc, &system)["UUID"].clone();
    assert!(uuid.is_string(), "{uuid}");
    assert_eq!(rec["targets"][0]["started"]["system_uuid"], uuid, "{rec}");
    let media = redfish_get(&bmc, &format!("{system}/VirtualMedia/Cd"));
    assert_eq!(media["Inserted"], true, "{media}");

    let o = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .args([
            "wait",
            &id,
            "--store",
            &store,
            "--timeout",
            "1s",
            "--teardown",
        ])
        .arg("--out")
        .arg(dir.path().join("pages"))
        .arg("--bmc-ca")
        .arg(bmc.dir.path().join("cert.pem"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("PGAPPLIANCE_BMC_USER", BMC_USER)
        .env("PGAPPLIANCE_BMC_PASSWORD", BMC_PASSWORD)
        .output()
        .expect("wait");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "timed out: {text}");
    assert!(
        text.contains(&format!(
            "{bmc_url}: TIMED OUT after 1s: last no status object yet"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{bmc_url}: teardown: ejected {system}/VirtualMedia/Cd, ForceOff"
        )),
        "{text}"
    );
    assert!(!text.contains(BMC_PASSWORD), "{text}");
    let media = redfish_get(&bmc, &format!("{system}/VirtualMedia/Cd"));
    assert_eq!(media["Inserted"], false, "{media}");
    // The fake driver applies power changes after a moment (1-11 s measured; bounded here
    // far above that).
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let power = redfish_get(&bmc, &system)["PowerState"].clone();
        if power == "Off" {
            break;
        }
        assert!(Instant::now() < deadline, "still {power} after ForceOff");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn on_a_terminal_the_targets_are_redrawn_in_place_and_the_summary_follows() {
    let dir = workdir("tty");
    let store = format!("file://{}/store", dir.path().display());
    let rec = dir.path().join("launch.json");
    write_json(
        &rec,
        &record("tiny-tty", "tiny", serde_json::json!([ipmi_target(1)])),
    );
    // util-linux's `script` runs the command on a pseudo-terminal (stdout and stderr).
    let command = format!(
        "{} wait {} --store {store} --timeout 2s --interval 1s",
        env!("CARGO_BIN_EXE_pgappliance"),
        rec.display()
    );
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("TERM", "xterm")
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux)");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    // Cursor movement and line erasure: the live lines, then cleared.
    assert!(text.contains("\u{1b}[2K"), "{text}");
    assert!(
        text.contains("127.0.0.1:1: TIMED OUT after 2s: last no status object yet"),
        "{text}"
    );
    assert!(text.contains("launch tiny-tty: 0 of 1 arrived"), "{text}");
}

#[test]
fn a_failed_dataset_step_leaves_its_bundle_in_seaweedfs_and_wait_names_the_step() {
    let weed = seaweed::SeaweedFs::start();
    let dir = workdir("seaweed");
    let store = format!("s3://{}/fails", seaweed::BUCKET);
    let rec = dir.path().join("launch.json");
    write_json(
        &rec,
        &record(
            "fails-1",
            "dataset-fails",
            serde_json::json!([ipmi_target(1)]),
        ),
    );
    std::thread::sleep(Duration::from_millis(1100));
    let mut waiting = wait_cmd(
        &rec.display().to_string(),
        &store,
        &["--timeout", "10m"],
        &dir.path().join("cache"),
    );
    let waiting = waiting.envs(weed.env()).spawn().expect("pgappliance wait");
    let run = Command::new(daemon_binary())
        .args(["run", "--local"])
        .arg(workspace().join("tests/plans/dataset-fails.toml"))
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .args(["--store", &store])
        .envs(weed.env())
        .output()
        .expect("pgapplianced");
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("step dataset failed"),
        "{}",
        describe(&run)
    );
    let o = finish(waiting, Duration::from_secs(120));
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("127.0.0.1:1: FAILED failed at step dataset: "),
        "{text}"
    );
    assert!(text.contains("read-only"), "{text}");
    // The failure bundle is in the store, under the appliance's own prefix.
    let bundle = runtime().block_on(async {
        use futures::TryStreamExt;
        let s = weed.store("fails");
        let base = s.path(&["dataset-fails", "failed"]);
        let listed: Vec<object_store::ObjectMeta> = s
            .objects
            .list(Some(&base))
            .try_collect()
            .await
            .expect("list");
        listed
            .into_iter()
            .map(|m| m.location.to_string())
            .collect::<Vec<String>>()
    });
    for name in [
        "failure.json",
        "journal.json",
        "inventory.json",
        "manifest.json",
    ] {
        assert!(
            bundle.iter().any(|k| k.ends_with(&format!("/{name}"))),
            "{name} not in the bundle: {bundle:?}"
        );
    }
}

#[test]
fn teardown_s_prerequisites_are_checked_before_the_wait() {
    let dir = workdir("preflight");
    let store_dir = dir.path().join("store");
    let store = format!("file://{}", store_dir.display());
    let cache = dir.path().join("cache");
    let redfish = serde_json::json!({
        "address": "https://10.0.0.9", "method": "redfish", "at": now(), "error": null,
        "started": {"kind": "redfish", "bmc": "https://10.0.0.9", "system": "/redfish/v1/Systems/1",
            "system_uuid": null, "virtual_media": "/redfish/v1/Managers/1/VirtualMedia/CD",
            "ejected": null, "boot_patched": "Cd once", "reset": "ForceRestart",
            "not_kept": [], "power_state": "On"},
    });
    let ec2 = serde_json::json!({
        "address": "http://127.0.0.1:9", "method": "ec2", "at": now(), "error": null,
        "started": {"kind": "ec2", "endpoint": "http://127.0.0.1:9", "region": "us-east-1",
            "image_id": "ami-1", "instance_type": "m6g.large", "instances": ["i-1"],
            "state": "running", "payload_url": "https://example.invalid/payload.tar.gz"},
    });
    write_json(
        &store_dir.join("launches/tiny-bmc.json"),
        &record(
            "tiny-bmc",
            "tiny",
            serde_json::json!([ipmi_target(9), redfish]),
        ),
    );
    write_json(
        &store_dir.join("launches/tiny-ec2.json"),
        &record("tiny-ec2", "tiny", serde_json::json!([ec2])),
    );
    // Each would wait an hour for a target that never comes; each must end at once.
    let run = |id: &str, extra: &[&str], bmc_env: bool| {
        let started = Instant::now();
        let mut c = wait_cmd(
            id,
            &store,
            &[&["--teardown", "--timeout", "1h"], extra].concat(),
            &cache,
        );
        if !bmc_env {
            c.env_remove("PGAPPLIANCE_BMC_USER")
                .env_remove("PGAPPLIANCE_BMC_PASSWORD");
        }
        c.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .current_dir(dir.path());
        let o = c.output().expect("wait");
        let text = describe(&o);
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(started.elapsed() < Duration::from_secs(300), "{text}");
        assert!(
            !text.contains("watching"),
            "refused before the wait: {text}"
        );
        text
    };
    let text = run("tiny-bmc", &[], false);
    assert!(
        text.contains("--teardown powers off the launch's BMC targets when the wait ends, and needs their credentials now")
            && text.contains("PGAPPLIANCE_BMC_USER"),
        "{text}"
    );
    let text = run("tiny-bmc", &[], true);
    assert!(
        text.contains("--teardown ejects and powers off https://10.0.0.9 when the wait ends")
            && text.contains("--bmc-ca FILE, or --insecure"),
        "{text}"
    );
    let text = run("tiny-ec2", &[], true);
    assert!(
        text.contains("--teardown terminates the EC2 instances of http://127.0.0.1:9")
            && text.contains("AWS_ACCESS_KEY_ID"),
        "{text}"
    );
}
