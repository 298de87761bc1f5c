//! A PostgreSQL cluster, controlled with pg_ctl (local mode: under the work directory,
//! `data/` (PGDATA), `socket/` (Unix socket), `server.log`, owned by the cluster user) or by
//! a [`ServerControl`] the host provides (the appliance's is the platform's systemd service,
//! in [`crate::host`]). The steps do not know which.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::parse::parse_controldata_checksums;
use super::PgBin;
use crate::runner::{CommandSpec, Runner};

/// Superuser role created by initdb and used by the appliance.
pub(crate) const SUPERUSER: &str = "postgres";

/// The pg_ident.conf map through which the daemon's and the cluster's OS users log in as
/// [`SUPERUSER`] over the local socket (peer authentication).
pub(crate) const IDENT_MAP: &str = "pgappliance";

/// Longest Unix socket path Linux accepts (sun_path is 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A boxed future of a server control operation.
pub(crate) type ControlFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + 'a>>;

/// Starts and stops a server some other way than pg_ctl (the host's service manager).
pub(crate) trait ServerControl {
    /// Whether the server runs (a start may still be in progress).
    fn is_running(&self) -> ControlFuture<'_, bool>;
    /// Starts it; returns once the start has been carried out (not yet accepting).
    fn start(&self) -> ControlFuture<'_, ()>;
    fn stop(&self) -> ControlFuture<'_, ()>;
    fn restart(&self) -> ControlFuture<'_, ()>;
}

/// Who starts and stops the server.
#[derive(Clone)]
enum Control {
    PgCtl,
    Other(std::sync::Arc<dyn ServerControl>),
}

/// initdb's option for the planned checksum state: `--data-checksums` to have them, and
/// from 18 on, where initdb turns them on by default, `--no-data-checksums` to not (pure).
pub(crate) fn initdb_checksums_option(major: u32, checksums: bool) -> Option<&'static str> {
    match (checksums, major >= 18) {
        (true, _) => Some("--data-checksums"),
        (false, true) => Some("--no-data-checksums"),
        (false, false) => None,
    }
}

#[derive(Clone)]
pub(crate) struct Cluster {
    pub(crate) bin: PgBin,
    pub(crate) dir: PathBuf,
    pub(crate) port: u16,
    /// OS user that owns and runs the cluster (None: the daemon's own user).
    pub(crate) os_user: Option<String>,
    runner: Runner,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    control: Control,
}

