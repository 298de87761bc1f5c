//! The cross-machine comparison `pgappliance collect` publishes. It leads with the finding,
//! computed from the data: per workload and client count, each machine's tps against a
//! baseline machine, the data checksums on/off cost, tps per dollar-hour, and one summary
//! sentence per workload; then regressions against the baseline when a threshold is given;
//! then one chart per workload with one line per machine, and latency percentiles. Also
//! `summary.csv` (one row per machine × workload × checksum state × clients). Pure: digests
//! of runs in, text out.
//!
//! A run is reduced to a [`RunDigest`] as soon as it is read, so the comparison holds the
//! figures of every run, never their series or raw evidence.
//!
//! Analysis (pure data in, data out; every verdict is decided here): [`model`] (digests and
//! rows), [`select`] (which runs are shown, labels, the baseline), [`findings`] (comparisons,
//! aggregates, `findings.json`), [`regress`] (regressions), [`history`] (change points
//! over a history of runs, E-divisive means), [`prose`] (the sentences, from
//! the verdicts), [`stats`] (the statistics, `crate::stats`). Presentation (the analysis in, text out):
//! [`csv`] (`summary.csv`), [`html`] (the page), [`charts`] (its SVG charts). The
//! presentation modules decide nothing; the analysis modules write no markup.

pub(crate) mod charts;
pub(crate) mod csv;
pub(crate) mod findings;
pub mod history;
pub(crate) mod html;
pub(crate) mod model;
pub(crate) mod prose;
pub(crate) mod regress;
pub(crate) mod select;
/// The statistics live in the crate's lowest layer (the sweep's adaptive repeats use them
/// too); here under their old path.
pub use crate::stats;

pub use csv::summary_csv;
pub use findings::{findings, findings_json};
pub use html::{render_index, IndexOptions};
#[cfg(test)]
pub(crate) use model::{downsample, DigestPoint, Percentiles, DIGEST_SERIES_SAMPLES};
pub use model::{rows, RunDigest};
pub use regress::{regression_line, regressions};
pub use select::{baseline_index, labels, select_runs, SkippedRun};

#[cfg(test)]
mod tests;
