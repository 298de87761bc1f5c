//! Workloads: what drives the load at a sweep point. Each kind is a module of its own
//! ([`pgbench`], [`sysbench_tpcc`]) behind one trait, [`Kind`]: the packages it needs, its
//! command line for a point, and the pure reading of what its program left into the point's
//! record and the figures every kind gives (tps, latency, the per-interval series, the
//! error), its common [`Figures`] read from that record, and how the pages name and draw
//! its figures ([`Shown`]). [`of`] is where a kind is registered: the one place the tag is
//! matched. The sweep step, the packages step, the results, the run's report and the
//! comparison call through it and never ask the kind.
//!
//! How to add a workload: see docs/architecture.md ("Adding a workload").

pub(crate) mod pgbench;
pub(crate) mod sysbench_tpcc;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::pgbench::{LatencyStats, ProgressSample, Summary};
use crate::plan::{Builtin, WorkloadKind};
use crate::platform::Profile;
use crate::postgres::Cluster;
use crate::runner::CommandSpec;
use crate::sweep::{Limit, SweepPoint};
use crate::sysbench::SysbenchRun;

/// What a point's program left, read: the kind's own record, the latency and per-interval
/// series, and the point's error (None: it succeeded).
#[derive(Debug, Default)]
pub(crate) struct Measured {
    /// pgbench's summary.
    pub(crate) summary: Option<Summary>,
    /// sysbench's figures.
    pub(crate) sysbench: Option<SysbenchRun>,
    /// Latency percentiles from a transaction log.
    pub(crate) latency: Option<LatencyStats>,
    /// tps per reporting interval.
    pub(crate) tps_series: Vec<ProgressSample>,
    pub(crate) error: Option<String>,
}

/// Where a kind's figures are in a point's result: the record its program's output is read
/// into. The run's report draws a section per record (pgbench's, sysbench's), so a new kind
/// whose program is pgbench (a custom script) or sysbench needs nothing there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// pgbench's summary, its latency log and progress lines.
    Pgbench,
    /// sysbench's summary and per-second lines.
    Sysbench,
}

/// Latency percentiles of a point, in milliseconds (None: the kind's program does not give
/// it, or the point has no latency log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p25: Option<f64>,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    /// The percentiles of a latency log (pgbench's transaction or aggregate log).
    pub(crate) fn of_log(l: Option<&LatencyStats>) -> Percentiles {
        Percentiles {
            p25: l.and_then(|l| l.p25_ms),
            p50: l.and_then(|l| l.p50_ms),
            p75: l.and_then(|l| l.p75_ms),
            p90: l.and_then(|l| l.p90_ms),
            p95: l.and_then(|l| l.p95_ms),
            p99: l.and_then(|l| l.p99_ms),
            p99_9: l.and_then(|l| l.p99_9_ms),
            max: l.and_then(|l| l.max_ms),
        }
    }
}

/// The records a point's result keeps of what its program left (results.json's `summary`,
/// `sysbench` and `latency`), as a kind's [`Kind::figures`] reads them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Records<'a> {
    pub(crate) summary: Option<&'a Summary>,
    pub(crate) sysbench: Option<&'a SysbenchRun>,
    pub(crate) latency: Option<&'a LatencyStats>,
}

/// The figures every kind gives of a point, whatever its program: the results' accessors,
/// `summary.csv`, the run's report, the comparison's digest and `collect` read these and
/// never the kind's own record. The per-interval series is the point's `tps_series`, which
/// every kind fills ([`Measured::tps_series`]). None: the program does not give it (or the
/// point failed before it did).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Transactions per second over the point.
    pub tps: Option<f64>,
    /// Transactions completed.
    pub(crate) transactions: Option<u64>,
    pub latency_avg_ms: Option<f64>,
    pub(crate) latency_stddev_ms: Option<f64>,
    pub latency: Percentiles,
    /// Transactions that failed (pgbench 15+: serialization and deadlock failures).
    pub(crate) failed_transactions: Option<u64>,
    /// Errors the program ignored and went on (sysbench), and reconnects.
    pub(crate) ignored_errors: Option<u64>,
    pub(crate) reconnects: Option<u64>,
    /// Queries per second, where the program counts queries apart from transactions.
    pub qps: Option<f64>,
    /// The seconds the program measured over, where it says.
    pub(crate) seconds: Option<f64>,
}

/// Which latency percentile a kind's pages chart as its tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// The 99th percentile of a latency log, one per repeat (an error bar).
    P99,
    /// The program's own 95th percentile (no per-repeat samples kept).
    P95,
}

