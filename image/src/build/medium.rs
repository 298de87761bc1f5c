//! `build --packages DIR` and `check --packages DIR`: the packages the operator downloaded
//! for the plan (RPMs for rocky8, .debs for debian12), checked and carried in the payload as
//! a local repository at [`MEDIUM_DIR`], so the appliance installs them with no network.
//!
//! "Signed-checked" means, for RPMs: every package's signature is verified now with
//! `rpmkeys --checksig` against the keys given with `--packages-key` (and nothing else: an
//! unsigned package, one signed by another key or one whose signature or digests do not
//! verify is refused, named), the keys travel with the packages, and the appliance's dnf
//! installs with `gpgcheck=1` against exactly those keys. .debs carry no signature of their
//! own (apt trusts a repository's signed Release file, which `apt-get download` checked on
//! the operator's machine): their sha256 go into the `Packages` index the payload carries,
//! apt checks every .deb against it, and the payload's own sha256 is what the kickstart and
//! the user-data check before anything is unpacked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pgappliance::plan::{Arch, Plan, Platform};
use pgappliance::platform::{Profile, MEDIUM_DIR, MEDIUM_KEYS, MEDIUM_SUMS};
use pgappliance::runner::CommandSpec;
use sha2::{Digest, Sha256};

use super::payload::Member;

/// The operator's package directory and the keys its RPMs are signed with.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PackageArgs {
    /// A directory of the packages the plan needs, as downloaded (`dnf download --resolve`
    /// on a Rocky 8 machine of the plan's arch, `apt-get download` on Debian 12): carried in
    /// the payload as a local repository the appliance installs from, with no network.
    #[arg(long, value_name = "DIR")]
    pub(crate) packages: Option<PathBuf>,
    /// An armored public key the RPMs in --packages are signed with (PGDG's, Rocky's); give
    /// one per key. Every RPM must verify against one of them; dnf on the appliance checks
    /// them again (gpgcheck=1).
    #[arg(long = "packages-key", value_name = "FILE", requires = "packages")]
    pub(crate) packages_key: Vec<PathBuf>,
}

/// One package file of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Package {
    pub(crate) file: String,
    pub(crate) name: String,
    pub(crate) data: Vec<u8>,
    /// A .deb's control fields (its `Packages` stanza's start).
    pub(crate) control: Option<String>,
}

impl Package {
    pub(crate) fn sha256(&self) -> String {
        format!("{:x}", Sha256::digest(&self.data))
    }
}

/// The architectures a package of `platform` may have on `arch`.
pub(crate) fn accepted_arches(platform: Platform, arch: Arch) -> [&'static str; 2] {
    match (platform, arch) {
        (Platform::Rocky8, Arch::X86_64) => ["x86_64", "noarch"],
        (Platform::Rocky8, Arch::Aarch64) => ["aarch64", "noarch"],
        (Platform::Debian12, Arch::X86_64) => ["amd64", "all"],
        (Platform::Debian12, Arch::Aarch64) => ["arm64", "all"],
    }
}

/// A field of a .deb's control text (`dpkg-deb -f`), e.g. `Package` (pure).
pub(crate) fn control_field(control: &str, field: &str) -> Option<String> {
    control.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == field).then(|| v.trim().to_string())
    })
}

