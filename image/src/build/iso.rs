//! Remastering the user's Rocky boot ISO for BMC virtual media, the way lorax's mkksiso
//! does it but with xorriso directly (mkksiso refuses an aarch64 ISO on an x86_64 host):
//! the volume id is kept, `ks.cfg` and the payload are added, `inst.ks=hd:LABEL=…:/ks.cfg`
//! goes on the install entries of both grub.cfg copies (the ISO's `EFI/BOOT/grub.cfg` and
//! the one inside `images/efiboot.img`, edited with mtools), the install entry becomes the
//! default with a short timeout, the El Torito boot images are replayed, Joliet is kept, and
//! the media checksum is implanted again when the input had one.

use std::path::Path;

use anyhow::{bail, Context, Result};
use pgappliance::runner::{CommandOutput, CommandSpec, Runner};

/// ISO 9660 volume ids are at most 32 characters.
pub(crate) const MAX_VOLUME_ID: usize = 32;
/// Seconds the remastered menu waits before booting the install entry.
pub(crate) const MENU_TIMEOUT_S: u32 = 5;

pub(crate) fn run(spec: CommandSpec, ok: &[i32]) -> Result<CommandOutput> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(Runner::local().run_accepting(&spec, ok))?)
}

/// `Volume Id    : Rocky-8-6-aarch64-dvd` from `xorriso -pvd_info`.
pub(crate) fn parse_volume_id(pvd_info: &str) -> Option<String> {
    pvd_info
        .lines()
        .find_map(|l| l.strip_prefix("Volume Id"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// What an installer medium says it is: its family, version and architecture, and where
/// the architecture was read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Medium {
    pub(crate) family: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) arch: Option<String>,
    /// `.treeinfo`, `.discinfo` or `volume id`.
    pub(crate) arch_from: Option<&'static str>,
}

impl Medium {
    /// `Rocky Linux 8.6 aarch64`, from what is known.
    pub(crate) fn describe(&self) -> String {
        let parts: Vec<&str> = [&self.family, &self.version, &self.arch]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .collect();
        if parts.is_empty() {
            "an installer that names neither its release nor its architecture".into()
        } else {
            parts.join(" ")
        }
    }
}

/// `key = value` of `[section]` in an INI text (the first one).
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
        } else if current == section && !line.starts_with([';', '#']) {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key && !v.trim().is_empty() {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// The installer tree's `.treeinfo`: productmd's `[release]` and `[tree]`, or the older
/// `[general]` section (Rocky 8 has both).
pub(crate) fn parse_treeinfo(text: &str) -> Medium {
    let arch = ini_value(text, "tree", "arch").or_else(|| ini_value(text, "general", "arch"));
    Medium {
        family: ini_value(text, "release", "name").or_else(|| ini_value(text, "general", "family")),
        version: ini_value(text, "release", "version")
            .or_else(|| ini_value(text, "general", "version")),
        arch_from: arch.as_ref().map(|_| ".treeinfo"),
        arch,
    }
}

/// `.discinfo`: a timestamp, the release, the architecture (one a line).
pub(crate) fn parse_discinfo(text: &str) -> Medium {
    let mut lines = text.lines().map(str::trim);
    let _timestamp = lines.next();
    let version = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
    let arch = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
    Medium {
        family: None,
        version,
        arch_from: arch.as_ref().map(|_| ".discinfo"),
        arch,
    }
}

/// The architecture a volume id names (`Rocky-8-6-aarch64-dvd`).
pub(crate) fn arch_in_volume_id(volid: &str) -> Option<&'static str> {
    volid.split('-').find_map(|t| match t {
        "aarch64" => Some("aarch64"),
        "x86_64" => Some("x86_64"),
        _ => None,
    })
}

/// Reads what the ISO says it is: `.treeinfo` first, then `.discinfo`, then the volume id.
pub(crate) fn medium(input: &Path, volid: &str, work: &Path) -> Result<Medium> {
    let inp = input.display().to_string();
    let any_status: Vec<i32> = (0..=255).collect();
    let read = |name: &str| -> Result<Option<String>> {
        let dest = work.join(name.trim_start_matches('.'));
        run(
            CommandSpec::new("xorriso").args([
                "-osirrox",
                "on",
                "-indev",
                &inp,
                "-extract",
                &format!("/{name}"),
                &dest.display().to_string(),
            ]),
            &any_status,
        )?;
        match std::fs::read(&dest) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {name} extracted from {inp}")),
        }
    };
    let tree = read(".treeinfo")?
        .map(|t| parse_treeinfo(&t))
        .unwrap_or_default();
    let disc = read(".discinfo")?
        .map(|t| parse_discinfo(&t))
        .unwrap_or_default();
    let (arch, arch_from) = match (&tree.arch, &disc.arch, arch_in_volume_id(volid)) {
        (Some(a), _, _) => (Some(a.clone()), tree.arch_from),
        (None, Some(a), _) => (Some(a.clone()), disc.arch_from),
        (None, None, Some(a)) => (Some(a.to_string()), Some("volume id")),
        _ => (None, None),
    };
    Ok(Medium {
        family: tree.family,
        version: tree.version.or(disc.version),
        arch,
        arch_from,
    })
}

