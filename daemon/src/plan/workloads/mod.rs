//! Each workload kind's part of `[[workloads]]`. The plan writes a workload as one flat
//! table ([`Written`]); its `kind` picks the [`WorkloadSpec`] variant, whose type lives in
//! the kind's module with its keys (`KEYS`), its checks (each problem names its key path,
//! so `check` prints its FILE:LINE:COL), the connection counts it sweeps, the sysbench-tpcc
//! dataset it runs on and the options its points carry. This module is where a kind is
//! registered (the table's keys, the variant, the matches that turn a variant into its
//! [`Section`], the [`KEYS`] rows) and where every kind refuses the keys of the others
//! ([`refuse_other_kinds_keys`]).

pub(crate) mod pgbench;
pub(crate) mod sysbench_tpcc;

use serde::{Deserialize, Serialize};

use super::validate::Problems;
use super::{
    yes, Builtin, Checksums, KeyPath, LatencyLog, Plan, Protocol, RandType, Repeats, Threads,
    TpccDataset, TrxLevel, Workload,
};

/// The benchmark program a workload runs: the tag of `kind = "…"`, which results, points
/// and the comparison record.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    #[default]
    Pgbench,
    /// Percona-Lab's sysbench-tpcc Lua scripts run by sysbench's PostgreSQL driver.
    SysbenchTpcc,
}

impl WorkloadKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Pgbench => "pgbench",
            WorkloadKind::SysbenchTpcc => "sysbench-tpcc",
        }
    }
}

/// A workload's kind with its own options: each variant's type lives in its kind's
/// submodule here, which also checks it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WorkloadSpec {
    Pgbench(pgbench::Spec),
    SysbenchTpcc(sysbench_tpcc::Spec),
}

/// A `[[workloads]]` table as the plan writes it: the common keys and every kind's own,
/// side by side (unknown keys are errors, each with its place in the file). Read into a
/// [`Workload`], whose variant keeps only its kind's keys; a key of another kind that the
/// plan wrote is refused by [`refuse_other_kinds_keys`], which reads the text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Written {
    /// Name used in point ids and reports (`[a-z0-9_-]`).
    pub(crate) name: String,
    /// What drives the load: pgbench (default) or sysbench-tpcc.
    #[serde(default)]
    pub(crate) kind: WorkloadKind,
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) builtin: Builtin,
    /// Client counts, strictly ascending (pgbench; sysbench-tpcc lists `threads`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) clients: Vec<u32>,
    /// Threads per point: a number, or `"auto"` = min(clients, cores); sysbench-tpcc's
    /// list of thread counts.
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) threads: Threads,
    /// `-t`: transactions per client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) transactions: Option<u64>,
    /// `-T`: duration, e.g. `"600s"` or `"10min"`.
    #[serde(default)]
    pub(crate) duration: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) protocol: Protocol,
    /// Times each point is measured: a number, or adaptive rounds
    /// (`{ min = 3, max = 10, ci_pct = 2.0 }`).
    #[serde(default = "default_repeats")]
    pub(crate) repeats: Repeats,
    /// Unrecorded run before the first point of the workload (same parameters, `-T`).
    #[serde(default)]
    pub(crate) warmup: Option<String>,
    /// `CHECKPOINT` and wait before every point.
    #[serde(default = "yes")]
    pub(crate) checkpoint: bool,
    /// `-r`: per-statement latencies.
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) statement_latencies: bool,
    /// Data checksums for this workload's points; `["off", "on"]` makes a matrix.
    #[serde(default)]
    pub(crate) data_checksums: Vec<Checksums>,
    /// Per-transaction latency log: `"full"`, `"sampled"` (with `sampling_rate`), `"aggregate"`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub(crate) latency_log: LatencyLog,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sampling_rate: Option<f64>,
    /// `--progress` interval in seconds (per-second tps series); sysbench's
    /// `--report-interval` for sysbench-tpcc (also read as `report_interval_s`).
    #[serde(default = "default_progress", alias = "report_interval_s")]
    pub(crate) progress_interval_s: u32,
    /// sysbench-tpcc: tables sets (`--tables`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tables: Option<u32>,
    /// sysbench-tpcc: warehouses per table set (`--scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) scale: Option<u32>,
    /// sysbench-tpcc: `--rand-type` (default uniform).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rand_type: Option<RandType>,
    /// sysbench-tpcc: `--use_fk` (default false, as scenario B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) use_fk: Option<bool>,
    /// sysbench-tpcc: `--trx_level` (default RC, as scenario B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) trx_level: Option<TrxLevel>,
    /// sysbench-tpcc: `--threads` of `prepare` (default: the CPUs, at most max(`tables`,
    /// `scale`), and never more than the connections the sweep needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) prepare_threads: Option<u32>,
}

