//! The cross-machine comparison `pgappliance collect` publishes. It leads with the finding,
//! computed from the data: per workload and client count, each machine's tps against a
//! baseline machine, the data checksums on/off cost, tps per dollar-hour, and one summary
//! sentence per workload; then regressions against the baseline when a threshold is given;
//! then one chart per workload with one line per machine, and latency percentiles. Also
//! `summary.csv` (one row per machine × workload × checksum state × clients). Pure: digests
//! of runs in, text out.
//!
//! A run is reduced to a [`RunDigest`] as soon as it is read, so the comparison holds the
//! figures of every run, never their series or raw evidence.

pub mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::csv::CsvWriter;
use crate::plan::{Checksums, WorkloadKind};
use crate::report::{escape, line_chart, line_chart_with_bars, load_unit, PointBars, Series};
use crate::results::{PointStatus, RunResults};
use stats::{Comparison, GeometricMean, Verdict};

/// The most per-second samples a digest keeps of a sysbench-tpcc point's tps series;
/// longer series are averaged down to this many (a 1 h run's 3600 seconds to 6 s each).
pub const DIGEST_SERIES_SAMPLES: usize = 600;

/// The figures of one successful point that the comparison uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestPoint {
    pub workload: String,
    /// Absent in digests kept by collectors before sysbench-tpcc existed: pgbench.
    #[serde(default)]
    pub kind: WorkloadKind,
    /// pgbench's builtin script; empty for sysbench-tpcc.
    pub builtin: String,
    /// `"on"`, `"off"`, or `""` when the plan required no checksum state.
    pub checksums: String,
    /// pgbench's clients; sysbench-tpcc's threads.
    pub clients: u32,
    pub tps: f64,
    pub latency_avg_ms: Option<f64>,
    pub latency: Percentiles,
    /// sysbench-tpcc: queries per second, ignored errors and reconnects over the run.
    #[serde(default)]
    pub qps: Option<f64>,
    #[serde(default)]
    pub ignored_errors: Option<u64>,
    #[serde(default)]
    pub reconnects: Option<u64>,
    /// sysbench-tpcc: (seconds, tps), at most [`DIGEST_SERIES_SAMPLES`] of them; empty for
    /// pgbench, whose series stay on the run's own page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tps_series: Vec<(f64, f64)>,
}

/// A tps series averaged down to at most `max` samples: consecutive samples are merged in
/// equal runs, each keeping the time of its last sample and the mean tps.
pub fn downsample(series: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
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

/// Latency percentiles of a point, in milliseconds.
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
}

impl RunDigest {
    pub fn new(key: String, r: &RunResults) -> RunDigest {
        let points = r
            .points
            .iter()
            .filter(|p| p.status == PointStatus::Ok)
            .filter_map(|p| {
                let l = p.latency.as_ref();
                let sb = p.sysbench.as_ref();
                let tpcc = p.kind == WorkloadKind::SysbenchTpcc;
                Some(DigestPoint {
                    workload: p.workload.clone(),
                    kind: p.kind,
                    builtin: if tpcc {
                        String::new()
                    } else {
                        p.builtin.pgbench_name().to_string()
                    },
                    checksums: Checksums::label(p.checksums).to_string(),
                    clients: p.clients,
                    tps: p.tps()?,
                    latency_avg_ms: p.latency_avg_ms(),
                    latency: Percentiles {
                        p25: l.and_then(|l| l.p25_ms),
                        p50: l.and_then(|l| l.p50_ms),
                        p75: l.and_then(|l| l.p75_ms),
                        p90: l.and_then(|l| l.p90_ms),
                        p95: p.latency_p95_ms(),
                        p99: l.and_then(|l| l.p99_ms),
                        p99_9: l.and_then(|l| l.p99_9_ms),
                        max: p.latency_max_ms(),
                    },
                    qps: sb.map(|s| s.qps),
                    ignored_errors: sb.map(|s| s.ignored_errors),
                    reconnects: sb.map(|s| s.reconnects),
                    tps_series: if tpcc {
                        let series: Vec<(f64, f64)> =
                            p.tps_series.iter().map(|s| (s.elapsed_s, s.tps)).collect();
                        downsample(&series, DIGEST_SERIES_SAMPLES)
                    } else {
                        Vec::new()
                    },
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
        }
    }
}

/// A run that was not used, and why.
pub struct SkippedRun {
    pub key: String,
    pub reason: String,
}

/// The runs a comparison shows, chosen from every run collected: the latest run of each
/// machine (by start time, then run id), or every run with `all_runs`. A run whose id is
/// `keep` (the baseline run of a regression check) is shown as well. Returns the shown
/// runs, sorted by machine then start, and the keys of the runs left out.
pub fn select_runs(
    runs: Vec<RunDigest>,
    all_runs: bool,
    keep: Option<&str>,
) -> (Vec<RunDigest>, Vec<String>) {
    let mut by_machine: BTreeMap<String, Vec<RunDigest>> = BTreeMap::new();
    for r in runs {
        by_machine.entry(r.appliance.clone()).or_default().push(r);
    }
    let mut shown = Vec::new();
    let mut left_out = Vec::new();
    for (_, mut runs) in by_machine {
        runs.sort_by(|a, b| (&a.started_at, &a.run_id).cmp(&(&b.started_at, &b.run_id)));
        let last = runs.len() - 1;
        for (i, r) in runs.into_iter().enumerate() {
            if all_runs || i == last || keep == Some(r.run_id.as_str()) {
                shown.push(r);
            } else {
                left_out.push(r.key);
            }
        }
    }
    (shown, left_out)
}

/// Labels of the shown runs: the machine, with the run id when a machine has several.
pub fn labels(runs: &[RunDigest]) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *count.entry(r.appliance.as_str()).or_default() += 1;
    }
    runs.iter()
        .map(|r| {
            if count[r.appliance.as_str()] > 1 {
                format!("{} ({})", r.appliance, r.run_id)
            } else {
                r.appliance.clone()
            }
        })
        .collect()
}

/// Which shown run is the baseline: the one whose run id is `name`, else the earliest
/// shown run of the machine `name`, else the run labelled `name`; with no name, the first
/// run by label. The error lists what could have been named.
pub fn baseline_index(runs: &[RunDigest], name: Option<&str>) -> Result<usize, String> {
    let labels = labels(runs);
    if runs.is_empty() {
        return Err("there are no runs to compare".into());
    }
    let Some(name) = name else {
        let first = (0..runs.len())
            .min_by(|&a, &b| labels[a].cmp(&labels[b]))
            .unwrap_or(0);
        return Ok(first);
    };
    if let Some(i) = runs.iter().position(|r| r.run_id == name) {
        return Ok(i);
    }
    if let Some(i) = runs.iter().position(|r| r.appliance == name) {
        return Ok(i);
    }
    if let Some(i) = labels.iter().position(|l| l == name) {
        return Ok(i);
    }
    let machines: BTreeSet<&str> = runs.iter().map(|r| r.appliance.as_str()).collect();
    Err(format!(
        "baseline \"{name}\" is neither a machine nor a run id among the runs compared (machines: {})",
        machines.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// One machine's figures at one workload × checksum state × client count (repeats averaged).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The machine's label (with the run id when a machine has several runs shown).
    pub machine: String,
    pub run_id: String,
    pub run_key: String,
    pub workload: String,
    pub kind: WorkloadKind,
    pub builtin: String,
    pub checksums: String,
    /// Clients (pgbench) or threads (sysbench-tpcc).
    pub clients: u32,
    pub samples: usize,
    /// Each repeat's tps and latency p99 (where known), in repeat order.
    pub tps_samples: Vec<f64>,
    pub p99_samples: Vec<f64>,
    pub tps_mean: f64,
    pub tps_min: f64,
    pub tps_max: f64,
    pub latency_avg_ms: Option<f64>,
    /// Means of each percentile over the repeats; `max` is the largest.
    pub latency: Percentiles,
    pub hourly_price_usd: f64,
    /// sysbench-tpcc: mean queries per second; ignored errors and reconnects summed over
    /// the repeats; each repeat's tps series.
    pub qps_mean: Option<f64>,
    pub ignored_errors: Option<u64>,
    pub reconnects: Option<u64>,
    pub tps_series: Vec<Vec<(f64, f64)>>,
}

impl Row {
    pub fn tps_per_dollar_hour(&self) -> Option<f64> {
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
            });
        }
    }
    out
}

/// The sum of counts every one of which is known.
fn sum(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.sum()
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_default()
}

/// `collect`'s `summary.csv`: one row per machine × workload × checksums × clients (RFC 4180).
pub fn summary_csv(rows: &[Row]) -> String {
    let mut w = CsvWriter::with_header(&[
        "machine",
        "run_id",
        "workload",
        "builtin",
        "checksums",
        "clients",
        "samples",
        "tps_mean",
        "tps_min",
        "tps_max",
        "latency_avg_ms",
        "p25_ms",
        "p50_ms",
        "p75_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "p99_9_ms",
        "max_ms",
        "hourly_price_usd",
        "tps_per_dollar_hour",
        "run_key",
        "kind",
        "qps_mean",
        "ignored_errors",
        "reconnects",
    ]);
    for r in rows {
        let l = &r.latency;
        w.record(&[
            r.machine.clone(),
            r.run_id.clone(),
            r.workload.clone(),
            r.builtin.clone(),
            r.checksums.clone(),
            r.clients.to_string(),
            r.samples.to_string(),
            format!("{:.3}", r.tps_mean),
            format!("{:.3}", r.tps_min),
            format!("{:.3}", r.tps_max),
            opt(r.latency_avg_ms),
            opt(l.p25),
            opt(l.p50),
            opt(l.p75),
            opt(l.p90),
            opt(l.p95),
            opt(l.p99),
            opt(l.p99_9),
            opt(l.max),
            r.hourly_price_usd.to_string(),
            opt(r.tps_per_dollar_hour()),
            r.run_key.clone(),
            r.kind.as_str().to_string(),
            opt(r.qps_mean),
            r.ignored_errors.map(|n| n.to_string()).unwrap_or_default(),
            r.reconnects.map(|n| n.to_string()).unwrap_or_default(),
        ]);
    }
    w.finish()
}

/// The row that stands for a machine at a workload and client count: checksums off when it
/// ran both states, else whatever state it ran.
fn primary<'a>(rows: &[&'a Row]) -> Option<&'a Row> {
    ["off", "", "on"]
        .iter()
        .find_map(|cs| rows.iter().find(|r| r.checksums == *cs).copied())
}

/// What a comparison is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// A machine's tps against the baseline machine's, same workload, checksum state and
    /// client count.
    Baseline,
    /// A machine's tps with data checksums on against its own with them off.
    ChecksumsOff,
}

