//! The sweep: the plan's workloads expanded into an ordered list of [`SweepPoint`]s with
//! stable ids, so a resumed run knows exactly which points it already has.

use serde::{Deserialize, Serialize};

use crate::plan::{
    Builtin, Checksums, LatencyLog, Plan, Protocol, RandType, RestorePolicy, Threads, TpccDataset,
    TrxLevel, WorkloadKind,
};

/// How long a point runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `-t`: transactions per client.
    Transactions(u64),
    /// `-T`: seconds.
    DurationS(u64),
}

/// One pgbench invocation of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Stable id, e.g. `p003-tpcb-c00050-r1` (`-cs-on` appended inside a checksum matrix,
    /// `warmup` runs are `w…`).
    pub id: String,
    pub workload: String,
    #[serde(default)]
    pub kind: WorkloadKind,
    /// sysbench-tpcc's dataset and run options (None for pgbench points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<TpccRun>,
    pub builtin: Builtin,
    pub clients: u32,
    pub threads: u32,
    pub limit: Limit,
    pub protocol: Protocol,
    /// 1-based repeat number.
    pub repeat: u32,
    /// Required data-checksum state, when the workload asks for one.
    pub checksums: Option<Checksums>,
    /// A warm-up run: executed and kept as evidence, not reported as a result.
    pub warmup: bool,
    pub checkpoint: bool,
    pub statement_latencies: bool,
    pub latency_log: LatencyLog,
    pub sampling_rate: Option<f64>,
    pub progress_interval_s: u32,
}

impl SweepPoint {
    /// The database the point runs in: its sysbench-tpcc dataset's, else pgbench's.
    pub fn database(&self, plan: &Plan) -> String {
        match &self.tpcc {
            Some(t) => t.dataset.database(),
            None => plan.dataset.database.clone(),
        }
    }
}

/// What a sysbench-tpcc point runs beyond its thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpccRun {
    pub dataset: TpccDataset,
    pub rand_type: RandType,
    pub trx_level: TrxLevel,
}

/// Threads for a point: the plan's number, or min(clients, cores) (a sysbench-tpcc point's
/// threads are its connections).
pub fn threads_for(threads: &Threads, clients: u32, cores: u32) -> u32 {
    match threads {
        Threads::Fixed(t) => (*t).min(clients).max(1),
        Threads::Auto => clients.min(cores.max(1)).max(1),
        Threads::List(_) => clients,
    }
}

/// Expands the plan into the ordered sweep. Points without a checksum requirement run
/// first, then each checksum state in the order the plan first names it, so the cluster
/// changes state as few times as possible.
pub fn expand(plan: &Plan, cores: u32) -> Vec<SweepPoint> {
    let mut groups: Vec<Option<Checksums>> = Vec::new();
    if plan.workloads.iter().any(|w| w.data_checksums.is_empty()) {
        groups.push(None);
    }
    for w in &plan.workloads {
        for c in &w.data_checksums {
            if !groups.contains(&Some(*c)) {
                groups.push(Some(*c));
            }
        }
    }
    let matrix = groups.iter().any(Option::is_some);
    let mut points = Vec::new();
    let mut ordinal = 0usize;
    for group in &groups {
        for w in &plan.workloads {
            let in_group = match group {
                None => w.data_checksums.is_empty(),
                Some(c) => w.data_checksums.contains(c),
            };
            if !in_group {
                continue;
            }
            let limit = match (w.transactions, w.duration()) {
                (Some(t), _) => Limit::Transactions(t),
                (None, Some(d)) => Limit::DurationS(d.as_secs().max(1)),
                (None, None) => Limit::Transactions(1),
            };
            let suffix = match (matrix, group) {
                (true, Some(Checksums::On)) => "-cs-on",
                (true, Some(Checksums::Off)) => "-cs-off",
                _ => "",
            };
            let base =
                |clients: u32, repeat: u32, warmup: bool, limit: Limit, id: String| SweepPoint {
                    id,
                    workload: w.name.clone(),
                    kind: w.kind,
                    tpcc: w.tpcc_dataset().map(|dataset| TpccRun {
                        dataset,
                        rand_type: w.rand_type.unwrap_or_default(),
                        trx_level: w.trx_level.unwrap_or_default(),
                    }),
                    builtin: w.builtin,
                    clients,
                    threads: threads_for(&w.threads, clients, cores),
                    limit,
                    protocol: w.protocol,
                    repeat,
                    checksums: *group,
                    warmup,
                    checkpoint: w.checkpoint,
                    statement_latencies: w.statement_latencies,
                    latency_log: w.latency_log,
                    sampling_rate: w.sampling_rate,
                    progress_interval_s: w.progress_interval_s,
                };
            // Scenario B's test: (restore,) warm-up with the same arguments, CHECKPOINT, the
            // run; so each measured point has its own warm-up before it: always for
            // sysbench-tpcc, and for pgbench when every point starts from the snapshot.
            if w.is_tpcc() || plan.dataset.restore == RestorePolicy::EachPoint {
                let letter = if w.is_tpcc() { 't' } else { 'c' };
                for clients in w.connections() {
                    for repeat in 1..=w.repeats {
                        if let Some(warm) = w.warmup() {
                            ordinal += 1;
                            let id = format!(
                                "w{ordinal:03}-{}-{letter}{clients:05}-r{repeat}{suffix}",
                                w.name
                            );
                            let limit = Limit::DurationS(warm.as_secs().max(1));
                            points.push(base(clients, repeat, true, limit, id));
                        }
                        ordinal += 1;
                        let id = format!(
                            "p{ordinal:03}-{}-{letter}{clients:05}-r{repeat}{suffix}",
                            w.name
                        );
                        points.push(base(clients, repeat, false, limit, id));
                    }
                }
                continue;
            }
            if let Some(warm) = w.warmup() {
                ordinal += 1;
                let clients = w.clients.first().copied().unwrap_or(1);
                let id = format!("w{ordinal:03}-{}{suffix}", w.name);
                points.push(base(
                    clients,
                    1,
                    true,
                    Limit::DurationS(warm.as_secs().max(1)),
                    id,
                ));
            }
            for &clients in &w.clients {
                for repeat in 1..=w.repeats {
                    ordinal += 1;
                    let id = format!("p{ordinal:03}-{}-c{clients:05}-r{repeat}{suffix}", w.name);
                    points.push(base(clients, repeat, false, limit, id));
                }
            }
        }
    }
    points
}

