//! Platforms are data: Rocky 8 (dnf, PGDG RPMs, `postgresql-NN-setup`, grubby, SELinux) and
//! Debian 12 (apt, `/usr/lib/postgresql/N/bin`, GRUB's /etc/default/grub) differ in names,
//! paths and commands, never in the steps' logic. Everything here is pure: it says what to
//! run; the steps run it through the runner.

use std::path::{Path, PathBuf};

use crate::plan::{Platform, Postgres};
use crate::runner::CommandSpec;

/// Where the appliance keeps its journal, runs and done marker (the unit's work directory).
pub const APPLIANCE_WORKDIR: &str = "/var/lib/pgappliance";

/// The marker of a finished run in the appliance's work directory; the unit does not start
/// once it exists (`ConditionPathExists=!`).
pub const DONE_MARKER: &str = "done";

/// Where the kickstart and the user-data install the daemon and the plan.
pub const APPLIANCE_DAEMON: &str = "/usr/bin/pgapplianced";
pub const APPLIANCE_PLAN: &str = "/etc/pgappliance/plan.toml";

/// PGDATA on the data volume mounted at `mount_point`.
pub fn pgdata(mount_point: &str) -> String {
    format!("{}/data", mount_point.trim_end_matches('/'))
}

/// Where the appliance writes its unit files and drop-ins.
pub const SYSTEMD_UNIT_DIR: &str = "/etc/systemd/system";

/// GRUB's defaults file (Debian family), edited before `update-grub`.
pub const GRUB_DEFAULT_FILE: &str = "/etc/default/grub";

/// Rocky 8's package that enables EPEL 8 (from the distribution's extras repository).
pub const EPEL_RELEASE: &str = "epel-release";

/// The yum repository file of the mirror mode (`postgres.repository_baseurl`, rocky8).
pub const PGDG_MIRROR_REPO_FILE: &str = "/etc/yum.repos.d/pgdg-mirror.repo";

/// The apt source of `postgres.repository` (debian12).
pub const PGDG_APT_SOURCE_FILE: &str = "/etc/apt/sources.list.d/pgdg.list";

/// The key apt checks PGDG's packages against (shipped by postgresql-common).
pub const PGDG_APT_KEY: &str = "/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc";

/// The SELinux type PostgreSQL's confined server may use as PGDATA.
pub const PGDATA_SELINUX_TYPE: &str = "postgresql_db_t";

/// How the platform sets kernel arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootLoader {
    /// `grubby --update-kernel=ALL --args=…` (RHEL family).
    Grubby,
    /// `GRUB_CMDLINE_LINUX` in /etc/default/grub, then `update-grub` (Debian family).
    GrubDefault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub platform: Platform,
}

/// Packages besides PostgreSQL the appliance needs.
const TOOLS: [&str; 3] = ["lvm2", "xfsprogs", "tuned"];

/// Rocky's extra packages: `semanage` (policycoreutils-python-utils) labels PGDATA.
const ROCKY_TOOLS: [&str; 1] = ["policycoreutils-python-utils"];

/// A file a step writes before it runs the platform's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToWrite {
    pub path: PathBuf,
    pub text: String,
}

/// How kernel arguments get onto the next boot: files to write, then commands to run.
#[derive(Debug, Clone)]
pub struct KernelArgsChange {
    pub files: Vec<FileToWrite>,
    pub commands: Vec<CommandSpec>,
}

impl Profile {
    pub fn of(platform: Platform) -> Self {
        Profile { platform }
    }