/// One comparison at one workload × checksum state × client count, from the repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct PointComparison {
    pub workload: String,
    pub kind: WorkloadKind,
    pub against: Against,
    pub machine: String,
    pub checksums: String,
    /// The baseline's label (the machine itself for checksums) and checksum state.
    pub baseline: String,
    pub baseline_checksums: String,
    pub clients: u32,
    pub stats: Comparison,
}

/// A machine's comparisons at a workload over its client counts: the geometric mean of
/// those with an interval, and the client counts it says nothing for.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub machine: String,
    pub against: Against,
    /// Client counts compared, in order, with their comparison.
    pub points: Vec<(u32, Comparison)>,
    /// The geometric mean of the points with an interval; none when every point is one
    /// sample.
    pub mean: Option<GeometricMean>,
}

impl Aggregate {
    fn new(machine: &str, against: Against, points: Vec<(u32, Comparison)>, t: f64) -> Aggregate {
        let mean = stats::geometric_mean(&points.iter().map(|p| &p.1).collect::<Vec<_>>(), t);
        Aggregate {
            machine: machine.to_string(),
            against,
            points,
            mean,
        }
    }

    /// The client counts the geometric mean is over.
    fn counted(&self) -> Vec<u32> {
        self.points
            .iter()
            .filter(|p| p.1.ci.is_some())
            .map(|p| p.0)
            .collect()
    }

    /// The verdict that stands for the machine: the mean's, else `one sample`.
    pub fn verdict(&self) -> Verdict {
        self.mean.as_ref().map_or(Verdict::OneSample, |m| m.verdict)
    }
}

/// One line of a workload's finding table.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingRow {
    pub clients: u32,
    pub machine: String,
    /// Which checksum state the tps is of (`"off"` when the machine ran both).
    pub checksums: String,
    /// Repeats behind the tps.
    pub samples: usize,
    pub tps: f64,
    /// Against the baseline's point of the same checksum state (else the baseline's own
    /// primary state); none on the baseline's rows.
    pub vs_baseline: Option<Comparison>,
    /// Data checksums on against off, where the machine ran both.
    pub checksums_on: Option<Comparison>,
    pub hourly_price_usd: f64,
    pub tps_per_dollar_hour: Option<f64>,
    /// tps per dollar-hour against the baseline's: the tps change and its interval scaled
    /// by the price ratio, in percent.
    pub per_dollar_vs_baseline: Option<(f64, Option<(f64, f64)>)>,
}

/// The finding for one workload: a table by client (thread) count and machine, what each
/// machine's verdicts add up to, and a sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadFinding {
    pub workload: String,
    pub kind: WorkloadKind,
    pub builtin: String,
    pub baseline: String,
    pub threshold_pct: f64,
    pub rows: Vec<FindingRow>,
    /// Each other machine against the baseline, over the client counts both ran.
    pub versus: Vec<Aggregate>,
    /// Each machine's data checksums on against off, over the client counts it ran both.
    pub checksum_costs: Vec<Aggregate>,
    pub sentence: String,
}

/// The findings of every workload, against the run at `baseline` (an index into `runs`),
/// verdicts at `threshold_pct`.
pub fn findings(
    runs: &[RunDigest],
    rows: &[Row],
    baseline: usize,
    threshold_pct: f64,
) -> Vec<WorkloadFinding> {
    let labels = labels(runs);
    let base_label = &labels[baseline];
    let t = threshold_pct;
    let mut out = Vec::new();
    for ((workload, kind), wrows) in by_workload(rows) {
        // machine → clients → rows of each checksum state.
        let mut grid: BTreeMap<&str, BTreeMap<u32, Vec<&Row>>> = BTreeMap::new();
        for r in &wrows {
            grid.entry(&r.machine)
                .or_default()
                .entry(r.clients)
                .or_default()
                .push(r);
        }
        let clients: BTreeSet<u32> = wrows.iter().map(|r| r.clients).collect();
        let base = grid.get(base_label.as_str());
        let mut table = Vec::new();
        // The baseline first, then the other machines by label.
        let mut machines: Vec<&str> = grid.keys().copied().collect();
        machines.sort_by_key(|m| (*m != base_label.as_str(), *m));
        for &c in &clients {
            let base_states = base.and_then(|b| b.get(&c));
            for &m in &machines {
                let Some(states) = grid[m].get(&c) else {
                    continue;
                };
                let Some(row) = primary(states) else { continue };
                let on = states.iter().find(|r| r.checksums == "on");
                let off = states.iter().find(|r| r.checksums == "off");
                let checksums_on = match (on, off) {
                    (Some(on), Some(off)) => stats::compare(&on.tps_samples, &off.tps_samples, t),
                    _ => None,
                };
                let is_base = m == base_label.as_str();
                let base_row = base_states.and_then(|b| {
                    b.iter()
                        .find(|r| r.checksums == row.checksums)
                        .copied()
                        .or_else(|| primary(b))
                });
                let vs = base_row
                    .filter(|_| !is_base)
                    .and_then(|b| stats::compare(&row.tps_samples, &b.tps_samples, t));
                let per_dollar = match (&vs, base_row) {
                    (Some(vs), Some(b))
                        if row.hourly_price_usd > 0.0 && b.hourly_price_usd > 0.0 =>
                    {
                        let f = b.hourly_price_usd / row.hourly_price_usd;
                        let pct = |r: f64| (r * f - 1.0) * 100.0;
                        Some((pct(vs.ratio), vs.ci.map(|(lo, hi)| (pct(lo), pct(hi)))))
                    }
                    _ => None,
                };
                table.push(FindingRow {
                    clients: c,
                    machine: m.to_string(),
                    checksums: row.checksums.clone(),
                    samples: row.samples,
                    tps: row.tps_mean,
                    vs_baseline: vs,
                    checksums_on,
                    hourly_price_usd: row.hourly_price_usd,
                    tps_per_dollar_hour: row.tps_per_dollar_hour(),
                    per_dollar_vs_baseline: per_dollar,
                });
            }
        }
        let aggregate = |m: &str, against: Against| {
            let points: Vec<(u32, Comparison)> = table
                .iter()
                .filter(|r| r.machine == m)
                .filter_map(|r| {
                    let c = match against {
                        Against::Baseline => r.vs_baseline.clone(),
                        Against::ChecksumsOff => r.checksums_on.clone(),
                    };
                    Some((r.clients, c?))
                })
                .collect();
            (!points.is_empty()).then(|| Aggregate::new(m, against, points, t))
        };
        let mut versus = Vec::new();
        let mut unmatched = Vec::new();
        for &m in machines.iter().filter(|m| **m != base_label.as_str()) {
            match aggregate(m, Against::Baseline) {
                Some(a) => versus.push(a),
                None => unmatched.push(m),
            }
        }
        let checksum_costs: Vec<Aggregate> = machines
            .iter()
            .filter_map(|m| aggregate(m, Against::ChecksumsOff))
            .collect();
        let prices: BTreeMap<&str, f64> = table
            .iter()
            .map(|r| (r.machine.as_str(), r.hourly_price_usd))
            .collect();
        let sentence = sentence(&Sentence {
            workload,
            kind,
            baseline: base_label,
            threshold_pct: t,
            versus: &versus,
            unmatched: &unmatched,
            checksum_costs: &checksum_costs,
            prices: &prices,
        });
        out.push(WorkloadFinding {
            workload: workload.to_string(),
            kind,
            builtin: wrows[0].builtin.clone(),
            baseline: base_label.clone(),
            threshold_pct: t,
            rows: table,
            versus,
            checksum_costs,
            sentence,
        });
    }
    out
}

