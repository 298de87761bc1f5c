//! `pgappliance build`: the payload is deterministic and complete, the kickstart passes
//! `ksvalidator -v RHEL8` and `bash -n` on its scripts, the user-data passes
//! `cloud-init schema`, and bad input is refused with nothing left in DIR.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A small native executable standing in for the daemon (the builder only reads its ELF
/// header and packs it; a debug build of the real daemon is large and slow to compress).
fn native_daemon() -> PathBuf {
    PathBuf::from("/bin/true")
}

/// A file that is an aarch64 ELF executable as far as its header goes.
fn fake_aarch64_binary(dir: &Path) -> PathBuf {
    let mut h = vec![0u8; 4096];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[18..20].copy_from_slice(&0xb7u16.to_le_bytes());
    let p = dir.join("pgapplianced-aarch64");
    std::fs::write(&p, h).expect("write");
    p
}

fn build(plan: &Path, out: &Path, daemon: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("build")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .arg("--daemon-binary")
        .arg(daemon)
        .arg("--units")
        .arg(repo().join("units"))
        .args(extra)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .expect("run pgappliance build")
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

fn plan_with_keys(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("examples/altra-q80.toml")).expect("plan");
    let text = format!(
        "{text}\n[install]\nos_disk = \"sda\"\nssh_authorized_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests0000000000000000000000 ops@lab\"]\ntimezone = \"Europe/Berlin\"\n"
    );
    let p = dir.join("altra.toml");
    std::fs::write(&p, text).expect("write");
    p
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
    let plan = repo().join("examples/m5d-8xlarge.toml");
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
    // A payload URL that would break the scripts.
    let o = build(
        &altra,
        &out,
        &fake_aarch64_binary(dir.path()),
        &["--payload-url", "https://x/'; rm -rf /"],
    );
    assert!(!o.status.success());
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
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("EFI/BOOT")).expect("mkdir");
    std::fs::create_dir_all(tree.join("images/pxeboot")).expect("mkdir");
    let label = "Rocky-8-6-aarch64-dvd";
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
    let altra = repo().join("examples/altra-q80.toml");
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
