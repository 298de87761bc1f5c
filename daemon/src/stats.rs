//! The statistics behind every comparing figure (STYLE habit 15): a tps ratio against a
//! baseline with its 95 % confidence interval, the Mann-Whitney U p-value, Cliff's δ, and a
//! verdict the noise cannot explain; and the geometric mean of such ratios over client
//! counts with its own interval. Pure: samples in, figures out.
//!
//! Method: Welch's t on the logarithms of the repeats. The difference of the mean logs
//! estimates the log of the ratio of geometric means; its standard error is
//! √(s₁²/n₁ + s₂²/n₂) with the Welch–Satterthwaite degrees of freedom, and the interval is
//! the difference ± t(0.975, df) × that error, turned back into a ratio. Logs make the
//! interval a ratio's (multiplicative noise, tps never below 0) and let ratios over client
//! counts be averaged. The interval assumes each side's log tps is roughly normal and its
//! repeats independent; with two repeats a side it is honest but wide (df near 2, t ≈ 4.3).
//!
//! Verdicts from the interval [lo, hi] of the change in percent and a threshold T:
//! `faster` lo > T; `slower` hi < −T; `same` inside [−T, T] and containing 0; `small` inside
//! [−T, T] and excluding 0 (a real difference smaller than T); `inconclusive` otherwise (the
//! interval reaches past ±T without lying wholly beyond it); `one sample` when a side has a
//! single repeat (no interval).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The confidence level of every interval.
pub(crate) const CONFIDENCE: f64 = 0.95;

/// The threshold T in percent when none is given.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// The largest number of repeats a one-sample verdict suggests; beyond it, "more than".
pub(crate) const MAX_SUGGESTED_REPEATS: u32 = 50;

/// What the data support about a ratio against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The whole interval lies above +T.
    #[serde(rename = "faster")]
    Faster,
    /// The whole interval lies below −T.
    #[serde(rename = "slower")]
    Slower,
    /// The interval lies within ±T and contains 0.
    #[serde(rename = "same")]
    Same,
    /// The interval lies within ±T and excludes 0: a difference, smaller than T.
    #[serde(rename = "small")]
    Small,
    /// The interval reaches past ±T but does not lie wholly beyond it.
    #[serde(rename = "inconclusive")]
    Inconclusive,
    /// A side has one repeat: no interval.
    #[serde(rename = "one sample")]
    OneSample,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Small => "small",
            Verdict::Inconclusive => "inconclusive",
            Verdict::OneSample => "one sample",
        }
    }

    /// The verdict of an interval of the change in percent against a threshold in percent.
    pub(crate) fn of_interval(lo_pct: f64, hi_pct: f64, threshold_pct: f64) -> Verdict {
        let t = threshold_pct;
        if lo_pct > t {
            Verdict::Faster
        } else if hi_pct < -t {
            Verdict::Slower
        } else if lo_pct >= -t && hi_pct <= t {
            if lo_pct <= 0.0 && hi_pct >= 0.0 {
                Verdict::Same
            } else {
                Verdict::Small
            }
        } else {
            Verdict::Inconclusive
        }
    }

    /// Whether the verdict claims a difference (what a false verdict on equal machines is).
    pub(crate) fn claims_difference(self) -> bool {
        matches!(self, Verdict::Faster | Verdict::Slower | Verdict::Small)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One side's figures on the log scale.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LogSample {
    n: usize,
    mean: f64,
    /// Sample variance (n − 1 in the denominator); 0 for one repeat.
    var: f64,
}