/// Reads the ISO's volume id (`xorriso -pvd_info`).
pub(crate) fn volume_id(input: &Path) -> Result<String> {
    pgappliance::fsutil::open_regular(input).context("the ISO (--iso)")?;
    let inp = input.display().to_string();
    let pvd = run(
        CommandSpec::new("xorriso").args(["-indev", &inp, "-pvd_info"]),
        &[0],
    )
    .with_context(|| format!("{inp} is not a readable ISO image"))?;
    parse_volume_id(&pvd.stdout)
        .with_context(|| format!("{inp}: no volume id in its primary volume descriptor"))
}

/// Refuses an installer of another architecture than the plan's, naming both.
pub(crate) fn check_arch(input: &Path, medium: &Medium, plan_arch: &str) -> Result<()> {
    if let (Some(arch), Some(from)) = (&medium.arch, medium.arch_from) {
        if arch != plan_arch {
            bail!(
                "--iso {} is {} (its {from} says {arch}), but appliance.arch is {plan_arch}: the server would boot an installer of another architecture; give the {plan_arch} DVD ISO",
                input.display(),
                medium.describe()
            );
        }
    }
    Ok(())
}

/// A volume id as dracut's `hd:LABEL=` wants it (spaces and specials as \xNN).
pub(crate) fn escape_label(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c.to_string()
            } else {
                format!("\\x{:02x}", c as u32)
            }
        })
        .collect()
}

/// Adds `inst.ks=` to the install entries, makes the first top-level install entry (one
/// that does not check the media) the default, and shortens the timeout.
pub(crate) fn add_kickstart(grub: &str, label: &str) -> Result<String> {
    let ks = format!("inst.ks=hd:LABEL={}:/ks.cfg", escape_label(label));
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut top_index = -1i32;
    let mut default_entry: Option<i32> = None;
    for line in grub.lines() {
        let t = line.trim_start();
        if depth == 0 && (t.starts_with("menuentry ") || t.starts_with("submenu ")) {
            top_index += 1;
        }
        let is_kernel = t.starts_with("linux ") || t.starts_with("linuxefi ");
        let mut line = line.to_string();
        if is_kernel
            && t.contains("inst.stage2=")
            && !t.contains("rd.live.check")
            && !t.contains("inst.rescue")
        {
            if !t.contains("inst.ks=") {
                line.push(' ');
                line.push_str(&ks);
            }
            if depth == 1 && default_entry.is_none() {
                default_entry = Some(top_index);
            }
        }
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        out.push(line);
    }
    let Some(default_entry) = default_entry else {
        bail!("grub.cfg has no install entry (a top-level menuentry whose linux line has inst.stage2=)");
    };
    let mut saw_default = false;
    let mut saw_timeout = false;
    for line in out.iter_mut() {
        let t = line.trim_start();
        if t.starts_with("set default=") {
            *line = format!("set default=\"{default_entry}\"");
            saw_default = true;
        } else if t.starts_with("set timeout=") {
            *line = format!("set timeout={MENU_TIMEOUT_S}");
            saw_timeout = true;
        }
    }
    let mut head = Vec::new();
    if !saw_default {
        head.push(format!("set default=\"{default_entry}\""));
    }
    if !saw_timeout {
        head.push(format!("set timeout={MENU_TIMEOUT_S}"));
    }
    Ok(head.into_iter().chain(out).collect::<Vec<_>>().join("\n") + "\n")
}

