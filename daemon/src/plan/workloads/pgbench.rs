//! A pgbench workload's keys: the builtin, clients, threads (a number or `"auto"`), `-t` or
//! `-T`, the protocol and the latency log.

use super::{PointOptions, Section, Written};
use crate::plan::validate::{Problems, MAX_CLIENTS, PGBENCH_INT_MAX};
use crate::plan::{Builtin, KeyPath, LatencyLog, Plan, Protocol, Threads, TpccDataset, Workload};

/// A pgbench workload's own options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec {
    /// `-b`: the builtin script.
    pub(crate) builtin: Builtin,
    /// Client counts, strictly ascending.
    pub(crate) clients: Vec<u32>,
    /// `-j`: a number, or `"auto"` = min(clients, cores).
    pub(crate) threads: Threads,
    /// `-t`: transactions per client (else the workload's duration, `-T`).
    pub(crate) transactions: Option<u64>,
    /// `-M`.
    pub(crate) protocol: Protocol,
    /// `-r`: per-statement latencies.
    pub(crate) statement_latencies: bool,
    /// Per-transaction latency log.
    pub(crate) latency_log: LatencyLog,
    pub(crate) sampling_rate: Option<f64>,
}

impl Spec {
    pub(crate) fn from_written(w: &Written) -> Spec {
        Spec {
            builtin: w.builtin,
            clients: w.clients.clone(),
            threads: w.threads.clone(),
            transactions: w.transactions,
            protocol: w.protocol,
            statement_latencies: w.statement_latencies,
            latency_log: w.latency_log,
            sampling_rate: w.sampling_rate,
        }
    }
}

/// A pgbench workload's own keys in the plan's table.
pub(crate) const KEYS: [&str; 8] = [
    "builtin",
    "clients",
    "threads",
    "transactions",
    "protocol",
    "statement_latencies",
    "latency_log",
    "sampling_rate",
];

impl Section for Spec {
    fn check(
        &self,
        _plan: &Plan,
        w: &Workload,
        at: &KeyPath,
        _written: &dyn Fn(&str) -> bool,
        p: &mut Problems,
    ) {
        check_pgbench(self, w, at, p);
    }

    fn write(&self, out: &mut Written) {
        out.builtin = self.builtin;
        out.clients = self.clients.clone();
        out.threads = self.threads.clone();
        out.transactions = self.transactions;
        out.protocol = self.protocol;
        out.statement_latencies = self.statement_latencies;
        out.latency_log = self.latency_log;
        out.sampling_rate = self.sampling_rate;
    }

    /// pgbench's `clients`.
    fn connections(&self) -> Vec<u32> {
        self.clients.clone()
    }

    fn threads(&self) -> &Threads {
        &self.threads
    }

    fn transactions(&self) -> Option<u64> {
        self.transactions
    }

    fn prepare_threads(&self) -> Option<u32> {
        None
    }

    fn tpcc_dataset(&self) -> Option<TpccDataset> {
        None
    }

    fn point_options(&self) -> PointOptions {
        PointOptions {
            builtin: self.builtin,
            protocol: self.protocol,
            statement_latencies: self.statement_latencies,
            latency_log: self.latency_log,
            sampling_rate: self.sampling_rate,
            ..PointOptions::default()
        }
    }
}

/// The checks only a pgbench workload gets (clients, threads, -t/-T, the latency log).
fn check_pgbench(s: &Spec, w: &Workload, at: &KeyPath, p: &mut Problems) {
    let at = at.clone();
    if let Threads::List(_) = s.threads {
        p.push((
            at.key("threads"),
            "a list of threads is for kind = \"sysbench-tpcc\"; pgbench's threads is one number or \"auto\" (list the client counts in clients)".into(),
        ));
    }
    if s.clients.is_empty() {
        p.push((at.key("clients"), "clients list is empty".into()));
    }
    for (j, c) in s.clients.iter().enumerate() {
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
        } else if j > 0 && *c <= s.clients[j - 1] {
            p.push((
                at.key("clients").index(j),
                format!(
                    "clients must be strictly ascending: {} follows {}",
                    c,
                    s.clients[j - 1]
                ),
            ));
        }
    }
    if let Threads::Fixed(t) = s.threads {
        if t == 0 {
            p.push((at.key("threads"), "threads must be at least 1".into()));
        } else if let Some((j, c)) = s.clients.iter().enumerate().find(|(_, c)| t > **c) {
            p.push((
                at.key("threads"),
                format!(
                    "threads = {t} exceeds clients = {c} (clients[{j}]); pgbench needs threads <= clients: lower threads or use \"auto\""
                ),
            ));
        }
    }
    match (s.latency_log, s.sampling_rate) {
        (LatencyLog::Sampled, None) => p.push((
            at.key("latency_log"),
            "latency_log = \"sampled\" needs sampling_rate".into(),
        )),
        (LatencyLog::Sampled, Some(r)) if !(r > 0.0 && r <= 1.0) => p.push((
            at.key("sampling_rate"),
            format!("sampling_rate must be in (0, 1], found {r}"),
        )),
        (LatencyLog::Full | LatencyLog::Aggregate, Some(_)) => p.push((
            at.key("sampling_rate"),
            "sampling_rate only applies with latency_log = \"sampled\"".into(),
        )),
        _ => {}
    }
    match (&s.transactions, &w.duration) {
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
