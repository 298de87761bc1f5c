//! The cross-machine comparison `pgappliance collect` publishes: scaling curves of every
//! machine on one chart, latency percentiles, and price/performance (tps per dollar-hour),
//! as a self-contained `index.html` and a `summary.csv` (one row per machine × workload ×
//! clients). Pure: runs in, text out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::csv::CsvWriter;
use crate::plan::Checksums;
use crate::report::{escape, line_chart, Series};
use crate::results::{PointStatus, RunResults};

/// One run as collected, with where it came from.
pub struct CollectedRun {
    pub key: String,
    pub results: RunResults,
}

/// A run that was not used, and why.
pub struct SkippedRun {
    pub key: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub machine: String,
    pub run_id: String,
    pub workload: String,
    pub builtin: String,
    pub checksums: String,
    pub clients: u32,
    pub samples: usize,
    pub tps_mean: f64,
    pub tps_min: f64,
    pub tps_max: f64,
    pub latency_avg_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub hourly_price_usd: f64,
}

impl Row {
    pub fn tps_per_dollar_hour(&self) -> Option<f64> {
        (self.hourly_price_usd > 0.0).then(|| self.tps_mean / self.hourly_price_usd)
    }
    fn series(&self) -> String {
        let cs = match self.checksums.as_str() {
            "" => String::new(),
            c => format!(", checksums {c}"),
        };
        format!("{} {}{cs}", self.machine, self.workload)
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Machine labels: the appliance name, with the run id when one appliance has several runs.
fn labels(runs: &[CollectedRun]) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *count.entry(r.results.appliance.as_str()).or_default() += 1;
    }
    runs.iter()
        .map(|r| {
            if count[r.results.appliance.as_str()] > 1 {
                format!("{} ({})", r.results.appliance, r.results.run_id)
            } else {
                r.results.appliance.clone()
            }
        })
        .collect()
}

/// Rows: successful points grouped by machine × workload × checksums × clients.
pub fn rows(runs: &[CollectedRun]) -> Vec<Row> {
    let mut out = Vec::new();
    for (run, machine) in runs.iter().zip(labels(runs)) {
        let r = &run.results;
        let mut groups: BTreeMap<(String, String, u32), Vec<&crate::results::PointResult>> =
            BTreeMap::new();
        for p in r.points.iter().filter(|p| p.status == PointStatus::Ok) {
            let cs = Checksums::label(p.checksums);
            groups
                .entry((p.workload.clone(), cs.to_string(), p.clients))
                .or_default()
                .push(p);
        }
        for ((workload, checksums, clients), points) in groups {
            let tps: Vec<f64> = points.iter().filter_map(|p| p.tps()).collect();
            let Some(tps_mean) = mean(&tps) else { continue };
            let lat = |f: fn(&crate::pgbench::LatencyStats) -> Option<f64>| {
                mean(
                    &points
                        .iter()
                        .filter_map(|p| p.latency.as_ref().and_then(f))
                        .collect::<Vec<_>>(),
                )
            };
            out.push(Row {
                machine: machine.clone(),
                run_id: r.run_id.clone(),
                builtin: points[0].builtin.pgbench_name().to_string(),
                workload,
                checksums,
                clients,
                samples: tps.len(),
                tps_mean,
                tps_min: tps.iter().cloned().fold(f64::MAX, f64::min),
                tps_max: tps.iter().cloned().fold(f64::MIN, f64::max),
                latency_avg_ms: mean(
                    &points
                        .iter()
                        .filter_map(|p| p.summary.as_ref().map(|s| s.latency_avg_ms))
                        .collect::<Vec<_>>(),
                ),
                p50_ms: lat(|l| l.p50_ms),
                p95_ms: lat(|l| l.p95_ms),
                p99_ms: lat(|l| l.p99_ms),
                hourly_price_usd: r.hourly_price_usd,
            });
        }
    }
    out
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
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "hourly_price_usd",
        "tps_per_dollar_hour",
    ]);
    for r in rows {
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
            opt(r.p50_ms),
            opt(r.p95_ms),
            opt(r.p99_ms),
            r.hourly_price_usd.to_string(),
            opt(r.tps_per_dollar_hour()),
        ]);
    }
    w.finish()
}

fn series_by(rows: &[Row], pick: fn(&Row) -> Option<f64>) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        if let Some(v) = pick(r) {
            by.entry(r.series())
                .or_default()
                .push((f64::from(r.clients), v));
        }
    }
    by.into_iter()
        .map(|(name, points)| Series { name, points })
        .collect()
}

pub fn render_index(runs: &[CollectedRun], skipped: &[SkippedRun]) -> String {
    let rows = rows(runs);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pgappliance comparison</title><style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px;margin-bottom:1em}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f4f4f4}}td.l,th.l{{text-align:left}}</style></head><body><h1>pgappliance comparison</h1><p>{} run(s) compared",
        runs.len()
    );
    if !skipped.is_empty() {
        let _ = write!(h, ", {} skipped", skipped.len());
    }
    h.push_str(".</p><h2>Machines</h2><table><tr><th class=\"l\">machine</th><th class=\"l\">run</th><th class=\"l\">CPU</th><th>CPUs</th><th>RAM GiB</th><th class=\"l\">PostgreSQL</th><th>$/hour</th></tr>");
    for (run, label) in runs.iter().zip(labels(runs)) {
        let r = &run.results;
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{:.0}</td><td class=\"l\">{}</td><td>{}</td></tr>",
            escape(&label),
            escape(&r.run_id),
            escape(r.inventory.cpu.model_name.as_deref().unwrap_or("?")),
            r.inventory.cpu.cpus,
            r.inventory.memory_bytes as f64 / (1u64 << 30) as f64,
            escape(&r.postgres.version),
            if r.hourly_price_usd > 0.0 { format!("{:.4}", r.hourly_price_usd) } else { "—".into() }
        );
    }
    h.push_str("</table><h2>Throughput by clients</h2>");
    h.push_str(&line_chart(
        "tps vs clients",
        "clients",
        "tps",
        &series_by(&rows, |r| Some(r.tps_mean)),
        true,
    ));
    h.push_str("<h2>Latency by clients</h2>");
    h.push_str(&line_chart(
        "p50 latency vs clients",
        "clients",
        "ms",
        &series_by(&rows, |r| r.p50_ms),
        true,
    ));
    h.push_str(&line_chart(
        "p99 latency vs clients",
        "clients",
        "ms",
        &series_by(&rows, |r| r.p99_ms),
        true,
    ));
    h.push_str("<h2>Price / performance</h2><p>Best mean tps of each machine and workload, and that per dollar-hour of the machine's price.</p><table><tr><th class=\"l\">machine</th><th class=\"l\">workload</th><th>clients</th><th>tps</th><th>$/hour</th><th>tps per $/hour</th></tr>");
    let mut best: BTreeMap<String, &Row> = BTreeMap::new();
    for r in &rows {
        let e = best.entry(r.series()).or_insert(r);
        if r.tps_mean > e.tps_mean {
            *e = r;
        }
    }
    for r in best.values() {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.machine),
            escape(&r.workload),
            if r.checksums.is_empty() { String::new() } else { format!(" (checksums {})", r.checksums) },
            r.clients,
            r.tps_mean,
            if r.hourly_price_usd > 0.0 { format!("{:.4}", r.hourly_price_usd) } else { "—".into() },
            r.tps_per_dollar_hour().map(|v| format!("{v:.0}")).unwrap_or_else(|| "—".into()),
        );
    }
    h.push_str("</table>");
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
