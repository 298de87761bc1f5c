use super::*;
use crate::host::stand_in::Did;
use crate::steps::storage::Storage;
use crate::storage::StorageRefusal;

const LSBLK_EMPTY: &str = "inventory/lsblk-2.32.1-guest-two-empty-nvme.json";
const LSBLK_BUILT: &str = "inventory/lsblk-2.32.1-guest-stripe-built.json";

fn rocky_with(lsblk: &str) -> Context {
    let machine = StandInHost::new();
    machine.script().on("lsblk", &["-J"], ok(&fixture(lsblk)));
    for tool in ["wipefs", "pvcreate", "vgcreate", "lvcreate", "mkfs.xfs"] {
        machine.script().on(tool, &[], ok(""));
    }
    context(ROCKY_PLAN, machine)
}

#[tokio::test]
async fn storage_builds_the_striped_volume_and_mounts_it() {
    let mut cx = rocky_with(LSBLK_EMPTY);
    let journal_before = std::fs::read(journal_path(&cx.workdir)).ok();
    let Check::Todo(why) = check(&Storage, &mut cx).await else {
        panic!("no volume yet")
    };
    assert!(why.contains("no data volume yet"), "{why}");
    // The check only looks.
    assert_eq!(host(&cx).script().commands().len(), 1, "lsblk only");
    assert!(host(&cx).did().is_empty());
    assert_eq!(
        std::fs::read(journal_path(&cx.workdir)).ok(),
        journal_before
    );

    host(&cx).script().clear_commands();
    apply(&Storage, &mut cx).await.expect("apply");
    let built: Vec<String> = host(&cx)
        .script()
        .commands()
        .into_iter()
        .filter(|c| !c.starts_with("lsblk"))
        .collect();
    let tools: Vec<&str> = built
        .iter()
        .map(|c| c.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(
        tools,
        ["wipefs", "wipefs", "pvcreate", "vgcreate", "lvcreate", "mkfs.xfs"],
        "{built:#?}"
    );
    let lvcreate = &built[4];
    assert!(lvcreate.contains("--stripes 2"), "{lvcreate}");
    assert!(lvcreate.contains("--stripesize 64k"), "{lvcreate}");
    assert!(
        built[3].starts_with("vgcreate --yes pgappliance "),
        "{}",
        built[3]
    );
    let what = match &host(&cx).did()[0] {
        Did::Mount { what, at } => {
            assert_eq!(at, "/var/lib/pgappliance/pgdata");
            what.clone()
        }
        other => panic!("the first change is the mount, not {other:?}"),
    };
    assert!(
        built[5].ends_with(&what),
        "mkfs on the volume it mounts: {}",
        built[5]
    );
    assert_eq!(
        host(&cx).did()[1],
        Did::Label {
            path: "/var/lib/pgappliance/pgdata".into(),
            stage: "storage".into()
        }
    );
    let unit = host(&cx)
        .read_file("/etc/systemd/system/var-lib-pgappliance-pgdata.mount")
        .expect("the mount unit");
    assert!(unit.contains(&format!("What={what}")), "{unit}");
    assert_eq!(
        cx.journal.state.state.storage.claimed, None,
        "the claim is cleared"
    );

    // The devices now hold the stripe: in place.
    host(&cx)
        .script()
        .on("lsblk", &["-J"], ok(&fixture(LSBLK_BUILT)));
    assert_eq!(check(&Storage, &mut cx).await, Check::Done);
}

#[tokio::test]
async fn a_built_volume_that_is_not_mounted_is_only_mounted() {
    let mut cx = rocky_with(LSBLK_BUILT);
    let Check::Todo(why) = check(&Storage, &mut cx).await else {
        panic!("not mounted")
    };
    assert!(why.contains("not mounted"), "{why}");
    apply(&Storage, &mut cx).await.expect("apply");
    assert!(host(&cx)
        .script()
        .commands()
        .iter()
        .all(|c| c.starts_with("lsblk")));
    assert!(
        matches!(&host(&cx).did()[0], Did::Mount { what, .. } if what == "/dev/pgappliance/data")
    );
    assert_eq!(check(&Storage, &mut cx).await, Check::Done);
}

#[tokio::test]
async fn a_device_holding_a_filesystem_is_refused_by_the_check_before_anything_runs() {
    let mut cx = rocky_with("inventory/lsblk-2.32.1-guest-nvme0-holds-ext4.json");
    let e = Storage
        .check(&mut Looking::new(&mut cx))
        .await
        .expect_err("refused");
    assert!(
        e.chain()
            .any(|c| c.downcast_ref::<StorageRefusal>().is_some()),
        "{e:#}"
    );
    assert!(format!("{e:#}").contains("/dev/nvme0n1"), "{e:#}");
    assert_eq!(host(&cx).script().commands().len(), 1, "lsblk only");
    assert!(host(&cx).did().is_empty());
}
