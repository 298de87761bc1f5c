//! Upload: the finished run dir to the plan's store (or `--store`), complete and verified,
//! retried until the store has it. See [`crate::upload`].

use std::path::Path;

use anyhow::{Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::plan::Plan;
use crate::upload::{self, RunKey, Store, StoreOverrides, Stored, UploadOptions};

pub(crate) struct Upload;

impl Step for Upload {
    const NAME: StepName = StepName::Upload;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[Product::Stored];

    async fn check(&self, _cx: &mut Looking<'_>) -> Result<Check> {
        // Only the store can say whether it has the run: the upload asks it (listing and
        // read-back) and sends what is missing or different.
        Ok(Check::Todo("the store is verified at every start".into()))
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let stored = upload_dir(
            &cx.plan,
            &cx.journal.state.run_id,
            &cx.run_dir,
            &cx.workdir,
            &cx.upload.overrides,
            cx.upload.options,
        )
        .await?;
        let url = cx.store_url();
        cx.journal.update(|s| s.upload.stored_in = Some(url))?;
        cx.set_stored(stored);
        Ok(())
    }
}

pub(crate) async fn upload_dir(
    plan: &Plan,
    run_id: &str,
    run_dir: &Path,
    workdir: &Path,
    overrides: &StoreOverrides,
    options: UploadOptions,
) -> Result<Stored> {
    let cfg = overrides.config(&plan.upload);
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
pub(crate) async fn upload_finished(
    workdir: &Path,
    overrides: &StoreOverrides,
    options: UploadOptions,
) -> Result<(String, Stored)> {
    let journal = crate::journal::JournalFile::load(&crate::journal::journal_path(workdir))?;
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
    // The plan kept in results.json was not read through the plan's checks: its appliance
    // name becomes the first level of the run's key.
    crate::fsutil::check_path_component(
        "results.json's appliance name",
        &results.plan.appliance.name,
    )
    .map_err(anyhow::Error::msg)?;
    let m = upload_dir(
        &results.plan,
        &journal.run_id,
        &run_dir,
        workdir,
        overrides,
        options,
    )
    .await?;
    Ok((journal.run_id, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_appliance_name_in_results_json_that_is_not_a_plain_name_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = crate::journal::JournalFile::open_or_create(
            &crate::journal::journal_path(dir.path()),
            "aaaa",
            "r-1".into(),
        )
        .expect("journal");
        j.save().expect("save");
        let run = crate::synthetic::SyntheticRun {
            appliance: "good".into(),
            run_id: "r-1".into(),
            started_at: "2026-11-01T10:00:00Z".into(),
            hourly_price_usd: 1.0,
            points: Vec::new(),
        };
        let mut r = crate::synthetic::run_results(&run).expect("results");
        r.plan.appliance.name = "../../victim".into();
        let run_dir = dir.path().join("runs/r-1");
        crate::fsutil::create_dir_all(&run_dir).expect("mkdir");
        crate::fsutil::write_json(&run_dir.join("results.json"), &r).expect("write");
        let err = upload_finished(dir.path(), &StoreOverrides::default(), Default::default())
            .await
            .expect_err("refused");
        assert!(
            format!("{err:#}").contains("appliance name \"../../victim\""),
            "{err:#}"
        );
    }
}
