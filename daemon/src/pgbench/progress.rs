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
    pub(crate) stddev_ms: Option<f64>,
    pub lag_ms: Option<f64>,
    pub failed: Option<u64>,
}

/// A progress line whose figures pgbench cannot have printed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("progress line {line_no}: {problem}: \"{line}\"")]
pub struct ProgressError {
    pub line_no: usize,
    pub(crate) problem: String,
    pub(crate) line: String,
}

/// A latency column: pgbench prints `NaN` when no transaction finished in the interval
/// (`None`); anything else must be a finite, non-negative number.
fn latency(text: &str, what: &str) -> Result<Option<f64>, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_nan() => Ok(None),
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err(format!(
            "{what} \"{text}\" is not a finite, non-negative number"
        )),
    }
}

/// Parses one progress line: `Ok(None)` for lines that are not progress reports, an error
/// naming the figure for one that is but reports something impossible.
pub(crate) fn parse_progress_line(line: &str) -> Result<Option<ProgressSample>, String> {
    let Some(rest) = line.trim().strip_prefix("progress: ") else {
        return Ok(None);
    };
    let mut parts = rest.split(", ");
    let head = |part: Option<&str>, unit: &str| -> Option<f64> {
        part?.strip_suffix(unit)?.trim().parse().ok()
    };
    let (Some(elapsed_s), Some(tps)) = (head(parts.next(), " s"), head(parts.next(), " tps"))
    else {
        return Ok(None);
    };
    for (what, v) in [("elapsed time", elapsed_s), ("tps", tps)] {
        if !v.is_finite() || v < 0.0 {
            return Err(format!("{what} {v} is not a finite, non-negative number"));
        }
    }
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
                sample.latency_ms = latency(lat, "latency")?;
                sample.stddev_ms = latency(sd, "stddev")?;
            }
            ["lat", lat, "ms", ..] => sample.latency_ms = latency(lat, "latency")?,
            ["lag", lag, "ms", ..] => sample.lag_ms = latency(lag, "lag")?,
            [n, "failed"] => {
                sample.failed = Some(
                    n.parse()
                        .map_err(|_| format!("failed count \"{n}\" is not a count"))?,
                )
            }
            _ => {}
        }
    }
    Ok(Some(sample))
}

/// Every progress sample in a stream (pgbench's stderr), other lines ignored. A sample with
/// an impossible figure, or one that goes back in time, refuses the stream naming its line.
pub fn parse_progress(text: &str) -> Result<Vec<ProgressSample>, ProgressError> {
    let mut samples: Vec<ProgressSample> = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let err = |problem: String| ProgressError {
            line_no: idx + 1,
            problem,
            line: line.to_string(),
        };
        let Some(sample) = parse_progress_line(line).map_err(err)? else {
            continue;
        };
        if let Some(prev) = samples.last() {
            if sample.elapsed_s < prev.elapsed_s {
                return Err(err(format!(
                    "elapsed time {} s is before the previous sample's {} s",
                    sample.elapsed_s, prev.elapsed_s
                )));
            }
        }
        samples.push(sample);
    }
    Ok(samples)
}
