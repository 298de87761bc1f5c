//! Change points in a history of runs, found as Apache Otava (formerly Hunter) finds them:
//! E-divisive means (Matteson and James, 2014) with a permutation significance test. Pure:
//! a series in (one figure per run, in time order), change points out.
//!
//! For a segment `Z[0..n]` and a split `τ`, the divergence between the two sides is
//! `Q(τ) = τ(n−τ)/n · (2/(τ(n−τ)) Σ|X−Y| − 1/C(τ,2) Σ|X−X'| − 1/C(n−τ,2) Σ|Y−Y'|)` (the
//! energy distance with α = 1: it grows when the sides' values sit apart, whatever their
//! distribution). The best split of every segment is the candidate; the largest one is
//! tested by permuting its segment [`PERMUTATIONS`] times: its p-value is the share of
//! permutations whose best `Q` reaches the observed one. Below [`SIGNIFICANCE`] it is a
//! change point, the segment is split there, and the search goes on; otherwise it stops.

use std::collections::BTreeMap;

use super::model::{DigestPoint, RunDigest};
use super::stats::SplitMix64;

/// Fewest runs on each side of a change point.
pub(crate) const MIN_SIDE: usize = 3;
/// Permutations of the significance test.
pub(crate) const PERMUTATIONS: usize = 199;
/// The p-value a change point must be below.
pub const SIGNIFICANCE: f64 = 0.05;

/// A change point of a series: the runs from `index` on differ from those before.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// The first run after the change (an index into the series).
    pub(crate) index: usize,
    /// The runs of the segments on either side it was found between: `[from, index)` and
    /// `[index, to)`.
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) q: f64,
    pub(crate) p_value: f64,
    /// Mean of the figure before and after, and the shift in percent of the before.
    pub(crate) mean_before: f64,
    pub(crate) mean_after: f64,
    pub(crate) shift_pct: f64,
}

