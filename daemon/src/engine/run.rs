//! A run from start to end: open the work directory's journal (or start a run), choose the
//! host, drive the steps of [`super::ORDER`], end the run the host's way.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use sha2::{Digest, Sha256};

use super::live::Live;
use super::lock::WorkdirLock;
use super::{drive, steps_of, Phase};
use crate::host::{ApplianceHost, Host, LocalHost};
use crate::journal::{journal_path, JournalFile};
use crate::plan::Plan;
use crate::postgres::{Cluster, PgBin};
use crate::results::RunResults;
use crate::steps::{Context, UploadTarget};
use crate::sweep::SweepPoint;
use crate::upload::{StoreOverrides, UploadOptions};

/// Which host the run works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMode {
    /// A scratch cluster under the work directory (`pgapplianced run --local`).
    Local {
        /// PostgreSQL bin directory to use instead of searching by version.
        pg_bin: Option<PathBuf>,
        /// OS user owning the cluster; defaults to `postgres` when running as root.
        cluster_user: Option<String>,
        /// Leave the cluster running when the run ends.
        keep_running: bool,
    },
    /// The booted appliance (what `pgapplianced.service` runs).
    Appliance,
}

/// Options of `pgapplianced run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan_path: PathBuf,
    pub workdir: PathBuf,
    pub mode: RunMode,
    /// What the command line changes of the plan's `[upload]`.
    pub store: StoreOverrides,
    pub upload: UploadOptions,
}

/// Where a finished run left its results.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub run_id: String,
    pub(crate) run_dir: PathBuf,
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

/// Opens (or starts) the run of a work directory on its host: plan, journal, run dir; and
/// the work directory's lock, to be held for as long as the run.
async fn open(options: RunOptions) -> Result<(Context, WorkdirLock)> {
    let plan_text = crate::fsutil::read_to_string_limited(
        &options.plan_path,
        crate::plan::MAX_PLAN_BYTES,
        "a plan",
    )
    .with_context(|| format!("reading plan {}", options.plan_path.display()))?;
    let plan = Plan::load(&options.plan_path)?;
    let plan_sha = format!("{:x}", Sha256::digest(plan_text.as_bytes()));
    // The appliance needs its bus before anything is written.
    let bus = match options.mode {
        RunMode::Appliance => Some(crate::systemd::Systemd::connect().await?),
        RunMode::Local { .. } => None,
    };
    crate::fsutil::create_dir_all(&options.workdir)?;
    let workdir = options
        .workdir
        .canonicalize()
        .with_context(|| format!("resolving {}", options.workdir.display()))?;
    let lock = WorkdirLock::acquire(&workdir)?;
    let host = match (&options.mode, bus) {
        (
            RunMode::Local {
                pg_bin,
                cluster_user,
                keep_running,
            },
            _,
        ) => Host::Local(LocalHost::new(
            &workdir,
            pg_bin.clone(),
            cluster_user.clone(),
            *keep_running,
        )),
        (RunMode::Appliance, Some(bus)) => {
            Host::Appliance(ApplianceHost::new(bus, &workdir, &plan).await?)
        }
        (RunMode::Appliance, None) => unreachable!("the bus is connected above"),
    };
    let journal =
        match JournalFile::open_or_create(&journal_path(&workdir), &plan_sha, new_run_id()) {
            Ok(j) => j,
            // Another plan's run, or a journal that cannot be read: the refusal must not
            // orphan the server the earlier run left running.
            Err(e) => {
                return Err(match host.after_refusal(&workdir).await {
                    Ok(Some(stopped)) => e.context(stopped),
                    Ok(None) => e,
                    Err(stop) => e.context(format!("{stop:#}")),
                });
            }
        };
    if let Some(p) = &journal.state.pending {
        tracing::warn!(
            step = p.step.as_str(),
            item = p.item.as_deref().unwrap_or("-"),
            since = %p.started_at,
            "resuming: the previous process stopped during this step"
        );
    }
    let run_dir = workdir.join("runs").join(&journal.state.run_id);
    crate::fsutil::create_dir_all(&run_dir.join("points"))?;
    crate::fsutil::create_dir_all(&run_dir.join("raw"))?;
    // The plan the run started with, as evidence and for `status`'s estimate.
    let kept = run_dir.join(PLAN_COPY);
    if !kept.exists() {
        crate::fsutil::atomic_write(&kept, plan_text.as_bytes())
            .with_context(|| format!("writing {}", kept.display()))?;
    }
    crate::notify::keep_status_in(&workdir);
    let cx = Context::new(
        plan,
        workdir,
        run_dir,
        journal,
        host,
        UploadTarget {
            overrides: options.store,
            options: options.upload,
        },
    );
    Ok((cx, lock))
}

