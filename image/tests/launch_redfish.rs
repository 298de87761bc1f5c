//! `pgappliance launch --bmc` and `pgappliance eject` against `sushy-emulator --fake`
//! (sushy-tools, PyPI) over https with Basic auth, and SeaweedFS as the plan's store.
//!
//! What the fake driver does (sushy-tools 2.2.0, `emulator/resources/systems/fakedriver.py`
//! and `resources/vmedia.py`), and so all these tests assert: InsertMedia downloads the
//! image (an error from the image server fails the action); power changes apply 1–11 s
//! after the request (a ForceRestart reads Off first); the boot override target and mode
//! are kept, but `BootSourceOverrideEnabled` always reads `Continuous`, so a launch against
//! it reports that the BMC did not keep `Once` and exits 2.

use std::path::Path;
use std::process::{Command, Output};

use pgappliance_test_support::launch::*;

fn launch(dir: &Path, bmc: &Daemon, password: &str, extra: &[&str]) -> Output {
    launch_command(dir, &altra_plan(dir))
        .args(["--bmc", &format!("https://127.0.0.1:{}", bmc.port)])
        .arg("--bmc-ca")
        .arg(bmc.dir.path().join("cert.pem"))
        .args(extra)
        .env("PGAPPLIANCE_BMC_USER", BMC_USER)
        .env("PGAPPLIANCE_BMC_PASSWORD", password)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .expect("run pgappliance launch")
}

fn system_path(bmc: &Daemon) -> String {
    let systems = redfish_get(bmc, "/redfish/v1/Systems");
    systems["Members"][0]["@odata.id"]
        .as_str()
        .expect("member")
        .to_string()
}

