use super::*;
use crate::host::stand_in::Did;
use crate::steps::os_tuning::OsTuning;

fn rocky() -> Context {
    let machine = StandInHost::new();
    machine.script().on("grubby", &[], ok(""));
    context(ROCKY_PLAN, machine)
}

const BOOTED_WITH_ARGS: &str = "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro transparent_hugepage=never";

#[tokio::test]
async fn os_tuning_activates_tuned_sets_the_kernel_arguments_with_grubby_and_reboots_once() {
    let mut cx = rocky();
    let journal_before = std::fs::read(journal_path(&cx.workdir)).ok();
    assert_eq!(
        check(&OsTuning, &mut cx).await,
        Check::Todo("tuned profile postgresql not activated".into())
    );
    // The check writes nothing and runs nothing.
    assert!(host(&cx).script().commands().is_empty());
    assert!(host(&cx).did().is_empty());
    assert_eq!(
        std::fs::read(journal_path(&cx.workdir)).ok(),
        journal_before
    );

    let e = apply(&OsTuning, &mut cx)
        .await
        .expect_err("the reboot ends the step");
    assert!(format!("{e:#}").contains("rebooted"), "{e:#}");
    assert_eq!(
        host(&cx).did(),
        [Did::Tuned("postgresql".into()), Did::Reboot]
    );
    assert_eq!(
        host(&cx).script().commands(),
        ["grubby --update-kernel=ALL --args=transparent_hugepage=never"]
    );
    let state = &cx.journal.state.state.os_tuning;
    assert_eq!(state.tuned_profile.as_deref(), Some("postgresql"));
    assert_eq!(state.tuned_verified, Some(true));
    assert_eq!(state.reboot_from_boot.as_deref(), Some("boot-1"));

    // After the boot, with the arguments: recorded once, then in place.
    host(&cx).boot("boot-2", BOOTED_WITH_ARGS);
    host(&cx).write_file(
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise [never]\n",
    );
    let Check::Todo(why) = check(&OsTuning, &mut cx).await else {
        panic!("the command line is not recorded yet")
    };
    assert!(why.contains("not recorded"), "{why}");
    apply(&OsTuning, &mut cx)
        .await
        .expect("apply after the boot");
    assert_eq!(
        cx.journal.state.state.os_tuning.kernel_cmdline.as_deref(),
        Some(BOOTED_WITH_ARGS)
    );
    assert_eq!(check(&OsTuning, &mut cx).await, Check::Done);
    assert_eq!(
        host(&cx).did().len(),
        2,
        "no second tuned activation or reboot"
    );
    assert_eq!(host(&cx).script().commands().len(), 1, "grubby ran once");
}

#[tokio::test]
async fn kernel_arguments_still_missing_after_the_reboot_fail_the_step_without_another_reboot() {
    let mut cx = rocky();
    apply(&OsTuning, &mut cx).await.expect_err("reboot");
    host(&cx).boot("boot-2", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro");
    assert!(todo(&check(&OsTuning, &mut cx).await));
    let e = apply(&OsTuning, &mut cx).await.expect_err("missing");
    assert!(
        format!("{e:#}")
            .contains("transparent_hugepage=never are missing from /proc/cmdline after the reboot"),
        "{e:#}"
    );
    assert_eq!(
        host(&cx)
            .did()
            .iter()
            .filter(|d| **d == Did::Reboot)
            .count(),
        1
    );
}

#[tokio::test]
async fn a_thp_mode_other_than_the_argument_says_is_an_error_of_the_check() {
    let mut cx = rocky();
    apply(&OsTuning, &mut cx).await.expect_err("reboot");
    host(&cx).boot("boot-2", BOOTED_WITH_ARGS);
    // The fresh machine's THP is madvise.
    let e = OsTuning
        .check(&mut Looking::new(&mut cx))
        .await
        .expect_err("THP differs");
    assert!(
        format!("{e:#}").contains("transparent_hugepage=never"),
        "{e:#}"
    );
}

#[tokio::test]
async fn on_debian12_the_arguments_go_into_etc_default_grub_and_update_grub_runs() {
    let machine = StandInHost::new();
    machine.script().on("update-grub", &[], ok(""));
    machine.write_file(
        "/etc/default/grub",
        "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet\"\n",
    );
    let plan = DEBIAN_PLAN.replace(
        "tuned_profile = \"none\"",
        "tuned_profile = \"none\"\nkernel_args = [\"transparent_hugepage=never\"]",
    );
    let mut cx = context(&plan, machine);
    assert!(todo(&check(&OsTuning, &mut cx).await));
    apply(&OsTuning, &mut cx).await.expect_err("reboot");
    let grub = host(&cx).read_file("/etc/default/grub").expect("grub");
    assert!(grub.contains("transparent_hugepage=never"), "{grub}");
    assert!(grub.contains("quiet"), "{grub}");
    assert_eq!(host(&cx).script().commands(), ["update-grub"]);
    assert_eq!(host(&cx).did(), [Did::Reboot], "no tuned profile planned");
}
