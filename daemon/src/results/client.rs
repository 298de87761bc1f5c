//! The benchmark client's own CPU over a point, against what its threads could use: a
//! point whose client was busy (or ready to run, waiting for a CPU) nearly all the time is
//! `client-bound`: the client, not the server, set its throughput. Pure: figures in, figures
//! out. docs/results.md states the rule and its limits.

use serde::{Deserialize, Serialize};

use crate::runner::CpuUse;

/// `client-bound`: the client's demand is at least this share of its threads' capacity.
pub(crate) const CLIENT_BOUND_SHARE: f64 = 0.90;
/// The flag's name, beside the steady window's `collapse` and `unstable`.
pub(crate) const CLIENT_BOUND: &str = "client-bound";

/// The client's CPU over a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCpu {
    /// User plus system CPU seconds of the client process, every thread.
    pub(crate) cpu_s: f64,
    /// Seconds its main thread was ready to run and waited for a CPU (null where the
    /// executor cannot read it: a transient unit).
    pub(crate) wait_s: Option<f64>,
    /// The command's wall time, start to exit.
    pub(crate) wall_s: f64,
    /// The client's worker threads: pgbench's `-j`, sysbench's `--threads`.
    pub(crate) threads: u32,
    /// The machine's CPUs.
    pub(crate) cpus: u32,
    /// Cores the client's threads can use at once: min(threads, cpus).
    pub(crate) capacity_cores: u32,
    /// (cpu_s + wait_s) / (wall_s × capacity_cores).
    pub(crate) busy_share: f64,
    /// busy_share ≥ [`CLIENT_BOUND_SHARE`].
    pub(crate) bound: bool,
}

/// The client's CPU over a point from what its command used, its wall time, its threads and
/// the machine's CPUs; none without a wall time or a thread.
pub(crate) fn client_cpu(used: CpuUse, wall_s: f64, threads: u32, cpus: u32) -> Option<ClientCpu> {
    let capacity_cores = threads.min(cpus.max(1));
    if wall_s.is_nan() || wall_s <= 0.0 || capacity_cores == 0 || !used.cpu_s.is_finite() {
        return None;
    }
    let demand = used.cpu_s + used.main_thread_wait_s.unwrap_or(0.0);
    let busy_share = demand / (wall_s * f64::from(capacity_cores));
    Some(ClientCpu {
        cpu_s: used.cpu_s,
        wait_s: used.main_thread_wait_s,
        wall_s,
        threads,
        cpus,
        capacity_cores,
        busy_share,
        bound: busy_share >= CLIENT_BOUND_SHARE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(cpu_s: f64, wait_s: Option<f64>) -> CpuUse {
        CpuUse {
            cpu_s,
            main_thread_wait_s: wait_s,
        }
    }

    #[test]
    fn a_client_using_its_threads_capacity_is_bound_and_one_waiting_on_the_server_is_not() {
        // -j 1 on 2 CPUs: one core of capacity; 9.5 s of CPU over 10 s.
        let c = client_cpu(used(9.5, Some(0.0)), 10.0, 1, 2).expect("figures");
        assert_eq!(c.capacity_cores, 1);
        assert!((c.busy_share - 0.95).abs() < 1e-9, "{c:?}");
        assert!(c.bound);
        // -j 2 on 2 CPUs, the same CPU time: half the capacity.
        let c = client_cpu(used(9.5, Some(0.0)), 10.0, 2, 2).expect("figures");
        assert!((c.busy_share - 0.475).abs() < 1e-9, "{c:?}");
        assert!(!c.bound);
        // Threads beyond the CPUs add no capacity: -j 8 on 2 CPUs is two cores.
        let c = client_cpu(used(19.0, None), 10.0, 8, 2).expect("figures");
        assert_eq!(c.capacity_cores, 2);
        assert!(c.bound, "{c:?}");
        // Waiting for the server: little CPU.
        let c = client_cpu(used(0.8, Some(0.1)), 10.0, 2, 2).expect("figures");
        assert!(!c.bound, "{c:?}");
    }

    #[test]
    fn time_ready_to_run_but_waiting_for_a_cpu_counts_as_the_clients_demand() {
        // A contended machine gave the client 6 s of CPU over 10 s; it waited 3.5 s more
        // for a CPU: it never waited for the server.
        let c = client_cpu(used(6.0, Some(3.5)), 10.0, 1, 2).expect("figures");
        assert!((c.busy_share - 0.95).abs() < 1e-9, "{c:?}");
        assert!(c.bound);
        // Without the wait (a transient unit) the same client reads 60 %: not flagged.
        let c = client_cpu(used(6.0, None), 10.0, 1, 2).expect("figures");
        assert!(!c.bound, "{c:?}");
        // The bound itself is inclusive.
        let c = client_cpu(used(9.0, None), 10.0, 1, 4).expect("figures");
        assert!(c.bound, "{c:?}");
    }

    #[test]
    fn no_figure_without_a_wall_time_or_threads() {
        assert!(client_cpu(used(1.0, None), 0.0, 1, 2).is_none());
        assert!(client_cpu(used(1.0, None), f64::NAN, 1, 2).is_none());
        assert!(client_cpu(used(1.0, None), 10.0, 0, 2).is_none());
        // An inventory without CPUs still gives the client one core.
        assert_eq!(
            client_cpu(used(1.0, None), 10.0, 4, 0).map(|c| c.capacity_cores),
            Some(1)
        );
    }
}
