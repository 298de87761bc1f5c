//! Which runs a comparison shows, their labels, and which is the baseline.

use std::collections::{BTreeMap, BTreeSet};

use super::model::RunDigest;

/// A run that was not used, and why.
pub struct SkippedRun {
    pub key: String,
    pub reason: String,
}

/// The runs a comparison shows, chosen from every run collected: the latest run of each
/// machine (by start time, then run id), or every run with `all_runs`. A run whose id is
/// `keep` (the baseline run of a regression check) is shown as well. Returns the shown
/// runs, sorted by machine then start, and the keys of the runs left out.
pub fn select_runs(
    runs: Vec<RunDigest>,
    all_runs: bool,
    keep: Option<&str>,
) -> (Vec<RunDigest>, Vec<String>) {
    let mut by_machine: BTreeMap<String, Vec<RunDigest>> = BTreeMap::new();
    for r in runs {
        by_machine.entry(r.appliance.clone()).or_default().push(r);
    }
    let mut shown = Vec::new();
    let mut left_out = Vec::new();
    for (_, mut runs) in by_machine {
        runs.sort_by(|a, b| (&a.started_at, &a.run_id).cmp(&(&b.started_at, &b.run_id)));
        let last = runs.len() - 1;
        for (i, r) in runs.into_iter().enumerate() {
            if all_runs || i == last || keep == Some(r.run_id.as_str()) {
                shown.push(r);
            } else {
                left_out.push(r.key);
            }
        }
    }
    (shown, left_out)
}

/// Labels of the shown runs: the machine, with the run id when a machine has several.
pub fn labels(runs: &[RunDigest]) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *count.entry(r.appliance.as_str()).or_default() += 1;
    }
    runs.iter()
        .map(|r| {
            if count[r.appliance.as_str()] > 1 {
                format!("{} ({})", r.appliance, r.run_id)
            } else {
                r.appliance.clone()
            }
        })
        .collect()
}

/// Which shown run is the baseline: the one whose run id is `name`, else the earliest
/// shown run of the machine `name`, else the run labelled `name`; with no name, the first
/// run by label. The error lists what could have been named.
pub fn baseline_index(runs: &[RunDigest], name: Option<&str>) -> Result<usize, String> {
    let labels = labels(runs);
    if runs.is_empty() {
        return Err("there are no runs to compare".into());
    }
    let Some(name) = name else {
        let first = (0..runs.len())
            .min_by(|&a, &b| labels[a].cmp(&labels[b]))
            .unwrap_or(0);
        return Ok(first);
    };
    if let Some(i) = runs.iter().position(|r| r.run_id == name) {
        return Ok(i);
    }
    if let Some(i) = runs.iter().position(|r| r.appliance == name) {
        return Ok(i);
    }
    if let Some(i) = labels.iter().position(|l| l == name) {
        return Ok(i);
    }
    let machines: BTreeSet<&str> = runs.iter().map(|r| r.appliance.as_str()).collect();
    Err(format!(
        "baseline \"{name}\" is neither a machine nor a run id among the runs compared (machines: {})",
        machines.into_iter().collect::<Vec<_>>().join(", ")
    ))
}
