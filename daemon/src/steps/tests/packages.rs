use super::*;
use crate::host::stand_in::fails;
use crate::steps::packages::{Packages, SignatureRefused};

/// A fresh Rocky 8: rpm knows none of the packages; dnf succeeds.
fn fresh_rocky() -> Context {
    let machine = StandInHost::new();
    machine.script().on("rpm", &["-q"], fails(1, ""));
    machine.script().on("dnf", &[], ok(""));
    context(ROCKY_PLAN, machine)
}

#[tokio::test]
async fn packages_on_rocky8_come_from_the_pgdg_repository_rpm_with_the_module_disabled() {
    let mut cx = fresh_rocky();
    let Check::Todo(why) = check(&Packages, &mut cx).await else {
        panic!("nothing is installed")
    };
    assert!(why.contains("postgresql15-server"), "{why}");
    assert!(
        host(&cx).script().commands_of("dnf").is_empty(),
        "check installs nothing"
    );
    assert!(host(&cx)
        .script()
        .commands()
        .iter()
        .all(|c| c.starts_with("rpm -q --quiet ")));

    host(&cx).script().clear_commands();
    apply(&Packages, &mut cx).await.expect("apply");
    let dnf = host(&cx).script().commands_of("dnf");
    let repo = cx.plan.postgres.repository.clone().expect("repository");
    assert_eq!(dnf[0], format!("dnf install -y {repo}"));
    assert_eq!(dnf[1], "dnf -qy module disable postgresql");
    let install = dnf.last().expect("install");
    for pkg in [
        "postgresql15",
        "postgresql15-server",
        "postgresql15-contrib",
        "lvm2",
        "xfsprogs",
        "tuned",
        "policycoreutils-python-utils",
    ] {
        assert!(
            install.split(' ').any(|w| w == pkg),
            "{pkg} is not in `{install}`"
        );
    }
    assert!(install.starts_with("dnf install -y "), "{install}");
    // The repository RPM: no repository file written.
    assert!(host(&cx)
        .read_file("/etc/yum.repos.d/pgdg-mirror.repo")
        .is_none());

    // Installed now: in place, and nothing more is run.
    host(&cx).script().on("rpm", &["-q"], ok(""));
    host(&cx).script().clear_commands();
    assert_eq!(check(&Packages, &mut cx).await, Check::Done);
    assert!(host(&cx).script().commands_of("dnf").is_empty());
}

#[tokio::test]
async fn only_the_missing_packages_are_installed_and_without_the_repository_when_postgresql_is_there(
) {
    let mut cx = fresh_rocky();
    host(&cx)
        .script()
        .on("rpm", &["-q", "--quiet", "postgresql15"], ok(""));
    host(&cx)
        .script()
        .on("rpm", &["-q", "--quiet", "postgresql15-server"], ok(""));
    host(&cx)
        .script()
        .on("rpm", &["-q", "--quiet", "postgresql15-contrib"], ok(""));
    assert!(todo(&check(&Packages, &mut cx).await));
    apply(&Packages, &mut cx).await.expect("apply");
    let dnf = host(&cx).script().commands_of("dnf");
    assert_eq!(dnf.len(), 1, "{dnf:?}");
    assert!(!dnf[0].contains("postgresql15"), "{}", dnf[0]);
    assert!(dnf[0].contains("tuned"), "{}", dnf[0]);
}

#[tokio::test]
async fn a_package_failing_its_signature_check_is_a_refusal_naming_it() {
    let mut cx = fresh_rocky();
    host(&cx).script().on(
        "dnf",
        &["install", "-y", "postgresql15"],
        fails(1, &fixture("dnf/gpg-check-failed-4.14.stderr")),
    );
    let e = apply(&Packages, &mut cx).await.expect_err("refused");
    let refused = e
        .chain()
        .find_map(|c| c.downcast_ref::<SignatureRefused>())
        .unwrap_or_else(|| panic!("not a refusal: {e:#}"));
    assert!(
        refused
            .reason
            .contains("postgresql15-server-15.18-1PGDG.rhel8.x86_64"),
        "{}",
        refused.reason
    );
    assert!(
        refused.command.starts_with("dnf install -y postgresql15"),
        "{}",
        refused.command
    );
}

#[tokio::test]
async fn packages_on_debian12_write_the_apt_source_of_the_plan() {
    let machine = StandInHost::new();
    machine.script().on("dpkg-query", &[], fails(1, ""));
    machine.script().on("apt-get", &[], ok(""));
    let plan = DEBIAN_PLAN.replace(
        "data_checksums = false",
        "data_checksums = false\nversion = 16\nrepository = \"https://apt.postgresql.org/pub/repos/apt\"",
    );
    let mut cx = context(&plan, machine);
    assert!(todo(&check(&Packages, &mut cx).await));
    apply(&Packages, &mut cx).await.expect("apply");
    let source = host(&cx)
        .read_file(crate::platform::PGDG_APT_SOURCE_FILE)
        .expect("the apt source is written");
    assert!(
        source.contains("https://apt.postgresql.org/pub/repos/apt bookworm-pgdg main"),
        "{source}"
    );
    let apt = host(&cx).script().commands_of("apt-get");
    assert!(
        apt.iter()
            .any(|c| c.contains("install") && c.contains("postgresql-16")),
        "{apt:?}"
    );
}