    pub fn name(&self) -> &'static str {
        match self.platform {
            Platform::Rocky8 => "rocky8",
            Platform::Debian12 => "debian12",
        }
    }

    /// PostgreSQL major version when the plan names none.
    pub fn default_pg_version(&self) -> u32 {
        self.platform.default_pg_version()
    }

    /// The PostgreSQL major version the appliance installs and runs.
    pub fn pg_version(&self, postgres: &Postgres) -> u32 {
        postgres
            .version
            .unwrap_or_else(|| self.default_pg_version())
    }

    pub fn pg_bin_dir(&self, v: u32) -> PathBuf {
        match self.platform {
            Platform::Rocky8 => PathBuf::from(format!("/usr/pgsql-{v}/bin")),
            Platform::Debian12 => PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")),
        }
    }

    /// The PostgreSQL service (PGDG's name on both platforms).
    pub fn pg_unit(&self, v: u32) -> String {
        format!("postgresql-{v}.service")
    }

    /// The unit file the appliance must install itself (Debian's packages ship none in the
    /// PGDG layout), or `None` when the package provides it.
    pub fn pg_unit_file(&self, v: u32) -> Option<String> {
        match self.platform {
            Platform::Rocky8 => None,
            Platform::Debian12 => Some(
                crate::assets::POSTGRESQL_UNIT_TEMPLATE
                    .replace("@VERSION@", &v.to_string())
                    .replace("@BINDIR@", &self.pg_bin_dir(v).display().to_string()),
            ),
        }
    }

    /// Directory of the Unix socket the platform's server uses by default.
    pub fn socket_dir(&self) -> PathBuf {
        PathBuf::from("/var/run/postgresql")
    }

    /// The packages the appliance needs for PostgreSQL `v`, server first.
    pub fn packages(&self, v: u32) -> Vec<String> {
        let mut p: Vec<String> = match self.platform {
            Platform::Rocky8 => vec![
                format!("postgresql{v}"),
                format!("postgresql{v}-server"),
                format!("postgresql{v}-contrib"),
            ],
            // postgresql-N carries the contrib modules on Debian 12.
            Platform::Debian12 => vec![format!("postgresql-{v}")],
        };
        p.extend(TOOLS.iter().map(|s| s.to_string()));
        if self.platform == Platform::Rocky8 {
            p.extend(ROCKY_TOOLS.iter().map(|s| s.to_string()));
        }
        p
    }

    /// What sysbench-tpcc workloads add: sysbench with its PostgreSQL driver (Debian's
    /// `sysbench`; on Rocky 8 EPEL 8's, so `epel-release` first).
    pub fn sysbench_packages(&self) -> Vec<String> {
        match self.platform {
            Platform::Rocky8 => vec![EPEL_RELEASE.to_string(), "sysbench".to_string()],
            Platform::Debian12 => vec!["sysbench".to_string()],
        }
    }

    /// A command whose exit status 0 says `pkg` is installed.
    pub fn query_installed(&self, pkg: &str) -> CommandSpec {
        match self.platform {
            Platform::Rocky8 => CommandSpec::new("rpm").args(["-q", "--quiet", pkg]),
            Platform::Debian12 => CommandSpec::new("dpkg-query")
                .args(["-W", "-f=${db:Status-Status}", pkg])
                .env("LC_ALL", "C"),
        }
    }

    /// Whether [`Self::query_installed`]'s output means installed (exit 0 already checked).
    pub fn installed_from_output(&self, stdout: &str) -> bool {
        match self.platform {
            Platform::Rocky8 => true,
            Platform::Debian12 => stdout.trim() == "installed",
        }
    }

    /// Repository files to write before [`Self::install_commands`] when the PostgreSQL
    /// packages are missing: the mirror's `.repo` file (rocky8, `repository_baseurl`) or
    /// the apt source (debian12, `repository`). None for the repository RPM.
    pub fn repository_files(&self, pg: &Postgres, v: u32) -> Vec<FileToWrite> {
        match self.platform {
            Platform::Rocky8 => match (&pg.repository_baseurl, &pg.repository_gpgkey) {
                (Some(base), Some(key)) => vec![FileToWrite {
                    path: PathBuf::from(PGDG_MIRROR_REPO_FILE),
                    text: pgdg_mirror_repo(v, base, key),
                }],
                _ => Vec::new(),
            },
            Platform::Debian12 => match &pg.repository {
                Some(base) => vec![FileToWrite {
                    path: PathBuf::from(PGDG_APT_SOURCE_FILE),
                    text: format!(
                        "# Written by pgapplianced: postgres.repository of the plan.\ndeb [signed-by={PGDG_APT_KEY}] {base} bookworm-pgdg main\n"
                    ),
                }],
                None => Vec::new(),
            },
        }
    }

    /// Commands that install `missing` packages, the repository set-up first when the
    /// PostgreSQL packages are among them (after [`Self::repository_files`] are written).
    pub fn install_commands(
        &self,
        missing: &[String],
        pg_missing: bool,
        pg: &Postgres,
    ) -> Vec<CommandSpec> {
        let mut cmds = Vec::new();
        if missing.is_empty() {
            return cmds;
        }
        match self.platform {
            Platform::Rocky8 => {
                if pg_missing {
                    if let Some(repo) = &pg.repository {
                        cmds.push(CommandSpec::new("dnf").args(["install", "-y", repo]));
                    }
                    // The OS's own postgresql module would shadow PGDG's packages.
                    cmds.push(CommandSpec::new("dnf").args([
                        "-qy",
                        "module",
                        "disable",
                        "postgresql",
                    ]));
                }
                // EPEL's packages (sysbench) resolve only once epel-release is installed.
                let (epel, rest): (Vec<String>, Vec<String>) =
                    missing.iter().cloned().partition(|p| p == EPEL_RELEASE);
                if !epel.is_empty() {
                    cmds.push(CommandSpec::new("dnf").args(["install", "-y", EPEL_RELEASE]));
                }
                if !rest.is_empty() {
                    cmds.push(CommandSpec::new("dnf").args(["install", "-y"]).args(rest));
                }
            }
            Platform::Debian12 => {
                cmds.push(
                    CommandSpec::new("apt-get")
                        .arg("update")
                        .env("DEBIAN_FRONTEND", "noninteractive"),
                );
                cmds.push(
                    CommandSpec::new("apt-get")
                        .args(["install", "-y", "--no-install-recommends"])
                        .args(missing.iter().cloned())
                        .env("DEBIAN_FRONTEND", "noninteractive"),
                );
            }
        }
        cmds
    }

    /// initdb for the service's PGDATA: PGDG's setup script on Rocky (it reads PGDATA from
    /// the unit, so the drop-in and a Reload come first), initdb as postgres elsewhere.
    pub fn initdb(&self, v: u32, pgdata: &str, checksums: bool) -> CommandSpec {
        let mut opts = vec![
            "--encoding=UTF8".to_string(),
            "--locale=C".to_string(),
            "--auth-local=peer".to_string(),
            "--auth-host=scram-sha-256".to_string(),
        ];
        if let Some(option) = crate::postgres::cluster::initdb_checksums_option(v, checksums) {
            opts.push(option.to_string());
        }
        match self.platform {
            Platform::Rocky8 => CommandSpec::new(format!(
                "{}/postgresql-{v}-setup",
                self.pg_bin_dir(v).display()
            ))
            .arg("initdb")
            .env("PGSETUP_INITDB_OPTIONS", opts.join(" ")),
            Platform::Debian12 => {
                CommandSpec::new(format!("{}/initdb", self.pg_bin_dir(v).display()))
                    .args(["--pgdata", pgdata, "--username", "postgres"])
                    .args(opts)
                    .user(Some("postgres"))
            }
        }
    }

    pub fn boot_loader(&self) -> BootLoader {
        match self.platform {
            Platform::Rocky8 => BootLoader::Grubby,
            Platform::Debian12 => BootLoader::GrubDefault,
        }
    }

    /// Whether the platform runs SELinux (PGDATA outside the default path needs a label).
    pub fn has_selinux(&self) -> bool {
        self.platform == Platform::Rocky8
    }

    /// What sets kernel arguments for the next boot: `grubby --update-kernel=ALL --args=…`
    /// (Rocky; it rewrites `kernelopts` and every BLS entry), or GRUB_CMDLINE_LINUX in
    /// /etc/default/grub (`grub_default`: the file's current text) and `update-grub`.
    pub fn kernel_args_change(&self, args: &[String], grub_default: &str) -> KernelArgsChange {
        match self.boot_loader() {
            BootLoader::Grubby => KernelArgsChange {
                files: Vec::new(),
                commands: vec![CommandSpec::new("grubby").args([
                    "--update-kernel=ALL".to_string(),
                    format!("--args={}", args.join(" ")),
                ])],
            },
            BootLoader::GrubDefault => {
                let new = grub_default_with_args(grub_default, args);
                KernelArgsChange {
                    files: if new == grub_default {
                        Vec::new()
                    } else {
                        vec![FileToWrite {
                            path: PathBuf::from(GRUB_DEFAULT_FILE),
                            text: new,
                        }]
                    },
                    commands: vec![CommandSpec::new("update-grub")],
                }
            }
        }
    }

    /// Where a tuned profile the appliance ships is installed.
    pub fn tuned_profile_file(&self, name: &str) -> PathBuf {
        Path::new("/")
            .join(crate::assets::TUNED_PROFILE_DIR)
            .join(name)
            .join("tuned.conf")
    }

    /// The directories tuned reads profiles from, the user's first (tuned 2.18's order).
    pub fn tuned_profile_dirs(&self) -> [PathBuf; 2] {
        [PathBuf::from("/etc/tuned"), PathBuf::from("/usr/lib/tuned")]
    }

    /// The unit file and drop-in directory of a unit the appliance writes.
    pub fn unit_file(&self, unit: &str) -> PathBuf {
        Path::new(SYSTEMD_UNIT_DIR).join(unit)
    }

    /// The appliance's drop-in for the PostgreSQL service.
    pub fn pg_drop_in_file(&self, v: u32) -> PathBuf {
        Path::new(SYSTEMD_UNIT_DIR)
            .join(format!("{}.d", self.pg_unit(v)))
            .join("pgappliance.conf")
    }
}

