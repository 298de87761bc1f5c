//! Dataset: the pgbench tables at the planned scale, in the planned database (when a
//! workload runs pgbench), and each sysbench-tpcc dataset the workloads name
//! ([`super::tpcc`]). pgbench's is present when the journal says it was initialised and
//! pgbench_branches has `scale` rows; otherwise (first run, or an interrupted `pgbench -i`)
//! it is (re)initialised.

pub mod snapshot;

use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::journal::StepName;
use crate::loader;
use crate::pgbench::init::{InitBreakdown, InitPhase};
use crate::pgbench::parse_init;
use crate::plan::InitMode;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{ident, literal, Session};
use crate::postgres::Cluster;
use crate::results::DatasetInfo;
use crate::runner::CommandSpec;
use crate::steps::{Check, Context, Looking, Product, Step};

pub struct Dataset;

/// What identifies the initialised dataset in the journal (and in a snapshot's key).
pub fn spec(cx: &Context) -> String {
    let d = &cx.plan.dataset;
    format!(
        "db={} scale={} fillfactor={} init={:?}",
        d.database, d.scale, d.fillfactor, d.init
    )
}

/// Connection arguments for pgbench and friends.
pub fn conn_args(c: &Cluster) -> Result<Vec<String>> {
    Ok(crate::workload::pgbench::conn_args(c))
}

/// Whether the dataset's tables are there at the planned scale.
async fn present(cx: &Context) -> Result<bool> {
    let c = cx.server()?;
    let db = &cx.plan.dataset.database;
    let admin = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await?;
    let exists = admin
        .value(&format!(
            "SELECT 1 FROM pg_database WHERE datname = {}",
            literal(db)
        ))
        .await?
        .is_some();
    if !exists {
        return Ok(false);
    }
    let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, db).await?;
    let branches = s
        .value("SELECT CASE WHEN to_regclass('pgbench_branches') IS NULL THEN -1 ELSE (SELECT count(*) FROM pgbench_branches) END")
        .await?;
    Ok(branches.as_deref() == Some(cx.plan.dataset.scale.to_string().as_str()))
}

impl Step for Dataset {
    const NAME: StepName = StepName::Dataset;
    const NEEDS: &'static [Product] = &[Product::Inventory, Product::Server, Product::Settings];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let state = &cx.journal.state.state.dataset;
        if state.load_degree.is_some() {
            return Ok(Check::Todo("a parallel load was interrupted".into()));
        }
        if let Some(id) = &state.restoring {
            return Ok(Check::Todo(format!(
                "the restore of snapshot {id} was interrupted"
            )));
        }
        if let Some(db) = &state.tpcc_preparing {
            return Ok(Check::Todo(format!(
                "the sysbench-tpcc prepare of {db} was interrupted"
            )));
        }
        let tpcc_missing = super::tpcc::missing(cx).await?;
        if let Some(ds) = tpcc_missing.first() {
            return Ok(Check::Todo(format!(
                "sysbench-tpcc dataset {} not prepared yet",
                ds.database()
            )));
        }
        if !cx.plan.has_pgbench() {
            return Ok(match snapshot::unfinished(cx) {
                Some(why) => Check::Todo(why),
                None => Check::Done,
            });
        }
        if state.spec.as_deref() != Some(spec(cx).as_str()) {
            return Ok(Check::Todo("not initialised yet".into()));
        }
        if !present(cx).await? {
            return Ok(Check::Todo(format!(
                "pgbench_branches does not hold scale {}",
                cx.plan.dataset.scale
            )));
        }
        if let Some(why) = snapshot::unfinished(cx) {
            return Ok(Check::Todo(why));
        }
        Ok(Check::Done)
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        if let Some(done) = snapshot_work(cx).await? {
            return Ok(done);
        }
        super::tpcc::recover(cx).await?;
        if cx.journal.state.state.dataset.load_degree.is_some() {
            // A parallel load was interrupted: the plan's settings come back first.
            tracing::warn!("restoring the plan's settings after an interrupted parallel load");
            let inv = cx.inventory()?;
            let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
            loader::restore_settings(cx.server()?, cores, ram, cx.settings()?).await?;
            cx.journal.update(|s| s.dataset.load_degree = None)?;
        }
        let c = cx.server()?.clone();
        let snapshots = cx.plan.dataset.keeps_snapshot() || snapshot::store_url(cx).is_some();
        let key = if snapshots {
            Some(crate::snapshot::current_key(&c, &full_spec(cx)).await?)
        } else {
            None
        };
        if let Some(key) = &key {
            if let Some(info) = snapshot::restore_dataset(cx, key).await? {
                if cx.plan.has_pgbench() {
                    crate::fsutil::write_json(&cx.run_dir.join("dataset.json"), &info)?;
                }
                let pgbench = cx.plan.has_pgbench().then(|| spec(cx));
                let tpcc: Vec<String> = cx
                    .plan
                    .tpcc_datasets()
                    .iter()
                    .map(super::tpcc::dataset_spec)
                    .collect();
                cx.journal.update(|s| {
                    s.dataset.spec = pgbench;
                    s.dataset.tpcc = tpcc;
                })?;
                let source = info.source.clone().unwrap_or_default();
                super::tpcc::record_restored(cx, &source, info.wall_s).await?;
                tracing::info!(source = ?info.source, seconds = info.wall_s, "dataset ready");
                return snapshot::share(cx).await;
            }
        }
        snapshot::discard_spare(cx).await?;
        let mut generated = false;
        if cx.plan.has_pgbench()
            && (cx.journal.state.state.dataset.spec.as_deref() != Some(spec(cx).as_str())
                || !present(cx).await?)
        {
            pgbench_dataset(cx).await?;
            generated = true;
        }
        generated |= !super::tpcc::prepare_missing(cx).await?.is_empty();
        if generated {
            cx.journal.update(|s| {
                s.dataset.source = Some(crate::snapshot::SOURCE_GENERATED.into());
                s.dataset.snapshot = None;
                s.dataset.snapshot_stored = None;
                s.dataset.changed_by = None;
            })?;
        }
        if let Some(key) = key.filter(|_| cx.plan.dataset.keeps_snapshot()) {
            if cx.journal.state.state.dataset.snapshot.is_none() {
                let id = snapshot::keep(cx, &key).await?;
                name_snapshot_in_record(cx, &id)?;
            }
        }
        snapshot::share(cx).await
    }
}

