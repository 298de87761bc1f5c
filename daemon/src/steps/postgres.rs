//! PostgreSQL: the binaries of the planned version, an initialised cluster (with checksums
//! when planned), running and accepting connections. An initdb that was interrupted is
//! removed and redone; a cluster that is already there is reused.

use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::postgres::cluster::{check_reachable_by, free_loopback_port};
use crate::postgres::{LocalCluster, PgBin};

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
    let cluster = LocalCluster::new(bin.clone(), &cluster_dir, port, os_user, run.runner.clone())?;

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
    if !cluster.is_running().await? {
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
    LocalCluster::new(
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
