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
use crate::report::{escape, line_chart, load_unit, Series};
use crate::results::{PointStatus, RunResults};

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

    /// The spread of the repeats relative to their mean, in percent (0 for one sample).
    fn spread_pct(&self) -> f64 {
        if self.tps_mean > 0.0 {
            (self.tps_max - self.tps_min) / self.tps_mean * 100.0
        } else {
            0.0
        }
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
                tps_mean,
                tps_min: tps.iter().cloned().fold(f64::MAX, f64::min),
                tps_max: tps.iter().cloned().fold(f64::MIN, f64::max),
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

/// `new` against `base`, in percent.
fn change_pct(new: f64, base: f64) -> Option<f64> {
    (base > 0.0 && new.is_finite()).then(|| (new - base) / base * 100.0)
}

/// The row that stands for a machine at a workload and client count: checksums off when it
/// ran both states, else whatever state it ran.
fn primary<'a>(rows: &[&'a Row]) -> Option<&'a Row> {
    ["off", "", "on"]
        .iter()
        .find_map(|cs| rows.iter().find(|r| r.checksums == *cs).copied())
}

/// One line of a workload's finding table.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingRow {
    pub clients: u32,
    pub machine: String,
    /// Which checksum state the tps is of (`"off"` when the machine ran both).
    pub checksums: String,
    pub tps: f64,
    pub vs_baseline_pct: Option<f64>,
    /// tps lost by turning data checksums on, in percent of the tps with them off, where
    /// the machine ran both; and the spread of the repeats behind those two figures.
    pub checksums_cost_pct: Option<f64>,
    pub checksums_spread_pct: f64,
    pub hourly_price_usd: f64,
    pub tps_per_dollar_hour: Option<f64>,
    pub per_dollar_vs_baseline_pct: Option<f64>,
}

/// The finding for one workload: a table by client (thread) count and machine, and a
/// sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadFinding {
    pub workload: String,
    pub kind: WorkloadKind,
    pub builtin: String,
    pub baseline: String,
    pub rows: Vec<FindingRow>,
    pub sentence: String,
}

/// The findings of every workload, against the run at `baseline` (an index into `runs`).
pub fn findings(runs: &[RunDigest], rows: &[Row], baseline: usize) -> Vec<WorkloadFinding> {
    let labels = labels(runs);
    let base_label = &labels[baseline];
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
        for &c in &clients {
            let base_row = base.and_then(|b| b.get(&c)).and_then(|v| primary(v));
            // The baseline first, then the other machines by label.
            let mut machines: Vec<&str> = grid.keys().copied().collect();
            machines.sort_by_key(|m| (*m != base_label.as_str(), *m));
            for m in machines {
                let Some(states) = grid[m].get(&c) else {
                    continue;
                };
                let Some(row) = primary(states) else { continue };
                let on = states.iter().find(|r| r.checksums == "on");
                let off = states.iter().find(|r| r.checksums == "off");
                let (cost, spread) = match (on, off) {
                    (Some(on), Some(off)) => (
                        change_pct(on.tps_mean, off.tps_mean).map(|p| -p),
                        on.spread_pct().max(off.spread_pct()),
                    ),
                    _ => (None, 0.0),
                };
                let is_base = m == base_label.as_str();
                table.push(FindingRow {
                    clients: c,
                    machine: m.to_string(),
                    checksums: row.checksums.clone(),
                    tps: row.tps_mean,
                    vs_baseline_pct: base_row
                        .filter(|_| !is_base)
                        .and_then(|b| change_pct(row.tps_mean, b.tps_mean)),
                    checksums_cost_pct: cost,
                    checksums_spread_pct: spread,
                    hourly_price_usd: row.hourly_price_usd,
                    tps_per_dollar_hour: row.tps_per_dollar_hour(),
                    per_dollar_vs_baseline_pct: base_row.filter(|_| !is_base).and_then(|b| {
                        change_pct(row.tps_per_dollar_hour()?, b.tps_per_dollar_hour()?)
                    }),
                });
            }
        }
        let sentence = sentence(workload, kind, base_label, &table);
        out.push(WorkloadFinding {
            workload: workload.to_string(),
            kind,
            builtin: wrows[0].builtin.clone(),
            baseline: base_label.clone(),
            rows: table,
            sentence,
        });
    }
    out
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
            "over {} {} counts ({})",
            list.len(),
            unit.trim_end_matches('s'),
            list.join(", ")
        ),
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

