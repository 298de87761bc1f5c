//! What the comparison keeps of a run ([`RunDigest`]) and the rows it compares: one per
//! machine × workload × checksum state × client count, the repeats side by side.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::{Checksums, WorkloadKind};
use crate::results::{PointStatus, RunResults};
use crate::workload::Shown;

use super::select::labels;

/// The most per-second samples a digest keeps of a sysbench-tpcc point's tps series;
/// longer series are averaged down to this many (a 1 h run's 3600 seconds to 6 s each).
pub(crate) const DIGEST_SERIES_SAMPLES: usize = 600;

/// The figures of one successful point that the comparison uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestPoint {
    pub(crate) workload: String,
    /// Absent in digests kept by collectors before sysbench-tpcc existed: pgbench.
    #[serde(default)]
    pub(crate) kind: WorkloadKind,
    /// pgbench's builtin script; empty for sysbench-tpcc.
    pub(crate) builtin: String,
    /// `"on"`, `"off"`, or `""` when the plan required no checksum state.
    pub(crate) checksums: String,
    /// pgbench's clients; sysbench-tpcc's threads.
    pub(crate) clients: u32,
    pub(crate) tps: f64,
    pub(crate) latency_avg_ms: Option<f64>,
    pub(crate) latency: Percentiles,
    /// sysbench-tpcc: queries per second, ignored errors and reconnects over the run.
    #[serde(default)]
    pub(crate) qps: Option<f64>,
    #[serde(default)]
    pub(crate) ignored_errors: Option<u64>,
    #[serde(default)]
    pub(crate) reconnects: Option<u64>,
    /// sysbench-tpcc: (seconds, tps), at most [`DIGEST_SERIES_SAMPLES`] of them; empty for
    /// pgbench, whose series stay on the run's own page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tps_series: Vec<(f64, f64)>,
    /// The benchmark client's CPU was the limit (results schema 4; false before).
    #[serde(default)]
    pub(crate) client_bound: bool,
}

/// A tps series averaged down to at most `max` samples: consecutive samples are merged in
/// equal runs, each keeping the time of its last sample and the mean tps.
pub(crate) fn downsample(series: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if series.len() <= max || max == 0 {
        return series.to_vec();
    }
    let per = series.len().div_ceil(max);
    series
        .chunks(per)
        .map(|c| {
            let t = c.last().map(|s| s.0).unwrap_or(0.0);
            (t, c.iter().map(|s| s.1).sum::<f64>() / c.len() as f64)
        })
        .collect()
}

/// Latency percentiles of a point, in milliseconds: the workloads' common figure.
pub(crate) use crate::workload::Percentiles;

/// What the comparison keeps of one run: who ran it, where it came from, and the figures
/// of its successful points. `collect` keeps it in its cache beside the run's results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDigest {
    /// Where the run was found (`appliance/machine/run`, with the store URL in front when
    /// several stores are collected).
    pub key: String,
    /// The machine: the appliance's name.
    pub appliance: String,
    pub run_id: String,
    pub started_at: String,
    pub hourly_price_usd: f64,
    pub cpu_model: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub postgres_version: String,
    pub kernel: String,
    pub points: Vec<DigestPoint>,
    pub failed_points: usize,
    /// What machine this is, for a history: the cloud instance type, else the DMI product
    /// name and serial number, else the appliance name (empty in digests kept before it).
    #[serde(default)]
    pub machine_identity: String,
    /// The sha256 of the plan the run ran (its canonical JSON), for a history: runs of one
    /// plan are comparable over time (empty in digests kept before it).
    #[serde(default)]
    pub plan_digest: String,
}

