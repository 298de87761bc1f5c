//! Dataset: the pgbench tables at the planned scale, in the planned database (when a
//! workload runs pgbench), and each sysbench-tpcc dataset the workloads name
//! ([`super::tpcc`]), with the snapshot the plan keeps and shares ([`snapshot`]).
//!
//! What is done when is the dataset's state machine ([`phase`]): this file observes what
//! its pure [`phase::next`] needs, and carries out the one action it returns, each of which
//! journals what it did, until it returns [`Action::Nothing`] ([`drive`]). The step's
//! `check` asks it once; the sweep asks it before each point and after the last.

pub(crate) mod phase;
pub(crate) mod snapshot;

use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::journal::StepName;
use crate::loader;
use crate::pgbench::init::{InitBreakdown, InitPhase};
use crate::pgbench::parse_init;
use crate::plan::InitMode;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{ident, literal, rows_in, Session};
use crate::postgres::Cluster;
use crate::results::DatasetInfo;
use crate::runner::CommandSpec;
use crate::snapshot::key::SnapshotKey;
use crate::steps::{Check, Context, Looking, Product, Step};
use phase::{Action, Goal, Load, Moment, Observed, Phase, Tried};

pub(crate) struct Dataset;

/// What identifies the initialised dataset in the journal (and in a snapshot's key).
pub(crate) fn spec(cx: &Context) -> String {
    let d = &cx.plan.dataset;
    format!(
        "db={} scale={} fillfactor={} init={:?}",
        d.database, d.scale, d.fillfactor, d.init
    )
}

/// Connection arguments for pgbench and friends.
pub(crate) fn conn_args(c: &Cluster) -> Result<Vec<String>> {
    Ok(crate::workload::pgbench::conn_args(c))
}

/// Whether the dataset's tables are there at the planned scale.
async fn present(cx: &Context) -> Result<bool> {
    let c = cx.server()?;
    let db = &cx.plan.dataset.database;
    let branches = rows_in(&c.socket_dir(), c.port, SUPERUSER, db, "pgbench_branches").await?;
    Ok(branches.as_deref() == Some(cx.plan.dataset.scale.to_string().as_str()))
}

impl Step for Dataset {
    const NAME: StepName = StepName::Dataset;
    const NEEDS: &'static [Product] = &[Product::Inventory, Product::Server, Product::Settings];
    const GIVES: &'static [Product] = &[];

    /// In place when the machine has nothing to do ([`phase::next`] says so).
    /// Whether a local snapshot could make the dataset changes only how, not whether: the
    /// check observes without looking for one.
    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let goal = goal(cx, Moment::Step);
        let phase = Phase::of(&cx.journal.state.state.dataset);
        let seen = observe(cx, &phase, &goal, Tried::default()).await?;
        Ok(match phase::next(&phase, &goal, &seen) {
            Action::Nothing => Check::Done,
            action => Check::Todo(action.why(&phase, &goal, &seen)),
        })
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        drive(cx, Moment::Step).await
    }
}

/// More actions than any way through the machine takes: past this, it goes round in a
/// circle (an observation its action does not change), which is an error, not a hang.
const MOST_ACTIONS: usize = 16;

/// The plan's goal for the dataset at `moment`.
fn goal(cx: &Context, moment: Moment) -> Goal {
    Goal {
        pgbench: cx.plan.has_pgbench().then(|| spec(cx)),
        tpcc: cx
            .plan
            .tpcc_datasets()
            .iter()
            .map(super::tpcc::dataset_spec)
            .collect(),
        keep_snapshot: cx.plan.dataset.keeps_snapshot(),
        store: snapshot::store_url(cx),
        restore: cx.plan.dataset.restore,
        moment,
    }
}

