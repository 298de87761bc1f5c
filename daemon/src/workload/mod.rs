//! Workloads: what drives the load at a sweep point. Each kind is a module of its own
//! ([`pgbench`], [`sysbench_tpcc`]) behind one trait, [`Kind`]: the packages it needs, its
//! command line for a point, and the pure reading of what its program left into the point's
//! record and the figures every kind gives (tps, latency, the per-interval series, the
//! error). [`of`] is where a kind is registered: the one place the tag is matched. The
//! sweep step, the packages step and the results call through it and never ask the kind.
//!
//! How to add a workload: see docs/architecture.md ("Adding a workload").

pub mod pgbench;
pub mod sysbench_tpcc;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::pgbench::{LatencyStats, ProgressSample, Summary};
use crate::plan::WorkloadKind;
use crate::platform::Profile;
use crate::postgres::Cluster;
use crate::runner::CommandSpec;
use crate::sweep::{Limit, SweepPoint};
use crate::sysbench::SysbenchRun;

/// What a point's program left, read: the kind's own record, the latency and per-interval
/// series, and the point's error (None: it succeeded).
#[derive(Debug, Default)]
pub struct Measured {
    /// pgbench's summary.
    pub summary: Option<Summary>,
    /// sysbench's figures.
    pub sysbench: Option<SysbenchRun>,
    /// Latency percentiles from a transaction log.
    pub latency: Option<LatencyStats>,
    /// tps per reporting interval.
    pub tps_series: Vec<ProgressSample>,
    pub error: Option<String>,
}

/// Where a kind's figures are in a point's result: the record its program's output is read
/// into. Results, the report and the CSV read a point's tps and latency through it, so a
/// new kind whose program is pgbench (a custom script) or sysbench needs nothing there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// pgbench's summary, its latency log and progress lines.
    Pgbench,
    /// sysbench's summary and per-second lines.
    Sysbench,
}

/// What a point's command needs from the run.
pub struct PointEnv<'a> {
    pub cluster: &'a Cluster,
    /// The database of the plan's `[dataset]` (pgbench's tables).
    pub database: &'a str,
    /// The OS user benchmark clients run as (None: the daemon's).
    pub bench_user: Option<&'a str>,
    /// The directory of the workload's scripts, when it has any ([`Kind::needs_scripts`]).
    pub scripts_dir: Option<PathBuf>,
}

/// One workload kind.
pub trait Kind: Sync {
    /// What a point's load count is called in reports (`clients`, `threads`).
    fn load_unit(&self) -> &'static str;
    /// The record its figures are read into.
    fn record(&self) -> Record;
    /// Packages the kind needs on the platform besides PostgreSQL's.
    fn packages(&self, profile: &Profile) -> Vec<String>;
    /// Whether its command runs scripts the run must put in place first
    /// ([`PointEnv::scripts_dir`]).
    fn needs_scripts(&self) -> bool;
    /// The command of a point: output into `raw` (`stdout.txt`, `stderr.txt` and the
    /// kind's own files), limits for its connections.
    fn command(&self, p: &SweepPoint, env: &PointEnv<'_>, raw: &Path) -> Result<CommandSpec>;
    /// Reads what the command left (pure but for reading `raw`): `stdout` and `stderr` are
    /// its output, `command_error` why the command failed, if it did. `major` is the
    /// server's major version (log formats differ).
    fn read(
        &self,
        p: &SweepPoint,
        raw: &Path,
        major: u32,
        stdout: &str,
        stderr: &str,
        command_error: Option<String>,
    ) -> Result<Measured>;
}

/// The kind registered under a plan's `kind`.
pub fn of(kind: WorkloadKind) -> &'static dyn Kind {
    match kind {
        WorkloadKind::Pgbench => &pgbench::Pgbench,
        WorkloadKind::SysbenchTpcc => &sysbench_tpcc::SysbenchTpcc,
    }
}

fn nofile_for(clients: u32) -> u64 {
    (u64::from(clients) * 2 + 256).max(4096)
}

/// The limits every benchmark client of a point runs under: open files for its
/// connections, and a timeout well past a timed point's length.
pub fn point_limits(spec: CommandSpec, p: &SweepPoint) -> CommandSpec {
    let spec = spec.limit_nofile(nofile_for(p.clients));
    match p.limit {
        Limit::DurationS(s) => spec.timeout(Duration::from_secs(s + 600)),
        Limit::Transactions(_) => spec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Platform;

    #[test]
    fn each_kind_names_its_load_and_its_packages() {
        assert_eq!(of(WorkloadKind::Pgbench).load_unit(), "clients");
        assert_eq!(of(WorkloadKind::SysbenchTpcc).load_unit(), "threads");
        assert_eq!(of(WorkloadKind::Pgbench).record(), Record::Pgbench);
        assert_eq!(of(WorkloadKind::SysbenchTpcc).record(), Record::Sysbench);
        let debian = Profile::of(Platform::Debian12);
        assert!(of(WorkloadKind::Pgbench).packages(&debian).is_empty());
        assert_eq!(
            of(WorkloadKind::SysbenchTpcc).packages(&debian),
            vec!["sysbench".to_string()]
        );
        assert!(of(WorkloadKind::SysbenchTpcc).needs_scripts());
        assert!(!of(WorkloadKind::Pgbench).needs_scripts());
    }

    #[test]
    fn a_point_gets_a_file_limit_for_its_clients() {
        assert_eq!(nofile_for(1), 4096);
        assert_eq!(nofile_for(5000), 10_256);
    }
}
