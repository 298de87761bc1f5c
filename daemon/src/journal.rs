//! The state journal: which steps and sweep points are finished, which one was in flight.
//!
//! Written atomically before a step starts (`pending`) and after it ends, so a `kill -9`, a
//! crash, a power cut or the planned reboot resumes exactly where the run stopped and no
//! finished point is run twice. The journal is the only place that says "done".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil;

pub const JOURNAL_SCHEMA_VERSION: u32 = 1;

/// A work directory's run was started from another plan: it cannot be resumed with this
/// one (the caller may clean up what the earlier run left before refusing).
#[derive(Debug, thiserror::Error)]
#[error(
    "run {run_id} in {} was started from a different plan (sha256 {was} ≠ {now}); use another work directory for a new plan",
    journal.display()
)]
pub struct DifferentPlan {
    pub run_id: String,
    pub journal: PathBuf,
    pub was: String,
    pub now: String,
}

/// The steps of a run, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepName {
    Inventory,
    Packages,
    Storage,
    Postgres,
    Tuning,
    OsTuning,
    Dataset,
    Sweep,
    Report,
    Upload,
}

impl StepName {
    pub const ALL: [StepName; 10] = [
        StepName::Inventory,
        StepName::Packages,
        StepName::Storage,
        StepName::Postgres,
        StepName::Tuning,
        StepName::OsTuning,
        StepName::Dataset,
        StepName::Sweep,
        StepName::Report,
        StepName::Upload,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepName::Inventory => "inventory",
            StepName::Packages => "packages",
            StepName::Storage => "storage",
            StepName::OsTuning => "os_tuning",
            StepName::Postgres => "postgres",
            StepName::Tuning => "tuning",
            StepName::Dataset => "dataset",
            StepName::Sweep => "sweep",
            StepName::Report => "report",
            StepName::Upload => "upload",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub started_at: String,
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
    pub result: String,
    pub finished_at: String,
    pub attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub schema_version: u32,
    pub run_id: String,
    /// sha256 of the plan text the run started with; a different plan cannot resume it.
    pub plan_sha256: String,
    pub started_at: String,
    pub steps: BTreeMap<StepName, StepRecord>,
    pub pending: Option<Pending>,
    pub points: BTreeMap<String, PointRecord>,
    /// Attempts of points not yet finished.
    #[serde(default)]
    pub point_attempts: BTreeMap<String, u32>,
    pub points_total: usize,
    /// Free-form facts steps keep across restarts (cluster port, dataset scale, …).
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    pub finished_at: Option<String>,
}

pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
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
            let state: Journal = serde_json::from_str(&text).with_context(|| {
                format!(
                    "journal {} is not valid (move it aside to start a new run)",
                    path.display()
                )
            })?;
            if state.schema_version > JOURNAL_SCHEMA_VERSION {
                bail!(
                    "journal {} has schema version {}, newer than this daemon's {}",
                    path.display(),
                    state.schema_version,
                    JOURNAL_SCHEMA_VERSION
                );
            }
            if state.plan_sha256 != plan_sha256 {
                return Err(DifferentPlan {
                    run_id: state.run_id,
                    journal: path.to_path_buf(),
                    was: state.plan_sha256.chars().take(12).collect(),
                    now: plan_sha256.chars().take(12).collect(),
                }
                .into());
            }
            return Ok(JournalFile {
                path: path.to_path_buf(),
                state,
            });
        }
        let j = JournalFile {
            path: path.to_path_buf(),
            state: Journal {
                schema_version: JOURNAL_SCHEMA_VERSION,
                run_id: new_run_id,
                plan_sha256: plan_sha256.to_string(),
                started_at: now(),
                steps: BTreeMap::new(),
                pending: None,
                points: BTreeMap::new(),
                point_attempts: BTreeMap::new(),
                points_total: 0,
                facts: BTreeMap::new(),
                finished_at: None,
            },
        };
        j.save()?;
        Ok(j)
    }

    pub fn load(path: &Path) -> Result<Journal> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading journal {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing journal {}", path.display()))
    }

    pub fn save(&self) -> Result<()> {
        fsutil::write_json(&self.path, &self.state)
            .with_context(|| format!("saving journal {}", self.path.display()))
    }

    pub fn is_done(&self, step: StepName) -> bool {
        self.state
            .steps
            .get(&step)
            .is_some_and(|r| r.finished_at.is_some())
    }

    /// Records that a step (or an item inside it) is starting. Returns what was pending
    /// before, i.e. work an earlier process left unfinished.
    pub fn begin(&mut self, step: StepName, item: Option<&str>) -> Result<Option<Pending>> {
        let previous = self.state.pending.take();
        let rec = self.state.steps.entry(step).or_insert(StepRecord {
            started_at: now(),
            finished_at: None,
            duration_s: None,
            attempts: 0,
        });
        if item.is_none() {
            rec.attempts += 1;
            rec.started_at = now();
            rec.finished_at = None;
        }
        self.state.pending = Some(Pending {
            step,
            item: item.map(str::to_string),
            started_at: now(),
        });
        self.save()?;
        Ok(previous)
    }

    pub fn finish(&mut self, step: StepName, duration_s: f64) -> Result<()> {
        if let Some(rec) = self.state.steps.get_mut(&step) {
            rec.finished_at = Some(now());
            rec.duration_s = Some(duration_s);
        }
        self.state.pending = None;
        self.save()
    }

    /// Counts an attempt at a point and marks it in flight.
    pub fn begin_point(&mut self, id: &str) -> Result<u32> {
        let attempts = self.state.point_attempts.entry(id.to_string()).or_insert(0);
        *attempts += 1;
        let n = *attempts;
        self.state.pending = Some(Pending {
            step: StepName::Sweep,
            item: Some(id.to_string()),
            started_at: now(),
        });
        self.save()?;
        Ok(n)
    }

    pub fn finish_point(&mut self, id: &str, result: &str) -> Result<()> {
        let attempts = self.state.point_attempts.remove(id).unwrap_or(1);
        self.state.points.insert(
            id.to_string(),
            PointRecord {
                result: result.to_string(),
                finished_at: now(),
                attempts,
            },
        );
        self.state.pending = Some(Pending {
            step: StepName::Sweep,
            item: None,
            started_at: now(),
        });
        self.save()
    }

    pub fn fact(&self, key: &str) -> Option<&str> {
        self.state.facts.get(key).map(String::as_str)
    }

    pub fn set_fact(&mut self, key: &str, value: impl Into<String>) -> Result<()> {
        self.state.facts.insert(key.to_string(), value.into());
        self.save()
    }

    pub fn remove_fact(&mut self, key: &str) -> Result<()> {
        if self.state.facts.remove(key).is_some() {
            self.save()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