/// `Q(τ)` of every split of `z` with [`MIN_SIDE`] values a side; the best split and its Q.
fn best_split(z: &[f64]) -> Option<(usize, f64)> {
    let n = z.len();
    if n < 2 * MIN_SIDE {
        return None;
    }
    // d[i][j] = |z_i − z_j|; the within sums come from prefix sums over the matrix.
    let d = |i: usize, j: usize| (z[i] - z[j]).abs();
    let mut best: Option<(usize, f64)> = None;
    for tau in MIN_SIDE..=n - MIN_SIDE {
        let (a, b) = (tau as f64, (n - tau) as f64);
        let mut between = 0.0;
        for i in 0..tau {
            for j in tau..n {
                between += d(i, j);
            }
        }
        let mut left = 0.0;
        for i in 0..tau {
            for k in i + 1..tau {
                left += d(i, k);
            }
        }
        let mut right = 0.0;
        for j in tau..n {
            for k in j + 1..n {
                right += d(j, k);
            }
        }
        let e =
            2.0 * between / (a * b) - left / (a * (a - 1.0) / 2.0) - right / (b * (b - 1.0) / 2.0);
        let q = a * b / (a + b) * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((tau, q));
        }
    }
    best
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The change points of `series` (one figure per run, in time order), in order. `seed`
/// makes the permutations repeatable.
pub(crate) fn change_points(series: &[f64], seed: u64) -> Vec<ChangePoint> {
    if series.iter().any(|v| !v.is_finite()) {
        return Vec::new();
    }
    let mut rng = SplitMix64::new(seed);
    // Boundaries of the current segments, and the change points found (index, q, p).
    let mut cuts: Vec<usize> = vec![0, series.len()];
    let mut found: Vec<(usize, f64, f64)> = Vec::new();
    loop {
        let mut candidate: Option<(usize, usize, usize, f64)> = None;
        for w in cuts.windows(2) {
            let (from, to) = (w[0], w[1]);
            if let Some((tau, q)) = best_split(&series[from..to]) {
                if candidate.is_none_or(|c| q > c.3) {
                    candidate = Some((from, to, from + tau, q));
                }
            }
        }
        let Some((from, to, at, q)) = candidate else {
            break;
        };
        let mut shuffled = series[from..to].to_vec();
        let mut reached = 0usize;
        for _ in 0..PERMUTATIONS {
            for i in (1..shuffled.len()).rev() {
                let j = rng.below(i + 1);
                shuffled.swap(i, j);
            }
            if best_split(&shuffled).is_some_and(|(_, pq)| pq >= q) {
                reached += 1;
            }
        }
        let p = (reached + 1) as f64 / (PERMUTATIONS + 1) as f64;
        if p >= SIGNIFICANCE {
            break;
        }
        found.push((at, q, p));
        cuts.push(at);
        cuts.sort_unstable();
    }
    found.sort_by_key(|f| f.0);
    let at: Vec<usize> = found.iter().map(|f| f.0).collect();
    found
        .iter()
        .enumerate()
        .map(|(i, &(index, q, p_value))| {
            let from = if i == 0 { 0 } else { at[i - 1] };
            let to = at.get(i + 1).copied().unwrap_or(series.len());
            let (mean_before, mean_after) = (mean(&series[from..index]), mean(&series[index..to]));
            ChangePoint {
                index,
                from,
                to,
                q,
                p_value,
                mean_before,
                mean_after,
                shift_pct: if mean_before != 0.0 {
                    (mean_after / mean_before - 1.0) * 100.0
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// One series of a history: a machine and plan, a workload × checksum state × client count,
/// each run's mean tps in time order, and the change points found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySeries {
    pub machine_identity: String,
    pub plan_digest: String,
    pub(crate) workload: String,
    pub(crate) checksums: String,
    pub(crate) clients: u32,
    /// (run id, started at, mean tps of the run's repeats), in time order.
    pub(crate) runs: Vec<(String, String, f64)>,
    pub changes: Vec<ChangePoint>,
}

/// Every series of the runs, grouped by machine identity and plan digest, each run's points
/// in time order (start, then run id); only series with at least [`MIN_SIDE`] × 2 runs are
/// searched, the others are returned without changes.
pub fn history(runs: &[RunDigest]) -> Vec<HistorySeries> {
    type Key = (String, String, String, String, u32);
    let mut sorted: Vec<&RunDigest> = runs.iter().collect();
    sorted.sort_by(|a, b| (&a.started_at, &a.run_id).cmp(&(&b.started_at, &b.run_id)));
    let mut series: BTreeMap<Key, Vec<(String, String, f64)>> = BTreeMap::new();
    for r in sorted {
        let mut by_point: BTreeMap<(&str, &str, u32), Vec<&DigestPoint>> = BTreeMap::new();
        for p in &r.points {
            by_point
                .entry((&p.workload, &p.checksums, p.clients))
                .or_default()
                .push(p);
        }
        for ((workload, checksums, clients), points) in by_point {
            let tps = mean(&points.iter().map(|p| p.tps).collect::<Vec<_>>());
            series
                .entry((
                    r.machine_identity.clone(),
                    r.plan_digest.clone(),
                    workload.to_string(),
                    checksums.to_string(),
                    clients,
                ))
                .or_default()
                .push((r.run_id.clone(), r.started_at.clone(), tps));
        }
    }
    series
        .into_iter()
        .enumerate()
        .map(
            |(i, ((machine_identity, plan_digest, workload, checksums, clients), runs))| {
                let figures: Vec<f64> = runs.iter().map(|r| r.2).collect();
                HistorySeries {
                    changes: change_points(&figures, i as u64 + 1),
                    machine_identity,
                    plan_digest,
                    workload,
                    checksums,
                    clients,
                    runs,
                }
            },
        )
        .collect()
}

/// A change point as one line: `change: <machine> plan <digest> <workload> (checksums on)
/// at 16 clients: tps −10.2 % (1000.3 → 898.2) from run X on (p = 0.005; 12 runs before,
/// 10 after, since run A, until run B)`.
pub fn change_line(s: &HistorySeries, c: &ChangePoint) -> String {
    format!(
        "change: {} plan {} {}{} at {} clients: tps {} % ({:.1} → {:.1}) from run {} on (p = {:.3}; {} run(s) before since {}, {} after until {})",
        s.machine_identity,
        &s.plan_digest[..s.plan_digest.len().min(12)],
        s.workload,
        if s.checksums.is_empty() {
            String::new()
        } else {
            format!(" (checksums {})", s.checksums)
        },
        s.clients,
        super::stats::signed(c.shift_pct),
        c.mean_before,
        c.mean_after,
        s.runs[c.index].0,
        c.p_value,
        c.index - c.from,
        s.runs[c.from].0,
        c.to - c.index,
        s.runs[c.to - 1].0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(rng: &mut SplitMix64, levels: &[(f64, usize)], cv: f64) -> Vec<f64> {
        levels
            .iter()
            .flat_map(|&(level, n)| rng.repeats(level, cv, n))
            .collect()
    }

    #[test]
    fn a_flat_series_has_no_change_point() {
        // A/A: 40 series of 20 runs at CV 3 %; at p < 0.05 about 2 could show one by chance.
        let mut rng = SplitMix64::new(7);
        let false_alarms = (0..40)
            .filter(|i| {
                let s = noisy(&mut rng, &[(1000.0, 20)], 0.03);
                !change_points(&s, 100 + i).is_empty()
            })
            .count();
        assert!(
            false_alarms <= 5,
            "{false_alarms} of 40 flat series had a change point"
        );
    }

    #[test]
    fn a_step_is_found_where_it_is_with_its_size() {
        let mut rng = SplitMix64::new(11);
        // 12 runs at 1000, then 10 at 900 (−10 %), CV 2 %.
        let s = noisy(&mut rng, &[(1000.0, 12), (900.0, 10)], 0.02);
        let cps = change_points(&s, 1);
        assert_eq!(cps.len(), 1, "{cps:?}");
        let c = &cps[0];
        assert_eq!(c.index, 12);
        assert!((c.shift_pct + 10.0).abs() < 2.0, "{c:?}");
        assert!(c.p_value < SIGNIFICANCE);
        assert_eq!((c.from, c.to), (0, 22));
    }

    #[test]
    fn two_steps_are_both_found_in_order() {
        let mut rng = SplitMix64::new(3);
        let s = noisy(&mut rng, &[(1000.0, 8), (1200.0, 8), (800.0, 8)], 0.02);
        let cps = change_points(&s, 2);
        let at: Vec<usize> = cps.iter().map(|c| c.index).collect();
        assert_eq!(at, [8, 16], "{cps:?}");
        assert!(
            cps[0].shift_pct > 15.0 && cps[1].shift_pct < -30.0,
            "{cps:?}"
        );
        // Each is measured between its neighbours, not against the whole history.
        assert_eq!((cps[1].from, cps[1].to), (8, 24));
    }

    #[test]
    fn one_outlier_is_not_a_change_and_short_series_have_none() {
        let mut rng = SplitMix64::new(5);
        let mut s = noisy(&mut rng, &[(1000.0, 16)], 0.02);
        s[8] = 300.0;
        assert!(
            change_points(&s, 4).is_empty(),
            "{:?}",
            change_points(&s, 4)
        );
        assert!(change_points(&[1000.0, 1000.0, 500.0, 500.0, 500.0], 1).is_empty());
        assert!(change_points(&[], 1).is_empty());
    }

    #[test]
    fn a_history_is_grouped_by_machine_and_plan_in_time_order() {
        let digest = |identity: &str, plan: &str, n: usize, tps: f64| RunDigest {
            key: format!("k/{identity}/{n}"),
            appliance: "a".into(),
            run_id: format!("run-{n:02}"),
            // Out of order on purpose: the history sorts by start.
            started_at: format!("2026-11-{:02}T00:00:00Z", 30 - n),
            hourly_price_usd: 0.0,
            cpu_model: String::new(),
            cpus: 2,
            memory_bytes: 0,
            postgres_version: "16".into(),
            kernel: String::new(),
            points: vec![DigestPoint {
                workload: "rw".into(),
                kind: Default::default(),
                builtin: "tpcb-like".into(),
                checksums: String::new(),
                clients: 8,
                tps,
                latency_avg_ms: None,
                latency: Default::default(),
                qps: None,
                ignored_errors: None,
                reconnects: None,
                tps_series: Vec::new(),
                client_bound: false,
            }],
            failed_points: 0,
            machine_identity: identity.into(),
            plan_digest: plan.into(),
        };
        let mut rng = SplitMix64::new(21);
        let mut runs = Vec::new();
        // m1, plan p: 8 runs at 1000 then (later in time, so smaller n) 8 at 850.
        for n in 0..16 {
            let level = if n < 8 { 850.0 } else { 1000.0 };
            runs.push(digest("m1", "p", n, rng.repeats(level, 0.02, 1)[0]));
        }
        // Another plan on m1 and another machine: their own constant series (a change
        // between groups is never one within a series).
        for n in 0..8 {
            runs.push(digest("m1", "q", n, 500.0));
            runs.push(digest("m2", "p", n, 700.0));
        }
        let h = history(&runs);
        assert_eq!(h.len(), 3);
        let m1p = h
            .iter()
            .find(|s| s.machine_identity == "m1" && s.plan_digest == "p")
            .expect("m1 p");
        assert_eq!(m1p.runs.len(), 16);
        assert_eq!(m1p.runs[0].0, "run-15", "oldest first");
        assert_eq!(m1p.changes.len(), 1, "{:?}", m1p.changes);
        let c = &m1p.changes[0];
        assert_eq!(m1p.runs[c.index].0, "run-07");
        assert!((c.shift_pct + 15.0).abs() < 3.0, "{c:?}");
        let line = change_line(m1p, c);
        assert!(
            line.starts_with("change: m1 plan p rw at 8 clients: tps \u{2212}1"),
            "{line}"
        );
        assert!(
            line.contains("from run run-07 on")
                && line.contains("8 run(s) before since run-15, 8 after until run-00"),
            "{line}"
        );
        assert!(h
            .iter()
            .filter(|s| s.plan_digest == "q" || s.machine_identity == "m2")
            .all(|s| s.changes.is_empty()));
    }

    #[test]
    fn a_shift_smaller_than_the_noise_is_not_claimed() {
        // 1 % shift at CV 5 % over 10 + 10 runs: not distinguishable; rarely claimed.
        let mut rng = SplitMix64::new(9);
        let claimed = (0..20)
            .filter(|i| {
                let s = noisy(&mut rng, &[(1000.0, 10), (1010.0, 10)], 0.05);
                !change_points(&s, 50 + i).is_empty()
            })
            .count();
        assert!(claimed <= 4, "{claimed} of 20");
    }
}
