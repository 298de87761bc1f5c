//! PostgreSQL: the binaries of the planned version, an initialised cluster (with checksums
//! when planned), running and accepting connections. An initdb that was interrupted is
//! removed and redone; a cluster that is already there is reused.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::postgres::cluster::{check_reachable_by, free_loopback_port};
use crate::postgres::{Cluster, PgBin};

const FACT_PORT: &str = "port";
const FACT_INITDB: &str = "initdb_done";
/// How long initdb took, reported among the step timings.
pub const FACT_INITDB_SECONDS: &str = "initdb_s";
const PENDING_INITDB: &str = "initdb";

pub async fn run(run: &mut Run) -> Result<()> {
    let t0 = Instant::now();
    let first = !run.journal.is_done(StepName::Postgres);
    if first {
        run.journal.begin(StepName::Postgres, None)?;
    }
    let bin = PgBin::find(
        &run.runner,
        run.plan.postgres.version,
        run.options.pg_bin.as_deref(),
    )
    .await?;
    let os_user = cluster_user(run);
    let cluster_dir = run.workdir.join("cluster");
    if let Some(u) = &os_user {
        check_reachable_by(&run.workdir, u)?;
    }
    let port = match run.journal.fact(FACT_PORT).and_then(|p| p.parse().ok()) {
        Some(p) => p,
        None => {
            let p = free_loopback_port()?;
            run.journal.set_fact(FACT_PORT, p.to_string())?;
            p
        }
    };
    let cluster = Cluster::new(bin.clone(), &cluster_dir, port, os_user, run.runner.clone())?;

    let interrupted_initdb =
        run.journal.state.pending.as_ref().is_some_and(|p| {
            p.step == StepName::Postgres && p.item.as_deref() == Some(PENDING_INITDB)
        });
    if cluster.data_dir().exists()
        && (interrupted_initdb || run.journal.fact(FACT_INITDB).is_none())
    {
        tracing::warn!(dir = %cluster.data_dir().display(), "removing the data directory of an unfinished initdb");
        cluster.remove_data_dir().await?;
    }
    let mut acted = first;
    if !cluster.is_initialized() {
        acted = true;
        cluster.prepare_dir()?;
        run.journal
            .begin(StepName::Postgres, Some(PENDING_INITDB))?;
        crate::notify::status("postgres: initdb");
        let initdb_started = Instant::now();
        let raw = run.run_dir.join("raw");
        cluster
            .initdb(
                run.plan.postgres.data_checksums,
                &raw.join("initdb.stdout"),
                &raw.join("initdb.stderr"),
            )
            .await?;
        run.journal.set_fact(FACT_INITDB, crate::journal::now())?;
        run.journal.set_fact(
            FACT_INITDB_SECONDS,
            format!("{:.3}", initdb_started.elapsed().as_secs_f64()),
        )?;
        run.journal.begin(StepName::Postgres, Some("start"))?;
    }
    // A server found shutting down is not running: start it again once it has stopped.
    if !(cluster.is_running().await? && cluster.accepting().await?) {
        crate::notify::status(&format!("postgres: starting on port {port}"));
        cluster
            .start()
            .await
            .with_context(|| format!("cluster in {}", cluster.data_dir().display()))?;
    }
    tracing::info!(version = %bin.version, port, data = %cluster.data_dir().display(), "postgres running");
    run.bin = Some(bin);
    run.cluster = Some(cluster);
    if acted {
        run.journal
            .finish(StepName::Postgres, t0.elapsed().as_secs_f64())?;
    }
    Ok(())
}

