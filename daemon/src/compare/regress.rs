//! Regressions against the baseline: points whose tps fell or whose latency p99 rose past
//! the threshold, by verdict (confirmed) or by figure alone (unconfirmed), and their line
//! for stdout.

use crate::plan::WorkloadKind;
use crate::report::load_unit;

use super::model::Row;
use super::stats::{self, Comparison, Verdict};

/// A point whose tps or latency p99 moved past the threshold against the baseline: a
/// regression when its verdict says so (`slower` tps, or a p99 interval wholly above +T),
/// else a move the noise can explain or one sample cannot tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub(crate) machine: String,
    pub(crate) workload: String,
    pub(crate) kind: WorkloadKind,
    pub(crate) checksums: String,
    pub(crate) clients: u32,
    pub(crate) baseline_tps: f64,
    pub(crate) tps: f64,
    pub(crate) tps_change: Comparison,
    pub(crate) baseline_p99_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) p99_change: Option<Comparison>,
    /// tps: verdict `slower`.
    pub(crate) tps_fell: bool,
    /// Latency p99: its interval wholly above +T (the verdict `faster` of the p99 ratio).
    pub(crate) p99_rose: bool,
    /// tps: its figure alone fell past −T (confirmed or not).
    pub(crate) tps_moved: bool,
    /// Latency p99: its figure alone rose past +T (confirmed or not).
    pub(crate) p99_moved: bool,
    /// A repeat on either side was `client-bound`: the benchmark client, not the server,
    /// set its tps, so no verdict there confirms a regression of the server.
    pub(crate) client_bound: bool,
}

impl Regression {
    /// The verdicts say it regressed (what `--fail-on-regression` counts).
    pub fn confirmed(&self) -> bool {
        (self.tps_fell || self.p99_rose) && !self.client_bound
    }

    #[cfg(test)]
    pub(crate) fn tps_change_pct(&self) -> f64 {
        self.tps_change.change_pct()
    }
}

/// A regression as one line for stdout: `regressed:` when its verdicts say so,
/// `client-bound:` when a repeat on either side was (the client, not the server, was
/// measured), else `unconfirmed:`; leading with what regressed (or, unconfirmed, what moved past the
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
        } else if r.client_bound {
            "client-bound"
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
    let base = super::model::baseline_rows(rows, baseline);
    let t = threshold_pct;
    let mut out: Vec<Regression> = rows
        .iter()
        .filter(|r| r.machine != baseline)
        .filter_map(|r| {
            let b = base.get(&r.point_key())?;
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
                client_bound: r.client_bound > 0 || b.client_bound > 0,
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
