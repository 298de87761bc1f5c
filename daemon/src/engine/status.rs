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

/// Whether `pid` is a live pgapplianced (a recycled pid is some other program).
fn estimate(journal: &Journal, run_dir: &Path) -> Option<Estimate> {
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
    let mut est = Estimate {
        points_left: 0,
        seconds: 0.0,
        unknown_points: 0,
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