/// The copy of the plan in the run directory.
pub(crate) const PLAN_COPY: &str = "plan.toml";

/// Fails fast, before any step, when the upload at the end could not open its store (a
/// credentials file that is missing, readable by others, someone else's or without the
/// plan's profile), instead of after the sweep.
fn preflight_upload(cx: &Context) -> Result<()> {
    cx.upload
        .overrides
        .config(&cx.plan.upload)
        .preflight()
        .context("the upload at the end of the run could not open its store; fix this first")
}

/// Runs (or resumes) the plan on the host `options.mode` names.
pub async fn run(options: RunOptions) -> Result<Outcome> {
    let (mut cx, _lock) = open(options).await?;
    if let Err(e) = preflight_upload(&cx) {
        let _ = cx
            .journal
            .record_failure(crate::journal::StepName::Upload, &e, false);
        return Err(e);
    }
    if cx.host.run_is_complete(&cx.workdir, &cx.journal.state) {
        if let Ok(results) = crate::steps::report::load_results(&cx.run_dir) {
            crate::notify::ready();
            crate::notify::status(&format!("run {} was already complete", cx.run_id()));
            return Ok(outcome(&cx, &results, true));
        }
    }
    crate::notify::ready();
    if let Ok(boot) = cx.host.boot_id() {
        cx.journal.note_boot(&boot)?;
    }
    if cx.journal.state.failure.is_some() {
        // This process tries again: the earlier failure is history (the failure bundle and
        // the archive keep it); a new one is recorded if it happens again.
        cx.journal.state.failure = None;
        cx.journal.save()?;
    }
    let live = Live::start(
        &cx.upload.overrides.config(&cx.plan.upload),
        cx.run_key(),
        &cx.workdir,
        &cx.run_dir,
    );
    let result = run_steps(&mut cx, live.as_ref()).await;
    match result {
        Ok(out) => {
            if let Some(live) = live {
                live.finish().await;
            }
            cx.host
                .finish(&cx.workdir, &cx.journal.state.run_id, &cx.plan)
                .await?;
            Ok(out)
        }
        Err(e) if e.chain().any(|c| c.is::<crate::upload::UploadPostponed>()) => {
            // The run is complete here; only the store did not take it in the time given.
            // No failure bundle: nothing failed that the store should learn about later
            // than the run itself, which `pgapplianced upload` stores.
            // Not `host.finish`: the run is not stored, so the appliance's done marker
            // must not be written (only a local run gives the upload a bound).
            if let Some(live) = live {
                live.abandon();
            }
            Err(e)
        }
        Err(e) => {
            if cx.journal.state.failure.is_none() {
                // Failed outside a step (stopping the server, writing the journal).
                let step = cx
                    .journal
                    .state
                    .pending
                    .as_ref()
                    .map_or(crate::journal::StepName::Upload, |p| p.step);
                let _ = cx.journal.record_failure(step, &e, super::is_refusal(&e));
            }
            if let Some(live) = live {
                let bundle = match live.failure_bundle(&cx.journal.state).await {
                    Ok(where_) => format!("failure bundle: {where_}"),
                    Err(why) => format!("the failure bundle was not stored: {why}"),
                };
                // The last word is why the run stopped (the bundle's upload reported too).
                if let Some(f) = &cx.journal.state.failure {
                    crate::notify::status(&format!(
                        "{} in step {}: {}; {bundle}",
                        if f.refused { "refused" } else { "failed" },
                        f.step.as_str(),
                        e.root_cause()
                    ));
                }
                live.finish().await;
            }
            Err(e)
        }
    }
}

/// The steps, from where the run is to its end.
async fn run_steps(cx: &mut Context, live: Option<&Live>) -> Result<Outcome> {
    if crate::steps::report::finished_results(cx).is_none() {
        let measured = measure(cx, live).await;
        // Whether it succeeded or not (a failed local run stops the server it started).
        if let Err(stop) = cx.host.after_measuring(cx.server_if_known()).await {
            match &measured {
                Ok(_) => return Err(stop),
                Err(_) => {
                    tracing::warn!(error = %format!("{stop:#}"), "stopping the server after the failure")
                }
            }
        }
        measured?;
    } else {
        // Measuring is over; only the upload is left. Leave the server as planned.
        cx.host.after_measuring(None).await?;
    }
    for step in steps_of(&[Phase::Deliver]) {
        drive(step, cx, live).await?;
    }
    if cx.results().is_err() {
        let results = crate::steps::report::load_results(&cx.run_dir)?;
        cx.set_results(results);
    }
    cx.journal.state.finished_at = Some(crate::clock::now());
    cx.journal.save()?;
    let mut out = outcome(cx, cx.results()?, false);
    out.uploaded = Some((cx.store_url(), cx.stored()?.manifest.objects.len()));
    crate::notify::status(&format!(
        "done: {} points, {} failed; results in {}",
        out.points,
        out.failed_points.len(),
        out.run_dir.display()
    ));
    Ok(out)
}

