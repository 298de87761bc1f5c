//! What `pgapplianced status` shows, read from a work directory without disturbing a run in
//! it: the journal, the latest status line and when it was written, whether the daemon
//! that wrote it is alive, why the run stopped, and an estimate of the time left.

use std::path::Path;

use anyhow::{bail, Result};

use super::lock::LOCK_FILE;
use super::run::{journal_path, PLAN_COPY};
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
    let daemon = std::fs::read_to_string(workdir.join(LOCK_FILE))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .filter(|pid| is_pgapplianced(*pid));
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
fn is_pgapplianced(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim() == "pgapplianced")
}

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
    fn only_a_live_pgapplianced_counts() {
        assert!(
            !is_pgapplianced(std::process::id()),
            "the test binary is not pgapplianced"
        );
        assert!(!is_pgapplianced(u32::MAX));
    }
}
