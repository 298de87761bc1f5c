//! The step engine: inventory → packages → storage → postgres → tuning → OS tuning (→
//! reboot, resume) → dataset → sweep → report → upload, each step checking whether its
//! effect is already in place before acting, with the journal recording what started and
//! what finished (see [`crate::journal`]).
//!
//! Local mode ([`run_local`]) runs the steps against a cluster under the work directory
//! managed with pg_ctl, with plain processes as the executor, and leaves out the steps that
//! change the host (packages, storage, OS tuning). The appliance ([`run_appliance`]) runs
//! every step through systemd over D-Bus: commands as transient units, PostgreSQL as the
//! platform's service.

mod dataset;
mod inventory;
mod os_tuning;
mod packages;
mod postgres;
mod report;
mod selinux;
mod storage;
pub mod sweep;
mod tuning;
pub mod upload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::inventory::Inventory;
use crate::journal::{JournalFile, StepName};
use crate::plan::Plan;
use crate::postgres::{Cluster, PgBin};
use crate::results::RunResults;
use crate::runner::Runner;

pub use dataset::conn_args as dataset_conn_args;

/// Options of `pgapplianced run --local`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan_path: PathBuf,
    pub workdir: PathBuf,
    /// PostgreSQL bin directory to use instead of searching by version.
    pub pg_bin: Option<PathBuf>,
    /// OS user owning the cluster; defaults to `postgres` when running as root.
    pub cluster_user: Option<String>,
    /// Leave the cluster running when the run ends.
    pub keep_running: bool,
    /// Store URL overriding the plan's `upload.store`.
    pub store: Option<String>,
    pub upload: crate::upload::UploadOptions,
}

/// Where a finished run left its results.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub results: PathBuf,
    pub summary_csv: PathBuf,
    pub report: PathBuf,
    pub points: usize,
    pub failed_points: Vec<String>,
    /// Where the run was uploaded, and how many objects the manifest lists.
    pub uploaded: Option<(String, usize)>,
    /// The run was already complete before this invocation.
    pub already_complete: bool,
}

/// Everything the steps share.
pub struct Run {
    pub plan: Plan,
    pub workdir: PathBuf,
    pub run_dir: PathBuf,
    pub runner: Runner,
    pub journal: JournalFile,
    options: RunOptions,
    inventory: Option<Inventory>,
    bin: Option<PgBin>,
    cluster: Option<Cluster>,
    applied_settings: BTreeMap<String, String>,
    /// The appliance's systemd connection (None in local mode).
    systemd: Option<crate::systemd::Systemd>,
}

fn new_run_id() -> String {
    let now = std::time::SystemTime::now();
    let stamp = humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(['-', ':'], "");
    let nanos = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tag = (nanos ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{stamp}-{tag:04x}")
}

pub fn journal_path(workdir: &Path) -> PathBuf {
    workdir.join("state.json")
}

impl Run {
    /// True on the appliance (systemd executor, the platform's PostgreSQL service).
    pub fn is_appliance(&self) -> bool {
        self.systemd.is_some()
    }

    pub fn systemd(&self) -> Result<&crate::systemd::Systemd> {
        self.systemd
            .as_ref()
            .context("internal: this step needs the appliance's systemd connection")
    }

    pub fn profile(&self) -> crate::platform::Profile {
        crate::platform::Profile::of(self.plan.appliance.platform)
    }

    /// The PostgreSQL major version the appliance installs and runs.
    pub fn pg_version(&self) -> u32 {
        self.plan
            .postgres
            .version
            .unwrap_or_else(|| self.profile().default_pg_version())
    }

    /// OS user pgbench runs as: postgres on the appliance, the daemon's user locally.
    pub fn bench_user(&self) -> Option<&'static str> {
        self.is_appliance().then_some("postgres")
    }

    pub fn cluster(&self) -> Result<&Cluster> {
        self.cluster
            .as_ref()
            .context("internal: the postgres step has not run")
    }

    pub fn inventory(&self) -> Result<&Inventory> {
        self.inventory
            .as_ref()
            .context("internal: the inventory step has not run")
    }

    /// The settings the tuning step applied (what a load restores).
    pub fn applied_settings(&self) -> &BTreeMap<String, String> {
        &self.applied_settings
    }

    pub fn bin(&self) -> Result<&PgBin> {
        self.bin
            .as_ref()
            .context("internal: the postgres step has not run")
    }

    pub fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.run_dir)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    fn outcome(&self, results: &RunResults, already_complete: bool) -> RunOutcome {
        RunOutcome {
            run_id: self.journal.state.run_id.clone(),
            run_dir: self.run_dir.clone(),
            results: self.run_dir.join("results.json"),
            summary_csv: self.run_dir.join("summary.csv"),
            report: self.run_dir.join("report.html"),
            points: results.points.len(),
            failed_points: results
                .failed_points()
                .iter()
                .map(|p| p.id.clone())
                .collect(),
            already_complete,
            uploaded: None,
        }
    }
}

