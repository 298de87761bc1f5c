//! pgbench: invoking it is in [`crate::sweep`] and the steps; everything here is parsing.

pub(crate) mod init;
pub(crate) mod progress;
pub mod summary;
pub(crate) mod txlog;

use std::io::BufReader;
use std::path::{Path, PathBuf};

pub use init::{parse_init, InitBreakdown};
pub use progress::{parse_progress, ProgressSample};
pub use summary::{parse_summary, Summary, SummaryError};
pub(crate) use txlog::{AggregateLog, LatencyStats, TransactionLog, TxLogError};

/// The log files pgbench wrote for `--log-prefix=<dir>/<name>`: `<name>.<pid>` and
/// `<name>.<pid>.<thread>`, sorted.
pub(crate) fn log_files(dir: &Path, name: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let fname = entry.file_name();
        let Some(fname) = fname.to_str() else {
            continue;
        };
        let Some(rest) = fname.strip_prefix(name).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        if rest
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Latency statistics from a point's log files (per-transaction or aggregate).
pub fn latency_from_logs(
    files: &[PathBuf],
    aggregate: bool,
    client_major: u32,
) -> Result<LatencyStats, TxLogError> {
    let open = |f: &PathBuf| {
        std::fs::File::open(f)
            .map(BufReader::new)
            .map_err(|source| TxLogError::Io {
                file: f.display().to_string(),
                source,
            })
    };
    if aggregate {
        let mut acc = AggregateLog::new(client_major);
        for f in files {
            acc.add(&f.display().to_string(), open(f)?)?;
        }
        Ok(acc.stats())
    } else {
        let mut acc = TransactionLog::new();
        for f in files {
            acc.add(&f.display().to_string(), open(f)?)?;
        }
        Ok(acc.stats())
    }
}