/// What [`phase::next`] reads from the server and the disk in `phase`: nothing while a
/// restore or a load is in flight (the data directory may be half made), the datasets'
/// tables otherwise, data checksums before a point that needs a checksum state, the spare
/// directory after the sweep.
async fn observe(cx: &Context, phase: &Phase, goal: &Goal, tried: Tried) -> Result<Observed> {
    let mut seen = Observed {
        tried,
        ..Observed::default()
    };
    if goal.moment == Moment::SweepOver {
        seen.spare = crate::snapshot::local::restoring_dir(&cx.server()?.data_dir()).exists();
        return Ok(seen);
    }
    let Phase::Settled(settled) = phase else {
        return Ok(seen);
    };
    // Tables are counted only for a dataset the journal records as made: the count's
    // query cannot name a table that an interrupted load never created. Before a sweep
    // point the journal is trusted, as the dataset step counted them: no query on the
    // tables the point is about to measure.
    let counting = !matches!(goal.moment, Moment::Point(_));
    if goal.pgbench.is_some() && settled.pgbench == goal.pgbench {
        seen.pgbench_present = !counting || present(cx).await?;
    }
    for ds in cx.plan.tpcc_datasets().iter().filter(|_| counting) {
        let spec = super::tpcc::dataset_spec(ds);
        if settled.tpcc.contains(&spec) && !super::tpcc::present(cx.server()?, ds).await? {
            seen.tpcc_absent.push(spec);
        }
    }
    if let Moment::Point(p) = &goal.moment {
        let has_snapshot = settled.snapshot.as_ref().and_then(|s| s.id()).is_some();
        if p.checksums.is_some() && has_snapshot {
            seen.checksums_on = Some(cx.server()?.checksums_enabled().await?);
        }
    }
    Ok(seen)
}

/// Observes and asks [`phase::next`]. A local snapshot with the dataset's key is looked
/// for only when the answer is to make a dataset; the key is read from the server once
/// per drive (`key`), and the other local snapshots are named in the log that first time.
async fn decide(
    cx: &Context,
    phase: &Phase,
    goal: &Goal,
    tried: Tried,
    key: &mut Option<SnapshotKey>,
) -> Result<Action> {
    let mut seen = observe(cx, phase, goal, tried).await?;
    let action = phase::next(phase, goal, &seen);
    if !(action.makes() && goal.snapshots()) {
        return Ok(action);
    }
    let quiet = key.is_some();
    let key = snapshot_key(cx, key).await?;
    seen.local_snapshot = snapshot::local_snapshot(cx, key, quiet)?;
    Ok(phase::next(phase, goal, &seen))
}

/// The snapshot key of the server and the plan's datasets, read once and kept in `key`.
async fn snapshot_key<'a>(
    cx: &Context,
    key: &'a mut Option<SnapshotKey>,
) -> Result<&'a SnapshotKey> {
    if key.is_none() {
        *key = Some(crate::snapshot::current_key(cx.server()?, &full_spec(cx)).await?);
    }
    Ok(key.as_ref().expect("just read"))
}

