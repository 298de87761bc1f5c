//! pgbench (the default kind): a built-in script at each client count, parsed from its
//! summary (13–19), its `--progress` lines and its transaction or aggregate log.

use std::path::Path;

use anyhow::Result;

use super::{
    point_limits, Figures, Kind, Measured, Percentiles, PointEnv, Record, Records, Shown, Tail,
};
use crate::pgbench::{latency_from_logs, log_files, parse_progress, parse_summary};
use crate::plan::{Builtin, LatencyLog};
use crate::platform::Profile;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::Cluster;
use crate::runner::CommandSpec;
use crate::sweep::{pgbench_args, SweepPoint};

/// Base name of pgbench's latency logs inside a point's raw directory.
pub(crate) const LOG_NAME: &str = "pgbench_log";

pub(crate) struct Pgbench;

/// pgbench's figures on the pages: its tps, and p99 from its latency log.
pub(crate) const SHOWN: Shown = Shown {
    tps_word: "tps",
    verdict_words: "",
    row_note: "",
    program: None,
    section: "scaling and latency",
    tail: Tail::P99,
    series_compared: false,
};

/// The common figures of a pgbench point: its summary's tps, transactions, mean latency
/// and failures, the percentiles of its latency log.
pub(crate) fn figures(r: &Records<'_>) -> Figures {
    let s = r.summary;
    Figures {
        tps: s.map(|s| s.tps),
        transactions: s.map(|s| s.transactions_processed),
        latency_avg_ms: s.map(|s| s.latency_avg_ms),
        latency_stddev_ms: s.and_then(|s| s.latency_stddev_ms),
        latency: Percentiles::of_log(r.latency),
        failed_transactions: s.and_then(|s| s.failed_transactions),
        ignored_errors: None,
        reconnects: None,
        qps: None,
        // Its `duration` line is the planned -T, not a measurement.
        seconds: None,
    }
}

/// Connection arguments of pgbench and the other client programs.
pub(crate) fn conn_args(c: &Cluster) -> Vec<String> {
    vec![
        "-h".into(),
        c.socket_dir().display().to_string(),
        "-p".into(),
        c.port.to_string(),
        "-U".into(),
        SUPERUSER.into(),
    ]
}

impl Kind for Pgbench {
    fn load_unit(&self) -> &'static str {
        "clients"
    }

    fn record(&self) -> Record {
        Record::Pgbench
    }

    fn figures(&self, r: &Records<'_>) -> Figures {
        figures(r)
    }

    fn shown(&self) -> &'static Shown {
        &SHOWN
    }

    fn script_name(&self, builtin: Builtin) -> String {
        builtin.pgbench_name().to_string()
    }

    fn packages(&self, _profile: &Profile) -> Vec<String> {
        // pgbench comes with PostgreSQL's own packages.
        Vec::new()
    }

    fn needs_scripts(&self) -> bool {
        false
    }

    fn command(&self, p: &SweepPoint, env: &PointEnv<'_>, raw: &Path) -> Result<CommandSpec> {
        let mut args = conn_args(env.cluster);
        args.extend(pgbench_args(p, &raw.join(LOG_NAME).display().to_string()));
        args.push(env.database.to_string());
        let spec = CommandSpec::new(env.cluster.bin.tool("pgbench"))
            .args(args)
            .cwd(raw)
            .user(env.bench_user)
            .output_files(&raw.join("stdout.txt"), &raw.join("stderr.txt"));
        Ok(point_limits(spec, p))
    }

    fn read(
        &self,
        p: &SweepPoint,
        raw: &Path,
        major: u32,
        stdout: &str,
        stderr: &str,
        command_error: Option<String>,
    ) -> Result<Measured> {
        let mut error = command_error;
        let summary = match parse_summary(stdout) {
            Ok(s) => Some(s),
            Err(e) => {
                error = Some(match error {
                    Some(cmd) => format!("{e}; {cmd}"),
                    None => e.to_string(),
                });
                None
            }
        };
        let latency = if p.warmup || summary.is_none() {
            None
        } else {
            let files = log_files(raw, LOG_NAME)?;
            match latency_from_logs(&files, p.latency_log == LatencyLog::Aggregate, major) {
                Ok(l) => Some(l),
                Err(e) => {
                    error.get_or_insert_with(|| format!("latency log: {e}"));
                    None
                }
            }
        };
        let tps_series = match parse_progress(stderr) {
            Ok(series) => series,
            Err(e) => {
                error.get_or_insert_with(|| e.to_string());
                Vec::new()
            }
        };
        Ok(Measured {
            summary,
            sysbench: None,
            latency,
            tps_series,
            error,
        })
    }
}
