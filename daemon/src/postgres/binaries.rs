//! Where a PostgreSQL major version's programs live: Debian/Ubuntu
//! (`/usr/lib/postgresql/N/bin`) or PGDG RPMs (`/usr/pgsql-N/bin`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::parse::parse_tool_version;
use crate::runner::{CommandSpec, Runner};

/// Programs the appliance calls.
const REQUIRED: [&str; 6] = [
    "initdb",
    "pg_ctl",
    "postgres",
    "pgbench",
    "pg_checksums",
    "pg_controldata",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgBin {
    pub(crate) dir: PathBuf,
    pub(crate) major: u32,
    /// Full server version, e.g. `15.18`.
    pub(crate) version: String,
}

impl PgBin {
    pub(crate) fn tool(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// The bin directory for `version`, or the newest installed one.
    pub(crate) async fn find(
        runner: &Runner,
        version: Option<u32>,
        explicit: Option<&Path>,
    ) -> Result<Self> {
        let dir = match (explicit, version) {
            (Some(dir), _) => dir.to_path_buf(),
            (None, Some(v)) => candidates(v)
                .into_iter()
                .find(|d| d.join("postgres").exists())
                .with_context(|| {
                    format!(
                        "PostgreSQL {v} is not installed here: none of {} exists. Install it (Debian/Ubuntu: apt-get install postgresql-{v}, from apt.postgresql.org when the distribution lacks {v}; EL: dnf install postgresql{v}-server postgresql{v}-contrib from PGDG) or change postgres.version",
                        candidates(v)
                            .iter()
                            .map(|d| d.join("postgres").display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?,
            (None, None) => newest_installed().context(
                "no PostgreSQL installation found under /usr/lib/postgresql/*/bin or /usr/pgsql-*/bin; install one (Debian: apt-get install postgresql postgresql-contrib) or set --pg-bin",
            )?,
        };
        for tool in REQUIRED {
            if !dir.join(tool).exists() {
                bail!(
                    "{} is missing from {}: install the PostgreSQL server and contrib packages of that version",
                    tool,
                    dir.display()
                );
            }
        }
        let out = runner
            .run(&CommandSpec::new(dir.join("postgres").display().to_string()).arg("--version"))
            .await?;
        let (major, full) = parse_tool_version(&out.stdout).with_context(|| {
            format!(
                "cannot read the version from `{} --version`: {:?}",
                dir.join("postgres").display(),
                out.stdout.trim()
            )
        })?;
        if let Some(v) = version {
            if v != major {
                bail!(
                    "{} is PostgreSQL {major}, but the plan asks for {v}",
                    dir.display()
                );
            }
        }
        Ok(PgBin {
            dir,
            major,
            version: full,
        })
    }
}

fn candidates(major: u32) -> Vec<PathBuf> {
    vec![
        PathBuf::from(format!("/usr/lib/postgresql/{major}/bin")),
        PathBuf::from(format!("/usr/pgsql-{major}/bin")),
    ]
}

fn newest_installed() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        for e in rd.flatten() {
            if let Some(v) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                found.push((v, e.path().join("bin")));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/usr") {
        for e in rd.flatten() {
            let name = e.file_name();
            if let Some(v) = name
                .to_str()
                .and_then(|s| s.strip_prefix("pgsql-"))
                .and_then(|s| s.parse().ok())
            {
                found.push((v, e.path().join("bin")));
            }
        }
    }
    found.retain(|(_, d)| d.join("postgres").exists());
    found.sort();
    found.pop().map(|(_, d)| d)
}
