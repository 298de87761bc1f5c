//! The inventory's lsblk command run by util-linux 2.32.1's own lsblk (Rocky 8.6's version,
//! built from source by tools/build-el8-tools, which this test calls: it builds once, then
//! reuses the build) on this machine, next to the machine's own lsblk: the command is
//! accepted, the strings-only JSON parses, and both versions give the same devices.

use std::path::{Path, PathBuf};
use std::process::Command;

use pgappliance::inventory::parse::parse_lsblk;
use pgappliance::inventory::{lsblk_command, BlockDevice};

fn el8_tools() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/build-el8-tools");
    let out = Command::new(&script)
        .output()
        .expect("running tools/build-el8-tools");
    assert!(
        out.status.success(),
        "tools/build-el8-tools failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn run(program: &Path) -> std::process::Output {
    let spec = lsblk_command();
    Command::new(program)
        .args(&spec.args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

/// Devices with a size, flattened without their children (2.32.1 leaves out empty devices
/// such as an unused zram). Model, serial, filesystem and transport are left out of the
/// comparison: this 2.32.1 build reads them without udev, the host's lsblk through it.
fn flat(devs: &[BlockDevice], out: &mut Vec<BlockDevice>) {
    for d in devs {
        if d.size_bytes > 0 {
            out.push(BlockDevice {
                children: Vec::new(),
                model: None,
                serial: None,
                fstype: None,
                transport: None,
                ..d.clone()
            });
        }
        flat(&d.children, out);
    }
}

#[test]
fn lsblk_2_32_1_runs_the_inventory_command_and_agrees_with_the_hosts_lsblk() {
    let dir = el8_tools();
    let old = dir.join("lsblk");
    let version = Command::new(&old)
        .arg("--version")
        .output()
        .expect("version");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "lsblk from util-linux 2.32.1"
    );
    // What main ran before: PATH is unknown to 2.32.1.
    let path_col = Command::new(&old)
        .args(["-J", "-b", "-o", "NAME,PATH"])
        .output()
        .expect("lsblk");
    assert!(!path_col.status.success());
    assert!(String::from_utf8_lossy(&path_col.stderr).contains("unknown column: PATH"));

    let out = run(&old);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lsblk 2.32.1 {}: {}",
        lsblk_command().display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("\"size\": \"") && !stdout.contains("\"size\": 1"),
        "2.32.1 prints sizes as strings: {stdout}"
    );
    let old_devs = parse_lsblk(&stdout).expect("2.32.1 JSON parses");
    assert!(!old_devs.is_empty(), "{stdout}");
    for d in &old_devs {
        assert!(
            d.path.starts_with("/dev/") && !d.name.contains('/'),
            "{d:?}"
        );
    }

    let host = run(Path::new("lsblk"));
    assert!(host.status.success());
    let new_devs = parse_lsblk(&String::from_utf8_lossy(&host.stdout)).expect("host JSON parses");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flat(&old_devs, &mut a);
    flat(&new_devs, &mut b);
    assert!(!a.is_empty());
    assert_eq!(a, b, "2.32.1 and the host's lsblk see the same devices");
}
