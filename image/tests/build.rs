//! `pgappliance build`: the payload is deterministic and complete, the kickstart passes
//! `ksvalidator -v RHEL8` and `bash -n` on its scripts, the user-data passes
//! `cloud-init schema`, bad input is refused with nothing left in DIR, and `--out` is only
//! ever a new or empty directory or an earlier build: nothing else there is touched.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pgappliance_test_support::launch::fake_aarch64_binary;
use pgappliance_test_support::payload_members;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A small native executable standing in for the daemon: `/bin/true` with the mark of a
/// pgapplianced build appended (the builder reads its ELF header and looks for the mark,
/// then packs it; a debug build of the real daemon is large and slow to compress).
fn native_daemon() -> PathBuf {
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("build-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test set-up");
        pgappliance_test_support::stand_in_daemon(&dir)
    })
    .clone()
}

/// Appends the mark of a pgapplianced build to the program at `p`.
fn mark(p: &Path) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(p)
        .and_then(|mut f| f.write_all(pgappliance::identity::marker().as_bytes()))
        .expect("mark");
}

fn build_command(plan: &Path, out: &Path, daemon: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pgappliance"));
    c.arg("build")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .arg("--daemon-binary")
        .arg(daemon)
        .args(extra)
        .env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

fn build(plan: &Path, out: &Path, daemon: &Path, extra: &[&str]) -> Output {
    build_command(plan, out, daemon, extra)
        .output()
        .expect("run pgappliance build")
}

/// `build` run from `cwd`.
fn build_in(cwd: &Path, plan: &Path, out: &Path, daemon: &Path, extra: &[&str]) -> Output {
    build_command(plan, out, daemon, extra)
        .current_dir(cwd)
        .output()
        .expect("run pgappliance build")
}

/// `build --store` is the store the appliance writes to: the packed plan names it (and
/// the endpoint given with it), the rest of the plan is as written, and the build says so;
/// a store the plan checks refuse is refused naming it.
#[test]
fn a_store_given_to_build_is_the_one_the_packed_plan_uploads_to() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let out = dir.path().join("out");
    let o = build(
        &plan,
        &out,
        &daemon,
        &[
            "--store",
            "s3://other/campaign-2",
            "--endpoint",
            "https://s3.lab.example:9000",
        ],
    );
    let text = describe(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("store            the appliance uploads to s3://other/campaign-2 (--store; the plan's s3://pgappliance-results/altra replaced in the packed plan)"),
        "{text}"
    );
    let packed = payload_members(&out.join("payload.tar.gz"))
        .into_iter()
        .find(|(p, _)| p == "etc/pgappliance/plan.toml")
        .map(|(_, d)| String::from_utf8(d).expect("utf-8"))
        .expect("the plan in the payload");
    let written = std::fs::read_to_string(&plan).expect("plan");
    assert_eq!(
        packed,
        written
            .replace("s3://pgappliance-results/altra", "s3://other/campaign-2")
            .replace(
                "https://objects.lab.example:9000",
                "https://s3.lab.example:9000"
            )
    );
    let o = build(
        &plan,
        &dir.path().join("bad"),
        &daemon,
        &["--store", "ftp://x/y"],
    );
    let text = describe(&o);
    // A usage error naming the flag, not the plan's line the value would replace.
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("'ftp://x/y' for '--store") && text.contains("is not a store URL"),
        "{text}"
    );
    assert!(!dir.path().join("bad").exists(), "{text}");
}

/// Every file under `dir` with its content, for "nothing was touched" comparisons.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("ls") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn describe(o: &Output) -> String {
    format!(
        "status {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn venv_bin(name: &str) -> PathBuf {
    std::env::var_os("PGAPPLIANCE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"))
        .join("bin")
        .join(name)
}

/// The Altra example with the placeholder key replaced by `key_lines` under `[install]`
/// (the way in), another time zone, written to `dir`.
fn altra_with(dir: &Path, name: &str, way_in: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("examples/altra-q80.toml")).expect("plan");
    let placeholder = text
        .lines()
        .find(|l| l.starts_with("ssh_authorized_keys") && l.contains("REPLACE"))
        .expect("the example's placeholder key");
    let text = text
        .replace(placeholder, way_in)
        .replace("timezone = \"UTC\"", "timezone = \"Europe/Berlin\"");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

const TEST_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests0000000000000000000000 ops@lab";

fn plan_with_keys(dir: &Path) -> PathBuf {
    altra_with(
        dir,
        "altra.toml",
        &format!("ssh_authorized_keys = [\"{TEST_KEY}\"]"),
    )
}

#[test]
fn payload_is_byte_identical_across_builds_and_holds_what_the_appliance_needs() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        let o = build(&plan, out, &daemon, &[]);
        assert!(o.status.success(), "{}", describe(&o));
    }
    let pa = std::fs::read(a.join("payload.tar.gz")).expect("a");
    let pb = std::fs::read(b.join("payload.tar.gz")).expect("b");
    assert_eq!(pa, pb, "two builds give byte-identical payloads");
    let sha = std::fs::read_to_string(a.join("payload.tar.gz.sha256")).expect("sha");
    let listing = Command::new("sha256sum")
        .arg("-c")
        .arg("payload.tar.gz.sha256")
        .current_dir(&a)
        .output()
        .expect("sha256sum");
    assert!(listing.status.success(), "{sha}");

    let mut gz = flate2::read::GzDecoder::new(pa.as_slice());
    let mut raw = Vec::new();
    gz.read_to_end(&mut raw).expect("gunzip");
    let mut tar = tar::Archive::new(raw.as_slice());
    let mut names = Vec::new();
    for e in tar.entries().expect("entries") {
        let e = e.expect("entry");
        let h = e.header();
        assert_eq!(h.uid().expect("uid"), 0);
        assert_eq!(h.gid().expect("gid"), 0);
        assert_eq!(h.mtime().expect("mtime"), 1_700_000_000);
        let path = e.path().expect("path").display().to_string();
        let mode = h.mode().expect("mode");
        if path == "usr/bin/pgapplianced" {
            assert_eq!(mode, 0o755);
        }
        if path.ends_with(".toml") || path.ends_with(".conf") {
            assert_eq!(mode, 0o644, "{path}");
        }
        names.push(path);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "members are sorted");
    for want in [
        "usr/bin/pgapplianced",
        "etc/pgappliance/plan.toml",
        "usr/lib/tuned/postgresql/tuned.conf",
        "usr/lib/systemd/system/pgapplianced.service",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert!(!String::from_utf8_lossy(&raw).contains("secret_access_key"));
}

