//! `pgapplianced reset`: the way out of a refusal or a failed run, and the way to run a
//! finished appliance again. It keeps the evidence of the run (journal, run directory,
//! status, the daemon's log on the appliance) under `archive/<run id>/`, uploads it to the
//! plan's store when it can (a run that was not stored goes under `<appliance>/failed/`, beside the
//! runs), stops the PostgreSQL server the run left, and leaves the work directory clean, so
//! the next `run` (or the next start of pgapplianced.service) starts a new run with the
//! plan as it is now.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use super::lock::WorkdirLock;
use super::run::PLAN_COPY;
use crate::journal::journal_path;
use crate::journal::JournalFile;
use crate::notify::STATUS_FILE;
use crate::upload::{RunKey, Store, StoreOverrides, UploadOptions};

/// Where a reset keeps the runs it took out of the way, in the work directory.
pub(crate) const ARCHIVE_DIR: &str = "archive";

/// Where, under the appliance's own prefix (all that the credentials minted for it may
/// write), runs that stopped or were reset before they were stored are kept:
/// `<prefix>/<appliance>/failed/<machine id>/<run id>/`.
pub const FAILED_PREFIX: &str = "failed";

/// The archive name of a run whose journal could not be read.
pub(crate) const UNREADABLE_RUN: &str = "unreadable-journal";

/// How long a reset tries to reach the store before it leaves the evidence local.
const UPLOAD_PATIENCE: Duration = Duration::from_secs(120);

/// What a reset did.
#[derive(Debug, Clone)]
pub struct ResetOutcome {
    pub run_id: String,
    /// Where the evidence is kept locally.
    pub archived_to: PathBuf,
    /// The run had finished (its results were stored by the run itself).
    pub was_finished: bool,
    /// Where the evidence was uploaded (store URL and key), or why it was not.
    pub upload: std::result::Result<String, String>,
    /// What was done about a server the run left.
    pub stopped: Option<String>,
    /// The run was refused (the plan or the machine must change before a new run).
    pub refused: bool,
    /// The run's work directory is the appliance's own.
    pub appliance: bool,
    /// Earlier resets' evidence uploaded now (its archive), or why not yet.
    pub retried: Vec<(PathBuf, std::result::Result<String, String>)>,
}

/// Where the marks of evidence not yet uploaded are kept: one file per archived run,
/// named as its archive directory, holding its run id.
fn pending_dir(workdir: &Path) -> PathBuf {
    workdir.join(ARCHIVE_DIR).join(".upload").join("pending")
}

fn mark_pending(workdir: &Path, archived: &Path, run_id: &str) -> Result<PathBuf> {
    let dir = pending_dir(workdir);
    crate::fsutil::create_dir_all(&dir)?;
    let name = archived
        .file_name()
        .context("an archive directory has a name")?;
    let mark = dir.join(name);
    crate::fsutil::atomic_write(&mark, run_id.as_bytes())?;
    Ok(mark)
}

/// The archives whose evidence upload has not finished: (mark, archive, run id).
fn pending_evidence(workdir: &Path) -> Vec<(PathBuf, PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(pending_dir(workdir)) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, PathBuf, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            if name.starts_with('.') {
                return None;
            }
            let run_id = std::fs::read_to_string(e.path()).ok()?.trim().to_string();
            crate::fsutil::check_path_component("run id", &run_id).ok()?;
            let archived = workdir.join(ARCHIVE_DIR).join(&name);
            Some((e.path(), archived, run_id))
        })
        .collect();
    out.sort();
    out
}

async fn retry_pending_evidence(
    workdir: &Path,
    store: &StoreOverrides,
    options: UploadOptions,
) -> Vec<(PathBuf, std::result::Result<String, String>)> {
    let mut out = Vec::new();
    for (mark, archived, run_id) in pending_evidence(workdir) {
        let plan = std::fs::read_to_string(archived.join("run").join(PLAN_COPY))
            .ok()
            .and_then(|t| crate::plan::Plan::parse(&t).ok());
        let result = match plan {
            None => Err(format!(
                "{} has no readable run/{PLAN_COPY}, so its store is unknown",
                archived.display()
            )),
            Some(plan) => upload_evidence(&plan, &run_id, &archived, workdir, store, options).await,
        };
        match &result {
            Ok(where_) => {
                tracing::info!(archive = %archived.display(), "evidence of an earlier reset uploaded: {where_}");
                let _ = std::fs::remove_file(&mark);
            }
            Err(why) => {
                tracing::warn!(archive = %archived.display(), "evidence of an earlier reset not uploaded yet: {why}")
            }
        }
        out.push((archived, result));
    }
    out
}