/// Opens (or creates) the run of a work directory: plan, journal, run dir.
pub fn open_run(options: RunOptions) -> Result<Run> {
    let plan_text = std::fs::read_to_string(&options.plan_path)
        .with_context(|| format!("reading plan {}", options.plan_path.display()))?;
    let plan = Plan::load(&options.plan_path)?;
    let plan_sha = format!("{:x}", Sha256::digest(plan_text.as_bytes()));
    crate::fsutil::create_dir_all(&options.workdir)?;
    let workdir = options
        .workdir
        .canonicalize()
        .with_context(|| format!("resolving {}", options.workdir.display()))?;
    let journal = JournalFile::open_or_create(&journal_path(&workdir), &plan_sha, new_run_id())?;
    let run_dir = workdir.join("runs").join(&journal.state.run_id);
    crate::fsutil::create_dir_all(&run_dir.join("points"))?;
    crate::fsutil::create_dir_all(&run_dir.join("raw"))?;
    if let Some(p) = &journal.state.pending {
        tracing::warn!(
            step = p.step.as_str(),
            item = p.item.as_deref().unwrap_or("-"),
            since = %p.started_at,
            "resuming: the previous process stopped during this step"
        );
    }
    Ok(Run {
        plan,
        workdir,
        run_dir,
        runner: Runner::local(),
        journal,
        options,
        inventory: None,
        bin: None,
        cluster: None,
        applied_settings: BTreeMap::new(),
        systemd: None,
    })
}

/// The steps that bring a cluster with the dataset into the plan's state (inventory,
/// postgres, tuning, dataset): what a sweep, or a benchmark of the harness, starts from.
pub async fn prepare(run: &mut Run) -> Result<()> {
    for step in [
        StepName::Inventory,
        StepName::Packages,
        StepName::Storage,
        StepName::Postgres,
        StepName::Tuning,
        StepName::OsTuning,
        StepName::Dataset,
    ] {
        let host_step = matches!(
            step,
            StepName::Packages | StepName::Storage | StepName::OsTuning
        );
        if host_step && !run.is_appliance() {
            continue;
        }
        crate::notify::status(&format!("step {}", step.as_str()));
        match step {
            StepName::Inventory => inventory::run(run).await,
            StepName::Packages => packages::run(run).await,
            StepName::Storage => storage::run(run).await,
            StepName::Postgres if run.is_appliance() => postgres::run_service(run).await,
            StepName::Postgres => postgres::run(run).await,
            StepName::Tuning => tuning::run(run).await,
            StepName::OsTuning => os_tuning::run(run).await,
            _ => dataset::run(run).await,
        }
        .with_context(|| format!("step {} failed", step.as_str()))?;
    }
    Ok(())
}

/// Fails fast, before any step, when the upload at the end could not open its store (a
/// credentials file that is missing, readable by others, someone else's or without the
/// plan's profile), instead of after the sweep.
fn preflight_upload(run: &Run) -> Result<()> {
    crate::upload::StoreConfig::from_plan(&run.plan.upload, run.options.store.as_deref())
        .preflight()
        .context("the upload at the end of the run could not open its store; fix this first")
}

