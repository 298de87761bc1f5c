//! A point's steady window: its per-interval tps series with the ramp left out, summarised
//! (median, mean, coefficient of variation) and flagged when it stalled (`collapse`) or
//! wandered (`unstable`). Pure: a series in, figures out. docs/results.md states the rule.

use serde::{Deserialize, Serialize};

use crate::pgbench::ProgressSample;

/// Fewer intervals than this give no window (too short to tell a ramp from noise).
pub(crate) const MIN_INTERVALS: usize = 5;
/// The ramp is at least this share of the intervals (rounded up, at least one)…
pub(crate) const RAMP_SHARE: f64 = 0.10;
/// …and goes on while an interval is below this share of the second half's median.
pub(crate) const RAMP_LEVEL: f64 = 0.90;
/// `collapse`: an interval of the window below this share of the window's median.
pub(crate) const COLLAPSE_LEVEL: f64 = 0.10;
/// `unstable`: a CV above this, or the window's last third's mean this far from its first
/// third's.
pub(crate) const UNSTABLE_CV: f64 = 0.10;
pub(crate) const UNSTABLE_DRIFT: f64 = 0.10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SteadyFlag {
    /// An interval fell below 10 % of the window's median tps (a stall).
    Collapse,
    /// The window's CV is above 10 %, or its last third's mean tps is more than 10 % from
    /// its first third's (a drift).
    Unstable,
}

impl SteadyFlag {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SteadyFlag::Collapse => "collapse",
            SteadyFlag::Unstable => "unstable",
        }
    }
}

/// The steady part of a point's tps series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyWindow {
    /// The intervals left out as the ramp, and those in the window.
    pub(crate) ramp_intervals: usize,
    pub(crate) intervals: usize,
    /// The window's time span: the end of the last ramp interval (0 with no ramp) to the
    /// end of the last interval, in seconds since the point started.
    pub(crate) from_s: f64,
    pub(crate) to_s: f64,
    pub(crate) median_tps: f64,
    pub(crate) mean_tps: f64,
    /// Sample standard deviation of the window's tps over its mean.
    pub(crate) cv: f64,
    pub(crate) flags: Vec<SteadyFlag>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The steady window of a tps series (pgbench's progress intervals, sysbench's seconds).
/// The ramp is the first 10 % of the intervals (at least one), then every following
/// interval below 90 % of the median of the series' second half, up to half the series;
/// the window is the rest. None with fewer than [`MIN_INTERVALS`] intervals.
pub fn steady_window(series: &[ProgressSample]) -> Option<SteadyWindow> {
    let tps: Vec<f64> = series.iter().map(|s| s.tps).collect();
    let n = tps.len();
    if n < MIN_INTERVALS || tps.iter().any(|t| !t.is_finite()) {
        return None;
    }
    let level = RAMP_LEVEL * median(&tps[n / 2..]);
    let mut ramp = ((n as f64 * RAMP_SHARE).ceil() as usize).max(1);
    while ramp < n / 2 && tps[ramp] < level {
        ramp += 1;
    }
    let window = &tps[ramp..];
    let (median_tps, mean_tps) = (median(window), mean(window));
    let sd = if window.len() > 1 {
        (window.iter().map(|t| (t - mean_tps).powi(2)).sum::<f64>() / (window.len() - 1) as f64)
            .sqrt()
    } else {
        0.0
    };
    let cv = if mean_tps > 0.0 { sd / mean_tps } else { 0.0 };
    let mut flags = Vec::new();
    if window.iter().any(|t| *t < COLLAPSE_LEVEL * median_tps) || median_tps <= 0.0 {
        flags.push(SteadyFlag::Collapse);
    }
    let third = window.len() / 3;
    let drift = if third > 0 {
        let (first, last) = (
            mean(&window[..third]),
            mean(&window[window.len() - third..]),
        );
        first > 0.0 && (last / first - 1.0).abs() > UNSTABLE_DRIFT
    } else {
        false
    };
    if cv > UNSTABLE_CV || drift {
        flags.push(SteadyFlag::Unstable);
    }
    Some(SteadyWindow {
        ramp_intervals: ramp,
        intervals: window.len(),
        from_s: series[ramp - 1].elapsed_s,
        to_s: series[n - 1].elapsed_s,
        median_tps,
        mean_tps,
        cv,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SplitMix64;

    fn series(tps: &[f64]) -> Vec<ProgressSample> {
        tps.iter()
            .enumerate()
            .map(|(i, &tps)| ProgressSample {
                elapsed_s: (i + 1) as f64,
                tps,
                latency_ms: None,
                stddev_ms: None,
                lag_ms: None,
                failed: None,
            })
            .collect()
    }

    #[test]
    fn the_ramp_is_left_out_and_a_steady_series_is_not_flagged() {
        let mut rng = SplitMix64::new(5);
        // A slow start (cold cache) then 1000 tps at CV 2 %.
        let mut tps = vec![200.0, 500.0, 800.0];
        tps.extend(rng.repeats(1000.0, 0.02, 57));
        let w = steady_window(&series(&tps)).expect("60 intervals");
        assert_eq!(w.ramp_intervals, 6, "10 % of 60");
        assert_eq!(w.intervals, 54);
        assert_eq!((w.from_s, w.to_s), (6.0, 60.0));
        assert!((w.median_tps - 1000.0).abs() < 20.0, "{w:?}");
        assert!(w.cv < 0.04, "{w:?}");
        assert!(w.flags.is_empty(), "{w:?}");
        // A longer ramp than 10 %: it runs until tps reaches 90 % of the second half's.
        let mut slow: Vec<f64> = (1..=15).map(|i| f64::from(i) * 50.0).collect();
        slow.extend(rng.repeats(1000.0, 0.02, 25));
        let w = steady_window(&series(&slow)).expect("40 intervals");
        assert_eq!(w.ramp_intervals, 15, "{w:?}");
        assert!(w.flags.is_empty(), "{w:?}");
    }

    #[test]
    fn a_stall_is_a_collapse_and_a_drift_or_wide_spread_is_unstable() {
        let mut rng = SplitMix64::new(6);
        let mut stalled = rng.repeats(1000.0, 0.02, 30);
        stalled[20] = 0.0;
        let w = steady_window(&series(&stalled)).expect("window");
        assert!(w.flags.contains(&SteadyFlag::Collapse), "{w:?}");
        // Falling by a third over the run: a drift, CV or not.
        let drifting: Vec<f64> = (0..30).map(|i| 1200.0 - f64::from(i) * 13.0).collect();
        let w = steady_window(&series(&drifting)).expect("window");
        assert_eq!(w.flags, [SteadyFlag::Unstable], "{w:?}");
        let noisy = rng.repeats(1000.0, 0.25, 30);
        let w = steady_window(&series(&noisy)).expect("window");
        assert!(w.flags.contains(&SteadyFlag::Unstable), "{w:?}");
    }

    #[test]
    fn short_series_have_no_window() {
        assert!(steady_window(&series(&[100.0, 110.0, 105.0, 98.0])).is_none());
        assert!(steady_window(&[]).is_none());
        let w = steady_window(&series(&[10.0, 100.0, 100.0, 100.0, 100.0])).expect("five");
        assert_eq!((w.ramp_intervals, w.intervals), (1, 4));
        assert_eq!(w.cv, 0.0);
    }
}