/// Every comparison behind the findings, at each workload × checksum state × client count:
/// each machine against the baseline's point of the same checksum state, and each
/// machine's checksums on against off. In workload, machine, checksums, clients order.
pub fn point_comparisons(rows: &[Row], baseline: &str, threshold_pct: f64) -> Vec<PointComparison> {
    let key = |r: &Row| {
        (
            r.workload.clone(),
            r.kind.as_str(),
            r.checksums.clone(),
            r.clients,
        )
    };
    let base: BTreeMap<_, &Row> = rows
        .iter()
        .filter(|r| r.machine == baseline)
        .map(|r| (key(r), r))
        .collect();
    let mut out = Vec::new();
    for r in rows {
        if r.machine != baseline {
            if let Some(b) = base.get(&key(r)) {
                if let Some(c) = stats::compare(&r.tps_samples, &b.tps_samples, threshold_pct) {
                    out.push(PointComparison {
                        workload: r.workload.clone(),
                        kind: r.kind,
                        against: Against::Baseline,
                        machine: r.machine.clone(),
                        checksums: r.checksums.clone(),
                        baseline: baseline.to_string(),
                        baseline_checksums: b.checksums.clone(),
                        clients: r.clients,
                        stats: c,
                    });
                }
            }
        }
        if r.checksums == "on" {
            let off = rows.iter().find(|o| {
                o.machine == r.machine
                    && o.workload == r.workload
                    && o.kind == r.kind
                    && o.clients == r.clients
                    && o.checksums == "off"
            });
            if let Some(off) = off {
                if let Some(c) = stats::compare(&r.tps_samples, &off.tps_samples, threshold_pct) {
                    out.push(PointComparison {
                        workload: r.workload.clone(),
                        kind: r.kind,
                        against: Against::ChecksumsOff,
                        machine: r.machine.clone(),
                        checksums: "on".into(),
                        baseline: r.machine.clone(),
                        baseline_checksums: "off".into(),
                        clients: r.clients,
                        stats: c,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| {
        (
            &a.workload,
            a.kind.as_str(),
            &a.machine,
            a.against == Against::ChecksumsOff,
            &a.checksums,
            a.clients,
        )
            .cmp(&(
                &b.workload,
                b.kind.as_str(),
                &b.machine,
                b.against == Against::ChecksumsOff,
                &b.checksums,
                b.clients,
            ))
    });
    out
}

/// The version of `findings.json`'s layout (docs/results.md).
pub const FINDINGS_SCHEMA_VERSION: u32 = 1;

/// One entry of `findings.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingEntry {
    pub workload: String,
    pub kind: &'static str,
    pub against: Against,
    /// `point` (one client count) or `geometric_mean` (over `client_counts`).
    pub scope: &'static str,
    pub checksums: String,
    pub baseline_checksums: String,
    /// The client (thread) count; none for a geometric mean.
    pub clients: Option<u32>,
    /// The client counts a geometric mean is over (those with an interval).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_counts: Vec<u32>,
    pub machine: String,
    pub baseline: String,
    /// Repeats on each side (none for a geometric mean).
    pub n: Option<usize>,
    pub n_baseline: Option<usize>,
    pub ratio: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub p_value: Option<f64>,
    pub cliffs_delta: Option<f64>,
    pub verdict: Verdict,
    /// One sample: the repeats a side the other side's noise suggests (51 for "more than 50").
    pub repeats_suggested: Option<u32>,
}

#[derive(Serialize)]
struct FindingsFile<'a> {
    schema_version: u32,
    baseline: &'a str,
    threshold_pct: f64,
    confidence: f64,
    method: &'static str,
    findings: Vec<FindingEntry>,
}

/// `findings.json`: every comparison of [`point_comparisons`] and, per workload and
/// machine, the geometric means over client counts the sentences state.
pub fn findings_json(
    runs: &[RunDigest],
    rows: &[Row],
    baseline: usize,
    threshold_pct: f64,
) -> String {
    let labels = labels(runs);
    let base = labels.get(baseline).map(String::as_str).unwrap_or("");
    let mut entries: Vec<FindingEntry> = point_comparisons(rows, base, threshold_pct)
        .into_iter()
        .map(|p| FindingEntry {
            workload: p.workload,
            kind: p.kind.as_str(),
            against: p.against,
            scope: "point",
            checksums: p.checksums,
            baseline_checksums: p.baseline_checksums,
            clients: Some(p.clients),
            client_counts: Vec::new(),
            machine: p.machine,
            baseline: p.baseline,
            n: Some(p.stats.n),
            n_baseline: Some(p.stats.n_baseline),
            ratio: p.stats.ratio,
            ci_low: p.stats.ci.map(|c| c.0),
            ci_high: p.stats.ci.map(|c| c.1),
            p_value: p.stats.p_value,
            cliffs_delta: p.stats.cliffs_delta,
            verdict: p.stats.verdict,
            repeats_suggested: p.stats.repeats_suggested,
        })
        .collect();
    if !runs.is_empty() {
        for f in findings(runs, rows, baseline, threshold_pct) {
            for a in f.versus.iter().chain(&f.checksum_costs) {
                let Some(m) = &a.mean else { continue };
                let (checksums, baseline_checksums) = match a.against {
                    Against::Baseline => {
                        let cs = f
                            .rows
                            .iter()
                            .find(|r| r.machine == a.machine)
                            .map(|r| r.checksums.clone())
                            .unwrap_or_default();
                        (cs.clone(), cs)
                    }
                    Against::ChecksumsOff => ("on".to_string(), "off".to_string()),
                };
                entries.push(FindingEntry {
                    workload: f.workload.clone(),
                    kind: f.kind.as_str(),
                    against: a.against,
                    scope: "geometric_mean",
                    checksums,
                    baseline_checksums,
                    clients: None,
                    client_counts: a.counted(),
                    machine: a.machine.clone(),
                    baseline: match a.against {
                        Against::Baseline => f.baseline.clone(),
                        Against::ChecksumsOff => a.machine.clone(),
                    },
                    n: None,
                    n_baseline: None,
                    ratio: m.ratio,
                    ci_low: Some(m.ci.0),
                    ci_high: Some(m.ci.1),
                    p_value: None,
                    cliffs_delta: None,
                    verdict: m.verdict,
                    repeats_suggested: None,
                });
            }
        }
    }
    let file = FindingsFile {
        schema_version: FINDINGS_SCHEMA_VERSION,
        baseline: base,
        threshold_pct,
        confidence: stats::CONFIDENCE,
        method: "Welch's t on log tps (Welch–Satterthwaite df), 95 % interval of the ratio of geometric means; Mann-Whitney U (exact without ties); Cliff's delta",
        findings: entries,
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

/// The rows of each workload, keyed by its name and kind (a pgbench and a sysbench-tpcc
/// workload of the same name are not compared with each other), in name order.
fn by_workload(rows: &[Row]) -> Vec<((&str, WorkloadKind), Vec<&Row>)> {
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

/// What a finding calls the throughput it compares.
fn tps_word(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Pgbench => "tps",
        WorkloadKind::SysbenchTpcc => "TPC-C tps",
    }
}

fn client_list(kind: WorkloadKind, counts: &[u32]) -> String {
    let list: Vec<String> = counts.iter().map(u32::to_string).collect();
    let unit = load_unit(kind);
    match list.len() {
        1 => format!("at {} {unit}", list[0]),
        _ => format!(
            "by the geometric mean over {} {} counts ({})",
            list.len(),
            unit.trim_end_matches('s'),
            list.join(", ")
        ),
    }
}

/// `at 250 clients` / `at 250 and 500 clients` / `at 10, 25 and 50 clients`.
fn at_counts(kind: WorkloadKind, counts: &[u32]) -> String {
    let list: Vec<String> = counts.iter().map(u32::to_string).collect();
    let joined = match list.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => list.join(""),
    };
    format!("at {joined} {}", load_unit(kind))
}

/// A change that prints as 0.0 %: no change worth a number (a sentence says it in words).
fn unchanged(pct: f64) -> bool {
    pct.abs() < 0.05
}

/// A change with its interval as [`stats::display_change`] says it, but one that prints as
/// 0.0 % in words (`same`): `as fast as a (−0.4 … +0.4)`, `as fast as a (one sample)`.
fn change_text(pct: f64, ci: Option<(f64, f64)>, same: &str) -> String {
    if !unchanged(pct) {
        return stats::display_change(pct, ci);
    }
    match ci {
        Some((lo, hi)) => format!("{same} ({} … {})", stats::signed(lo), stats::signed(hi)),
        None => format!("{same} (one sample)"),
    }
}

/// What an unchanged figure of an aggregate reads as: `as fast as a` against the baseline,
/// `as fast with them on` for data checksums.
fn same_words(a: &Aggregate, baseline: &str) -> String {
    match a.against {
        Against::Baseline => format!("as fast as {baseline}"),
        Against::ChecksumsOff => "as fast with them on".to_string(),
    }
}

/// More or fewer, by a positive percentage.
fn more_or_less(pct: f64, more: &str, less: &str) -> String {
    if pct >= 0.0 {
        format!("{:.1} % {more}", pct)
    } else {
        format!("{:.1} % {less}", -pct)
    }
}

/// Machines named one by one in a summary sentence; beyond this it groups them by verdict.
const NAMED_IN_SENTENCE: usize = 3;

/// What a summary sentence is made of.
struct Sentence<'a> {
    workload: &'a str,
    kind: WorkloadKind,
    baseline: &'a str,
    threshold_pct: f64,
    versus: &'a [Aggregate],
    unmatched: &'a [&'a str],
    checksum_costs: &'a [Aggregate],
    prices: &'a BTreeMap<&'a str, f64>,
}

/// How a verdict reads after a machine's name, against `other`.
fn verdict_clause(v: Verdict, kind: WorkloadKind, other: &str, t: f64) -> String {
    let tps = match kind {
        WorkloadKind::Pgbench => "",
        WorkloadKind::SysbenchTpcc => " in TPC-C tps",
    };
    match v {
        Verdict::Faster => format!("is faster{tps} than {other}"),
        Verdict::Slower => format!("is slower{tps} than {other}"),
        Verdict::Same => format!("is the same{tps} as {other} within ±{t} %"),
        Verdict::Small => format!("differs{tps} from {other} by less than {t} %"),
        Verdict::Inconclusive => format!("against {other} is inconclusive at ±{t} %"),
        Verdict::OneSample => format!("against {other} has one sample"),
    }
}

/// The client counts whose own verdict is not the aggregate's (every count when there is no
/// mean), named with theirs: `inconclusive at 250 clients (+3.0 % (−4.1 … +10.6))`,
/// `one sample at 1000 clients (+5.0 %, no interval, about 4 repeats a side would do)`; a
/// change that prints as 0.0 % in words (`as fast (−4.1 … +4.0)`: the sentence has named
/// what it is against).
fn exceptions(a: &Aggregate, kind: WorkloadKind) -> Vec<String> {
    let mine = a.verdict();
    let same = match a.against {
        Against::Baseline => "as fast",
        Against::ChecksumsOff => "as fast with them on",
    };
    let mut by: BTreeMap<&str, Vec<&(u32, Comparison)>> = BTreeMap::new();
    for p in &a.points {
        if p.1.verdict != mine || a.mean.is_none() {
            by.entry(p.1.verdict.as_str()).or_default().push(p);
        }
    }
    by.into_iter()
        .map(|(verdict, points)| {
            let counts: Vec<u32> = points.iter().map(|p| p.0).collect();
            let figures: Vec<String> = points
                .iter()
                .map(|p| match p.1.ci_pct() {
                    Some(ci) => change_text(p.1.change_pct(), Some(ci), same),
                    None if unchanged(p.1.change_pct()) => same.to_string(),
                    None => format!("{} %", stats::signed(p.1.change_pct())),
                })
                .collect();
            let mut s = format!(
                "{verdict} {} ({}",
                at_counts(kind, &counts),
                figures.join("; ")
            );
            if verdict == Verdict::OneSample.as_str() {
                s.push_str(", no interval");
                if let Some(n) = points.iter().filter_map(|p| p.1.repeats_suggested).max() {
                    let _ = write!(s, "; {} repeats a side would do", repeats_text(n));
                }
            }
            s.push(')');
            s
        })
        .collect()
}

fn repeats_text(n: u32) -> String {
    if n > stats::MAX_SUGGESTED_REPEATS {
        format!("more than {}", stats::MAX_SUGGESTED_REPEATS)
    } else {
        format!("about {n}")
    }
}

/// The generated summary of one workload: each machine's verdict against the baseline with
/// the geometric mean of its tps ratios over the client counts that have an interval, and
/// that mean's interval; the client counts whose own verdict differs (inconclusive, one
/// sample, …) named with their figures, never folded in; price and tps per dollar-hour
/// where there is a mean; then data checksums on against off the same way. With more than
/// a few machines it groups them by verdict instead.
fn sentence(s: &Sentence) -> String {
    let (kind, base, t) = (s.kind, s.baseline, s.threshold_pct);
    let tps = tps_word(kind);
    let mut parts = Vec::new();
    if s.versus.len() <= NAMED_IN_SENTENCE {
        for a in s.versus {
            let mut p = match &a.mean {
                Some(m) => format!("{} {}", a.machine, verdict_clause(m.verdict, kind, base, t)),
                None => format!("{} against {base}", a.machine),
            };
            if let Some(m) = &a.mean {
                let _ = write!(
                    p,
                    ": {} {}",
                    change_text(m.change_pct(), Some(m.ci_pct()), &same_words(a, base)),
                    client_list(kind, &a.counted())
                );
                let price = s.prices.get(a.machine.as_str()).copied().unwrap_or(0.0);
                let base_price = s.prices.get(base).copied().unwrap_or(0.0);
                if price > 0.0 && base_price > 0.0 {
                    let f = base_price / price;
                    let pct = |r: f64| (r * f - 1.0) * 100.0;
                    let price_pct = (price - base_price) / base_price * 100.0;
                    let at = if unchanged(price_pct) {
                        "at the same price".to_string()
                    } else {
                        format!(
                            "at {} per hour",
                            more_or_less(price_pct, "dearer", "cheaper")
                        )
                    };
                    let ci = Some((pct(m.ci.0), pct(m.ci.1)));
                    let gives = if unchanged(pct(m.ratio)) {
                        change_text(pct(m.ratio), ci, &format!("the same {tps} per dollar-hour"))
                    } else {
                        format!(
                            "{} {tps} per dollar-hour",
                            stats::display_change(pct(m.ratio), ci)
                        )
                    };
                    let _ = write!(p, "; {at} it gives {gives}");
                }
            }
            let named = exceptions(a, kind);
            if !named.is_empty() {
                p.push_str(if a.mean.is_some() { "; " } else { ": " });
                p.push_str(&named.join("; "));
            }
            parts.push(p);
        }
    } else {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for a in s.versus {
            groups
                .entry(a.verdict().as_str())
                .or_default()
                .push(&a.machine);
        }
        let list: Vec<String> = groups
            .iter()
            .map(|(v, ms)| format!("{} {v} ({})", ms.len(), ms.join(", ")))
            .collect();
        parts.push(format!(
            "against {base} in {tps}, by the geometric mean over client counts at ±{t} %, the {} other runs are: {}",
            s.versus.len(),
            list.join(", ")
        ));
    }
    if !s.unmatched.is_empty() {
        parts.push(format!(
            "{} ran no {} count that {base} ran",
            s.unmatched.join(", "),
            load_unit(kind).trim_end_matches('s')
        ));
    }
    let checks = if s.checksum_costs.len() <= NAMED_IN_SENTENCE {
        s.checksum_costs
            .iter()
            .map(|a| {
                let mut p = format!("{}: ", a.machine);
                let mut named = exceptions(a, kind);
                if let Some(m) = &a.mean {
                    let _ = write!(
                        p,
                        "{}, {}",
                        checksum_verdict(m, t),
                        change_text(m.change_pct(), Some(m.ci_pct()), &same_words(a, base))
                    );
                    if a.counted().len() > 1 {
                        let _ = write!(p, " {}", client_list(kind, &a.counted()));
                    }
                    named.insert(0, p);
                    return named.join("; ");
                }
                p.push_str(&named.join("; "));
                p
            })
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        let mut groups: BTreeMap<&str, usize> = BTreeMap::new();
        for a in s.checksum_costs {
            *groups.entry(a.verdict().as_str()).or_default() += 1;
        }
        format!(
            "over the {} runs that ran both, {}",
            s.checksum_costs.len(),
            groups
                .iter()
                .map(|(v, n)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut text = format!("{}: ", s.workload);
    if parts.is_empty() {
        let _ = write!(text, "only {base} ran this workload");
    } else {
        text.push_str(&parts.join("; "));
    }
    if !checks.is_empty() {
        let _ = write!(text, ". Data checksums on against off: {checks}");
    }
    text.push('.');
    text
}

/// How the verdict on checksums on against off reads.
fn checksum_verdict(m: &GeometricMean, t: f64) -> String {
    let way = if m.ratio < 1.0 { "slower" } else { "faster" };
    match m.verdict {
        Verdict::Faster | Verdict::Slower => format!("{way} with them on by more than {t} %"),
        Verdict::Small => format!("{way} with them on by less than {t} %"),
        Verdict::Same => format!("the same within ±{t} %"),
        Verdict::Inconclusive => format!("inconclusive at ±{t} %"),
        Verdict::OneSample => "one sample".into(),
    }
}

/// A point whose tps or latency p99 moved past the threshold against the baseline: a
/// regression when its verdict says so (`slower` tps, or a p99 interval wholly above +T),
/// else a move the noise can explain or one sample cannot tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub machine: String,
    pub workload: String,
    pub kind: WorkloadKind,
    pub checksums: String,
    pub clients: u32,
    pub baseline_tps: f64,
    pub tps: f64,
    pub tps_change: Comparison,
    pub baseline_p99_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_change: Option<Comparison>,
    /// tps: verdict `slower`.
    pub tps_fell: bool,
    /// Latency p99: its interval wholly above +T (the verdict `faster` of the p99 ratio).
    pub p99_rose: bool,
    /// tps: its figure alone fell past −T (confirmed or not).
    pub tps_moved: bool,
    /// Latency p99: its figure alone rose past +T (confirmed or not).
    pub p99_moved: bool,
}

impl Regression {
    /// The verdicts say it regressed (what `--fail-on-regression` counts).
    pub fn confirmed(&self) -> bool {
        self.tps_fell || self.p99_rose
    }

    pub fn tps_change_pct(&self) -> f64 {
        self.tps_change.change_pct()
    }
}

/// A regression as one line for stdout: `regressed:` when its verdicts say so, else
/// `unconfirmed:`; leading with what regressed (or, unconfirmed, what moved past the
/// threshold): `tps −10.0 % (−14.1 … −5.2) slower`, `latency p99 +25.0 % (+22.0 … +28.1)
/// higher`, or both; then where; then the other figure for context (pure).
pub fn regression_line(r: &Regression) -> String {
    let tps = format!(
        "tps {}{}",
        r.tps_change.display_change(),
        match r.tps_change.verdict {
            Verdict::OneSample => String::new(),
            v => format!(" {v}"),
        }
    );
    let p99 = r.p99_change.as_ref().map(|p| {
        format!(
            "latency p99 {}{}",
            p.display_change(),
            if r.p99_rose { " higher" } else { "" }
        )
    });
    let (lead_tps, lead_p99) = if r.confirmed() {
        (r.tps_fell, r.p99_rose)
    } else {
        (r.tps_moved, r.p99_moved)
    };
    let mut what = Vec::new();
    let mut besides = Vec::new();
    if lead_tps {
        what.push(tps);
    } else {
        besides.push(tps);
    }
    match p99 {
        Some(p) if lead_p99 => what.push(p),
        Some(p) => besides.push(p),
        None => {}
    }
    format!(
        "{}: {}: {} {}{} at {} {}{}",
        if r.confirmed() {
            "regressed"
        } else {
            "unconfirmed"
        },
        what.join(" and "),
        r.machine,
        r.workload,
        if r.checksums.is_empty() {
            String::new()
        } else {
            format!(" (checksums {})", r.checksums)
        },
        r.clients,
        load_unit(r.kind),
        if besides.is_empty() {
            String::new()
        } else {
            format!(" ({})", besides.join(", "))
        }
    )
}

/// Every point of every run but the baseline whose tps fell, or whose latency p99 rose, past
/// `threshold_pct` against the baseline's point of the same workload, checksum state and
/// client count, by its verdict or by its figure alone: confirmed ones first, then worst
/// tps change first.
pub fn regressions(rows: &[Row], baseline: &str, threshold_pct: f64) -> Vec<Regression> {
    let key = |r: &'_ Row| {
        (
            r.workload.clone(),
            r.kind.as_str(),
            r.checksums.clone(),
            r.clients,
        )
    };
    let base: BTreeMap<_, &Row> = rows
        .iter()
        .filter(|r| r.machine == baseline)
        .map(|r| (key(r), r))
        .collect();
    let t = threshold_pct;
    let mut out: Vec<Regression> = rows
        .iter()
        .filter(|r| r.machine != baseline)
        .filter_map(|r| {
            let b = base.get(&key(r))?;
            let tps = stats::compare(&r.tps_samples, &b.tps_samples, t)?;
            let p99 = stats::compare(&r.p99_samples, &b.p99_samples, t);
            let tps_fell = tps.verdict == Verdict::Slower;
            let p99_rose = p99.as_ref().is_some_and(|p| p.verdict == Verdict::Faster);
            let tps_moved = tps.change_pct() < -t;
            let p99_moved = p99.as_ref().is_some_and(|p| p.change_pct() > t);
            (tps_fell || p99_rose || tps_moved || p99_moved).then(|| Regression {
                machine: r.machine.clone(),
                workload: r.workload.clone(),
                kind: r.kind,
                checksums: r.checksums.clone(),
                clients: r.clients,
                baseline_tps: b.tps_mean,
                tps: r.tps_mean,
                tps_change: tps,
                baseline_p99_ms: b.latency.p99,
                p99_ms: r.latency.p99,
                p99_change: p99,
                tps_fell,
                p99_rose,
                tps_moved,
                p99_moved,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.confirmed()
            .cmp(&a.confirmed())
            .then_with(|| a.tps_change.ratio.total_cmp(&b.tps_change.ratio))
            .then_with(|| {
                (&a.machine, &a.workload, a.clients).cmp(&(&b.machine, &b.workload, b.clients))
            })
    });
    out
}

/// What the index page says beyond the runs themselves.
pub struct IndexOptions<'a> {
    /// The baseline run (an index into the shown runs).
    pub baseline: usize,
    /// The regression threshold in percent, when a check was asked for; also the threshold
    /// T of every verdict (5 % when none is given).
    pub threshold_pct: Option<f64>,
    /// Runs found but not shown (older runs of a machine), by key.
    pub left_out: &'a [String],
    /// Each shown run's page, relative to the index (same order as the runs).
    pub run_pages: &'a [String],
    pub stores: &'a [String],
}

fn num_cell(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "—".into())
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1200px;font-size:15px}table{border-collapse:collapse;font-size:14px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}tr.base td{background:#f6f9ff}td.bad{color:#b00;font-weight:bold}p.finding{font-size:16px;background:#f8f8f0;border-left:4px solid #999;padding:0.4em 0.8em}.verdict.faster{color:#060;font-weight:bold}.verdict.slower{color:#b00;font-weight:bold}.verdict.inconclusive,.verdict.one-sample{color:#777}";

/// One series per machine of a figure by client count, and each point's error bar (the 95 %
/// interval of the mean of its repeats) or one-sample mark.
fn series_of(
    rows: &[&Row],
    pick: fn(&Row) -> Option<f64>,
    samples: fn(&Row) -> &[f64],
) -> (Vec<Series>, Vec<PointBars>) {
    let mut by: BTreeMap<&str, BTreeMap<u32, Vec<&Row>>> = BTreeMap::new();
    for r in rows {
        by.entry(&r.machine)
            .or_default()
            .entry(r.clients)
            .or_default()
            .push(r);
    }
    by.into_iter()
        .map(|(name, at)| {
            let mut points = Vec::new();
            let mut bars = Vec::new();
            for (c, states) in at {
                let Some(row) = primary(&states) else {
                    continue;
                };
                let Some(y) = pick(row) else { continue };
                points.push((f64::from(c), y));
                // No per-repeat figures (sysbench's p95): no mark either way.
                if !samples(row).is_empty() {
                    bars.push((f64::from(c), stats::mean_interval(samples(row))));
                }
            }
            (
                Series {
                    name: name.to_string(),
                    points,
                },
                bars,
            )
        })
        .filter(|(s, _)| !s.points.is_empty())
        .unzip()
}

/// The comparison page.
pub fn render_index(runs: &[RunDigest], skipped: &[SkippedRun], o: &IndexOptions) -> String {
    let rows = rows(runs);
    let labels = labels(runs);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pgappliance comparison</title><style>{STYLE}</style></head><body><h1>pgappliance comparison</h1><p>{} run(s) of {} machine(s) compared",
        runs.len(),
        runs.iter().map(|r| r.appliance.as_str()).collect::<BTreeSet<_>>().len()
    );
    if !o.left_out.is_empty() {
        let _ = write!(
            h,
            "; {} older run(s) not shown (the latest run of each machine is; <code>--all-runs</code> shows every run)",
            o.left_out.len()
        );
    }
    if !skipped.is_empty() {
        let _ = write!(h, "; {} skipped", skipped.len());
    }
    let _ = write!(
        h,
        ". From {}.</p>",
        o.stores
            .iter()
            .map(|s| format!("<code>{}</code>", escape(s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if runs.is_empty() {
        h.push_str("<p>No run could be compared.</p>");
    } else {
        let base = &labels[o.baseline];
        let t = o.threshold_pct.unwrap_or(stats::DEFAULT_THRESHOLD_PCT);
        finding_section(&mut h, &findings(runs, &rows, o.baseline, t), base);
        if let Some(t) = o.threshold_pct {
            regressions_section(&mut h, &regressions(&rows, base, t), base, t);
        }
        machines_table(&mut h, runs, &labels, o);
        charts_section(&mut h, &rows);
    }
    if !o.left_out.is_empty() {
        h.push_str("<h2>Older runs not shown</h2><ul>");
        for k in o.left_out {
            let _ = write!(h, "<li>{}</li>", escape(k));
        }
        h.push_str("</ul>");
    }
    if !skipped.is_empty() {
        h.push_str("<h2>Skipped</h2><ul>");
        for s in skipped {
            let _ = write!(h, "<li>{}: {}</li>", escape(&s.key), escape(&s.reason));
        }
        h.push_str("</ul>");
    }
    h.push_str("</body></html>\n");
    h
}

/// A comparison's cell: `−9.8 % (−14.1 … −5.2)`, or `+19.0 % (one sample)`.
fn change_cell(c: Option<&Comparison>) -> String {
    c.map(Comparison::display_change)
        .unwrap_or_else(|| "—".into())
}

/// A comparison's verdict cell, with the repeats behind it and, for one sample, the
/// repeats the other side's noise suggests.
fn verdict_cell(c: Option<&Comparison>) -> String {
    let Some(c) = c else {
        return "—".into();
    };
    let mut s = format!(
        "<span class=\"verdict {}\">{}</span> <small>n = {} / {}",
        c.verdict.as_str().replace(' ', "-"),
        c.verdict,
        c.n,
        c.n_baseline
    );
    if let Some(n) = c.repeats_suggested {
        let _ = write!(s, "; {} repeats a side would do", repeats_text(n));
    }
    s.push_str("</small>");
    s
}

fn regressions_section(h: &mut String, list: &[Regression], base: &str, threshold: f64) {
    let _ = write!(
        h,
        "<h2 id=\"regressions\">Regressions against {}</h2>",
        escape(base)
    );
    let confirmed = list.iter().filter(|r| r.confirmed()).count();
    if list.is_empty() {
        let _ = write!(
            h,
            "<p>No point's tps fell, nor its latency p99 rose, by more than {threshold} %.</p>"
        );
        return;
    }
    let _ = write!(
        h,
        "<p class=\"finding\">{confirmed} point(s) regressed by more than {threshold} %: tps <i>slower</i> (its 95 % interval wholly below −{threshold} %) or latency p99 higher (its interval wholly above +{threshold} %), worst first. {} more moved past {threshold} % by their figure alone, which their repeats cannot confirm (one sample, or an interval that reaches inside ±{threshold} %): listed after, not counted by <code>--fail-on-regression</code>.</p><table id=\"regression-table\"><tr><th class=\"l\">machine</th><th class=\"l\">workload</th><th>clients</th><th>baseline tps</th><th>tps</th><th>change</th><th>verdict</th><th>baseline p99 ms</th><th>p99 ms</th><th>change</th><th>verdict</th></tr>",
        list.len() - confirmed
    );
    for r in list {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            escape(&r.machine),
            escape(&r.workload),
            match r.kind {
                WorkloadKind::Pgbench => String::new(),
                WorkloadKind::SysbenchTpcc => " (TPC-C; threads, not clients)".to_string(),
            } + &if r.checksums.is_empty() { String::new() } else { format!(" (checksums {})", r.checksums) },
            r.clients,
            r.baseline_tps,
            r.tps,
            if r.tps_fell { "bad" } else { "" },
            r.tps_change.display_change(),
            verdict_cell(Some(&r.tps_change)),
            num_cell(r.baseline_p99_ms, 3),
            num_cell(r.p99_ms, 3),
            if r.p99_rose { "bad" } else { "" },
            change_cell(r.p99_change.as_ref()),
            match &r.p99_change {
                Some(p) if p.verdict == Verdict::Faster => "higher".to_string(),
                Some(p) if p.verdict == Verdict::Slower => "lower".to_string(),
                other => verdict_cell(other.as_ref()),
            },
        );
    }
    h.push_str("</table>");
}

fn finding_section(h: &mut String, findings: &[WorkloadFinding], base: &str) {
    let t = findings
        .first()
        .map_or(stats::DEFAULT_THRESHOLD_PCT, |f| f.threshold_pct);
    let _ = write!(
        h,
        "<h2 id=\"finding\">Finding</h2><p>Each machine against the baseline <b>{}</b> (<code>--baseline</code>), per workload and client count, from the repeats of each point: the change in tps with its 95 % confidence interval (Welch's t on log tps) and the verdict at ±{t} % (<code>--threshold</code>): <i>faster</i>/<i>slower</i> when the whole interval lies beyond ±{t} %, <i>same</i> when it lies within ±{t} % and holds 0, <i>small</i> when it lies within ±{t} % but excludes 0, <i>inconclusive</i> otherwise, <i>one sample</i> when a side has a single repeat (no interval). tps is with data checksums off where a machine ran both states; the checksums columns compare each machine with them on against off. The verdicts are also in <a href=\"findings.json\">findings.json</a>.</p>",
        escape(base)
    );
    for f in findings {
        let what = match f.kind {
            WorkloadKind::Pgbench => f.builtin.clone(),
            WorkloadKind::SysbenchTpcc => "TPC-C, sysbench-tpcc".to_string(),
        };
        let tps = tps_word(f.kind);
        let _ = write!(
            h,
            "<h3>{} ({})</h3><p class=\"finding\">{}</p><table class=\"finding-table\"><tr><th>{}</th><th class=\"l\">machine</th><th>repeats</th><th>{tps}</th><th>vs baseline</th><th class=\"l\">verdict</th><th>checksums on vs off</th><th class=\"l\">verdict</th><th>$/hour</th><th>{tps} per $/hour</th><th>vs baseline</th></tr>",
            escape(&f.workload),
            escape(&what),
            escape(&f.sentence),
            load_unit(f.kind),
        );
        for r in &f.rows {
            let is_base = r.machine == f.baseline;
            let _ = write!(
                h,
                "<tr{}><td>{}</td><td class=\"l\">{}{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if is_base { " class=\"base\"" } else { "" },
                r.clients,
                escape(&r.machine),
                if is_base { " (baseline)" } else { "" },
                r.samples,
                r.tps,
                if is_base { "baseline".into() } else { change_cell(r.vs_baseline.as_ref()) },
                if is_base { String::new() } else { verdict_cell(r.vs_baseline.as_ref()) },
                change_cell(r.checksums_on.as_ref()),
                verdict_cell(r.checksums_on.as_ref()),
                if r.hourly_price_usd > 0.0 { format!("{:.4}", r.hourly_price_usd) } else { "—".into() },
                num_cell(r.tps_per_dollar_hour, 0),
                if is_base {
                    "baseline".into()
                } else {
                    r.per_dollar_vs_baseline
                        .map(|(pct, ci)| stats::display_change(pct, ci))
                        .unwrap_or_else(|| "—".into())
                },
            );
        }
        h.push_str("</table>");
    }
}

fn machines_table(h: &mut String, runs: &[RunDigest], labels: &[String], o: &IndexOptions) {
    h.push_str("<h2>Machines</h2><table><tr><th class=\"l\">machine</th><th class=\"l\">run</th><th class=\"l\">CPU</th><th>CPUs</th><th>RAM GiB</th><th class=\"l\">PostgreSQL</th><th class=\"l\">kernel</th><th>$/hour</th><th>failed points</th></tr>");
    for (i, (r, label)) in runs.iter().zip(labels).enumerate() {
        let run = match o.run_pages.get(i) {
            Some(page) => format!("<a href=\"{}\">{}</a>", escape(page), escape(&r.run_id)),
            None => escape(&r.run_id),
        };
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{run}</td><td class=\"l\">{}</td><td>{}</td><td>{:.0}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(label),
            escape(if r.cpu_model.is_empty() { "?" } else { &r.cpu_model }),
            r.cpus,
            r.memory_bytes as f64 / (1u64 << 30) as f64,
            escape(&r.postgres_version),
            escape(&r.kernel),
            if r.hourly_price_usd > 0.0 { format!("{:.4}", r.hourly_price_usd) } else { "—".into() },
            r.failed_points,
        );
    }
    h.push_str("</table><p>Each run's page (linked) has its latency percentiles and tps over time of every point.</p>");
}

fn charts_section(h: &mut String, rows: &[Row]) {
    if !rows.is_empty() {
        h.push_str("<p>On the charts below, a bar across a point is the 95 % interval of the mean of its repeats; a hollow point is one sample (no interval).</p>");
    }
    for ((workload, kind), wrows) in by_workload(rows) {
        let unit = load_unit(kind);
        let tps = tps_word(kind);
        match kind {
            WorkloadKind::Pgbench => {
                let _ = write!(h, "<h2>{}: scaling and latency</h2>", escape(workload));
            }
            WorkloadKind::SysbenchTpcc => {
                let _ = write!(
                    h,
                    "<h2>{}: TPC-C (sysbench-tpcc) scaling, latency and tps per second</h2>",
                    escape(workload)
                );
            }
        }
        let (series, bars) = series_of(&wrows, |r| Some(r.tps_mean), |r| &r.tps_samples);
        h.push_str(&line_chart_with_bars(
            &format!("{workload}: {tps} by {unit}"),
            unit,
            tps,
            &series,
            &bars,
            true,
        ));
        // pgbench's latency log gives p99; sysbench reports its 95th percentile.
        type Pick = fn(&Row) -> Option<f64>;
        type Samples = fn(&Row) -> &[f64];
        let (label, pick, samples): (&str, Pick, Samples) = match kind {
            WorkloadKind::Pgbench => ("p99", |r| r.latency.p99, |r| &r.p99_samples),
            WorkloadKind::SysbenchTpcc => ("p95", |r| r.latency.p95, |_| &[]),
        };
        let (series, bars) = series_of(&wrows, pick, samples);
        h.push_str(&line_chart_with_bars(
            &format!("{workload}: latency {label} by {unit}"),
            unit,
            "ms",
            &series,
            &bars,
            true,
        ));
        if kind == WorkloadKind::SysbenchTpcc {
            // sysbench gives a mean and one percentile: its own table, then the seconds.
            tpcc_details(h, workload, &wrows);
            continue;
        }
        let _ = write!(
            h,
            "<table class=\"latency-table\"><tr><th class=\"l\">machine</th><th class=\"l\">checksums</th><th>{unit}</th><th>p25 ms</th><th>p50 ms</th><th>p75 ms</th><th>p95 ms</th><th>p99 ms</th></tr>"
        );
        let mut sorted = wrows.clone();
        sorted.sort_by(|a, b| {
            (&a.machine, &a.checksums, a.clients).cmp(&(&b.machine, &b.checksums, b.clients))
        });
        for r in sorted {
            let l = &r.latency;
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.machine),
                if r.checksums.is_empty() { "—" } else { r.checksums.as_str() },
                r.clients,
                num_cell(l.p25, 3),
                num_cell(l.p50, 3),
                num_cell(l.p75, 3),
                num_cell(l.p95, 3),
                num_cell(l.p99, 3),
            );
        }
        h.push_str("</table>");
    }
}

/// A TPC-C workload's per-machine figures sysbench adds (qps, ignored errors, reconnects)
/// and, per thread count, every machine's tps second by second on one chart, as scenario B
/// compared its two machines.
fn tpcc_details(h: &mut String, workload: &str, rows: &[&Row]) {
    h.push_str("<table class=\"tpcc-table\"><tr><th class=\"l\">machine</th><th class=\"l\">checksums</th><th>threads</th><th>TPC-C tps</th><th>qps</th><th>lat avg ms</th><th>p95 ms</th><th>max ms</th><th>ignored errors</th><th>reconnects</th></tr>");
    let count = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_else(|| "—".into());
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| {
        (&a.machine, &a.checksums, a.clients).cmp(&(&b.machine, &b.checksums, b.clients))
    });
    for r in &sorted {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.machine),
            if r.checksums.is_empty() { "—" } else { r.checksums.as_str() },
            r.clients,
            r.tps_mean,
            num_cell(r.qps_mean, 1),
            num_cell(r.latency_avg_ms, 3),
            num_cell(r.latency.p95, 3),
            num_cell(r.latency.max, 3),
            count(r.ignored_errors),
            count(r.reconnects),
        );
    }
    h.push_str("</table>");
    let mut by_threads: BTreeMap<u32, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_threads.entry(r.clients).or_default().push(r);
    }
    for (threads, at) in by_threads {
        let mut series = Vec::new();
        for r in at {
            let state = if r.checksums.is_empty() {
                String::new()
            } else {
                format!(" (checksums {})", r.checksums)
            };
            let repeats = r.tps_series.len();
            for (i, s) in r.tps_series.iter().enumerate() {
                series.push(Series {
                    name: if repeats > 1 {
                        format!("{}{state} #{}", r.machine, i + 1)
                    } else {
                        format!("{}{state}", r.machine)
                    },
                    points: s.clone(),
                });
            }
        }
        if series.is_empty() {
            continue;
        }
        h.push_str(&line_chart(
            &format!("{workload} at {threads} threads: TPC-C tps per second"),
            "seconds",
            "TPC-C tps",
            &series,
            false,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(workload: &str, checksums: &str, clients: u32, tps: f64, p99: f64) -> DigestPoint {
        DigestPoint {
            workload: workload.into(),
            kind: WorkloadKind::Pgbench,
            builtin: "tpcb-like".into(),
            checksums: checksums.into(),
            clients,
            tps,
            latency_avg_ms: Some(1.0),
            latency: Percentiles {
                p25: Some(p99 / 8.0),
                p50: Some(p99 / 4.0),
                p75: Some(p99 / 2.0),
                p90: Some(p99 / 1.5),
                p95: Some(p99 / 1.2),
                p99: Some(p99),
                p99_9: Some(p99 * 1.5),
                max: Some(p99 * 3.0),
            },
            qps: None,
            ignored_errors: None,
            reconnects: None,
            tps_series: Vec::new(),
        }
    }

    /// A sysbench-tpcc point: sysbench's mean and 95th percentile, a flat per-second series.
    fn tpcc(workload: &str, threads: u32, tps: f64, p95: f64) -> DigestPoint {
        DigestPoint {
            workload: workload.into(),
            kind: WorkloadKind::SysbenchTpcc,
            builtin: String::new(),
            checksums: String::new(),
            clients: threads,
            tps,
            latency_avg_ms: Some(p95 / 2.0),
            latency: Percentiles {
                p95: Some(p95),
                max: Some(p95 * 10.0),
                ..Percentiles::default()
            },
            qps: Some(tps * 28.0),
            ignored_errors: Some(100),
            reconnects: Some(0),
            tps_series: (1..=3600).map(|s| (f64::from(s), tps)).collect::<Vec<_>>(),
        }
    }

    /// Scenario B's TPC-C comparison: m6gd.8xlarge over m5d.8xlarge by +15.5 %, +8 %,
    /// +4.5 % and +1.4 % at 16, 32, 64 and 128 threads (in memory).
    fn scenario_b_tpcc() -> Vec<RunDigest> {
        let threads = [16u32, 32, 64, 128];
        let gain = [1.155, 1.08, 1.045, 1.014];
        let base = [4036.2, 6100.0, 7200.0, 7400.0];
        let digest = |series: &[(f64, f64)]| downsample(series, DIGEST_SERIES_SAMPLES);
        let points = |factor: &dyn Fn(usize) -> f64| -> Vec<DigestPoint> {
            threads
                .iter()
                .enumerate()
                .map(|(i, &t)| {
                    let mut p = tpcc("tpcc-mem", t, base[i] * factor(i), 8.0);
                    p.tps_series = digest(&p.tps_series);
                    p
                })
                .collect()
        };
        vec![
            run("m5d.8xlarge", "r-01", 1.808, points(&|_| 1.0)),
            run("m6gd.8xlarge", "r-02", 1.4464, points(&|i| gain[i])),
        ]
    }

    /// Each point three times, its tps times 1, 1.004 and 0.996 (a CV of 0.4 %), as
    /// repeats r1–r3 of a run.
    fn repeated(points: Vec<DigestPoint>) -> Vec<DigestPoint> {
        let mut out = Vec::new();
        for f in [1.0, 1.004, 0.996] {
            for p in &points {
                out.push(DigestPoint {
                    tps: p.tps * f,
                    ..p.clone()
                });
            }
        }
        out
    }

    #[test]
    fn an_unchanged_price_or_speed_is_said_in_words_not_as_zero_percent() {
        let at = |tps: f64| repeated(vec![point("rw", "", 16, tps, 4.0)]);
        let runs = vec![
            run("a", "r-01", 2.0, at(10_000.0)),
            run("b", "r-02", 2.0, at(12_000.0)),
            run("c", "r-03", 2.0, at(10_000.0)),
        ];
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let s = &f[0].sentence;
        assert!(
            s.contains("b is faster than a: +20.0 % (+")
                && s.contains(") at 16 clients; at the same price it gives +20.0 % (+"),
            "{s}"
        );
        assert!(
            s.contains("c is the same as a within ±5 %: as fast as a (\u{2212}0.")
                && s.contains(") at 16 clients; at the same price it gives the same tps per dollar-hour (\u{2212}0."),
            "{s}"
        );
        assert!(!s.contains("+0.0 %") && !s.contains(" 0.0 %"), "{s}");
        // One sample a side: the unchanged figure in words too.
        let runs = vec![
            run("a", "r-01", 2.0, vec![point("rw", "", 16, 10_000.0, 4.0)]),
            run("c", "r-03", 2.0, vec![point("rw", "", 16, 10_000.0, 4.0)]),
        ];
        let rows = super::rows(&runs);
        let s = &findings(&runs, &rows, 0, 5.0)[0].sentence;
        assert_eq!(
            s,
            "rw: c against a: one sample at 16 clients (as fast, no interval)."
        );
    }

    #[test]
    fn a_tpcc_finding_speaks_of_tpcc_tps_over_thread_counts() {
        let mut runs = scenario_b_tpcc();
        for r in &mut runs {
            r.points = repeated(std::mem::take(&mut r.points));
        }
        // A pgbench workload of the same name is its own finding, not mixed in.
        runs[0].points.push(point("tpcc-mem", "", 16, 1.0, 1.0));
        runs[1].points.push(point("tpcc-mem", "", 16, 2.0, 1.0));
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        assert_eq!(f.len(), 2, "{f:?}");
        let t = f
            .iter()
            .find(|f| f.kind == WorkloadKind::SysbenchTpcc)
            .expect("TPC-C finding");
        let geo = ((1.155f64 * 1.08 * 1.045 * 1.014).powf(0.25) - 1.0) * 100.0;
        assert!(
            t.sentence.starts_with(&format!(
                "tpcc-mem: m6gd.8xlarge is faster in TPC-C tps than m5d.8xlarge: +{geo:.1} % ("
            )) && t.sentence.contains(
                ") by the geometric mean over 4 thread counts (16, 32, 64, 128); at 20.0 % cheaper per hour it gives +"
            ) && t.sentence.contains("TPC-C tps per dollar-hour"),
            "{}",
            t.sentence
        );
        // +4.5 % at 64 threads cannot be told from 5 %, +1.4 % at 128 is under it: named.
        assert!(
            t.sentence.contains("inconclusive at 64 threads (+4.5 % (")
                && t.sentence.contains("small at 128 threads (+1.4 % ("),
            "{}",
            t.sentence
        );
        let at16 = t
            .rows
            .iter()
            .find(|r| r.clients == 16 && r.machine == "m6gd.8xlarge")
            .expect("16 threads");
        let vs = at16.vs_baseline.as_ref().expect("vs");
        assert!((vs.change_pct() - 15.5).abs() < 1e-9);
        assert_eq!((vs.verdict, vs.n, vs.n_baseline), (Verdict::Faster, 3, 3));
        // One sample a side: named as such, no verdict, no number folded in.
        let pg = f
            .iter()
            .find(|f| f.kind == WorkloadKind::Pgbench)
            .expect("pgbench finding");
        assert_eq!(
            pg.sentence,
            "tpcc-mem: m6gd.8xlarge against m5d.8xlarge: one sample at 16 clients (+100.0 %, no interval)."
        );
    }

    #[test]
    fn the_index_shows_tpcc_per_second_charts_and_the_csv_its_columns() {
        let runs = scenario_b_tpcc();
        let html = render_index(
            &runs,
            &[],
            &IndexOptions {
                baseline: 0,
                threshold_pct: Some(5.0),
                left_out: &[],
                run_pages: &[],
                stores: &["file:///s".to_string()],
            },
        );
        assert!(html.contains("<h3>tpcc-mem (TPC-C, sysbench-tpcc)</h3>"));
        assert!(html.contains(
            "<th>threads</th><th class=\"l\">machine</th><th>repeats</th><th>TPC-C tps</th>"
        ));
        assert!(html.contains("tpcc-mem: TPC-C tps by threads</title>"));
        assert!(html.contains("tpcc-mem: latency p95 by threads</title>"));
        for t in [16, 32, 64, 128] {
            assert!(
                html.contains(&format!(
                    "tpcc-mem at {t} threads: TPC-C tps per second</title>"
                )),
                "{t}"
            );
        }
        assert!(html.contains("class=\"tpcc-table\""));
        // m5d is the baseline and m6gd is faster: no regression.
        assert!(html.contains("No point's tps fell"));
        let csv = summary_csv(&rows(&runs));
        let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        let col = |c: &str| lines[0].iter().position(|h| *h == c).expect(c);
        let row = lines
            .iter()
            .find(|r| r[0] == "m6gd.8xlarge" && r[col("clients")] == "16")
            .expect("row");
        assert_eq!(row[col("kind")], "sysbench-tpcc");
        assert_eq!(row[col("builtin")], "");
        assert_eq!(row[col("p95_ms")], "8.000");
        assert_eq!(row[col("ignored_errors")], "100");
        assert_eq!(row[col("reconnects")], "0");
        let qps: f64 = row[col("qps_mean")].parse().expect("qps");
        assert!((qps - 4036.2 * 1.155 * 28.0).abs() < 0.01, "{qps}");
    }

    #[test]
    fn a_digest_keeps_a_tpcc_series_averaged_down_and_reads_old_digests_as_pgbench() {
        let series: Vec<(f64, f64)> = (1..=3600)
            .map(|s| (f64::from(s), f64::from(s % 2)))
            .collect();
        let d = downsample(&series, DIGEST_SERIES_SAMPLES);
        assert_eq!(d.len(), 600);
        assert_eq!(d[0], (6.0, 0.5));
        assert_eq!(d[599], (3600.0, 0.5));
        let short = [(1.0, 5.0), (2.0, 7.0)];
        assert_eq!(downsample(&short, DIGEST_SERIES_SAMPLES), short.to_vec());
        // A digest cached by a collector from before sysbench-tpcc.
        let mut old = serde_json::to_value(point("rw", "", 10, 100.0, 1.0)).expect("json");
        for k in ["kind", "qps", "ignored_errors", "reconnects", "tps_series"] {
            old.as_object_mut().expect("object").remove(k);
        }
        let p: DigestPoint = serde_json::from_value(old).expect("old digest reads");
        assert_eq!(p.kind, WorkloadKind::Pgbench);
        assert!(p.tps_series.is_empty());
    }

    fn run(appliance: &str, run_id: &str, price: f64, points: Vec<DigestPoint>) -> RunDigest {
        RunDigest {
            key: format!("{appliance}/m/{run_id}"),
            appliance: appliance.into(),
            run_id: run_id.into(),
            started_at: format!("2026-01-01T00:00:{}Z", &run_id[run_id.len() - 2..]),
            hourly_price_usd: price,
            cpu_model: "cpu".into(),
            cpus: 32,
            memory_bytes: 128 << 30,
            postgres_version: "13.1".into(),
            kernel: "5.4".into(),
            points,
            failed_points: 0,
        }
    }

    /// Scenario B's published figures: Graviton2 19 % faster read-write, 30 % read-only,
    /// checksums 1.7 %, 25 % cheaper.
    fn scenario_b() -> Vec<RunDigest> {
        vec![
            run(
                "m5d.8xlarge",
                "r-01",
                1.808,
                vec![
                    point("rw", "off", 16, 10_000.0, 4.0),
                    point("rw", "on", 16, 9_830.0, 4.1),
                    point("ro", "off", 16, 100_000.0, 0.4),
                ],
            ),
            run(
                "m6gd.8xlarge",
                "r-02",
                1.4464,
                vec![
                    point("rw", "off", 16, 11_900.0, 3.5),
                    point("rw", "on", 16, 11_700.0, 3.6),
                    point("ro", "off", 16, 130_000.0, 0.3),
                ],
            ),
        ]
    }

    #[test]
    fn the_finding_states_scenario_b() {
        let mut runs = scenario_b();
        for r in &mut runs {
            r.points = repeated(std::mem::take(&mut r.points));
        }
        let rows = rows(&runs);
        let base = baseline_index(&runs, None).expect("default baseline");
        assert_eq!(runs[base].appliance, "m5d.8xlarge", "first by name");
        let f = findings(&runs, &rows, base, 5.0);
        assert_eq!(f.len(), 2);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        let grav = rw
            .rows
            .iter()
            .find(|r| r.machine == "m6gd.8xlarge")
            .expect("m6gd row");
        let vs = grav.vs_baseline.as_ref().expect("vs");
        assert!((vs.change_pct() - 19.0).abs() < 1e-9);
        let (lo, hi) = vs.ci_pct().expect("three repeats a side");
        assert!(lo < 19.0 && hi > 19.0 && lo > 5.0, "{lo} … {hi}");
        assert_eq!(vs.verdict, Verdict::Faster);
        assert_eq!(grav.checksums, "off");
        let cost = grav.checksums_on.as_ref().expect("both states ran");
        assert!((cost.change_pct() + 200.0 / 119.0).abs() < 1e-9);
        assert_eq!(cost.verdict, Verdict::Small, "{:?}", cost.ci_pct());
        // 19 % more tps at 80 % of the price: 48.75 % more tps per dollar-hour.
        let (per, per_ci) = grav.per_dollar_vs_baseline.expect("priced");
        assert!(
            (per - (1.19 * 1.808 / 1.4464 - 1.0) * 100.0).abs() < 1e-9,
            "{per}"
        );
        assert!(per_ci.is_some_and(|(lo, hi)| lo < per && per < hi));
        assert!(
            rw.sentence.starts_with(
                "rw: m6gd.8xlarge is faster than m5d.8xlarge: +19.0 % (+1"
            ) && rw.sentence.contains(") at 16 clients; at 20.0 % cheaper per hour it gives +48.")
                && rw.sentence.contains(
                    "tps per dollar-hour. Data checksums on against off: m5d.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % (\u{2212}"
                )
                && rw.sentence.contains("; m6gd.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % ("),
            "{}",
            rw.sentence
        );
        let ro = f.iter().find(|f| f.workload == "ro").expect("ro");
        assert!(
            ro.sentence
                .contains("m6gd.8xlarge is faster than m5d.8xlarge: +30.0 % ("),
            "{}",
            ro.sentence
        );
        let base_row = &rw.rows[0];
        assert_eq!(base_row.machine, "m5d.8xlarge", "the baseline leads");
        assert_eq!(base_row.vs_baseline, None);
        // Another baseline turns the sign.
        let b2 = baseline_index(&runs, Some("m6gd.8xlarge")).expect("named");
        let f2 = findings(&runs, &rows, b2, 5.0);
        assert!(
            f2[1]
                .sentence
                .contains("m5d.8xlarge is slower than m6gd.8xlarge: \u{2212}16.0 % ("),
            "{}",
            f2[1].sentence
        );
        let err = baseline_index(&runs, Some("c7g")).expect_err("unknown");
        assert!(
            err.contains("\"c7g\"") && err.contains("m5d.8xlarge, m6gd.8xlarge"),
            "{err}"
        );
    }

    #[test]
    fn one_sample_and_noisy_points_are_named_never_judged() {
        // Scenario B as published: one sample of each point.
        let runs = scenario_b();
        let rows = super::rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        assert_eq!(
            rw.sentence,
            "rw: m6gd.8xlarge against m5d.8xlarge: one sample at 16 clients (+19.0 %, no interval). \
             Data checksums on against off: m5d.8xlarge: one sample at 16 clients (\u{2212}1.7 %, no interval); \
             m6gd.8xlarge: one sample at 16 clients (\u{2212}1.7 %, no interval)."
        );
        // A second repeat on one side: the one-sample point says what its noise suggests.
        let mut runs = scenario_b();
        runs[0].points.push(point("rw", "off", 16, 10_300.0, 4.0));
        let rows = super::rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        let vs = rw.rows[1].vs_baseline.as_ref().expect("vs");
        assert_eq!((vs.n, vs.n_baseline), (1, 2));
        assert!(vs.repeats_suggested.is_some());
        assert!(
            rw.sentence.contains("repeats a side would do)"),
            "{}",
            rw.sentence
        );
        // Repeats spread ±15 %: inconclusive, with the interval shown.
        let mut runs = scenario_b();
        runs[1].points.push(point("rw", "off", 16, 14_000.0, 3.5));
        runs[1].points.push(point("rw", "off", 16, 9_000.0, 3.5));
        runs[0].points.push(point("rw", "off", 16, 11_500.0, 4.0));
        runs[0].points.push(point("rw", "off", 16, 8_500.0, 4.0));
        let rows = super::rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        assert!(
            rw.sentence
                .starts_with("rw: m6gd.8xlarge against m5d.8xlarge is inconclusive at ±5 %: +"),
            "{}",
            rw.sentence
        );
    }

    /// A client count measured once is named beside the mean of the others, never in it.
    #[test]
    fn a_one_sample_count_is_named_beside_the_mean_of_the_others() {
        let points = |speed: f64| {
            let mut p = repeated(
                [10u32, 100, 250]
                    .iter()
                    .map(|&c| point("rw", "", c, 1000.0 * speed * f64::from(c).ln(), 1.0))
                    .collect(),
            );
            p.push(point("rw", "", 1000, 9000.0 * speed.powi(3), 1.0));
            p
        };
        let runs = vec![
            run("a", "r-01", 0.0, points(1.0)),
            run("b", "r-02", 0.0, points(1.2)),
        ];
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        assert_eq!(
            f[0].sentence.split(" (+").next(),
            Some("rw: b is faster than a: +20.0 %"),
            "{}",
            f[0].sentence
        );
        assert!(
            f[0].sentence
                .contains(") by the geometric mean over 3 client counts (10, 100, 250); one sample at 1000 clients (+72.8 %, no interval)."),
            "{}",
            f[0].sentence
        );
        assert_eq!(f[0].versus[0].mean.as_ref().map(|m| m.count), Some(3));
    }

    #[test]
    fn with_many_machines_the_sentence_groups_them_by_verdict() {
        let runs: Vec<RunDigest> = (0..6)
            .map(|i| {
                run(
                    &format!("m{i}"),
                    &format!("r-{i:02}"),
                    1.0 + f64::from(i),
                    repeated(vec![point(
                        "rw",
                        "",
                        10,
                        1000.0 * (1.0 + f64::from(i) / 10.0),
                        1.0,
                    )]),
                )
            })
            .collect();
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        assert_eq!(
            f[0].sentence,
            "rw: against m0 in tps, by the geometric mean over client counts at ±5 %, the 5 other \
             runs are: 5 faster (m1, m2, m3, m4, m5)."
        );
    }

    #[test]
    fn latest_run_per_machine_unless_all_runs_and_the_baseline_run_is_kept() {
        let runs = vec![
            run("a", "r-01", 0.0, vec![point("rw", "", 10, 100.0, 1.0)]),
            run("a", "r-03", 0.0, vec![point("rw", "", 10, 90.0, 1.2)]),
            run("b", "r-02", 0.0, vec![point("rw", "", 10, 80.0, 1.0)]),
            run("a", "r-02", 0.0, vec![point("rw", "", 10, 95.0, 1.0)]),
        ];
        let (shown, left) = select_runs(runs.clone(), false, None);
        let ids: Vec<&str> = shown.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["r-03", "r-02"]);
        assert_eq!(left, ["a/m/r-01", "a/m/r-02"]);
        assert_eq!(labels(&shown), ["a", "b"]);
        let (shown, left) = select_runs(runs.clone(), true, None);
        assert_eq!(shown.len(), 4);
        assert!(left.is_empty());
        assert_eq!(labels(&shown)[0], "a (r-01)");
        let (shown, _) = select_runs(runs, false, Some("r-01"));
        let ids: Vec<&str> = shown.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["r-01", "r-03", "r-02"]);
        assert_eq!(baseline_index(&shown, Some("r-01")), Ok(0));
        assert_eq!(
            baseline_index(&shown, Some("a")),
            Ok(0),
            "a machine's earliest shown run"
        );
    }

    #[test]
    fn regressions_are_slower_verdicts_worst_first_and_moves_without_one_are_listed_after() {
        let runs = vec![
            run(
                "a",
                "r-01",
                0.0,
                repeated(vec![
                    point("rw", "", 10, 1000.0, 10.0),
                    point("rw", "", 100, 2000.0, 20.0),
                    point("rw", "", 1000, 3000.0, 30.0),
                    point("ro", "", 10, 5000.0, 1.0),
                ]),
            ),
            run("a", "r-02", 0.0, {
                let mut p = repeated(vec![
                    // 4.9 % down: within 5 %.
                    point("rw", "", 10, 951.0, 10.0),
                    // 10 % down, p99 up 20 %.
                    point("rw", "", 100, 1800.0, 24.0),
                    // tps level, p99 up 6 %.
                    point("rw", "", 1000, 3000.0, 31.8),
                ]);
                // 30 % down, but one sample.
                p.push(point("ro", "", 10, 3500.0, 1.0));
                p
            }),
        ];
        let rows = rows(&runs);
        let labels = labels(&runs);
        let list = regressions(&rows, &labels[0], 5.0);
        // Each line leads with what regressed (or, unconfirmed, what moved).
        let lines: Vec<String> = list.iter().map(regression_line).collect();
        assert!(
            lines[0].starts_with("regressed: tps \u{2212}10.0 % (\u{2212}")
                && lines[0].contains(") slower and latency p99 +20.0 % (")
                && lines[0].ends_with(&format!(") higher: {} rw at 100 clients", labels[1])),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with(&format!(
                "regressed: latency p99 +6.0 % (+6.0 … +6.0) higher: {} rw at 1000 clients (tps +0.0 % (",
                labels[1]
            )) && lines[1].ends_with(") same)"),
            "{}",
            lines[1]
        );
        assert_eq!(
            lines[2],
            format!(
                "unconfirmed: tps \u{2212}30.0 % (one sample): {} ro at 10 clients (latency p99 +0.0 % (one sample))",
                labels[1]
            )
        );
        let got: Vec<(&str, u32, bool, bool, bool)> = list
            .iter()
            .map(|r| {
                (
                    r.workload.as_str(),
                    r.clients,
                    r.tps_fell,
                    r.p99_rose,
                    r.confirmed(),
                )
            })
            .collect();
        // p99 +6 % with identical repeats: an interval of no width above 5 %.
        assert_eq!(
            got,
            [
                ("rw", 100, true, true, true),
                ("rw", 1000, false, true, true),
                ("ro", 10, false, false, false)
            ]
        );
        assert!((list[2].tps_change_pct() + 30.0).abs() < 0.01);
        assert_eq!(list[2].tps_change.verdict, Verdict::OneSample);
        assert!(regressions(&rows, &labels[0], 50.0).is_empty());
        let html = render_index(
            &runs,
            &[],
            &IndexOptions {
                baseline: 0,
                threshold_pct: Some(5.0),
                left_out: &[],
                run_pages: &[],
                stores: &["file:///s".to_string()],
            },
        );
        let regress = html.find("id=\"regressions\"").expect("regressions");
        let finding = html.find("id=\"finding\"").expect("finding");
        assert!(finding < regress, "the finding stays first");
        assert!(html.contains("2 point(s) regressed by more than 5 %"));
        assert!(html.contains("1 more moved past 5 % by their figure alone"));
    }

    /// Two machines whose points are the same but for noise, three to six repeats: no
    /// client count, and no geometric mean, is ever called faster or slower.
    #[test]
    fn identical_machines_with_repeats_are_never_faster_or_slower() {
        let mut rng = stats::SplitMix64::new(4242);
        let clients = [10u32, 25, 50, 100, 250, 500, 1000];
        for trial in 0..100 {
            let repeats = 3 + trial % 4;
            let cv = [0.01, 0.03, 0.05][trial % 3];
            let machine = |rng: &mut stats::SplitMix64, name: &str, id: &str| {
                let mut points = Vec::new();
                for &c in &clients {
                    let truth = 1000.0 * f64::from(c).ln();
                    for tps in rng.repeats(truth, cv, repeats) {
                        points.push(point("rw", "", c, tps, 1.0));
                    }
                }
                run(name, id, 1.0, points)
            };
            let runs = vec![
                machine(&mut rng, "a", "r-01"),
                machine(&mut rng, "b", "r-02"),
            ];
            let rows = rows(&runs);
            let f = findings(&runs, &rows, 0, 5.0);
            let v = &f[0].versus[0];
            assert_eq!(v.points.len(), 7);
            for (c, p) in &v.points {
                assert!(
                    !matches!(p.verdict, Verdict::Faster | Verdict::Slower),
                    "trial {trial} at {c}: {:?}",
                    p.ci_pct()
                );
            }
            assert!(
                !matches!(v.verdict(), Verdict::Faster | Verdict::Slower),
                "trial {trial}: {}",
                f[0].sentence
            );
            assert!(regressions(&rows, "a", 5.0).iter().all(|r| !r.confirmed()));
        }
    }

    /// A machine 30 % faster at CV 3 % with three repeats: `faster` at every client count
    /// and by the geometric mean; findings.json carries each comparison.
    #[test]
    fn a_large_difference_is_faster_at_every_client_count_and_in_findings_json() {
        let mut rng = stats::SplitMix64::new(30);
        let clients = [10u32, 25, 50, 100, 250, 500, 1000];
        let machine = |rng: &mut stats::SplitMix64, name: &str, id: &str, speed: f64| {
            let mut points = Vec::new();
            for &c in &clients {
                for tps in rng.repeats(1000.0 * speed * f64::from(c).ln(), 0.03, 3) {
                    points.push(point("rw", "", c, tps, 1.0));
                }
            }
            run(name, id, 1.0, points)
        };
        let runs = vec![
            machine(&mut rng, "a", "r-01", 1.0),
            machine(&mut rng, "b", "r-02", 1.3),
        ];
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let v = &f[0].versus[0];
        assert!(
            v.points.iter().all(|p| p.1.verdict == Verdict::Faster),
            "{:?}",
            v.points
        );
        assert_eq!(v.verdict(), Verdict::Faster);
        assert!(
            f[0].sentence.starts_with("rw: b is faster than a: +")
                && f[0]
                    .sentence
                    .contains(") by the geometric mean over 7 client counts (10, 25, 50, 100, 250, 500, 1000);"),
            "{}",
            f[0].sentence
        );
        let json: serde_json::Value =
            serde_json::from_str(&findings_json(&runs, &rows, 0, 5.0)).expect("json");
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["threshold_pct"], 5.0);
        let entries = json["findings"].as_array().expect("findings");
        assert_eq!(entries.len(), 8, "7 points and their geometric mean");
        let e = &entries[0];
        for key in [
            "workload",
            "checksums",
            "clients",
            "machine",
            "baseline",
            "n",
            "n_baseline",
            "ratio",
            "ci_low",
            "ci_high",
            "p_value",
            "cliffs_delta",
            "verdict",
        ] {
            assert!(e.get(key).is_some(), "{key}: {e}");
        }
        assert_eq!(e["verdict"], "faster");
        assert_eq!(
            (e["n"].as_u64(), e["n_baseline"].as_u64()),
            (Some(3), Some(3))
        );
        assert_eq!(e["cliffs_delta"], 1.0);
        let geo = &entries[7];
        assert_eq!(geo["scope"], "geometric_mean");
        assert!(geo["clients"].is_null());
        assert_eq!(geo["client_counts"].as_array().map(Vec::len), Some(7));
        let html = render_index(
            &runs,
            &[],
            &IndexOptions {
                baseline: 0,
                threshold_pct: None,
                left_out: &[],
                run_pages: &[],
                stores: &["file:///s".to_string()],
            },
        );
        assert_eq!(
            html.matches("class=\"error-bar\"").count(),
            14 * 2,
            "tps and p99 bars of 2 machines × 7 counts"
        );
    }

    #[test]
    fn csv_keeps_every_percentile() {
        let runs = scenario_b();
        let csv = summary_csv(&rows(&runs));
        let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
        for col in [
            "p25_ms", "p50_ms", "p75_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms",
        ] {
            assert!(header.contains(&col), "{col}: {header:?}");
        }
        let first: Vec<&str> = csv
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[0] == "m5d.8xlarge" && f[2] == "rw" && f[4] == "off")
            .expect("m5d rw row");
        let at = |c: &str| first[header.iter().position(|h| *h == c).expect(c)];
        assert_eq!(at("p99_9_ms"), "6.000");
        assert_eq!(at("max_ms"), "12.000");
        assert_eq!(at("p90_ms"), "2.667");
    }
}