#[test]
fn presigned_iso_is_inserted_booted_once_reset_and_ejected() {
    let weed = seaweed::SeaweedFs::start();
    let bmc = sushy();
    let dir = tempfile::tempdir().expect("tmp");
    let iso = synthetic_rocky_iso(dir.path());
    let creds = weed.credentials_file();
    let o = launch(
        dir.path(),
        &bmc,
        BMC_PASSWORD,
        &[
            "--iso",
            &iso.display().to_string(),
            "--store",
            &format!("s3://{}/lab", seaweed::BUCKET),
            "--endpoint",
            &weed.endpoint(),
            "--credentials-file",
            &creds.display().to_string(),
        ],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    let not_kept: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("did not keep"))
        .collect();
    assert_eq!(not_kept.len(), 1, "{text}");
    assert!(
        not_kept[0]
            .contains(r#"BootSourceOverrideEnabled was set to "Once" but reads "Continuous""#),
        "{text}"
    );
    assert!(!text.contains(BMC_PASSWORD), "{text}");

    // What the BMC holds, read by an independent client.
    let system = system_path(&bmc);
    let media = redfish_get(&bmc, &format!("{system}/VirtualMedia/Cd"));
    assert_eq!(media["Inserted"], true, "{media}");
    let image = media["Image"].as_str().expect("image").to_string();
    assert!(image.starts_with(&weed.endpoint()), "{image}");
    assert!(image.contains("X-Amz-Signature="), "{image}");
    let s = redfish_get(&bmc, &system);
    assert_eq!(s["Boot"]["BootSourceOverrideTarget"], "Cd", "{s}");
    assert_eq!(s["Boot"]["BootSourceOverrideMode"], "UEFI", "{s}");
    assert_eq!(s["PowerState"], "On", "{s}");

    // The presigned URL serves exactly the ISO the build wrote, without credentials.
    let fetched = dir.path().join("fetched.iso");
    let c = Command::new("curl")
        .args(["-sS", "--fail", "-o"])
        .arg(&fetched)
        .arg(&image)
        .output()
        .expect("curl");
    assert!(c.status.success(), "{}", describe(&c));
    assert_eq!(
        std::fs::read(&fetched).expect("fetched"),
        std::fs::read(dir.path().join("out/appliance.iso")).expect("built")
    );

    // The launch record, through the daemon library's store.
    let id = launch_id(&o);
    let rec = stored_record(&weed.store("lab"), &id);
    assert_eq!(rec["launch_id"], id.as_str());
    assert_eq!(rec["plan"]["name"], "altra-q80");
    assert_eq!(
        rec["iso_object"],
        format!("lab/launches/{id}/appliance.iso")
    );
    assert!(
        !rec["iso_url"].as_str().expect("url").contains('?'),
        "{rec}"
    );
    let t = &rec["targets"][0];
    assert_eq!(t["method"], "redfish");
    assert_eq!(t["started"]["kind"], "redfish");
    assert_eq!(
        t["started"]["reset"], "On",
        "the fake system starts off: {rec}"
    );
    assert_eq!(
        t["started"]["virtual_media"],
        format!("{system}/VirtualMedia/Cd")
    );
    assert!(t["error"].is_null());

    // Again, now that it is on, with an ISO URL the user serves: the presigned image is
    // ejected first and the server is force-restarted.
    let www = tempfile::tempdir().expect("www");
    std::fs::copy(
        dir.path().join("out/appliance.iso"),
        www.path().join("a.iso"),
    )
    .expect("copy");
    let server = http_server(www.path());
    let served = format!("http://127.0.0.1:{}/a.iso", server.port);
    let files = dir.path().join("records");
    let o = launch(
        dir.path(),
        &bmc,
        BMC_PASSWORD,
        &[
            "--iso-url",
            &served,
            "--store",
            &format!("file://{}", files.display()),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let rec = file_record(&files, &launch_id(&o));
    let started = &rec["targets"][0]["started"];
    assert_eq!(started["reset"], "ForceRestart", "{rec}");
    assert_eq!(started["power_state"], "On", "{rec}");
    let ejected = started["ejected"].as_str().expect("ejected");
    assert!(
        ejected.starts_with(&weed.endpoint()) && !ejected.contains('?'),
        "{rec}"
    );
    let media = redfish_get(&bmc, &format!("{system}/VirtualMedia/Cd"));
    assert_eq!(media["Image"], served.as_str(), "{media}");

    let o = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .args(["eject", "--bmc", &format!("https://127.0.0.1:{}", bmc.port)])
        .arg("--bmc-ca")
        .arg(bmc.dir.path().join("cert.pem"))
        .env("PGAPPLIANCE_BMC_USER", BMC_USER)
        .env("PGAPPLIANCE_BMC_PASSWORD", BMC_PASSWORD)
        .output()
        .expect("eject");
    assert!(o.status.success(), "{}", describe(&o));
    let media = redfish_get(&bmc, &format!("{system}/VirtualMedia/Cd"));
    assert_eq!(media["Inserted"], false, "{media}");
    assert_eq!(media["Image"], "", "{media}");
}

#[test]
fn a_wrong_password_is_refused_and_never_printed() {
    let bmc = sushy();
    let dir = tempfile::tempdir().expect("tmp");
    let files = dir.path().join("records");
    let wrong = "wrong-Pw-4417";
    let o = launch(
        dir.path(),
        &bmc,
        wrong,
        &[
            "--iso-url",
            "http://127.0.0.1:9/a.iso",
            "--store",
            &format!("file://{}", files.display()),
        ],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(r#"refused the credentials of user "admin" (401"#),
        "{text}"
    );
    assert!(!text.contains(wrong), "{text}");
    let rec_text = read_to_string(
        &files
            .join("launches")
            .join(format!("{}.json", launch_id(&o))),
    );
    assert!(!rec_text.contains(wrong), "{rec_text}");
    assert!(rec_text.contains("refused the credentials"), "{rec_text}");
    assert!(!bmc.log().contains(wrong), "{}", bmc.log());
}

#[test]
fn an_unreachable_bmc_is_named_and_recorded_and_the_others_are_still_launched() {
    let bmc = sushy();
    let www = tempfile::tempdir().expect("www");
    std::fs::write(www.path().join("a.iso"), "iso").expect("iso");
    let server = http_server(www.path());
    let dir = tempfile::tempdir().expect("tmp");
    let files = dir.path().join("records");
    let port = seaweed::free_port();
    let o = launch_command(dir.path(), &altra_plan(dir.path()))
        .args(["--bmc", &format!("https://127.0.0.1:{port}")])
        .args(["--bmc", &format!("https://127.0.0.1:{}", bmc.port)])
        .arg("--insecure")
        .args([
            "--iso-url",
            &format!("http://127.0.0.1:{}/a.iso", server.port),
        ])
        .args(["--store", &format!("file://{}", files.display())])
        .env("PGAPPLIANCE_BMC_USER", BMC_USER)
        .env("PGAPPLIANCE_BMC_PASSWORD", BMC_PASSWORD)
        .output()
        .expect("launch");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let want = format!("on the BMC at https://127.0.0.1:{port}: cannot connect");
    assert!(text.contains(&want), "{text}");
    assert!(text.contains("1 of 2 targets started"), "{text}");
    let rec = file_record(&files, &launch_id(&o));
    assert!(rec["targets"][0]["started"].is_null(), "{rec}");
    assert!(
        rec["targets"][0]["error"]
            .as_str()
            .expect("error")
            .contains(&want),
        "{rec}"
    );
    assert_eq!(rec["targets"][1]["started"]["reset"], "On", "{rec}");
    let media = redfish_get(&bmc, &format!("{}/VirtualMedia/Cd", system_path(&bmc)));
    assert_eq!(media["Inserted"], true, "{media}");
}

#[test]
fn an_image_url_the_bmc_cannot_fetch_is_reported_with_the_bmcs_message() {
    let bmc = sushy();
    let www = tempfile::tempdir().expect("www");
    let server = http_server(www.path());
    let dir = tempfile::tempdir().expect("tmp");
    let files = dir.path().join("records");
    let o = launch(
        dir.path(),
        &bmc,
        BMC_PASSWORD,
        &[
            "--iso-url",
            &format!("http://127.0.0.1:{}/missing.iso", server.port),
            "--store",
            &format!("file://{}", files.display()),
        ],
    );
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("InsertMedia: the BMC answered 400"), "{text}");
    assert!(
        text.contains("Cannot download virtual media: got error 404"),
        "{text}"
    );
    let media = redfish_get(&bmc, &format!("{}/VirtualMedia/Cd", system_path(&bmc)));
    assert_eq!(media["Inserted"], false, "{media}");
    assert_eq!(
        redfish_get(&bmc, &system_path(&bmc))["PowerState"],
        "Off",
        "nothing is reset when the image cannot be inserted"
    );
}

#[test]
fn https_without_a_ca_or_insecure_and_loose_credentials_are_refused_before_any_work() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut c = launch_command(dir.path(), &altra_plan(dir.path()));
        c.args(["--iso-url", "https://example.invalid/a.iso"])
            .args(extra)
            .env_remove("PGAPPLIANCE_BMC_USER")
            .env_remove("PGAPPLIANCE_BMC_PASSWORD");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("launch")
    };
    let env = [
        ("PGAPPLIANCE_BMC_USER", "a"),
        ("PGAPPLIANCE_BMC_PASSWORD", "b"),
    ];
    let o = run(&["--bmc", "https://127.0.0.1:1"], &env);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        describe(&o).contains("--bmc-ca FILE, or --insecure"),
        "{}",
        describe(&o)
    );
    let o = run(&["--bmc", "http://127.0.0.1:1"], &env);
    assert!(describe(&o).contains("is plain http"), "{}", describe(&o));
    let o = run(&["--bmc", "https://127.0.0.1:1", "--insecure"], &[]);
    assert!(
        describe(&o).contains("set PGAPPLIANCE_BMC_USER and PGAPPLIANCE_BMC_PASSWORD"),
        "{}",
        describe(&o)
    );
    let file = dir.path().join("bmc");
    std::fs::write(&file, "user = a\npassword = loose-secret\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let o = run(
        &[
            "--bmc",
            "https://127.0.0.1:1",
            "--insecure",
            "--bmc-credentials",
            &file.display().to_string(),
        ],
        &[],
    );
    let text = describe(&o);
    assert!(text.contains("mode 640"), "{text}");
    assert!(!text.contains("loose-secret"), "{text}");
    assert!(!dir.path().join("out").exists(), "nothing built: {text}");
    let iso = dir.path().join("rocky.iso");
    std::fs::write(&iso, "not read: refused first").expect("iso");
    let o = launch_command(dir.path(), &altra_plan(dir.path()))
        .arg("--iso")
        .arg(&iso)
        .args(["--bmc", "https://127.0.0.1:1", "--insecure"])
        .args([
            "--store",
            &format!("file://{}", dir.path().join("files").display()),
        ])
        .envs(env)
        .output()
        .expect("launch");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot presign the ISO"), "{text}");
    assert!(!dir.path().join("out").exists(), "nothing built: {text}");
    let o = run(
        &["--bmc", "https://127.0.0.1:1", "--bmc-password", "x"],
        &env,
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "no password flag: {}",
        describe(&o)
    );
}