/// The mirror mode's yum repository (pure): PGDG's packages from `baseurl`, every package
/// checked against `gpgkey` (a URL, or an absolute path made a `file://` URL).
pub fn pgdg_mirror_repo(v: u32, baseurl: &str, gpgkey: &str) -> String {
    let key = if gpgkey.starts_with('/') {
        format!("file://{gpgkey}")
    } else {
        gpgkey.to_string()
    };
    format!(
        "# Written by pgapplianced: PostgreSQL {v} from the PGDG mirror named in the plan\n\
         # (postgres.repository_baseurl, postgres.repository_gpgkey).\n\
         [pgdg-mirror]\n\
         name=PostgreSQL (PGDG mirror) for EL 8 - $basearch\n\
         baseurl={baseurl}\n\
         enabled=1\n\
         gpgcheck=1\n\
         repo_gpgcheck=0\n\
         gpgkey={key}\n"
    )
}

/// Where the payload puts the packages `pgappliance build --packages DIR` carries: a local
/// repository (createrepo_c's `repodata/` for RPMs, a `Packages` index for .debs), the keys
/// the RPMs were checked against under `keys/`, and `SHA256SUMS` of every package.
pub const MEDIUM_DIR: &str = "/usr/share/pgappliance/packages";

/// The repository id of the medium's packages (rocky8) in dnf's `--enablerepo`.
pub const MEDIUM_REPO_ID: &str = "pgappliance-medium";

/// The yum repository file of the medium (rocky8).
pub const MEDIUM_REPO_FILE: &str = "/etc/yum.repos.d/pgappliance-medium.repo";

/// The apt source of the medium (debian12), read alone by the packages step's apt-get.
pub const MEDIUM_APT_SOURCE_FILE: &str = "/etc/apt/sources.list.d/pgappliance-medium.list";

/// The medium's directory of the public keys its RPMs were checked against.
pub const MEDIUM_KEYS: &str = "keys";

/// The medium's list of its packages' sha256 (`sha256sum` format).
pub const MEDIUM_SUMS: &str = "SHA256SUMS";

/// The packages carried by the payload (`MEDIUM_DIR`): the step installs from them alone
/// when the payload brought them (their index is there), whatever the plan's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Medium {
    pub dir: PathBuf,
    /// The key files under `dir/keys/` (rocky8), sorted.
    pub keys: Vec<String>,
}

