//! What a run produces: one JSON per sweep point, `results.json` for the run and
//! `summary.csv` (one row per point). Formats are documented in docs/results.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::csv::CsvWriter;
use crate::inventory::Inventory;
use crate::pgbench::{InitBreakdown, LatencyStats, ProgressSample, Summary};
use crate::plan::{Builtin, Checksums, Plan, Protocol, WorkloadKind};
use crate::postgres::sql::Setting;
use crate::postgres::stats::StatsDelta;
use crate::sampler::OsSamples;
use crate::sweep::{Limit, SweepPoint};
use crate::sysbench::SysbenchRun;
use crate::workload::{Figures, Record, Records};

pub(crate) mod client;
pub mod steady;

/// 4 added a point's `client` (its client's CPU and the `client-bound` flag); 3 a point's
/// `steady` window; 2 a point's `kind` and `sysbench` (docs/results.md); version 1 results
/// read as pgbench points, versions 1 and 2 without a steady window, 1 to 3 without the
/// client's CPU.
pub const RESULTS_SCHEMA_VERSION: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointStatus {
    Ok,
    /// The benchmark aborted, processed fewer transactions than asked, or could not run.
    Failed,
}

/// One measured point (`points/<id>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub schema_version: u32,
    pub id: String,
    pub workload: String,
    /// What drove the load. Absent in schema 1, whose points are all pgbench's.
    #[serde(default)]
    pub kind: WorkloadKind,
    pub builtin: Builtin,
    /// pgbench's clients; sysbench-tpcc's threads (each thread is one connection).
    pub clients: u32,
    pub threads: u32,
    pub limit: Limit,
    pub protocol: Protocol,
    pub repeat: u32,
    pub checksums: Option<Checksums>,
    pub status: PointStatus,
    pub error: Option<String>,
    /// Which attempt produced this result (more than 1 after an interrupted run).
    pub attempt: u32,
    pub started_at: String,
    pub finished_at: String,
    pub wall_s: f64,
    /// The pgbench (or sysbench) command line as run.
    pub command: String,
    /// Raw evidence of this attempt, relative to the run dir.
    pub raw_dir: String,
    /// pgbench's summary (pgbench points).
    pub summary: Option<Summary>,
    /// sysbench's figures and per-second series (sysbench-tpcc points; schema 2).
    #[serde(default)]
    pub sysbench: Option<SysbenchRun>,
    pub latency: Option<LatencyStats>,
    /// tps per progress interval (sysbench-tpcc: per second, from its CSV lines).
    pub tps_series: Vec<ProgressSample>,
    /// The series' steady window (schema 3; null for a short series, absent before).
    #[serde(default)]
    pub steady: Option<steady::SteadyWindow>,
    /// The benchmark client's own CPU over the point and whether it was the limit (schema
    /// 4; null where the executor could not measure it or the point failed, absent before).
    #[serde(default)]
    pub client: Option<client::ClientCpu>,
    /// Server statistics deltas over the point and the WAL it wrote.
    pub stats: Option<StatsDelta>,
    /// OS samples taken once a second while pgbench ran.
    pub os: Option<OsSamples>,
}

impl PointResult {
    /// Where the point's figures are: its kind's record (the kind is not asked here).
    pub(crate) fn record(&self) -> Record {
        crate::workload::of(self.kind).record()
    }

    /// The figures every kind gives, read by the point's kind from its records.
    pub fn figures(&self) -> Figures {
        crate::workload::of(self.kind).figures(&Records {
            summary: self.summary.as_ref(),
            sysbench: self.sysbench.as_ref(),
            latency: self.latency.as_ref(),
        })
    }

    /// The script the point ran as results name it (pgbench's builtin; empty for
    /// sysbench-tpcc).
    pub(crate) fn script_name(&self) -> String {
        crate::workload::of(self.kind).script_name(self.builtin)
    }

    /// The point's throughput: pgbench's tps, or sysbench-tpcc's transactions per second.
    pub fn tps(&self) -> Option<f64> {
        self.figures().tps
    }

