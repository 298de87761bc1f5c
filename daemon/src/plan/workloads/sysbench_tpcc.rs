//! A sysbench-tpcc workload's keys: the thread counts, duration, tables, scale and
//! sysbench's options; the pgbench keys it refuses, even written with pgbench's default.

use super::Section;
use crate::plan::validate::{Problems, MAX_CLIENTS};
use crate::plan::{Builtin, KeyPath, LatencyLog, Plan, Protocol, Threads, TpccDataset, Workload};

pub(crate) struct SysbenchTpcc;

impl Section for SysbenchTpcc {
    fn check(
        &self,
        plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        doc: Option<&toml_edit::DocumentMut>,
        p: &mut Problems,
    ) {
        check_tpcc(plan, w, at, doc, p);
    }

    /// sysbench-tpcc's `threads` list (one connection each).
    fn connections(&self, w: &Workload) -> Vec<u32> {
        match &w.threads {
            Threads::List(l) => l.clone(),
            Threads::Fixed(n) => vec![*n],
            Threads::Auto => w.clients.clone(),
        }
    }

    fn tpcc_dataset(&self, w: &Workload) -> Option<TpccDataset> {
        Some(TpccDataset {
            tables: w.tables.unwrap_or(1),
            scale: w.scale.unwrap_or(1),
            use_fk: w.use_fk.unwrap_or(false),
        })
    }
}

/// Most sysbench-tpcc datasets a plan may name (each is a database and a data copy).
const MAX_TPCC_TABLES: u32 = 1000;

/// The checks of a `kind = "sysbench-tpcc"` workload.
fn check_tpcc(
    plan: &Plan,
    w: &Workload,
    at: &KeyPath,
    doc: Option<&toml_edit::DocumentMut>,
    p: &mut Problems,
) {
    if plan.sysbench.is_none() {
        p.push((
            at.key("kind"),
            "a sysbench-tpcc workload needs a [sysbench] section with tpcc_source and tpcc_sha256 (where its Lua scripts come from)".into(),
        ));
    }
    // A key the plan wrote is refused even when it holds pgbench's default
    // (`builtin = "tpcb-like"`): it says the author expects pgbench's behaviour.
    let written = |key: &str| doc.is_some_and(|d| at.key(key).item(d).is_some());
    if !w.clients.is_empty() || written("clients") {
        p.push((
            at.key("clients"),
            "sysbench-tpcc sweeps threads (one connection each): write threads = [16, 32, …] instead of clients".into(),
        ));
    }
    let list = match &w.threads {
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
    if matches!(w.threads, Threads::List(_)) && list.is_empty() {
        p.push((at.key("threads"), "threads list is empty".into()));
    }
    for (j, t) in list.iter().enumerate() {
        let key = match w.threads {
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
    if w.transactions.is_some() {
        p.push((
            at.key("transactions"),
            "sysbench-tpcc runs for a time: set duration, not transactions".into(),
        ));
    } else if w.duration.is_none() {
        p.push((
            at.clone(),
            "set duration (sysbench --time) for the workload".into(),
        ));
    }
    match w.tables {
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
    match w.scale {
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
    if let Some(n) = w.prepare_threads {
        if !(1..=1024).contains(&n) {
            p.push((
                at.key("prepare_threads"),
                format!("prepare_threads must be from 1 to 1024, found {n}"),
            ));
        }
    }
    for (key, set) in [
        ("builtin", w.builtin != Builtin::default()),
        ("protocol", w.protocol != Protocol::default()),
        ("statement_latencies", w.statement_latencies),
        ("latency_log", w.latency_log != LatencyLog::default()),
        ("sampling_rate", w.sampling_rate.is_some()),
    ] {
        if set || written(key) {
            p.push((
                at.key(key),
                format!("{key} is a pgbench option; a sysbench-tpcc workload does not take it"),
            ));
        }
    }
}