#[test]
fn kickstart_passes_ksvalidator_and_bash_n() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let out = dir.path().join("out");
    let o = build(&plan_with_keys(dir.path()), &out, &daemon, &[]);
    assert!(o.status.success(), "{}", describe(&o));
    let ks = out.join("ks.cfg");
    let text = std::fs::read_to_string(&ks).expect("ks.cfg");
    assert!(text.contains("bootloader --boot-drive=sda --append=\"transparent_hugepage=never\""));
    assert!(text.contains("ignoredisk --only-use=sda"));
    assert!(text.contains("sshkey --username=root \"ssh-ed25519 "));
    assert!(text.contains("timezone Europe/Berlin --utc"));
    // Every tool the daemon's rocky8 package list names (semanage's
    // policycoreutils-python-utils among them) is installed by the kickstart already.
    let packages: Vec<&str> = text
        .split("%packages\n")
        .nth(1)
        .and_then(|s| s.split("%end").next())
        .expect("a %packages section")
        .lines()
        .map(str::trim)
        .collect();
    let rocky = pgappliance::platform::Profile::of(pgappliance::plan::Platform::Rocky8);
    for tool in rocky
        .packages(14)
        .iter()
        .filter(|p| !p.starts_with("postgresql"))
    {
        assert!(
            packages.contains(&tool.as_str()),
            "{tool} not in %packages: {packages:?}"
        );
    }
    assert!(packages.contains(&"policycoreutils-python-utils"));
    // A marker is @NAME@ with NAME in capitals: look after every '@', not just in pairs
    // (the ssh key comment "ops@lab" holds one too).
    let unfilled = text.match_indices('@').any(|(at, _)| {
        let rest = &text[at + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect();
        !name.is_empty() && rest[name.len()..].starts_with('@')
    });
    assert!(!unfilled, "every marker filled");
    let v = Command::new(venv_bin("ksvalidator"))
        .args(["-v", "RHEL8"])
        .arg(&ks)
        .output()
        .expect("ksvalidator (tools/install-deps)");
    assert!(v.status.success(), "ksvalidator: {}", describe(&v));
    // The validator itself refuses a broken kickstart.
    let broken = dir.path().join("broken.cfg");
    std::fs::write(&broken, text.replace("%end\n", "")).expect("write");
    let v = Command::new(venv_bin("ksvalidator"))
        .args(["-v", "RHEL8"])
        .arg(&broken)
        .output()
        .expect("ksvalidator");
    assert!(!v.status.success());
    let mut sections = 0;
    let mut body: Option<String> = None;
    for line in text.lines() {
        if body.is_some() && line.trim() == "%end" {
            let script = dir.path().join(format!("section{sections}.sh"));
            std::fs::write(&script, body.take().unwrap_or_default()).expect("write");
            let n = Command::new("bash")
                .arg("-n")
                .arg(&script)
                .output()
                .expect("bash");
            assert!(
                n.status.success(),
                "bash -n section {sections}: {}",
                describe(&n)
            );
            sections += 1;
        } else if let Some(b) = body.as_mut() {
            b.push_str(line);
            b.push('\n');
        } else if line.starts_with("%post") || line.starts_with("%pre") {
            body = Some(String::new());
        }
    }
    assert_eq!(sections, 2, "both %post sections checked");
}

#[test]
fn user_data_passes_cloud_init_schema_and_fits_ec2() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let plan = example_with_pinned_tpcc(dir.path(), "m5d-8xlarge.toml");
    let url = "https://objects.lab.example/pgappliance/payload.tar.gz?X-Amz-Signature=abc123";
    let o = build(&plan, &out, &native_daemon(), &["--payload-url", url]);
    assert!(o.status.success(), "{}", describe(&o));
    let ud = out.join("user-data.yaml");
    let text = std::fs::read_to_string(&ud).expect("user-data");
    assert!(text.len() < 16 * 1024);
    let sha = std::fs::read_to_string(out.join("payload.tar.gz.sha256")).expect("sha");
    assert!(text.contains(sha.split_whitespace().next().expect("hex")));
    assert!(text.contains(url));
    assert!(text.contains("--no-block"));
    let v = Command::new("cloud-init")
        .args(["schema", "--config-file"])
        .arg(&ud)
        .output()
        .expect("cloud-init (tools/install-deps)");
    assert!(v.status.success(), "cloud-init schema: {}", describe(&v));
    // The validator refuses a broken cloud-config.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, text.replace("runcmd:", "runcmd: 5\nx:")).expect("write");
    let v = Command::new("cloud-init")
        .args(["schema", "--config-file"])
        .arg(&broken)
        .output()
        .expect("cloud-init");
    assert!(!v.status.success(), "{}", describe(&v));
}

#[test]
fn bad_input_is_refused_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let altra = repo().join("examples/altra-q80.toml");
    // The native (x86_64) binary for an aarch64 plan.
    let o = build(&altra, &out, &native_daemon(), &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("x86_64") && err.contains("aarch64"), "{err}");
    // Not a binary at all, and a missing one.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").expect("write");
    let o = build(&altra, &out, &text, &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an ELF executable"));
    let o = build(&altra, &out, &dir.path().join("missing"), &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing"));
    // A payload URL that would break the scripts, and ones instances cannot fetch.
    for url in [
        "https://x/'; rm -rf /",
        "ftp://objects.lab.example/payload.tar.gz",
        "file:///var/tmp/payload.tar.gz",
        "https:///payload.tar.gz",
        "objects.lab.example/payload.tar.gz",
    ] {
        let o = build(
            &altra,
            &out,
            &fake_aarch64_binary(dir.path()),
            &["--payload-url", url],
        );
        assert_eq!(o.status.code(), Some(1), "{url}: {}", describe(&o));
        let err = stderr(&o);
        assert!(
            err.contains("--payload-url") && err.contains(url),
            "{url}: {err}"
        );
    }
    assert!(!out.exists(), "nothing half written");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pgappliance-build-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A small ISO with the Rocky 8 aarch64 boot layout: volume id, EFI/BOOT/grub.cfg with the
/// install, media-test and troubleshooting entries, images/efiboot.img (FAT) holding its own
/// grub.cfg, images/pxeboot/vmlinuz; El Torito EFI boot; Joliet; an implanted md5.
fn synthetic_rocky_iso(dir: &Path) -> PathBuf {
    rocky_iso(dir, "Rocky-8-6-aarch64-dvd", &[])
}

/// [`synthetic_rocky_iso`] with another volume id and more files at the ISO's root
/// (`.treeinfo`, `.discinfo`).
fn rocky_iso(dir: &Path, label: &str, root_files: &[(&str, &str)]) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("EFI/BOOT")).expect("mkdir");
    std::fs::create_dir_all(tree.join("images/pxeboot")).expect("mkdir");
    for (name, text) in root_files {
        std::fs::write(tree.join(name), text).expect("root file");
    }
    let grub = format!(
        "set default=\"1\"\n\nset timeout=60\nsearch --no-floppy --set=root -l '{label}'\n\
         menuentry 'Install Rocky Linux 8.6' --class red --class gnu-linux --class gnu --class os {{\n\
         \tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={label} ro\n\tinitrd /images/pxeboot/initrd.img\n}}\n\
         menuentry 'Test this media & install Rocky Linux 8.6' --class red --class gnu-linux --class gnu --class os {{\n\
         \tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={label} rd.live.check\n\tinitrd /images/pxeboot/initrd.img\n}}\n\
         submenu 'Troubleshooting -->' {{\n\tmenuentry 'Rescue a Rocky Linux system' --class red {{\n\
         \t\tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={label} inst.rescue\n\t\tinitrd /images/pxeboot/initrd.img\n\t}}\n}}\n"
    );
    std::fs::write(tree.join("EFI/BOOT/grub.cfg"), &grub).expect("grub");
    std::fs::write(tree.join("EFI/BOOT/BOOTAA64.EFI"), "efi").expect("efi");
    std::fs::write(tree.join("images/pxeboot/vmlinuz"), "kernel").expect("kernel");
    std::fs::write(tree.join("images/pxeboot/initrd.img"), "initrd").expect("initrd");
    let img = tree.join("images/efiboot.img");
    let sh = |script: &str| {
        let o = Command::new("bash")
            .args(["-ec", script])
            .current_dir(dir)
            .output()
            .expect("bash");
        assert!(o.status.success(), "{script}: {}", describe(&o));
    };
    sh(&format!(
        "mkfs.fat -C {img} 2048 >/dev/null; mmd -i {img} ::/EFI ::/EFI/BOOT; \
         mcopy -i {img} tree/EFI/BOOT/grub.cfg tree/EFI/BOOT/BOOTAA64.EFI ::/EFI/BOOT/; \
         xorriso -as mkisofs -quiet -V {label} -J -joliet-long -r -e images/efiboot.img -no-emul-boot -o rocky.iso tree; \
         implantisomd5 rocky.iso >/dev/null",
        img = img.display()
    ));
    dir.join("rocky.iso")
}

