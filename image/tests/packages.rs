//! `build --packages DIR` and `check --packages DIR`: the operator's packages carried in the
//! payload as a local repository, checked first. The RPMs are tests/guest/el8-repo's
//! (PGDG-layout PostgreSQL 15 packages and the distribution's stand-ins, signed with a key
//! made for the run; it needs rpmbuild, rpmsign, createrepo_c, gpg and PostgreSQL 15 here,
//! as `tools/install-deps` installs them); the .debs are built here with dpkg-deb.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use pgappliance_test_support::{describe, payload_members, workspace};

/// el8-repo's output, built once for this test binary.
fn el8() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("packages-el8-repo-{}", std::process::id()));
        let o = Command::new(workspace().join("tests/guest/el8-repo"))
            .arg(&out)
            .arg("http://127.0.0.1")
            .arg("15")
            .output()
            .expect("run tests/guest/el8-repo");
        assert!(
            o.status.success(),
            "el8-repo: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

fn key() -> PathBuf {
    el8().join("keys/PGDG-RPM-GPG-KEY-RHEL")
}

/// A copy of el8-repo's medium/ directory, for a test to change.
fn medium_copy(dir: &Path) -> PathBuf {
    let d = dir.join("pkgs");
    std::fs::create_dir(&d).expect("mkdir");
    for e in std::fs::read_dir(el8().join("medium")).expect("medium") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), d.join(e.file_name())).expect("copy");
    }
    d
}

fn one(dir: &Path, prefix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

/// The el8-dnf guest's plan (rocky8, PostgreSQL 15, no data volume, no tuned) with a mirror.
fn rocky_plan(dir: &Path, arch: &str) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("tests/guest/plans/el8-dnf.toml.in"))
        .expect("template");
    let mut out = String::new();
    for line in text.lines() {
        match line {
            "@REPOSITORY@" => out.push_str(
                "repository_baseurl = \"http://127.0.0.1:9/mirror\"\nrepository_gpgkey = \"http://127.0.0.1:9/mirror/KEY\"\n",
            ),
            l if l.starts_with("devices = ") => out.push_str("devices = \"none\"\n"),
            l if l.starts_with("layout = ")
                || l.starts_with("stripe_size = ")
                || l.starts_with("filesystem = ") => {}
            l if l.starts_with("arch = ") => out.push_str(&format!("arch = \"{arch}\"\n")),
            l => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    let p = dir.join(format!("rocky-{arch}.toml"));
    std::fs::write(&p, out).expect("plan");
    p
}

fn debian_plan(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(rocky_plan(dir, "x86_64")).expect("plan");
    let text = text
        .replace("platform = \"rocky8\"", "platform = \"debian12\"")
        .lines()
        .filter(|l| !l.starts_with("repository"))
        .collect::<Vec<_>>()
        .join("\n");
    let p = dir.join("debian.toml");
    std::fs::write(&p, text).expect("plan");
    p
}

fn daemon() -> PathBuf {
    static MADE: OnceLock<PathBuf> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("packages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test set-up");
        pgappliance_test_support::stand_in_daemon(&dir)
    })
    .clone()
}

fn pgappliance(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .expect("run pgappliance")
}

fn build(plan: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "build".as_ref(),
        plan.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--daemon-binary".as_ref(),
    ];
    let d = daemon();
    args.push(d.as_os_str());
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    pgappliance(&args)
}

fn check(plan: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["check".as_ref(), plan.as_os_str()];
    args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
    pgappliance(&args)
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(data))
}

fn gunzip(data: &[u8]) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut s)
        .expect("gunzip");
    s
}

const BASE: &str = "usr/share/pgappliance/packages";

