//! The state journal: which steps and sweep points are finished, which one was in flight,
//! and each step's own typed state.
//!
//! Written atomically before a step starts (`pending`) and after it ends, so a `kill -9`, a
//! crash, a power cut or the planned reboot resumes exactly where the run stopped and no
//! finished point is run twice. The journal is the only place that says "done". The engine
//! ([`crate::engine`]) keeps the step records; a step keeps only its own [`StepState`] field.
//!
//! Schema 2 replaced schema 1's string map `facts` with [`StepState`]; a schema-1 journal is
//! migrated when it is opened ([`migrate_v1`]), and one whose facts cannot be read is refused
//! naming the fact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil;

pub const JOURNAL_SCHEMA_VERSION: u32 = 2;

/// A work directory's run was started from another plan: it cannot be resumed with this
/// one (the caller may clean up what the earlier run left before refusing).
#[derive(Debug, thiserror::Error)]
#[error(
    "run {run_id} in {} was started from a different plan (sha256 {was} ≠ {now}): `pgapplianced reset` puts that run aside (its evidence kept) so this plan can start, or use another work directory",
    journal.display()
)]
pub struct DifferentPlan {
    pub(crate) run_id: String,
    pub(crate) journal: PathBuf,
    pub(crate) was: String,
    pub(crate) now: String,
}

/// `StepName` from the one list of steps ([`crate::step_list`]).
macro_rules! define_step_name {
    ($($variant:ident($module:ident) in $phase:ident, changes_machine: $machine:literal;)*) => {
        /// The steps of a run, in the order they run ([`crate::engine::ORDER`]).
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(rename_all = "snake_case")]
        pub enum StepName {
            $($variant,)*
        }

        impl StepName {
            /// Every step, in the order they run.
            pub(crate) const ALL: &'static [StepName] = &[$(StepName::$variant,)*];

            /// The step's name in the journal, the status and the logs (its module's).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(StepName::$variant => stringify!($module),)*
                }
            }

            /// Whether the step changes the machine (packages, the data volume, the OS
            /// tuning): only a host that may change it runs it.
            pub(crate) fn changes_machine(self) -> bool {
                match self {
                    $(StepName::$variant => $machine,)*
                }
            }
        }
    };
}

crate::step_list::step_list!(define_step_name);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub(crate) started_at: String,
    pub finished_at: Option<String>,
    /// Seconds the last successful attempt took.
    pub duration_s: Option<f64>,
    /// How many times the step was started (more than one after an interruption).
    pub attempts: u32,
}

/// Work that was started and not yet recorded as finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub step: StepName,
    /// The sweep point in flight, or the sub-operation (e.g. `initdb`).
    pub item: Option<String>,
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    /// Path of the point's JSON, relative to the run dir.
    pub(crate) result: String,
    pub(crate) finished_at: String,
    pub(crate) attempts: u32,
}

/// What each step keeps across restarts, one typed field per step that keeps anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepState {
    #[serde(default)]
    pub postgres: PostgresState,
    #[serde(default)]
    pub storage: StorageState,
    #[serde(default)]
    pub os_tuning: OsTuningState,
    #[serde(default)]
    pub(crate) in_effect: InEffectState,
    #[serde(default)]
    pub dataset: DatasetState,
    #[serde(default)]
    pub upload: UploadState,
    #[serde(default)]
    pub(crate) sweep: SweepState,
}

