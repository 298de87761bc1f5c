//! The per-run `report.html`: self-contained (inline SVG, no scripts, no fetches).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::plan::{Checksums, WorkloadKind};
use crate::results::{PointResult, PointStatus, RunResults};
use crate::workload::{Figures, Record};

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A named series of (x, y) points for a line chart.
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
/// After the eighth series the colours repeat with another dash pattern.
const DASHES: [&str; 4] = ["", "7 3", "2 3", "9 3 2 3"];

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Whether an x axis holding these series is drawn on a log scale: every x above zero and
/// the largest at least ten times the smallest (client counts 10…1000).
pub(crate) fn wants_log_x(series: &[Series]) -> bool {
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let lo = xs().fold(f64::MAX, f64::min);
    let hi = xs().fold(f64::MIN, f64::max);
    lo > 0.0 && hi.is_finite() && hi >= 10.0 * lo
}

/// The stroke of series `i`: a colour, and a dash pattern once the colours repeat.
fn stroke(i: usize) -> (&'static str, &'static str) {
    (
        COLOURS[i % COLOURS.len()],
        DASHES[(i / COLOURS.len()) % DASHES.len()],
    )
}

/// An SVG line chart followed by its legend, as one `<figure>`. The legend is HTML under
/// the chart, so every series name is shown whole and wraps instead of being cut. With
/// `log_x` (client axes) the x axis is logarithmic where [`wants_log_x`] says the data spans
/// enough for it; time axes pass false.
pub(crate) fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> String {
    line_chart_with_bars(title, x_label, y_label, series, &[], log_x)
}

/// What a chart marks at a point of a series: the 95 % interval of its value as an error
/// bar, or none when the point is one sample (drawn hollow, titled so).
pub(crate) type PointBars = Vec<(f64, Option<(f64, f64)>)>;

/// [`line_chart`] with, for each series (same order), the points' error bars or one-sample
/// marks; a series without an entry is drawn plain.
pub(crate) fn line_chart_with_bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    bars: &[PointBars],
    log_x: bool,
) -> String {
    let log_x = log_x && wants_log_x(series);
    let (w, h, left, right, top, bottom) = (960.0, 360.0, 80.0, 30.0, 30.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let mut svg = String::from("<figure style=\"margin:0 0 1.5em\">");
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" style="max-width:100%;height:auto" role="img" aria-label="{t}"><title>{t}</title><rect width="100%" height="100%" fill="white"/><text x="{cx}" y="18" text-anchor="middle" font-size="15" font-family="sans-serif">{t}</text>"#,
        t = escape(title),
        cx = left + pw / 2.0
    );
    if xs.is_empty() {
        svg.push_str(r#"<text x="50%" y="50%" text-anchor="middle" font-family="sans-serif">no data</text></svg></figure>"#);
        return svg;
    }
    let tx = |x: f64| if log_x { x.log10() } else { x };
    let (mut x0, mut x1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| {
        (a.min(tx(x)), b.max(tx(x)))
    });
    if (x1 - x0).abs() < 1e-9 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    // A little room either side so the first and last points are not on the axes.
    let pad = (x1 - x0) * 0.03;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let bar_top = bars
        .iter()
        .flatten()
        .filter_map(|b| b.1.map(|i| i.1))
        .fold(0.0, f64::max);
    let y1 = nice_max(ys.iter().cloned().fold(bar_top, f64::max));
    let px = |x: f64| left + (tx(x) - x0) / (x1 - x0) * pw;
    let py = |y: f64| top + ph - y / y1 * ph;
    for i in 0..=5 {
        let y = y1 * i as f64 / 5.0;
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="end" font-size="13" font-family="sans-serif">{label}</text>"##,
            x2 = left + pw,
            yy = py(y),
            tx = left - 6.0,
            ty = py(y) + 4.0,
            label = fmt_num(y)
        );
    }
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(|a, b| a.total_cmp(b));
    ticks.dedup();
    if ticks.len() > 12 {
        let step = ticks.len().div_ceil(12);
        ticks = ticks.into_iter().step_by(step).collect();
    }
    for x in ticks {
        let _ = write!(
            svg,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{top}" y2="{b}" stroke="#eee"/><text x="{xx:.1}" y="{ty:.1}" text-anchor="middle" font-size="13" font-family="sans-serif">{}</text>"##,
            fmt_num(x),
            xx = px(x),
            b = top + ph,
            ty = top + ph + 17.0,
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="{left}" x2="{left}" y1="{top}" y2="{b}" stroke="#333"/><line x1="{left}" x2="{r}" y1="{b}" y2="{b}" stroke="#333"/><text x="{cx}" y="{xl}" text-anchor="middle" font-size="13" font-family="sans-serif">{xlab}</text><text x="16" y="{cy}" text-anchor="middle" font-size="13" font-family="sans-serif" transform="rotate(-90 16 {cy})">{ylab}</text>"##,
        b = top + ph,
        r = left + pw,
        cx = left + pw / 2.0,
        xl = h - 10.0,
        cy = top + ph / 2.0,
        xlab = escape(&if log_x {
            format!("{x_label} (log scale)")
        } else {
            x_label.to_string()
        }),
        ylab = escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let (colour, dash) = stroke(i);
        let mut points = s.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" points="{}"><title>{}</title></polyline>"#,
            path.join(" "),
            escape(&s.name)
        );
        let marks = bars.get(i);
        for &(x, y) in &points {
            let mark = marks.and_then(|m| m.iter().find(|b| b.0 == x)).map(|b| b.1);
            let (fill, note) = match mark {
                Some(Some((lo, hi))) => {
                    let _ = write!(
                        svg,
                        r#"<path d="M{x:.1},{l:.1}V{u:.1}M{a:.1},{l:.1}H{b:.1}M{a:.1},{u:.1}H{b:.1}" stroke="{colour}" stroke-width="1.5" fill="none" class="error-bar"><title>{n}: {xs}: 95 % interval {lo} … {hi}</title></path>"#,
                        x = px(x),
                        l = py(lo),
                        u = py(hi),
                        a = px(x) - 4.0,
                        b = px(x) + 4.0,
                        n = escape(&s.name),
                        xs = fmt_num(x),
                        lo = fmt_num(lo),
                        hi = fmt_num(hi),
                    );
                    (colour, String::new())
                }
                Some(None) => ("white", " (one sample)".to_string()),
                None => (colour, String::new()),
            };
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{}: {} → {}{note}</title></circle>"#,
                px(x),
                py(y),
                escape(&s.name),
                fmt_num(x),
                fmt_num(y)
            );
        }
    }
    svg.push_str("</svg>");
    svg.push_str(&legend(series));
    svg.push_str("</figure>");
    svg
}