/// The steps that produce the results.
async fn measure(cx: &mut Context, live: Option<&Live>) -> Result<()> {
    for step in steps_of(&[Phase::Prepare, Phase::Measure]) {
        drive(step, cx, live).await?;
    }
    Ok(())
}

fn outcome(cx: &Context, results: &RunResults, already_complete: bool) -> Outcome {
    Outcome {
        run_id: cx.journal.state.run_id.clone(),
        run_dir: cx.run_dir.clone(),
        results: cx.run_dir.join("results.json"),
        summary_csv: cx.run_dir.join("summary.csv"),
        report: cx.run_dir.join("report.html"),
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

/// A cluster in the plan's configuration with its dataset, ready to measure: what the
/// benchmarks of the harness start from (`pgapplianced bench`). Local mode.
pub(crate) struct Prepared {
    cx: Context,
    _lock: WorkdirLock,
}

/// Runs the preparing steps of `plan` in local mode under `workdir` (resuming what an
/// earlier preparation there did).
pub(crate) async fn prepare(plan: &Path, workdir: &Path) -> Result<Prepared> {
    let (mut cx, lock) = open(RunOptions {
        plan_path: plan.to_path_buf(),
        workdir: workdir.to_path_buf(),
        mode: RunMode::Local {
            pg_bin: None,
            cluster_user: None,
            keep_running: true,
        },
        store: StoreOverrides::default(),
        upload: Default::default(),
    })
    .await?;
    for step in steps_of(&[Phase::Prepare]) {
        if let Err(e) = drive(step, &mut cx, None).await {
            // A preparation that fails leaves no server running behind the benchmark.
            if let Ok(c) = cx.server() {
                if let Err(stop) = c.stop().await {
                    return Err(e.context(format!("and stopping the server: {stop:#}")));
                }
            }
            return Err(e);
        }
    }
    Ok(Prepared { cx, _lock: lock })
}

impl Prepared {
    pub(crate) fn plan(&self) -> &Plan {
        &self.cx.plan
    }
    pub(crate) fn cluster(&self) -> Result<&Cluster> {
        self.cx.server()
    }
    pub(crate) fn bin(&self) -> Result<&PgBin> {
        Ok(&self.cx.server()?.bin)
    }
    pub(crate) fn inventory(&self) -> Result<&crate::inventory::Inventory> {
        self.cx.inventory()
    }
    pub(crate) fn runner(&self) -> &crate::runner::Runner {
        &self.cx.runner
    }
    /// The sweep's points of the plan on this machine.
    pub(crate) fn points(&self) -> Result<Vec<SweepPoint>> {
        crate::steps::sweep::points(&self.cx)
    }
    /// Connection arguments of pgbench and the other client programs.
    pub(crate) fn conn_args(&self) -> Result<Vec<String>> {
        crate::steps::dataset::conn_args(self.cluster()?)
    }
    /// The pgbench command line of a point, logs going to `raw`.
    pub(crate) fn point_command(
        &self,
        p: &SweepPoint,
        raw: &Path,
    ) -> Result<crate::runner::CommandSpec> {
        crate::steps::sweep::point_command(&self.cx, p, raw)
    }
    /// CHECKPOINT (when the point asks), statistics reset and snapshot.
    pub(crate) async fn before_point(
        &self,
        p: &SweepPoint,
    ) -> Result<crate::postgres::stats::Snapshot> {
        crate::steps::sweep::before_point(&self.cx, p).await
    }
    /// Measures one point into a fresh `raw` directory exactly as the sweep does.
    pub(crate) async fn measure_point(
        &self,
        p: &SweepPoint,
        raw: &Path,
        attempt: u32,
    ) -> Result<crate::results::PointResult> {
        crate::steps::sweep::measure_point(&self.cx, p, raw, attempt).await
    }
    /// The settings the tuning step applied.
    pub(crate) fn settings(&self) -> Result<&std::collections::BTreeMap<String, String>> {
        self.cx.settings()
    }
    /// Stops the cluster.
    pub(crate) async fn stop(&self) -> Result<()> {
        self.cluster()?.stop().await
    }
}