/// The keys every kind has (`report_interval_s` is another name of `progress_interval_s`).
const COMMON_KEYS: [&str; 9] = [
    "name",
    "kind",
    "duration",
    "repeats",
    "warmup",
    "checkpoint",
    "data_checksums",
    "progress_interval_s",
    "report_interval_s",
];

/// The keys each kind takes in [`Written`] besides [`COMMON_KEYS`], all of them: a key two
/// kinds take is in both rows (a unit test holds every key of the table to these rows and
/// [`COMMON_KEYS`]).
const KEYS: [(WorkloadKind, &[&str]); 2] = [
    (WorkloadKind::Pgbench, &pgbench::KEYS),
    (WorkloadKind::SysbenchTpcc, &sysbench_tpcc::KEYS),
];

/// The keys of other kinds that workload `w` at `at` wrote, each refused once: in the
/// kind's own words where it has some ([`Section::refusal`]), else naming the kinds the key
/// belongs to. A key of another kind is refused even when it holds that kind's default
/// (`builtin = "tpcb-like"` on a sysbench-tpcc workload): it says the author expects that
/// kind's behaviour.
pub(crate) fn refuse_other_kinds_keys(
    w: &Workload,
    at: &KeyPath,
    written: &dyn Fn(&str) -> bool,
    p: &mut Problems,
) {
    let kind = w.kind();
    let own = |key: &str| {
        COMMON_KEYS.contains(&key)
            || KEYS
                .iter()
                .any(|(k, keys)| *k == kind && keys.contains(&key))
    };
    let mut refused: Vec<&str> = Vec::new();
    for (_, keys) in KEYS {
        for &key in keys {
            if own(key) || refused.contains(&key) || !written(key) {
                continue;
            }
            refused.push(key);
            let owners: Vec<&str> = KEYS
                .iter()
                .filter(|(_, keys)| keys.contains(&key))
                .map(|(k, _)| k.as_str())
                .collect();
            let words = w.section().refusal(key).unwrap_or_else(|| {
                format!(
                    "{key} only applies to {} workloads: a {} option, which a kind = \"{}\" workload does not take",
                    owners
                        .iter()
                        .map(|k| format!("kind = \"{k}\""))
                        .collect::<Vec<_>>()
                        .join(" or "),
                    owners.join(" or "),
                    kind.as_str()
                )
            });
            p.push((at.key(key), words));
        }
    }
}

/// Written out, a kind's key at its default is left out: another kind refuses a key the
/// table carries, whatever its value, so the plan a run keeps must read back.
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_repeats() -> Repeats {
    Repeats::Fixed(1)
}

fn default_progress() -> u32 {
    1
}

impl From<Written> for Workload {
    fn from(w: Written) -> Workload {
        let spec = match w.kind {
            WorkloadKind::Pgbench => WorkloadSpec::Pgbench(pgbench::Spec::from_written(&w)),
            WorkloadKind::SysbenchTpcc => {
                WorkloadSpec::SysbenchTpcc(sysbench_tpcc::Spec::from_written(&w))
            }
        };
        Workload {
            name: w.name,
            duration: w.duration,
            repeats: w.repeats,
            warmup: w.warmup,
            checkpoint: w.checkpoint,
            data_checksums: w.data_checksums,
            progress_interval_s: w.progress_interval_s,
            spec,
        }
    }
}