/// Machines named one by one in a summary sentence; beyond this it gives the range.
const NAMED_IN_SENTENCE: usize = 3;

/// One machine against the baseline over the client counts both ran.
struct Versus<'a> {
    machine: &'a str,
    counts: Vec<u32>,
    /// Geometric mean of the tps ratios, as a change in percent.
    tps_pct: f64,
    /// The machine's price against the baseline's, and tps per dollar-hour, in percent.
    price_pct: Option<f64>,
    per_dollar_pct: Option<f64>,
}

fn versus<'a>(baseline: &str, table: &'a [FindingRow]) -> (Vec<Versus<'a>>, Vec<&'a str>) {
    let machines: BTreeSet<&str> = table
        .iter()
        .map(|r| r.machine.as_str())
        .filter(|m| *m != baseline)
        .collect();
    let base_at: BTreeMap<u32, &FindingRow> = table
        .iter()
        .filter(|r| r.machine == baseline)
        .map(|r| (r.clients, r))
        .collect();
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for m in machines {
        let pairs: Vec<(&FindingRow, &FindingRow)> = table
            .iter()
            .filter(|r| r.machine == m)
            .filter_map(|r| Some((r, *base_at.get(&r.clients)?)))
            .filter(|(r, b)| r.tps > 0.0 && b.tps > 0.0)
            .collect();
        if pairs.is_empty() {
            unmatched.push(m);
            continue;
        }
        let geo = |f: &dyn Fn(&FindingRow) -> Option<f64>| -> Option<f64> {
            let logs: Vec<f64> = pairs
                .iter()
                .map(|(r, b)| Some((f(r)? / f(b)?).ln()))
                .collect::<Option<Vec<f64>>>()?;
            Some((mean(&logs)?.exp() - 1.0) * 100.0)
        };
        let (price, base_price) = (pairs[0].0.hourly_price_usd, pairs[0].1.hourly_price_usd);
        out.push(Versus {
            machine: m,
            counts: pairs.iter().map(|(r, _)| r.clients).collect(),
            tps_pct: geo(&|r| Some(r.tps)).unwrap_or(0.0),
            price_pct: (price > 0.0 && base_price > 0.0)
                .then(|| (price - base_price) / base_price * 100.0),
            per_dollar_pct: geo(&|r| r.tps_per_dollar_hour),
        });
    }
    (out, unmatched)
}

