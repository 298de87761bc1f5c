//! `pgapplianced upload`: the finished run of a work directory stored by hand, holding the
//! work directory's lock (a daemon still at work there, its own upload included, is never
//! raced: both would write the same upload journal).

use std::path::Path;

use anyhow::{bail, Result};

use super::lock::WorkdirLock;
use crate::journal::journal_path;
use crate::upload::{StoreOverrides, Stored, UploadOptions};

/// Uploads the finished run of `workdir` (again): its run id and what the store holds.
pub async fn upload_finished(
    workdir: &Path,
    store: &StoreOverrides,
    options: UploadOptions,
) -> Result<(String, Stored)> {
    let journal = journal_path(workdir);
    if !journal.exists() {
        bail!(
            "no run journal at {}: nothing has run in this work directory, so there is nothing to upload",
            journal.display()
        );
    }
    let _lock = WorkdirLock::acquire(workdir)?;
    crate::steps::upload::upload_finished(workdir, store, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_work_directory_without_a_run_is_named_and_left_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("work");
        let err = upload_finished(&work, &StoreOverrides::default(), UploadOptions::default())
            .await
            .expect_err("nothing to upload");
        let msg = format!("{err:#}");
        assert!(
            msg.contains(&format!(
                "no run journal at {}",
                work.join("state.json").display()
            )) && msg.contains("nothing to upload")
                && !msg.contains("os error"),
            "{msg}"
        );
        assert!(
            !work.exists(),
            "nothing made in a work directory that was not there"
        );
    }

    #[tokio::test]
    async fn a_work_directory_a_daemon_works_in_is_not_uploaded_from() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("state.json"), "{}").expect("journal");
        let _daemon = WorkdirLock::acquire(dir.path()).expect("the daemon's lock");
        let err = upload_finished(
            dir.path(),
            &StoreOverrides::default(),
            UploadOptions::default(),
        )
        .await
        .expect_err("refused while the lock is held");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("another pgapplianced")
                && msg.contains(&format!("{}", std::process::id())),
            "{msg}"
        );
    }
}
