//! Parser for `--progress` lines: the per-interval tps series of a point.
//!
//! `progress: 60.0 s, 643.3 tps, lat 12.429 ms stddev 7.998` (13, 14) and the same with
//! `, lag …`, `, N skipped`, `, N retried, M retries`, `, N failed` (15+) appended.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressSample {
    /// Seconds since the run started (end of the interval).
    pub elapsed_s: f64,
    pub tps: f64,
    /// `None` when pgbench printed NaN (no transaction finished in the interval).
    pub latency_ms: Option<f64>,
    pub stddev_ms: Option<f64>,
    pub lag_ms: Option<f64>,
    pub failed: Option<u64>,
}

fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// Parses one progress line; `None` for lines that are not progress reports.
pub fn parse_progress_line(line: &str) -> Option<ProgressSample> {
    let rest = line.trim().strip_prefix("progress: ")?;
    let mut parts = rest.split(", ");
    let elapsed_s: f64 = parts.next()?.strip_suffix(" s")?.trim().parse().ok()?;
    let tps: f64 = parts.next()?.strip_suffix(" tps")?.trim().parse().ok()?;
    let mut sample = ProgressSample {
        elapsed_s,
        tps,
        latency_ms: None,
        stddev_ms: None,
        lag_ms: None,
        failed: None,
    };
    for part in parts {
        let words: Vec<&str> = part.split_whitespace().collect();
        match words.as_slice() {
            ["lat", lat, "ms", "stddev", sd, ..] => {
                sample.latency_ms = finite(lat.parse().ok());
                sample.stddev_ms = finite(sd.parse().ok());
            }
            ["lat", lat, "ms", ..] => sample.latency_ms = finite(lat.parse().ok()),
            ["lag", lag, "ms", ..] => sample.lag_ms = finite(lag.parse().ok()),
            [n, "failed"] => sample.failed = n.parse().ok(),
            _ => {}
        }
    }
    Some(sample)
}

/// Every progress sample in a stream (pgbench's stderr), other lines ignored.
pub fn parse_progress(text: &str) -> Vec<ProgressSample> {
    text.lines().filter_map(parse_progress_line).collect()
}
