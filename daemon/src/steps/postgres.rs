//! PostgreSQL: the binaries of the planned version, an initialised cluster (with checksums
//! when planned), running and accepting connections. The host says where and how (a
//! scratch cluster with pg_ctl, or the platform's service with PGDATA on the data volume).
//! An interrupted initdb is removed and redone; a cluster that is already there is reused;
//! a server found shutting down is started again once it has stopped.

use std::time::Instant;

use anyhow::{Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::postgres::Cluster;

pub(crate) struct Postgres;

/// The journal item while initdb runs.
const PENDING_INITDB: &str = "initdb";

/// The host's server for this run (on the port the journal recorded, if any).
async fn server(cx: &Context) -> Result<Cluster> {
    cx.host
        .server(&cx.plan, cx.journal.state.state.postgres.port)
        .await
}

impl Step for Postgres {
    const NAME: StepName = StepName::Postgres;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[Product::Server];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let cluster = server(cx).await?;
        if cx.journal.state.state.postgres.port != Some(cluster.port) {
            return Ok(Check::Todo(format!(
                "the server's port {} is not recorded yet",
                cluster.port
            )));
        }
        if cx.journal.state.state.postgres.initdb_done_at.is_none() || !cluster.is_initialized() {
            return Ok(Check::Todo("no initialised cluster yet".into()));
        }
        // A server found shutting down is not running: it is started again in apply.
        if !(cluster.is_running().await? && cluster.accepting().await?) {
            return Ok(Check::Todo("the server is not running".into()));
        }
        cx.set_server(cluster);
        Ok(Check::Done)
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let cluster = server(cx).await?;
        if cx.journal.state.state.postgres.port != Some(cluster.port) {
            // The host chose the port: the next start finds the server there.
            let port = cluster.port;
            cx.journal.update(|s| s.postgres.port = Some(port))?;
        }
        let raw = cx.raw();
        cx.host.install_server(&cluster, &cx.plan).await?;
        if cluster.data_dir().exists() && cx.journal.state.state.postgres.initdb_done_at.is_none() {
            tracing::warn!(dir = %cluster.data_dir().display(), "removing the data directory of an unfinished initdb");
            cluster.remove_data_dir().await?;
        }
        if !cluster.is_initialized() {
            cx.journal.begin(StepName::Postgres, Some(PENDING_INITDB))?;
            crate::notify::status(&format!(
                "postgres: initdb {}",
                cluster.data_dir().display()
            ));
            let started = Instant::now();
            cx.host.initdb(&cluster, &cx.plan, &raw).await?;
            let seconds = started.elapsed().as_secs_f64();
            cx.journal.update(|s| {
                s.postgres.initdb_done_at = Some(crate::clock::now());
                s.postgres.initdb_s = Some(seconds);
            })?;
            cx.journal.begin(StepName::Postgres, Some("start"))?;
        }
        cx.host.before_start(&cx.plan, &raw).await?;
        if !(cluster.is_running().await? && cluster.accepting().await?) {
            crate::notify::status(&format!(
                "postgres: starting on port {} ({})",
                cluster.port,
                cluster.data_dir().display()
            ));
            cluster
                .start()
                .await
                .with_context(|| format!("cluster in {}", cluster.data_dir().display()))?;
        }
        tracing::info!(version = %cluster.bin.version, port = cluster.port, data = %cluster.data_dir().display(), "postgres running");
        cx.set_server(cluster);
        Ok(())
    }
}