/// A run's machine identity ([`RunDigest::machine_identity`]).
pub(crate) fn machine_identity(r: &RunResults) -> String {
    if let Some(c) = &r.inventory.cloud {
        if !c.instance_type.is_empty() {
            return format!("{} {}", c.provider, c.instance_type);
        }
    }
    let dmi = |k: &str| {
        r.inventory
            .dmi
            .get(k)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    match (dmi("product_name"), dmi("product_serial")) {
        (Some(name), Some(serial)) => format!("{name} (serial {serial})"),
        (Some(name), None) => format!("{name} ({})", r.appliance),
        _ => r.appliance.clone(),
    }
}

/// The sha256 of a run's plan as canonical JSON ([`RunDigest::plan_digest`]).
pub(crate) fn plan_digest(r: &RunResults) -> String {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_vec(&r.plan).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl RunDigest {
    pub fn new(key: String, r: &RunResults) -> RunDigest {
        let points = r
            .points
            .iter()
            .filter(|p| p.status == PointStatus::Ok)
            .filter_map(|p| {
                let f = p.figures();
                Some(DigestPoint {
                    workload: p.workload.clone(),
                    kind: p.kind,
                    builtin: p.script_name(),
                    checksums: Checksums::label(p.checksums).to_string(),
                    clients: p.clients,
                    tps: f.tps?,
                    latency_avg_ms: f.latency_avg_ms,
                    latency: f.latency,
                    qps: f.qps,
                    ignored_errors: f.ignored_errors,
                    reconnects: f.reconnects,
                    tps_series: if shown(p.kind).series_compared {
                        let series: Vec<(f64, f64)> =
                            p.tps_series.iter().map(|s| (s.elapsed_s, s.tps)).collect();
                        downsample(&series, DIGEST_SERIES_SAMPLES)
                    } else {
                        Vec::new()
                    },
                    client_bound: p.client_bound(),
                })
            })
            .collect();
        RunDigest {
            key,
            appliance: r.appliance.clone(),
            run_id: r.run_id.clone(),
            started_at: r.started_at.clone(),
            hourly_price_usd: r.hourly_price_usd,
            cpu_model: r.inventory.cpu.model_name.clone().unwrap_or_default(),
            cpus: r.inventory.cpu.cpus,
            memory_bytes: r.inventory.memory_bytes,
            postgres_version: r.postgres.version.clone(),
            kernel: r.inventory.kernel.clone(),
            points,
            failed_points: r.failed_points().len(),
            machine_identity: machine_identity(r),
            plan_digest: plan_digest(r),
        }
    }
}

/// How the pages name and draw a kind's figures (its registered [`crate::workload::Kind`]).
pub(crate) fn shown(kind: WorkloadKind) -> &'static Shown {
    crate::workload::of(kind).shown()
}

/// One machine's figures at one workload × checksum state × client count (repeats averaged).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The machine's label (with the run id when a machine has several runs shown).
    pub(crate) machine: String,
    pub(crate) run_id: String,
    pub(crate) run_key: String,
    pub(crate) workload: String,
    pub(crate) kind: WorkloadKind,
    pub(crate) builtin: String,
    pub(crate) checksums: String,
    /// Clients (pgbench) or threads (sysbench-tpcc).
    pub(crate) clients: u32,
    pub(crate) samples: usize,
    /// Each repeat's tps and latency p99 (where known), in repeat order.
    pub(crate) tps_samples: Vec<f64>,
    pub(crate) p99_samples: Vec<f64>,
    pub(crate) tps_mean: f64,
    pub(crate) tps_min: f64,
    pub(crate) tps_max: f64,
    pub(crate) latency_avg_ms: Option<f64>,
    /// Means of each percentile over the repeats; `max` is the largest.
    pub(crate) latency: Percentiles,
    pub(crate) hourly_price_usd: f64,
    /// sysbench-tpcc: mean queries per second; ignored errors and reconnects summed over
    /// the repeats; each repeat's tps series.
    pub(crate) qps_mean: Option<f64>,
    pub(crate) ignored_errors: Option<u64>,
    pub(crate) reconnects: Option<u64>,
    pub(crate) tps_series: Vec<Vec<(f64, f64)>>,
    /// Repeats whose benchmark client's CPU was the limit (`client-bound`).
    pub(crate) client_bound: usize,
}

/// Where a row stands in the comparison: workload, kind, checksum state, clients.
pub(crate) type PointKey<'a> = (String, &'a str, String, u32);

