//! Each workload kind's part of `[[workloads]]`: the checks of its keys and of the other
//! kinds' keys it refuses (each problem names its key path, so `check` prints its
//! FILE:LINE:COL), the connection counts it sweeps and the sysbench-tpcc dataset it runs
//! on. [`of`] registers them: the plan's one match on the kind besides its name.

pub(crate) mod pgbench;
pub(crate) mod sysbench_tpcc;

use super::validate::Problems;
use super::{KeyPath, Plan, TpccDataset, Workload, WorkloadKind};

/// One kind's part of a workload.
pub(crate) trait Section: Sync {
    /// The kind's checks of workload `w` at `at`: its own keys, and the other kinds' it
    /// refuses. `doc` (the plan's text) tells the keys the plan wrote from the defaults.
    fn check(
        &self,
        plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        doc: Option<&toml_edit::DocumentMut>,
        p: &mut Problems,
    );
    /// The connection counts the workload sweeps.
    fn connections(&self, w: &Workload) -> Vec<u32>;
    /// The sysbench-tpcc dataset it runs on (None: pgbench's tables of `[dataset]`).
    fn tpcc_dataset(&self, w: &Workload) -> Option<TpccDataset>;
}

/// The section of a plan's `kind`.
pub(crate) fn of(kind: WorkloadKind) -> &'static dyn Section {
    match kind {
        WorkloadKind::Pgbench => &pgbench::Pgbench,
        WorkloadKind::SysbenchTpcc => &sysbench_tpcc::SysbenchTpcc,
    }
}
