//! Local mode's host: a scratch cluster under the work directory (`cluster/`), managed with
//! pg_ctl on a free loopback port, commands as plain child processes, nothing on the
//! machine changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::plan::Plan;
use crate::ports::free_loopback_port;
use crate::postgres::cluster::check_reachable_by;
use crate::postgres::{Cluster, PgBin};
use crate::runner::Runner;

pub(crate) struct LocalHost {
    workdir: PathBuf,
    /// PostgreSQL bin directory to use instead of searching by version.
    pg_bin: Option<PathBuf>,
    /// OS user owning the cluster (None: the daemon's own).
    cluster_user: Option<String>,
    /// Leave the cluster running when the run ends.
    keep_running: bool,
    runner: Runner,
}

impl LocalHost {
    /// `cluster_user` defaults to `postgres` when the daemon runs as root.
    pub(crate) fn new(
        workdir: &Path,
        pg_bin: Option<PathBuf>,
        cluster_user: Option<String>,
        keep_running: bool,
    ) -> Self {
        let cluster_user = match cluster_user {
            Some(u) => Some(u),
            None if crate::sys::is_root() => Some("postgres".to_string()),
            None => None,
        };
        LocalHost {
            workdir: workdir.to_path_buf(),
            pg_bin,
            cluster_user,
            keep_running,
            runner: Runner::local(),
        }
    }

    pub(crate) fn runner(&self) -> Runner {
        self.runner.clone()
    }

    pub(crate) fn workdir(&self) -> &Path {
        &self.workdir
    }

    fn cluster_dir(&self) -> PathBuf {
        self.workdir.join("cluster")
    }

    pub(crate) async fn server(&self, plan: &Plan, port: Option<u16>) -> Result<Cluster> {
        let bin = PgBin::find(&self.runner, plan.postgres.version, self.pg_bin.as_deref()).await?;
        if let Some(u) = &self.cluster_user {
            check_reachable_by(&self.workdir, u)?;
        }
        let port = match port {
            Some(p) => p,
            None => free_loopback_port()?,
        };
        Cluster::new(
            bin,
            &self.cluster_dir(),
            port,
            self.cluster_user.clone(),
            self.runner.clone(),
        )
    }

    pub(crate) fn install_server(&self, cluster: &Cluster) -> Result<()> {
        cluster.prepare_dir()
    }

    pub(crate) async fn initdb(&self, cluster: &Cluster, plan: &Plan, raw: &Path) -> Result<()> {
        cluster
            .initdb(
                plan.postgres.data_checksums,
                &raw.join("initdb.stdout"),
                &raw.join("initdb.stderr"),
            )
            .await
    }

    pub(crate) async fn after_measuring(&self, cluster: Option<&Cluster>) -> Result<()> {
        if self.keep_running {
            return Ok(());
        }
        match cluster {
            Some(cluster) => cluster.stop().await,
            None => stop_left_server(&self.workdir).await.map(|_| ()),
        }
    }
}

/// Whether `pid` has exited: no such process, or one that has ended and waits to be reaped.
fn process_gone(pid: nix::unistd::Pid) -> bool {
    if nix::sys::signal::kill(pid, None).is_err() {
        return true;
    }
    // /proc/PID/stat: "PID (COMM) STATE ...", COMM may hold spaces and parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Stops a postmaster that runs on the work directory's cluster (fast shutdown, the signal
/// `pg_ctl stop -m fast` sends, so it works whatever PostgreSQL version the earlier run
/// used) and waits until it has exited. Returns what was stopped, for the operator.
pub async fn stop_left_server(workdir: &Path) -> Result<Option<String>> {
    let data = workdir.join("cluster").join("data");
    let pid_file = data.join("postmaster.pid");
    let Some(pid) = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        .filter(|p| *p > 0)
    else {
        return Ok(None);
    };
    let pid = nix::unistd::Pid::from_raw(pid);
    if nix::sys::signal::kill(pid, None).is_err() {
        return Ok(None);
    }
    // A recycled pid would be some other program: only a postgres whose working directory
    // is this data directory is stopped.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
    let ours = cwd
        .as_deref()
        .is_some_and(|c| std::fs::canonicalize(&data).is_ok_and(|d| d == c))
        && String::from_utf8_lossy(&cmdline).contains("postgres");
    if !ours {
        return Ok(None);
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).with_context(|| {
        format!(
            "stopping the PostgreSQL server (pid {pid}) in {}",
            data.display()
        )
    })?;
    let deadline = Instant::now() + std::time::Duration::from_secs(600);
    // The postmaster removes its pid file before it exits: wait for the process itself, so
    // "stopped" is true when said (a zombie no one has reaped yet counts as gone).
    while !process_gone(pid) {
        if Instant::now() > deadline {
            anyhow::bail!(
                "the PostgreSQL server (pid {pid}) in {} did not stop within 600 s",
                data.display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tracing::info!(pid = pid.as_raw(), data = %data.display(), "stopped the server an earlier run left");
    Ok(Some(format!(
        "stopped the PostgreSQL server (pid {pid}) the earlier run left in {}",
        data.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::process_gone;
    use nix::unistd::Pid;

    #[test]
    fn a_running_process_is_not_gone_an_exited_one_is_even_before_it_is_reaped() {
        assert!(!process_gone(Pid::this()));
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = Pid::from_raw(child.id() as i32);
        // Wait for the exit without reaping it: a zombie until `wait` below.
        nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(pid),
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        )
        .expect("waitid");
        assert!(process_gone(pid), "a zombie has exited");
        child.wait().expect("reap");
        assert!(process_gone(pid), "a reaped pid is gone");
    }
}
