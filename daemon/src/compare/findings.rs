//! The findings: each machine against the baseline and each machine's checksums on against
//! off, per workload × checksum state × client count, with their verdicts; what they add up
//! to per machine (geometric means); `findings.json`. Pure analysis: no markup.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::plan::WorkloadKind;

use super::model::{by_workload, Row, RunDigest};
use super::prose::{sentence, Sentence};
use super::select::labels;
use super::stats::{self, Comparison, GeometricMean, Verdict};

/// The row that stands for a machine at a workload and client count: checksums off when it
/// ran both states, else whatever state it ran.
pub(super) fn primary<'a>(rows: &[&'a Row]) -> Option<&'a Row> {
    ["off", "", "on"]
        .iter()
        .find_map(|cs| rows.iter().find(|r| r.checksums == *cs).copied())
}

/// What a comparison is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Against {
    /// A machine's tps against the baseline machine's, same workload, checksum state and
    /// client count.
    Baseline,
    /// A machine's tps with data checksums on against its own with them off.
    ChecksumsOff,
}

/// One comparison at one workload × checksum state × client count, from the repeats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PointComparison {
    pub(crate) workload: String,
    pub(crate) kind: WorkloadKind,
    pub(crate) against: Against,
    pub(crate) machine: String,
    pub(crate) checksums: String,
    /// The baseline's label (the machine itself for checksums) and checksum state.
    pub(crate) baseline: String,
    pub(crate) baseline_checksums: String,
    pub(crate) clients: u32,
    pub(crate) stats: Comparison,
    /// A repeat on either side was `client-bound`: the verdict is the benchmark client's,
    /// not a difference of the server.
    pub(crate) client_bound: bool,
}

/// A machine's comparisons at a workload over its client counts: the geometric mean of
/// those with an interval, and the client counts it says nothing for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Aggregate {
    pub(crate) machine: String,
    pub(crate) against: Against,
    /// Client counts compared, in order, with their comparison.
    pub(crate) points: Vec<(u32, Comparison)>,
    /// The client counts where a repeat on either side was `client-bound`: named on their
    /// own, never folded into the mean.
    pub(crate) client_bound: BTreeSet<u32>,
    /// The geometric mean of the points with an interval that are not client-bound; none
    /// when there is no such point.
    pub(crate) mean: Option<GeometricMean>,
}

impl Aggregate {
    fn new(
        machine: &str,
        against: Against,
        points: Vec<(u32, Comparison)>,
        client_bound: BTreeSet<u32>,
        t: f64,
    ) -> Aggregate {
        let mean = stats::geometric_mean(
            &points
                .iter()
                .filter(|p| !client_bound.contains(&p.0))
                .map(|p| &p.1)
                .collect::<Vec<_>>(),
            t,
        );
        Aggregate {
            machine: machine.to_string(),
            against,
            points,
            client_bound,
            mean,
        }
    }

    /// The client counts the geometric mean is over.
    pub(super) fn counted(&self) -> Vec<u32> {
        self.points
            .iter()
            .filter(|p| p.1.ci.is_some() && !self.client_bound.contains(&p.0))
            .map(|p| p.0)
            .collect()
    }

    /// The verdict that stands for the machine: the mean's, else `one sample`.
    pub(crate) fn verdict(&self) -> Verdict {
        self.mean.as_ref().map_or(Verdict::OneSample, |m| m.verdict)
    }
}

/// One line of a workload's finding table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FindingRow {
    pub(crate) clients: u32,
    pub(crate) machine: String,
    /// Which checksum state the tps is of (`"off"` when the machine ran both).
    pub(crate) checksums: String,
    /// Repeats behind the tps.
    pub(crate) samples: usize,
    pub(crate) tps: f64,
    /// Against the baseline's point of the same checksum state (else the baseline's own
    /// primary state); none on the baseline's rows.
    pub(crate) vs_baseline: Option<Comparison>,
    /// Data checksums on against off, where the machine ran both.
    pub(crate) checksums_on: Option<Comparison>,
    pub(crate) hourly_price_usd: f64,
    pub(crate) tps_per_dollar_hour: Option<f64>,
    /// tps per dollar-hour against the baseline's: the tps change and its interval scaled
    /// by the price ratio, in percent.
    pub(crate) per_dollar_vs_baseline: Option<(f64, Option<(f64, f64)>)>,
    /// A repeat of this machine at this client count (either checksum state) was
    /// `client-bound`.
    pub(crate) client_bound: bool,
}

