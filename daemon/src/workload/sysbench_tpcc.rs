//! sysbench-tpcc: Percona-Lab's TPC-C Lua scripts run by sysbench's PostgreSQL driver at
//! each thread count, parsed from sysbench's summary and its per-second CSV lines. Its
//! datasets are prepared by the dataset step (`steps/tpcc.rs`).

use std::path::Path;

use anyhow::{Context as _, Result};

use super::{
    point_limits, Figures, Kind, Measured, Percentiles, PointEnv, Record, Records, Shown, Tail,
};
use crate::plan::Builtin;
use crate::platform::Profile;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::Cluster;
use crate::runner::CommandSpec;
use crate::sweep::SweepPoint;
use crate::sysbench::scripts;
use crate::sysbench::tpcc::{self, Conn};
use crate::sysbench::SysbenchRun;

pub(crate) struct SysbenchTpcc;

/// sysbench-tpcc's figures on the pages: TPC-C tps by threads, sysbench's own p95, and
/// each machine's tps second by second.
pub(crate) const SHOWN: Shown = Shown {
    tps_word: "TPC-C tps",
    verdict_words: " in TPC-C tps",
    row_note: " (TPC-C; threads, not clients)",
    program: Some("TPC-C, sysbench-tpcc"),
    section: "TPC-C (sysbench-tpcc) scaling, latency and tps per second",
    tail: Tail::P95,
    series_compared: true,
};

/// The common figures of a sysbench-tpcc point: sysbench's summary (its mean, 95th
/// percentile and largest latency; no latency log), qps, ignored errors and reconnects.
pub(crate) fn figures(r: &Records<'_>) -> Figures {
    let s = r.sysbench;
    Figures {
        tps: s.map(|s| s.tps),
        transactions: s.map(|s| s.transactions),
        latency_avg_ms: s.map(|s| s.latency_avg_ms),
        latency_stddev_ms: None,
        latency: Percentiles {
            p95: s.map(|s| s.latency_p95_ms),
            max: s.map(|s| s.latency_max_ms),
            ..Percentiles::of_log(r.latency)
        },
        failed_transactions: None,
        ignored_errors: s.map(|s| s.ignored_errors),
        reconnects: s.map(|s| s.reconnects),
        qps: s.map(|s| s.qps),
        seconds: s.map(|s| s.total_time_s),
    }
}

/// The connection sysbench uses.
pub(crate) fn conn(c: &Cluster) -> Conn {
    Conn {
        socket_dir: c.socket_dir(),
        port: c.port,
        user: SUPERUSER.to_string(),
    }
}

/// sysbench's run parsed, and the point's error: the command's failure, else what the
/// parser found missing (an aborted run ends without its summary).
pub(crate) fn read_output(
    stdout: &str,
    stderr: &str,
    command_error: Option<String>,
) -> (Option<SysbenchRun>, Option<String>) {
    match crate::sysbench::parse_output(stdout) {
        Ok(run) => (Some(run), command_error),
        Err(e) => {
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            let mut msg = format!("sysbench output: {e}");
            if let Some(cmd) = command_error {
                msg = format!("{msg}; {cmd}");
            } else if !tail.is_empty() {
                msg = format!("{msg}; stderr: {}", tail.join(" | "));
            }
            (None, Some(msg))
        }
    }
}

impl Kind for SysbenchTpcc {
    fn load_unit(&self) -> &'static str {
        "threads"
    }

    fn record(&self) -> Record {
        Record::Sysbench
    }

    fn figures(&self, r: &Records<'_>) -> Figures {
        figures(r)
    }

    fn shown(&self) -> &'static Shown {
        &SHOWN
    }

    /// The script is TPC-C itself: no pgbench builtin names it.
    fn script_name(&self, _builtin: Builtin) -> String {
        String::new()
    }

    /// sysbench with its PostgreSQL driver (Debian's `sysbench`; on Rocky 8 EPEL 8's).
    fn packages(&self, profile: &Profile) -> Vec<String> {
        profile.sysbench_packages()
    }

    fn needs_scripts(&self) -> bool {
        true
    }

    /// The sysbench command of a point (a warm-up runs the same one for its own time), run
    /// from the scripts' directory so tpcc.lua finds its modules.
    fn command(&self, p: &SweepPoint, env: &PointEnv<'_>, raw: &Path) -> Result<CommandSpec> {
        let scripts_dir = env
            .scripts_dir
            .as_deref()
            .context("internal: the sysbench-tpcc scripts were not put in place")?;
        let args = tpcc::run_args(
            Path::new(&format!("./{}", scripts::ENTRY)),
            p,
            &conn(env.cluster),
        )
        .with_context(|| format!("point {} is not a timed sysbench-tpcc point", p.id))?;
        let spec = CommandSpec::new(tpcc::SYSBENCH)
            .args(args)
            .cwd(scripts_dir)
            .user(env.bench_user)
            .output_files(&raw.join("stdout.txt"), &raw.join("stderr.txt"));
        Ok(point_limits(spec, p))
    }

    fn read(
        &self,
        _p: &SweepPoint,
        _raw: &Path,
        _major: u32,
        stdout: &str,
        stderr: &str,
        command_error: Option<String>,
    ) -> Result<Measured> {
        let (sysbench, error) = read_output(stdout, stderr, command_error);
        let tps_series = sysbench
            .as_ref()
            .map(|r| r.tps_series())
            .unwrap_or_default();
        Ok(Measured {
            summary: None,
            sysbench,
            latency: None,
            tps_series,
            error,
        })
    }
}
