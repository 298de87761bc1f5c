//! The sweep: the plan's workloads expanded into an ordered list of [`SweepPoint`]s with
//! stable ids, so a resumed run knows exactly which points it already has.

use serde::{Deserialize, Serialize};

use crate::plan::{
    Builtin, Checksums, LatencyLog, Plan, Protocol, RandType, RestorePolicy, SweepOrder, Threads,
    TpccDataset, TrxLevel, WorkloadKind,
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
    pub(crate) id: String,
    pub(crate) workload: String,
    #[serde(default)]
    pub(crate) kind: WorkloadKind,
    /// sysbench-tpcc's dataset and run options (None for pgbench points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tpcc: Option<TpccRun>,
    pub builtin: Builtin,
    pub clients: u32,
    pub(crate) threads: u32,
    pub limit: Limit,
    pub(crate) protocol: Protocol,
    /// 1-based repeat number (the round, when the sweep runs in rounds).
    pub(crate) repeat: u32,
    /// Adaptive repeats: a round past the plan's `min` runs only while the 95 % interval of
    /// the mean tps of the point's earlier rounds is wider than ±this many percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_ci_wider_than_pct: Option<f64>,
    /// Required data-checksum state, when the workload asks for one.
    pub checksums: Option<Checksums>,
    /// A warm-up run: executed and kept as evidence, not reported as a result.
    pub warmup: bool,
    pub(crate) checkpoint: bool,
    pub(crate) statement_latencies: bool,
    pub(crate) latency_log: LatencyLog,
    pub(crate) sampling_rate: Option<f64>,
    pub(crate) progress_interval_s: u32,
}

impl SweepPoint {
    /// The database the point runs in: its sysbench-tpcc dataset's, else pgbench's.
    pub(crate) fn database(&self, plan: &Plan) -> String {
        match &self.tpcc {
            Some(t) => t.dataset.database(),
            None => plan.dataset.database.clone(),
        }
    }
}

/// What a sysbench-tpcc point runs beyond its thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TpccRun {
    pub(crate) dataset: TpccDataset,
    pub(crate) rand_type: RandType,
    pub(crate) trx_level: TrxLevel,
}

/// Threads for a point: the plan's number, or min(clients, cores) (a sysbench-tpcc point's
/// threads are its connections).
pub(crate) fn threads_for(threads: &Threads, clients: u32, cores: u32) -> u32 {
    match threads {
        Threads::Fixed(t) => (*t).min(clients).max(1),
        Threads::Auto => clients.min(cores.max(1)).max(1),
        Threads::List(_) => clients,
    }
}

/// Expands the plan into the ordered sweep. Points without a checksum requirement come
/// first, then each checksum state in the order the plan first names it. With
/// `[sweep] order = "rounds"` (the default) the repeats run in rounds: round 1 measures every
/// workload's whole client ladder, then round 2, and so on, so a drift over the run falls
/// on every client count alike instead of looking like a difference between them; the
/// checksum states alternate from round to round (off, on | on, off | off, on …), so each
/// state is measured as often early as late and the cluster switches once a round. With
/// `order = "points"` each point's repeats run back to back. A workload with fewer rounds
/// than another simply stops taking part. Adaptive repeats add the rounds past `min` as
/// conditional points ([`SweepPoint::while_ci_wider_than_pct`]).
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
    let mut points = Vec::new();
    let mut ordinal = 0usize;
    match plan.sweep.order {
        SweepOrder::Points => {
            for group in &groups {
                for w in &plan.workloads {
                    expand_workload(
                        plan,
                        w,
                        &groups,
                        *group,
                        None,
                        cores,
                        &mut ordinal,
                        &mut points,
                    );
                }
            }
        }
        SweepOrder::Rounds => {
            let rounds = plan
                .workloads
                .iter()
                .map(|w| w.repeats.max())
                .max()
                .unwrap_or(1);
            for round in 1..=rounds {
                for group in round_order(&groups, round) {
                    for w in plan.workloads.iter().filter(|w| round <= w.repeats.max()) {
                        expand_workload(
                            plan,
                            w,
                            &groups,
                            group,
                            Some(round),
                            cores,
                            &mut ordinal,
                            &mut points,
                        );
                    }
                }
            }
        }
    }
    points
}

/// The checksum groups in the order round `round` runs them: the points without a
/// requirement first, then the states, reversed in every even round.
pub(crate) fn round_order(groups: &[Option<Checksums>], round: u32) -> Vec<Option<Checksums>> {
    let mut out: Vec<Option<Checksums>> = groups.iter().copied().filter(Option::is_none).collect();
    let mut states: Vec<Option<Checksums>> =
        groups.iter().copied().filter(Option::is_some).collect();
    if round % 2 == 0 {
        states.reverse();
    }
    out.extend(states);
    out
}