impl LogSample {
    fn of(values: &[f64]) -> LogSample {
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let n = logs.len();
        let mean = logs.iter().sum::<f64>() / n.max(1) as f64;
        let var = if n > 1 {
            logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        LogSample { n, mean, var }
    }
}

/// The usable repeats of a side: finite and above 0 (a tps of 0 has no logarithm and is a
/// failed point, not a slow one).
pub(crate) fn usable(values: &[f64]) -> Vec<f64> {
    values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect()
}

/// A ratio of a side against its baseline, with what backs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Repeats on the compared side and on the baseline's.
    pub(crate) n: usize,
    pub(crate) n_baseline: usize,
    /// Geometric mean of the side over that of the baseline.
    pub(crate) ratio: f64,
    /// The ratio's 95 % interval; none with one sample on a side.
    pub(crate) ci: Option<(f64, f64)>,
    /// Two-sided Mann-Whitney U p-value (exact without ties, normal with tie correction
    /// otherwise); none with one sample on a side.
    pub(crate) p_value: Option<f64>,
    /// Cliff's δ of the side against the baseline, in [−1, 1]: positive when the side's
    /// repeats tend to be higher.
    pub(crate) cliffs_delta: Option<f64>,
    pub(crate) verdict: Verdict,
    /// One sample on a side and at least two on the other: the repeats per side that the
    /// other side's noise suggests (see [`suggested_repeats`]); `MAX_SUGGESTED_REPEATS + 1`
    /// stands for "more than that".
    pub(crate) repeats_suggested: Option<u32>,
    /// The log-scale difference, its squared standard error and degrees of freedom, for
    /// [`geometric_mean`]; none with one sample on a side.
    log: Option<LogDiff>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct LogDiff {
    diff: f64,
    var: f64,
    df: f64,
}

impl Comparison {
    /// The change in percent: (ratio − 1) × 100.
    pub(crate) fn change_pct(&self) -> f64 {
        (self.ratio - 1.0) * 100.0
    }

    /// The interval of the change in percent.
    pub(crate) fn ci_pct(&self) -> Option<(f64, f64)> {
        self.ci
            .map(|(lo, hi)| ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0))
    }

    /// `+19.0 % (+17.2 … +20.9)`, or `+19.0 % (one sample)`.
    pub(crate) fn display_change(&self) -> String {
        display_change(self.change_pct(), self.ci_pct())
    }
}

/// A percentage with its sign, the minus a true minus sign: `−9.8`, `+4.0`.
pub(crate) fn signed(pct: f64) -> String {
    let s = format!("{pct:+.1}");
    match s.strip_prefix('-') {
        // -0.0 rounds to "-0.0": show it as the zero it is.
        Some("0.0") => "+0.0".to_string(),
        Some(rest) => format!("\u{2212}{rest}"),
        None => s,
    }
}

/// `−9.8 % (−14.1 … −5.2)`, or `−9.8 % (one sample)` without an interval.
pub(crate) fn display_change(pct: f64, ci_pct: Option<(f64, f64)>) -> String {
    match ci_pct {
        Some((lo, hi)) => format!("{} % ({} … {})", signed(pct), signed(lo), signed(hi)),
        None => format!("{} % (one sample)", signed(pct)),
    }
}

/// `side` against `baseline` (tps of the repeats, any order) at threshold `threshold_pct`.
/// Repeats that are not finite and above 0 are left out first. `None` when a side has no
/// usable repeat.
pub(crate) fn compare(side: &[f64], baseline: &[f64], threshold_pct: f64) -> Option<Comparison> {
    let (x, y) = (usable(side), usable(baseline));
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let (a, b) = (LogSample::of(&x), LogSample::of(&y));
    let diff = a.mean - b.mean;
    let ratio = diff.exp();
    if a.n < 2 || b.n < 2 {
        let other = if a.n >= 2 {
            Some(a.var)
        } else if b.n >= 2 {
            Some(b.var)
        } else {
            None
        };
        return Some(Comparison {
            n: a.n,
            n_baseline: b.n,
            ratio,
            ci: None,
            p_value: None,
            cliffs_delta: None,
            verdict: Verdict::OneSample,
            repeats_suggested: other.map(|v| suggested_repeats(v.sqrt(), threshold_pct)),
            log: None,
        });
    }
    let (va, vb) = (a.var / a.n as f64, b.var / b.n as f64);
    let var = va + vb;
    let df = welch_df(&[(va, (a.n - 1) as f64), (vb, (b.n - 1) as f64)]);
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, df) * var.sqrt();
    let (lo, hi) = ((diff - half).exp(), (diff + half).exp());
    Some(Comparison {
        n: a.n,
        n_baseline: b.n,
        ratio,
        ci: Some((lo, hi)),
        p_value: Some(mann_whitney_p(&x, &y)),
        cliffs_delta: Some(cliffs_delta(&x, &y)),
        verdict: Verdict::of_interval((lo - 1.0) * 100.0, (hi - 1.0) * 100.0, threshold_pct),
        repeats_suggested: None,
        log: Some(LogDiff { diff, var, df }),
    })
}