/// Runs (or resumes) the plan in local mode.
pub async fn run_local(options: RunOptions) -> Result<RunOutcome> {
    let workdir = options.workdir.clone();
    let mut run = match open_run(options) {
        Ok(run) => run,
        Err(e) if e.is::<crate::journal::DifferentPlan>() => {
            // The refusal must not orphan the server the earlier run left running.
            return Err(match postgres::stop_left_server(&workdir).await {
                Ok(Some(stopped)) => e.context(stopped),
                Ok(None) => e,
                Err(stop) => e.context(format!("{stop:#}")),
            });
        }
        Err(e) => return Err(e),
    };
    preflight_upload(&run)?;
    if run.journal.state.finished_at.is_some() {
        if let Ok(results) = report::load_results(&run) {
            crate::notify::status(&format!(
                "run {} was already complete",
                run.journal.state.run_id
            ));
            return Ok(run.outcome(&results, true));
        }
    }
    crate::notify::ready();
    let results = match report::finished_results(&run) {
        Some(results) => {
            // Measuring is over; only the upload is left. Leave the cluster as planned.
            if !run.options.keep_running {
                postgres::stop_if_running(&mut run).await?;
            }
            results
        }
        None => {
            let measured = measure(&mut run).await;
            if !run.options.keep_running {
                // A failed run stops the server it started too, so nothing is left behind.
                let stopped = match &run.cluster {
                    Some(cluster) => cluster.stop().await,
                    None => postgres::stop_left_server(&run.workdir).await.map(|_| ()),
                };
                if let Err(stop) = stopped {
                    match &measured {
                        Ok(_) => return Err(stop),
                        Err(_) => {
                            tracing::warn!(error = %format!("{stop:#}"), "stopping the server after the failure")
                        }
                    }
                }
            }
            measured?
        }
    };
    let outcome = upload_and_finish(&mut run, &results, None).await?;
    crate::notify::status(&format!(
        "done: {} points, {} failed; report {}",
        outcome.points,
        outcome.failed_points.len(),
        outcome.report.display()
    ));
    Ok(outcome)
}

/// The steps that produce the results: preparation, the sweep and the report.
async fn measure(run: &mut Run) -> Result<RunResults> {
    prepare(run).await?;
    crate::notify::status("step sweep");
    sweep::run(run).await.context("step sweep failed")?;
    report::run(run).await.context("step report failed")
}

/// The upload step, then the journal's end mark and (on the appliance) the done marker.
async fn upload_and_finish(
    run: &mut Run,
    results: &RunResults,
    done_marker: Option<&Path>,
) -> Result<RunOutcome> {
    crate::notify::status("step upload");
    let manifest = upload::run(run).await.context("step upload failed")?;
    run.journal.state.finished_at = Some(crate::journal::now());
    run.journal.save()?;
    if let Some(done) = done_marker {
        crate::fsutil::atomic_write(done, run.journal.state.run_id.as_bytes())
            .with_context(|| format!("writing {}", done.display()))?;
    }
    let mut outcome = run.outcome(results, false);
    outcome.uploaded = Some((
        run.options
            .store
            .clone()
            .unwrap_or_else(|| run.plan.upload.store.clone()),
        manifest.manifest.objects.len(),
    ));
    Ok(outcome)
}

/// Where the appliance keeps its journal and runs, and the marker of a finished run.
pub const APPLIANCE_WORKDIR: &str = "/var/lib/pgappliance";
pub const DONE_MARKER: &str = "done";

/// Runs (or resumes) the plan on the appliance, as the systemd service does at boot.
pub async fn run_appliance(options: RunOptions) -> Result<RunOutcome> {
    let systemd = crate::systemd::Systemd::connect().await?;
    let mut run = open_run(options)?;
    preflight_upload(&run)?;
    let done = run.workdir.join(DONE_MARKER);
    if done.exists() {
        if let Ok(results) = report::load_results(&run) {
            crate::notify::ready();
            crate::notify::status(&format!(
                "run {} was already complete",
                run.journal.state.run_id
            ));
            return Ok(run.outcome(&results, true));
        }
    }
    let executor =
        crate::systemd::SystemdExecutor::new(systemd.clone(), &run.workdir.join("capture"))?;
    let left = executor.stop_leftovers().await?;
    if left > 0 {
        tracing::warn!(
            units = left,
            "stopped commands an earlier daemon left running"
        );
    }
    run.runner = Runner::new(executor);
    run.systemd = Some(systemd.clone());
    crate::notify::ready();
    let results = match report::finished_results(&run) {
        Some(results) => results,
        None => {
            prepare(&mut run).await?;
            crate::notify::status("step sweep");
            sweep::run(&mut run).await.context("step sweep failed")?;
            report::run(&mut run).await.context("step report failed")?
        }
    };
    let outcome = upload_and_finish(&mut run, &results, Some(&done)).await?;
    crate::notify::status(&format!(
        "done: {} points, {} failed; results in {}",
        outcome.points,
        outcome.failed_points.len(),
        outcome.run_dir.display()
    ));
    if run.plan.finish.action == crate::plan::FinishAction::PowerOff {
        tracing::info!("results are safe; powering off as the plan says");
        systemd
            .manager()
            .start_unit("poweroff.target", "replace-irreversibly")
            .await
            .context("asking systemd to power off")?;
    }
    Ok(outcome)
}
