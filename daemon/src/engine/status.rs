//! What `pgapplianced status` shows, read from a work directory without disturbing a run in
//! it: the journal, the latest status line and when it was written, whether the daemon
//! that wrote it is alive, why the run stopped, and an estimate of the time left.

use std::path::Path;

use anyhow::{bail, Result};

use super::run::PLAN_COPY;
use crate::journal::journal_path;
use crate::journal::{Journal, JournalFile};
use crate::notify::{LastStatus, STATUS_FILE};
use crate::results::PointResult;
use crate::sweep::{expand, Limit};

/// A work directory's run as the operator needs to see it.
#[derive(Debug, Clone)]
pub struct RunStatus {
    pub journal: Journal,
    /// The latest status line the daemon reported, and when.
    pub last: Option<LastStatus>,
    /// The pid of a pgapplianced working in the directory now (None: none is).
    pub daemon: Option<u32>,
    /// The appliance's done marker is there.
    pub done_marker: bool,
    pub estimate: Option<Estimate>,
}

/// Time left in the sweep, from the plan and what the finished points took.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub points_left: usize,
    /// Seconds for the points whose time is known (their `-T`, or the mean of the finished
    /// points of their workload for `-t` points).
    pub seconds: f64,
    /// Points left whose time cannot be estimated yet (`-t` points of a workload none of
    /// whose points has finished).
    pub unknown_points: usize,
    /// Seconds for the dataset's generation still to come (0 once the dataset step is
    /// done), at [`INIT_SECONDS_PER_SCALE`].
    pub dataset_s: f64,
    /// sysbench-tpcc prepares still to come (each at least [`TPCC_PREPARE_MIN_S`]).
    pub prepares_left: usize,
}

impl Estimate {
    /// Seconds left in all: the dataset, the prepares at their least, the points known.
    pub(crate) fn total_s(&self) -> f64 {
        self.seconds + self.dataset_s + self.prepares_left as f64 * TPCC_PREPARE_MIN_S
    }
}

/// `pgbench -i`'s pace on the machine docs/performance.md measured (scale 50 in 8.9 s, one
/// client-side stream, 2 vCPUs, 2026-11-30): the order of magnitude of a dataset's
/// generation. Client-side generation runs on one core, so more cores change it little.
pub const INIT_SECONDS_PER_SCALE: f64 = 8.9 / 50.0;

/// The least a sysbench-tpcc prepare takes: the script's fixed wait.
pub const TPCC_PREPARE_MIN_S: f64 = 30.0;

/// What is left before the sweep (pure): the pgbench dataset's generation unless its step
/// is done, and the sysbench-tpcc prepares not done yet.
pub(crate) fn before_sweep(plan: &crate::plan::Plan, journal: &Journal) -> (f64, usize) {
    let done = journal
        .steps
        .get(&crate::journal::StepName::Dataset)
        .is_some_and(|r| r.finished_at.is_some());
    if done {
        return (0.0, 0);
    }
    let dataset_s = if plan.has_pgbench() {
        f64::from(plan.dataset.scale) * INIT_SECONDS_PER_SCALE
    } else {
        0.0
    };
    let prepared = journal.state.dataset.tpcc.len();
    (
        dataset_s,
        plan.tpcc_datasets().len().saturating_sub(prepared),
    )
}

/// Per point, besides its `-T`: the checkpoint, statistics and parsing around it.
const POINT_OVERHEAD_S: f64 = 5.0;