/// The legend of a chart: every series' whole name beside its stroke, wrapping as needed.
fn legend(series: &[Series]) -> String {
    let mut html = String::from(
        "<figcaption><ul style=\"list-style:none;margin:0.3em 0 0;padding:0;display:flex;flex-wrap:wrap;gap:0.2em 1.4em;font-size:14px;max-width:960px\">",
    );
    for (i, s) in series.iter().enumerate() {
        let (colour, dash) = stroke(i);
        let style = if dash.is_empty() { "solid" } else { "dashed" };
        let _ = write!(
            html,
            "<li style=\"overflow-wrap:anywhere\"><span style=\"display:inline-block;width:26px;margin-right:6px;vertical-align:middle;border-top:3px {style} {colour}\"></span>{}</li>",
            escape(&s.name)
        );
    }
    html.push_str("</ul></figcaption>");
    html
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn series_name(workload: &str, checksums: Option<Checksums>) -> String {
    match checksums {
        Some(_) => format!("{workload} (checksums {})", Checksums::label(checksums)),
        None => workload.to_string(),
    }
}

/// What a point's load count is called: pgbench's clients, sysbench's threads.
pub(crate) fn load_unit(kind: WorkloadKind) -> &'static str {
    crate::workload::of(kind).load_unit()
}

/// The successful points whose figures are in `record`.
fn ok_points(r: &RunResults, record: Record) -> impl Iterator<Item = &PointResult> {
    r.points
        .iter()
        .filter(move |p| p.status == PointStatus::Ok && p.record() == record)
}

