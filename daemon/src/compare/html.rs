//! The comparison page: hand-written markup, self-contained and script-free
//! (docs/architecture.md says why no template crate). It shows what the analysis decided;
//! it decides nothing.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::report::{escape, load_unit};

use super::charts::charts_section;
use super::findings::{findings, WorkloadFinding};
use super::model::{rows, shown, RunDigest};
use super::prose::{repeats_text, tps_word};
use super::regress::{regressions, Regression};
use super::select::{labels, SkippedRun};
use super::stats::{self, Comparison, Verdict};

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

pub(super) fn num_cell(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "—".into())
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1200px;font-size:15px}table{border-collapse:collapse;font-size:14px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}tr.base td{background:#f6f9ff}td.bad{color:#b00;font-weight:bold}p.finding{font-size:16px;background:#f8f8f0;border-left:4px solid #999;padding:0.4em 0.8em}.verdict.faster{color:#060;font-weight:bold}.verdict.slower{color:#b00;font-weight:bold}.verdict.inconclusive,.verdict.one-sample{color:#777}";

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

/// After a verdict, on a row of which a repeat was `client-bound`: the benchmark client, not
/// the server, set that tps.
fn client_bound_mark(bound: bool) -> String {
    if bound {
        " <b class=\"client-bound\" title=\"the benchmark client's CPU, not the server, set this tps (docs/results.md)\">client-bound</b>".to_string()
    } else {
        String::new()
    }
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
            shown(r.kind).row_note.to_string() + &if r.checksums.is_empty() { String::new() } else { format!(" (checksums {})", r.checksums) },
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
        let what = shown(f.kind)
            .program
            .map_or_else(|| f.builtin.clone(), str::to_string);
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
                if is_base { client_bound_mark(r.client_bound) } else { verdict_cell(r.vs_baseline.as_ref()) + &client_bound_mark(r.client_bound) },
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