fn xorriso(args: &[&str]) -> String {
    let o = Command::new("xorriso")
        .args(args)
        .output()
        .expect("xorriso");
    assert!(o.status.success(), "{}", describe(&o));
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether the ISO has a Joliet supplementary volume descriptor.
fn has_joliet(iso: &Path) -> bool {
    let bytes = std::fs::read(iso).expect("iso");
    (16..32).any(|sector| {
        let d = &bytes[sector * 2048..sector * 2048 + 2048];
        d[0] == 2
            && &d[1..6] == b"CD001"
            && [b"%/@", b"%/C", b"%/E"].iter().any(|e| &d[88..91] == *e)
    })
}

#[test]
fn rocky_iso_is_remastered_to_boot_the_kickstart() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = synthetic_rocky_iso(dir.path());
    let out = dir.path().join("out");
    let daemon = fake_aarch64_binary(dir.path());
    let o = build(
        &plan_with_keys(dir.path()),
        &out,
        &daemon,
        &["--iso", &input.display().to_string()],
    );
    assert!(o.status.success(), "{}", describe(&o));
    // What next: boot the ISO, then follow the launch.
    assert!(
        stdout_has(
            &o,
            &format!(
                "next: boot {}/appliance.iso on the server: `pgappliance launch",
                out.display()
            )
        ) && stdout_has(&o, "next: `pgappliance wait LAUNCH_ID --store STORE`"),
        "{}",
        describe(&o)
    );
    let iso = out.join("appliance.iso");
    let path = iso.display().to_string();
    let pvd = xorriso(&["-indev", &path, "-pvd_info"]);
    assert!(
        pvd.contains("Volume Id    : Rocky-8-6-aarch64-dvd"),
        "{pvd}"
    );
    let boot = xorriso(&["-indev", &path, "-report_el_torito", "plain"]);
    assert!(
        boot.contains("UEFI") && boot.contains("/images/efiboot.img"),
        "{boot}"
    );
    let files = xorriso(&["-indev", &path, "-find", "/", "-type", "f"]);
    for f in [
        "/ks.cfg",
        "/pgappliance/payload.tar.gz",
        "/pgappliance/payload.tar.gz.sha256",
        "/images/pxeboot/vmlinuz",
    ] {
        assert!(files.contains(&format!("'{f}'")), "{f} missing:\n{files}");
    }
    assert!(has_joliet(&iso), "Joliet kept");
    assert!(has_joliet(&input), "(the fixture has Joliet too)");
    let x = dir.path().join("x");
    std::fs::create_dir_all(&x).expect("mkdir");
    xorriso(&[
        "-osirrox",
        "on",
        "-indev",
        &path,
        "-extract",
        "/EFI/BOOT/grub.cfg",
        &x.join("grub.cfg").display().to_string(),
        "-extract",
        "/images/efiboot.img",
        &x.join("efiboot.img").display().to_string(),
        "-extract",
        "/ks.cfg",
        &x.join("ks.cfg").display().to_string(),
    ]);
    let ks_in_iso = std::fs::read(x.join("ks.cfg")).expect("ks");
    assert_eq!(ks_in_iso, std::fs::read(out.join("ks.cfg")).expect("ks"));
    let o = Command::new("mcopy")
        .args(["-n", "-i"])
        .arg(x.join("efiboot.img"))
        .arg("::/EFI/BOOT/grub.cfg")
        .arg(x.join("efi-grub.cfg"))
        .output()
        .expect("mcopy");
    assert!(o.status.success(), "{}", describe(&o));
    for cfg in ["grub.cfg", "efi-grub.cfg"] {
        let g = std::fs::read_to_string(x.join(cfg)).expect("grub");
        let ks_lines: Vec<&str> = g.lines().filter(|l| l.contains("inst.ks=")).collect();
        assert_eq!(ks_lines.len(), 1, "{cfg}: only the install entry:\n{g}");
        assert!(
            ks_lines[0].contains("inst.ks=hd:LABEL=Rocky-8-6-aarch64-dvd:/ks.cfg"),
            "{cfg}"
        );
        assert!(
            ks_lines[0].contains(" ro "),
            "{cfg}: it is the install entry"
        );
        assert!(g.contains("set default=\"0\""), "{cfg}:\n{g}");
        assert!(g.contains("set timeout=5"), "{cfg}");
    }
    let md5 = Command::new("checkisomd5")
        .arg(&iso)
        .output()
        .expect("checkisomd5");
    assert!(
        md5.status.success(),
        "implanted media checksum verifies: {}",
        describe(&md5)
    );
}

