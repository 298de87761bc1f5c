//! sysbench-tpcc inside the dataset and sweep steps: each dataset prepared as scenario B
//! did (`tpcc.lua … prepare` under load settings, the plan's settings back with a restart,
//! `VACUUM ANALYZE`, `CHECKPOINT`), and each point run and parsed.
//!
//! A dataset counts as prepared when the journal lists its spec and its last table set's
//! `warehouse` table holds `scale` rows. A prepare that was interrupted (the journal names
//! the database in `tpcc_preparing`) is redone from an empty database.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result};

use super::Context;
use crate::loader;
use crate::plan::TpccDataset;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{ident, rows_in, Session};
use crate::postgres::Cluster;
use crate::results::TpccDatasetInfo;
use crate::runner::CommandSpec;
use crate::sysbench::scripts;
use crate::sysbench::tpcc;
use crate::workload::sysbench_tpcc::conn;

/// What identifies a prepared dataset in the journal.
pub(crate) fn dataset_spec(ds: &TpccDataset) -> String {
    format!(
        "db={} tables={} scale={} use_fk={}",
        ds.database(),
        ds.tables,
        ds.scale,
        ds.use_fk
    )
}

/// The directory holding the plan's tpcc.lua (payload copy or the plan's source, verified).
pub(crate) async fn script_dir(cx: &Context) -> Result<PathBuf> {
    let sb = cx
        .plan
        .sysbench
        .as_ref()
        .context("the plan has sysbench-tpcc workloads but no [sysbench] section")?;
    let packed = cx.host.packed_tpcc_archive();
    scripts::ensure(sb, &cx.workdir, packed.as_deref()).await
}

/// Whether `ds`'s tables are there at its scale.
pub(crate) async fn present(c: &Cluster, ds: &TpccDataset) -> Result<bool> {
    let table = format!("warehouse{}", ds.tables);
    let n = rows_in(&c.socket_dir(), c.port, SUPERUSER, &ds.database(), &table).await?;
    Ok(n.as_deref() == Some(ds.scale.to_string().as_str()))
}

/// The datasets still to prepare (not in the journal, or their tables not there).
pub(crate) async fn missing(cx: &Context) -> Result<Vec<TpccDataset>> {
    let mut out = Vec::new();
    for ds in cx.plan.tpcc_datasets() {
        let listed = cx
            .journal
            .state
            .state
            .dataset
            .tpcc
            .contains(&dataset_spec(&ds));
        if !listed || !present(cx.server()?, &ds).await? {
            out.push(ds);
        }
    }
    Ok(out)
}

/// Puts the plan's settings back after a prepare that was interrupted.
pub(crate) async fn recover(cx: &mut Context) -> Result<()> {
    if let Some(db) = cx.journal.state.state.dataset.tpcc_preparing.clone() {
        tracing::warn!(database = %db, "a sysbench-tpcc prepare was interrupted: restoring the plan's settings, then preparing it again");
        let inv = cx.inventory()?;
        let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
        loader::restore_settings(cx.server()?, cores, ram, cx.settings()?).await?;
        cx.journal.update(|s| s.dataset.tpcc_preparing = None)?;
    }
    Ok(())
}

/// Records the plan's datasets as restored from a snapshot (`source`), in
/// `dataset-tpcc.json`.
pub(crate) async fn record_restored(cx: &Context, source: &str, secs: f64) -> Result<()> {
    let c = cx.server()?;
    let mut all = Vec::new();
    for ds in cx.plan.tpcc_datasets() {
        let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, &ds.database()).await?;
        let bytes = s
            .value("SELECT pg_database_size(current_database())")
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        all.push(TpccDatasetInfo {
            database: ds.database(),
            tables: ds.tables,
            scale: ds.scale,
            use_fk: ds.use_fk,
            source: source.to_string(),
            prepare_threads: None,
            command: None,
            prepare_s: None,
            wall_s: secs,
            bytes,
        });
    }
    if !all.is_empty() {
        crate::fsutil::write_json(&cx.run_dir.join("dataset-tpcc.json"), &all)?;
    }
    Ok(())
}