impl Profile {
    /// The file whose presence under a medium's directory makes it a repository.
    pub fn medium_index(&self) -> &'static str {
        match self.platform {
            Platform::Rocky8 => "repodata/repomd.xml",
            Platform::Debian12 => "Packages",
        }
    }

    /// The package files of the platform (`.rpm`, `.deb`).
    pub fn package_extension(&self) -> &'static str {
        match self.platform {
            Platform::Rocky8 => "rpm",
            Platform::Debian12 => "deb",
        }
    }

    /// The repository file that makes the medium a source: a `.repo` with `baseurl=file://`,
    /// `gpgcheck=1` and every key of the medium (rocky8); an apt `file:` source, trusted
    /// (debian12: the .debs' sha256 are in the `Packages` index apt checks them against, and
    /// that index came in the payload whose sha256 the installer checked).
    pub fn medium_repository_file(&self, medium: &Medium) -> FileToWrite {
        let dir = medium.dir.display().to_string();
        let dir = dir.trim_end_matches('/');
        match self.platform {
            Platform::Rocky8 => {
                let keys: Vec<String> = medium
                    .keys
                    .iter()
                    .map(|k| format!("file://{dir}/{MEDIUM_KEYS}/{k}"))
                    .collect();
                FileToWrite {
                    path: PathBuf::from(MEDIUM_REPO_FILE),
                    text: format!(
                        "# Written by pgapplianced: the packages the payload carries (pgappliance build --packages).\n\
                         [{MEDIUM_REPO_ID}]\n\
                         name=pgappliance: packages from the install medium\n\
                         baseurl=file://{dir}\n\
                         enabled=0\n\
                         gpgcheck=1\n\
                         repo_gpgcheck=0\n\
                         gpgkey={}\n",
                        keys.join(" ")
                    ),
                }
            }
            Platform::Debian12 => FileToWrite {
                path: PathBuf::from(MEDIUM_APT_SOURCE_FILE),
                text: format!(
                    "# Written by pgapplianced: the packages the payload carries (pgappliance build --packages).\n\
                     deb [trusted=yes] file:{dir} ./\n"
                ),
            },
        }
    }

    /// The commands that install `missing` from the medium alone (after
    /// [`Self::medium_repository_file`] is written): no other repository is read, so no
    /// network is needed. dnf keeps `gpgcheck` on (every package checked against the
    /// medium's keys); no module is disabled (only the medium's repository is enabled, and
    /// it has no modular metadata to filter PGDG's packages with).
    pub fn medium_install_commands(&self, missing: &[String]) -> Vec<CommandSpec> {
        if missing.is_empty() {
            return Vec::new();
        }
        match self.platform {
            Platform::Rocky8 => vec![CommandSpec::new("dnf")
                .args([
                    "install".to_string(),
                    "-y".to_string(),
                    "--disablerepo=*".to_string(),
                    format!("--enablerepo={MEDIUM_REPO_ID}"),
                ])
                .args(missing.iter().cloned())],
            Platform::Debian12 => {
                let only = [
                    "-o".to_string(),
                    format!("Dir::Etc::sourcelist={MEDIUM_APT_SOURCE_FILE}"),
                    "-o".to_string(),
                    "Dir::Etc::sourceparts=-".to_string(),
                ];
                vec![
                    CommandSpec::new("apt-get")
                        .arg("update")
                        .args(only.clone())
                        .args(["-o", "APT::Get::List-Cleanup=0"])
                        .env("DEBIAN_FRONTEND", "noninteractive"),
                    CommandSpec::new("apt-get")
                        .args(["install", "-y", "--no-install-recommends"])
                        .args(only)
                        .args(missing.iter().cloned())
                        .env("DEBIAN_FRONTEND", "noninteractive"),
                ]
            }
        }
    }
}

/// What dnf's standard error says about a package or repository that failed its signature
/// check (pure), e.g. "postgresql15-server-15.18-1PGDG.rhel8.x86_64: no installed public key
/// matches its signature (the repository's keys: http://…/KEY)"; `None` when it says nothing
/// of signatures. Reads the messages of dnf 4.7 (Rocky 8.6) and 4.14 alike: "Public key for
/// P.rpm is not installed" (4.14 adds ". Failing package is: P" and " GPG Keys are configured
/// as: …"), "Package P is not signed", "The GPG keys listed for the "R" repository are
/// already installed but they are not correct for this package", and a repository's
/// "repomd.xml GPG signature verification error: …".
pub fn dnf_signature_failure(stderr: &str) -> Option<String> {
    let mut reasons: Vec<String> = Vec::new();
    let mut keys: Option<String> = None;
    let mut failing: Option<String> = None;
    let mut wrong_keys_repo: Option<String> = None;
    for line in stderr.lines() {
        let line = line.trim();
        // dnf 4.14 appends ". Failing package is: P" to the line before it.
        if let Some((_, pkg)) = line.split_once("Failing package is: ") {
            failing = Some(pkg.trim().to_string());
        }
        if let Some(rest) = line.strip_prefix("Public key for ") {
            if let Some((file, _)) = rest.split_once(" is not installed") {
                let pkg = file.strip_suffix(".rpm").unwrap_or(file).to_string();
                reasons.push(format!(
                    "{pkg}: no installed public key matches its signature"
                ));
            }
        } else if let Some(rest) = line.strip_prefix("Package ") {
            if let Some(pkg) = rest.strip_suffix(" is not signed") {
                reasons.push(format!("{pkg}: not signed"));
            }
        } else if let Some(rest) = line.strip_prefix("The GPG keys listed for the \"") {
            if let Some((repo, _)) = rest.split_once("\" repository are already installed") {
                wrong_keys_repo = Some(repo.to_string());
            }
        } else if let Some(k) = line.strip_prefix("GPG Keys are configured as: ") {
            keys = Some(k.trim().to_string());
        } else if let Some((_, why)) =
            line.split_once("repomd.xml GPG signature verification error: ")
        {
            reasons.push(format!(
                "the repository's metadata (repomd.xml) failed its signature check: {}",
                why.trim()
            ));
        }
    }
    if let Some(repo) = wrong_keys_repo {
        let pkg = failing.clone().unwrap_or_else(|| "a package".to_string());
        reasons.push(format!(
            "{pkg}: signed by none of the keys repository \"{repo}\" names (those keys are installed)"
        ));
    }
    if reasons.is_empty() {
        return None;
    }
    reasons.dedup();
    let mut text = reasons.join("; ");
    if let Some(k) = keys {
        text.push_str(&format!(" (the repository's keys: {k})"));
    }
    Some(text)
}

/// Whether SELinux is there to label PGDATA for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelinuxPresence {
    /// Running (enforcing or permissive): add the file-context rule and relabel.
    Running,
    /// Disabled now but configured to run after a reboot: add the persistent rule (the
    /// boot's relabel applies it); nothing can be relabelled now.
    Configured,
    /// Not there at all.
    Absent,
}