/// The generated summary of one workload, in the style of a study's conclusion: each
/// machine against the baseline (the geometric mean of its tps ratios over the client counts
/// both ran), its price and tps per dollar-hour, and the cost of data checksums. With more
/// than a few machines it gives the range and who is at either end instead.
fn sentence(workload: &str, kind: WorkloadKind, baseline: &str, table: &[FindingRow]) -> String {
    let (all, unmatched) = versus(baseline, table);
    let tps = tps_word(kind);
    // pgbench's sentence keeps its plain "faster"; TPC-C's says what was measured.
    let faster = match kind {
        WorkloadKind::Pgbench => ("faster", "slower"),
        WorkloadKind::SysbenchTpcc => ("faster in TPC-C tps", "slower in TPC-C tps"),
    };
    let mut parts = Vec::new();
    if all.len() <= NAMED_IN_SENTENCE {
        for v in &all {
            let mut s = format!(
                "{} is {} than {baseline} {}",
                v.machine,
                more_or_less(v.tps_pct, faster.0, faster.1),
                client_list(kind, &v.counts)
            );
            if let (Some(price), Some(per_dollar)) = (v.price_pct, v.per_dollar_pct) {
                let _ = write!(
                    s,
                    "; at {} per hour it gives {} {tps} per dollar-hour",
                    more_or_less(price, "dearer", "cheaper"),
                    more_or_less(per_dollar, "more", "less")
                );
            }
            parts.push(s);
        }
    } else {
        let by = |f: fn(&Versus) -> Option<f64>| {
            let mut v: Vec<(&Versus, f64)> = all.iter().filter_map(|v| Some((v, f(v)?))).collect();
            v.sort_by(|a, b| a.1.total_cmp(&b.1));
            v
        };
        let by_tps = by(|v| Some(v.tps_pct));
        if let (Some(lo), Some(hi)) = (by_tps.first(), by_tps.last()) {
            parts.push(format!(
                "against {baseline}, the {} other runs range from {:+.1} % ({}) to {:+.1} % ({}) in {tps}",
                all.len(),
                lo.1,
                lo.0.machine,
                hi.1,
                hi.0.machine
            ));
        }
        let per_dollar = by(|v| v.per_dollar_pct);
        if let Some(best) = per_dollar.last() {
            parts.push(format!(
                "the most {tps} per dollar-hour is {}'s ({:+.1} %)",
                best.0.machine, best.1
            ));
        }
    }
    if !unmatched.is_empty() {
        parts.push(format!(
            "{} ran no client count that {baseline} ran",
            unmatched.join(", ")
        ));
    }
    let mut costs: BTreeMap<&str, (Vec<f64>, f64)> = BTreeMap::new();
    for r in table {
        if let Some(c) = r.checksums_cost_pct {
            let e = costs.entry(&r.machine).or_default();
            e.0.push(c);
            e.1 = e.1.max(r.checksums_spread_pct);
        }
    }
    let costs: Vec<(&str, f64, f64)> = costs
        .into_iter()
        .map(|(m, (c, spread))| (m, mean(&c).unwrap_or(0.0), spread))
        .collect();
    let checks = if costs.len() <= NAMED_IN_SENTENCE {
        costs
            .iter()
            .map(|(m, cost, spread)| {
                let noise = if *spread > 0.0 && cost.abs() <= *spread {
                    format!(", within the {spread:.1} % spread of its repeats")
                } else {
                    String::new()
                };
                format!("{cost:.1} % on {m}{noise}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        let lo = costs.iter().map(|c| c.1).fold(f64::MAX, f64::min);
        let hi = costs.iter().map(|c| c.1).fold(f64::MIN, f64::max);
        format!(
            "{lo:.1} to {hi:.1} % on the {} runs that ran both",
            costs.len()
        )
    };
    let mut text = format!("{workload}: ");
    if parts.is_empty() {
        let _ = write!(text, "only {baseline} ran this workload");
    } else {
        text.push_str(&parts.join("; "));
    }
    if !checks.is_empty() {
        let _ = write!(text, ". Turning data checksums on cost {checks}");
    }
    text.push('.');
    text
}

/// A point that fell against the baseline by more than the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub machine: String,
    pub workload: String,
    pub kind: WorkloadKind,
    pub checksums: String,
    pub clients: u32,
    pub baseline_tps: f64,
    pub tps: f64,
    pub tps_change_pct: f64,
    pub baseline_p99_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_change_pct: Option<f64>,
    /// tps fell by more than the threshold.
    pub tps_fell: bool,
    /// Latency p99 rose by more than the threshold.
    pub p99_rose: bool,
}

/// Every point of every run but the baseline whose tps fell by more than `threshold_pct`
/// against the baseline's point of the same workload, checksum state and client count, or
/// whose latency p99 rose by more than it; worst tps change first.
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
    let mut out: Vec<Regression> = rows
        .iter()
        .filter(|r| r.machine != baseline)
        .filter_map(|r| {
            let b = base.get(&key(r))?;
            let tps_change = change_pct(r.tps_mean, b.tps_mean)?;
            let p99_change = match (r.latency.p99, b.latency.p99) {
                (Some(p), Some(bp)) => change_pct(p, bp),
                _ => None,
            };
            let tps_fell = tps_change < -threshold_pct;
            let p99_rose = p99_change.is_some_and(|c| c > threshold_pct);
            (tps_fell || p99_rose).then(|| Regression {
                machine: r.machine.clone(),
                workload: r.workload.clone(),
                kind: r.kind,
                checksums: r.checksums.clone(),
                clients: r.clients,
                baseline_tps: b.tps_mean,
                tps: r.tps_mean,
                tps_change_pct: tps_change,
                baseline_p99_ms: b.latency.p99,
                p99_ms: r.latency.p99,
                p99_change_pct: p99_change,
                tps_fell,
                p99_rose,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        a.tps_change_pct.total_cmp(&b.tps_change_pct).then_with(|| {
            (&a.machine, &a.workload, a.clients).cmp(&(&b.machine, &b.workload, b.clients))
        })
    });
    out
}

/// What the index page says beyond the runs themselves.
pub struct IndexOptions<'a> {
    /// The baseline run (an index into the shown runs).
    pub baseline: usize,
    /// The regression threshold in percent, when a check was asked for.
    pub threshold_pct: Option<f64>,
    /// Runs found but not shown (older runs of a machine), by key.
    pub left_out: &'a [String],
    /// Each shown run's page, relative to the index (same order as the runs).
    pub run_pages: &'a [String],
    pub stores: &'a [String],
}

fn pct_cell(v: Option<f64>) -> String {
    match v {
        Some(p) => format!("{p:+.1} %"),
        None => "—".into(),
    }
}

fn num_cell(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "—".into())
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1200px;font-size:15px}table{border-collapse:collapse;font-size:14px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}tr.base td{background:#f6f9ff}td.bad{color:#b00;font-weight:bold}p.finding{font-size:16px;background:#f8f8f0;border-left:4px solid #999;padding:0.4em 0.8em}";

fn series_of(rows: &[&Row], pick: fn(&Row) -> Option<f64>) -> Vec<Series> {
    let mut by: BTreeMap<&str, BTreeMap<u32, Vec<&Row>>> = BTreeMap::new();
    for r in rows {
        by.entry(&r.machine)
            .or_default()
            .entry(r.clients)
            .or_default()
            .push(r);
    }
    by.into_iter()
        .map(|(name, at)| Series {
            name: name.to_string(),
            points: at
                .into_iter()
                .filter_map(|(c, states)| Some((f64::from(c), pick(primary(&states)?)?)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
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
        if let Some(t) = o.threshold_pct {
            regressions_section(&mut h, &regressions(&rows, base, t), base, t);
        }
        finding_section(&mut h, &findings(runs, &rows, o.baseline), base);
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

fn regressions_section(h: &mut String, list: &[Regression], base: &str, threshold: f64) {
    let _ = write!(
        h,
        "<h2 id=\"regressions\">Regressions against {}</h2>",
        escape(base)
    );
    if list.is_empty() {
        let _ = write!(
            h,
            "<p>No point's tps fell, nor its latency p99 rose, by more than {threshold} %.</p>"
        );
        return;
    }
    let _ = write!(
        h,
        "<p class=\"finding\">{} point(s) regressed by more than {threshold} % (tps fell or latency p99 rose), worst first.</p><table id=\"regression-table\"><tr><th class=\"l\">machine</th><th class=\"l\">workload</th><th>clients</th><th>baseline tps</th><th>tps</th><th>change</th><th>baseline p99 ms</th><th>p99 ms</th><th>change</th></tr>",
        list.len()
    );
    for r in list {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
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
            pct_cell(Some(r.tps_change_pct)),
            num_cell(r.baseline_p99_ms, 3),
            num_cell(r.p99_ms, 3),
            if r.p99_rose { "bad" } else { "" },
            pct_cell(r.p99_change_pct),
        );
    }
    h.push_str("</table>");
}

fn finding_section(h: &mut String, findings: &[WorkloadFinding], base: &str) {
    let _ = write!(
        h,
        "<h2 id=\"finding\">Finding</h2><p>Each machine against the baseline <b>{}</b> (<code>--baseline</code>), per workload and client count. tps is with data checksums off where a machine ran both states; the checksums column is the tps lost by turning them on.</p>",
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
            "<h3>{} ({})</h3><p class=\"finding\">{}</p><table class=\"finding-table\"><tr><th>{}</th><th class=\"l\">machine</th><th>{tps}</th><th>vs baseline</th><th>checksums cost</th><th>$/hour</th><th>{tps} per $/hour</th><th>vs baseline</th></tr>",
            escape(&f.workload),
            escape(&what),
            escape(&f.sentence),
            load_unit(f.kind),
        );
        for r in &f.rows {
            let _ = write!(
                h,
                "<tr{}><td>{}</td><td class=\"l\">{}{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if r.machine == f.baseline { " class=\"base\"" } else { "" },
                r.clients,
                escape(&r.machine),
                if r.machine == f.baseline { " (baseline)" } else { "" },
                r.tps,
                if r.machine == f.baseline { "baseline".into() } else { pct_cell(r.vs_baseline_pct) },
                match r.checksums_cost_pct {
                    Some(c) => format!("{c:.1} %"),
                    None => "—".into(),
                },
                if r.hourly_price_usd > 0.0 { format!("{:.4}", r.hourly_price_usd) } else { "—".into() },
                num_cell(r.tps_per_dollar_hour, 0),
                if r.machine == f.baseline { "baseline".into() } else { pct_cell(r.per_dollar_vs_baseline_pct) },
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
        h.push_str(&line_chart(
            &format!("{workload}: {tps} by {unit}"),
            unit,
            tps,
            &series_of(&wrows, |r| Some(r.tps_mean)),
            true,
        ));
        // pgbench's latency log gives p99; sysbench reports its 95th percentile.
        let (label, pick): (&str, fn(&Row) -> Option<f64>) = match kind {
            WorkloadKind::Pgbench => ("p99", |r| r.latency.p99),
            WorkloadKind::SysbenchTpcc => ("p95", |r| r.latency.p95),
        };
        h.push_str(&line_chart(
            &format!("{workload}: latency {label} by {unit}"),
            unit,
            "ms",
            &series_of(&wrows, pick),
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

    #[test]
    fn a_tpcc_finding_speaks_of_tpcc_tps_over_thread_counts() {
        let mut runs = scenario_b_tpcc();
        // A pgbench workload of the same name is its own finding, not mixed in.
        runs[0].points.push(point("tpcc-mem", "", 16, 1.0, 1.0));
        runs[1].points.push(point("tpcc-mem", "", 16, 2.0, 1.0));
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0);
        assert_eq!(f.len(), 2, "{f:?}");
        let t = f
            .iter()
            .find(|f| f.kind == WorkloadKind::SysbenchTpcc)
            .expect("TPC-C finding");
        let geo = ((1.155f64 * 1.08 * 1.045 * 1.014).powf(0.25) - 1.0) * 100.0;
        assert!(
            t.sentence.starts_with(&format!(
                "tpcc-mem: m6gd.8xlarge is {geo:.1} % faster in TPC-C tps than m5d.8xlarge over 4 thread counts (16, 32, 64, 128); at 20.0 % cheaper per hour it gives"
            )) && t.sentence.contains("% more TPC-C tps per dollar-hour"),
            "{}",
            t.sentence
        );
        let at16 = t
            .rows
            .iter()
            .find(|r| r.clients == 16 && r.machine == "m6gd.8xlarge")
            .expect("16 threads");
        assert!((at16.vs_baseline_pct.expect("vs") - 15.5).abs() < 1e-9);
        let pg = f
            .iter()
            .find(|f| f.kind == WorkloadKind::Pgbench)
            .expect("pgbench finding");
        assert!(
            pg.sentence
                .contains("m6gd.8xlarge is 100.0 % faster than m5d.8xlarge at 16 clients"),
            "{}",
            pg.sentence
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
        assert!(html.contains("<th>threads</th><th class=\"l\">machine</th><th>TPC-C tps</th>"));
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
        let runs = scenario_b();
        let rows = rows(&runs);
        let base = baseline_index(&runs, None).expect("default baseline");
        assert_eq!(runs[base].appliance, "m5d.8xlarge", "first by name");
        let f = findings(&runs, &rows, base);
        assert_eq!(f.len(), 2);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        let grav = rw
            .rows
            .iter()
            .find(|r| r.machine == "m6gd.8xlarge")
            .expect("m6gd row");
        assert!((grav.vs_baseline_pct.expect("vs") - 19.0).abs() < 1e-9);
        assert_eq!(grav.checksums, "off");
        let cost = grav.checksums_cost_pct.expect("both states ran");
        assert!((cost - 200.0 / 119.0).abs() < 1e-9, "{cost}");
        // 19 % more tps at 80 % of the price: 48.75 % more tps per dollar-hour.
        let per = grav.per_dollar_vs_baseline_pct.expect("priced");
        assert!(
            (per - (1.19 * 1.808 / 1.4464 - 1.0) * 100.0).abs() < 1e-9,
            "{per}"
        );
        assert!(
            rw.sentence.starts_with(
                "rw: m6gd.8xlarge is 19.0 % faster than m5d.8xlarge at 16 clients; at 20.0 % \
                 cheaper per hour it gives 48."
            ) && rw.sentence.ends_with(
                "% more tps per dollar-hour. Turning data checksums on cost 1.7 % on \
                 m5d.8xlarge, 1.7 % on m6gd.8xlarge."
            ),
            "{}",
            rw.sentence
        );
        let ro = f.iter().find(|f| f.workload == "ro").expect("ro");
        assert!(
            ro.sentence.contains("m6gd.8xlarge is 30.0 % faster"),
            "{}",
            ro.sentence
        );
        let base_row = &rw.rows[0];
        assert_eq!(base_row.machine, "m5d.8xlarge", "the baseline leads");
        assert_eq!(base_row.vs_baseline_pct, None);
        // Another baseline turns the sign.
        let b2 = baseline_index(&runs, Some("m6gd.8xlarge")).expect("named");
        let f2 = findings(&runs, &rows, b2);
        assert!(
            f2[1]
                .sentence
                .contains("m5d.8xlarge is 16.0 % slower than m6gd.8xlarge"),
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
    fn checksum_cost_within_the_spread_of_repeats_is_called_so() {
        let mut runs = scenario_b();
        runs[1].points.push(point("rw", "off", 16, 12_500.0, 3.5));
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0);
        let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
        assert!(
            rw.sentence.contains("on m6gd.8xlarge, within the"),
            "{}",
            rw.sentence
        );
    }

    #[test]
    fn with_many_machines_the_sentence_gives_the_range() {
        let runs: Vec<RunDigest> = (0..6)
            .map(|i| {
                run(
                    &format!("m{i}"),
                    &format!("r-{i:02}"),
                    1.0 + f64::from(i),
                    vec![point(
                        "rw",
                        "",
                        10,
                        1000.0 * (1.0 + f64::from(i) / 10.0),
                        1.0,
                    )],
                )
            })
            .collect();
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0);
        assert_eq!(
            f[0].sentence,
            "rw: against m0, the 5 other runs range from +10.0 % (m1) to +50.0 % (m5) in tps; \
             the most tps per dollar-hour is m1's (-45.0 %)."
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
    fn regressions_are_points_past_the_threshold_worst_first() {
        let runs = vec![
            run(
                "a",
                "r-01",
                0.0,
                vec![
                    point("rw", "", 10, 1000.0, 10.0),
                    point("rw", "", 100, 2000.0, 20.0),
                    point("rw", "", 1000, 3000.0, 30.0),
                    point("ro", "", 10, 5000.0, 1.0),
                ],
            ),
            run(
                "a",
                "r-02",
                0.0,
                vec![
                    // 4.9 % down: within 5 %.
                    point("rw", "", 10, 951.0, 10.0),
                    // 10 % down, p99 up 20 %.
                    point("rw", "", 100, 1800.0, 24.0),
                    // tps level, p99 up 6 %.
                    point("rw", "", 1000, 3000.0, 31.8),
                    // 30 % down.
                    point("ro", "", 10, 3500.0, 1.0),
                ],
            ),
        ];
        let rows = rows(&runs);
        let labels = labels(&runs);
        let list = regressions(&rows, &labels[0], 5.0);
        let got: Vec<(&str, u32, bool, bool)> = list
            .iter()
            .map(|r| (r.workload.as_str(), r.clients, r.tps_fell, r.p99_rose))
            .collect();
        assert_eq!(
            got,
            [
                ("ro", 10, true, false),
                ("rw", 100, true, true),
                ("rw", 1000, false, true)
            ]
        );
        assert!((list[0].tps_change_pct + 30.0).abs() < 1e-9);
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
        assert!(regress < finding, "regressions are listed first");
        assert!(html.contains("3 point(s) regressed by more than 5 %"));
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