#[test]
fn rocky_packages_go_into_the_payload_as_a_checked_repository() {
    let t = tempfile::tempdir().expect("tmp");
    let plan = rocky_plan(t.path(), "x86_64");
    let dir = medium_copy(t.path());
    let k = key();
    let medium = [
        "--packages",
        dir.to_str().expect("test set-up"),
        "--packages-key",
        k.to_str().expect("test set-up"),
    ];
    let out = t.path().join("out");
    let o = build(&plan, &out, &medium);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("packages         8 from") && stdout.contains("signatures checked against"),
        "{stdout}"
    );
    let m = payload_members(&out.join("payload.tar.gz"));
    let get = |name: &str| {
        m.iter()
            .find(|(p, _)| p == name)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| {
                panic!(
                    "{name} not in the payload: {:?}",
                    m.iter().map(|(p, _)| p).collect::<Vec<_>>()
                )
            })
    };
    let sums = String::from_utf8(get(&format!("{BASE}/SHA256SUMS"))).expect("utf-8");
    let mut files = 0;
    for e in std::fs::read_dir(&dir).expect("dir") {
        let p = e.expect("entry").path();
        let name = p
            .file_name()
            .expect("test set-up")
            .to_string_lossy()
            .into_owned();
        let data = std::fs::read(&p).expect("read");
        assert_eq!(get(&format!("{BASE}/{name}")), data, "{name}");
        assert!(
            sums.contains(&format!("{}  {name}\n", sha256(&data))),
            "{name} in {sums}"
        );
        files += 1;
    }
    assert_eq!(files, 8);
    assert_eq!(
        get(&format!("{BASE}/keys/PGDG-RPM-GPG-KEY-RHEL")),
        std::fs::read(&k).expect("key")
    );
    // createrepo_c's metadata names every package, each where the payload puts it.
    let repomd = String::from_utf8(get(&format!("{BASE}/repodata/repomd.xml"))).expect("utf-8");
    let primary_href = repomd
        .split("href=\"")
        .skip(1)
        .map(|s| s.split('"').next().expect("test set-up"))
        .find(|h| h.contains("primary.xml"))
        .expect("primary in repomd.xml");
    let primary = gunzip(&get(&format!("{BASE}/{primary_href}")));
    for pkg in [
        "postgresql15-server-15.18-1PGDG.rhel8.x86_64.rpm",
        "policycoreutils-python-utils-2.9-19.el8.noarch.rpm",
    ] {
        assert!(
            primary.contains(&format!("<location href=\"{pkg}\"/>")),
            "{pkg} in {primary_href}"
        );
    }
    // The same directory is all the plan needs.
    let o = check(&plan, &medium);
    assert!(o.status.success(), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("packages the plan needs on rocky8 x86_64: postgresql15 postgresql15-server postgresql15-contrib policycoreutils-python-utils")
            && stdout.contains("has all of them (8 package files, every signature checked)"),
        "{}",
        describe(&o)
    );
}

/// A refused build writes nothing into `--out`.
fn refused(plan: &Path, out: &Path, extra: &[&str], says: &[&str]) {
    let o = build(plan, out, extra);
    let all = describe(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    for s in says {
        assert!(all.contains(s), "{s:?} not in {all}");
    }
    assert!(!out.join("payload.tar.gz").exists(), "{all}");
}

#[test]
fn bad_package_directories_are_refused_naming_what_is_wrong() {
    let t = tempfile::tempdir().expect("tmp");
    let plan = rocky_plan(t.path(), "x86_64");
    let k = key();
    let k = k.to_str().expect("test set-up");
    let out = t.path().join("out");
    let dir = medium_copy(t.path());
    let d = dir.to_str().expect("test set-up");

    // Without a key, nothing is checked: refused.
    refused(&plan, &out, &["--packages", d], &["--packages-key FILE"]);
    // Not a directory, and a directory with no package.
    let file = t.path().join("file");
    std::fs::write(&file, "x").expect("test set-up");
    refused(
        &plan,
        &out,
        &[
            "--packages",
            file.to_str().expect("test set-up"),
            "--packages-key",
            k,
        ],
        &["not a directory"],
    );
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).expect("test set-up");
    refused(
        &plan,
        &out,
        &[
            "--packages",
            empty.to_str().expect("test set-up"),
            "--packages-key",
            k,
        ],
        &["no .rpm file in it", "dnf download --resolve"],
    );
    // The plan is for aarch64: every x86_64 package is named (by check: build would first
    // want an aarch64 daemon).
    let arm = rocky_plan(t.path(), "aarch64");
    let o = check(&arm, &["--packages", d, "--packages-key", k]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        describe(&o).contains("postgresql15-server-15.18-1PGDG.rhel8.x86_64.rpm: built for x86_64, but the plan's arch is aarch64 (it takes aarch64 or noarch)"),
        "{}",
        describe(&o)
    );

    // Signed by another key, and not signed at all.
    let server = one(&dir, "postgresql15-server-");
    std::fs::copy(one(&el8().join("badsig"), "postgresql15-server-"), &server)
        .expect("test set-up");
    let tools = one(&dir, "tuned-");
    std::fs::copy(one(&el8().join("os/Packages"), "tuned-"), &tools).expect("test set-up");
    refused(
        &plan,
        &out,
        &["--packages", d, "--packages-key", k],
        &[
            "2 package(s) failed the signature check",
            "postgresql15-server-15.18-1PGDG.rhel8.x86_64.rpm: signed with key",
            "which is none of the keys given",
            "tuned-2.18.0-2.el8.noarch.rpm: not signed",
        ],
    );
    let o = check(&plan, &["--packages", d, "--packages-key", k]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        describe(&o).contains("tuned-2.18.0-2.el8.noarch.rpm: not signed"),
        "{}",
        describe(&o)
    );
    std::fs::copy(one(&el8().join("medium"), "postgresql15-server-"), &server)
        .expect("test set-up");
    std::fs::copy(one(&el8().join("medium"), "tuned-"), &tools).expect("test set-up");

    // A package the plan needs is not there: build and check name it.
    std::fs::remove_file(one(&dir, "postgresql15-contrib-")).expect("test set-up");
    refused(
        &plan,
        &out,
        &["--packages", d, "--packages-key", k],
        &["it lacks postgresql15-contrib of the packages the plan needs on rocky8"],
    );
    let o = check(&plan, &["--packages", d]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        describe(&o).contains(&format!("{d} lacks postgresql15-contrib: download them")),
        "{}",
        describe(&o)
    );

    // A .deb among RPMs is for another platform.
    std::fs::write(dir.join("tuned_2.20.0-1_all.deb"), "x").expect("test set-up");
    refused(
        &plan,
        &out,
        &["--packages", d, "--packages-key", k],
        &["tuned_2.20.0-1_all.deb: a .deb, but the plan's platform is rocky8"],
    );
}