/// What the sweep remembers across restarts and reboots: the rounds already prepared by
/// `[sweep] between_rounds`, and the reboot asked for one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SweepState {
    /// The last round whose between-rounds action is done (0: none).
    #[serde(default)]
    pub(crate) prepared_round: u32,
    /// The round a reboot was asked for, and the boot it was asked from.
    #[serde(default)]
    pub(crate) reboot_for_round: Option<u32>,
    #[serde(default)]
    pub(crate) reboot_from_boot: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresState {
    /// The loopback port of local mode's cluster, chosen once per work directory.
    pub port: Option<u16>,
    /// When initdb finished; a data directory without it is an unfinished initdb.
    pub initdb_done_at: Option<String>,
    /// How long initdb took, reported among the step timings.
    pub initdb_s: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageState {
    /// Devices a data-volume build claimed and has not finished (cleared when it has).
    pub claimed: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsTuningState {
    /// The tuned profile activated (and whether tuned verified it).
    pub tuned_profile: Option<String>,
    pub tuned_verified: Option<bool>,
    /// Boot id of the boot that asked for the kernel-argument reboot.
    pub reboot_from_boot: Option<String>,
    /// /proc/cmdline once the kernel arguments were in effect.
    pub kernel_cmdline: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InEffectState {
    /// Boot id of the boot in which the planned tuning was last read back in effect.
    pub(crate) observed_in_boot: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetState {
    /// The dataset spec that was initialised (database, scale, fillfactor, init mode).
    pub spec: Option<String>,
    /// Present (the loader's degree) while the parallel loader's load settings are in force.
    pub load_degree: Option<u32>,
    /// The sysbench-tpcc datasets prepared (their [`crate::steps::tpcc::dataset_spec`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tpcc: Vec<String>,
    /// The sysbench-tpcc database being prepared (its load settings in force).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tpcc_preparing: Option<String>,
    /// Where the dataset came from: `generated`, `snapshot:local` or `snapshot:store`.
    #[serde(default)]
    pub(crate) source: Option<String>,
    /// The id of the dataset's local snapshot, once it is complete.
    #[serde(default)]
    pub(crate) snapshot: Option<String>,
    /// A restore of this snapshot was started and has not finished (redone at start).
    #[serde(default)]
    pub(crate) restoring: Option<String>,
    /// The workload whose points ran on the data since it was generated or restored, and
    /// whether the last of them was a warm-up.
    #[serde(default)]
    pub(crate) changed_by: Option<String>,
    #[serde(default)]
    pub(crate) changed_by_warmup: bool,
    /// The store the snapshot was uploaded to and read back from.
    #[serde(default)]
    pub(crate) snapshot_stored: Option<String>,
    /// An upload of the snapshot in progress (resumed at start).
    #[serde(default)]
    pub(crate) snapshot_upload: Option<crate::snapshot::store::UploadProgress>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadState {
    /// The store the run was last verified in.
    pub stored_in: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub schema_version: u32,
    pub run_id: String,
    /// sha256 of the plan text the run started with; a different plan cannot resume it.
    pub(crate) plan_sha256: String,
    pub started_at: String,
    pub steps: BTreeMap<StepName, StepRecord>,
    pub pending: Option<Pending>,
    pub points: BTreeMap<String, PointRecord>,
    /// Attempts of points not yet finished.
    #[serde(default)]
    pub(crate) point_attempts: BTreeMap<String, u32>,
    pub points_total: usize,
    /// Each step's own state.
    #[serde(default)]
    pub state: StepState,
    /// Why the run stopped last, until the step that failed finishes.
    #[serde(default)]
    pub failure: Option<Failure>,
    /// When the journal was last written (liveness).
    #[serde(default)]
    pub updated_at: Option<String>,
    /// The boot ids of the boots the run has seen, in order.
    #[serde(default)]
    pub(crate) boots: Vec<String>,
    pub finished_at: Option<String>,
}

/// A step that failed or refused, as the operator needs to see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub step: StepName,
    /// The error with its causes.
    pub error: String,
    /// The step refused (a person must change the plan or the machine); the appliance
    /// exits 3 and is not restarted.
    pub refused: bool,
    pub at: String,
}

/// Reads a journal of any schema this daemon knows: schema 2 as it is, schema 1 migrated
/// (its `facts` become [`StepState`]); anything else is refused naming the version.
pub fn parse(text: &str, path: &Path) -> Result<Journal> {
    read_any(text, path).map(|(journal, _)| journal)
}

/// [`parse`], also saying which schema the text had. The identifiers that become path
/// components (the run id, point ids, snapshot ids) and the point results' paths are
/// checked: a journal saying `run_id = "../../victim"` is refused, not followed.
fn read_any(text: &str, path: &Path) -> Result<(Journal, u64)> {
    let (journal, version) = read_unchecked(text, path)?;
    check_names(&journal).map_err(|e| {
        anyhow::anyhow!(
            "journal {}: {e} (`pgapplianced reset` puts it aside)",
            path.display()
        )
    })?;
    Ok((journal, version))
}

/// The journal's identifiers that become paths, each a plain name ([`fsutil::check_path_component`]).
fn check_names(j: &Journal) -> std::result::Result<(), String> {
    fsutil::check_path_component("run_id", &j.run_id)?;
    for (id, rec) in &j.points {
        fsutil::check_path_component("point id", id)?;
        if rec.result != format!("points/{id}.json") {
            return Err(format!(
                "point {id}'s result {:?} is not points/{id}.json",
                rec.result
            ));
        }
    }
    for id in j.point_attempts.keys() {
        fsutil::check_path_component("point id", id)?;
    }
    let d = &j.state.dataset;
    for (what, id) in [
        ("dataset snapshot id", &d.snapshot),
        ("dataset snapshot being restored", &d.restoring),
    ] {
        if let Some(id) = id {
            fsutil::check_path_component(what, id)?;
        }
    }
    Ok(())
}

fn read_unchecked(text: &str, path: &Path) -> Result<(Journal, u64)> {
    let value: serde_json::Value = serde_json::from_str(text).with_context(|| {
        format!(
            "journal {} is not valid JSON (`pgapplianced reset` puts it aside so a new run can start)",
            path.display()
        )
    })?;
    let version = value.get("schema_version").and_then(|v| v.as_u64());
    match version {
        Some(1) => migrate_v1(value)
            .map(|j| (j, 1))
            .with_context(|| format!("migrating schema-1 journal {}", path.display())),
        Some(v) if v == u64::from(JOURNAL_SCHEMA_VERSION) => serde_json::from_value(value)
            .map(|j| (j, v))
            .with_context(|| {
                format!(
                    "journal {} is not valid (`pgapplianced reset` puts it aside so a new run can start)",
                    path.display()
                )
            }),
        Some(v) if v > u64::from(JOURNAL_SCHEMA_VERSION) => bail!(
            "journal {} has schema version {v}, newer than this daemon's {JOURNAL_SCHEMA_VERSION}: run it with the daemon that wrote it, or `pgapplianced reset` to put it aside",
            path.display()
        ),
        Some(v) => bail!(
            "journal {} has schema version {v}, which this daemon does not know (it reads 1 and {JOURNAL_SCHEMA_VERSION}); `pgapplianced reset` puts it aside so a new run can start",
            path.display()
        ),
        None => bail!(
            "journal {} has no schema_version: not a pgappliance journal (`pgapplianced reset` puts it aside so a new run can start)",
            path.display()
        ),
    }
}

/// Schema 1 → 2: the string facts become typed step state. A fact this migration does not
/// know, or a value that does not read as its type, is refused naming it (nothing is
/// dropped silently).
pub(crate) fn migrate_v1(mut value: serde_json::Value) -> Result<Journal> {
    let obj = value
        .as_object_mut()
        .context("a schema-1 journal is a JSON object")?;
    let facts: BTreeMap<String, String> = match obj.remove("facts") {
        None | Some(serde_json::Value::Null) => BTreeMap::new(),
        Some(f) => serde_json::from_value(f).context("schema 1's facts are a map of strings")?,
    };
    let mut state = StepState::default();
    for (key, v) in &facts {
        let bad = |what: &str| format!("schema-1 fact {key} = {v:?} is not {what}");
        match key.as_str() {
            "port" => state.postgres.port = Some(v.parse().with_context(|| bad("a port"))?),
            "initdb_done" => state.postgres.initdb_done_at = Some(v.clone()),
            "initdb_s" => {
                state.postgres.initdb_s = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .with_context(|| bad("a number of seconds"))?,
                )
            }
            "storage_claimed" => {
                state.storage.claimed = Some(v.split(',').map(str::to_string).collect())
            }
            "tuned_profile" => state.os_tuning.tuned_profile = Some(v.clone()),
            "tuned_verified" => {
                state.os_tuning.tuned_verified = Some(v.parse().with_context(|| bad("true or false"))?)
            }
            "kernel_args_reboot_from_boot" => state.os_tuning.reboot_from_boot = Some(v.clone()),
            "kernel_cmdline" => state.os_tuning.kernel_cmdline = Some(v.clone()),
            "dataset" => state.dataset.spec = Some(v.clone()),
            "load_settings" => {
                state.dataset.load_degree = Some(v.parse().with_context(|| bad("a degree"))?)
            }
            "uploaded_to" => state.upload.stored_in = Some(v.clone()),
            other => bail!(
                "schema-1 fact {other:?} is not one this daemon knows how to migrate; `pgapplianced reset` puts the journal aside so a new run can start"
            ),
        }
    }
    obj.insert(
        "schema_version".into(),
        serde_json::Value::from(JOURNAL_SCHEMA_VERSION),
    );
    obj.insert("state".into(), serde_json::to_value(&state)?);
    serde_json::from_value(value).context("the rest of the schema-1 journal does not read")
}

/// The journal of a work directory.
pub(crate) fn journal_path(workdir: &Path) -> PathBuf {
    workdir.join("state.json")
}

/// The journal file and its in-memory copy; every change is persisted before returning.
pub struct JournalFile {
    path: PathBuf,
    pub state: Journal,
}

impl JournalFile {
    /// Opens the journal at `path`, or starts one for a new run.
    pub fn open_or_create(path: &Path, plan_sha256: &str, new_run_id: String) -> Result<Self> {
        if path.exists() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading journal {}", path.display()))?;
            let (state, version) = read_any(&text, path)?;
            let migrated = version != u64::from(JOURNAL_SCHEMA_VERSION);
            if state.plan_sha256 != plan_sha256 {
                return Err(DifferentPlan {
                    run_id: state.run_id,
                    journal: path.to_path_buf(),
                    was: state.plan_sha256.chars().take(12).collect(),
                    now: plan_sha256.chars().take(12).collect(),
                }
                .into());
            }
            let mut j = JournalFile {
                path: path.to_path_buf(),
                state,
            };
            if migrated {
                j.save()?;
                tracing::info!(journal = %path.display(), "journal migrated from schema 1 to {JOURNAL_SCHEMA_VERSION}");
            }
            return Ok(j);
        }
        let mut j = JournalFile {
            path: path.to_path_buf(),
            state: Journal {
                schema_version: JOURNAL_SCHEMA_VERSION,
                run_id: new_run_id,
                plan_sha256: plan_sha256.to_string(),
                started_at: crate::clock::now(),
                steps: BTreeMap::new(),
                pending: None,
                points: BTreeMap::new(),
                point_attempts: BTreeMap::new(),
                points_total: 0,
                state: StepState::default(),
                failure: None,
                updated_at: None,
                boots: Vec::new(),
                finished_at: None,
            },
        };
        j.save()?;
        Ok(j)
    }

    pub(crate) fn load(path: &Path) -> Result<Journal> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading journal {}", path.display()))?;
        parse(&text, path)
    }

    pub(crate) fn save(&mut self) -> Result<()> {
        self.state.updated_at = Some(crate::clock::now());
        fsutil::write_json(&self.path, &self.state)
            .with_context(|| format!("saving journal {}", self.path.display()))
    }

    pub(crate) fn is_done(&self, step: StepName) -> bool {
        self.state
            .steps
            .get(&step)
            .is_some_and(|r| r.finished_at.is_some())
    }

    /// Records that a step (or an item inside it) is starting. Returns what was pending
    /// before, i.e. work an earlier process left unfinished.
    pub(crate) fn begin(&mut self, step: StepName, item: Option<&str>) -> Result<Option<Pending>> {
        let previous = self.state.pending.take();
        let rec = self.state.steps.entry(step).or_insert(StepRecord {
            started_at: crate::clock::now(),
            finished_at: None,
            duration_s: None,
            attempts: 0,
        });
        if item.is_none() {
            rec.attempts += 1;
            rec.started_at = crate::clock::now();
            rec.finished_at = None;
            // A new attempt: the step's earlier failure is history.
            if self.state.failure.as_ref().is_some_and(|f| f.step == step) {
                self.state.failure = None;
            }
        }
        self.state.pending = Some(Pending {
            step,
            item: item.map(str::to_string),
            started_at: crate::clock::now(),
        });
        self.save()?;
        crate::faults::point(&match item {
            Some(item) => format!("begin:{}:{item}", step.as_str()),
            None => format!("begin:{}", step.as_str()),
        });
        Ok(previous)
    }

    pub(crate) fn finish(&mut self, step: StepName, duration_s: f64) -> Result<()> {
        if let Some(rec) = self.state.steps.get_mut(&step) {
            rec.finished_at = Some(crate::clock::now());
            rec.duration_s = Some(duration_s);
        }
        self.state.pending = None;
        if self.state.failure.as_ref().is_some_and(|f| f.step == step) {
            self.state.failure = None;
        }
        self.save()
    }

    /// Records why the run stopped in `step`.
    pub(crate) fn record_failure(
        &mut self,
        step: StepName,
        error: &anyhow::Error,
        refused: bool,
    ) -> Result<()> {
        self.state.failure = Some(Failure {
            step,
            error: format!("{error:#}"),
            refused,
            at: crate::clock::now(),
        });
        self.save()
    }

    /// Counts an attempt at a point and marks it in flight.
    pub(crate) fn begin_point(&mut self, id: &str) -> Result<u32> {
        // A recorded point run again (a warm-up before its interrupted point) keeps counting.
        let before = self.state.points.get(id).map_or(0, |r| r.attempts);
        let attempts = self
            .state
            .point_attempts
            .entry(id.to_string())
            .or_insert(before);
        *attempts += 1;
        let n = *attempts;
        self.state.pending = Some(Pending {
            step: StepName::Sweep,
            item: Some(id.to_string()),
            started_at: crate::clock::now(),
        });
        self.save()?;
        crate::faults::point(&format!("begin-point:{id}"));
        // Any point's begin (`begin-point@N` is the N-th point this process begins): a test
        // that cannot know the ids, such as the guest's power cut, names it so.
        crate::faults::point("begin-point");
        Ok(n)
    }

    pub(crate) fn finish_point(&mut self, id: &str, result: &str) -> Result<()> {
        let attempts = self.state.point_attempts.remove(id).unwrap_or(1);
        self.state.points.insert(
            id.to_string(),
            PointRecord {
                result: result.to_string(),
                finished_at: crate::clock::now(),
                attempts,
            },
        );
        self.state.pending = Some(Pending {
            step: StepName::Sweep,
            item: None,
            started_at: crate::clock::now(),
        });
        self.save()?;
        crate::faults::point("point-recorded");
        Ok(())
    }

    /// Records the boot this process runs in, when it is a new one for the run.
    pub(crate) fn note_boot(&mut self, boot_id: &str) -> Result<()> {
        if self.state.boots.last().map(String::as_str) == Some(boot_id) {
            return Ok(());
        }
        self.state.boots.push(boot_id.to_string());
        self.save()
    }

    /// Changes a step's state and persists it.
    pub(crate) fn update(&mut self, change: impl FnOnce(&mut StepState)) -> Result<()> {
        change(&mut self.state.state);
        self.save()
    }

    /// The step in flight when an earlier process stopped, with its item.
    pub(crate) fn pending_in(&self, step: StepName) -> Option<&Pending> {
        self.state.pending.as_ref().filter(|p| p.step == step)
    }

    /// Records a step whose effect was found in place (first time only).
    pub(crate) fn record_in_place(&mut self, step: StepName) -> Result<()> {
        let was_pending = self.pending_in(step).is_some();
        if self.is_done(step) && !was_pending {
            return Ok(());
        }
        if !self.is_done(step) {
            self.begin(step, None)?;
            return self.finish(step, 0.0);
        }
        self.state.pending = None;
        self.save()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_named_in_the_journal_as_its_module_and_changes_the_machine_as_listed() {
        for step in StepName::ALL {
            let json = serde_json::to_string(step).expect("serialize");
            assert_eq!(json, format!("\"{}\"", step.as_str()));
            let back: StepName = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, *step);
        }
        let machine: Vec<&str> = StepName::ALL
            .iter()
            .filter(|s| s.changes_machine())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(machine, ["packages", "storage", "os_tuning"]);
    }

    #[test]
    fn survives_reopen_and_refuses_another_plan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        let mut j = JournalFile::open_or_create(&p, "aaaa", "run-1".into()).expect("create");
        j.begin(StepName::Inventory, None).expect("begin");
        j.finish(StepName::Inventory, 0.5).expect("finish");
        j.begin_point("p001").expect("point");
        drop(j);
        let j = JournalFile::open_or_create(&p, "aaaa", "run-2".into()).expect("reopen");
        assert_eq!(j.state.run_id, "run-1");
        assert!(j.is_done(StepName::Inventory));
        assert_eq!(
            j.state.pending.as_ref().and_then(|p| p.item.as_deref()),
            Some("p001")
        );
        let err = JournalFile::open_or_create(&p, "bbbb", "run-3".into())
            .err()
            .expect("different plan refused");
        assert!(err.to_string().contains("different plan"), "{err}");
    }

    #[test]
    fn identifiers_that_would_make_paths_outside_the_work_directory_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        let mut j = JournalFile::open_or_create(&p, "aaaa", "run-1".into()).expect("create");
        j.begin_point("p001").expect("point");
        j.finish_point("p001", "points/p001.json").expect("finish");
        let good = serde_json::to_value(&j.state).expect("json");
        assert!(parse(&good.to_string(), &p).is_ok());
        type Damage = fn(&mut serde_json::Value);
        let cases: [(&str, Damage); 5] = [
            ("run_id", |v| v["run_id"] = "../../victim".into()),
            ("point id", |v| {
                let rec = v["points"]["p001"].clone();
                v["points"]["../p002"] = rec;
            }),
            ("is not points/p001.json", |v| {
                v["points"]["p001"]["result"] = "../../etc/passwd".into()
            }),
            ("point id", |v| v["point_attempts"]["a/b"] = 1.into()),
            ("dataset snapshot id", |v| {
                v["state"]["dataset"]["snapshot"] = "..".into()
            }),
        ];
        for (words, damage) in cases {
            let mut v = good.clone();
            damage(&mut v);
            let err = parse(&v.to_string(), &p).expect_err(words).to_string();
            assert!(
                err.contains(words) && err.contains("state.json"),
                "{words}: {err}"
            );
        }
    }
}
