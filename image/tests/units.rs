//! The units the appliance ships (`units/`) and the ones the daemon writes at run time (the
//! data volume's mount unit, the PostgreSQL drop-in and Debian's PGDG-layout service) pass
//! `systemd-analyze verify` without a warning, and use nothing systemd 239 (Rocky 8) lacks.

use std::path::{Path, PathBuf};
use std::process::Command;

use pgappliance::plan::{Filesystem, Platform};
use pgappliance::platform::{service_drop_in, Profile};
use pgappliance::storage::{mount_unit, mount_unit_name};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Directives and values that arrived after systemd 239.
const NEWER_THAN_239: [&str; 10] = [
    "Type=exec",
    "ExitType=",
    "OOMPolicy=",
    "RestartMode=",
    "RestartSteps=",
    "TimeoutStartFailureMode=",
    "LogNamespace=",
    "=append:",
    "=truncate:",
    "ConditionPathIsEncrypted=",
];

/// A root directory with the host's unit set (so dependencies such as dbus.socket resolve)
/// plus the units under test and stand-ins for the programs they start.
fn verify_root(units: &[(String, String)], programs: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let sys = root.path().join("usr/lib/systemd/system");
    std::fs::create_dir_all(&sys).expect("mkdir");
    let status = Command::new("cp")
        .args(["-r", "/usr/lib/systemd/system/."])
        .arg(&sys)
        .status()
        .expect("cp host units");
    assert!(
        status.success(),
        "the host has no /usr/lib/systemd/system to verify against"
    );
    for (rel, text) in units {
        let p = root.path().join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write unit");
    }
    for prog in programs {
        let p = root.path().join(prog.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::copy("/bin/true", &p).expect("stand-in program");
    }
    root
}

fn verify(root: &Path, unit_path: &str) {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .arg(unit_path)
        .output()
        .expect("systemd-analyze (Debian package systemd) runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify {unit_path}: {}\n{stderr}",
        out.status
    );
}

fn assert_239(name: &str, text: &str) {
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for bad in NEWER_THAN_239 {
            assert!(
                !line.contains(bad),
                "{name}: `{line}` needs a systemd newer than Rocky 8's 239"
            );
        }
    }
}

#[test]
fn shipped_units_verify_and_fit_systemd_239() {
    let dir = repo().join("units");
    let mut units = Vec::new();
    for e in std::fs::read_dir(&dir).expect("units/") {
        let p = e.expect("entry").path();
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        if name.ends_with(".service") || name.ends_with(".timer") || name.ends_with(".target") {
            let text = std::fs::read_to_string(&p).expect("read unit");
            assert_239(&name, &text);
            for line in text.lines() {
                let l = line.trim();
                if !l.is_empty() && !l.starts_with('#') && !l.starts_with('[') {
                    // "every directive commented": the line before a directive group is a
                    // comment or another directive of the same group.
                    assert!(l.contains('='), "{name}: `{l}` is not a directive");
                }
            }
            units.push((format!("usr/lib/systemd/system/{name}"), text));
        }
    }
    assert!(
        units
            .iter()
            .any(|(p, _)| p.ends_with("pgapplianced.service")),
        "units/pgapplianced.service is shipped"
    );
    let root = verify_root(&units, &["/usr/bin/pgapplianced"]);
    for (rel, _) in &units {
        verify(root.path(), &format!("/{rel}"));
    }
}

#[test]
fn every_directive_of_the_daemon_unit_has_a_comment_above_its_group() {
    let text = std::fs::read_to_string(repo().join("units/pgapplianced.service")).expect("unit");
    let mut prev_comment_or_directive = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') {
            prev_comment_or_directive = true;
        } else if l.is_empty() || l.starts_with('[') {
            prev_comment_or_directive = false;
        } else {
            assert!(
                prev_comment_or_directive,
                "`{l}` has no comment explaining it"
            );
        }
    }
    assert!(text.contains("Type=notify"));
    assert!(text.contains("ConditionPathExists=!/var/lib/pgappliance/done"));
    assert!(text.contains("RestartPreventExitStatus=3"));
}

#[test]
fn units_the_daemon_writes_verify() {
    let debian = Profile::of(Platform::Debian12);
    let pg_unit = debian.pg_unit(15);
    let pg_text = debian.pg_unit_file(15).expect("debian unit");
    let drop_in = service_drop_in(
        "/var/lib/pgappliance/pgdata/data",
        Some("/var/lib/pgappliance/pgdata"),
    );
    let mount_name = mount_unit_name("/var/lib/pgappliance/pgdata");
    let mount = mount_unit(
        "/dev/pgappliance/data",
        "/var/lib/pgappliance/pgdata",
        Filesystem::Xfs,
    );
    for (n, t) in [(&pg_unit, &pg_text), (&mount_name, &mount)] {
        assert_239(n, t);
    }
    assert_239("drop-in", &drop_in);
    let root = verify_root(
        &[
            (format!("etc/systemd/system/{pg_unit}"), pg_text),
            (
                format!("etc/systemd/system/{pg_unit}.d/pgappliance.conf"),
                drop_in,
            ),
            (format!("etc/systemd/system/{mount_name}"), mount),
        ],
        &["/usr/lib/postgresql/15/bin/postgres", "/bin/kill"],
    );
    verify(root.path(), &format!("/etc/systemd/system/{pg_unit}"));
    verify(root.path(), &format!("/etc/systemd/system/{mount_name}"));
}