/// Resets the run in `workdir`; `store` changes the plan's store for the evidence.
pub async fn reset(
    workdir: &Path,
    store: &StoreOverrides,
    options: UploadOptions,
) -> Result<ResetOutcome> {
    let journal_file = journal_path(workdir);
    if !journal_file.exists() && pending_evidence(workdir).is_empty() {
        bail!(
            "no run journal at {}: nothing to reset in this work directory",
            journal_file.display()
        );
    }
    let _lock = WorkdirLock::acquire(workdir)?;
    // Evidence an earlier reset archived but did not finish uploading (it was stopped, or
    // the store was away): tried again first.
    let retried = retry_pending_evidence(workdir, store, options).await;
    let appliance_dir = Path::new(crate::platform::APPLIANCE_WORKDIR);
    let appliance = workdir == appliance_dir
        || std::fs::canonicalize(appliance_dir)
            .is_ok_and(|a| std::fs::canonicalize(workdir).is_ok_and(|w| w == a));
    if !journal_file.exists() {
        return Ok(ResetOutcome {
            run_id: String::new(),
            archived_to: PathBuf::new(),
            was_finished: false,
            upload: Err("no run to put aside".into()),
            stopped: None,
            refused: false,
            appliance,
            retried,
        });
    }
    // Any schema this daemon reads (a schema-1 journal is read, not rewritten here). A
    // journal that cannot be read (damaged, or naming paths outside the work directory) is
    // put aside all the same: its run directory is unknown, so only the work directory's
    // own files are archived, and the server is stopped.
    let (journal, unreadable) = match JournalFile::load(&journal_file) {
        Ok(j) => (Some(j), None),
        Err(e) => {
            tracing::warn!(journal = %journal_file.display(), error = %format!("{e:#}"), "the journal cannot be read: putting it aside");
            (None, Some(format!("{e:#}")))
        }
    };
    let run_id = journal
        .as_ref()
        .map_or_else(|| UNREADABLE_RUN.to_string(), |j| j.run_id.clone());
    let run_dir = journal
        .as_ref()
        .map(|j| workdir.join("runs").join(&j.run_id));
    let plan = run_dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join(PLAN_COPY)).ok())
        .and_then(|t| crate::plan::Plan::parse(&t).ok());
    let was_finished = journal.as_ref().is_some_and(|j| j.finished_at.is_some());
    let refused = journal
        .as_ref()
        .and_then(|j| j.failure.as_ref())
        .is_some_and(|f| f.refused);

    let stopped = stop_server(workdir, plan.as_ref()).await?;

    let archived_to = free_name(&workdir.join(ARCHIVE_DIR).join(&run_id));
    crate::fsutil::create_dir_all(&archived_to)?;
    // The journal first: a reset stopped half-way leaves no journal pointing at a run
    // directory that is gone (the next run starts clean, the archive has what was moved).
    for name in [
        "state.json",
        super::live::FAILURE_BUNDLE_DIR,
        super::live::FAILURE_UPLOAD_DIR,
        STATUS_FILE,
        crate::platform::DONE_MARKER,
        crate::upload::UPLOAD_STATE_FILE,
    ] {
        let from = workdir.join(name);
        if from.exists() {
            std::fs::rename(&from, archived_to.join(name))
                .with_context(|| format!("moving {} into the archive", from.display()))?;
        }
    }
    if let Some(run_dir) = run_dir.filter(|d| d.exists()) {
        std::fs::rename(&run_dir, archived_to.join("run"))
            .with_context(|| format!("moving {} into the archive", run_dir.display()))?;
    }
    daemon_log(&archived_to.join("daemon.log")).await;
    // The local server's data directory belongs to the run that is reset.
    let cluster = workdir.join("cluster");
    if cluster.exists() {
        std::fs::remove_dir_all(&cluster)
            .with_context(|| format!("removing {}", cluster.display()))?;
    }

    let upload = match (&plan, was_finished) {
        _ if unreadable.is_some() => Err(format!(
            "the journal could not be read ({}), so the run and its store are unknown",
            unreadable.unwrap_or_default()
        )),
        (_, true) => Err("the run had finished: its results are in the store already".into()),
        (None, false) => Err(format!(
            "the run kept no readable {PLAN_COPY}, so its store is unknown"
        )),
        (Some(plan), false) => {
            // Marked before the upload starts, cleared once it is done: a reset stopped
            // during the upload leaves the mark, and the next reset uploads it.
            let mark = mark_pending(workdir, &archived_to, &run_id)?;
            let upload =
                upload_evidence(plan, &run_id, &archived_to, workdir, store, options).await;
            if upload.is_ok() {
                let _ = std::fs::remove_file(&mark);
            }
            upload
        }
    };
    Ok(ResetOutcome {
        run_id,
        archived_to,
        was_finished,
        upload,
        stopped,
        refused,
        appliance,
        retried,
    })
}

