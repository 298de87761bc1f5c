//! The comparison page's charts (inline SVG through `crate::report`'s chart writers) and
//! the latency and TPC-C tables beside them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::{escape, line_chart, line_chart_with_bars, load_unit, PointBars, Series};
use crate::workload::Tail;

use super::findings::primary;
use super::html::num_cell;
use super::model::{by_workload, shown, Row};
use super::prose::tps_word;
use super::stats;

/// One series per machine of a figure by client count, and each point's error bar (the 95 %
/// interval of the mean of its repeats) or one-sample mark. A machine that ran both
/// checksum states gets a line for each, `(checksums off)` and `(checksums on)`; any other
/// machine one line, named by the machine alone.
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
    let mut out = Vec::new();
    for (name, at) in by {
        let ran = |cs: &str| at.values().flatten().any(|r| r.checksums == cs);
        let lines: Vec<(String, Option<&str>)> = if ran("on") && ran("off") {
            vec![
                (format!("{name} (checksums off)"), Some("off")),
                (format!("{name} (checksums on)"), Some("on")),
            ]
        } else {
            vec![(name.to_string(), None)]
        };
        for (label, state) in lines {
            let mut points = Vec::new();
            let mut bars = Vec::new();
            for (c, states) in &at {
                let row = match state {
                    Some(cs) => states.iter().find(|r| r.checksums == cs).copied(),
                    None => primary(states),
                };
                let Some(row) = row else { continue };
                let Some(y) = pick(row) else { continue };
                points.push((f64::from(*c), y));
                // No per-repeat figures (sysbench's p95): no mark either way.
                if !samples(row).is_empty() {
                    bars.push((f64::from(*c), stats::mean_interval(samples(row))));
                }
            }
            if !points.is_empty() {
                out.push((
                    Series {
                        name: label,
                        points,
                    },
                    bars,
                ));
            }
        }
    }
    out.into_iter().unzip()
}

pub(super) fn charts_section(h: &mut String, rows: &[Row]) {
    if !rows.is_empty() {
        h.push_str("<p>On the charts below, a bar across a point is the 95 % interval of the mean of its repeats; a hollow point is one sample (no interval). A machine that ran both checksum states has a line for each.</p>");
    }
    for ((workload, kind), wrows) in by_workload(rows) {
        let unit = load_unit(kind);
        let tps = tps_word(kind);
        let shown = shown(kind);
        let _ = write!(h, "<h2>{}: {}</h2>", escape(workload), shown.section);
        let (series, bars) = series_of(&wrows, |r| Some(r.tps_mean), |r| &r.tps_samples);
        h.push_str(&line_chart_with_bars(
            &format!("{workload}: {tps} by {unit}"),
            unit,
            tps,
            &series,
            &bars,
            true,
        ));
        // A latency log gives p99 per repeat; a program's summary (sysbench) its 95th
        // percentile.
        type Pick = fn(&Row) -> Option<f64>;
        type Samples = fn(&Row) -> &[f64];
        let (label, pick, samples): (&str, Pick, Samples) = match shown.tail {
            Tail::P99 => ("p99", |r| r.latency.p99, |r| &r.p99_samples),
            Tail::P95 => ("p95", |r| r.latency.p95, |_| &[]),
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
        if shown.tail == Tail::P95 {
            // A summary gives a mean and one percentile: its own table, then the seconds.
            summary_details(h, workload, unit, tps, &wrows);
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

/// A workload whose figures are its program's summary (sysbench-tpcc): the per-machine
/// figures it adds (qps, ignored errors, reconnects) and, per load count, every machine's
/// tps second by second on one chart, as scenario B compared its two machines.
fn summary_details(h: &mut String, workload: &str, unit: &str, tps: &str, rows: &[&Row]) {
    let _ = write!(h, "<table class=\"tpcc-table\"><tr><th class=\"l\">machine</th><th class=\"l\">checksums</th><th>{unit}</th><th>{tps}</th><th>qps</th><th>lat avg ms</th><th>p95 ms</th><th>max ms</th><th>ignored errors</th><th>reconnects</th></tr>");
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
    let mut by_count: BTreeMap<u32, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_count.entry(r.clients).or_default().push(r);
    }
    for (n, at) in by_count {
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
            &format!("{workload} at {n} {unit}: {tps} per second"),
            "seconds",
            tps,
            &series,
            false,
        ));
    }
}