/// The pgbench arguments for a point (connection arguments and database excluded).
pub fn pgbench_args(point: &SweepPoint, log_prefix: &str) -> Vec<String> {
    let mut a = vec![
        format!("--client={}", point.clients),
        format!("--jobs={}", point.threads),
    ];
    match point.limit {
        Limit::Transactions(t) => a.push(format!("--transactions={t}")),
        Limit::DurationS(s) => a.push(format!("--time={s}")),
    }
    a.push(format!("--builtin={}", point.builtin.pgbench_name()));
    a.push(format!("--protocol={}", point.protocol.as_str()));
    a.push(format!("--progress={}", point.progress_interval_s));
    if point.statement_latencies {
        a.push("--report-per-command".into());
    }
    if !point.warmup {
        a.push("--log".into());
        a.push(format!("--log-prefix={log_prefix}"));
        match point.latency_log {
            LatencyLog::Full => {}
            LatencyLog::Sampled => {
                if let Some(r) = point.sampling_rate {
                    a.push(format!("--sampling-rate={r}"));
                }
            }
            LatencyLog::Aggregate => a.push(format!(
                "--aggregate-interval={}",
                point.progress_interval_s
            )),
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(restore: &str) -> Plan {
        Plan::parse(&format!(
            "[appliance]\nname = \"t\"\nplatform = \"debian12\"\n[postgres]\nversion = 15\n\
             [dataset]\nscale = 1\nrestore = \"{restore}\"\n\
             [[workloads]]\nname = \"rw\"\nclients = [1, 4]\nduration = \"5s\"\nwarmup = \"2s\"\n"
        ))
        .expect("plan")
    }

    #[test]
    fn pgbench_warms_up_before_every_point_only_when_every_point_is_restored() {
        let ids = |p: &Plan| -> Vec<String> { expand(p, 2).into_iter().map(|p| p.id).collect() };
        assert_eq!(
            ids(&plan("never")),
            ["w001-rw", "p002-rw-c00001-r1", "p003-rw-c00004-r1"]
        );
        assert_eq!(
            ids(&plan("each-workload")),
            ["w001-rw", "p002-rw-c00001-r1", "p003-rw-c00004-r1"]
        );
        let each = expand(&plan("each-point"), 2);
        let got: Vec<(&str, u32, bool)> = each
            .iter()
            .map(|p| (p.id.as_str(), p.clients, p.warmup))
            .collect();
        assert_eq!(
            got,
            [
                ("w001-rw-c00001-r1", 1, true),
                ("p002-rw-c00001-r1", 1, false),
                ("w003-rw-c00004-r1", 4, true),
                ("p004-rw-c00004-r1", 4, false)
            ]
        );
    }
}
