//! `pgappliance launch --ipmi` against pyghmi's `fakebmc` with Debian's `ipmitool -I
//! lanplus`. fakebmc (pyghmi 1.6.19) keeps the boot device but not the EFI flag, powers on,
//! takes a hard reset, and has no power cycle; a wrong password never opens a session.

use std::path::Path;
use std::process::{Command, Output};

use pgappliance_test_support::launch::*;

const FAKEBMC_PASSWORD: &str = "password";

fn launch(dir: &Path, target: &str, password: &str) -> Output {
    launch_command(dir, &altra_plan(dir))
        .args(["--ipmi", target])
        .args([
            "--store",
            &format!("file://{}", dir.join("records").display()),
        ])
        .env("PGAPPLIANCE_BMC_USER", "admin")
        .env("PGAPPLIANCE_BMC_PASSWORD", password)
        .output()
        .expect("run pgappliance launch")
}

fn ipmitool(port: u16, args: &[&str]) -> String {
    let o = Command::new("ipmitool")
        .args(["-I", "lanplus", "-H", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "admin", "-E"])
        .args(args)
        .env("IPMI_PASSWORD", FAKEBMC_PASSWORD)
        .output()
        .expect("ipmitool");
    assert!(o.status.success(), "{}", describe(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn record(dir: &Path, o: &Output) -> serde_json::Value {
    file_record(&dir.join("records"), &launch_id(o))
}

#[test]
fn next_boot_is_cdrom_and_the_server_is_powered_on_then_reset() {
    let bmc = fakebmc();
    let dir = tempfile::tempdir().expect("tmp");
    let target = format!("127.0.0.1:{}", bmc.port);
    assert!(ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is off"));

    let o = launch(dir.path(), &target, FAKEBMC_PASSWORD);
    let text = describe(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "fakebmc drops the EFI flag: {text}"
    );
    assert!(
        text.contains("EFI boot was asked for but the boot flags read legacy"),
        "{text}"
    );
    assert!(
        ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is on"),
        "{text}"
    );
    let flags = ipmitool(bmc.port, &["chassis", "bootparam", "get", "5"]);
    assert!(flags.contains("Force Boot from CD/DVD"), "{flags}");
    // What next: wait for the run, named with this launch and its store.
    let id = launch_id(&o);
    assert!(
        text.contains(&format!(
            "next: `pgappliance wait {id} --store file://{}",
            dir.path().join("records").display()
        )),
        "{text}"
    );
    assert!(
        !text.contains("next: boot "),
        "launch goes on itself: {text}"
    );
    let rec = record(dir.path(), &o);
    let started = &rec["targets"][0]["started"];
    assert_eq!(rec["targets"][0]["method"], "ipmi");
    assert_eq!(started["kind"], "ipmi");
    assert_eq!(started["power"], "on", "{rec}");

    // Reset the boot device, launch again: it is on now, so it is reset.
    ipmitool(bmc.port, &["chassis", "bootdev", "disk"]);
    let o = launch(dir.path(), &target, FAKEBMC_PASSWORD);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert_eq!(
        record(dir.path(), &o)["targets"][0]["started"]["power"],
        "reset"
    );
    let flags = ipmitool(bmc.port, &["chassis", "bootparam", "get", "5"]);
    assert!(flags.contains("Force Boot from CD/DVD"), "{flags}");
    assert!(ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is on"));
}

#[test]
fn a_wrong_password_fails_with_ipmitools_words_and_is_not_printed() {
    let bmc = fakebmc();
    let dir = tempfile::tempdir().expect("tmp");
    let wrong = "wrong-Ipmi-991";
    let o = launch(dir.path(), &format!("127.0.0.1:{}", bmc.port), wrong);
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("ipmitool -I lanplus -H 127.0.0.1 -U admin -E"),
        "{text}"
    );
    assert!(
        text.contains("Unable to establish IPMI v2 / RMCP+ session"),
        "{text}"
    );
    assert!(!text.contains(wrong), "{text}");
    let rec = record(dir.path(), &o);
    assert!(rec["targets"][0]["started"].is_null());
    assert!(!rec.to_string().contains(wrong));
    assert!(ipmitool(bmc.port, &["chassis", "power", "status"]).contains("is off"));
}

#[test]
fn launch_without_a_target_is_a_usage_error_naming_the_targets() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("launch")
        .arg(altra_plan(dir.path()))
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .expect("run pgappliance launch");
    let text = describe(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--bmc <URL>") && text.contains("--ipmi <HOST>") && text.contains("--ec2"),
        "{text}"
    );
    assert!(!dir.path().join("out").exists(), "{text}");
}

#[test]
fn an_ipmi_launch_of_a_plan_that_cannot_install_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().expect("tmp");
    let plan = altra_plan(dir.path());
    let text = read_to_string(&plan);
    let cloud = &text[..text
        .find("\n[install]")
        .expect("[install] in the Altra plan")];
    std::fs::write(&plan, cloud).expect("write");
    // No BMC listens there: a launch that went on would fail at the BMC instead.
    let o = launch_command(dir.path(), &plan)
        .args(["--ipmi", "127.0.0.1:9"])
        .args([
            "--store",
            &format!("file://{}", dir.path().join("records").display()),
        ])
        .env("PGAPPLIANCE_BMC_USER", "admin")
        .env("PGAPPLIANCE_BMC_PASSWORD", FAKEBMC_PASSWORD)
        .output()
        .expect("run pgappliance launch");
    let out = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("--ipmi boots the server from the CD mounted on it")
            && out.contains("has no [install] table"),
        "{out}"
    );
    assert!(!out.contains("ipmitool"), "{out}");
    assert!(!dir.path().join("out").exists(), "{out}");
    assert!(!dir.path().join("records").exists(), "{out}");
}