pub fn read(workdir: &Path) -> Result<RunStatus> {
    let path = journal_path(workdir);
    if !path.exists() {
        bail!(
            "no run journal at {}: nothing has run in this work directory",
            path.display()
        );
    }
    let journal = JournalFile::load(&path)?;
    let last = std::fs::read_to_string(workdir.join(STATUS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<LastStatus>(&t).ok());
    // Whoever holds this work directory's lock, not whatever pid the lock file names.
    let daemon = super::lock::holder(workdir);
    let run_dir = workdir.join("runs").join(&journal.run_id);
    let estimate = estimate(&journal, &run_dir);
    Ok(RunStatus {
        done_marker: workdir.join(crate::platform::DONE_MARKER).exists(),
        journal,
        last,
        daemon,
        estimate,
    })
}

/// Time left in the sweep from the plan kept in the run directory, its inventory and the
/// points finished (None before the inventory).
pub(crate) fn estimate(journal: &Journal, run_dir: &Path) -> Option<Estimate> {
    let plan_text = std::fs::read_to_string(run_dir.join(PLAN_COPY)).ok()?;
    let plan = crate::plan::Plan::parse(&plan_text).ok()?;
    let cpus = std::fs::read_to_string(run_dir.join("inventory.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<crate::inventory::Inventory>(&t).ok())
        .map(|i| i.cpu.cpus)?;
    let points = expand(&plan, cpus);
    // What the finished transaction-limited points took, per workload.
    let mut taken: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    for rec in journal.points.values() {
        let Some(p) = std::fs::read_to_string(run_dir.join(&rec.result))
            .ok()
            .and_then(|t| serde_json::from_str::<PointResult>(&t).ok())
        else {
            continue;
        };
        let e = taken.entry(p.workload.clone()).or_default();
        e.0 += p.wall_s;
        e.1 += 1;
    }
    let (dataset_s, prepares_left) = before_sweep(&plan, journal);
    let mut est = Estimate {
        points_left: 0,
        seconds: 0.0,
        unknown_points: 0,
        dataset_s,
        prepares_left,
    };
    for p in points
        .iter()
        .filter(|p| !journal.points.contains_key(&p.id))
    {
        est.points_left += 1;
        match (p.limit, taken.get(&p.workload)) {
            (Limit::DurationS(s), _) => est.seconds += s as f64 + POINT_OVERHEAD_S,
            (Limit::Transactions(_), Some((sum, n))) if *n > 0 => est.seconds += sum / *n as f64,
            (Limit::Transactions(_), _) => est.unknown_points += 1,
        }
    }
    Some(est)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_counts_the_dataset_and_the_prepares_until_the_dataset_step_is_done() {
        let plan = crate::plan::Plan::parse(
            "[appliance]\nname = \"t\"\nplatform = \"debian12\"\n[postgres]\n[dataset]\nscale = 50\n[[workloads]]\nname = \"rw\"\nclients = [1]\nduration = \"10s\"\n",
        )
        .expect("plan");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = crate::journal::JournalFile::open_or_create(
            &journal_path(dir.path()),
            "aaaa",
            "run-1".into(),
        )
        .expect("journal")
        .state;
        let (dataset_s, prepares) = before_sweep(&plan, &journal);
        assert!((dataset_s - 8.9).abs() < 1e-9, "{dataset_s}");
        assert_eq!(prepares, 0);
        let est = Estimate {
            points_left: 1,
            seconds: 15.0,
            unknown_points: 0,
            dataset_s,
            prepares_left: 2,
        };
        assert!((est.total_s() - (15.0 + 8.9 + 60.0)).abs() < 1e-9);
        journal.steps.insert(
            crate::journal::StepName::Dataset,
            serde_json::from_value(serde_json::json!(
                {"started_at": "t", "finished_at": "t", "duration_s": 1.0, "attempts": 1}
            ))
            .expect("record"),
        );
        assert_eq!(before_sweep(&plan, &journal), (0.0, 0));
    }

    #[test]
    fn a_directory_without_a_run_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = read(dir.path()).expect_err("refused");
        assert!(err.to_string().contains("nothing has run"), "{err}");
    }

    #[test]
    fn the_daemon_is_the_holder_of_this_directorys_lock_not_the_pid_in_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = crate::journal::JournalFile::open_or_create(
            &journal_path(dir.path()),
            "aaaa",
            "run-1".into(),
        )
        .expect("journal");
        j.save().expect("save");
        // A live process's pid in the file, the lock free: nobody works here.
        let lock = dir.path().join(super::super::lock::LOCK_FILE);
        std::fs::write(&lock, std::process::id().to_string()).expect("write");
        assert_eq!(read(dir.path()).expect("status").daemon, None);
        // The lock held, the file saying someone else: the holder is named.
        let held = super::super::lock::WorkdirLock::acquire(dir.path()).expect("lock");
        std::fs::write(&lock, "1").expect("write");
        assert_eq!(
            read(dir.path()).expect("status").daemon,
            Some(std::process::id())
        );
        drop(held);
    }
}