impl Cluster {
    pub(crate) fn new(
        bin: PgBin,
        dir: &Path,
        port: u16,
        os_user: Option<String>,
        runner: Runner,
    ) -> Result<Self> {
        let c = Cluster {
            bin,
            dir: dir.to_path_buf(),
            port,
            os_user,
            runner,
            data_dir: dir.join("data"),
            socket_dir: dir.join("socket"),
            control: Control::PgCtl,
        };
        let socket = c.socket_dir().join(format!(".s.PGSQL.{port}"));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            bail!(
                "the server's socket path {} is {len} bytes, over Linux's limit of {MAX_SOCKET_PATH}: use a shorter --workdir",
                socket.display()
            );
        }
        Ok(c)
    }

    /// A server started and stopped by `control` (the platform's service): PGDATA
    /// `data_dir` (its parent is [`Cluster::dir`]), the platform's socket directory and port,
    /// run by `os_user`.
    pub(crate) fn controlled(
        bin: PgBin,
        data_dir: &Path,
        socket_dir: &Path,
        port: u16,
        os_user: &str,
        runner: Runner,
        control: std::sync::Arc<dyn ServerControl>,
    ) -> Self {
        Cluster {
            bin,
            dir: data_dir.parent().unwrap_or(data_dir).to_path_buf(),
            port,
            os_user: Some(os_user.to_string()),
            runner,
            data_dir: data_dir.to_path_buf(),
            socket_dir: socket_dir.to_path_buf(),
            control: Control::Other(control),
        }
    }

    pub(crate) fn data_dir(&self) -> PathBuf {
        self.data_dir.clone()
    }
    pub(crate) fn socket_dir(&self) -> PathBuf {
        self.socket_dir.clone()
    }
    pub(crate) fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn spec(&self, tool: &str) -> CommandSpec {
        CommandSpec::new(self.bin.tool(tool)).user(self.os_user.as_deref())
    }

    /// Creates the cluster directory owned by the cluster user.
    pub(crate) fn prepare_dir(&self) -> Result<()> {
        for d in [self.dir.clone(), self.socket_dir()] {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            if let Some(user) = &self.os_user {
                let id = crate::sys::lookup_user(user)?;
                nix::unistd::chown(
                    &d,
                    Some(nix::unistd::Uid::from_raw(id.uid)),
                    Some(nix::unistd::Gid::from_raw(id.gid)),
                )
                .with_context(|| format!("giving {} to {user}", d.display()))?;
            }
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("restricting {}", self.dir.display()))?;
        Ok(())
    }

    pub(crate) fn is_initialized(&self) -> bool {
        self.data_dir().join("PG_VERSION").exists()
    }

    /// Removes a half-made data directory left by an interrupted initdb, first ending the
    /// bootstrap backend (`postgres --single`) that initdb leaves behind when it is killed.
    pub(crate) async fn remove_data_dir(&self) -> Result<()> {
        let d = self.data_dir();
        if let Some(pid) = std::fs::read_to_string(d.join("postmaster.pid"))
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        {
            // Single-user backends (initdb's bootstrap) write their PID negated; a positive
            // PID is a postmaster, which is never killed to make room.
            if pid > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
                bail!(
                    "a PostgreSQL server (pid {pid}) runs on {}: not removing it",
                    d.display()
                );
            }
            let pid = nix::unistd::Pid::from_raw(pid.abs());
            if nix::sys::signal::kill(pid, None).is_ok() {
                tracing::warn!(
                    pid = pid.as_raw(),
                    "ending a server left by the interrupted initdb"
                );
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while nix::sys::signal::kill(pid, None).is_ok() {
                    if std::time::Instant::now() > deadline {
                        bail!(
                            "process {pid} left by an interrupted initdb in {} does not exit",
                            d.display()
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        if d.exists() {
            std::fs::remove_dir_all(&d).with_context(|| format!("removing {}", d.display()))?;
        }
        Ok(())
    }

    pub(crate) async fn initdb(&self, checksums: bool, stdout: &Path, stderr: &Path) -> Result<()> {
        let mut spec = self
            .spec("initdb")
            .args([
                "--pgdata",
                &self.data_dir().display().to_string(),
                "--username",
                SUPERUSER,
                "--auth-local=peer",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .output_files(stdout, stderr)
            .timeout(Duration::from_secs(600));
        if let Some(option) = initdb_checksums_option(self.bin.major, checksums) {
            spec = spec.arg(option);
        }
        self.runner.run(&spec).await?;
        self.configure_local_auth()
    }

    /// Replaces initdb's pg_hba.conf and pg_ident.conf with the appliance's: local sockets
    /// by `peer` through [`IDENT_MAP`], which lets only the daemon's OS user and the
    /// cluster's in (as [`SUPERUSER`]); TCP by `scram-sha-256` (no role has a password, so
    /// nobody logs in over TCP). Run after initdb, before the first start.
    pub(crate) fn configure_local_auth(&self) -> Result<()> {
        let daemon_user = crate::sys::current_user().context(
            "the daemon's user has no passwd entry, so peer authentication cannot name it",
        )?;
        let owner = match &self.os_user {
            Some(u) => crate::sys::lookup_user(u)?,
            None => daemon_user.clone(),
        };
        let users = [daemon_user.name.as_str(), owner.name.as_str()];
        for (name, text) in [
            ("pg_hba.conf", hba_conf()),
            ("pg_ident.conf", ident_conf(&users)),
        ] {
            let path = self.data_dir.join(name);
            crate::fsutil::atomic_write(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            nix::unistd::chown(
                &path,
                Some(nix::unistd::Uid::from_raw(owner.uid)),
                Some(nix::unistd::Gid::from_raw(owner.gid)),
            )
            .with_context(|| format!("giving {} to {}", path.display(), owner.name))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("restricting {}", path.display()))?;
        }
        Ok(())
    }

    fn server_options(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.socket_dir().display()
        )
    }

    /// `pg_ctl status` (or the service is active): true when a postmaster runs.
    pub(crate) async fn is_running(&self) -> Result<bool> {
        if let Control::Other(control) = &self.control {
            return control.is_running().await;
        }
        let out = self
            .runner
            .run_accepting(
                &self
                    .spec("pg_ctl")
                    .args(["status", "-D", &self.data_dir().display().to_string()]),
                &[0, 3, 4],
            )
            .await?;
        Ok(out.success())
    }

    pub(crate) async fn start(&self) -> Result<()> {
        if let Control::Other(control) = &self.control {
            control.start().await?;
            return self.wait_accepting().await;
        }
        self.runner
            .run(
                &self
                    .spec("pg_ctl")
                    .args([
                        "start",
                        "-w",
                        "-t",
                        "600",
                        "-D",
                        &self.data_dir().display().to_string(),
                        "-l",
                        &self.log_file().display().to_string(),
                        "-o",
                        &self.server_options(),
                    ])
                    .timeout(Duration::from_secs(660)),
            )
            .await
            .with_context(|| {
                format!(
                    "starting PostgreSQL (server log: {})",
                    self.log_file().display()
                )
            })?;
        Ok(())
    }

    pub(crate) async fn stop(&self) -> Result<()> {
        if let Control::Other(control) = &self.control {
            return control.stop().await;
        }
        if !self.is_running().await? {
            return Ok(());
        }
        self.runner
            .run(
                &self
                    .spec("pg_ctl")
                    .args([
                        "stop",
                        "-w",
                        "-t",
                        "600",
                        "-m",
                        "fast",
                        "-D",
                        &self.data_dir().display().to_string(),
                    ])
                    .timeout(Duration::from_secs(660)),
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn restart(&self) -> Result<()> {
        if let Control::Other(control) = &self.control {
            control.restart().await?;
            return self.wait_accepting().await;
        }
        self.stop().await?;
        self.start().await
    }

    /// Waits until a running server accepts connections (crash recovery can take a
    /// while); false when it stops running meanwhile (it was shutting down, e.g. an
    /// earlier daemon was killed inside a restart).
    pub(crate) async fn accepting(&self) -> Result<bool> {
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        loop {
            match super::sql::Session::connect(&self.socket_dir, self.port, SUPERUSER, "postgres")
                .await
            {
                Ok(_) => return Ok(true),
                Err(_) if !self.is_running().await? => return Ok(false),
                Err(e) if std::time::Instant::now() > deadline => {
                    return Err(e).context(format!(
                        "PostgreSQL in {} did not accept connections within 600 s",
                        self.data_dir.display()
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// Waits until the server accepts connections (crash recovery can take a while).
    pub(crate) async fn wait_accepting(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        loop {
            match super::sql::Session::connect(&self.socket_dir, self.port, SUPERUSER, "postgres")
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if std::time::Instant::now() > deadline => {
                    return Err(e).context(format!(
                        "PostgreSQL in {} did not accept connections within 600 s",
                        self.data_dir.display()
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// `pg_controldata`'s output in the C locale (works on a stopped cluster).
    pub(crate) async fn controldata(&self) -> Result<String> {
        let out = self
            .runner
            .run(
                &self
                    .spec("pg_controldata")
                    .args(["-D", &self.data_dir().display().to_string()])
                    .env("LC_ALL", "C"),
            )
            .await?;
        Ok(out.stdout)
    }

    /// Whether data checksums are on, from pg_controldata (works on a stopped cluster).
    pub(crate) async fn checksums_enabled(&self) -> Result<bool> {
        parse_controldata_checksums(&self.controldata().await?)
            .context("pg_controldata printed no \"Data page checksum version\" line")
    }

    /// Switches data checksums with pg_checksums on the stopped cluster, then starts it.
    pub(crate) async fn set_checksums(
        &self,
        enable: bool,
        stdout: &Path,
        stderr: &Path,
    ) -> Result<()> {
        self.stop().await?;
        self.runner
            .run(
                &self
                    .spec("pg_checksums")
                    .args([
                        if enable { "--enable" } else { "--disable" },
                        "--progress",
                        "-D",
                        &self.data_dir().display().to_string(),
                    ])
                    .output_files(stdout, stderr),
            )
            .await?;
        self.start().await
    }
}

/// The appliance's pg_hba.conf (pure): peer on the local socket through [`IDENT_MAP`],
/// scram-sha-256 over TCP.
pub(crate) fn hba_conf() -> String {
    format!(
        "# Written by pgapplianced. Local sockets: peer, mapped in pg_ident.conf ({IDENT_MAP});\n\
         # TCP: scram-sha-256 (no role has a password).\n\
         # TYPE  DATABASE     USER  ADDRESS       METHOD\n\
         local   all          all                 peer map={IDENT_MAP}\n\
         local   replication  all                 peer map={IDENT_MAP}\n\
         host    all          all   127.0.0.1/32  scram-sha-256\n\
         host    all          all   ::1/128       scram-sha-256\n\
         host    replication  all   127.0.0.1/32  scram-sha-256\n\
         host    replication  all   ::1/128       scram-sha-256\n"
    )
}

/// The appliance's pg_ident.conf (pure): each OS user may log in as [`SUPERUSER`].
pub(crate) fn ident_conf(os_users: &[&str]) -> String {
    let mut users: Vec<&str> = os_users.to_vec();
    users.sort_unstable();
    users.dedup();
    let mut s = String::from("# Written by pgapplianced: OS users that log in as the superuser.\n# MAPNAME     SYSTEM-USERNAME  PG-USERNAME\n");
    for u in users {
        s.push_str(&format!("{IDENT_MAP}  {u}  {SUPERUSER}\n"));
    }
    s
}

/// Checks that `user` can reach `dir` (every ancestor searchable), so a root-run daemon
/// fails with a clear message instead of an initdb permission error.
pub(crate) fn check_reachable_by(dir: &Path, user: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let id = crate::sys::lookup_user(user).with_context(|| {
        format!("running as root needs an unprivileged user to own the cluster; \"{user}\" does not exist (install the PostgreSQL server package or pass --cluster-user)")
    })?;
    let mut cur = Some(dir);
    while let Some(p) = cur {
        if let Ok(md) = std::fs::metadata(p) {
            let mode = md.mode();
            let ok = if md.uid() == id.uid {
                mode & 0o100 != 0
            } else if id.groups.contains(&md.gid()) || md.gid() == id.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !ok {
                bail!(
                    "user \"{user}\" cannot enter {} (mode {:o}), so it cannot run a cluster under {}: pick a work directory it can reach, e.g. --workdir /var/tmp/pgappliance",
                    p.display(),
                    mode & 0o7777,
                    dir.display()
                );
            }
        }
        cur = p.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_sockets_take_peer_through_the_map_and_nothing_is_trusted() {
        let hba = hba_conf();
        let rules: Vec<Vec<&str>> = hba
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(!hba.contains("trust"));
        let local: Vec<&Vec<&str>> = rules.iter().filter(|r| r[0] == "local").collect();
        assert_eq!(local.len(), 2);
        assert!(local.iter().all(|r| r[3..] == ["peer", "map=pgappliance"]));
        assert!(rules
            .iter()
            .filter(|r| r[0] == "host")
            .all(|r| r.last() == Some(&"scram-sha-256")));
        assert_eq!(
            ident_conf(&["root", "postgres", "postgres"])
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>(),
            [
                "pgappliance  postgres  postgres",
                "pgappliance  root  postgres"
            ]
        );
    }
}
