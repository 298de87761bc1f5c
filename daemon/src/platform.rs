//! Platforms are data: Rocky 8 (dnf, PGDG RPMs, `postgresql-NN-setup`, grubby, SELinux) and
//! Debian 12 (apt, `/usr/lib/postgresql/N/bin`, GRUB's /etc/default/grub) differ in names,
//! paths and commands, never in the steps' logic. Everything here is pure: it says what to
//! run; the steps run it through the runner.

use std::path::PathBuf;

use crate::plan::Platform;
use crate::runner::CommandSpec;

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

    /// PostgreSQL major version when the plan names none (scenario A used 14 on Rocky 8;
    /// Debian 12 ships 15).
    pub fn default_pg_version(&self) -> u32 {
        match self.platform {
            Platform::Rocky8 => 14,
            Platform::Debian12 => 15,
        }
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
        p
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

    /// Commands that install `missing` packages, the repository set-up first when the
    /// PostgreSQL packages are among them. `repository` is the plan's `postgres.repository`.
    pub fn install_commands(
        &self,
        missing: &[String],
        pg_missing: bool,
        repository: Option<&str>,
    ) -> Vec<CommandSpec> {
        let mut cmds = Vec::new();
        if missing.is_empty() {
            return cmds;
        }
        match self.platform {
            Platform::Rocky8 => {
                if pg_missing {
                    if let Some(repo) = repository {
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
                cmds.push(
                    CommandSpec::new("dnf")
                        .args(["install", "-y"])
                        .args(missing.iter().cloned()),
                );
            }
            Platform::Debian12 => {
                if pg_missing {
                    if let Some(repo) = repository {
                        cmds.push(CommandSpec::new("sh").args([
                            "-c".to_string(),
                            format!(
                                "echo 'deb [signed-by=/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc] {repo} bookworm-pgdg main' > /etc/apt/sources.list.d/pgdg.list"
                            ),
                        ]));
                    }
                }
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
        if checksums {
            opts.push("--data-checksums".to_string());
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

    #[test]
    fn rocky_installs_the_repo_rpm_then_disables_the_module() {
        let p = Profile::of(Platform::Rocky8);
        let cmds = p.install_commands(
            &p.packages(14),
            true,
            Some("https://mirror.example/pgdg-redhat-repo-latest.noarch.rpm"),
        );
        let lines: Vec<String> = cmds.iter().map(|c| c.display()).collect();
        assert_eq!(
            lines,
            vec![
                "dnf install -y https://mirror.example/pgdg-redhat-repo-latest.noarch.rpm",
                "dnf -qy module disable postgresql",
                "dnf install -y postgresql14 postgresql14-server postgresql14-contrib lvm2 xfsprogs tuned",
            ]
        );
        assert_eq!(p.pg_bin_dir(14), PathBuf::from("/usr/pgsql-14/bin"));
        assert_eq!(p.pg_unit(14), "postgresql-14.service");
        assert!(p.pg_unit_file(14).is_none());
        let init = p.initdb(14, "/data/pgdata/data", true);
        assert_eq!(
            init.display(),
            "/usr/pgsql-14/bin/postgresql-14-setup initdb"
        );
        assert!(init.env["PGSETUP_INITDB_OPTIONS"].contains("--data-checksums"));
        assert_eq!(p.boot_loader(), BootLoader::Grubby);
    }

    #[test]
    fn debian_skips_the_repo_when_postgres_is_there_and_writes_its_own_unit() {
        let p = Profile::of(Platform::Debian12);
        let cmds = p.install_commands(&["tuned".to_string()], false, Some("http://m/pgdg"));
        let lines: Vec<String> = cmds.iter().map(|c| c.display()).collect();
        assert_eq!(
            lines,
            vec![
                "apt-get update",
                "apt-get install -y --no-install-recommends tuned"
            ]
        );
        assert!(p.install_commands(&[], true, None).is_empty());
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
}
