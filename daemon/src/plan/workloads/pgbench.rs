//! A pgbench workload's keys: clients, threads (a number or `"auto"`), `-t` or `-T`; the
//! sysbench-tpcc keys it refuses.

use super::Section;
use crate::plan::validate::{Problems, MAX_CLIENTS, PGBENCH_INT_MAX};
use crate::plan::{KeyPath, Plan, Threads, TpccDataset, Workload};

pub(crate) struct Pgbench;

impl Section for Pgbench {
    fn check(
        &self,
        _plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        _doc: Option<&toml_edit::DocumentMut>,
        p: &mut Problems,
    ) {
        check_pgbench(w, at, p);
    }

    /// pgbench's `clients`.
    fn connections(&self, w: &Workload) -> Vec<u32> {
        w.clients.clone()
    }

    fn tpcc_dataset(&self, _w: &Workload) -> Option<TpccDataset> {
        None
    }
}

/// The checks only a pgbench workload gets (clients, threads, -t/-T), and the
/// sysbench-tpcc keys it must not carry.
fn check_pgbench(w: &Workload, at: &KeyPath, p: &mut Problems) {
    let at = at.clone();
    for (key, set) in [
        ("tables", w.tables.is_some()),
        ("scale", w.scale.is_some()),
        ("rand_type", w.rand_type.is_some()),
        ("use_fk", w.use_fk.is_some()),
        ("trx_level", w.trx_level.is_some()),
        ("prepare_threads", w.prepare_threads.is_some()),
    ] {
        if set {
            p.push((
                at.key(key),
                format!("{key} only applies to kind = \"sysbench-tpcc\" workloads"),
            ));
        }
    }
    if let Threads::List(_) = w.threads {
        p.push((
            at.key("threads"),
            "a list of threads is for kind = \"sysbench-tpcc\"; pgbench's threads is one number or \"auto\" (list the client counts in clients)".into(),
        ));
    }
    if w.clients.is_empty() {
        p.push((at.key("clients"), "clients list is empty".into()));
    }
    for (j, c) in w.clients.iter().enumerate() {
        if *c == 0 {
            p.push((
                at.key("clients").index(j),
                "client count must be at least 1".into(),
            ));
        } else if *c > MAX_CLIENTS {
            p.push((
                at.key("clients").index(j),
                format!("{c} clients is more than the {MAX_CLIENTS} a PostgreSQL server can take"),
            ));
        } else if j > 0 && *c <= w.clients[j - 1] {
            p.push((
                at.key("clients").index(j),
                format!(
                    "clients must be strictly ascending: {} follows {}",
                    c,
                    w.clients[j - 1]
                ),
            ));
        }
    }
    if let Threads::Fixed(t) = w.threads {
        if t == 0 {
            p.push((at.key("threads"), "threads must be at least 1".into()));
        } else if let Some((j, c)) = w.clients.iter().enumerate().find(|(_, c)| t > **c) {
            p.push((
                at.key("threads"),
                format!(
                    "threads = {t} exceeds clients = {c} (clients[{j}]); pgbench needs threads <= clients: lower threads or use \"auto\""
                ),
            ));
        }
    }
    match (&w.transactions, &w.duration) {
        (Some(_), Some(_)) => p.push((
            at.key("duration"),
            "set either transactions (-t) or duration (-T), not both".into(),
        )),
        (None, None) => p.push((
            at.clone(),
            "set transactions (-t) or duration (-T) for the workload".into(),
        )),
        (Some(0), None) => p.push((
            at.key("transactions"),
            "transactions must be at least 1".into(),
        )),
        (Some(t), None) if *t > PGBENCH_INT_MAX => p.push((
            at.key("transactions"),
            format!(
                "transactions must be at most {PGBENCH_INT_MAX} (pgbench's -t limit), found {t}"
            ),
        )),
        _ => {}
    }
}