    /// The point's flags: its steady window's (`collapse`, `unstable`) and `client-bound`.
    pub(crate) fn flags(&self) -> Vec<&'static str> {
        let mut flags: Vec<&'static str> = self
            .steady
            .iter()
            .flat_map(|w| w.flags.iter().map(|f| f.as_str()))
            .collect();
        if self.client_bound() {
            flags.push(client::CLIENT_BOUND);
        }
        flags
    }

    /// Whether the benchmark client's CPU was the limit of this point.
    pub(crate) fn client_bound(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.bound)
    }

    pub(crate) fn matches(&self, p: &SweepPoint) -> bool {
        self.id == p.id && self.clients == p.clients && self.threads == p.threads
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PostgresInfo {
    pub(crate) major: u32,
    pub(crate) version: String,
    pub(crate) bin_dir: String,
    /// `SELECT version()`.
    pub(crate) server_version: Option<String>,
    /// `SHOW data_checksums` when the run ended.
    pub(crate) data_checksums: bool,
    /// Settings applied with ALTER SYSTEM (the computed and planned ones).
    pub(crate) applied_settings: BTreeMap<String, String>,
    /// Effective non-default `pg_settings` after tuning.
    pub(crate) effective_settings: Vec<Setting>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DatasetInfo {
    pub(crate) database: String,
    pub(crate) scale: u32,
    pub(crate) fillfactor: u32,
    pub(crate) init_mode: String,
    pub(crate) command: String,
    pub(crate) wall_s: f64,
    pub(crate) init: Option<InitBreakdown>,
    /// `generated`, `snapshot:local` or `snapshot:store` (absent in runs recorded before
    /// snapshots: generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    /// The id of the snapshot the dataset was restored from or kept in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    pub(crate) schema_version: u32,
    pub run_id: String,
    pub appliance: String,
    pub hourly_price_usd: f64,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub(crate) plan: Plan,
    pub(crate) inventory: Inventory,
    pub(crate) postgres: PostgresInfo,
    pub(crate) dataset: Option<DatasetInfo>,
    /// The sysbench-tpcc datasets (`dataset-tpcc.json`): how each was made or restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tpcc_datasets: Vec<TpccDatasetInfo>,
    /// What of the planned tuning was read back in effect (docs/results.md); null in runs
    /// recorded before it was.
    #[serde(default)]
    pub(crate) tuning_in_effect: Option<crate::in_effect::TuningInEffect>,
    /// Seconds each step took (its last successful attempt).
    pub(crate) step_timings_s: BTreeMap<String, f64>,
    pub points_total: usize,
    pub points: Vec<PointResult>,
}

/// One sysbench-tpcc dataset as the run found it: prepared (`source = "generated"`, with
/// the prepare's command and time) or restored from a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TpccDatasetInfo {
    pub(crate) database: String,
    pub(crate) tables: u32,
    pub(crate) scale: u32,
    pub(crate) use_fk: bool,
    /// `generated`, `snapshot:local` or `snapshot:store`.
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) prepare_threads: Option<u32>,
    /// The prepare command as run.
    #[serde(default)]
    pub(crate) command: Option<String>,
    /// Seconds of `tpcc.lua prepare` alone (it includes the script's fixed 30 s wait for
    /// every thread's tables).
    #[serde(default)]
    pub(crate) prepare_s: Option<f64>,
    /// Seconds from the load settings to the final CHECKPOINT (or of the restore).
    pub(crate) wall_s: f64,
    /// The database's size when prepared or restored.
    pub(crate) bytes: u64,
}