/// A real .deb of `name` for `arch`, made with dpkg-deb.
fn deb(dir: &Path, name: &str, arch: &str) -> PathBuf {
    let root = dir.join(format!("root-{name}-{arch}"));
    std::fs::create_dir_all(root.join("DEBIAN")).expect("test set-up");
    std::fs::create_dir_all(root.join("usr/share/doc").join(name)).expect("test set-up");
    std::fs::write(root.join("usr/share/doc").join(name).join("README"), name)
        .expect("test set-up");
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: 15.18-1\nArchitecture: {arch}\nMaintainer: test <t@example.invalid>\nDescription: a test package\n made by image/tests/packages.rs\n"
        ),
    )
    .expect("test set-up");
    let file = dir.join(format!("{name}_15.18-1_{arch}.deb"));
    let o = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&root)
        .arg(&file)
        .output()
        .expect("dpkg-deb");
    assert!(o.status.success(), "{}", describe(&o));
    std::fs::remove_dir_all(&root).expect("test set-up");
    file
}

#[test]
fn debian_packages_get_a_packages_index_with_their_sha256() {
    let t = tempfile::tempdir().expect("tmp");
    let plan = debian_plan(t.path());
    let dir = t.path().join("debs");
    std::fs::create_dir(&dir).expect("test set-up");
    let d = dir.to_str().expect("test set-up");
    let pg = deb(&dir, "postgresql-15", "amd64");
    deb(&dir, "postgresql-common", "all");
    let out = t.path().join("out");
    let o = check(&plan, &["--packages", d]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(
        describe(&o).contains("packages the plan needs on debian12 x86_64: postgresql-15\n"),
        "{}",
        describe(&o)
    );
    let o = build(&plan, &out, &["--packages", d]);
    assert!(o.status.success(), "{}", describe(&o));
    let m = payload_members(&out.join("payload.tar.gz"));
    let index = m
        .iter()
        .find(|(p, _)| *p == format!("{BASE}/Packages"))
        .map(|(_, d)| String::from_utf8(d.clone()).expect("test set-up"))
        .expect("Packages in the payload");
    let data = std::fs::read(&pg).expect("test set-up");
    assert!(
        index.contains("Package: postgresql-15\nVersion: 15.18-1\nArchitecture: amd64\n")
            && index.contains(&format!(
                "Filename: ./postgresql-15_15.18-1_amd64.deb\nSize: {}\nSHA256: {}\n",
                data.len(),
                sha256(&data)
            ))
            && index.contains("Package: postgresql-common\n"),
        "{index}"
    );
    // .debs have no signature of their own to check against a key.
    let k = key();
    refused(
        &plan,
        &out.with_extension("2"),
        &[
            "--packages",
            d,
            "--packages-key",
            k.to_str().expect("test set-up"),
        ],
        &[".debs carry no signature of their own"],
    );
    // An arm64 package for an x86_64 plan, and an RPM for debian12.
    deb(&dir, "tuned", "arm64");
    std::fs::copy(
        one(&el8().join("medium"), "tuned-"),
        dir.join("tuned.noarch.rpm"),
    )
    .expect("test set-up");
    refused(
        &plan,
        &out.with_extension("3"),
        &["--packages", d],
        &[
            "tuned_15.18-1_arm64.deb: built for arm64, but the plan's arch is x86_64 (it takes amd64 or all)",
            "tuned.noarch.rpm: a .rpm, but the plan's platform is debian12",
        ],
    );
    // Without postgresql-15, check names it.
    std::fs::remove_file(dir.join("tuned_15.18-1_arm64.deb")).expect("test set-up");
    std::fs::remove_file(dir.join("tuned.noarch.rpm")).expect("test set-up");
    std::fs::remove_file(&pg).expect("test set-up");
    let o = check(&plan, &["--packages", d]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        describe(&o).contains("lacks postgresql-15"),
        "{}",
        describe(&o)
    );
}
