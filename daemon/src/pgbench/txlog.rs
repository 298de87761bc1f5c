//! Latency percentiles from pgbench's logs (`-l`): per-transaction logs go into an HDR
//! histogram (µs resolution, 3 significant digits); aggregate logs (`--aggregate-interval`)
//! give count, mean, min and max only.
//!
//! Per-transaction line: `client_id transaction_no time script_no time_epoch time_us
//! [schedule_lag] [retries]` where `time` is the latency in µs, or `failed`/`skipped`
//! (15+ also `serialization`/`deadlock` with `--failures-detailed`, 19 also `other`).
//! Aggregate line: `interval_start num_transactions sum_latency sum_latency_2 min_latency
//! max_latency …` (the columns after max_latency differ by version, see [`AggregateLog`]).

use std::io::BufRead;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency distribution of one point, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub(crate) source: LatencySource,
    pub transactions: u64,
    pub failed: u64,
    pub skipped: u64,
    pub mean_ms: Option<f64>,
    pub(crate) min_ms: Option<f64>,
    /// The lower quartile (absent from runs recorded before it was kept).
    #[serde(default)]
    pub p25_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    /// The upper quartile (absent from runs recorded before it was kept).
    #[serde(default)]
    pub p75_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_9_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LatencySource {
    TransactionLog,
    AggregateLog,
}

#[derive(Debug, thiserror::Error)]
pub enum TxLogError {
    #[error("{file}:{line_no}: not a pgbench log line: \"{line}\"")]
    Malformed {
        file: String,
        line_no: usize,
        line: String,
    },
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
}

/// Calls `record` with the fields of every non-empty line (at least six, as both log
/// formats have), and a constructor for the error naming that line.
fn for_each_record(
    file: &str,
    reader: impl BufRead,
    mut record: impl FnMut(&[&str], &dyn Fn() -> TxLogError) -> Result<(), TxLogError>,
) -> Result<(), TxLogError> {
    for (idx, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| TxLogError::Io {
            file: file.to_string(),
            source,
        })?;
        let malformed = || TxLogError::Malformed {
            file: file.to_string(),
            line_no: idx + 1,
            line: line.clone(),
        };
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        if fields.len() < 6 {
            return Err(malformed());
        }
        record(&fields, &malformed)?;
    }
    Ok(())
}

/// Highest latency the histogram tracks: one hour in µs (longer values are clamped).
const MAX_TRACKED_US: u64 = 3_600_000_000;

/// Accumulates per-transaction log files into one histogram.
pub(crate) struct TransactionLog {
    hist: Histogram<u64>,
    failed: u64,
    skipped: u64,
}

impl Default for TransactionLog {
    fn default() -> Self {
        Self::new()
    }
}

impl TransactionLog {
    pub(crate) fn new() -> Self {
        TransactionLog {
            hist: Histogram::new_with_bounds(1, MAX_TRACKED_US, 3)
                .expect("static histogram bounds are valid"),
            failed: 0,
            skipped: 0,
        }
    }

    /// Adds one log file's lines; `file` names it in errors.
    pub(crate) fn add(&mut self, file: &str, reader: impl BufRead) -> Result<(), TxLogError> {
        for_each_record(file, reader, |fields, malformed| {
            match fields[2] {
                "failed" | "serialization" | "deadlock" | "other" => self.failed += 1,
                "skipped" => self.skipped += 1,
                us => {
                    let us: u64 = us.parse().map_err(|_| malformed())?;
                    self.hist.saturating_record(us.clamp(1, MAX_TRACKED_US));
                }
            }
            Ok(())
        })
    }

    pub(crate) fn stats(&self) -> LatencyStats {
        let h = &self.hist;
        let n = h.len();
        let ms = |us: u64| us as f64 / 1000.0;
        let q = |p: f64| (n > 0).then(|| ms(h.value_at_quantile(p)));
        LatencyStats {
            source: LatencySource::TransactionLog,
            transactions: n,
            failed: self.failed,
            skipped: self.skipped,
            mean_ms: (n > 0).then(|| h.mean() / 1000.0),
            min_ms: (n > 0).then(|| ms(h.min())),
            p25_ms: q(0.25),
            p50_ms: q(0.50),
            p75_ms: q(0.75),
            p90_ms: q(0.90),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            p99_9_ms: q(0.999),
            max_ms: (n > 0).then(|| ms(h.max())),
        }
    }
}

/// Accumulates aggregate log files (written without `--rate` or `--failures-detailed`).
pub(crate) struct AggregateLog {
    client_major: u32,
    transactions: u64,
    sum_us: f64,
    min_us: Option<f64>,
    max_us: Option<f64>,
    failed: u64,
    skipped: u64,
}

impl AggregateLog {
    /// The layout depends on the pgbench client's major version.
    pub(crate) fn new(client_major: u32) -> Self {
        AggregateLog {
            client_major,
            transactions: 0,
            sum_us: 0.0,
            min_us: None,
            max_us: None,
            failed: 0,
            skipped: 0,
        }
    }

    pub(crate) fn add(&mut self, file: &str, reader: impl BufRead) -> Result<(), TxLogError> {
        for_each_record(file, reader, |f, malformed| {
            // Counts are whole numbers; latencies (µs) finite and not negative.
            let count = |s: &str| s.parse::<u64>().map_err(|_| malformed());
            let micros = |s: &str| match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(malformed()),
            };
            let n = count(f[1])?;
            let sum = micros(f[2])?;
            micros(f[3])?;
            if n > 0 {
                let (lo, hi) = (micros(f[4])?, micros(f[5])?);
                if lo > hi {
                    return Err(malformed());
                }
                self.min_us = Some(self.min_us.map_or(lo, |m| m.min(lo)));
                self.max_us = Some(self.max_us.map_or(hi, |m| m.max(hi)));
            }
            self.transactions = self.transactions.checked_add(n).ok_or_else(malformed)?;
            self.sum_us += sum;
            // Later 15.x and 16+ always print every column: lag (4), skipped, retried,
            // retries, serialization and deadlock failures; 19 adds other failures
            // (--continue-on-error). Early 15.x printed one failures column after
            // max_latency.
            let failed = if f.len() >= 15 {
                self.skipped = self.skipped.saturating_add(count(f[10])?);
                let other = match f.get(15) {
                    Some(o) => count(o)?,
                    None => 0,
                };
                count(f[13])?
                    .saturating_add(count(f[14])?)
                    .saturating_add(other)
            } else if self.client_major >= 15 && f.len() == 7 {
                count(f[6])?
            } else {
                0
            };
            self.failed = self.failed.saturating_add(failed);
            Ok(())
        })
    }

    pub(crate) fn stats(&self) -> LatencyStats {
        let n = self.transactions;
        LatencyStats {
            source: LatencySource::AggregateLog,
            transactions: n,
            failed: self.failed,
            skipped: self.skipped,
            mean_ms: (n > 0).then(|| self.sum_us / n as f64 / 1000.0),
            min_ms: self.min_us.map(|v| v / 1000.0),
            p25_ms: None,
            p50_ms: None,
            p75_ms: None,
            p90_ms: None,
            p95_ms: None,
            p99_ms: None,
            p99_9_ms: None,
            max_ms: self.max_us.map(|v| v / 1000.0),
        }
    }
}