/// Welch–Satterthwaite degrees of freedom of a sum of variances, each `(v, df)`:
/// (Σv)² / Σ(v²/df). When every variance is 0 (identical repeats) the interval has no width
/// whatever the df: the sum of the dfs.
fn welch_df(parts: &[(f64, f64)]) -> f64 {
    let total: f64 = parts.iter().map(|p| p.0).sum();
    let denom: f64 = parts.iter().map(|(v, df)| v * v / df).sum();
    if total > 0.0 && denom > 0.0 {
        total * total / denom
    } else {
        parts.iter().map(|p| p.1).sum::<f64>().max(1.0)
    }
}

/// The repeats per side that a log-scale standard deviation `sd` suggests: the fewest n (2
/// to [`MAX_SUGGESTED_REPEATS`]) whose expected interval half-width, t(0.975, 2n − 2) ×
/// sd × √(2/n), is at most half the threshold, so that a difference of 1.5 T is called
/// `faster` or `slower` and one up to T/2 `same` or `small`. `MAX_SUGGESTED_REPEATS + 1`
/// when even that many would not do.
pub(crate) fn suggested_repeats(sd: f64, threshold_pct: f64) -> u32 {
    let target = (1.0 + threshold_pct / 100.0).ln() / 2.0;
    (2..=MAX_SUGGESTED_REPEATS)
        .find(|&n| {
            let n = f64::from(n);
            t_quantile(0.5 + CONFIDENCE / 2.0, 2.0 * n - 2.0) * sd * (2.0 / n).sqrt() <= target
        })
        .unwrap_or(MAX_SUGGESTED_REPEATS + 1)
}

/// The geometric mean of ratios over client counts, with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct GeometricMean {
    /// How many ratios it is the mean of (those with an interval).
    pub(crate) count: usize,
    pub(crate) ratio: f64,
    pub(crate) ci: (f64, f64),
    pub(crate) verdict: Verdict,
}

impl GeometricMean {
    pub(crate) fn change_pct(&self) -> f64 {
        (self.ratio - 1.0) * 100.0
    }

    pub(crate) fn ci_pct(&self) -> (f64, f64) {
        ((self.ci.0 - 1.0) * 100.0, (self.ci.1 - 1.0) * 100.0)
    }
}

/// The geometric mean of the ratios that have an interval (one-sample ones are left out:
/// they carry no noise estimate), with its 95 % interval: the mean of the log differences,
/// whose variance is Σ SE²/k² with Welch–Satterthwaite df over the parts. The interval is
/// of these client counts' mean ratio (each count's repeats independent of the others'),
/// not of a count that was not run.
pub(crate) fn geometric_mean(parts: &[&Comparison], threshold_pct: f64) -> Option<GeometricMean> {
    let logs: Vec<LogDiff> = parts.iter().filter_map(|c| c.log).collect();
    if logs.is_empty() {
        return None;
    }
    let k = logs.len() as f64;
    let diff = logs.iter().map(|l| l.diff).sum::<f64>() / k;
    let var = logs.iter().map(|l| l.var).sum::<f64>() / (k * k);
    let df = welch_df(&logs.iter().map(|l| (l.var, l.df)).collect::<Vec<_>>());
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, df) * var.sqrt();
    let (lo, hi) = ((diff - half).exp(), (diff + half).exp());
    Some(GeometricMean {
        count: logs.len(),
        ratio: diff.exp(),
        ci: (lo, hi),
        verdict: Verdict::of_interval((lo - 1.0) * 100.0, (hi - 1.0) * 100.0, threshold_pct),
    })
}

/// The 95 % interval of the mean of a side's repeats (for a chart's error bar): mean ±
/// t(0.975, n − 1) × s/√n; none with one repeat.
pub(crate) fn mean_interval(values: &[f64]) -> Option<(f64, f64)> {
    let v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = v.len();
    if n < 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    Some((mean - half, mean + half))
}

