//! A run seen from the store while it works and when it stops: a small status object next
//! to where the run will land (`<prefix>/<appliance>/<machine id>/<run id>.status.json`),
//! kept current at each step and at most every 30 s, and, when the run fails or refuses, a
//! failure bundle (`<prefix>/<appliance>/failed/<machine id>/<run id>/`: the journal, the
//! failure, the status, the inventory, the daemon's log) so a failed first boot in a lab is
//! diagnosable without a console. Writing them never blocks or fails the run: a store that
//! does not answer is tried again at the next update.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::journal::{Failure, Journal};
use crate::notify::{LastStatus, STATUS_FILE};
use crate::upload::{RunKey, Store, StoreConfig, UploadOptions};

/// The status object's schema version.
pub(crate) const LIVE_STATUS_SCHEMA_VERSION: u32 = 1;

/// How often the status object is written at most between two steps.
pub(crate) const LIVE_INTERVAL: Duration = Duration::from_secs(30);

/// Where the failure bundle is put together in the work directory.
pub(crate) const FAILURE_BUNDLE_DIR: &str = "failure-bundle";

/// The failure bundle uploader's journal in the work directory.
pub(crate) const FAILURE_UPLOAD_DIR: &str = "failure-upload";

/// How long a failing run tries to store its failure bundle before it exits anyway.
const BUNDLE_PATIENCE: Duration = Duration::from_secs(60);

/// What the status object says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStatus {
    pub schema_version: u32,
    pub appliance: String,
    pub machine_id: String,
    pub run_id: String,
    /// `running`, `failed`, `refused` or `done`.
    pub state: String,
    /// The step in flight (or the last one).
    pub step: Option<String>,
    /// The daemon's latest status line.
    pub text: Option<String>,
    pub points_done: usize,
    pub points_total: usize,
    /// tps of the latest finished point.
    pub last_tps: Option<f64>,
    /// How many boots the run has seen (the planned reboot makes two).
    pub boots: usize,
    pub failure: Option<Failure>,
    pub started_at: String,
    pub updated_at: String,
    /// The key of the stored run once it is stored (manifest verified).
    pub stored_as: Option<String>,
    /// What identifies the machine to whoever launched it (after the inventory step).
    pub identity: Option<Identity>,
    /// Seconds left in the sweep by the run's own estimate (`pgapplianced status`'s), when
    /// it has one; points whose time is not known yet are in `left_unknown_points`.
    #[serde(default)]
    pub left_s: Option<f64>,
    #[serde(default)]
    pub left_unknown_points: usize,
}

/// How a launcher recognises its target: the EC2 instance id, or the system UUID and serial
/// number a BMC reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub hostname: String,
    pub instance_id: Option<String>,
    pub system_uuid: Option<String>,
    pub system_serial: Option<String>,
}