impl From<Workload> for Written {
    fn from(w: Workload) -> Written {
        let mut out = Written {
            name: w.name,
            kind: w.spec.kind(),
            builtin: Builtin::default(),
            clients: Vec::new(),
            threads: Threads::default(),
            transactions: None,
            duration: w.duration,
            protocol: Protocol::default(),
            repeats: w.repeats,
            warmup: w.warmup,
            checkpoint: w.checkpoint,
            statement_latencies: false,
            data_checksums: w.data_checksums,
            latency_log: LatencyLog::default(),
            sampling_rate: None,
            progress_interval_s: w.progress_interval_s,
            tables: None,
            scale: None,
            rand_type: None,
            use_fk: None,
            trx_level: None,
            prepare_threads: None,
        };
        w.spec.section().write(&mut out);
        out
    }
}

impl WorkloadSpec {
    /// The variant's kind.
    pub(crate) fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadSpec::Pgbench(_) => WorkloadKind::Pgbench,
            WorkloadSpec::SysbenchTpcc(_) => WorkloadKind::SysbenchTpcc,
        }
    }

    /// The variant's own part.
    pub(crate) fn section(&self) -> &dyn Section {
        match self {
            WorkloadSpec::Pgbench(s) => s,
            WorkloadSpec::SysbenchTpcc(s) => s,
        }
    }
}

/// The options a workload's points carry besides their load count and length (a sweep
/// point's record keeps them flat: a kind without such an option gives its default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct PointOptions {
    pub(crate) builtin: Builtin,
    pub(crate) protocol: Protocol,
    pub(crate) statement_latencies: bool,
    pub(crate) latency_log: LatencyLog,
    pub(crate) sampling_rate: Option<f64>,
    pub(crate) rand_type: RandType,
    pub(crate) trx_level: TrxLevel,
}

/// One kind's part of a workload: the variant's own type implements it.
pub(crate) trait Section: Sync {
    /// The kind's checks of workload `w` at `at`, of its own keys (`written` tells whether
    /// the plan's text wrote a key of the workload's table). Other kinds' keys are refused
    /// for every kind alike ([`refuse_other_kinds_keys`]).
    fn check(
        &self,
        plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        written: &dyn Fn(&str) -> bool,
        p: &mut Problems,
    );
    /// Its own words for refusing another kind's `key` the plan wrote (None: the words
    /// every kind uses, naming the kinds the key belongs to).
    fn refusal(&self, _key: &str) -> Option<String> {
        None
    }
    /// Its keys back into the plan's table (serialising a plan).
    fn write(&self, out: &mut Written);
    /// The connection counts the workload sweeps.
    fn connections(&self) -> Vec<u32>;
    /// The threads each point's program runs (pgbench's `-j`; sysbench's are its
    /// connections).
    fn threads(&self) -> &Threads;
    /// `-t`: transactions per client, for a kind that can run to a count.
    fn transactions(&self) -> Option<u64>;
    /// The connections of the dataset's preparation, when the plan sets them.
    fn prepare_threads(&self) -> Option<u32>;
    /// The sysbench-tpcc dataset it runs on (None: pgbench's tables of `[dataset]`).
    fn tpcc_dataset(&self) -> Option<TpccDataset>;
    /// The options its points carry.
    fn point_options(&self) -> PointOptions;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn each_kind_reads_into_its_own_variant_and_writes_back_the_same_table() {
        let plan = Plan::parse(&example("m5d-8xlarge.toml")).expect("the example checks");
        let kinds: Vec<WorkloadKind> = plan.workloads.iter().map(Workload::kind).collect();
        assert!(kinds.contains(&WorkloadKind::Pgbench), "{kinds:?}");
        assert!(kinds.contains(&WorkloadKind::SysbenchTpcc), "{kinds:?}");
        for w in &plan.workloads {
            match &w.spec {
                WorkloadSpec::Pgbench(s) => {
                    assert!(!s.clients.is_empty(), "{}: clients", w.name);
                    assert_eq!(w.tpcc_dataset(), None);
                    assert_eq!(w.connections(), s.clients);
                }
                WorkloadSpec::SysbenchTpcc(s) => {
                    assert!(s.tables.is_some() && s.scale.is_some(), "{}", w.name);
                    assert!(w.is_tpcc());
                    assert_eq!(w.section().transactions(), None);
                    assert_eq!(w.section().point_options().builtin, Builtin::default());
                }
            }
        }
        // Written out (as a run's bundle keeps its plan) and read again: the same plan.
        let text = toml::to_string(&plan).expect("serialises");
        assert_eq!(Plan::parse(&text).expect("reads back"), plan);
        // The table written for a sysbench-tpcc workload carries none of pgbench's list.
        let table: toml::Table = toml::from_str(&text).expect("toml");
        let tpcc = table["workloads"]
            .as_array()
            .expect("workloads")
            .iter()
            .find(|w| w["kind"].as_str() == Some("sysbench-tpcc"))
            .expect("a sysbench-tpcc workload");
        for key in [
            "builtin",
            "clients",
            "transactions",
            "protocol",
            "latency_log",
        ] {
            assert!(tpcc.get(key).is_none(), "{key} in {tpcc:?}");
        }
    }

