//! A sysbench-tpcc workload's keys: the thread counts, duration, tables, scale and
//! sysbench's options; its own words for refusing pgbench's `clients` and `transactions`.

use super::{PointOptions, Section, Written};
use crate::plan::validate::{Problems, MAX_CLIENTS};
use crate::plan::{KeyPath, Plan, RandType, Threads, TpccDataset, TrxLevel, Workload};

/// A sysbench-tpcc workload's own options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec {
    /// The thread counts swept (one connection each): a list, or one number.
    pub(crate) threads: Threads,
    /// `--tables`: table sets.
    pub(crate) tables: Option<u32>,
    /// `--scale`: warehouses per table set.
    pub(crate) scale: Option<u32>,
    /// `--rand-type` (default uniform).
    pub(crate) rand_type: Option<RandType>,
    /// `--use_fk` (default false, as scenario B).
    pub(crate) use_fk: Option<bool>,
    /// `--trx_level` (default RC, as scenario B).
    pub(crate) trx_level: Option<TrxLevel>,
    /// `--threads` of `prepare`.
    pub(crate) prepare_threads: Option<u32>,
}

impl Spec {
    pub(crate) fn from_written(w: &Written) -> Spec {
        Spec {
            threads: w.threads.clone(),
            tables: w.tables,
            scale: w.scale,
            rand_type: w.rand_type,
            use_fk: w.use_fk,
            trx_level: w.trx_level,
            prepare_threads: w.prepare_threads,
        }
    }
}

impl Section for Spec {
    fn check(
        &self,
        plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        written: &dyn Fn(&str) -> bool,
        p: &mut Problems,
    ) {
        check_tpcc(self, plan, w, at, written, p);
    }

    /// pgbench's `clients` and `-t` in words that say what sysbench-tpcc takes instead.
    fn refusal(&self, key: &str) -> Option<String> {
        match key {
            "clients" => Some("sysbench-tpcc sweeps threads (one connection each): write threads = [16, 32, …] instead of clients".into()),
            "transactions" => Some("sysbench-tpcc runs for a time: set duration, not transactions".into()),
            _ => None,
        }
    }

    fn write(&self, out: &mut Written) {
        out.threads = self.threads.clone();
        out.tables = self.tables;
        out.scale = self.scale;
        out.rand_type = self.rand_type;
        out.use_fk = self.use_fk;
        out.trx_level = self.trx_level;
        out.prepare_threads = self.prepare_threads;
    }

    /// sysbench-tpcc's `threads` list (one connection each).
    fn connections(&self) -> Vec<u32> {
        match &self.threads {
            Threads::List(l) => l.clone(),
            Threads::Fixed(n) => vec![*n],
            Threads::Auto => Vec::new(),
        }
    }

    fn threads(&self) -> &Threads {
        &self.threads
    }

    fn transactions(&self) -> Option<u64> {
        None
    }

    fn prepare_threads(&self) -> Option<u32> {
        self.prepare_threads
    }

    fn tpcc_dataset(&self) -> Option<TpccDataset> {
        Some(TpccDataset {
            tables: self.tables.unwrap_or(1),
            scale: self.scale.unwrap_or(1),
            use_fk: self.use_fk.unwrap_or(false),
        })
    }

    fn point_options(&self) -> PointOptions {
        PointOptions {
            rand_type: self.rand_type.unwrap_or_default(),
            trx_level: self.trx_level.unwrap_or_default(),
            ..PointOptions::default()
        }
    }
}

/// A sysbench-tpcc workload's own keys in the plan's table.
pub(crate) const KEYS: [&str; 7] = [
    "threads",
    "tables",
    "scale",
    "rand_type",
    "use_fk",
    "trx_level",
    "prepare_threads",
];

/// Most sysbench-tpcc datasets a plan may name (each is a database and a data copy).
const MAX_TPCC_TABLES: u32 = 1000;

/// The checks of a `kind = "sysbench-tpcc"` workload.
fn check_tpcc(
    s: &Spec,
    plan: &Plan,
    w: &Workload,
    at: &KeyPath,
    written: &dyn Fn(&str) -> bool,
    p: &mut Problems,
) {
    if plan.sysbench.is_none() {
        p.push((
            at.key("kind"),
            "a sysbench-tpcc workload needs a [sysbench] section with tpcc_source and tpcc_sha256 (where its Lua scripts come from)".into(),
        ));
    }
    let list = match &s.threads {
        Threads::List(l) => l.clone(),
        Threads::Fixed(n) => vec![*n],
        Threads::Auto => {
            p.push((
                at.key("threads"),
                "sysbench-tpcc needs its thread counts: threads = [16, 32, 64, 128]".into(),
            ));
            Vec::new()
        }
    };
    if matches!(s.threads, Threads::List(_)) && list.is_empty() {
        p.push((at.key("threads"), "threads list is empty".into()));
    }
    for (j, t) in list.iter().enumerate() {
        let key = match s.threads {
            Threads::List(_) => at.key("threads").index(j),
            _ => at.key("threads"),
        };
        if *t == 0 {
            p.push((key, "threads must be at least 1".into()));
        } else if *t > MAX_CLIENTS {
            p.push((
                key,
                format!("{t} threads is more than the {MAX_CLIENTS} connections a PostgreSQL server can take"),
            ));
        } else if j > 0 && *t <= list[j - 1] {
            p.push((
                key,
                format!(
                    "threads must be strictly ascending: {t} follows {}",
                    list[j - 1]
                ),
            ));
        }
    }
    // (A written `transactions` is refused in the words of `refusal`.)
    if !written("transactions") && w.duration.is_none() {
        p.push((
            at.clone(),
            "set duration (sysbench --time) for the workload".into(),
        ));
    }
    match s.tables {
        None => p.push((
            at.clone(),
            "set tables (sysbench-tpcc --tables) for the workload".into(),
        )),
        Some(t) if !(1..=MAX_TPCC_TABLES).contains(&t) => p.push((
            at.key("tables"),
            format!("tables must be from 1 to {MAX_TPCC_TABLES}, found {t}"),
        )),
        _ => {}
    }
    match s.scale {
        None => p.push((
            at.clone(),
            "set scale (warehouses, sysbench-tpcc --scale) for the workload".into(),
        )),
        Some(0) => p.push((
            at.key("scale"),
            "scale (warehouses) must be at least 1".into(),
        )),
        Some(n) if n > 100_000 => p.push((
            at.key("scale"),
            format!("scale must be at most 100000 warehouses, found {n}"),
        )),
        _ => {}
    }
    if let Some(n) = s.prepare_threads {
        if !(1..=1024).contains(&n) {
            p.push((
                at.key("prepare_threads"),
                format!("prepare_threads must be from 1 to 1024, found {n}"),
            ));
        }
    }
}