/// The baseline machine's rows by where they stand: what the other machines' rows are set
/// against.
pub(crate) fn baseline_rows<'a>(
    rows: &'a [Row],
    baseline: &str,
) -> BTreeMap<PointKey<'a>, &'a Row> {
    rows.iter()
        .filter(|r| r.machine == baseline)
        .map(|r| (r.point_key(), r))
        .collect()
}

impl Row {
    pub(crate) fn point_key(&self) -> PointKey<'_> {
        (
            self.workload.clone(),
            self.kind.as_str(),
            self.checksums.clone(),
            self.clients,
        )
    }

    pub(crate) fn tps_per_dollar_hour(&self) -> Option<f64> {
        (self.hourly_price_usd > 0.0).then(|| self.tps_mean / self.hourly_price_usd)
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Rows of the shown runs, in run order then workload, checksums, clients.
pub fn rows(runs: &[RunDigest]) -> Vec<Row> {
    let mut out = Vec::new();
    for (run, machine) in runs.iter().zip(labels(runs)) {
        let mut groups: BTreeMap<(&str, &str, &str, u32), Vec<&DigestPoint>> = BTreeMap::new();
        for p in &run.points {
            groups
                .entry((&p.workload, p.kind.as_str(), &p.checksums, p.clients))
                .or_default()
                .push(p);
        }
        for ((workload, _, checksums, clients), points) in groups {
            let kind = points[0].kind;
            let tps: Vec<f64> = points.iter().map(|p| p.tps).collect();
            let Some(tps_mean) = mean(&tps) else { continue };
            let lat = |f: fn(&Percentiles) -> Option<f64>| {
                mean(
                    &points
                        .iter()
                        .filter_map(|p| f(&p.latency))
                        .collect::<Vec<_>>(),
                )
            };
            out.push(Row {
                machine: machine.clone(),
                run_id: run.run_id.clone(),
                run_key: run.key.clone(),
                workload: workload.to_string(),
                kind,
                builtin: points[0].builtin.clone(),
                checksums: checksums.to_string(),
                clients,
                samples: tps.len(),
                p99_samples: points.iter().filter_map(|p| p.latency.p99).collect(),
                tps_mean,
                tps_min: tps.iter().cloned().fold(f64::MAX, f64::min),
                tps_max: tps.iter().cloned().fold(f64::MIN, f64::max),
                tps_samples: tps.clone(),
                latency_avg_ms: mean(
                    &points
                        .iter()
                        .filter_map(|p| p.latency_avg_ms)
                        .collect::<Vec<_>>(),
                ),
                latency: Percentiles {
                    p25: lat(|l| l.p25),
                    p50: lat(|l| l.p50),
                    p75: lat(|l| l.p75),
                    p90: lat(|l| l.p90),
                    p95: lat(|l| l.p95),
                    p99: lat(|l| l.p99),
                    p99_9: lat(|l| l.p99_9),
                    max: points
                        .iter()
                        .filter_map(|p| p.latency.max)
                        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
                },
                hourly_price_usd: run.hourly_price_usd,
                qps_mean: mean(&points.iter().filter_map(|p| p.qps).collect::<Vec<_>>()),
                ignored_errors: sum(points.iter().map(|p| p.ignored_errors)),
                reconnects: sum(points.iter().map(|p| p.reconnects)),
                tps_series: points
                    .iter()
                    .filter(|p| !p.tps_series.is_empty())
                    .map(|p| p.tps_series.clone())
                    .collect(),
                client_bound: points.iter().filter(|p| p.client_bound).count(),
            });
        }
    }
    out
}

/// The sum of counts every one of which is known.
fn sum(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.sum()
}

/// The rows of each workload, keyed by its name and kind (a pgbench and a sysbench-tpcc
/// workload of the same name are not compared with each other), in name order.
pub(super) fn by_workload(rows: &[Row]) -> Vec<((&str, WorkloadKind), Vec<&Row>)> {
    let mut groups: BTreeMap<(&str, &str), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((&r.workload, r.kind.as_str()))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((workload, _), rows)| ((workload, rows[0].kind), rows))
        .collect()
}