/// What identifies everything the data directory holds (pgbench's tables and each
/// sysbench-tpcc dataset): the dataset part of a snapshot's key.
pub fn full_spec(cx: &Context) -> String {
    let mut parts = Vec::new();
    if cx.plan.has_pgbench() {
        parts.push(spec(cx));
    }
    // The scripts' release decides the tables tpcc.lua makes: part of the identity.
    let scripts = cx
        .plan
        .sysbench
        .as_ref()
        .map(|s| s.tpcc_sha256.to_ascii_lowercase())
        .unwrap_or_default();
    parts.extend(cx.plan.tpcc_datasets().iter().map(|d| {
        format!(
            "sysbench-tpcc {} scripts={scripts}",
            super::tpcc::dataset_spec(d)
        )
    }));
    parts.join("; ")
}

/// Whether the journal records every dataset of the plan as made.
fn recorded(cx: &Context) -> bool {
    let st = &cx.journal.state.state.dataset;
    (!cx.plan.has_pgbench() || st.spec.as_deref() == Some(spec(cx).as_str()))
        && cx
            .plan
            .tpcc_datasets()
            .iter()
            .all(|d| st.tpcc.contains(&super::tpcc::dataset_spec(d)))
}

/// The dataset's record (dataset.json, pgbench's) names the snapshot it is kept in.
fn name_snapshot_in_record(cx: &Context, id: &str) -> Result<()> {
    let path = cx.run_dir.join("dataset.json");
    if let Ok(mut info) = std::fs::read_to_string(&path)
        .map_err(anyhow::Error::from)
        .and_then(|t| Ok(serde_json::from_str::<DatasetInfo>(&t)?))
    {
        info.snapshot = Some(id.to_string());
        crate::fsutil::write_json(&path, &info)?;
    }
    Ok(())
}

/// pgbench's tables, (re)initialised.
async fn pgbench_dataset(cx: &mut Context) -> Result<()> {
    cx.journal.update(|s| s.dataset.spec = None)?;
    let c = cx.server()?.clone();
    let d = cx.plan.dataset.clone();
    let admin = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await?;
    let exists = admin
        .value(&format!(
            "SELECT 1 FROM pg_database WHERE datname = {}",
            literal(&d.database)
        ))
        .await?
        .is_some();
    if !exists {
        admin
            .execute(&format!("CREATE DATABASE {}", ident(&d.database)))
            .await?;
    }
    drop(admin);
    let info = match d.init {
        InitMode::Parallel => parallel(cx).await?,
        InitMode::Client | InitMode::Server => with_pgbench(cx).await?,
    };
    crate::fsutil::write_json(&cx.run_dir.join("dataset.json"), &info)?;
    let spec = spec(cx);
    cx.journal.update(|s| s.dataset.spec = Some(spec))?;
    tracing::info!(scale = d.scale, seconds = info.wall_s, "dataset ready");
    Ok(())
}

