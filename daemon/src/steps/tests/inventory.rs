use super::*;
use crate::host::stand_in::fails;
use crate::steps::inventory::Inventory;

#[tokio::test]
async fn inventory_is_collected_once_and_then_read_back() {
    let machine = StandInHost::new();
    answer_inventory(&machine, "inventory/lsblk-debian12-vm.json");
    let mut cx = context(DEBIAN_PLAN, machine);
    assert_eq!(
        check(&Inventory, &mut cx).await,
        Check::Todo("not collected yet".into())
    );
    assert!(
        host(&cx).script().commands().is_empty(),
        "check runs nothing"
    );

    apply(&Inventory, &mut cx).await.expect("apply");
    let commands = host(&cx).script().commands();
    assert_eq!(commands[0], "lscpu -J");
    assert!(
        commands[1].starts_with("lsblk -J -b -p -o NAME,"),
        "{commands:?}"
    );
    let inv = cx.inventory().expect("given");
    assert!(inv.cpu.model_name.is_some());
    assert!(
        inv.block_devices.iter().any(|d| d.name.contains("vda")),
        "{:?}",
        inv.block_devices
    );
    assert!(cx.run_dir.join("inventory.json").is_file());

    // Read back from the journal and inventory.json: no command.
    host(&cx).script().clear_commands();
    assert_eq!(check(&Inventory, &mut cx).await, Check::Done);
    assert!(host(&cx).script().commands().is_empty());
}

#[tokio::test]
async fn an_unreadable_inventory_file_is_collected_again_and_a_failing_lscpu_fails_the_step() {
    let machine = StandInHost::new();
    answer_inventory(&machine, "inventory/lsblk-debian12-vm.json");
    let mut cx = context(DEBIAN_PLAN, machine);
    apply(&Inventory, &mut cx).await.expect("apply");
    std::fs::write(cx.run_dir.join("inventory.json"), "{").expect("spoil");
    assert!(todo(&check(&Inventory, &mut cx).await));
    host(&cx)
        .script()
        .on("lscpu", &[], fails(1, "lscpu: failed to read"));
    let e = Inventory.apply(&mut cx).await.expect_err("lscpu fails");
    assert!(format!("{e:#}").contains("lscpu -J"), "{e:#}");
}