/// Reads the state from `/sys/fs/selinux/enforce` (`None` when selinuxfs is not mounted)
/// and `/etc/selinux/config`'s text (`None` when missing) (pure).
pub fn selinux_presence(enforce: Option<&str>, config: Option<&str>) -> SelinuxPresence {
    if enforce.is_some_and(|e| matches!(e.trim(), "0" | "1")) {
        return SelinuxPresence::Running;
    }
    let configured = config.is_some_and(|c| {
        c.lines().any(|l| {
            let l = l.trim();
            l.strip_prefix("SELINUX=")
                .is_some_and(|v| matches!(v.trim(), "enforcing" | "permissive"))
        })
    });
    if configured {
        SelinuxPresence::Configured
    } else {
        SelinuxPresence::Absent
    }
}

/// The file-context pattern that covers `path` and everything under it.
pub fn selinux_fcontext_pattern(path: &str) -> String {
    format!("{}(/.*)?", path.trim_end_matches('/'))
}

/// Lists the local file-context customisations (what `semanage fcontext -a` added).
pub fn selinux_fcontext_list() -> CommandSpec {
    CommandSpec::new("semanage").args(["fcontext", "-l", "-C"])
}

/// The SELinux type a local rule gives exactly `pattern`, from
/// `semanage fcontext -l -C` output (pure). Lines are `PATTERN  FILE-TYPE  CONTEXT`, the
/// context `user:role:type[:level]`, or `<<None>>`.
pub fn fcontext_rule_type(list: &str, pattern: &str) -> Option<String> {
    list.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != pattern {
            return None;
        }
        let context = words.last()?;
        Some(match context.split(':').nth(2) {
            Some(t) => t.to_string(),
            None => context.to_string(),
        })
    })
}

/// The `semanage fcontext` command that makes `path(/.*)?` PostgreSQL's data type, given
/// the type a local rule already gives it (`None`: no rule, so add one; another type:
/// modify it; the right type: nothing to do).
pub fn selinux_fcontext_command(path: &str, existing: Option<&str>) -> Option<CommandSpec> {
    let op = match existing {
        None => "-a",
        Some(t) if t == PGDATA_SELINUX_TYPE => return None,
        Some(_) => "-m",
    };
    Some(CommandSpec::new("semanage").args([
        "fcontext".to_string(),
        op.to_string(),
        "-t".to_string(),
        PGDATA_SELINUX_TYPE.to_string(),
        selinux_fcontext_pattern(path),
    ]))
}

/// Relabels `path` and everything under it from the file-context rules.
pub fn restorecon(path: &str) -> CommandSpec {
    let path = match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    };
    CommandSpec::new("restorecon").args(["-R", "-v", path])
}

/// The drop-in that points the platform's PostgreSQL unit at PGDATA on the data volume
/// (pure).
pub fn service_drop_in(pgdata: &str, mount_point: Option<&str>) -> String {
    let mut s = String::from("# Written by pgapplianced: PGDATA on the appliance's data volume.\n");
    if let Some(m) = mount_point {
        s.push_str(&format!("[Unit]\nRequiresMountsFor={m}\n\n"));
    }
    s.push_str(&format!(
        "[Service]\nEnvironment=PGDATA={pgdata}\n# Crash recovery of a large cluster takes as long as it takes.\nTimeoutStartSec=0\n"
    ));
    s
}