/// The points of one workload in one checksum group: every repeat (`round` None), or one
/// round's.
#[allow(clippy::too_many_arguments)]
fn expand_workload(
    plan: &Plan,
    w: &crate::plan::Workload,
    groups: &[Option<Checksums>],
    group: Option<Checksums>,
    round: Option<u32>,
    cores: u32,
    ordinal: &mut usize,
    points: &mut Vec<SweepPoint>,
) {
    let in_group = match group {
        None => w.data_checksums.is_empty(),
        Some(c) => w.data_checksums.contains(&c),
    };
    if !in_group {
        return;
    }
    let matrix = groups.iter().any(Option::is_some);
    let section = w.section();
    let options = section.point_options();
    let connections = section.connections();
    let limit = match (section.transactions(), w.duration()) {
        (Some(t), _) => Limit::Transactions(t),
        (None, Some(d)) => Limit::DurationS(d.as_secs().max(1)),
        (None, None) => Limit::Transactions(1),
    };
    let suffix = match (matrix, group) {
        (true, Some(Checksums::On)) => "-cs-on",
        (true, Some(Checksums::Off)) => "-cs-off",
        _ => "",
    };
    let repeats: Vec<u32> = match round {
        Some(r) => vec![r],
        None => (1..=w.repeats.max()).collect(),
    };
    let conditional = |repeat: u32| w.repeats.ci_pct().filter(|_| repeat > w.repeats.min());
    let base = |clients: u32, repeat: u32, warmup: bool, limit: Limit, id: String| SweepPoint {
        id,
        workload: w.name.clone(),
        kind: w.kind(),
        tpcc: section.tpcc_dataset().map(|dataset| TpccRun {
            dataset,
            rand_type: options.rand_type,
            trx_level: options.trx_level,
        }),
        builtin: options.builtin,
        clients,
        threads: threads_for(section.threads(), clients, cores),
        limit,
        protocol: options.protocol,
        repeat,
        while_ci_wider_than_pct: conditional(repeat),
        checksums: group,
        warmup,
        checkpoint: w.checkpoint,
        statement_latencies: options.statement_latencies,
        latency_log: options.latency_log,
        sampling_rate: options.sampling_rate,
        progress_interval_s: w.progress_interval_s,
    };
    // Scenario B's test: (restore,) warm-up with the same arguments, CHECKPOINT, the
    // run; so each measured point has its own warm-up before it: always for
    // sysbench-tpcc, and for pgbench when every point starts from the snapshot.
    if w.is_tpcc() || plan.dataset.restore == RestorePolicy::EachPoint {
        let letter = if w.is_tpcc() { 't' } else { 'c' };
        let mut each = |clients: u32, repeat: u32| {
            if let Some(warm) = w.warmup() {
                *ordinal += 1;
                let id = format!(
                    "w{:03}-{}-{letter}{clients:05}-r{repeat}{suffix}",
                    *ordinal, w.name
                );
                let limit = Limit::DurationS(warm.as_secs().max(1));
                points.push(base(clients, repeat, true, limit, id));
            }
            *ordinal += 1;
            let id = format!(
                "p{:03}-{}-{letter}{clients:05}-r{repeat}{suffix}",
                *ordinal, w.name
            );
            points.push(base(clients, repeat, false, limit, id));
        };
        for &clients in &connections {
            for &repeat in &repeats {
                each(clients, repeat);
            }
        }
        return;
    }
    // One warm-up before the workload's points (in rounds: before each round's), which
    // runs whenever a point of that round does.
    if let Some(warm) = w.warmup() {
        *ordinal += 1;
        let clients = connections.first().copied().unwrap_or(1);
        let repeat = repeats.first().copied().unwrap_or(1);
        let id = if w.repeats.max() > 1 && round.is_some() {
            format!("w{:03}-{}-r{repeat}{suffix}", *ordinal, w.name)
        } else {
            format!("w{:03}-{}{suffix}", *ordinal, w.name)
        };
        points.push(base(
            clients,
            repeat,
            true,
            Limit::DurationS(warm.as_secs().max(1)),
            id,
        ));
    }
    for &clients in &connections {
        for &repeat in &repeats {
            *ordinal += 1;
            let id = format!(
                "p{:03}-{}-c{clients:05}-r{repeat}{suffix}",
                *ordinal, w.name
            );
            points.push(base(clients, repeat, false, limit, id));
        }
    }
}

/// Whether a point's (`workload`, kind, checksums, clients) is the same measurement as
/// another's, in another round.
pub(crate) fn same_series(a: &SweepPoint, b: &SweepPoint) -> bool {
    a.workload == b.workload
        && a.kind == b.kind
        && a.checksums == b.checksums
        && a.clients == b.clients
        && a.warmup == b.warmup
}