/// `path`, or `path.2`, `path.3`, … when it exists (a run id reset twice).
fn free_name(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    let mut n = 2;
    while p.exists() {
        p = path.with_extension(n.to_string());
        n += 1;
    }
    p
}

/// Stops the server the run left: local mode's postmaster under `workdir/cluster`, or the
/// appliance's PostgreSQL service (its data directory is initialised again by the next run).
async fn stop_server(workdir: &Path, plan: Option<&crate::plan::Plan>) -> Result<Option<String>> {
    if workdir.join("cluster").exists() {
        return crate::host::local::stop_left_server(workdir).await;
    }
    // Only the appliance's own work directory has the platform's service as its server: a
    // local work directory whose run never made its cluster has none, and the machine's
    // own PostgreSQL is not the run's.
    let appliance = Path::new(crate::platform::APPLIANCE_WORKDIR);
    let is_appliance =
        workdir == appliance || std::fs::canonicalize(appliance).is_ok_and(|a| a == workdir);
    let Some(plan) = plan.filter(|_| is_appliance) else {
        return Ok(None);
    };
    match crate::host::appliance::stop_service(plan).await {
        Ok(stopped) => Ok(stopped),
        // The next run stops it before it initialises the data directory again.
        Err(e) => Ok(Some(format!(
            "the run's PostgreSQL service was not stopped ({e:#}); the next run stops it"
        ))),
    }
}

/// The daemon's journal of this boot and the ones before, when journald has it.
pub(super) async fn daemon_log(to: &Path) {
    let out = crate::runner::Runner::local()
        .run(
            &crate::runner::CommandSpec::new("journalctl")
                .args([
                    "--no-pager",
                    "-o",
                    "short-iso",
                    "-u",
                    "pgapplianced.service",
                ])
                .timeout(Duration::from_secs(60)),
        )
        .await;
    if let Ok(out) = out {
        if !out.stdout.trim().is_empty() {
            let _ = crate::fsutil::atomic_write(to, out.stdout.as_bytes());
        }
    }
}

async fn upload_evidence(
    plan: &crate::plan::Plan,
    run_id: &str,
    archived: &Path,
    workdir: &Path,
    store: &StoreOverrides,
    options: UploadOptions,
) -> std::result::Result<String, String> {
    let cfg = store.config(&plan.upload);
    let store = Store::open(&cfg).map_err(|e| format!("{e:#}"))?;
    let key = RunKey {
        appliance: format!("{}/{FAILED_PREFIX}", plan.appliance.name),
        machine_id: crate::upload::machine_id(),
        run_id: run_id.to_string(),
    };
    let journal_dir = workdir.join(ARCHIVE_DIR).join(".upload");
    crate::fsutil::create_dir_all(&journal_dir).map_err(|e| format!("{e:#}"))?;
    match tokio::time::timeout(
        UPLOAD_PATIENCE,
        crate::upload::upload_run(&store, &key, archived, &journal_dir, options),
    )
    .await
    {
        Ok(Ok(stored)) => Ok(format!(
            "{} under {} in {}",
            stored.describe(),
            key.parts().join("/"),
            store.url
        )),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err(format!(
            "the store {} did not take it within {} s",
            store.url,
            UPLOAD_PATIENCE.as_secs()
        )),
    }
}