/// The dataset's machine at `moment`: observe, ask [`phase::next`], carry out its action
/// (each journals what it did), until it says nothing is left (or, before a point, that
/// the point starts). The dataset step's `apply` is `Moment::Step`; the sweep asks with
/// `Moment::Point` before each point and `Moment::SweepOver` after the last.
pub(crate) async fn drive(cx: &mut Context, moment: Moment) -> Result<()> {
    let goal = goal(cx, moment);
    let mut tried = Tried::default();
    let mut key = None;
    let mut taken: Vec<Action> = Vec::new();
    loop {
        let phase = Phase::of(&cx.journal.state.state.dataset);
        let action = decide(cx, &phase, &goal, tried, &mut key).await?;
        if taken.len() >= MOST_ACTIONS {
            anyhow::bail!(
                "internal: the dataset's phases do not settle ({phase:?} asks for {action:?} after {taken:?})"
            );
        }
        taken.push(action.clone());
        tracing::debug!(?phase, ?action, "dataset");
        match action {
            Action::Nothing => return Ok(()),
            Action::RedoRestore { snapshot } => redo_restore(cx, &snapshot).await?,
            Action::RestoreSettings(Load::Parallel { .. }) => {
                tracing::warn!("restoring the plan's settings after an interrupted parallel load");
                let inv = cx.inventory()?;
                let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
                loader::restore_settings(cx.server()?, cores, ram, cx.settings()?).await?;
                cx.journal.update(|s| s.dataset.load_degree = None)?;
            }
            Action::RestoreSettings(Load::Tpcc { .. }) => super::tpcc::recover(cx).await?,
            Action::RestoreLocal { snapshot } => {
                if let Some(info) = snapshot::restore_from_local(cx, &snapshot).await? {
                    record_restored(cx, &goal, info).await?;
                }
            }
            Action::RestoreFromStore { store } => {
                let key = snapshot_key(cx, &mut key).await?.clone();
                match snapshot::restore_from_store(cx, &store, &key).await? {
                    Some(info) => record_restored(cx, &goal, info).await?,
                    None => tried.store = true,
                }
            }
            Action::CreateAndLoad => {
                snapshot::discard_spare(cx).await?;
                pgbench_dataset(cx).await?;
                record_generated(cx)?;
            }
            Action::PrepareTpcc => {
                snapshot::discard_spare(cx).await?;
                if !super::tpcc::prepare_missing(cx).await?.is_empty() {
                    record_generated(cx)?;
                }
            }
            Action::TakeSnapshot => {
                let key = snapshot_key(cx, &mut key).await?.clone();
                let id = snapshot::keep(cx, &key).await?;
                name_snapshot_in_record(cx, &id)?;
                tried.took_snapshot = true;
            }
            Action::UploadSnapshot { .. } => {
                // A failure is logged and left to the next start.
                snapshot::share(cx).await?;
                tried.upload = true;
            }
            Action::PutBack {
                snapshot,
                point,
                reason,
            } => {
                tried.put_back = true;
                snapshot::put_back(cx, &point, &snapshot, &reason).await?;
            }
            Action::StartPoint { workload, warmup } => {
                cx.journal.update(|s| {
                    s.dataset.changed_by = Some(workload);
                    s.dataset.changed_by_warmup = warmup;
                })?;
                return Ok(());
            }
            Action::DiscardSpare => snapshot::discard_spare(cx).await?,
        }
    }
}

/// The interrupted restore of `id`, done again (files checked as they are copied). A
/// snapshot found corrupt is removed and every dataset is made again: what the data
/// directory holds now is not the prepared data (points may have changed it).
async fn redo_restore(cx: &mut Context, id: &str) -> Result<()> {
    tracing::warn!(snapshot = %id, "redoing the interrupted restore");
    match snapshot::restore_local(cx, id, crate::snapshot::copy::Hashing::WhenCopying).await {
        Ok(_) => Ok(()),
        Err(e) if crate::snapshot::is_corrupt(&e).is_some() => {
            snapshot::drop_corrupt(cx, id, &e, snapshot::Forget::Datasets)
        }
        Err(e) => Err(e),
    }
}

/// A dataset made from a snapshot: its record (dataset.json, pgbench's; dataset-tpcc.json)
/// and the journal's list of what is made.
async fn record_restored(cx: &mut Context, goal: &Goal, info: DatasetInfo) -> Result<()> {
    if goal.pgbench.is_some() {
        crate::fsutil::write_json(&cx.run_dir.join("dataset.json"), &info)?;
    }
    let (pgbench, tpcc) = (goal.pgbench.clone(), goal.tpcc.clone());
    cx.journal.update(|s| {
        s.dataset.spec = pgbench;
        s.dataset.tpcc = tpcc;
    })?;
    let source = info.source.clone().unwrap_or_default();
    super::tpcc::record_restored(cx, &source, info.wall_s).await?;
    tracing::info!(source = ?info.source, seconds = info.wall_s, "dataset ready");
    Ok(())
}

/// A dataset was generated: it comes from no snapshot, and none of this data is kept yet.
fn record_generated(cx: &mut Context) -> Result<()> {
    cx.journal.update(|s| {
        s.dataset.source = Some(crate::snapshot::SOURCE_GENERATED.into());
        s.dataset.snapshot = None;
        s.dataset.snapshot_stored = None;
        s.dataset.changed_by = None;
    })
}

/// What identifies everything the data directory holds (pgbench's tables and each
/// sysbench-tpcc dataset): the dataset part of a snapshot's key.
pub(crate) fn full_spec(cx: &Context) -> String {
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
