//! Upload: the finished run dir to the plan's store (or `--store`), complete and verified,
//! retried until the store has it. See [`crate::upload`].

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::plan::Plan;
use crate::upload::{self, RunKey, Store, StoreConfig, Stored, UploadOptions};

pub async fn run(run: &mut Run) -> Result<Stored> {
    let t0 = Instant::now();
    run.journal.begin(StepName::Upload, None)?;
    let stored = upload_dir(
        &run.plan,
        &run.journal.state.run_id,
        &run.run_dir,
        &run.workdir,
        run.options.store.as_deref(),
        run.options.upload,
    )
    .await?;
    run.journal.set_fact(
        "uploaded_to",
        run.options
            .store
            .clone()
            .unwrap_or_else(|| run.plan.upload.store.clone()),
    )?;
    run.journal
        .finish(StepName::Upload, t0.elapsed().as_secs_f64())?;
    Ok(stored)
}

pub async fn upload_dir(
    plan: &Plan,
    run_id: &str,
    run_dir: &Path,
    workdir: &Path,
    store_override: Option<&str>,
    options: UploadOptions,
) -> Result<Stored> {
    let cfg = StoreConfig::from_plan(&plan.upload, store_override);
    let store = Store::open(&cfg)?;
    let key = RunKey {
        appliance: plan.appliance.name.clone(),
        machine_id: upload::machine_id(),
        run_id: run_id.to_string(),
    };
    crate::notify::status(&format!("upload: run {run_id} to {}", store.url));
    let stored = upload::upload_run(&store, &key, run_dir, workdir, options).await?;
    crate::notify::status(&format!(
        "upload: {} under {} in {}",
        stored.describe(),
        key.parts().join("/"),
        store.url
    ));
    Ok(stored)
}

/// `pgapplianced upload`: (re)uploads the finished run of a work dir.
pub async fn upload_finished(
    workdir: &Path,
    store_override: Option<&str>,
    options: UploadOptions,
) -> Result<(String, Stored)> {
    let journal = crate::journal::JournalFile::load(&super::journal_path(workdir))?;
    let run_dir = workdir.join("runs").join(&journal.run_id);
    let results: crate::results::RunResults = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json")).with_context(|| {
            format!(
                "run {} has no results.json yet: finish the run first",
                journal.run_id
            )
        })?,
    )
    .context("parsing results.json")?;
    let m = upload_dir(
        &results.plan,
        &journal.run_id,
        &run_dir,
        workdir,
        store_override,
        options,
    )
    .await?;
    Ok((journal.run_id, m))
}