    #[test]
    fn a_key_of_another_kind_is_refused_where_the_plan_wrote_it_even_at_its_default() {
        let text = example("m5d-8xlarge.toml").replacen(
            "kind = \"sysbench-tpcc\"\n",
            "kind = \"sysbench-tpcc\"\nbuiltin = \"tpcb-like\"\nclients = [1]\n",
            1,
        );
        let errors = Plan::examine(&text).errors;
        let about = |key: &str| errors.iter().find(|e| e.key.ends_with(key));
        let builtin = about(".builtin").unwrap_or_else(|| panic!("{errors:?}"));
        assert_eq!(
            builtin.message,
            "builtin only applies to kind = \"pgbench\" workloads: a pgbench option, which a kind = \"sysbench-tpcc\" workload does not take"
        );
        let clients = about(".clients").unwrap_or_else(|| panic!("{errors:?}"));
        assert!(clients.message.contains("sweeps threads"), "{clients:?}");
        let text = example("m5d-8xlarge.toml").replacen(
            "kind = \"sysbench-tpcc\"\n",
            "kind = \"pgbench\"\nclients = [1]\n",
            1,
        );
        let errors = Plan::examine(&text).errors;
        for key in ["tables", "scale"] {
            let e = errors
                .iter()
                .find(|e| e.key.ends_with(&format!(".{key}")))
                .unwrap_or_else(|| panic!("{key}: {errors:?}"));
            assert_eq!(
                e.message,
                format!("{key} only applies to kind = \"sysbench-tpcc\" workloads: a sysbench-tpcc option, which a kind = \"pgbench\" workload does not take")
            );
        }
    }

    #[test]
    fn every_key_of_the_table_is_common_or_some_kinds_own() {
        // Every field of the table set away from its default, so that none is left out.
        let written = Written {
            name: "w".into(),
            kind: WorkloadKind::SysbenchTpcc,
            builtin: Builtin::SelectOnly,
            clients: vec![1],
            threads: Threads::Fixed(1),
            transactions: Some(1),
            duration: Some("1s".into()),
            protocol: Protocol::Prepared,
            repeats: Repeats::Fixed(2),
            warmup: Some("1s".into()),
            checkpoint: false,
            statement_latencies: true,
            data_checksums: vec![Checksums::On],
            latency_log: LatencyLog::Sampled,
            sampling_rate: Some(0.5),
            progress_interval_s: 2,
            tables: Some(1),
            scale: Some(1),
            rand_type: Some(RandType::Pareto),
            use_fk: Some(true),
            trx_level: Some(TrxLevel::RR),
            prepare_threads: Some(1),
        };
        let table = toml::Table::try_from(&written).expect("a table");
        for key in table.keys() {
            let owners = KEYS.iter().filter(|(_, keys)| keys.contains(&key.as_str()));
            assert!(
                COMMON_KEYS.contains(&key.as_str()) || owners.count() > 0,
                "{key} is neither common nor any kind's"
            );
        }
        assert_eq!(table.len(), 22, "every field was written: {table:?}");
    }
}