/// Cliff's δ of `x` against `y`: (#{x > y} − #{x < y}) / (n_x n_y).
pub(crate) fn cliffs_delta(x: &[f64], y: &[f64]) -> f64 {
    if x.is_empty() || y.is_empty() {
        return 0.0;
    }
    let mut d = 0i64;
    for a in x {
        for b in y {
            d += match a.partial_cmp(b) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    d as f64 / (x.len() * y.len()) as f64
}

/// The largest side for which the exact distribution of U is counted.
const EXACT_MW_MAX: usize = 50;

/// The two-sided p-value of the Mann-Whitney U test of `x` against `y`: exact (counting
/// every arrangement) when there are no ties and neither side is larger than 50; else the
/// normal approximation with the tie correction and a continuity correction.
pub(crate) fn mann_whitney_p(x: &[f64], y: &[f64]) -> f64 {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // U of x: pairs where x is larger, ties counting half; kept doubled to stay integral.
    let mut u2 = 0u64;
    for a in x {
        for b in y {
            u2 += match a.partial_cmp(b) {
                Some(std::cmp::Ordering::Greater) => 2,
                Some(std::cmp::Ordering::Equal) => 1,
                _ => 0,
            };
        }
    }
    let mut all: Vec<f64> = x.iter().chain(y).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j] == all[i] {
            j += 1;
        }
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    if tie_term == 0.0 && n1 <= EXACT_MW_MAX && n2 <= EXACT_MW_MAX {
        let u = (u2 / 2) as usize;
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let below: f64 = counts[..=u].iter().sum();
        let above: f64 = counts[u..].iter().sum();
        return (2.0 * below.min(above) / total).min(1.0);
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let dev = ((u2 as f64 / 2.0 - mean).abs() - 0.5).max(0.0);
    (2.0 * (1.0 - normal_cdf(dev / var.sqrt()))).min(1.0)
}

/// How many arrangements of n1 and n2 distinct values give each U from 0 to n1 n2: the
/// recurrence f(m, n, u) = f(m − 1, n, u − n) + f(m, n − 1, u), as floating counts.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // f[n][u] for the current m, n from 0 to n2.
    let max = n1 * n2;
    let mut prev: Vec<Vec<f64>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0.0; max + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for _m in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for n in 1..=n2 {
            for u in 0..=max {
                let take = if u >= n { prev[n][u - n] } else { 0.0 };
                cur[n][u] = take + cur[n - 1][u];
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26 through erfc,
/// error below 1.5e-7).
pub(crate) fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    if z >= 0.0 {
        1.0 - erfc / 2.0
    } else {
        erfc / 2.0
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised incomplete beta function I_x(a, b) (continued fraction, modified Lentz).
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The fraction converges fast for x < (a + 1)/(a + b + 2); else use the symmetry.
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        for numerator in [
            num,
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + numerator / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            f *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

/// Student's t distribution function with `df` (> 0, not necessarily whole) degrees of
/// freedom.
pub(crate) fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(x, df / 2.0, 0.5);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile (0.5 < p < 1) of Student's t with `df` degrees of freedom, by bisection
/// of [`t_cdf`].
pub(crate) fn t_quantile(p: f64, df: f64) -> f64 {
    let df = df.max(1e-3);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_cdf(hi, df) < p && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    (lo + hi) / 2.0
}

/// A small seeded generator (SplitMix64) for synthetic series in tests and `bench stats`:
/// the same seed gives the same numbers on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// A uniform index below `n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n
    }

    /// `n` repeats of a point whose true tps is `mean`, with log-normal noise of coefficient
    /// of variation `cv` (0.03 for 3 %).
    pub fn repeats(&mut self, mean: f64, cv: f64, n: usize) -> Vec<f64> {
        let sigma = (1.0 + cv * cv).ln().sqrt();
        (0..n)
            .map(|_| mean * (sigma * self.normal() - sigma * sigma / 2.0).exp())
            .collect()
    }
}

/// The calibration `pgappliance bench stats` prints: how often the verdicts claim a
/// difference between equal sides, and how often they call a true shift.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub trials: usize,
    /// Share of A/A trials whose verdict claims a difference (`faster`, `slower`, `small`).
    pub false_rate: f64,
    /// Share of trials with the tps shifted by `shift` whose verdict is `faster` (`slower`
    /// for a negative shift): the interval wholly beyond ±T.
    pub power: f64,
    /// Share of shifted trials whose interval lies wholly on the shift's side of 0 (a
    /// difference detected in the right direction, whatever its size against T): what
    /// `bench stats` reports as power.
    pub detected: f64,
    /// Share of trials whose interval held the true ratio (A/A and shifted together).
    pub coverage: f64,
}

/// Calibration over `trials` seeded A/A and shifted trials: each side `repeats` repeats at
/// coefficient of variation `cv`, the shifted side's true tps `1 + shift` times the
/// baseline's; the verdict at `threshold_pct`.
pub fn calibrate(
    seed: u64,
    trials: usize,
    repeats: usize,
    cv: f64,
    shift: f64,
    threshold_pct: f64,
) -> Calibration {
    let mut rng = SplitMix64::new(seed);
    calibrate_with(trials, threshold_pct, shift, |_| {
        let base = rng.repeats(1000.0, cv, repeats);
        let same = rng.repeats(1000.0, cv, repeats);
        let shifted = rng.repeats(1000.0 * (1.0 + shift), cv, repeats);
        (base, same, shifted)
    })
}

/// Calibration from a pool of real repeats of one point: each trial draws two disjoint
/// sides of `repeats` from the pool (A/A), and the shifted side is a third draw times
/// `1 + shift`. The pool must hold at least `2 × repeats` values.
pub fn calibrate_from_pool(
    seed: u64,
    trials: usize,
    pool: &[f64],
    repeats: usize,
    shift: f64,
    threshold_pct: f64,
) -> Option<Calibration> {
    if pool.len() < 2 * repeats || repeats < 2 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut draw = move |k: usize| -> (Vec<f64>, Vec<f64>) {
        let mut idx: Vec<usize> = (0..pool.len()).collect();
        for i in 0..2 * k {
            let j = i + rng.below(idx.len() - i);
            idx.swap(i, j);
        }
        (
            idx[..k].iter().map(|&i| pool[i]).collect(),
            idx[k..2 * k].iter().map(|&i| pool[i]).collect(),
        )
    };
    Some(calibrate_with(trials, threshold_pct, shift, |_| {
        let (base, same) = draw(repeats);
        let (_, other) = draw(repeats);
        let shifted = other.iter().map(|v| v * (1.0 + shift)).collect();
        (base, same, shifted)
    }))
}

fn calibrate_with(
    trials: usize,
    threshold_pct: f64,
    shift: f64,
    mut sides: impl FnMut(usize) -> (Vec<f64>, Vec<f64>, Vec<f64>),
) -> Calibration {
    let (mut false_verdicts, mut faster, mut detected, mut covered, mut intervals) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for i in 0..trials {
        let (base, same, shifted) = sides(i);
        for (side, truth) in [(&same, 1.0), (&shifted, 1.0 + shift)] {
            let Some(c) = compare(side, &base, threshold_pct) else {
                continue;
            };
            if let Some((lo, hi)) = c.ci {
                intervals += 1;
                if lo <= truth && truth <= hi {
                    covered += 1;
                }
            }
            if truth == 1.0 {
                false_verdicts += usize::from(c.verdict.claims_difference());
            } else {
                // In the shift's direction: a negative shift is called `slower`.
                let up = shift >= 0.0;
                let called = if up { Verdict::Faster } else { Verdict::Slower };
                faster += usize::from(c.verdict == called);
                detected +=
                    usize::from(c.ci.is_some_and(|(lo, hi)| if up { lo > 1.0 } else { hi < 1.0 }));
            }
        }
    }
    let share = |k: usize, of: usize| if of == 0 { 0.0 } else { k as f64 / of as f64 };
    Calibration {
        trials,
        false_rate: share(false_verdicts, trials),
        power: share(faster, trials),
        detected: share(detected, trials),
        coverage: share(covered, intervals),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, want) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (8.0, 2.306),
            (10.0, 2.228),
            (30.0, 2.042),
            (1000.0, 1.962),
        ] {
            let got = t_quantile(0.975, df);
            assert!(close(got, want, 0.002), "df {df}: {got}");
        }
        // A fractional df lies between its neighbours.
        let q = t_quantile(0.975, 2.5);
        assert!(q < 4.303 && q > 3.182, "{q}");
        assert!(close(t_cdf(0.0, 3.0), 0.5, 1e-12));
        assert!(close(normal_cdf(1.959_964), 0.975, 1e-6));
        assert!(close(normal_cdf(-1.0), 0.158_655, 1e-6));
    }

    #[test]
    fn mann_whitney_and_cliffs_delta_on_known_cases() {
        // Wholly separated sides: U = 0; exact p = 2 / C(n1 + n2, n1).
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!(close(p, 0.1, 1e-12), "{p}");
        let p = mann_whitney_p(&[6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(close(p, 2.0 / 252.0, 1e-12), "{p}");
        // Interleaved: p = 1.
        let p = mann_whitney_p(&[1.0, 4.0], &[2.0, 3.0]);
        assert!(close(p, 1.0, 1e-12), "{p}");
        // Two repeats a side can never give p below 1/3.
        assert!(mann_whitney_p(&[10.0, 11.0], &[1.0, 2.0]) >= 1.0 / 3.0 - 1e-12);
        // Ties: the normal approximation, still 1 for identical sides.
        assert!(close(mann_whitney_p(&[5.0; 4], &[5.0; 4]), 1.0, 1e-12));
        assert_eq!(cliffs_delta(&[6.0, 7.0], &[1.0, 2.0]), 1.0);
        assert_eq!(cliffs_delta(&[1.0, 2.0], &[6.0, 7.0]), -1.0);
        assert_eq!(cliffs_delta(&[1.0, 4.0], &[2.0, 3.0]), 0.0);
    }

    #[test]
    fn verdicts_follow_the_interval_and_threshold() {
        let v = |lo, hi| Verdict::of_interval(lo, hi, 5.0);
        assert_eq!(v(6.0, 20.0), Verdict::Faster);
        assert_eq!(v(-20.0, -5.1), Verdict::Slower);
        assert_eq!(v(-3.0, 4.0), Verdict::Same);
        assert_eq!(v(1.0, 4.0), Verdict::Small);
        assert_eq!(v(-4.0, -1.0), Verdict::Small);
        assert_eq!(v(2.0, 9.0), Verdict::Inconclusive);
        assert_eq!(v(-9.0, 3.0), Verdict::Inconclusive);
        assert_eq!(v(-30.0, 30.0), Verdict::Inconclusive);
        // On the threshold itself: not wholly beyond it.
        assert_eq!(v(5.0, 8.0), Verdict::Inconclusive);
        assert_eq!(v(-5.0, 5.0), Verdict::Same);
        assert_eq!(
            serde_json::to_string(&Verdict::OneSample).expect("json"),
            "\"one sample\""
        );
    }

    #[test]
    fn changes_are_shown_with_a_true_minus_and_their_interval() {
        assert_eq!(
            display_change(-9.8, Some((-14.1, -5.2))),
            "\u{2212}9.8 % (\u{2212}14.1 … \u{2212}5.2)"
        );
        assert_eq!(
            display_change(19.0, Some((17.24, 20.9))),
            "+19.0 % (+17.2 … +20.9)"
        );
        assert_eq!(display_change(-0.01, None), "+0.0 % (one sample)");
    }

    #[test]
    fn one_sample_has_no_interval_and_says_how_many_repeats_would_do() {
        let c = compare(&[1000.0], &[990.0, 1010.0, 1000.0], 5.0).expect("usable");
        assert_eq!(c.verdict, Verdict::OneSample);
        assert_eq!((c.n, c.n_baseline), (1, 3));
        assert!(c.ci.is_none() && c.p_value.is_none() && c.cliffs_delta.is_none());
        let n = c.repeats_suggested.expect("the baseline has repeats");
        assert!((2..=5).contains(&n), "{n}");
        // Noisier repeats suggest more.
        let noisy = compare(&[1000.0], &[800.0, 1200.0, 1000.0], 5.0).expect("usable");
        assert!(noisy.repeats_suggested.expect("suggested") > n);
        // One sample each: nothing to go on.
        let c = compare(&[1000.0], &[900.0], 5.0).expect("usable");
        assert_eq!(c.verdict, Verdict::OneSample);
        assert_eq!(c.repeats_suggested, None);
        assert!(close(c.change_pct(), 100.0 / 9.0, 1e-9));
        // Unusable repeats are left out; none left is no comparison.
        assert!(compare(&[0.0, f64::NAN], &[1.0, 2.0], 5.0).is_none());
        assert_eq!(compare(&[0.0, 5.0], &[5.0, 5.0], 5.0).expect("usable").n, 1);
    }

    #[test]
    fn two_repeats_give_a_wide_but_honest_interval() {
        let c = compare(&[1100.0, 1000.0], &[1000.0, 1050.0], 5.0).expect("usable");
        let (lo, hi) = c.ci_pct().expect("interval");
        assert!(lo < 0.0 && hi > 5.0, "{lo} … {hi}");
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // Identical repeats: an interval of no width.
        let c = compare(&[1190.0, 1190.0], &[1000.0, 1000.0], 5.0).expect("usable");
        assert_eq!(c.verdict, Verdict::Faster);
        let (lo, hi) = c.ci_pct().expect("interval");
        assert!(close(lo, 19.0, 1e-9) && close(hi, 19.0, 1e-9));
    }

    /// A/A: equal true tps at CV 1–10 % and 3–10 repeats. The verdict claims a difference
    /// (faster, slower, small) in about 5 % of trials at most (the interval's 95 %), and
    /// faster or slower almost never (at most 1 in 1000) at a CV of 3 % or less.
    #[test]
    fn equal_sides_rarely_claim_a_difference() {
        let mut rng = SplitMix64::new(27);
        for cv in [0.01, 0.03, 0.05, 0.10] {
            for n in [3usize, 5, 10] {
                let trials = 2000;
                let (mut claims, mut beyond) = (0, 0);
                for _ in 0..trials {
                    let a = rng.repeats(5000.0, cv, n);
                    let b = rng.repeats(5000.0, cv, n);
                    let c = compare(&a, &b, 5.0).expect("usable");
                    claims += usize::from(c.verdict.claims_difference());
                    beyond += usize::from(matches!(c.verdict, Verdict::Faster | Verdict::Slower));
                }
                let rate = claims as f64 / trials as f64;
                assert!(rate <= 0.065, "cv {cv} n {n}: {rate}");
                if cv <= 0.03 {
                    assert!(beyond * 1000 <= trials, "cv {cv} n {n}: {beyond}");
                }
            }
        }
    }

    /// Shifts of 2–20 %: the interval holds the true ratio about 95 % of the time, a shift
    /// well past T is called in its direction, never in the other, and a shift below T is
    /// called faster or slower in at most 1 % of trials (the interval would have to miss
    /// the truth on that side, 2.5 % at most).
    #[test]
    fn shifts_are_covered_and_called_in_their_direction() {
        let mut rng = SplitMix64::new(2027);
        for shift in [0.02, -0.02, 0.05, 0.10, -0.10, 0.20, -0.20] {
            for (cv, n) in [(0.01, 3usize), (0.03, 5), (0.05, 10)] {
                let trials = 1000;
                let (mut covered, mut right, mut wrong) = (0, 0, 0);
                for _ in 0..trials {
                    let base = rng.repeats(5000.0, cv, n);
                    let side = rng.repeats(5000.0 * (1.0 + shift), cv, n);
                    let c = compare(&side, &base, 5.0).expect("usable");
                    let (lo, hi) = c.ci.expect("interval");
                    covered += usize::from(lo <= 1.0 + shift && 1.0 + shift <= hi);
                    let want = if shift > 0.0 {
                        Verdict::Faster
                    } else {
                        Verdict::Slower
                    };
                    right += usize::from(c.verdict == want);
                    wrong += usize::from(
                        matches!(c.verdict, Verdict::Faster | Verdict::Slower) && c.verdict != want,
                    );
                }
                let coverage = covered as f64 / trials as f64;
                assert!(coverage >= 0.93, "shift {shift} cv {cv} n {n}: {coverage}");
                assert_eq!(wrong, 0, "shift {shift} cv {cv} n {n}: the wrong direction");
                if shift.abs() < 0.05 {
                    assert!(
                        right * 100 <= trials,
                        "shift {shift} below T called: {right}"
                    );
                }
                if shift.abs() >= 0.20 {
                    assert!(
                        right * 100 >= trials * 99,
                        "shift {shift} cv {cv} n {n}: {right}"
                    );
                }
            }
        }
    }

    /// One wild repeat (half the others' tps) widens the interval instead of making a
    /// verdict: equal machines stay unclaimed, and the rank test is not fooled more often
    /// than its 5 %.
    #[test]
    fn an_outlier_widens_the_interval_rather_than_making_a_verdict() {
        let mut rng = SplitMix64::new(7);
        let mut significant = 0;
        for _ in 0..400 {
            let mut a = rng.repeats(5000.0, 0.02, 5);
            a[2] *= 0.5;
            let b = rng.repeats(5000.0, 0.02, 5);
            let c = compare(&a, &b, 5.0).expect("usable");
            assert!(
                !matches!(c.verdict, Verdict::Faster | Verdict::Slower),
                "{a:?} vs {b:?}: {:?}",
                c.ci_pct()
            );
            significant += usize::from(c.p_value.expect("p") <= 0.05);
        }
        assert!(significant <= 40, "{significant} of 400");
    }

    #[test]
    fn the_geometric_mean_has_its_own_interval() {
        let mut rng = SplitMix64::new(99);
        // Seven client counts, each +10 % at CV 3 % with 5 repeats.
        let cs: Vec<Comparison> = (0..7)
            .map(|_| {
                compare(
                    &rng.repeats(1100.0, 0.03, 5),
                    &rng.repeats(1000.0, 0.03, 5),
                    5.0,
                )
                .expect("usable")
            })
            .collect();
        let refs: Vec<&Comparison> = cs.iter().collect();
        let g = geometric_mean(&refs, 5.0).expect("intervals");
        assert_eq!(g.count, 7);
        let (lo, hi) = g.ci;
        assert!(lo < 1.10 && 1.10 < hi, "{lo} … {hi}");
        // Averaging seven narrows the interval against any one of them.
        let widest = cs
            .iter()
            .map(|c| c.ci.map(|(l, h)| h / l).unwrap_or(1.0))
            .fold(0.0, f64::max);
        assert!(hi / lo < widest);
        assert_eq!(g.verdict, Verdict::Faster);
        // One-sample ratios are left out; none with an interval is no mean.
        let one = compare(&[1.0], &[2.0], 5.0).expect("usable");
        assert!(geometric_mean(&[&one], 5.0).is_none());
        let with_one = geometric_mean(&[&cs[0], &one], 5.0).expect("one with interval");
        assert_eq!(with_one.count, 1);
        assert!(close(with_one.ratio, cs[0].ratio, 1e-12));
    }

    #[test]
    fn calibration_at_cv_3_with_5_repeats() {
        let c = calibrate(1, 2000, 5, 0.03, 0.10, 5.0);
        assert!(c.false_rate <= 0.06, "{c:?}");
        assert!(c.detected >= 0.95, "{c:?}");
        assert!(c.coverage >= 0.93, "{c:?}");
        // The same from a pool of values: A/A stays rare.
        let mut rng = SplitMix64::new(3);
        let pool = rng.repeats(1000.0, 0.03, 40);
        let p = calibrate_from_pool(1, 2000, &pool, 5, 0.10, 5.0).expect("pool large enough");
        assert!(p.false_rate <= 0.07, "{p:?}");
        assert!(calibrate_from_pool(1, 10, &pool[..9], 5, 0.1, 5.0).is_none());
        let m = mean_interval(&[100.0, 102.0, 98.0]).expect("three repeats");
        assert!(m.0 < 100.0 && m.1 > 100.0);
        assert!(mean_interval(&[100.0]).is_none());
    }
}
