//! Storage planning against block-device fixtures: empty NVMe found and striped, devices
//! holding data refused with the reason, explicit wipe, an earlier boot's volume found.

use pgappliance::inventory::parse::parse_lsblk;
use pgappliance::inventory::BlockDevice;
use pgappliance::plan::{Devices, Layout, Storage};
use pgappliance::storage::{plan_storage, StoragePlan, StorageRefusal};

fn devices(name: &str) -> Vec<BlockDevice> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let path = [
        dir.join("storage").join(name),
        dir.join("inventory").join(name),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("fixture {name}"));
    parse_lsblk(&std::fs::read_to_string(path).expect("read")).expect("parse")
}

fn storage(devices: Devices, layout: Layout, wipe: bool) -> Storage {
    Storage {
        devices,
        layout,
        wipe,
        ..Storage::default()
    }
}

fn list(paths: &[&str]) -> Devices {
    Devices::List(paths.iter().map(|p| p.to_string()).collect())
}

#[test]
fn auto_stripes_the_empty_instance_store_and_leaves_the_root_disk() {
    let plan = plan_storage(
        &storage(Devices::Auto, Layout::Stripe, false),
        &devices("lsblk-two-empty-nvme.json"),
    )
    .expect("plan");
    let StoragePlan::Build {
        devices,
        commands,
        mount_unit,
        what,
    } = plan
    else {
        panic!("expected a build: {plan:?}");
    };
    assert_eq!(devices, ["/dev/nvme1n1", "/dev/nvme2n1"]);
    // Every claimed device is wiped first: lvm2 refuses a disk that carries only a
    // partition table, which lsblk 2.32.1 cannot show.
    assert_eq!(commands[0], ["wipefs", "--all", "/dev/nvme1n1"]);
    assert_eq!(commands[1], ["wipefs", "--all", "/dev/nvme2n1"]);
    assert_eq!(
        commands[2],
        ["pvcreate", "--yes", "/dev/nvme1n1", "/dev/nvme2n1"]
    );
    assert_eq!(
        commands[3],
        [
            "vgcreate",
            "--yes",
            "pgappliance",
            "/dev/nvme1n1",
            "/dev/nvme2n1"
        ]
    );
    assert_eq!(
        commands[4],
        [
            "lvcreate",
            "--yes",
            "--name",
            "data",
            "--extents",
            "100%FREE",
            "--stripes",
            "2",
            "--stripesize",
            "64k",
            "pgappliance"
        ]
    );
    assert_eq!(commands[5], ["mkfs.xfs", "-f", "/dev/pgappliance/data"]);
    assert_eq!(mount_unit, "var-lib-pgappliance-pgdata.mount");
    assert_eq!(what, "/dev/pgappliance/data");
}

#[test]
fn a_device_with_a_filesystem_is_refused_naming_it() {
    let err = plan_storage(
        &storage(
            list(&["/dev/nvme0n1", "/dev/nvme1n1"]),
            Layout::Stripe,
            false,
        ),
        &devices("lsblk-nvme-with-filesystem.json"),
    )
    .expect_err("refused");
    assert_eq!(
        err,
        StorageRefusal::NotEmpty {
            device: "/dev/nvme1n1".into(),
            what: "holds a xfs filesystem".into()
        }
    );
    assert!(err.to_string().contains("wipe = true"));
}

#[test]
fn auto_does_not_count_a_device_that_holds_data() {
    let err = plan_storage(
        &storage(Devices::Auto, Layout::Stripe, false),
        &devices("lsblk-nvme-with-filesystem.json"),
    )
    .expect_err("one empty device cannot stripe");
    assert!(
        matches!(err, StorageRefusal::WrongCount { found: 1, .. }),
        "{err:?}"
    );
}

#[test]
fn wipe_on_a_named_device_adds_wipefs() {
    let plan = plan_storage(
        &storage(
            list(&["/dev/nvme0n1", "/dev/nvme1n1"]),
            Layout::Stripe,
            true,
        ),
        &devices("lsblk-nvme-with-filesystem.json"),
    )
    .expect("plan");
    let StoragePlan::Build { commands, .. } = plan else {
        panic!("build")
    };
    assert_eq!(commands[0], ["wipefs", "--all", "/dev/nvme0n1"]);
    assert_eq!(commands[1], ["wipefs", "--all", "/dev/nvme1n1"]);
    assert_eq!(commands[2][0], "pvcreate");
}