/// Mean tps per client (sysbench-tpcc: thread) count for each workload × checksum state of
/// one kind (repeats averaged).
pub(crate) fn scaling_series(r: &RunResults, record: Record) -> Vec<Series> {
    let mut groups: BTreeMap<String, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for p in ok_points(r, record) {
        if let Some(tps) = p.tps() {
            groups
                .entry(series_name(&p.workload, p.checksums))
                .or_default()
                .entry(p.clients)
                .or_default()
                .push(tps);
        }
    }
    groups
        .into_iter()
        .map(|(name, by_clients)| Series {
            name,
            points: by_clients
                .into_iter()
                .map(|(c, v)| (f64::from(c), v.iter().sum::<f64>() / v.len() as f64))
                .collect(),
        })
        .collect()
}

/// [`scaling_series`] one chart per workload (its checksum states together): workloads of
/// different throughputs (select-only's tens of thousands, TPC-B's few thousand) on one
/// linear axis would flatten the slower one. A run without points still gets one chart (it
/// says "no data").
pub(crate) fn scaling_charts(r: &RunResults, record: Record) -> Vec<(String, Vec<Series>)> {
    let mut by_workload: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    for p in ok_points(r, record) {
        by_workload.entry(p.workload.clone()).or_default();
    }
    for series in scaling_series(r, record) {
        let of =
            |w: &String| series.name == *w || series.name.starts_with(&format!("{w} (checksums "));
        if let Some(w) = by_workload.keys().find(|w| of(w)).cloned() {
            by_workload.entry(w).or_default().push(series);
        }
    }
    if by_workload.is_empty() {
        return vec![(String::new(), Vec::new())];
    }
    by_workload.into_iter().collect()
}