impl LiveStatus {
    /// The status of a run from its work directory (pure but for reading the files).
    pub(crate) fn read(journal: &Journal, key: &RunKey, workdir: &Path, run_dir: &Path) -> Self {
        let last: Option<LastStatus> = std::fs::read_to_string(workdir.join(STATUS_FILE))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let last_tps = journal
            .points
            .values()
            .max_by(|a, b| a.finished_at.cmp(&b.finished_at))
            .and_then(|rec| std::fs::read_to_string(run_dir.join(&rec.result)).ok())
            .and_then(|t| serde_json::from_str::<crate::results::PointResult>(&t).ok())
            .and_then(|p| p.tps());
        let state = match (&journal.failure, &journal.finished_at) {
            (_, Some(_)) => "done",
            (Some(f), None) if f.refused => "refused",
            (Some(_), None) => "failed",
            (None, None) => "running",
        };
        let step = journal
            .pending
            .as_ref()
            .map(|p| p.step)
            .or(journal.failure.as_ref().map(|f| f.step))
            .map(|s| s.as_str().to_string());
        let estimate = super::status::estimate(journal, run_dir);
        LiveStatus {
            left_s: estimate.as_ref().map(|e| e.total_s()),
            left_unknown_points: estimate.as_ref().map_or(0, |e| e.unknown_points),
            schema_version: LIVE_STATUS_SCHEMA_VERSION,
            appliance: key.appliance.clone(),
            machine_id: key.machine_id.clone(),
            run_id: key.run_id.clone(),
            state: state.to_string(),
            step,
            text: last.map(|l| l.text),
            points_done: journal.points.len(),
            points_total: journal.points_total,
            last_tps,
            boots: journal.boots.len(),
            failure: journal.failure.clone(),
            started_at: journal.started_at.clone(),
            updated_at: crate::clock::now(),
            stored_as: journal.finished_at.as_ref().map(|_| key.parts().join("/")),
            identity: std::fs::read_to_string(run_dir.join("inventory.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<crate::inventory::Inventory>(&t).ok())
                .map(|inv| Identity {
                    instance_id: inv.cloud.as_ref().and_then(|c| c.instance_id.clone()),
                    system_uuid: inv.dmi.get("product_uuid").cloned(),
                    system_serial: inv.dmi.get("product_serial").cloned(),
                    hostname: inv.hostname,
                }),
        }
    }
}

/// The status object's key beside the run's: `<appliance>/<machine id>/<run id>.status.json`.
pub(crate) fn status_key(key: &RunKey) -> [String; 3] {
    [
        key.appliance.clone(),
        key.machine_id.clone(),
        format!("{}.status.json", key.run_id),
    ]
}

/// Keeps the status object current from a background task while the run works.
pub(crate) struct Live {
    wake: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
    publisher: Arc<Publisher>,
}

struct Publisher {
    store: Store,
    key: RunKey,
    workdir: PathBuf,
    journal: PathBuf,
    run_dir: PathBuf,
}

impl Publisher {
    async fn publish(&self) -> Result<()> {
        let journal = crate::journal::JournalFile::load(&self.journal)?;
        let status = LiveStatus::read(&journal, &self.key, &self.workdir, &self.run_dir);
        let parts = status_key(&self.key);
        let path = self
            .store
            .path(&parts.iter().map(String::as_str).collect::<Vec<_>>());
        let body = serde_json::to_vec_pretty(&status)?;
        self.store
            .objects
            .put(&path, PutPayload::from(body))
            .await
            .with_context(|| format!("writing {path} in {}", self.store.url))?;
        // `live-published:<step>`: the status object in the store now says that step.
        crate::faults::point(&format!(
            "live-published:{}",
            status.step.as_deref().unwrap_or("none")
        ));
        Ok(())
    }
}

impl Live {
    /// Starts publishing the run's status to `cfg`'s store; None (with a warning) when the
    /// store cannot be opened (the run goes on; the upload at the end will say why).
    pub(crate) fn start(
        cfg: &StoreConfig,
        key: RunKey,
        workdir: &Path,
        run_dir: &Path,
    ) -> Option<Live> {
        let store = match Store::open(cfg) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "no live status in the store");
                return None;
            }
        };
        let publisher = Arc::new(Publisher {
            store,
            key,
            workdir: workdir.to_path_buf(),
            journal: crate::journal::journal_path(workdir),
            run_dir: run_dir.to_path_buf(),
        });
        let wake = Arc::new(tokio::sync::Notify::new());
        let task = {
            let publisher = publisher.clone();
            let wake = wake.clone();
            tokio::spawn(async move {
                loop {
                    if let Err(e) = publisher.publish().await {
                        tracing::debug!(error = %format!("{e:#}"), "live status not written; trying again later");
                    }
                    let _ = tokio::time::timeout(LIVE_INTERVAL, wake.notified()).await;
                }
            })
        };
        Some(Live {
            wake,
            task,
            publisher,
        })
    }

    /// Publishes soon (a step begins or ends).
    pub(crate) fn poke(&self) {
        self.wake.notify_one();
    }

    /// Stops the background task without a last word (the store is not answering).
    pub(crate) fn abandon(self) {
        self.task.abort();
    }

    /// Stops the background task and publishes the final state (bounded in time).
    pub(crate) async fn finish(self) {
        self.task.abort();
        match tokio::time::timeout(BUNDLE_PATIENCE, self.publisher.publish()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                "{}",
                crate::upload::aws_error::one_line(
                    "the final live status was not written",
                    &format!("{e:#}"),
                    "store",
                    self.publisher.store.keys.as_deref(),
                    "the plan's [upload] credentials"
                )
            ),
            Err(_) => tracing::warn!("the store did not take the final live status in time"),
        }
    }

    /// Stores the failure bundle of a run that stopped (bounded in time); says where.
    pub(crate) async fn failure_bundle(
        &self,
        journal: &Journal,
    ) -> std::result::Result<String, String> {
        let p = &self.publisher;
        let bundle = p.workdir.join(FAILURE_BUNDLE_DIR);
        let made = make_bundle(&bundle, journal, &p.workdir, &p.run_dir).await;
        if let Err(e) = made {
            return Err(format!("{e:#}"));
        }
        let key = RunKey {
            appliance: format!("{}/{}", p.key.appliance, super::reset::FAILED_PREFIX),
            machine_id: p.key.machine_id.clone(),
            run_id: p.key.run_id.clone(),
        };
        // The uploader's journal, outside what it uploads.
        let journal_dir = p.workdir.join(FAILURE_UPLOAD_DIR);
        if let Err(e) = crate::fsutil::create_dir_all(&journal_dir) {
            return Err(format!("{e:#}"));
        }
        let up = tokio::time::timeout(
            BUNDLE_PATIENCE,
            crate::upload::upload_run(
                &p.store,
                &key,
                &bundle,
                &journal_dir,
                UploadOptions::default(),
            ),
        )
        .await;
        match up {
            Ok(Ok(stored)) => Ok(format!(
                "{} under {} in {}",
                stored.describe(),
                key.parts().join("/"),
                p.store.url
            )),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!(
                "the store {} did not take it within {} s",
                p.store.url,
                BUNDLE_PATIENCE.as_secs()
            )),
        }
    }
}

/// The failure bundle's files: the journal, the failure, the last status, the inventory,
/// the plan, the raw stderr of the step that failed, and the daemon's log where journald
/// has it.
async fn make_bundle(dir: &Path, journal: &Journal, workdir: &Path, run_dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    crate::fsutil::create_dir_all(&dir.join("raw"))?;
    crate::fsutil::write_json(&dir.join("journal.json"), journal)?;
    if let Some(f) = &journal.failure {
        crate::fsutil::write_json(&dir.join("failure.json"), f)?;
    }
    for (from, name) in [
        (workdir.join(STATUS_FILE), STATUS_FILE),
        (run_dir.join("inventory.json"), "inventory.json"),
        (run_dir.join(super::run::PLAN_COPY), "plan.toml"),
    ] {
        if from.is_file() {
            std::fs::copy(&from, dir.join(name))
                .with_context(|| format!("copying {}", from.display()))?;
        }
    }
    // The raw output of the commands the run made (stderr tails are in the failure text;
    // the whole files help), without the points' pgbench logs.
    for e in std::fs::read_dir(run_dir.join("raw"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path();
        if p.is_file() {
            let _ = std::fs::copy(&p, dir.join("raw").join(e.file_name()));
        }
    }
    super::reset::daemon_log(&dir.join("daemon.log")).await;
    Ok(())
}