#[test]
fn mounted_devices_are_never_wiped() {
    let err = plan_storage(
        &storage(
            list(&["/dev/nvme0n1", "/dev/nvme1n1"]),
            Layout::Stripe,
            true,
        ),
        &devices("lsblk-rocky8-altra-composed.json"),
    )
    .expect_err("mounted");
    assert!(matches!(err, StorageRefusal::Mounted { .. }), "{err:?}");
    assert!(err.to_string().contains("/boot/efi") || err.to_string().contains("mounted"));
}

#[test]
fn altra_without_empty_nvme_says_what_it_saw() {
    let err = plan_storage(
        &storage(Devices::Auto, Layout::Stripe, false),
        &devices("lsblk-rocky8-altra-composed.json"),
    )
    .expect_err("none empty");
    let msg = err.to_string();
    assert!(msg.contains("no empty NVMe"), "{msg}");
    assert!(msg.contains("/dev/nvme1n1 holds partitions"), "{msg}");
}

#[test]
fn an_earlier_boots_volume_is_found_not_rebuilt() {
    for devs in [Devices::Auto, list(&["/dev/nvme0n1", "/dev/nvme1n1"])] {
        let plan = plan_storage(
            &storage(devs, Layout::Stripe, false),
            &devices("lsblk-stripe-already-built.json"),
        )
        .expect("plan");
        assert_eq!(
            plan,
            StoragePlan::AlreadyBuilt {
                devices: vec!["/dev/nvme0n1".into(), "/dev/nvme1n1".into()]
            }
        );
    }
}

#[test]
fn unknown_devices_are_named() {
    let err = plan_storage(
        &storage(list(&["/dev/nvme7n1"]), Layout::Single, false),
        &devices("lsblk-two-empty-nvme.json"),
    )
    .expect_err("unknown");
    assert!(err.to_string().contains("/dev/nvme7n1"));
}

#[test]
fn single_layout_makes_a_plain_volume() {
    let plan = plan_storage(
        &storage(list(&["/dev/nvme1n1"]), Layout::Single, false),
        &devices("lsblk-two-empty-nvme.json"),
    )
    .expect("plan");
    let StoragePlan::Build { commands, .. } = plan else {
        panic!("build")
    };
    let lv = commands
        .iter()
        .find(|c| c[0] == "lvcreate")
        .expect("lvcreate");
    assert!(!lv.iter().any(|a| a == "--stripes"));
}

/// Real util-linux 2.32.1 output (captured in the el8-tools guest): every value a string,
/// NAME printed as the path with `-p`.
#[test]
fn lsblk_2_32_1_captures_plan_the_stripe_and_find_it_built() {
    let plan = plan_storage(
        &storage(Devices::Auto, Layout::Stripe, false),
        &devices("lsblk-2.32.1-guest-two-empty-nvme.json"),
    )
    .expect("plan");
    let StoragePlan::Build { devices: devs, .. } = plan else {
        panic!("expected a build: {plan:?}")
    };
    assert_eq!(devs, ["/dev/nvme1n1", "/dev/nvme0n1"]);
    let built = plan_storage(
        &storage(Devices::Auto, Layout::Stripe, false),
        &devices("lsblk-2.32.1-guest-stripe-built.json"),
    )
    .expect("plan");
    assert_eq!(
        built,
        StoragePlan::AlreadyBuilt {
            devices: vec!["/dev/nvme1n1".into(), "/dev/nvme0n1".into()]
        }
    );
}

#[test]
fn lsblk_2_32_1_capture_of_a_drive_holding_ext4_is_refused_naming_it() {
    let err = plan_storage(
        &storage(
            list(&["/dev/nvme0n1", "/dev/nvme1n1"]),
            Layout::Stripe,
            false,
        ),
        &devices("lsblk-2.32.1-guest-nvme0-holds-ext4.json"),
    )
    .expect_err("refused");
    assert_eq!(
        err,
        StorageRefusal::NotEmpty {
            device: "/dev/nvme0n1".into(),
            what: "holds a ext4 filesystem".into()
        }
    );
}