/// What `rpmkeys -Kv` (with `_pkgverify_level all`) says is wrong with a package (pure):
/// `None` when it is signed by an imported key and its digests verify.
pub(crate) fn checksig_problem(output: &str) -> Option<String> {
    let mut problems = Vec::new();
    let mut signed = false;
    for line in output.lines().map(str::trim) {
        let Some((what, verdict)) = line.rsplit_once(": ") else {
            continue;
        };
        let key = what
            .split_once("key ID ")
            .map(|(_, k)| k.trim().to_string());
        if key.is_some() {
            signed = true;
        }
        match verdict.split_whitespace().next().unwrap_or_default() {
            "OK" | "NOTFOUND" => {}
            "NOKEY" => problems.push(format!(
                "signed with key {}, which is none of the keys given (--packages-key)",
                key.unwrap_or_else(|| "?".into())
            )),
            "NOTTRUSTED" => problems.push(format!(
                "signed with key {}, which is not trusted",
                key.unwrap_or_else(|| "?".into())
            )),
            "BAD" if key.is_some() => problems.push(format!(
                "its signature (key {}) does not verify: the package was altered",
                key.unwrap_or_default()
            )),
            "BAD" => problems.push(format!("{what} does not verify: the file is damaged")),
            other => problems.push(format!("{what}: {other}")),
        }
    }
    if !signed {
        problems.insert(0, "not signed".into());
    }
    problems.dedup();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The wanted packages none of `packages` provides by name (pure).
pub(crate) fn lacking(wanted: &[String], packages: &[Package]) -> Vec<String> {
    wanted
        .iter()
        .filter(|w| !packages.iter().any(|p| &p.name == *w))
        .cloned()
        .collect()
}

/// The `Packages` index of a flat apt repository (`deb file:DIR ./`) (pure): each .deb's
/// control fields, then where it is, its size and sha256.
pub(crate) fn packages_index(packages: &[Package]) -> String {
    let mut out = String::new();
    for p in packages {
        let control = p.control.as_deref().unwrap_or_default().trim_end();
        out.push_str(control);
        out.push_str(&format!(
            "\nFilename: ./{}\nSize: {}\nSHA256: {}\n\n",
            p.file,
            p.data.len(),
            p.sha256()
        ));
    }
    out
}

/// `sha256sum`'s lines for the packages (pure), sorted by file name.
pub(crate) fn sums(packages: &[Package]) -> String {
    let mut lines: Vec<String> = packages
        .iter()
        .map(|p| format!("{}  {}\n", p.sha256(), p.file))
        .collect();
    lines.sort();
    lines.concat()
}

/// Reads DIR's packages for the plan: refused when DIR is not a directory, holds no
/// package, or holds one for another platform or architecture (each named).
pub(crate) fn read_dir(dir: &Path, plan: &Plan, rpm_db: &Path) -> Result<Vec<Package>> {
    let profile = Profile::of(plan.appliance.platform);
    let meta = std::fs::metadata(dir).with_context(|| format!("--packages {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("--packages {}: not a directory", dir.display());
    }
    let ext = profile.package_extension();
    let other = if ext == "rpm" { "deb" } else { "rpm" };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        files.push(entry.file_name().to_string_lossy().into_owned());
    }
    files.sort();
    let mut problems = Vec::new();
    let mut packages = Vec::new();
    let ok_arches = accepted_arches(plan.appliance.platform, plan.appliance.arch);
    for file in &files {
        let path = dir.join(file);
        if file.ends_with(&format!(".{other}")) {
            problems.push(format!(
                "{file}: a .{other}, but the plan's platform is {} (it installs .{ext} files)",
                profile.name()
            ));
            continue;
        }
        if !file.ends_with(&format!(".{ext}")) {
            continue;
        }
        if file.ends_with(".src.rpm") {
            problems.push(format!("{file}: a source package, not one to install"));
            continue;
        }
        let (name, arch, control) = if ext == "rpm" {
            let out = super::iso::run(
                CommandSpec::new("rpm").args([
                    "--dbpath".to_string(),
                    rpm_db.display().to_string(),
                    "-qp".into(),
                    "--nosignature".into(),
                    "--nodigest".into(),
                    "--qf".into(),
                    "%{NAME}\t%{ARCH}\n".into(),
                    path.display().to_string(),
                ]),
                &[0, 1],
            )?;
            match out.stdout.trim().split_once('\t') {
                Some((n, a)) if out.success() => (n.to_string(), a.to_string(), None),
                _ => {
                    problems.push(format!(
                        "{file}: not an RPM rpm can read ({})",
                        out.stderr.trim()
                    ));
                    continue;
                }
            }
        } else {
            let out = super::iso::run(
                CommandSpec::new("dpkg-deb").args(["-f".to_string(), path.display().to_string()]),
                &[0, 2],
            )?;
            let control = out.stdout.clone();
            match (
                control_field(&control, "Package"),
                control_field(&control, "Architecture"),
            ) {
                (Some(n), Some(a)) if out.success() => (n, a, Some(control)),
                _ => {
                    problems.push(format!(
                        "{file}: not a .deb dpkg-deb can read ({})",
                        out.stderr.trim()
                    ));
                    continue;
                }
            }
        };
        if !ok_arches.contains(&arch.as_str()) {
            problems.push(format!(
                "{file}: built for {arch}, but the plan's arch is {} (it takes {} or {})",
                plan.appliance.arch.as_str(),
                ok_arches[0],
                ok_arches[1]
            ));
            continue;
        }
        let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        packages.push(Package {
            file: file.clone(),
            name,
            data,
            control,
        });
    }
    if !problems.is_empty() {
        bail!("--packages {}: {}", dir.display(), problems.join("; "));
    }
    if packages.is_empty() {
        bail!(
            "--packages {}: no .{ext} file in it (the {} packages the plan needs: `{}`, docs/launch.md)",
            dir.display(),
            profile.name(),
            match plan.appliance.platform {
                Platform::Rocky8 => "dnf download --resolve --destdir DIR PACKAGE…",
                Platform::Debian12 => "apt-get download PACKAGE…",
            }
        );
    }
    Ok(packages)
}

/// Every RPM verified against `keys` alone (imported into the fresh database `rpm_db`);
/// refused naming each package that does not verify and why.
pub(crate) fn check_signatures(
    packages: &[Package],
    dir: &Path,
    keys: &[PathBuf],
    rpm_db: &Path,
) -> Result<()> {
    let db = rpm_db.display().to_string();
    for key in keys {
        let text = std::fs::read_to_string(key)
            .with_context(|| format!("--packages-key {}", key.display()))?;
        if !text.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----") {
            bail!(
                "--packages-key {}: not an armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK-----)",
                key.display()
            );
        }
        let out = super::iso::run(
            CommandSpec::new("rpmkeys").args([
                "--dbpath".to_string(),
                db.clone(),
                "--import".into(),
                key.display().to_string(),
            ]),
            &[0, 1],
        )?;
        if !out.success() {
            bail!(
                "--packages-key {}: rpmkeys could not import it: {}",
                key.display(),
                out.stderr.trim()
            );
        }
    }
    let mut problems = Vec::new();
    for p in packages {
        let out = super::iso::run(
            CommandSpec::new("rpmkeys").args([
                "--dbpath".to_string(),
                db.clone(),
                "--define".into(),
                "_pkgverify_level all".into(),
                "-Kv".into(),
                dir.join(&p.file).display().to_string(),
            ]),
            &[0, 1],
        )?;
        match checksig_problem(&out.stdout) {
            None if out.success() => {}
            None => problems.push(format!("{}: {}", p.file, out.stderr.trim())),
            Some(why) => problems.push(format!("{}: {why}", p.file)),
        }
    }
    if !problems.is_empty() {
        bail!(
            "--packages {}: {} package(s) failed the signature check against {}: {}",
            dir.display(),
            problems.len(),
            keys.iter()
                .map(|k| k.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            problems.join("; ")
        );
    }
    Ok(())
}

/// What the directory holds for a plan, checked: its packages, and the wanted ones it
/// lacks. Signatures are checked when keys are given (and required for RPMs by `build`).
pub(crate) struct Inventory {
    pub(crate) packages: Vec<Package>,
    pub(crate) lacking: Vec<String>,
}

pub(crate) fn inventory(args: &PackageArgs, dir: &Path, plan: &Plan) -> Result<Inventory> {
    let db = tempfile::tempdir().context("creating an rpm database for the signature check")?;
    let packages = read_dir(dir, plan, db.path())?;
    if plan.appliance.platform == Platform::Debian12 && !args.packages_key.is_empty() {
        bail!(
            "--packages-key: .debs carry no signature of their own to check (apt checked the repository's when `apt-get download` fetched them); the payload's Packages index holds their sha256"
        );
    }
    if !args.packages_key.is_empty() {
        check_signatures(&packages, dir, &args.packages_key, db.path())?;
    }
    let wanted = pgappliance::steps::packages::wanted(plan);
    let lacking = lacking(&wanted, &packages);
    Ok(Inventory { packages, lacking })
}

/// The payload's members for the packages: the files, the repository's index
/// (createrepo_c's metadata, or a `Packages` file), the keys and `SHA256SUMS`.
pub(crate) fn members(
    plan: &Plan,
    inv: &Inventory,
    keys: &[PathBuf],
) -> Result<BTreeMap<String, Member>> {
    let base = super::installed(MEDIUM_DIR);
    let mut m = BTreeMap::new();
    let file = |data: Vec<u8>| Member { mode: 0o644, data };
    for p in &inv.packages {
        m.insert(format!("{base}/{}", p.file), file(p.data.clone()));
    }
    m.insert(
        format!("{base}/{MEDIUM_SUMS}"),
        file(sums(&inv.packages).into_bytes()),
    );
    match plan.appliance.platform {
        Platform::Rocky8 => {
            let work =
                tempfile::tempdir().context("creating a work directory for the repository")?;
            for p in &inv.packages {
                std::fs::write(work.path().join(&p.file), &p.data)
                    .with_context(|| format!("writing {}", p.file))?;
            }
            super::iso::run(
                CommandSpec::new("createrepo_c").args([
                    "-q".to_string(),
                    "--general-compress-type=gz".into(),
                    work.path().display().to_string(),
                ]),
                &[0],
            )
            .context("createrepo_c: the packages' repository metadata")?;
            let repodata = work.path().join("repodata");
            for entry in std::fs::read_dir(&repodata)? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                m.insert(
                    format!("{base}/repodata/{name}"),
                    file(std::fs::read(entry.path())?),
                );
            }
            let mut names = std::collections::BTreeSet::new();
            for key in keys {
                let name = key
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "key".into());
                if !names.insert(name.clone()) {
                    bail!("--packages-key: two keys named {name}: give them different file names");
                }
                m.insert(
                    format!("{base}/{MEDIUM_KEYS}/{name}"),
                    file(std::fs::read(key).with_context(|| format!("reading {}", key.display()))?),
                );
            }
        }
        Platform::Debian12 => {
            m.insert(
                format!("{base}/Packages"),
                file(packages_index(&inv.packages).into_bytes()),
            );
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpmkeys_verdicts() {
        let ok = "x.rpm:\n    Header V4 RSA/SHA512 Signature, key ID 9d4de7c4: OK\n    Header SHA256 digest: OK\n    Payload SHA256 digest: OK\n    MD5 digest: OK\n";
        assert_eq!(checksig_problem(ok), None);
        let other = "x.rpm:\n    Header V4 RSA/SHA512 Signature, key ID 7129b021: NOKEY\n    Header DSA signature: NOTFOUND\n    Header SHA256 digest: OK\n    RSA signature: NOTFOUND\n";
        assert_eq!(
            checksig_problem(other).as_deref(),
            Some("signed with key 7129b021, which is none of the keys given (--packages-key)")
        );
        let unsigned = "x.rpm:\n    Header RSA signature: NOTFOUND\n    Header DSA signature: NOTFOUND\n    Header SHA256 digest: OK\n    Payload SHA256 digest: OK\n";
        assert_eq!(checksig_problem(unsigned).as_deref(), Some("not signed"));
        let altered = "x.rpm:\n    Header V4 RSA/SHA512 Signature, key ID 9d4de7c4: BAD\n    Payload SHA256 digest: BAD (Expected 1 != 2)\n";
        let why = checksig_problem(altered).expect("bad");
        assert!(
            why.starts_with("its signature (key 9d4de7c4) does not verify"),
            "{why}"
        );
        assert!(why.contains("Payload SHA256 digest"), "{why}");
    }

    fn pkg(name: &str) -> Package {
        Package {
            file: format!("{name}.deb"),
            name: name.into(),
            data: b"abc".to_vec(),
            control: Some(format!(
                "Package: {name}\nVersion: 1\nArchitecture: amd64\nDescription: x\n more\n"
            )),
        }
    }

    #[test]
    fn lacking_index_and_sums() {
        let have = vec![pkg("postgresql-15"), pkg("tuned")];
        assert_eq!(
            lacking(
                &["postgresql-15".into(), "lvm2".into(), "tuned".into()],
                &have
            ),
            ["lvm2"]
        );
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(
            packages_index(&have[..1]),
            format!("Package: postgresql-15\nVersion: 1\nArchitecture: amd64\nDescription: x\n more\nFilename: ./postgresql-15.deb\nSize: 3\nSHA256: {sha}\n\n")
        );
        assert_eq!(
            sums(&have),
            format!("{sha}  postgresql-15.deb\n{sha}  tuned.deb\n")
        );
        assert_eq!(
            control_field("Package: a\nArchitecture: all\n", "Architecture").as_deref(),
            Some("all")
        );
        assert_eq!(control_field("Package: a\n", "Architecture"), None);
        assert_eq!(
            accepted_arches(Platform::Rocky8, Arch::Aarch64),
            ["aarch64", "noarch"]
        );
        assert_eq!(
            accepted_arches(Platform::Debian12, Arch::X86_64),
            ["amd64", "all"]
        );
    }
}
