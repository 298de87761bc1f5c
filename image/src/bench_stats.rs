//! `pgappliance bench stats`: the calibration of the comparison's verdicts
//! (`pgappliance::compare::stats`). Seeded A/A trials (two equal machines, `--repeats` each
//! at `--cv`) count how often a verdict claims a difference that is not there (`faster`,
//! `slower` or `small`); trials with a true `--shift` count how often the verdict is
//! `faster`. The same is done with repeats drawn from real points captured in the test
//! fixtures. The last line is `stats: false verdicts X % on A/A, power Y % at 10 % shift`
//! (power: the interval wholly on the shift's side; the `faster` rate follows when it differs)
//! for the seeded trials.

use anyhow::{bail, Result};
use pgappliance::compare::stats::{calibrate, calibrate_from_pool, Calibration};
use pgappliance::outln;

#[derive(Debug, clap::Args)]
pub(crate) struct BenchStatsCli {
    /// Trials of each kind.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(100..=10_000_000))]
    pub(crate) trials: u32,
    /// Repeats on each side of a trial.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub(crate) repeats: u32,
    /// The noise of each repeat: its coefficient of variation in percent.
    #[arg(long, default_value_t = 3.0)]
    pub(crate) cv: f64,
    /// The true shift of the shifted trials, in percent.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) shift: f64,
    /// The verdicts' threshold T in percent (collect's --threshold).
    #[arg(long, default_value_t = 5.0)]
    pub(crate) threshold: f64,
    /// The generator's seed (the same seed gives the same figures).
    #[arg(long, default_value_t = 27)]
    pub(crate) seed: u64,
}

/// Real repeats of one point: the fixture's name and pgbench's output of each repeat.
const REAL_POINTS: [(&str, &str); 2] = [
    (
        "select-only -c 2 -T 3 (pgbench 15)",
        include_str!("../../daemon/tests/fixtures/stats/aa-v15-select-only-c2-T3.txt"),
    ),
    (
        "tpcb-like -c 2 -T 3 (pgbench 15)",
        include_str!("../../daemon/tests/fixtures/stats/aa-v15-tpcb-like-c2-T3.txt"),
    ),
];

/// The tps of each repeat in pgbench output run after run: its `tps = …` lines (pure).
pub(crate) fn repeat_tps(output: &str) -> Vec<f64> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("tps = "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

fn describe(c: &Calibration) -> String {
    format!(
        "false verdicts {} % on A/A, faster {} % and interval above 0 {} % at the shift, interval coverage {} %",
        pct(c.false_rate),
        pct(c.power),
        pct(c.detected),
        pct(c.coverage)
    )
}

/// The last line. Power is the share of shifted trials declared a difference in the right
/// direction: the interval wholly on the side of the shift (docs/results.md says why);
/// when the `faster` verdict's rate (its interval wholly beyond +T) differs, it follows.
fn summary_line(c: &Calibration, shift_pct: f64, t: f64) -> String {
    let mut line = format!(
        "stats: false verdicts {} % on A/A, power {} % at {} % shift",
        pct(c.false_rate),
        pct(c.detected),
        shift_pct
    );
    if pct(c.detected) != pct(c.power) {
        let (side, verdict, sign) = if shift_pct >= 0.0 {
            ("above", "faster", "+")
        } else {
            ("below", "slower", "\u{2212}")
        };
        line.push_str(&format!(
            " (interval wholly {side} 0; the verdict {verdict}, interval wholly {side} {sign}{t} %: {} %)",
            pct(c.power)
        ));
    }
    line
}

/// The coefficient of variation of a set of repeats.
fn cv(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() / mean
}

pub(crate) fn run(args: &BenchStatsCli) -> Result<i32> {
    let valid = args.cv > 0.0 && args.cv < 100.0 && args.threshold > 0.0 && args.shift.is_finite();
    if !valid {
        bail!("--cv must lie between 0 and 100, --threshold above 0, --shift a number");
    }
    let (trials, repeats) = (args.trials as usize, args.repeats as usize);
    let (cv_f, shift, t) = (args.cv / 100.0, args.shift / 100.0, args.threshold);
    let seeded = calibrate(args.seed, trials, repeats, cv_f, shift, t);
    outln!(
        "seeded: {trials} trials, {repeats} repeats a side at CV {} %, shift {:+} %, T {t} %: {}",
        args.cv,
        args.shift,
        describe(&seeded)
    );
    for (name, output) in REAL_POINTS {
        let pool = repeat_tps(output);
        match calibrate_from_pool(args.seed, trials, &pool, repeats, shift, t) {
            Some(c) => outln!(
                "real repeats of {name}: {} repeats (CV {:.1} %), {repeats} a side drawn without replacement: {}",
                pool.len(),
                cv(&pool) * 100.0,
                describe(&c)
            ),
            None => outln!(
                "real repeats of {name}: {} repeats, too few for {repeats} a side twice",
                pool.len()
            ),
        }
    }
    outln!("{}", summary_line(&seeded, args.shift, t));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_gives_power_as_detection_and_the_faster_rate_beside_it_when_they_differ() {
        let c = Calibration {
            trials: 100,
            false_rate: 0.004,
            power: 0.551,
            detected: 0.989,
            coverage: 0.956,
        };
        assert_eq!(
            summary_line(&c, 10.0, 5.0),
            "stats: false verdicts 0.4 % on A/A, power 98.9 % at 10 % shift (interval wholly above 0; the verdict faster, interval wholly above +5 %: 55.1 %)"
        );
        let same = Calibration { power: 0.989, ..c };
        assert_eq!(
            summary_line(&same, 10.0, 5.0),
            "stats: false verdicts 0.4 % on A/A, power 98.9 % at 10 % shift"
        );
    }

    #[test]
    fn the_fixtures_hold_twenty_repeats_each() {
        for (name, output) in REAL_POINTS {
            let tps = repeat_tps(output);
            assert_eq!(tps.len(), 20, "{name}");
            assert!(tps.iter().all(|v| *v > 0.0), "{name}");
        }
    }
}