/// Writes `output` from `input` plus the kickstart and payload files, and `extra` files
/// (a file here, its path on the ISO) with their modes kept in the Rock Ridge entries.
pub(crate) fn remaster(
    input: &Path,
    output: &Path,
    ks: &Path,
    payload: &Path,
    payload_sha: &Path,
    extra: &[(&Path, &str)],
    work: &Path,
) -> Result<String> {
    let inp = input.display().to_string();
    let volid = volume_id(input)?;
    if volid.len() > MAX_VOLUME_ID {
        bail!("{inp}: volume id \"{volid}\" is over {MAX_VOLUME_ID} characters; xorriso would refuse it");
    }
    let grub = work.join("grub.cfg");
    let efiboot = work.join("efiboot.img");
    run(
        CommandSpec::new("xorriso").args([
            "-osirrox",
            "on",
            "-indev",
            &inp,
            "-extract",
            "/EFI/BOOT/grub.cfg",
            &grub.display().to_string(),
            "-extract",
            "/images/efiboot.img",
            &efiboot.display().to_string(),
        ]),
        &[0],
    )
    .with_context(|| {
        format!(
            "{inp} is not a Rocky/RHEL boot ISO: it needs EFI/BOOT/grub.cfg and images/efiboot.img"
        )
    })?;
    for f in [&grub, &efiboot] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644))?;
    }
    let text = std::fs::read_to_string(&grub).context("reading the ISO's grub.cfg")?;
    std::fs::write(
        &grub,
        add_kickstart(&text, &volid).context("the ISO's EFI/BOOT/grub.cfg")?,
    )?;
    let img = efiboot.display().to_string();
    let efi_grub = work.join("efiboot-grub.cfg");
    run(
        CommandSpec::new("mcopy").args([
            "-n",
            "-i",
            &img,
            "::/EFI/BOOT/grub.cfg",
            &efi_grub.display().to_string(),
        ]),
        &[0],
    )
    .context("images/efiboot.img holds no EFI/BOOT/grub.cfg")?;
    let text = std::fs::read_to_string(&efi_grub)?;
    std::fs::write(
        &efi_grub,
        add_kickstart(&text, &volid).context("the grub.cfg inside images/efiboot.img")?,
    )?;
    run(
        CommandSpec::new("mcopy").args([
            "-o",
            "-i",
            &img,
            &efi_grub.display().to_string(),
            "::/EFI/BOOT/grub.cfg",
        ]),
        &[0],
    )?;
    let had_md5 = run(
        CommandSpec::new("checkisomd5").args(["--md5sumonly", &inp]),
        &[0, 1, 2],
    )
    .map(|o| o.success() && o.stdout.contains(&inp))
    .unwrap_or(false);
    let out = output.display().to_string();
    let map = |from: &Path, to: &str| {
        vec![
            "-map".to_string(),
            from.display().to_string(),
            to.to_string(),
        ]
    };
    let mut args: Vec<String> = vec![
        "-indev".into(),
        inp.clone(),
        "-outdev".into(),
        out.clone(),
        "-boot_image".into(),
        "any".into(),
        "replay".into(),
        "-joliet".into(),
        "on".into(),
    ];
    args.extend(map(&grub, "/EFI/BOOT/grub.cfg"));
    args.extend(map(&efiboot, "/images/efiboot.img"));
    args.extend(map(ks, "/ks.cfg"));
    args.extend(map(payload, "/pgappliance/payload.tar.gz"));
    args.extend(map(payload_sha, "/pgappliance/payload.tar.gz.sha256"));
    for (file, on_iso) in extra {
        args.extend(map(file, on_iso));
    }
    run(CommandSpec::new("xorriso").args(args), &[0]).context("writing the remastered ISO")?;
    if had_md5 {
        run(
            CommandSpec::new("implantisomd5").args(["--force", &out]),
            &[0],
        )
        .context("implanting the media checksum")?;
    }
    Ok(volid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRUB: &str = "set default=\"1\"\nset timeout=60\nmenuentry 'Install Rocky Linux 8.6' {\n\tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL=R ro\n\tinitrd /i\n}\nmenuentry 'Test this media & install' {\n\tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL=R rd.live.check\n}\nsubmenu 'Troubleshooting -->' {\n\tmenuentry 'basic graphics' {\n\t\tlinux /v inst.stage2=hd:LABEL=R nomodeset\n\t}\n}\n";

    #[test]
    fn kickstart_on_install_entries_default_and_timeout() {
        let g = add_kickstart(GRUB, "Rocky-8-6-aarch64-dvd").expect("grub");
        assert!(g.contains("set default=\"0\""));
        assert!(g.contains("set timeout=5"));
        assert_eq!(
            g.matches("inst.ks=hd:LABEL=Rocky-8-6-aarch64-dvd:/ks.cfg")
                .count(),
            2
        );
        assert!(!g
            .lines()
            .any(|l| l.contains("rd.live.check") && l.contains("inst.ks")));
        // Idempotent.
        assert_eq!(
            add_kickstart(&g, "Rocky-8-6-aarch64-dvd").expect("again"),
            g
        );
    }

    #[test]
    fn no_install_entry_is_an_error() {
        assert!(add_kickstart("set timeout=5\n", "X").is_err());
    }

    /// Rocky 8.6's aarch64 DVD `.treeinfo` (productmd with the compatibility section),
    /// shortened.
    const TREEINFO: &str = "[checksums]\nimages/efiboot.img = sha256:00\n\n[general]\n; WARNING.0 = This section provides compatibility with pre-productmd treeinfos.\narch = aarch64\nfamily = Rocky Linux\nname = Rocky Linux 8.6\nversion = 8.6\n\n[header]\ntype = productmd.treeinfo\nversion = 1.2\n\n[release]\nname = Rocky Linux\nshort = Rocky\nversion = 8.6\n\n[tree]\narch = aarch64\nplatforms = aarch64\n";

    #[test]
    fn the_medium_says_its_release_and_architecture() {
        let m = parse_treeinfo(TREEINFO);
        assert_eq!(m.arch.as_deref(), Some("aarch64"));
        assert_eq!(m.version.as_deref(), Some("8.6"));
        assert_eq!(m.describe(), "Rocky Linux 8.6 aarch64");
        // The older layout: [general] only.
        let m = parse_treeinfo("[general]\nfamily = Rocky Linux\nversion = 8.5\narch = x86_64\n");
        assert_eq!(m.describe(), "Rocky Linux 8.5 x86_64");
        let m = parse_discinfo("1652456044.286853\n8.6\nx86_64\n");
        assert_eq!(
            (m.version.as_deref(), m.arch.as_deref()),
            (Some("8.6"), Some("x86_64"))
        );
        assert_eq!(arch_in_volume_id("Rocky-8-6-x86_64-dvd"), Some("x86_64"));
        assert_eq!(arch_in_volume_id("Rocky-8-6-aarch64-dvd"), Some("aarch64"));
        assert_eq!(arch_in_volume_id("DATA"), None);
        let err = check_arch(Path::new("r.iso"), &parse_treeinfo(TREEINFO), "x86_64")
            .expect_err("aarch64 for x86_64");
        let e = err.to_string();
        assert!(
            e.contains("is Rocky Linux 8.6 aarch64 (its .treeinfo says aarch64), but appliance.arch is x86_64"),
            "{e}"
        );
        check_arch(Path::new("r.iso"), &parse_treeinfo(TREEINFO), "aarch64").expect("same");
        check_arch(Path::new("r.iso"), &Medium::default(), "x86_64").expect("unknown");
    }

    #[test]
    fn labels_and_volume_ids() {
        assert_eq!(escape_label("Rocky 8 x"), "Rocky\\x208\\x20x");
        assert_eq!(
            parse_volume_id("Volume Id    : Rocky-8-6-aarch64-dvd\nVolume Set Id: x\n").as_deref(),
            Some("Rocky-8-6-aarch64-dvd")
        );
    }
}
