//! `collect`'s `summary.csv` (presentation: the rows as they are).

use crate::csv::CsvWriter;

use super::model::Row;

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