/// The finding for one workload: a table by client (thread) count and machine, what each
/// machine's verdicts add up to, and a sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadFinding {
    pub(crate) workload: String,
    pub(crate) kind: WorkloadKind,
    pub(crate) builtin: String,
    pub(crate) baseline: String,
    pub(crate) threshold_pct: f64,
    pub(crate) rows: Vec<FindingRow>,
    /// Each other machine against the baseline, over the client counts both ran.
    pub(crate) versus: Vec<Aggregate>,
    /// Each machine's data checksums on against off, over the client counts it ran both.
    pub(crate) checksum_costs: Vec<Aggregate>,
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
                let client_bound = states.iter().any(|r| r.client_bound > 0);
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
                    client_bound,
                });
            }
        }
        let base_bound = |c: u32| {
            table
                .iter()
                .any(|r| r.machine == *base_label && r.clients == c && r.client_bound)
        };
        let aggregate = |m: &str, against: Against| {
            let mut bound = BTreeSet::new();
            let points: Vec<(u32, Comparison)> = table
                .iter()
                .filter(|r| r.machine == m)
                .filter_map(|r| {
                    let c = match against {
                        Against::Baseline => r.vs_baseline.clone(),
                        Against::ChecksumsOff => r.checksums_on.clone(),
                    };
                    let c = c?;
                    if r.client_bound || (against == Against::Baseline && base_bound(r.clients)) {
                        bound.insert(r.clients);
                    }
                    Some((r.clients, c))
                })
                .collect();
            (!points.is_empty()).then(|| Aggregate::new(m, against, points, bound, t))
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
pub(crate) fn point_comparisons(
    rows: &[Row],
    baseline: &str,
    threshold_pct: f64,
) -> Vec<PointComparison> {
    let base = super::model::baseline_rows(rows, baseline);
    let mut out = Vec::new();
    for r in rows {
        if r.machine != baseline {
            if let Some(b) = base.get(&r.point_key()) {
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
                        client_bound: r.client_bound > 0 || b.client_bound > 0,
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
                        client_bound: r.client_bound > 0 || off.client_bound > 0,
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

/// The version of `findings.json`'s layout (docs/results.md): 2 added `client_bound`.
pub(crate) const FINDINGS_SCHEMA_VERSION: u32 = 2;

/// One entry of `findings.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FindingEntry {
    pub(crate) workload: String,
    pub(crate) kind: &'static str,
    pub(crate) against: Against,
    /// `point` (one client count) or `geometric_mean` (over `client_counts`).
    pub(crate) scope: &'static str,
    pub(crate) checksums: String,
    pub(crate) baseline_checksums: String,
    /// The client (thread) count; none for a geometric mean.
    pub(crate) clients: Option<u32>,
    /// The client counts a geometric mean is over (those with an interval).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) client_counts: Vec<u32>,
    pub(crate) machine: String,
    pub(crate) baseline: String,
    /// Repeats on each side (none for a geometric mean).
    pub(crate) n: Option<usize>,
    pub(crate) n_baseline: Option<usize>,
    pub(crate) ratio: f64,
    pub(crate) ci_low: Option<f64>,
    pub(crate) ci_high: Option<f64>,
    pub(crate) p_value: Option<f64>,
    pub(crate) cliffs_delta: Option<f64>,
    pub(crate) verdict: Verdict,
    /// One sample: the repeats a side the other side's noise suggests (51 for "more than 50").
    pub(crate) repeats_suggested: Option<u32>,
    /// A point with a `client-bound` repeat on either side: its verdict is the benchmark
    /// client's, not the server's (always false for a geometric mean, which leaves such
    /// points out).
    pub(crate) client_bound: bool,
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
            client_bound: p.client_bound,
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
                    client_bound: false,
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