/// Prepares every missing dataset; returns what each took.
pub(crate) async fn prepare_missing(cx: &mut Context) -> Result<Vec<TpccDatasetInfo>> {
    let todo = missing(cx).await?;
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let dir = script_dir(cx).await?;
    let mut infos = Vec::new();
    for ds in todo {
        infos.push(prepare(cx, &dir, &ds).await?);
        let spec = dataset_spec(&ds);
        cx.journal.update(|s| {
            if !s.dataset.tpcc.contains(&spec) {
                s.dataset.tpcc.push(spec)
            }
        })?;
    }
    let path = cx.run_dir.join("dataset-tpcc.json");
    let mut all: Vec<TpccDatasetInfo> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.retain(|a| !infos.iter().any(|b| b.database == a.database));
    all.extend(infos.iter().cloned());
    crate::fsutil::write_json(&path, &all)?;
    Ok(infos)
}

async fn prepare(cx: &mut Context, dir: &Path, ds: &TpccDataset) -> Result<TpccDatasetInfo> {
    let db = ds.database();
    let c = cx.server()?.clone();
    let inv = cx.inventory()?;
    let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
    let threads = cx
        .plan
        .workloads
        .iter()
        .filter(|w| w.tpcc_dataset() == Some(*ds))
        .find_map(|w| w.section().prepare_threads())
        .unwrap_or_else(|| {
            // No more than the connections max_connections was sized for.
            tpcc::default_prepare_threads(ds, cores).min(cx.plan.max_clients())
        });
    crate::notify::status(&format!(
        "dataset: sysbench-tpcc prepare of {} ({} tables x {} warehouses, {threads} threads)",
        db, ds.tables, ds.scale
    ));
    let started = Instant::now();
    // A database left by an interrupted prepare is dropped: tpcc.lua cannot resume one.
    let admin = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await?;
    admin
        .execute(&format!("DROP DATABASE IF EXISTS {}", ident(&db)))
        .await?;
    admin
        .execute(&format!("CREATE DATABASE {}", ident(&db)))
        .await?;
    drop(admin);
    cx.journal
        .update(|s| s.dataset.tpcc_preparing = Some(db.clone()))?;
    loader::apply_load_settings(&c, cores, ram).await?;
    let raw = cx.raw();
    let (out, err) = (
        raw.join(format!("dataset-{db}.stdout")),
        raw.join(format!("dataset-{db}.stderr")),
    );
    let spec = CommandSpec::new(tpcc::SYSBENCH)
        .args(tpcc::prepare_args(
            Path::new(&format!("./{}", scripts::ENTRY)),
            ds,
            &conn(&c),
            threads,
        ))
        .cwd(dir)
        .user(cx.host.bench_user())
        .output_files(&out, &err);
    let t0 = Instant::now();
    let progress = crate::progress::Progress::start(
        crate::progress::Kind::Prepare,
        format!("dataset: sysbench-tpcc prepare of {db}"),
        None,
        Some(crate::progress::Detail::Tail(out.clone())),
    );
    cx.runner.run(&spec).await?;
    drop(progress);
    let prepare_s = t0.elapsed().as_secs_f64();
    loader::restore_settings(&c, cores, ram, cx.settings()?).await?;
    cx.journal.update(|s| s.dataset.tpcc_preparing = None)?;
    let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, &db).await?;
    s.execute("VACUUM ANALYZE").await?;
    s.execute("CHECKPOINT").await?;
    let bytes = s
        .value("SELECT pg_database_size(current_database())")
        .await?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let info = TpccDatasetInfo {
        database: db.clone(),
        tables: ds.tables,
        scale: ds.scale,
        use_fk: ds.use_fk,
        source: crate::snapshot::SOURCE_GENERATED.to_string(),
        prepare_threads: Some(threads),
        command: Some(spec.display()),
        prepare_s: Some(prepare_s),
        wall_s: started.elapsed().as_secs_f64(),
        bytes,
    };
    tracing::info!(database = %db, seconds = info.wall_s, bytes, "sysbench-tpcc dataset ready");
    Ok(info)
}