/// Whether adaptive repeats want a further round of a point whose earlier rounds gave
/// `tps`: while fewer than two gave a figure, or while the 95 % interval of their mean is
/// wider than ±`ci_pct` % of the mean.
pub fn wants_another_round(ci_pct: f64, tps: &[f64]) -> bool {
    let Some((lo, hi)) = crate::stats::mean_interval(tps) else {
        return true;
    };
    let mean = (lo + hi) / 2.0;
    !(mean > 0.0 && (hi - lo) / 2.0 / mean * 100.0 <= ci_pct)
}

/// The pgbench arguments for a point (connection arguments and database excluded).
pub(crate) fn pgbench_args(point: &SweepPoint, log_prefix: &str) -> Vec<String> {
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

    fn plan_with(workloads: &str, sweep: &str) -> Plan {
        Plan::parse(&format!(
            "[appliance]\nname = \"t\"\nplatform = \"debian12\"\n[postgres]\nversion = 15\n\
             [dataset]\nscale = 1\n{sweep}{workloads}"
        ))
        .expect("plan")
    }

    fn order(p: &Plan) -> Vec<(u32, u32, Option<Checksums>)> {
        expand(p, 2)
            .into_iter()
            .filter(|p| !p.warmup)
            .map(|p| (p.repeat, p.clients, p.checksums))
            .collect()
    }

    #[test]
    fn repeats_run_in_rounds_over_the_whole_ladder_by_default() {
        let w = "[[workloads]]\nname = \"rw\"\nclients = [1, 4]\ntransactions = 10\nrepeats = 3\n";
        let got = order(&plan_with(w, ""));
        assert_eq!(
            got,
            [
                (1, 1, None),
                (1, 4, None),
                (2, 1, None),
                (2, 4, None),
                (3, 1, None),
                (3, 4, None)
            ]
        );
        let back_to_back = order(&plan_with(w, "[sweep]\norder = \"points\"\n"));
        assert_eq!(
            back_to_back,
            [
                (1, 1, None),
                (2, 1, None),
                (3, 1, None),
                (1, 4, None),
                (2, 4, None),
                (3, 4, None)
            ]
        );
        // Ids stay unique and say their round.
        let ids: Vec<String> = expand(&plan_with(w, ""), 2)
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids[2], "p003-rw-c00001-r2");
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn the_rounds_alternate_the_checksum_states() {
        let w = "[[workloads]]\nname = \"rw\"\nclients = [2]\ntransactions = 10\nrepeats = 4\n\
                 data_checksums = [\"off\", \"on\"]\nwarmup = \"1s\"\n";
        let (off, on) = (Some(Checksums::Off), Some(Checksums::On));
        assert_eq!(
            order(&plan_with(w, "")),
            [
                (1, 2, off),
                (1, 2, on),
                (2, 2, on),
                (2, 2, off),
                (3, 2, off),
                (3, 2, on),
                (4, 2, on),
                (4, 2, off)
            ]
        );
        // Each state's round has its own warm-up before it.
        let points = expand(&plan_with(w, ""), 2);
        assert_eq!(points.iter().filter(|p| p.warmup).count(), 8);
        assert!(points[0].warmup && points[0].id == "w001-rw-r1-cs-off");
    }

    #[test]
    fn adaptive_rounds_past_min_are_conditional() {
        let w = "[[workloads]]\nname = \"rw\"\nclients = [1]\ntransactions = 10\n\
                 repeats = { min = 2, max = 4, ci_pct = 2.5 }\n";
        let points = expand(&plan_with(w, ""), 2);
        let got: Vec<(u32, Option<f64>)> = points
            .iter()
            .map(|p| (p.repeat, p.while_ci_wider_than_pct))
            .collect();
        assert_eq!(got, [(1, None), (2, None), (3, Some(2.5)), (4, Some(2.5))]);
    }

    #[test]
    fn another_round_is_wanted_while_the_interval_is_wider_than_the_bound() {
        // One figure: no interval yet.
        assert!(wants_another_round(2.0, &[1000.0]));
        assert!(wants_another_round(2.0, &[]));
        // 1000 ± 1: t(0.975, 2) × 1/√3 ≈ 2.5 tps, 0.25 % of the mean.
        assert!(!wants_another_round(2.0, &[999.0, 1000.0, 1001.0]));
        // Two repeats 5 % apart: t(0.975, 1) = 12.7 makes the interval ±32 %.
        assert!(wants_another_round(2.0, &[975.0, 1025.0]));
        // Five repeats at CV 2.1 %: the interval is about ±2.6 %, wider than ±2 %, inside ±5 %.
        let five = [970.0, 1000.0, 1030.0, 1000.0, 1000.0];
        assert!(wants_another_round(2.0, &five));
        assert!(!wants_another_round(5.0, &five));
    }
}