impl RunResults {
    pub(crate) fn failed_points(&self) -> Vec<&PointResult> {
        self.points
            .iter()
            .filter(|p| p.status == PointStatus::Failed)
            .collect()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

fn count(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// `summary.csv`: one row per point, the figures people chart (RFC 4180, [`CsvWriter`]).
pub fn summary_csv(r: &RunResults) -> String {
    let mut w = CsvWriter::with_header(&[
        "run_id",
        "appliance",
        "workload",
        "builtin",
        "checksums",
        "clients",
        "threads",
        "repeat",
        "status",
        "tps",
        "latency_avg_ms",
        "latency_stddev_ms",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "p99_9_ms",
        "max_ms",
        "transactions",
        "failed_transactions",
        "tps_per_dollar_hour",
        "kind",
        "qps",
        "ignored_errors",
        "reconnects",
    ]);
    for p in &r.points {
        let f = p.figures();
        let l = &f.latency;
        let tps_per_dollar_hour = match (f.tps, r.hourly_price_usd) {
            (Some(t), price) if price > 0.0 => format!("{}", t / price),
            _ => String::new(),
        };
        w.record(&[
            r.run_id.clone(),
            r.appliance.clone(),
            p.workload.clone(),
            p.script_name(),
            Checksums::label(p.checksums).to_string(),
            p.clients.to_string(),
            p.threads.to_string(),
            p.repeat.to_string(),
            match p.status {
                PointStatus::Ok => "ok",
                PointStatus::Failed => "failed",
            }
            .to_string(),
            opt(f.tps),
            opt(f.latency_avg_ms),
            opt(f.latency_stddev_ms),
            opt(l.p50),
            opt(l.p90),
            opt(l.p95),
            opt(l.p99),
            opt(l.p99_9),
            opt(l.max),
            count(f.transactions),
            count(f.failed_transactions),
            tps_per_dollar_hour,
            p.kind.as_str().to_string(),
            opt(f.qps),
            count(f.ignored_errors),
            count(f.reconnects),
        ]);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point as schema 1 wrote it: no `kind`, no `sysbench`.
    const V1_POINT: &str = r#"{"schema_version": 1, "id": "p001-rw-c00004-r1", "workload": "rw",
        "builtin": "tpcb-like", "clients": 4, "threads": 2, "limit": {"duration_s": 2},
        "protocol": "simple", "repeat": 1, "checksums": null, "status": "ok", "error": null,
        "attempt": 1, "started_at": "t", "finished_at": "t", "wall_s": 2.1, "command": "pgbench",
        "raw_dir": "raw/points/p001-rw-c00004-r1/attempt-1",
        "summary": {"output_format": "15+", "client_version": "15.8", "client_version_full": "15.8",
            "server_version": null, "transaction_type": null, "scaling_factor": 2, "query_mode": null,
            "clients": 4, "threads": 2, "max_tries": 1, "transactions_per_client": null,
            "duration_s": 2.0, "transactions_processed": 1000, "transactions_expected": null,
            "failed_transactions": 0, "latency_avg_ms": 8.0, "latency_stddev_ms": null,
            "initial_connection_ms": 3.0, "tps": 500.5, "tps_including_connections": null,
            "statement_latencies": []},
        "latency": null, "tps_series": [], "stats": null, "os": null}"#;

    #[test]
    fn a_schema_1_point_reads_as_pgbench_and_answers_its_figures() {
        let p: PointResult = serde_json::from_str(V1_POINT).expect("schema 1 point");
        assert_eq!(p.kind, WorkloadKind::Pgbench);
        assert_eq!(p.sysbench, None);
        assert_eq!(p.steady, None, "no steady window before schema 3");
        assert_eq!(p.client, None, "no client CPU before schema 4");
        assert!(p.flags().is_empty());
        assert_eq!(p.tps(), Some(500.5));
        assert_eq!(p.figures().latency_avg_ms, Some(8.0));
        assert_eq!(p.figures().transactions, Some(1000));
        assert_eq!(p.figures().latency.p95, None, "no latency log");
        // The kind decides where the figures come from: a TPC-C point without sysbench's
        // figures (a failed one) has none, whatever else it carries.
        let tpcc = PointResult {
            kind: WorkloadKind::SysbenchTpcc,
            ..p
        };
        assert_eq!((tpcc.tps(), tpcc.figures().transactions), (None, None));
    }

    #[test]
    fn a_schema_3_point_reads_with_its_steady_flags_and_no_client_cpu() {
        let mut v: serde_json::Value = serde_json::from_str(V1_POINT).expect("json");
        v["schema_version"] = 3.into();
        v["kind"] = "pgbench".into();
        v["sysbench"] = serde_json::Value::Null;
        v["steady"] = serde_json::json!({"ramp_intervals": 1, "intervals": 9, "from_s": 1.0,
            "to_s": 10.0, "median_tps": 500.0, "mean_tps": 498.0, "cv": 0.2,
            "flags": ["unstable"]});
        let p: PointResult = serde_json::from_value(v).expect("schema 3 point");
        assert_eq!(p.client, None);
        assert_eq!(p.flags(), ["unstable"]);
        // Written again it is a schema 4 point with the client null.
        let mut p = p;
        p.client = client::client_cpu(
            crate::runner::CpuUse {
                cpu_s: 1.9,
                main_thread_wait_s: Some(0.05),
            },
            2.0,
            1,
            2,
        );
        assert_eq!(p.flags(), ["unstable", "client-bound"]);
        let back: PointResult =
            serde_json::from_str(&serde_json::to_string(&p).expect("serialises")).expect("reads");
        assert_eq!(back, p);
    }
}