/// Stops the run's cluster if it is still running (after a restart that found the
/// measuring finished). Nothing to do when no cluster was ever made.
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
    while nix::sys::signal::kill(pid, None).is_ok() && pid_file.exists() {
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

pub async fn stop_if_running(run: &mut Run) -> Result<()> {
    let Some(port) = run.journal.fact(FACT_PORT).and_then(|p| p.parse().ok()) else {
        return Ok(());
    };
    let cluster_dir = run.workdir.join("cluster");
    if !cluster_dir.join("data/postmaster.pid").exists() {
        return Ok(());
    }
    let bin = PgBin::find(
        &run.runner,
        run.plan.postgres.version,
        run.options.pg_bin.as_deref(),
    )
    .await?;
    Cluster::new(
        bin,
        &cluster_dir,
        port,
        cluster_user(run),
        run.runner.clone(),
    )?
    .stop()
    .await
}

/// The OS user owning the cluster: as asked, else `postgres` when running as root.
fn cluster_user(run: &Run) -> Option<String> {
    match &run.options.cluster_user {
        Some(u) => Some(u.clone()),
        None if crate::sys::is_root() => Some("postgres".to_string()),
        None => None,
    }
}

/// The appliance's PostgreSQL: the platform's service with a drop-in for PGDATA on the data
/// volume, initialised (PGDG's setup script on Rocky), enabled, started, accepting
/// connections. An interrupted initdb is cleared and redone.
pub async fn run_service(run: &mut Run) -> Result<()> {
    let t0 = Instant::now();
    let first = !run.journal.is_done(StepName::Postgres);
    if first {
        run.journal.begin(StepName::Postgres, None)?;
    }
    let profile = run.profile();
    let v = run.pg_version();
    let bin = PgBin::find(&run.runner, Some(v), Some(&profile.pg_bin_dir(v))).await?;
    let unit = profile.pg_unit(v);
    let mut changed = false;
    if let Some(text) = profile.pg_unit_file(v) {
        changed |= crate::fsutil::write_if_changed(&profile.unit_file(&unit), &text)?;
    }
    let mount_point = run.plan.storage.mount_point.clone();
    let pgdata = format!("{}/data", mount_point.trim_end_matches('/'));
    let volume = run.plan.storage.devices != crate::plan::Devices::None;
    let drop_in = crate::platform::service_drop_in(&pgdata, volume.then_some(mount_point.as_str()));
    changed |= crate::fsutil::write_if_changed(&profile.pg_drop_in_file(v), &drop_in)?;
    let systemd = run.systemd()?.clone();
    if changed {
        // PGDG's setup script reads PGDATA from the unit: reload before initdb.
        systemd.reload().await?;
    }
    let cluster = Cluster::service(
        bin.clone(),
        std::path::Path::new(&pgdata),
        &profile.socket_dir(),
        5432,
        SERVICE_USER,
        run.runner.clone(),
        systemd.clone(),
        &unit,
    );
    let interrupted_initdb =
        run.journal.state.pending.as_ref().is_some_and(|p| {
            p.step == StepName::Postgres && p.item.as_deref() == Some(PENDING_INITDB)
        });
    if cluster.data_dir().exists()
        && (interrupted_initdb || run.journal.fact(FACT_INITDB).is_none())
        && !cluster.is_running().await?
    {
        tracing::warn!(dir = %cluster.data_dir().display(), "removing the data directory of an unfinished initdb");
        cluster.remove_data_dir().await?;
    }
    if !cluster.is_initialized() {
        run.journal
            .begin(StepName::Postgres, Some(PENDING_INITDB))?;
        crate::notify::status(&format!("postgres: initdb {pgdata}"));
        let dir = cluster.data_dir();
        crate::fsutil::create_dir_all(&dir)?;
        let id = crate::sys::lookup_user(SERVICE_USER)?;
        nix::unistd::chown(
            &dir,
            Some(nix::unistd::Uid::from_raw(id.uid)),
            Some(nix::unistd::Gid::from_raw(id.gid)),
        )
        .with_context(|| format!("giving {} to {SERVICE_USER}", dir.display()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("restricting {}", dir.display()))?;
        }
        let raw = run.run_dir.join("raw");
        let started = Instant::now();
        run.runner
            .run(
                &profile
                    .initdb(v, &pgdata, run.plan.postgres.data_checksums)
                    .output_files(&raw.join("initdb.stdout"), &raw.join("initdb.stderr"))
                    .timeout(std::time::Duration::from_secs(1800)),
            )
            .await?;
        cluster.configure_local_auth()?;
        run.journal.set_fact(FACT_INITDB, crate::journal::now())?;
        run.journal.set_fact(
            FACT_INITDB_SECONDS,
            format!("{:.3}", started.elapsed().as_secs_f64()),
        )?;
        run.journal.begin(StepName::Postgres, Some("start"))?;
    }
    // After initdb and on every resume: the rule and the labels PostgreSQL needs.
    super::selinux::label_pgdata(run, &mount_point, "postgres").await?;
    systemd.enable_unit_files(&[unit.as_str()]).await?;
    // A server found shutting down is not running: start it again once it has stopped.
    if !(cluster.is_running().await? && cluster.accepting().await?) {
        crate::notify::status(&format!("postgres: starting {unit}"));
        cluster.start().await?;
    }
    tracing::info!(version = %bin.version, unit = %unit, data = %pgdata, "postgres running");
    run.bin = Some(bin);
    run.cluster = Some(cluster);
    if first || run.journal.state.pending.is_some() {
        run.journal
            .finish(StepName::Postgres, t0.elapsed().as_secs_f64())?;
    }
    Ok(())
}

/// The OS user of the platform's PostgreSQL service.
const SERVICE_USER: &str = "postgres";