#[test]
fn an_installer_of_another_architecture_is_refused_naming_both() {
    let treeinfo = |arch: &str| {
        format!(
            "[general]\narch = {arch}\nfamily = Rocky Linux\nversion = 8.6\n\n[header]\ntype = productmd.treeinfo\nversion = 1.2\n\n[release]\nname = Rocky Linux\nshort = Rocky\nversion = 8.6\n\n[tree]\narch = {arch}\nplatforms = {arch}\n"
        )
    };
    let x86_treeinfo = treeinfo("x86_64");
    let arm_treeinfo = treeinfo("aarch64");
    let x86_discinfo = "1652456044.286853\n8.6\nx86_64\n";
    let daemon_dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(daemon_dir.path());
    // The plan is aarch64. Each medium: its volume id, its files, and what build must say
    // (None: the build succeeds naming the installer it read).
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Option<&'a str>);
    let cases: [Case; 4] = [
        // The .treeinfo says x86_64, whatever the label says.
        (
            "Rocky-8-6-aarch64-dvd",
            vec![(".treeinfo", &x86_treeinfo), (".discinfo", x86_discinfo)],
            Some("is Rocky Linux 8.6 x86_64 (its .treeinfo says x86_64), but appliance.arch is aarch64"),
        ),
        // Only a .discinfo: it is read too.
        (
            "ROCKY",
            vec![(".discinfo", x86_discinfo)],
            Some("(its .discinfo says x86_64), but appliance.arch is aarch64"),
        ),
        // Neither file: the volume id's architecture.
        (
            "Rocky-8-6-x86_64-dvd",
            vec![],
            Some("(its volume id says x86_64), but appliance.arch is aarch64"),
        ),
        // The plan's own architecture is taken, and said.
        ("Rocky-8-6-aarch64-dvd", vec![(".treeinfo", &arm_treeinfo)], None),
    ];
    for (volume_id, files, refusal) in cases {
        let dir = tempfile::tempdir().expect("tmp");
        let iso = rocky_iso(dir.path(), volume_id, &files);
        let out = dir.path().join("out");
        let o = build(
            &plan_with_keys(dir.path()),
            &out,
            &daemon,
            &["--iso", &iso.display().to_string()],
        );
        let err = describe(&o);
        match refusal {
            Some(says) => {
                assert_eq!(o.status.code(), Some(1), "{volume_id}: {err}");
                assert!(err.contains(says), "{volume_id}: {err}");
                assert!(!out.exists(), "{volume_id}: nothing written: {err}");
            }
            None => {
                assert!(o.status.success(), "{err}");
                assert!(
                    stdout_has(&o, "installer: Rocky Linux 8.6 aarch64"),
                    "{err}"
                );
            }
        }
    }
}

