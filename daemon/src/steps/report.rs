//! Report: `results.json`, `summary.csv` and `report.html` from the recorded points.
//! Rebuilt from the run dir every time, so it is always consistent with the journal.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::results::{
    summary_csv, DatasetInfo, PointResult, PostgresInfo, RunResults, RESULTS_SCHEMA_VERSION,
};

pub fn load_results(run: &Run) -> Result<RunResults> {
    let path = run.run_dir.join("results.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The results of a run whose report step already finished (nothing left to measure).
pub fn finished_results(run: &Run) -> Option<RunResults> {
    if !run.journal.is_done(StepName::Report) {
        return None;
    }
    load_results(run).ok()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

pub async fn run(run: &mut Run) -> Result<RunResults> {
    let t0 = Instant::now();
    run.journal.begin(StepName::Report, None)?;
    let points = super::sweep::points(run)?;
    let mut results = Vec::new();
    for p in points.iter().filter(|p| !p.warmup) {
        let rec = run
            .journal
            .state
            .points
            .get(&p.id)
            .with_context(|| format!("point {} has no recorded result", p.id))?;
        let r: PointResult = read_json(&run.run_dir.join(&rec.result))?;
        results.push(r);
    }
    let cluster = run.cluster()?.clone();
    let bin = run.bin()?.clone();
    let session =
        Session::connect(&cluster.socket_dir(), cluster.port, SUPERUSER, "postgres").await?;
    let server_version = session.value("SELECT version()").await?;
    let effective = session.effective_settings().await?;
    let data_checksums = session.value("SHOW data_checksums").await?.as_deref() == Some("on");
    let dataset: Option<DatasetInfo> = read_json(&run.run_dir.join("dataset.json")).ok();
    let applied: BTreeMap<String, String> =
        read_json(&run.run_dir.join("applied_settings.json")).unwrap_or_default();
    let mut timings: BTreeMap<String, f64> = run
        .journal
        .state
        .steps
        .iter()
        .filter_map(|(k, v)| v.duration_s.map(|d| (k.as_str().to_string(), d)))
        .collect();
    timings.remove(StepName::Report.as_str());
    if let Some(s) = run
        .journal
        .fact(super::postgres::FACT_INITDB_SECONDS)
        .and_then(|v| v.parse().ok())
    {
        timings.insert("initdb".to_string(), s);
    }
    let r = RunResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        run_id: run.journal.state.run_id.clone(),
        appliance: run.plan.appliance.name.clone(),
        hourly_price_usd: run.plan.appliance.hourly_price_usd,
        started_at: run.journal.state.started_at.clone(),
        finished_at: Some(crate::journal::now()),
        plan: run.plan.clone(),
        inventory: run.inventory()?.clone(),
        postgres: PostgresInfo {
            major: bin.major,
            version: bin.version.clone(),
            bin_dir: bin.dir.display().to_string(),
            server_version,
            data_checksums,
            applied_settings: applied,
            effective_settings: effective,
        },
        dataset,
        tuning_in_effect: read_json(&run.run_dir.join(super::os_tuning::IN_EFFECT_FILE)).ok(),
        step_timings_s: timings,
        points_total: results.len(),
        points: results,
    };
    crate::fsutil::write_json(&run.run_dir.join("results.json"), &r)?;
    crate::fsutil::atomic_write(&run.run_dir.join("summary.csv"), summary_csv(&r).as_bytes())?;
    crate::fsutil::atomic_write(
        &run.run_dir.join("report.html"),
        crate::report::render(&r).as_bytes(),
    )?;
    run.journal
        .finish(StepName::Report, t0.elapsed().as_secs_f64())?;
    Ok(r)
}
