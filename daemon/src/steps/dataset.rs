//! Dataset: the pgbench tables at the planned scale, in the planned database. Present when
//! the journal says this dataset was initialised and pgbench_branches has `scale` rows;
//! otherwise (first run, or an interrupted `pgbench -i`) it is (re)initialised.

use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::loader;
use crate::pgbench::init::{InitBreakdown, InitPhase};
use crate::pgbench::parse_init;
use crate::plan::InitMode;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{ident, literal, Session};
use crate::results::DatasetInfo;
use crate::runner::CommandSpec;

const FACT_DATASET: &str = "dataset";

pub fn dataset_fact(run: &Run) -> String {
    let d = &run.plan.dataset;
    format!(
        "db={} scale={} fillfactor={} init={:?}",
        d.database, d.scale, d.fillfactor, d.init
    )
}

/// Connection arguments for pgbench and friends.
pub fn conn_args(run: &Run) -> Result<Vec<String>> {
    let c = run.cluster()?;
    Ok(vec![
        "-h".into(),
        c.socket_dir().display().to_string(),
        "-p".into(),
        c.port.to_string(),
        "-U".into(),
        SUPERUSER.into(),
    ])
}

async fn dataset_present(run: &Run) -> Result<bool> {
    if run.journal.fact(FACT_DATASET) != Some(dataset_fact(run).as_str()) {
        return Ok(false);
    }
    let c = run.cluster()?;
    let db = &run.plan.dataset.database;
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
    Ok(branches.as_deref() == Some(run.plan.dataset.scale.to_string().as_str()))
}

/// Journal fact present while the parallel loader's load settings are in force.
const FACT_LOAD_SETTINGS: &str = "load_settings";

pub async fn run(run: &mut Run) -> Result<()> {
    let info_path = run.run_dir.join("dataset.json");
    if run.journal.fact(FACT_LOAD_SETTINGS).is_some() {
        // A parallel load was interrupted: the plan's settings come back first.
        tracing::warn!("restoring the plan's settings after an interrupted parallel load");
        let inv = run.inventory()?;
        let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
        loader::restore_settings(run.cluster()?, cores, ram, &run.applied_settings).await?;
        run.journal.remove_fact(FACT_LOAD_SETTINGS)?;
        run.journal.remove_fact(FACT_DATASET)?;
    }
    if dataset_present(run).await? {
        if !run.journal.is_done(StepName::Dataset) {
            run.journal.begin(StepName::Dataset, None)?;
            run.journal.finish(StepName::Dataset, 0.0)?;
        }
        return Ok(());
    }
    let t0 = Instant::now();
    run.journal.begin(StepName::Dataset, None)?;
    run.journal.remove_fact(FACT_DATASET)?;
    let c = run.cluster()?.clone();
    let d = run.plan.dataset.clone();
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
        InitMode::Parallel => parallel(run).await?,
        InitMode::Client | InitMode::Server => with_pgbench(run).await?,
    };
    crate::fsutil::write_json(&info_path, &info)?;
    let fact = dataset_fact(run);
    run.journal.set_fact(FACT_DATASET, fact)?;
    tracing::info!(scale = d.scale, seconds = info.wall_s, "dataset ready");
    run.journal
        .finish(StepName::Dataset, t0.elapsed().as_secs_f64())
}

async fn with_pgbench(run: &Run) -> Result<DatasetInfo> {
    let d = &run.plan.dataset;
    crate::notify::status(&format!("dataset: pgbench -i -s {}", d.scale));
    let bin = run.bin()?;
    let mut args = vec!["--initialize".to_string()];
    args.extend(conn_args(run)?);
    args.push(format!("--scale={}", d.scale));
    args.push(format!("--fillfactor={}", d.fillfactor));
    let mode = if d.init == InitMode::Server {
        args.push("--init-steps=dtGvp".into());
        "server"
    } else {
        "client"
    };
    args.push(d.database.clone());
    let raw = run.run_dir.join("raw");
    let (out, err) = (
        raw.join("dataset-init.stdout"),
        raw.join("dataset-init.stderr"),
    );
    let spec = CommandSpec::new(bin.tool("pgbench"))
        .args(args)
        .user(run.bench_user())
        .output_files(&out, &err);
    let started = Instant::now();
    run.runner.run(&spec).await?;
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
    })
}

async fn parallel(run: &mut Run) -> Result<DatasetInfo> {
    let d = run.plan.dataset.clone();
    let inv = run.inventory()?;
    let degree = d
        .parallel_degree
        .unwrap_or_else(|| crate::loader::default_degree(inv.cpu.cpus));
    let (cores, ram) = (inv.cpu.cpus, inv.memory_bytes);
    crate::notify::status(&format!(
        "dataset: parallel init of scale {} over {degree} connections",
        d.scale
    ));
    run.journal
        .set_fact(FACT_LOAD_SETTINGS, degree.to_string())?;
    let c = run.cluster()?.clone();
    let started = Instant::now();
    let spec = loader::LoadSpec {
        database: &d.database,
        scale: d.scale,
        fillfactor: d.fillfactor,
        degree,
        cores,
        ram_bytes: ram,
    };
    let result = loader::parallel_init(&c, &spec, &run.applied_settings).await?;
    run.journal.remove_fact(FACT_LOAD_SETTINGS)?;
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
    })
}