#[test]
fn an_iso_that_is_not_a_rocky_boot_iso_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(dir.path().join("plain")).expect("mkdir");
    std::fs::write(dir.path().join("plain/readme.txt"), "data").expect("write");
    let o = Command::new("xorriso")
        .args(["-as", "mkisofs", "-quiet", "-V", "DATA", "-o"])
        .arg(dir.path().join("data.iso"))
        .arg(dir.path().join("plain"))
        .output()
        .expect("xorriso");
    assert!(o.status.success(), "{}", describe(&o));
    let out = dir.path().join("out");
    let daemon = fake_aarch64_binary(dir.path());
    let altra = plan_with_keys(dir.path());
    let o = build(
        &altra,
        &out,
        &daemon,
        &["--iso", &dir.path().join("data.iso").display().to_string()],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a Rocky/RHEL boot ISO"),
        "{}",
        describe(&o)
    );
    let o = build(&altra, &out, &daemon, &["--iso", "/nonexistent/rocky.iso"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/rocky.iso"));
    assert!(!out.exists(), "nothing half written");
}

/// A small C program compiled for aarch64 with Debian's cross compiler
/// (`gcc-aarch64-linux-gnu`, installed by tools/install-deps) as `kind` of ELF file.
fn aarch64_elf(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("daemon.c");
    std::fs::write(
        &src,
        "int answer(void) { return 42; }\nint main(void) { return 0; }\n",
    )
    .expect("write");
    let out = dir.join(name);
    let o = Command::new("aarch64-linux-gnu-gcc")
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("aarch64-linux-gnu-gcc (tools/install-deps)");
    assert!(o.status.success(), "{}", describe(&o));
    out
}

#[test]
fn only_an_executable_is_taken_as_the_daemon() {
    let dir = tempfile::tempdir().expect("tmp");
    let altra = plan_with_keys(dir.path());
    let out = dir.path().join("out");
    for (name, flags, says) in [
        ("libdaemon.so", &["-shared", "-fPIC"][..], "shared library"),
        ("daemon.o", &["-c"][..], "object file (ELF type ET_REL)"),
    ] {
        let bin = aarch64_elf(dir.path(), name, flags);
        let o = build(&altra, &out, &bin, &[]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", describe(&o));
        let err = stderr(&o);
        assert!(err.contains(says) && err.contains(name), "{name}: {err}");
        assert!(!out.exists(), "{name}: nothing written");
    }
    // Executables: a PIE (ET_DYN with an interpreter), a static one, a static PIE; taken
    // once they carry the mark of a pgapplianced build of this version.
    for (name, flags) in [
        ("pie", &["-fPIE", "-pie"][..]),
        ("static", &["-static"][..]),
        ("static-pie", &["-static-pie"][..]),
    ] {
        let bin = aarch64_elf(dir.path(), name, flags);
        let o = build(&altra, &dir.path().join(format!("out-{name}")), &bin, &[]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", describe(&o));
        assert!(
            stderr(&o).contains("is an aarch64 program but not pgapplianced"),
            "{name}: {}",
            describe(&o)
        );
        mark(&bin);
        let o = build(&altra, &dir.path().join(format!("out-{name}")), &bin, &[]);
        assert!(o.status.success(), "{name}: {}", describe(&o));
    }
    // Another version's daemon.
    let old = aarch64_elf(dir.path(), "old", &["-static"]);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&old)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(b"\0pgapplianced-binary:0.0.1\0")
        })
        .expect("mark");
    let o = build(&altra, &out, &old, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("is pgapplianced 0.0.1, but this pgappliance is"),
        "{}",
        describe(&o)
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_program_of_the_right_architecture_that_is_not_the_daemon_is_refused() {
    // libc.so.6 is a shared library that also runs as a program (it has an interpreter).
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .expect("the host's libc.so.6");
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let plan = repo().join("examples/quick.toml");
    let o = build(
        &plan,
        &out,
        &libc,
        &["--payload-url", "https://h.example/p.tar.gz"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("is an x86_64 program but not pgapplianced"),
        "{}",
        describe(&o)
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn run_from_another_directory_the_payload_has_the_unit_it_enables() {
    let dir = tempfile::tempdir().expect("tmp");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let o = build_in(
        &elsewhere,
        &plan,
        Path::new("out"),
        &daemon,
        &["--payload-url", "https://h.example/p.tar.gz"],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let out = elsewhere.join("out");
    let members = payload_members(&out.join("payload.tar.gz"));
    let unit = members
        .iter()
        .find(|(p, _)| p == "usr/lib/systemd/system/pgapplianced.service")
        .unwrap_or_else(|| {
            panic!(
                "the unit is in the payload: {:?}",
                members.iter().map(|m| &m.0).collect::<Vec<_>>()
            )
        });
    assert_eq!(
        unit.1,
        std::fs::read(repo().join("units/pgapplianced.service")).expect("unit"),
        "the payload carries units/pgapplianced.service as it is"
    );
    for (file, enable) in [
        ("ks.cfg", "systemctl enable pgapplianced.service"),
        (
            "user-data.yaml",
            "systemctl enable --now --no-block pgapplianced.service",
        ),
    ] {
        let text = std::fs::read_to_string(out.join(file)).expect("read");
        assert!(
            text.contains(enable),
            "{file} enables the unit the payload has"
        );
    }
}

#[test]
fn out_that_is_or_holds_the_current_directory_is_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().expect("tmp");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let daemon = fake_aarch64_binary(&work);
    let plan = plan_with_keys(&work);
    std::fs::write(work.join("notes.txt"), "mine").expect("write");
    let before = snapshot(dir.path());
    for (out, says) in [
        (".", "is the current directory"),
        ("./", "is the current directory"),
        ("..", "holds the current directory"),
        ("sub/../.", "is the current directory"),
    ] {
        if out.starts_with("sub") {
            std::fs::create_dir_all(work.join("sub")).expect("mkdir");
        }
        let o = build_in(
            &work,
            Path::new("altra.toml"),
            Path::new(out),
            Path::new("pgapplianced-aarch64"),
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "--out {out}: {}", describe(&o));
        assert!(stderr(&o).contains(says), "--out {out}: {}", stderr(&o));
        let _ = std::fs::remove_dir(work.join("sub"));
        assert_eq!(snapshot(dir.path()), before, "--out {out}: nothing touched");
    }
    // The home directory, outright, even empty. (The root directory is refused the same
    // way; that is a unit test in the builder, as a regression here could empty the host.)
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    let o = build_command(&plan, &home, &daemon, &[])
        .env("HOME", &home)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("$HOME"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&home).expect("ls").count(), 0);
}

#[test]
fn out_holding_an_input_is_refused_however_it_is_spelled() {
    let dir = tempfile::tempdir().expect("tmp");
    let inputs = dir.path().join("inputs");
    let bins = dir.path().join("bins");
    std::fs::create_dir_all(&inputs).expect("mkdir");
    std::fs::create_dir_all(&bins).expect("mkdir");
    let plan = plan_with_keys(&inputs);
    let daemon = fake_aarch64_binary(&bins);
    std::os::unix::fs::symlink(&inputs, dir.path().join("link")).expect("symlink");
    let before = snapshot(dir.path());
    for (out, says) in [
        (inputs.clone(), "holds the plan"),
        (dir.path().join("link"), "holds the plan"),
        (dir.path().join("bins/../inputs"), "holds the plan"),
        (bins.clone(), "holds the daemon binary"),
        (dir.path().to_path_buf(), "holds the plan"),
    ] {
        let o = build(&plan, &out, &daemon, &[]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}: {}",
            out.display(),
            describe(&o)
        );
        assert!(
            stderr(&o).contains(says),
            "{}: {}",
            out.display(),
            stderr(&o)
        );
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{}: nothing touched",
            out.display()
        );
    }
}

#[test]
fn out_holding_unrelated_files_is_refused_naming_them_and_they_survive() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let out = dir.path().join("results");
    std::fs::create_dir_all(out.join("raw")).expect("mkdir");
    for i in 0..6 {
        std::fs::write(
            out.join(format!("run-{i}.json")),
            format!("{{\"run\": {i}}}"),
        )
        .expect("write");
    }
    std::fs::write(out.join("raw/point.log"), "log").expect("write");
    let before = snapshot(&out);
    let o = build(&plan, &out, &daemon, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let err = stderr(&o);
    assert!(
        err.contains("holds 7 entries that pgappliance did not write: raw/, run-0.json, run-1.json, run-2.json, run-3.json and 2 more"),
        "{err}"
    );
    assert_eq!(snapshot(&out), before, "every file survives");
    // A file in place of the directory.
    let file = dir.path().join("file");
    std::fs::write(&file, "keep").expect("write");
    let o = build(&plan, &file, &daemon, &[]);
    assert!(stderr(&o).contains("not a directory"), "{}", describe(&o));
    assert_eq!(std::fs::read(&file).expect("read"), b"keep");
    // An empty directory is fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let o = build(&plan, &empty, &daemon, &[]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(empty.join("payload.tar.gz").is_file());
}

#[test]
fn an_earlier_build_is_replaced_but_not_once_something_else_is_in_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let out = dir.path().join("out");
    let url = ["--payload-url", "https://h.example/payload.tar.gz"];
    let o = build(&plan, &out, &daemon, &url);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(out.join("user-data.yaml").is_file());
    let marker = std::fs::read_to_string(out.join(".pgappliance-build")).expect("marker");
    for f in [
        "payload.tar.gz",
        "payload.tar.gz.sha256",
        "ks.cfg",
        "user-data.yaml",
    ] {
        assert!(marker.contains(&format!("\"{f}\"")), "{f} listed: {marker}");
    }
    // Again, from another directory through a relative path and a symbolic link, without
    // the URL: the new build replaces the old one as a whole.
    std::os::unix::fs::symlink(&out, dir.path().join("link")).expect("symlink");
    let o = build_in(dir.path(), &plan, Path::new("./link"), &daemon, &[]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(
        stdout_has(&o, "the earlier build there replaced"),
        "{}",
        describe(&o)
    );
    assert!(dir
        .path()
        .join("link")
        .symlink_metadata()
        .expect("link")
        .file_type()
        .is_symlink());
    assert!(out.join("ks.cfg").is_file());
    assert!(
        !out.join("user-data.yaml").exists(),
        "the earlier build's files are gone"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pgappliance-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A file added to the build, or one of its files changed: refused, all kept.
    std::fs::write(out.join("notes.txt"), "mine").expect("write");
    let before = snapshot(&out);
    let o = build(&plan, &out, &daemon, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("notes.txt (not written by the build)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&out), before);
    std::fs::remove_file(out.join("notes.txt")).expect("rm");
    let ks = std::fs::read_to_string(out.join("ks.cfg")).expect("ks");
    std::fs::write(
        out.join("ks.cfg"),
        ks.replace("Europe/Berlin", "Europe/Madrid"),
    )
    .expect("write");
    let before = snapshot(&out);
    let o = build(&plan, &out, &daemon, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("ks.cfg (changed since the build wrote it)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&out), before);
}

fn stdout_has(o: &Output, s: &str) -> bool {
    String::from_utf8_lossy(&o.stdout).contains(s)
}

/// `openssl passwd -6 -salt abcdefgh secretpw`.
const TEST_HASH: &str = "$6$abcdefgh$NUEwtPiqb.Qt1V3Yi77GwJrTOkwNudr4Zg70eABz2v9Ul0C0X60dAP4frAE3oTyO0l.m2C1awRDIlv2.2OJY3.";

fn ksvalidator_passes(ks: &Path) {
    let v = Command::new(venv_bin("ksvalidator"))
        .args(["-v", "RHEL8"])
        .arg(ks)
        .output()
        .expect("ksvalidator (tools/install-deps)");
    assert!(v.status.success(), "ksvalidator: {}", describe(&v));
}

#[test]
fn the_kickstart_says_the_way_in_it_sets_up_and_names_the_plans_arch() {
    let dir = tempfile::tempdir().expect("tmp");
    // Keys only (aarch64): SSH with the keys, root's password locked.
    let out = dir.path().join("keys");
    let o = build(
        &plan_with_keys(dir.path()),
        &out,
        &fake_aarch64_binary(dir.path()),
        &[],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let ks = std::fs::read_to_string(out.join("ks.cfg")).expect("ks");
    assert!(
        ks.starts_with("# Rocky Linux 8 (aarch64, UEFI) kickstart"),
        "{ks}"
    );
    assert!(ks.contains("# root logs in over SSH with the plan's keys"));
    assert!(ks.contains("\nrootpw --lock\n") && ks.contains("sshkey --username=root"));
    assert!(!ks.contains("log in on the console"), "{ks}");
    assert!(ks.contains("PermitRootLogin prohibit-password"));
    ksvalidator_passes(&out.join("ks.cfg"));
    // A console password hash only, on an x86_64 plan: nothing in the kickstart says aarch64.
    let text = std::fs::read_to_string(altra_with(
        dir.path(),
        "x86.toml",
        &format!("root_password_hash = \"{TEST_HASH}\""),
    ))
    .expect("plan")
    .replace("arch = \"aarch64\"", "arch = \"x86_64\"")
    .replace("EL-8-aarch64", "EL-8-x86_64");
    let x86 = dir.path().join("x86.toml");
    std::fs::write(&x86, text).expect("write");
    let out = dir.path().join("x86");
    let o = build(&x86, &out, &native_daemon(), &[]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(
        stdout_has(&o, "Rocky 8 x86_64 kickstart, OS on sda"),
        "{}",
        describe(&o)
    );
    let ks = std::fs::read_to_string(out.join("ks.cfg")).expect("ks");
    assert!(
        ks.starts_with("# Rocky Linux 8 (x86_64, UEFI) kickstart"),
        "{ks}"
    );
    assert!(!ks.contains("aarch64"), "{ks}");
    assert!(
        ks.contains(&format!("\nrootpw --iscrypted {TEST_HASH}\n")),
        "{ks}"
    );
    assert!(ks.contains("# root logs in on the console"), "{ks}");
    assert!(
        !ks.contains("sshkey") && !ks.contains("rootpw --lock"),
        "{ks}"
    );
    ksvalidator_passes(&out.join("ks.cfg"));
    // The plan holding the hash is root's only in the payload, like /etc/shadow.
    let listing = Command::new("tar")
        .arg("-tvzf")
        .arg(out.join("payload.tar.gz"))
        .output()
        .expect("tar");
    let listing = String::from_utf8_lossy(&listing.stdout);
    let plan_line = listing
        .lines()
        .find(|l| l.ends_with("etc/pgappliance/plan.toml"))
        .expect("the plan in the payload");
    assert!(plan_line.starts_with("-rw------- "), "{plan_line}");
    // Both: keys for SSH, the hash for the console.
    let both = altra_with(
        dir.path(),
        "both.toml",
        &format!("ssh_authorized_keys = [\"{TEST_KEY}\"]\nroot_password_hash = \"{TEST_HASH}\""),
    );
    let out = dir.path().join("both");
    let o = build(&both, &out, &fake_aarch64_binary(dir.path()), &[]);
    assert!(o.status.success(), "{}", describe(&o));
    let ks = std::fs::read_to_string(out.join("ks.cfg")).expect("ks");
    assert!(ks.contains("rootpw --iscrypted") && ks.contains("sshkey --username=root"));
    assert!(ks.contains("and on the console with the password of install.root_password_hash"));
    ksvalidator_passes(&out.join("ks.cfg"));
}

#[test]
fn build_refuses_a_kickstart_nobody_could_use() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    // The example as shipped: its placeholder key is refused, naming it.
    let o = build(
        &repo().join("examples/altra-q80.toml"),
        &out,
        &fake_aarch64_binary(dir.path()),
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("install.ssh_authorized_keys[0] is a placeholder, not a key"),
        "{}",
        describe(&o)
    );
    assert!(
        stderr(&o).contains("warning: a placeholder"),
        "{}",
        describe(&o)
    );
    assert!(!out.exists(), "nothing written");
    // A cloud plan (no [install]) gets no kickstart, and no ISO.
    let m5d = example_with_pinned_tpcc(dir.path(), "m5d-8xlarge.toml");
    let o = build(&m5d, &out, &native_daemon(), &[]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(!out.join("ks.cfg").exists());
    assert!(stdout_has(
        &o,
        "ks.cfg           not written: the plan has no [install] table"
    ));
    let iso_out = dir.path().join("iso");
    let o = build(
        &m5d,
        &iso_out,
        &native_daemon(),
        &["--iso", "/nonexistent/rocky.iso"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("has no [install] table"),
        "{}",
        describe(&o)
    );
    assert!(!iso_out.exists());
    // A debian12 plan given a kickstart: the kickstart installs Rocky 8.
    let text = std::fs::read_to_string(repo().join("examples/quick.toml")).expect("quick");
    let debian = dir.path().join("debian.toml");
    std::fs::write(
        &debian,
        format!("{text}\n[install]\nos_disk = \"sda\"\nssh_authorized_keys = [\"{TEST_KEY}\"]\n"),
    )
    .expect("write");
    let deb_out = dir.path().join("debian");
    let o = build(&debian, &deb_out, &native_daemon(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(
        stderr(&o).contains("render a Rocky 8 kickstart, but appliance.platform is debian12"),
        "{}",
        describe(&o)
    );
    assert!(!deb_out.exists());
}

/// A 0600 key pair file as an operator of a lab store has it, with a second profile that
/// must not be delivered; returns its path and the delivered profile's secret.
fn lab_credentials(dir: &Path, mode: u32) -> (PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let secret = format!("labSecret{}", std::process::id());
    let p = dir.join("lab.credentials");
    std::fs::write(
        &p,
        format!(
            "[default]\naws_access_key_id = PGALABKEY\naws_secret_access_key = {secret}\n\n[other]\naws_access_key_id = PGAOTHER\naws_secret_access_key = otherSecretNotDelivered\n"
        ),
    )
    .expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    (p, secret)
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

/// The body of the first `%post` section whose header line starts with `header`.
fn post_section(ks: &str, header: &str) -> String {
    let mut body: Option<String> = None;
    for line in ks.lines() {
        match body.as_mut() {
            Some(b) if line.trim() == "%end" => return std::mem::take(b),
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None if line.starts_with(header) => body = Some(String::new()),
            None => {}
        }
    }
    panic!("no section {header}");
}

#[test]
fn lab_credentials_go_on_the_medium_and_in_the_user_data_and_nowhere_else() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = synthetic_rocky_iso(dir.path());
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let (creds, secret) = lab_credentials(dir.path(), 0o600);
    let out = dir.path().join("out");
    let o = build(
        &plan,
        &out,
        &daemon,
        &[
            "--iso",
            &input.display().to_string(),
            "--payload-url",
            "https://h.example/payload.tar.gz",
            "--upload-credentials",
            &creds.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("credentials      the key pair of profile \"default\"")
            && said.contains(
                "for /etc/pgappliance/s3.credentials on appliance.iso and user-data.yaml"
            ),
        "{said}"
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    // The secret: in appliance.iso and user-data.yaml (both 0600), nowhere else in the build,
    // not in what the build printed; the other profile of the operator's file nowhere.
    let mut holders = Vec::new();
    for (path, bytes) in snapshot(&out) {
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if path.ends_with("payload.tar.gz") {
            for (_, data) in payload_members(&path) {
                text.push_str(&String::from_utf8_lossy(&data));
            }
        }
        assert!(
            !text.contains("otherSecretNotDelivered"),
            "{}",
            path.display()
        );
        if text.contains(&secret) {
            holders.push(
                path.file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned(),
            );
            assert_eq!(mode_of(&path), 0o600, "{}", path.display());
        }
    }
    holders.sort();
    assert_eq!(holders, ["appliance.iso", "user-data.yaml"]);
    assert!(!describe(&o).contains(&secret));
    // On the ISO: one file, 0600, holding the plan's profile only; its bytes once in the image.
    let iso = out.join("appliance.iso");
    let iso_bytes = std::fs::read(&iso).expect("iso");
    assert_eq!(
        iso_bytes
            .windows(secret.len())
            .filter(|w| *w == secret.as_bytes())
            .count(),
        1,
        "the secret is in one file of the ISO"
    );
    let listing = xorriso(&["-indev", &iso.display().to_string(), "-lsl", "/pgappliance"]);
    let line = listing
        .lines()
        .find(|l| l.contains("store.credentials"))
        .unwrap_or_else(|| panic!("store.credentials on the ISO:\n{listing}"));
    assert!(line.starts_with("-rw-------"), "{line}");
    let x = dir.path().join("x");
    std::fs::create_dir_all(&x).expect("mkdir");
    xorriso(&[
        "-osirrox",
        "on",
        "-indev",
        &iso.display().to_string(),
        "-extract",
        "/pgappliance/store.credentials",
        &x.join("store.credentials").display().to_string(),
    ]);
    let on_medium = std::fs::read_to_string(x.join("store.credentials")).expect("read");
    let pair = pgappliance::upload::store::parse_credentials(&on_medium, "default").expect("pair");
    assert_eq!(pair.access_key_id, "PGALABKEY");
    assert_eq!(pair.secret_access_key, secret);
    assert!(!on_medium.contains("[other]"));
    // The kickstart names the copy, never the secret; it validates; its %post copies the
    // file from the medium to the plan's path, 0600 root:root.
    let ks = std::fs::read_to_string(out.join("ks.cfg")).expect("ks");
    assert!(!ks.contains(&secret));
    assert!(ks.contains("install -D -m 0600 -o root -g root /run/install/repo/pgappliance/store.credentials '/mnt/sysimage/etc/pgappliance/s3.credentials'"), "{ks}");
    assert!(ks.contains("restorecon '/etc/pgappliance/s3.credentials' || true"));
    let v = Command::new(venv_bin("ksvalidator"))
        .args(["-v", "RHEL8"])
        .arg(out.join("ks.cfg"))
        .output()
        .expect("ksvalidator (tools/install-deps)");
    assert!(v.status.success(), "ksvalidator: {}", describe(&v));
    let chroot_section = dir.path().join("post-chroot.sh");
    std::fs::write(&chroot_section, post_section(&ks, "%post --log")).expect("write");
    let n = Command::new("bash")
        .arg("-n")
        .arg(&chroot_section)
        .output()
        .expect("bash");
    assert!(n.status.success(), "bash -n: {}", describe(&n));
    let medium = dir.path().join("medium");
    let sysimage = dir.path().join("sysimage");
    std::fs::create_dir_all(medium.join("pgappliance")).expect("mkdir");
    std::fs::create_dir_all(&sysimage).expect("mkdir");
    std::fs::copy(
        x.join("store.credentials"),
        medium.join("pgappliance/store.credentials"),
    )
    .expect("copy");
    // The nochroot section as anaconda runs it, with the medium and the target root moved
    // into this test's directory.
    let script = post_section(&ks, "%post --nochroot")
        .replace("/run/install/repo", &medium.display().to_string())
        .replace("/mnt/sysimage", &sysimage.display().to_string());
    let run = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert!(run.status.success(), "%post --nochroot: {}", describe(&run));
    let placed = sysimage.join("etc/pgappliance/s3.credentials");
    assert_eq!(std::fs::read_to_string(&placed).expect("placed"), on_medium);
    assert_eq!(mode_of(&placed), 0o600);
    if nix::unistd::Uid::effective().is_root() {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(&placed).expect("md");
        assert_eq!((md.uid(), md.gid()), (0, 0));
    }
    // The user-data passes cloud-init's schema and writes the same file 0600 root:root.
    let ud = out.join("user-data.yaml");
    let v = Command::new("cloud-init")
        .args(["schema", "--config-file"])
        .arg(&ud)
        .output()
        .expect("cloud-init (tools/install-deps)");
    assert!(v.status.success(), "cloud-init schema: {}", describe(&v));
    let entry = Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml\n\
             d=yaml.safe_load(open(sys.argv[1]))\n\
             print(json.dumps([f for f in d['write_files'] if f['path']=='/etc/pgappliance/s3.credentials'][0]))",
        ])
        .arg(&ud)
        .output()
        .expect("python3 with yaml (cloud-init's)");
    assert!(entry.status.success(), "{}", describe(&entry));
    let entry: serde_json::Value = serde_json::from_slice(&entry.stdout).expect("json");
    assert_eq!(entry["permissions"], "0600");
    assert_eq!(entry["owner"], "root:root");
    assert_eq!(entry["content"].as_str(), Some(on_medium.as_str()));
}

#[test]
fn credentials_that_cannot_be_delivered_are_refused_and_none_is_a_warning() {
    let dir = tempfile::tempdir().expect("tmp");
    let daemon = fake_aarch64_binary(dir.path());
    let plan = plan_with_keys(dir.path());
    let url = "https://h.example/payload.tar.gz";
    let out = dir.path().join("out");
    // Built without credentials: a warning naming the file the machine needs.
    let o = build(&plan, &out, &daemon, &["--payload-url", url]);
    assert!(o.status.success(), "{}", describe(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning:")
            && err.contains("nothing delivers /etc/pgappliance/s3.credentials")
            && err.contains("--mint-credentials"),
        "{err}"
    );
    assert_eq!(
        mode_of(&out.join("user-data.yaml")) & 0o044,
        0o044,
        "no secret, readable"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("check")
        .arg(&plan)
        .output()
        .expect("check");
    assert!(o.status.success(), "{}", describe(&o));
    assert!(
        stderr(&o).contains("nothing delivers /etc/pgappliance/s3.credentials"),
        "{}",
        describe(&o)
    );
    let refused_out = dir.path().join("refused");
    let (world_readable, _) = lab_credentials(dir.path(), 0o644);
    let wr = world_readable.display().to_string();
    let (private, _) = lab_credentials(
        &{
            let d = dir.path().join("p");
            std::fs::create_dir_all(&d).expect("mkdir");
            d
        },
        0o600,
    );
    let private = private.display().to_string();
    let other_profile = dir.path().join("other-profile.toml");
    std::fs::write(
        &other_profile,
        std::fs::read_to_string(&plan)
            .expect("plan")
            .replace("credentials_file = \"/etc/pgappliance/s3.credentials\"", "credentials_file = \"/etc/pgappliance/s3.credentials\"\ncredentials_profile = \"prod\""),
    )
    .expect("write");
    let role_plan = dir.path().join("role.toml");
    std::fs::write(
        &role_plan,
        std::fs::read_to_string(&plan).expect("plan").replace(
            "credentials = \"file\"\ncredentials_file = \"/etc/pgappliance/s3.credentials\"",
            "credentials = \"instance-role\"",
        ),
    )
    .expect("write");
    for (p, args, says) in [
        (
            &plan,
            vec!["--payload-url", url, "--upload-credentials", &wr],
            "chmod 600",
        ),
        (
            &other_profile,
            vec!["--payload-url", url, "--upload-credentials", &private],
            "has no profile \"prod\"",
        ),
        (
            &plan,
            vec!["--upload-credentials", &private],
            "give one of them",
        ),
        (
            &role_plan,
            vec!["--payload-url", url, "--upload-credentials", &private],
            "nothing to deliver",
        ),
        (
            &plan,
            vec!["--payload-url", url, "--mint-credentials"],
            "--credentials-ttl",
        ),
        (
            &plan,
            vec!["--payload-url", url, "--credentials-ttl", "1h"],
            "--mint-credentials",
        ),
    ] {
        let o = build(p, &refused_out, &daemon, &args);
        assert!(!o.status.success(), "{args:?}: {}", describe(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!refused_out.exists(), "{args:?}: nothing written");
    }
    // Minting without the operator's keys says what it needs.
    let o = build_command(
        &plan,
        &refused_out,
        &daemon,
        &[
            "--payload-url",
            url,
            "--mint-credentials",
            "--credentials-ttl",
            "1h",
        ],
    )
    .env_remove("AWS_ACCESS_KEY_ID")
    .env_remove("AWS_SECRET_ACCESS_KEY")
    .output()
    .expect("build");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("AWS_ACCESS_KEY_ID"), "{}", describe(&o));
}

/// The pinned sysbench-tpcc copy for tests (third_party/, its sha256 checked) and its bytes.
fn pinned_tpcc() -> (PathBuf, Vec<u8>) {
    let (path, bytes, _) =
        pgappliance::third_party::pinned(pgappliance::third_party::SYSBENCH_TPCC)
            .unwrap_or_else(|e| panic!("{e:#}"));
    (path, bytes)
}

/// An example plan written into `dir` with its `[sysbench] tpcc_source` (an operator's
/// hosted copy) pointing at the pinned copy, which has the sha256 the example names.
fn example_with_pinned_tpcc(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("examples").join(name)).expect("example");
    let (archive, _) = pinned_tpcc();
    let line = text
        .lines()
        .find(|l| l.starts_with("tpcc_source = "))
        .expect("the example names tpcc_source");
    let text = text.replace(
        line,
        &format!("tpcc_source = \"file://{}\"", archive.display()),
    );
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write plan");
    p
}

fn tpcc_plan(dir: &Path, source: &str, sha: &str) -> PathBuf {
    let text = format!(
        "[appliance]\nname = \"tpcc\"\nplatform = \"debian12\"\narch = \"x86_64\"\n\
         [postgres]\nversion = 15\n\
         [sysbench]\ntpcc_source = \"{source}\"\ntpcc_sha256 = \"{sha}\"\n\
         [[workloads]]\nname = \"tpcc\"\nkind = \"sysbench-tpcc\"\ntables = 1\nscale = 1\n\
         threads = [1, 2]\nduration = \"5s\"\n\
         [upload]\nstore = \"file:///var/lib/pgappliance/store\"\n"
    );
    let p = dir.join("tpcc.toml");
    std::fs::write(&p, text).expect("write plan");
    p
}

#[test]
fn the_sysbench_tpcc_archive_is_packed_verified_and_a_wrong_one_refused() {
    let (archive, bytes) = pinned_tpcc();
    use sha2::Digest;
    let sha = format!("{:x}", sha2::Sha256::digest(&bytes));
    let dir = tempfile::tempdir().expect("tempdir");
    let source = format!("file://{}", archive.display());
    let plan = tpcc_plan(dir.path(), &source, &sha);
    let out = dir.path().join("out");
    let o = build(&plan, &out, &native_daemon(), &[]);
    assert!(o.status.success(), "{}", describe(&o));
    let members = payload_members(&out.join("payload.tar.gz"));
    let packed = members
        .iter()
        .find(|(p, _)| p == "usr/share/pgappliance/sysbench-tpcc.tar.gz")
        .unwrap_or_else(|| {
            panic!(
                "no archive in {:?}",
                members.iter().map(|m| &m.0).collect::<Vec<_>>()
            )
        });
    assert_eq!(packed.1, bytes, "the archive is packed byte for byte");

    // Another archive under the plan's digest: refused, both digests named, nothing written.
    let wrong = "0".repeat(64);
    let plan = tpcc_plan(dir.path(), &source, &wrong);
    let out = dir.path().join("out-wrong");
    let o = build(&plan, &out, &native_daemon(), &[]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&sha) && e.contains(&wrong), "{e}");
    assert!(!out.join("payload.tar.gz").exists());
    // A source that is not there is named.
    let plan = tpcc_plan(dir.path(), "file:///nonexistent/tpcc.tar.gz", &sha);
    let o = build(
        &plan,
        &dir.path().join("out-missing"),
        &native_daemon(),
        &[],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("/nonexistent/tpcc.tar.gz"),
        "{}",
        stderr(&o)
    );
}