/// How the pages name and draw a kind's figures: the words and what its program measures,
/// so the comparison's model, prose, page and charts never ask the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shown {
    /// What its throughput is called: `tps`, `TPC-C tps`.
    pub(crate) tps_word: &'static str,
    /// After a verdict's verb: `is faster{this} than a` (`""`, `" in TPC-C tps"`).
    pub(crate) verdict_words: &'static str,
    /// After the workload's name in a regression row (`""`, `" (TPC-C; threads, not
    /// clients)"`).
    pub(crate) row_note: &'static str,
    /// What a finding's heading names beside the workload: the program (`TPC-C,
    /// sysbench-tpcc`), or None for the point's script.
    pub(crate) program: Option<&'static str>,
    /// The comparison's section heading after the workload's name.
    pub(crate) section: &'static str,
    /// The latency percentile charted as its tail. [`Tail::P99`]: the kind has a latency
    /// log (the table of percentiles beside the charts); [`Tail::P95`]: the program's own
    /// summary (mean, p95, max, qps and errors in a table, and the per-interval series of
    /// each machine on one chart per load count).
    pub(crate) tail: Tail,
    /// Whether the comparison's digest keeps the per-interval series (else they stay on the
    /// run's own page).
    pub(crate) series_compared: bool,
}

/// What a point's command needs from the run.
pub(crate) struct PointEnv<'a> {
    pub(crate) cluster: &'a Cluster,
    /// The database of the plan's `[dataset]` (pgbench's tables).
    pub(crate) database: &'a str,
    /// The OS user benchmark clients run as (None: the daemon's).
    pub(crate) bench_user: Option<&'a str>,
    /// The directory of the workload's scripts, when it has any ([`Kind::needs_scripts`]).
    pub(crate) scripts_dir: Option<PathBuf>,
}

/// One workload kind.
pub(crate) trait Kind: Sync {
    /// What a point's load count is called in reports (`clients`, `threads`).
    fn load_unit(&self) -> &'static str;
    /// The record its figures are read into.
    fn record(&self) -> Record;
    /// The figures every kind gives, read from the point's records.
    fn figures(&self, r: &Records<'_>) -> Figures;
    /// How the pages name and draw its figures.
    fn shown(&self) -> &'static Shown;
    /// The script a point ran, as results and the comparison name it (pgbench's builtin;
    /// empty for a program whose script is the kind itself).
    fn script_name(&self, builtin: Builtin) -> String;
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
pub(crate) fn of(kind: WorkloadKind) -> &'static dyn Kind {
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
pub(crate) fn point_limits(spec: CommandSpec, p: &SweepPoint) -> CommandSpec {
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

    fn fixture(path: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(path);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn each_kind_fills_the_common_figures_from_its_own_record() {
        let summary = crate::pgbench::parse_summary(&fixture("pgbench/v16-failures.txt"))
            .expect("pgbench summary");
        let run = crate::sysbench::parse_output(&fixture("sysbench/run-1.0.20-t2.txt"))
            .expect("sysbench run");
        // Both records present: each kind reads its own and nothing of the other's.
        let records = Records {
            summary: Some(&summary),
            sysbench: Some(&run),
            latency: None,
        };
        let pg = of(WorkloadKind::Pgbench).figures(&records);
        assert_eq!(pg.tps, Some(1989.44321));
        assert_eq!(pg.transactions, Some(3988));
        assert_eq!(pg.failed_transactions, Some(12));
        assert_eq!(pg.latency_avg_ms, Some(4.021));
        assert_eq!(pg.latency, Percentiles::default(), "no latency log");
        assert_eq!(
            (pg.qps, pg.ignored_errors, pg.reconnects),
            (None, None, None)
        );
        let tpcc = of(WorkloadKind::SysbenchTpcc).figures(&records);
        assert_eq!(tpcc.tps, Some(185.30));
        assert_eq!(tpcc.transactions, Some(1865));
        assert_eq!(tpcc.latency_avg_ms, Some(10.76));
        assert_eq!(
            (tpcc.latency.p95, tpcc.latency.max),
            (Some(30.81), Some(101.14))
        );
        assert_eq!((tpcc.latency.p50, tpcc.latency.p99), (None, None));
        assert_eq!(tpcc.qps, Some(5216.91));
        assert_eq!((tpcc.ignored_errors, tpcc.reconnects), (Some(6), Some(0)));
        assert_eq!(tpcc.seconds, Some(10.0639));
        assert_eq!(tpcc.failed_transactions, None);
        // Without its record a kind has no figures, whatever else the point carries.
        let none = Records {
            summary: Some(&summary),
            ..Records::default()
        };
        assert_eq!(
            of(WorkloadKind::SysbenchTpcc).figures(&none),
            Figures::default()
        );
    }

    #[test]
    fn each_kind_says_how_the_pages_show_it() {
        let pg = of(WorkloadKind::Pgbench).shown();
        let tpcc = of(WorkloadKind::SysbenchTpcc).shown();
        assert_eq!(
            (pg.tps_word, pg.tail, pg.series_compared),
            ("tps", Tail::P99, false)
        );
        assert_eq!(
            (tpcc.tps_word, tpcc.tail, tpcc.series_compared),
            ("TPC-C tps", Tail::P95, true)
        );
        assert_eq!(
            of(WorkloadKind::Pgbench).script_name(Builtin::SelectOnly),
            "select-only"
        );
        assert_eq!(
            of(WorkloadKind::SysbenchTpcc).script_name(Builtin::SelectOnly),
            ""
        );
    }

    #[test]
    fn a_point_gets_a_file_limit_for_its_clients() {
        assert_eq!(nofile_for(1), 4096);
        assert_eq!(nofile_for(5000), 10_256);
    }
}