/// What is left of the dataset step when the dataset itself is in place: a restore that
/// was interrupted (redone), the snapshot (taken), its upload (resumed). None: the
/// dataset must be made.
async fn snapshot_work(cx: &mut Context) -> Result<Option<()>> {
    let state = cx.journal.state.state.dataset.clone();
    if let Some(id) = &state.restoring {
        tracing::warn!(snapshot = %id, "redoing the interrupted restore");
        match snapshot::restore_local(cx, id, crate::snapshot::local::Hashing::WhenCopying).await {
            // A restore in the dataset step itself is recorded after it: that step is made again.
            Ok(_) if recorded(cx) => return Ok(Some(())),
            Ok(_) => return Ok(None),
            Err(e)
                if e.downcast_ref::<crate::snapshot::local::Corrupt>()
                    .is_some() =>
            {
                tracing::warn!(error = %format!("{e:#}"), "the snapshot cannot be restored: generating the dataset");
                // What the data directory holds now is not the prepared data (points may
                // have changed it): every dataset is made again, and the bad snapshot goes.
                let dir = crate::snapshot::local::snapshot_dir(&snapshot::root(cx)?, id);
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("removing {}", dir.display()))?;
                }
                cx.journal.update(|s| {
                    s.dataset.snapshot = None;
                    s.dataset.restoring = None;
                    s.dataset.spec = None;
                    s.dataset.tpcc.clear();
                    s.dataset.changed_by = None;
                })?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    if state.load_degree.is_some()
        || state.tpcc_preparing.is_some()
        || !recorded(cx)
        || (cx.plan.has_pgbench() && !present(cx).await?)
        || !super::tpcc::missing(cx).await?.is_empty()
    {
        return Ok(None);
    }
    if cx.plan.dataset.keeps_snapshot() && state.snapshot.is_none() {
        let key = crate::snapshot::current_key(cx.server()?, &full_spec(cx)).await?;
        let id = snapshot::keep(cx, &key).await?;
        name_snapshot_in_record(cx, &id)?;
    }
    snapshot::share(cx).await?;
    Ok(Some(()))
}

async fn with_pgbench(cx: &Context) -> Result<DatasetInfo> {
    let d = &cx.plan.dataset;
    crate::notify::status(&format!("dataset: pgbench -i -s {}", d.scale));
    let cluster = cx.server()?;
    let mut args = vec!["--initialize".to_string()];
    args.extend(conn_args(cluster)?);
    args.push(format!("--scale={}", d.scale));
    args.push(format!("--fillfactor={}", d.fillfactor));
    let mode = if d.init == InitMode::Server {
        args.push("--init-steps=dtGvp".into());
        "server"
    } else {
        "client"
    };
    args.push(d.database.clone());
    let raw = cx.raw();
    let (out, err) = (
        raw.join("dataset-init.stdout"),
        raw.join("dataset-init.stderr"),
    );
    let spec = CommandSpec::new(cluster.bin.tool("pgbench"))
        .args(args)
        .user(cx.host.bench_user())
        .output_files(&out, &err);
    let started = Instant::now();
    // pgbench -i reports its own progress on stderr ("… of … tuples (40%) done").
    let progress = crate::progress::Progress::start(
        crate::progress::Kind::Dataset,
        format!("dataset: pgbench -i -s {}", d.scale),
        None,
        Some(crate::progress::Detail::Tail(err.clone())),
    );
    cx.runner.run(&spec).await?;
    drop(progress);
    let wall_s = started.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let breakdown = parse_init(&stderr).with_context(|| format!("reading {}", err.display()))?;
    Ok(DatasetInfo {
        database: d.database.clone(),
        scale: d.scale,
        fillfactor: d.fillfactor,
        init_mode: mode.to_string(),
        command: spec.display(),
        wall_s,
        init: Some(breakdown),
        source: Some(crate::snapshot::SOURCE_GENERATED.into()),
        snapshot: None,
    })
}

async fn parallel(cx: &mut Context) -> Result<DatasetInfo> {
    let d = cx.plan.dataset.clone();
    let inv = cx.inventory()?;
    let degree = d
        .parallel_degree
        .unwrap_or_else(|| crate::loader::default_degree(inv.cpu.cpus));
    let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
    crate::notify::status(&format!(
        "dataset: parallel init of scale {} over {degree} connections",
        d.scale
    ));
    cx.journal
        .update(|s| s.dataset.load_degree = Some(degree))?;
    let c = cx.server()?.clone();
    let started = Instant::now();
    let spec = loader::LoadSpec {
        database: &d.database,
        scale: d.scale,
        fillfactor: d.fillfactor,
        degree,
        cores,
        ram_bytes: ram,
    };
    let result = loader::parallel_init(&c, &spec, cx.settings()?).await?;
    cx.journal.update(|s| s.dataset.load_degree = None)?;
    Ok(DatasetInfo {
        database: d.database.clone(),
        scale: d.scale,
        fillfactor: d.fillfactor,
        init_mode: "parallel".into(),
        command: format!("parallel init, {degree} connections"),
        wall_s: started.elapsed().as_secs_f64(),
        init: Some(InitBreakdown {
            total_s: result.total_s,
            phases: result
                .phases
                .into_iter()
                .map(|(phase, seconds)| InitPhase { phase, seconds })
                .collect(),
        }),
        source: Some(crate::snapshot::SOURCE_GENERATED.into()),
        snapshot: None,
    })
}
