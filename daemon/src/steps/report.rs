//! Report: `results.json`, `summary.csv` and `report.html` from the recorded points.
//! Built from the run dir and the journal, so it is always consistent with them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::results::{
    summary_csv, DatasetInfo, PointResult, PostgresInfo, RunResults, RESULTS_SCHEMA_VERSION,
};

pub(crate) struct Report;

pub(crate) fn load_results(run_dir: &Path) -> Result<RunResults> {
    let path = run_dir.join("results.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The results of a run whose report step already finished (nothing left to measure).
pub(crate) fn finished_results(cx: &Context) -> Option<RunResults> {
    if !cx.journal.is_done(StepName::Report) {
        return None;
    }
    load_results(&cx.run_dir).ok()
}

impl Step for Report {
    const NAME: StepName = StepName::Report;
    const NEEDS: &'static [Product] = &[Product::Inventory, Product::Server];
    const GIVES: &'static [Product] = &[Product::Results];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        // Rebuilt from the run dir whenever the sweep had something to do.
        Ok(match finished_results(cx) {
            Some(r) if cx.journal.is_done(StepName::Sweep) => {
                cx.set_results(r);
                Check::Done
            }
            _ => Check::Todo("results not written yet".into()),
        })
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        // The sweep's end removes the directory its restores reused; a sweep resumed after
        // its last point (so not applied again) leaves that end to this step.
        crate::steps::dataset::drive(cx, crate::steps::dataset::phase::Moment::SweepOver).await?;
        let r = build(cx).await?;
        cx.set_results(r);
        Ok(())
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

async fn build(cx: &Context) -> Result<RunResults> {
    let points = super::sweep::points(cx)?;
    let mut results = Vec::new();
    for (i, p) in points.iter().enumerate().filter(|(_, p)| !p.warmup) {
        // A round adaptive repeats left out was never measured.
        if !super::sweep::recorded(cx, p) && !super::sweep::wanted(cx, &points, i) {
            continue;
        }
        let rec = cx
            .journal
            .state
            .points
            .get(&p.id)
            .with_context(|| format!("point {} has no recorded result", p.id))?;
        let r: PointResult = read_json(&cx.run_dir.join(&rec.result))?;
        results.push(r);
    }
    let cluster = cx.server()?.clone();
    let bin = cluster.bin.clone();
    let session =
        Session::connect(&cluster.socket_dir(), cluster.port, SUPERUSER, "postgres").await?;
    let server_version = session.value("SELECT version()").await?;
    let effective = session.effective_settings().await?;
    let data_checksums = session.value("SHOW data_checksums").await?.as_deref() == Some("on");
    let dataset: Option<DatasetInfo> = read_json(&cx.run_dir.join("dataset.json")).ok();
    let tpcc_datasets: Vec<crate::results::TpccDatasetInfo> =
        read_json(&cx.run_dir.join("dataset-tpcc.json")).unwrap_or_default();
    let applied: BTreeMap<String, String> =
        read_json(&cx.run_dir.join("applied_settings.json")).unwrap_or_default();
    let mut timings: BTreeMap<String, f64> = cx
        .journal
        .state
        .steps
        .iter()
        .filter_map(|(k, v)| v.duration_s.map(|d| (k.as_str().to_string(), d)))
        .collect();
    timings.remove(StepName::Report.as_str());
    if let Some(s) = cx.journal.state.state.postgres.initdb_s {
        timings.insert("initdb".to_string(), s);
    }
    let r = RunResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        run_id: cx.journal.state.run_id.clone(),
        appliance: cx.plan.appliance.name.clone(),
        hourly_price_usd: cx.plan.appliance.hourly_price_usd,
        started_at: cx.journal.state.started_at.clone(),
        finished_at: Some(crate::clock::now()),
        plan: cx.plan.clone(),
        inventory: cx.inventory()?.clone(),
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
        tpcc_datasets,
        tuning_in_effect: read_json(&cx.run_dir.join(super::in_effect::IN_EFFECT_FILE)).ok(),
        step_timings_s: timings,
        points_total: results.len(),
        points: results,
    };
    crate::fsutil::write_json(&cx.run_dir.join("results.json"), &r)?;
    crate::fsutil::atomic_write(&cx.run_dir.join("summary.csv"), summary_csv(&r).as_bytes())?;
    crate::fsutil::atomic_write(
        &cx.run_dir.join("report.html"),
        crate::report::render(&r).as_bytes(),
    )?;
    Ok(r)
}