/// Mean latency percentiles per client count, one chart's series per percentile, for each
/// pgbench workload × checksum state.
pub(crate) fn latency_series(r: &RunResults) -> Vec<(String, Vec<Series>)> {
    type Pick = fn(&crate::workload::Percentiles) -> Option<f64>;
    let picks: [(&str, Pick); 5] = [
        ("p25", |l| l.p25),
        ("p50", |l| l.p50),
        ("p75", |l| l.p75),
        ("p95", |l| l.p95),
        ("p99", |l| l.p99),
    ];
    let mut groups: BTreeMap<String, Vec<&PointResult>> = BTreeMap::new();
    for p in ok_points(r, Record::Pgbench) {
        groups
            .entry(series_name(&p.workload, p.checksums))
            .or_default()
            .push(p);
    }
    groups
        .into_iter()
        .filter_map(|(name, points)| {
            let series: Vec<Series> = picks
                .iter()
                .map(|(label, pick)| {
                    let mut by_clients: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
                    for p in &points {
                        if let Some(v) = pick(&p.figures().latency) {
                            by_clients.entry(p.clients).or_default().push(v);
                        }
                    }
                    Series {
                        name: label.to_string(),
                        points: by_clients
                            .into_iter()
                            .map(|(c, v)| (f64::from(c), v.iter().sum::<f64>() / v.len() as f64))
                            .collect(),
                    }
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            (!series.is_empty()).then_some((name, series))
        })
        .collect()
}

/// sysbench-tpcc's latency per thread count (sysbench's own mean and 95th percentile,
/// repeats averaged), one chart's series per figure, for each workload × checksum state.
pub(crate) fn tpcc_latency_series(r: &RunResults) -> Vec<(String, Vec<Series>)> {
    type Pick = fn(&Figures) -> Option<f64>;
    let picks: [(&str, Pick); 2] = [("avg", |f| f.latency_avg_ms), ("p95", |f| f.latency.p95)];
    let mut groups: BTreeMap<String, Vec<(Figures, u32)>> = BTreeMap::new();
    for p in ok_points(r, Record::Sysbench) {
        let f = p.figures();
        if picks.iter().all(|(_, pick)| pick(&f).is_some()) {
            groups
                .entry(series_name(&p.workload, p.checksums))
                .or_default()
                .push((f, p.clients));
        }
    }
    groups
        .into_iter()
        .map(|(name, points)| {
            let series = picks
                .iter()
                .map(|(label, pick)| {
                    let mut by: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
                    for (f, t) in &points {
                        by.entry(*t).or_default().extend(pick(f));
                    }
                    Series {
                        name: label.to_string(),
                        points: by
                            .into_iter()
                            .map(|(t, v)| (f64::from(t), v.iter().sum::<f64>() / v.len() as f64))
                            .collect(),
                    }
                })
                .collect();
            (name, series)
        })
        .collect()
}

/// tps over time for every point whose figures are in `record`, grouped by workload × checksum state (one
/// series a point, named by its client or thread count).
pub(crate) fn tps_over_time_series(r: &RunResults, record: Record) -> Vec<(String, Vec<Series>)> {
    let mut groups: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    for p in r
        .points
        .iter()
        .filter(|p| p.record() == record && !p.tps_series.is_empty())
    {
        let unit = load_unit(p.kind);
        let label = if p.repeat > 1 {
            format!("{} {unit} #{}", p.clients, p.repeat)
        } else {
            format!("{} {unit}", p.clients)
        };
        groups
            .entry(series_name(&p.workload, p.checksums))
            .or_default()
            .push(Series {
                name: label,
                points: p.tps_series.iter().map(|s| (s.elapsed_s, s.tps)).collect(),
            });
    }
    groups.into_iter().collect()
}

pub fn render(r: &RunResults) -> String {
    let mut html = String::new();
    let title = format!("pgappliance run {} on {}", r.run_id, r.appliance);
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f4f4f4}}td.l,th.l{{text-align:left}}.failed{{color:#b00}}</style></head><body><h1>{}</h1>",
        escape(&title),
        escape(&title)
    );
    let cpu = &r.inventory.cpu;
    let _ = write!(
        html,
        "<p>{} · {} CPUs ({}) · {:.1} GiB RAM · kernel {} · PostgreSQL {} · started {} · finished {}</p>",
        escape(r.inventory.os.get("PRETTY_NAME").map(String::as_str).unwrap_or("unknown OS")),
        cpu.cpus,
        escape(cpu.model_name.as_deref().unwrap_or("unknown model")),
        r.inventory.memory_bytes as f64 / (1u64 << 30) as f64,
        escape(&r.inventory.kernel),
        escape(&r.postgres.version),
        escape(&r.started_at),
        escape(r.finished_at.as_deref().unwrap_or("—")),
    );
    let failed = r.failed_points();
    if !failed.is_empty() {
        let _ = write!(
            html,
            "<p class=\"failed\">{} point(s) failed: ",
            failed.len()
        );
        for p in failed {
            let _ = write!(
                html,
                "{} ({}); ",
                escape(&p.id),
                escape(p.error.as_deref().unwrap_or("unknown error"))
            );
        }
        html.push_str("</p>");
    }
    let has = |record: Record| r.points.iter().any(|p| p.record() == record);
    // A run with no points at all still shows the pgbench charts (saying "no data").
    if has(Record::Pgbench) || !has(Record::Sysbench) {
        pgbench_charts(&mut html, r);
    }
    if has(Record::Sysbench) {
        tpcc_charts(&mut html, r);
    }
    if let Some(d) = &r.dataset {
        let _ = write!(
            html,
            "<h2>Dataset</h2><p>scale {} ({} init) in {:.2} s",
            d.scale,
            escape(&d.init_mode),
            d.wall_s
        );
        if let Some(b) = &d.init {
            html.push_str(" — ");
            let parts: Vec<String> = b
                .phases
                .iter()
                .map(|p| format!("{} {:.2} s", escape(&p.phase), p.seconds))
                .collect();
            html.push_str(&parts.join(", "));
        }
        html.push_str("</p>");
    }
    if let Some(t) = &r.tuning_in_effect {
        html.push_str(&tuning_in_effect_table(t));
    }
    if has(Record::Pgbench) || !has(Record::Sysbench) {
        pgbench_points_table(&mut html, r);
    }
    if has(Record::Sysbench) {
        tpcc_points_table(&mut html, r);
    }
    html.push_str("</body></html>\n");
    html
}

fn pgbench_charts(html: &mut String, r: &RunResults) {
    html.push_str("<h2>Throughput by clients</h2>");
    for (workload, series) in scaling_charts(r, Record::Pgbench) {
        html.push_str(&line_chart(
            &chart_title(&workload, "tps vs clients"),
            "clients",
            "tps",
            &series,
            true,
        ));
    }
    html.push_str("<h2>Latency percentiles by clients</h2>");
    for (name, series) in latency_series(r) {
        html.push_str(&line_chart(
            &format!("{name}: latency percentiles"),
            "clients",
            "ms",
            &series,
            true,
        ));
    }
    html.push_str("<h2>Throughput over time</h2>");
    for (name, series) in tps_over_time_series(r, Record::Pgbench) {
        html.push_str(&line_chart(
            &format!("{name}: tps per interval"),
            "seconds",
            "tps",
            &series,
            false,
        ));
    }
}

/// sysbench-tpcc's points as their own workload: TPC-C tps by threads, sysbench's latency,
/// and each point's tps second by second (scenario B's per-second graphs).
fn tpcc_charts(html: &mut String, r: &RunResults) {
    html.push_str("<h2>TPC-C (sysbench-tpcc): throughput by threads</h2>");
    for (workload, series) in scaling_charts(r, Record::Sysbench) {
        html.push_str(&line_chart(
            &chart_title(&workload, "TPC-C tps vs threads"),
            "threads",
            "TPC-C tps",
            &series,
            true,
        ));
    }
    html.push_str("<h2>TPC-C: latency by threads</h2>");
    for (name, series) in tpcc_latency_series(r) {
        html.push_str(&line_chart(
            &format!("{name}: TPC-C latency (sysbench avg and 95th percentile)"),
            "threads",
            "ms",
            &series,
            true,
        ));
    }
    html.push_str("<h2>TPC-C: throughput per second</h2>");
    for (name, series) in tps_over_time_series(r, Record::Sysbench) {
        html.push_str(&line_chart(
            &format!("{name}: TPC-C tps per second"),
            "seconds",
            "TPC-C tps",
            &series,
            false,
        ));
    }
}

/// `rw: tps vs clients`, or the bare title for the chart of a run without points.
fn chart_title(workload: &str, what: &str) -> String {
    if workload.is_empty() {
        what.to_string()
    } else {
        format!("{workload}: {what}")
    }
}

fn status_cell(p: &PointResult) -> (&'static str, String) {
    match p.status {
        PointStatus::Ok => ("", "ok".to_string()),
        PointStatus::Failed => (" failed", escape(p.error.as_deref().unwrap_or("failed"))),
    }
}

/// A point's steady-window and client cells: the window's median tps and CV (dashes when
/// the series was too short for one), the client's CPU as a share of its threads'
/// capacity (a dash where it was not measured), and the point's flags (`collapse`,
/// `unstable`, `client-bound`, marked).
fn steady_cells(p: &PointResult) -> String {
    let window = match &p.steady {
        Some(w) => format!("<td>{:.1}</td><td>{:.1} %</td>", w.median_tps, w.cv * 100.0),
        None => "<td>—</td><td>—</td>".to_string(),
    };
    let client = match &p.client {
        Some(c) => format!(
            "<td title=\"{:.2} s CPU{} over {:.2} s, {} of {} cores\">{:.0} %</td>",
            c.cpu_s,
            c.wait_s
                .map(|w| format!(" + {w:.2} s waiting for a CPU"))
                .unwrap_or_default(),
            c.wall_s,
            c.capacity_cores,
            c.cpus,
            c.busy_share * 100.0
        ),
        None => "<td>—</td>".to_string(),
    };
    let flags = p.flags();
    let flags = if flags.is_empty() {
        "—".to_string()
    } else {
        flags
            .iter()
            .map(|f| format!("<b class=\"failed\">{f}</b>"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("{window}{client}<td class=\"l steady-flags\">{flags}</td>")
}

/// The header cells of [`steady_cells`].
const STEADY_HEADERS: &str =
    "<th>steady tps</th><th>steady CV</th><th>client CPU</th><th class=\"l\">flags</th>";

/// What the steady-window and client columns mean, below a points table.
const STEADY_NOTE: &str = "<p><small>steady: the per-interval series with the ramp left out (docs/results.md): its median tps and coefficient of variation; <b>collapse</b> when an interval fell below 10 % of that median, <b>unstable</b> when the CV is above 10 % or the window's last third drifted more than 10 % from its first. A flagged point's tps is an average over a series that did not hold still. client CPU: the benchmark client's CPU time (plus its main thread's wait for a CPU) over the point's wall time and the cores its threads can use, min(threads, CPUs); <b>client-bound</b> at 90 % or more: the client, not the server, set that point's tps.</small></p>";

fn pgbench_points_table(html: &mut String, r: &RunResults) {
    html.push_str("<h2>Points</h2><table><tr><th class=\"l\">point</th><th>clients</th><th>threads</th><th>tps</th><th>lat avg ms</th><th>p50</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th><th>failed tx</th>");
    html.push_str(STEADY_HEADERS);
    html.push_str("<th class=\"l\">status</th></tr>");
    let cell = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "—".into());
    for p in r.points.iter().filter(|p| p.record() == Record::Pgbench) {
        let f = p.figures();
        let l = &f.latency;
        let status = status_cell(p);
        let _ = write!(
            html,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td class=\"l{}\">{}</td></tr>",
            escape(&p.id),
            p.clients,
            p.threads,
            f.tps.map(|t| format!("{t:.1}")).unwrap_or_else(|| "—".into()),
            cell(f.latency_avg_ms),
            cell(l.p50),
            cell(l.p95),
            cell(l.p99),
            cell(l.p99_9),
            cell(l.max),
            f.failed_transactions
                .map(|f| f.to_string())
                .unwrap_or_else(|| "—".into()),
            steady_cells(p),
            status.0,
            status.1,
        );
    }
    html.push_str("</table>");
    html.push_str(STEADY_NOTE);
}

fn tpcc_points_table(html: &mut String, r: &RunResults) {
    html.push_str("<h2>TPC-C points</h2><table class=\"tpcc-points\"><tr><th class=\"l\">point</th><th>threads</th><th>TPC-C tps</th><th>qps</th><th>lat avg ms</th><th>p95</th><th>max</th><th>ignored errors</th><th>reconnects</th><th>seconds</th>");
    html.push_str(STEADY_HEADERS);
    html.push_str("<th class=\"l\">status</th></tr>");
    let cell = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "—".into());
    let count = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "—".into());
    for p in r.points.iter().filter(|p| p.record() == Record::Sysbench) {
        let f = p.figures();
        let (class, status) = status_cell(p);
        let _ = write!(
            html,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td class=\"l{class}\">{status}</td></tr>",
            escape(&p.id),
            p.clients,
            f.tps.map(|t| format!("{t:.1}")).unwrap_or_else(|| "—".into()),
            f.qps.map(|q| format!("{q:.1}")).unwrap_or_else(|| "—".into()),
            cell(f.latency_avg_ms),
            cell(f.latency.p95),
            cell(f.latency.max),
            count(f.ignored_errors),
            count(f.reconnects),
            f.seconds.map(|s| format!("{s:.1}")).unwrap_or_else(|| "—".into()),
            steady_cells(p),
        );
    }
    html.push_str("</table>");
    html.push_str(STEADY_NOTE);
}

/// The "tuning in effect" section: what the host shows, then each planned value against
/// what was read back.
pub(crate) fn tuning_in_effect_table(t: &crate::in_effect::TuningInEffect) -> String {
    use crate::in_effect::CheckStatus;
    let mut html = String::from("<h2>Tuning in effect</h2>");
    let _ = write!(
        html,
        "<p>read {} · {} · kernel command line <code>{}</code> · transparent hugepages {} · CPU governor {}",
        escape(&t.collected_at),
        if t.os_tuning_planned {
            "OS tuning planned"
        } else {
            "local mode: no OS tuning planned, only PostgreSQL's settings checked"
        },
        escape(t.kernel_cmdline.as_deref().unwrap_or("—")),
        escape(t.transparent_hugepage.as_deref().unwrap_or("—")),
        escape(&t.cpu_governor),
    );
    if let Some(tuned) = &t.tuned {
        let _ = write!(
            html,
            " · tuned profile {} (verify_profile: {})",
            escape(&tuned.active_profile),
            if tuned.verified { "true" } else { "false" }
        );
    }
    if let Some(m) = &t.data_volume {
        let _ = write!(
            html,
            " · data volume {} on {} ({}, {})",
            escape(&m.mount_point),
            escape(&m.source),
            escape(&m.fstype),
            escape(&m.options.join(","))
        );
    }
    for s in &t.lvm {
        let _ = write!(
            html,
            " · LV {}: {} stripe(s) of {} bytes over {}",
            escape(&s.lv_name),
            s.stripes,
            s.stripe_size_bytes,
            escape(&s.devices.join(" "))
        );
    }
    html.push_str("</p><table><tr><th class=\"l\">area</th><th class=\"l\">setting</th><th class=\"l\">planned</th><th class=\"l\">in effect</th><th class=\"l\">status</th></tr>");
    for c in &t.checks {
        let (class, status) = match c.status {
            CheckStatus::InEffect => ("", "in effect"),
            CheckStatus::NotInEffect => (" failed", "NOT in effect"),
            CheckStatus::Absent => ("", "not on this machine"),
        };
        let _ = write!(
            html,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l{class}\">{status}</td></tr>",
            escape(&c.area),
            escape(&c.name),
            escape(&c.planned),
            escape(c.actual.as_deref().unwrap_or("—")),
        );
    }
    html.push_str("</table>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_gets_its_own_throughput_chart() {
        // Scenario A's shape: select-only in the tens of thousands, TPC-B in thousands.
        let r = crate::synthetic::run_results(&crate::synthetic::fleet_run(0, 1)).expect("run");
        let charts = scaling_charts(&r, crate::workload::Record::Pgbench);
        let names: Vec<&str> = charts.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(names, ["ro", "rw"]);
        for (workload, series) in &charts {
            assert_eq!(series.len(), 1, "{workload}");
            assert_eq!(series[0].name, *workload);
        }
        let html = render(&r);
        assert!(
            html.contains("<title>ro: tps vs clients</title>"),
            "ro chart"
        );
        assert!(
            html.contains("<title>rw: tps vs clients</title>"),
            "rw chart"
        );
        assert!(
            !html.contains("<title>tps vs clients</title>"),
            "no shared chart"
        );
        // A run without points still says so in one chart.
        let mut empty = r.clone();
        empty.points.clear();
        assert!(render(&empty).contains("<title>tps vs clients</title>"));
    }

    #[test]
    fn the_points_table_shows_each_points_steady_window_and_flags() {
        use crate::results::steady::{SteadyFlag, SteadyWindow};
        let mut r = crate::synthetic::run_results(&crate::synthetic::fleet_run(0, 1)).expect("run");
        let window = |flags: Vec<SteadyFlag>| SteadyWindow {
            ramp_intervals: 2,
            intervals: 18,
            from_s: 2.0,
            to_s: 20.0,
            median_tps: 1234.5,
            mean_tps: 1200.0,
            cv: 0.153,
            flags,
        };
        r.points[0].steady = Some(window(vec![SteadyFlag::Collapse, SteadyFlag::Unstable]));
        r.points[1].steady = Some(window(Vec::new()));
        r.points[2].steady = None;
        r.points[3].client = crate::results::client::client_cpu(
            crate::runner::CpuUse {
                cpu_s: 9.5,
                main_thread_wait_s: Some(0.2),
            },
            10.0,
            1,
            2,
        );
        r.points[4].client = crate::results::client::client_cpu(
            crate::runner::CpuUse {
                cpu_s: 2.0,
                main_thread_wait_s: None,
            },
            10.0,
            2,
            2,
        );
        let html = render(&r);
        assert!(html.contains(
            "<th>steady tps</th><th>steady CV</th><th>client CPU</th><th class=\"l\">flags</th>"
        ));
        let row = |id: &str| {
            let at = html
                .find(&format!("<td class=\"l\">{id}</td>"))
                .expect("row");
            html[at..].split("</tr>").next().unwrap_or("").to_string()
        };
        let flagged = row(&r.points[0].id);
        assert!(
            flagged.contains("<td>1234.5</td><td>15.3 %</td><td>—</td><td class=\"l steady-flags\"><b class=\"failed\">collapse</b>, <b class=\"failed\">unstable</b></td>"),
            "{flagged}"
        );
        assert!(row(&r.points[1].id).contains("<td class=\"l steady-flags\">—</td>"));
        assert!(row(&r.points[2].id)
            .contains("<td>—</td><td>—</td><td>—</td><td class=\"l steady-flags\">—</td>"));
        // The client's CPU beside the steady window: 97 % of one core is client-bound,
        // 10 % of two is not.
        let bound = row(&r.points[3].id);
        assert!(
            bound.contains("over 10.00 s, 1 of 2 cores\">97 %</td>")
                && bound.contains("<b class=\"failed\">client-bound</b></td>"),
            "{bound}"
        );
        let free = row(&r.points[4].id);
        assert!(free.contains(">10 %</td>"), "{free}");
        assert!(!free.contains("client-bound"), "{free}");
        assert!(html.contains("<b>collapse</b> when an interval fell below 10 %"));
        assert!(html.contains("<b>client-bound</b> at 90 % or more"));
    }
}
