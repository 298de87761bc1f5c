//! The test scripts the README names stop at once and name what they lack, instead of
//! failing minutes later: the guest harness's and the cross-build test's preflight, run
//! with nothing installable (`PGA_NO_INSTALL=1`) and a venv that does not exist.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn the_guest_harness_names_a_missing_venv_up_front() {
    let dir = tempfile::tempdir().expect("tmp");
    let venv = dir.path().join("no-venv");
    let o = Command::new(repo().join("tests/guest/run"))
        .args(["--preflight", "vm-boot", "vm-reset"])
        .env("PGAPPLIANCE_VENV", &venv)
        .env("PGA_NO_INSTALL", "1")
        .env("PGA_GUEST_WORK", dir.path().join("work"))
        .output()
        .expect("tests/guest/run");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("guest: 0 passed, 2 failed"), "{stdout}");
    if !is_root() {
        assert!(stderr.contains("need root"), "{stderr}");
        return;
    }
    for tool in ["weed", "aws"] {
        let named = format!("{}/bin/{tool} (the S3 server and client", venv.display());
        assert!(stderr.contains(&named), "{tool}: {stderr}");
    }
    assert!(stderr.contains("tools/install-deps"), "{stderr}");
    assert!(!dir.path().join("work").exists(), "nothing built: {stderr}");
    // The cloud scenarios also need the EC2 emulator; vm-boot does not.
    assert!(!stderr.contains("moto_server"), "{stderr}");
    let o = Command::new(repo().join("tests/guest/run"))
        .args(["--preflight", "cloud-init"])
        .env("PGAPPLIANCE_VENV", &venv)
        .env("PGA_NO_INSTALL", "1")
        .env("PGA_GUEST_WORK", dir.path().join("work"))
        .output()
        .expect("tests/guest/run");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}/bin/moto_server (the S3 server and client of vm-boot, vm-reset and the cloud scenarios, and their EC2 emulator",
            venv.display()
        )),
        "{stderr}"
    );
    // The venv the tests use passes the same preflight.
    let real = std::env::var_os("PGAPPLIANCE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    if real.join("bin/weed").exists() {
        let o = Command::new(repo().join("tests/guest/run"))
            .args(["--preflight", "vm-boot", "cloud-init"])
            .env("PGAPPLIANCE_VENV", &real)
            .env("PGA_NO_INSTALL", "1")
            .output()
            .expect("tests/guest/run");
        let stderr = String::from_utf8_lossy(&o.stderr);
        let lacks_programs = stderr.contains("the program ");
        assert!(
            o.status.success() || lacks_programs,
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn the_cross_build_test_names_what_it_lacks_up_front() {
    // A PATH with the few programs the script's preamble runs, and without cargo, rustup,
    // the cross compiler or qemu.
    let bin = tempfile::tempdir().expect("tmp");
    for program in ["dirname", "id"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(program))
            .find(|p| p.exists())
            .expect(program);
        std::os::unix::fs::symlink(found, bin.path().join(program)).expect("symlink");
    }
    let o = Command::new("/bin/bash")
        .arg(repo().join("tests/cross/run"))
        .arg("--preflight")
        .env("PATH", bin.path())
        .env("PGA_NO_INSTALL", "1")
        .output()
        .expect("tests/cross/run");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("cross: 0 passed, 1 failed"), "{stdout}");
    for program in [
        "cargo",
        "rustup",
        "aarch64-linux-gnu-gcc",
        "qemu-aarch64-static",
    ] {
        assert!(
            stderr.contains(&format!("the program {program} (")),
            "{program}: {stderr}"
        );
    }
}