/// Adds the arguments that are missing to `GRUB_CMDLINE_LINUX` in /etc/default/grub's text
/// (pure). A line is appended when the file has none.
pub fn grub_default_with_args(text: &str, args: &[String]) -> String {
    let mut out = String::new();
    let mut found = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("GRUB_CMDLINE_LINUX=") {
            found = true;
            let value = rest.trim().trim_matches('"').trim_matches('\'');
            let mut words: Vec<String> = value.split_whitespace().map(str::to_string).collect();
            for a in args {
                if !words.contains(a) {
                    words.push(a.clone());
                }
            }
            out.push_str(&format!("GRUB_CMDLINE_LINUX=\"{}\"\n", words.join(" ")));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !found {
        out.push_str(&format!("GRUB_CMDLINE_LINUX=\"{}\"\n", args.join(" ")));
    }
    out
}

/// The planned kernel arguments that the running kernel's command line lacks.
pub fn missing_kernel_args(cmdline: &str, args: &[String]) -> Vec<String> {
    let have: Vec<&str> = cmdline.split_whitespace().collect();
    args.iter()
        .filter(|a| !have.contains(&a.as_str()))
        .cloned()
        .collect()
}

/// The bracketed choice of a /sys/kernel/mm/transparent_hugepage/enabled line.
pub fn thp_mode(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(repository: Option<&str>, baseurl: Option<&str>, key: Option<&str>) -> Postgres {
        Postgres {
            version: Some(14),
            repository: repository.map(str::to_string),
            repository_baseurl: baseurl.map(str::to_string),
            repository_gpgkey: key.map(str::to_string),
            data_checksums: false,
        }
    }

    #[test]
    fn from_18_initdb_is_told_to_leave_checksums_off() {
        // PostgreSQL 18's initdb turns data checksums on unless told not to.
        for (v, off) in [
            (17, None),
            (18, Some("--no-data-checksums")),
            (19, Some("--no-data-checksums")),
        ] {
            for platform in [Platform::Rocky8, Platform::Debian12] {
                let p = Profile::of(platform);
                let all = |c: CommandSpec| format!("{} {:?}", c.display(), c.env);
                let text = all(p.initdb(v, "/d", false));
                match off {
                    Some(o) => assert!(text.contains(o), "{v} {text}"),
                    None => assert!(!text.contains("checksums"), "{v} {text}"),
                }
                let on = all(p.initdb(v, "/d", true));
                assert!(
                    on.contains("--data-checksums") && !on.contains("--no-data-checksums"),
                    "{v} {on}"
                );
            }
        }
    }

    #[test]
    fn every_supported_version_has_its_packages_paths_and_unit() {
        for v in crate::plan::PG_MAJORS {
            let rocky = Profile::of(Platform::Rocky8);
            assert_eq!(
                rocky.packages(v)[..3],
                [
                    format!("postgresql{v}"),
                    format!("postgresql{v}-server"),
                    format!("postgresql{v}-contrib")
                ]
            );
            assert_eq!(
                rocky.pg_bin_dir(v),
                PathBuf::from(format!("/usr/pgsql-{v}/bin"))
            );
            assert!(rocky
                .initdb(v, "/d", false)
                .display()
                .contains(&format!("/usr/pgsql-{v}/bin/postgresql-{v}-setup initdb")));
            let debian = Profile::of(Platform::Debian12);
            assert_eq!(debian.packages(v)[0], format!("postgresql-{v}"));
            assert_eq!(
                debian.pg_bin_dir(v),
                PathBuf::from(format!("/usr/lib/postgresql/{v}/bin"))
            );
            assert_eq!(rocky.pg_unit(v), format!("postgresql-{v}.service"));
        }
    }

    #[test]
    fn rocky_installs_the_repo_rpm_then_disables_the_module() {
        let p = Profile::of(Platform::Rocky8);
        let rpm = pg(
            Some("https://mirror.example/EL-8-aarch64/pgdg-redhat-repo-latest.noarch.rpm"),
            None,
            None,
        );
        assert!(p.repository_files(&rpm, 14).is_empty());
        let cmds = p.install_commands(&p.packages(14), true, &rpm);
        let lines: Vec<String> = cmds.iter().map(|c| c.display()).collect();
        assert_eq!(
            lines,
            vec![
                "dnf install -y https://mirror.example/EL-8-aarch64/pgdg-redhat-repo-latest.noarch.rpm",
                "dnf -qy module disable postgresql",
                "dnf install -y postgresql14 postgresql14-server postgresql14-contrib lvm2 xfsprogs tuned policycoreutils-python-utils",
            ]
        );
        assert_eq!(p.pg_bin_dir(14), PathBuf::from("/usr/pgsql-14/bin"));
        assert_eq!(p.pg_unit(14), "postgresql-14.service");
        assert!(p.pg_unit_file(14).is_none());
        assert_eq!(
            p.pg_drop_in_file(14),
            PathBuf::from("/etc/systemd/system/postgresql-14.service.d/pgappliance.conf")
        );
        let init = p.initdb(14, "/data/pgdata/data", true);
        assert_eq!(
            init.display(),
            "/usr/pgsql-14/bin/postgresql-14-setup initdb"
        );
        assert!(init.env["PGSETUP_INITDB_OPTIONS"].contains("--data-checksums"));
        assert_eq!(p.boot_loader(), BootLoader::Grubby);
    }

    #[test]
    fn rocky_mirror_mode_writes_a_checked_repo_file() {
        let p = Profile::of(Platform::Rocky8);
        let mirror = pg(
            None,
            Some("https://mirror.lab/pgdg/14/redhat/rhel-8-aarch64"),
            Some("/etc/pki/rpm-gpg/PGDG-RPM-GPG-KEY-RHEL"),
        );
        let files = p.repository_files(&mirror, 14);
        assert_eq!(files.len(), 1);
        assert_eq!(
            files[0].path,
            PathBuf::from("/etc/yum.repos.d/pgdg-mirror.repo")
        );
        assert_eq!(
            files[0].text,
            "# Written by pgapplianced: PostgreSQL 14 from the PGDG mirror named in the plan\n\
             # (postgres.repository_baseurl, postgres.repository_gpgkey).\n\
             [pgdg-mirror]\n\
             name=PostgreSQL (PGDG mirror) for EL 8 - $basearch\n\
             baseurl=https://mirror.lab/pgdg/14/redhat/rhel-8-aarch64\n\
             enabled=1\n\
             gpgcheck=1\n\
             repo_gpgcheck=0\n\
             gpgkey=file:///etc/pki/rpm-gpg/PGDG-RPM-GPG-KEY-RHEL\n"
        );
        // A key given as a URL stays a URL.
        assert!(
            pgdg_mirror_repo(14, "file:///srv/pgdg", "https://k.lab/PGDG-KEY")
                .contains("\ngpgkey=https://k.lab/PGDG-KEY\n")
        );
        // No repository RPM is installed in mirror mode; the module is still disabled.
        let lines: Vec<String> = p
            .install_commands(&["postgresql14".to_string()], true, &mirror)
            .iter()
            .map(|c| c.display())
            .collect();
        assert_eq!(
            lines,
            vec![
                "dnf -qy module disable postgresql",
                "dnf install -y postgresql14"
            ]
        );
    }

    #[test]
    fn the_medium_is_the_only_source_with_gpgcheck_on() {
        let p = Profile::of(Platform::Rocky8);
        let medium = Medium {
            dir: PathBuf::from(MEDIUM_DIR),
            keys: vec![
                "PGDG-RPM-GPG-KEY-RHEL".into(),
                "RPM-GPG-KEY-rockyofficial".into(),
            ],
        };
        let file = p.medium_repository_file(&medium);
        assert_eq!(
            file.path,
            PathBuf::from("/etc/yum.repos.d/pgappliance-medium.repo")
        );
        assert_eq!(
            file.text,
            "# Written by pgapplianced: the packages the payload carries (pgappliance build --packages).\n\
             [pgappliance-medium]\n\
             name=pgappliance: packages from the install medium\n\
             baseurl=file:///usr/share/pgappliance/packages\n\
             enabled=0\n\
             gpgcheck=1\n\
             repo_gpgcheck=0\n\
             gpgkey=file:///usr/share/pgappliance/packages/keys/PGDG-RPM-GPG-KEY-RHEL file:///usr/share/pgappliance/packages/keys/RPM-GPG-KEY-rockyofficial\n"
        );
        let lines: Vec<String> = p
            .medium_install_commands(&["postgresql15".into(), "postgresql15-server".into()])
            .iter()
            .map(|c| c.display())
            .collect();
        assert_eq!(
            lines,
            ["dnf install -y '--disablerepo=*' --enablerepo=pgappliance-medium postgresql15 postgresql15-server"]
        );
        assert!(p.medium_install_commands(&[]).is_empty());
        assert_eq!(p.medium_index(), "repodata/repomd.xml");
        assert_eq!(p.package_extension(), "rpm");

        let d = Profile::of(Platform::Debian12);
        let file = d.medium_repository_file(&Medium {
            dir: PathBuf::from("/m/"),
            keys: Vec::new(),
        });
        assert_eq!(
            file.path,
            PathBuf::from("/etc/apt/sources.list.d/pgappliance-medium.list")
        );
        assert!(
            file.text.ends_with("\ndeb [trusted=yes] file:/m ./\n"),
            "{}",
            file.text
        );
        let lines: Vec<String> = d
            .medium_install_commands(&["postgresql-15".into()])
            .iter()
            .map(|c| c.display())
            .collect();
        assert_eq!(
            lines,
            [
                "apt-get update -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/pgappliance-medium.list -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0",
                "apt-get install -y --no-install-recommends -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/pgappliance-medium.list -o Dir::Etc::sourceparts=- postgresql-15",
            ]
        );
        assert_eq!(d.medium_index(), "Packages");
        assert_eq!(d.package_extension(), "deb");
    }

    #[test]
    fn debian_skips_the_repo_when_postgres_is_there_and_writes_its_own_unit() {
        let p = Profile::of(Platform::Debian12);
        let apt = pg(Some("http://m/pgdg"), None, None);
        let cmds = p.install_commands(&["tuned".to_string()], false, &apt);
        let lines: Vec<String> = cmds.iter().map(|c| c.display()).collect();
        assert_eq!(
            lines,
            vec![
                "apt-get update",
                "apt-get install -y --no-install-recommends tuned"
            ]
        );
        assert_eq!(
            p.repository_files(&apt, 15),
            vec![FileToWrite {
                path: PathBuf::from("/etc/apt/sources.list.d/pgdg.list"),
                text: "# Written by pgapplianced: postgres.repository of the plan.\n\
                       deb [signed-by=/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc] http://m/pgdg bookworm-pgdg main\n"
                    .to_string(),
            }]
        );
        assert!(!p.packages(15).iter().any(|x| x.contains("policycoreutils")));
        assert!(p.install_commands(&[], true, &apt).is_empty());
        let unit = p.pg_unit_file(15).expect("debian gets a unit");
        assert!(unit.contains("ExecStart=/usr/lib/postgresql/15/bin/postgres -D ${PGDATA}"));
        assert!(
            !unit.contains("@VERSION@") && !unit.contains("@BINDIR@"),
            "{unit}"
        );
        let init = p.initdb(15, "/d/data", false);
        assert_eq!(init.user.as_deref(), Some("postgres"));
        assert!(init.args.contains(&"/d/data".to_string()));
        assert!(!init.args.contains(&"--data-checksums".to_string()));
    }

    #[test]
    fn sysbench_comes_from_epel_on_rocky8() {
        let p = Profile::of(Platform::Rocky8);
        let mut missing = vec!["tuned".to_string()];
        missing.extend(p.sysbench_packages());
        let pg = Postgres {
            version: Some(13),
            repository: None,
            repository_baseurl: None,
            repository_gpgkey: None,
            data_checksums: false,
        };
        let cmds: Vec<String> = p
            .install_commands(&missing, false, &pg)
            .iter()
            .map(|c| c.display())
            .collect();
        assert_eq!(
            cmds,
            [
                "dnf install -y epel-release",
                "dnf install -y tuned sysbench"
            ]
        );
        assert_eq!(
            Profile::of(Platform::Debian12).sysbench_packages(),
            ["sysbench"]
        );
    }

    #[test]
    fn kernel_args_go_through_grubby_or_grub_default() {
        let args = vec![
            "transparent_hugepage=never".to_string(),
            "nosmt".to_string(),
        ];
        let rocky = Profile::of(Platform::Rocky8).kernel_args_change(&args, "");
        assert!(rocky.files.is_empty());
        let lines: Vec<String> = rocky.commands.iter().map(|c| c.display()).collect();
        assert_eq!(
            lines,
            vec!["grubby --update-kernel=ALL '--args=transparent_hugepage=never nosmt'"]
        );
        let debian = Profile::of(Platform::Debian12);
        let change = debian.kernel_args_change(&args, "GRUB_CMDLINE_LINUX=\"quiet\"\n");
        assert_eq!(
            change.files,
            vec![FileToWrite {
                path: PathBuf::from("/etc/default/grub"),
                text: "GRUB_CMDLINE_LINUX=\"quiet transparent_hugepage=never nosmt\"\n".into(),
            }]
        );
        let lines: Vec<String> = change.commands.iter().map(|c| c.display()).collect();
        assert_eq!(lines, vec!["update-grub"]);
        // Already there: the file is left alone, update-grub still runs.
        let same = debian.kernel_args_change(
            &args,
            "GRUB_CMDLINE_LINUX=\"quiet transparent_hugepage=never nosmt\"\n",
        );
        assert!(same.files.is_empty());
        assert_eq!(
            debian.tuned_profile_file("postgresql"),
            PathBuf::from("/usr/lib/tuned/postgresql/tuned.conf")
        );
    }

    #[test]
    fn selinux_presence_reads_selinuxfs_then_the_config() {
        use SelinuxPresence::*;
        assert_eq!(selinux_presence(Some("1\n"), None), Running);
        assert_eq!(
            selinux_presence(Some("0"), Some("SELINUX=disabled\n")),
            Running
        );
        let cfg = "# comment\nSELINUX=enforcing\nSELINUXTYPE=targeted\n";
        assert_eq!(selinux_presence(None, Some(cfg)), Configured);
        assert_eq!(
            selinux_presence(None, Some("SELINUX=permissive\n")),
            Configured
        );
        assert_eq!(selinux_presence(None, Some("SELINUX=disabled\n")), Absent);
        assert_eq!(selinux_presence(None, None), Absent);
    }

    #[test]
    fn selinux_command_lines() {
        let add = selinux_fcontext_command("/var/lib/pgappliance/pgdata/", None).expect("add");
        assert_eq!(
            add.display(),
            "semanage fcontext -a -t postgresql_db_t '/var/lib/pgappliance/pgdata(/.*)?'"
        );
        assert_eq!(add.args[4], "/var/lib/pgappliance/pgdata(/.*)?");
        let modify = selinux_fcontext_command("/pgdata", Some("var_lib_t")).expect("modify");
        assert_eq!(
            modify.display(),
            "semanage fcontext -m -t postgresql_db_t '/pgdata(/.*)?'"
        );
        assert!(selinux_fcontext_command("/pgdata", Some("postgresql_db_t")).is_none());
        assert_eq!(
            restorecon("/var/lib/pgappliance/pgdata/").display(),
            "restorecon -R -v /var/lib/pgappliance/pgdata"
        );
        assert_eq!(selinux_fcontext_list().display(), "semanage fcontext -l -C");
    }

    #[test]
    fn fcontext_list_is_parsed_for_the_exact_pattern() {
        // Composed in the layout of policycoreutils 2.9's `semanage fcontext -l -C`
        // (seobject.py: "%-50s %-18s %s:%s:%s:%s "), not captured on a Rocky machine.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/platform/semanage-fcontext-l-C.composed.txt"
        ))
        .expect("fixture");
        assert_eq!(
            fcontext_rule_type(&text, "/var/lib/pgappliance/pgdata(/.*)?").as_deref(),
            Some("postgresql_db_t")
        );
        assert_eq!(
            fcontext_rule_type(&text, "/srv/other(/.*)?").as_deref(),
            Some("var_lib_t")
        );
        assert_eq!(
            fcontext_rule_type(&text, "/srv/none(/.*)?").as_deref(),
            Some("<<None>>")
        );
        // A longer pattern that only starts with ours is not ours.
        assert_eq!(
            fcontext_rule_type(&text, "/var/lib/pgappliance(/.*)?"),
            None
        );
        assert_eq!(fcontext_rule_type("", "/pgdata(/.*)?"), None);
    }

    #[test]
    fn grub_default_gains_only_missing_args() {
        let text = "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"console=ttyS0 quiet\"\n";
        let args = vec![
            "transparent_hugepage=never".to_string(),
            "quiet".to_string(),
        ];
        assert_eq!(
            grub_default_with_args(text, &args),
            "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"console=ttyS0 quiet transparent_hugepage=never\"\n"
        );
        assert_eq!(
            grub_default_with_args("GRUB_DEFAULT=0\n", &args),
            "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"transparent_hugepage=never quiet\"\n"
        );
    }

    #[test]
    fn kernel_args_and_thp_are_read_back() {
        let cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/vda transparent_hugepage=never\n";
        assert!(missing_kernel_args(cmdline, &["transparent_hugepage=never".into()]).is_empty());
        assert_eq!(
            missing_kernel_args(cmdline, &["nosmt".into()]),
            vec!["nosmt".to_string()]
        );
        assert_eq!(
            thp_mode("always madvise [never]\n").as_deref(),
            Some("never")
        );
        assert_eq!(thp_mode("garbage"), None);
    }

    #[test]
    fn dnf_signature_failure_names_the_package_and_the_keys() {
        let stderr = include_str!("../tests/fixtures/dnf/gpg-check-failed-4.14.stderr");
        assert_eq!(
            dnf_signature_failure(stderr).as_deref(),
            Some(
                "postgresql15-server-15.18-1PGDG.rhel8.x86_64: no installed public key matches its signature \
                 (the repository's keys: http://127.0.0.1:18091/badsig/PGDG-RPM-GPG-KEY-RHEL)"
            )
        );
        // dnf 4.7's form: the package file only.
        assert_eq!(
            dnf_signature_failure(
                "Public key for postgresql14-server-14.5-1PGDG.rhel8.aarch64.rpm is not installed\nError: GPG check FAILED\n"
            )
            .as_deref(),
            Some("postgresql14-server-14.5-1PGDG.rhel8.aarch64: no installed public key matches its signature")
        );
        assert_eq!(
            dnf_signature_failure(
                "The GPG keys listed for the \"pgdg14\" repository are already installed but they are not correct for this package.\n\
                 Check that the correct key URLs are configured for this repository.. Failing package is: postgresql14-14.5-1PGDG.rhel8.x86_64\n"
            )
            .as_deref(),
            Some("postgresql14-14.5-1PGDG.rhel8.x86_64: signed by none of the keys repository \"pgdg14\" names (those keys are installed)")
        );
        assert_eq!(
            dnf_signature_failure("Package sysbench-1.0.20-5.el8.x86_64 is not signed\n")
                .as_deref(),
            Some("sysbench-1.0.20-5.el8.x86_64: not signed")
        );
        assert!(dnf_signature_failure(
            "Errors during downloading metadata for repository 'pgdg14':\n  - Curl error (6): Couldn't resolve host name\n"
        )
        .is_none());
        assert!(dnf_signature_failure(
            "Error: Failed to download metadata for repo 'pgdg14': repomd.xml GPG signature verification error: Bad GPG signature\n"
        )
        .expect("a repomd.xml signature error is a signature failure")
        .contains("repomd.xml) failed its signature check: Bad GPG signature"));
    }
}
