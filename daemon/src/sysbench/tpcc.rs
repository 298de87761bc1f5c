//! sysbench-tpcc's command lines (pure): `tpcc.lua … prepare` for a dataset and
//! `tpcc.lua … run` for a sweep point, as scenario B ran them (`--db-driver=pgsql`,
//! `--report-interval`, `--report_csv=yes`, `--use_fk`, `--trx_level`, `--rand-type`).

use std::path::{Path, PathBuf};

use crate::plan::TpccDataset;
use crate::sweep::{Limit, SweepPoint};

/// The program (from the platform's packages: Debian's `sysbench`, EPEL 8's on Rocky 8).
pub(crate) const SYSBENCH: &str = "sysbench";

/// Where and as whom sysbench connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conn {
    /// The server's Unix socket directory (libpq reads a host starting with `/` as one).
    pub(crate) socket_dir: PathBuf,
    pub(crate) port: u16,
    pub(crate) user: String,
}

fn common(ds: &TpccDataset, conn: &Conn, threads: u32) -> Vec<String> {
    vec![
        "--db-driver=pgsql".into(),
        format!("--pgsql-host={}", conn.socket_dir.display()),
        format!("--pgsql-port={}", conn.port),
        format!("--pgsql-user={}", conn.user),
        format!("--pgsql-db={}", ds.database()),
        format!("--threads={threads}"),
        format!("--tables={}", ds.tables),
        format!("--scale={}", ds.scale),
        format!("--use_fk={}", u8::from(ds.use_fk)),
    ]
}

/// `tpcc.lua` arguments that build `ds` with `threads` loaders.
pub(crate) fn prepare_args(
    script: &Path,
    ds: &TpccDataset,
    conn: &Conn,
    threads: u32,
) -> Vec<String> {
    let mut a = vec![script.display().to_string()];
    a.extend(common(ds, conn, threads));
    a.push("prepare".into());
    a
}

/// The default number of prepare threads: the CPUs, but no more than there are warehouses
/// to load (tpcc.lua gives each thread whole warehouses and tables).
pub(crate) fn default_prepare_threads(ds: &TpccDataset, cpus: u32) -> u32 {
    let work = ds.scale.max(ds.tables);
    cpus.clamp(1, work.max(1))
}

/// `tpcc.lua` arguments of a sweep point (a warm-up runs with the same ones).
pub(crate) fn run_args(script: &Path, p: &SweepPoint, conn: &Conn) -> Option<Vec<String>> {
    let t = p.tpcc?;
    let mut a = vec![script.display().to_string()];
    a.extend(common(&t.dataset, conn, p.threads));
    let secs = match p.limit {
        Limit::DurationS(s) => s,
        Limit::Transactions(_) => return None,
    };
    a.extend([
        format!("--time={secs}"),
        format!("--report-interval={}", p.progress_interval_s),
        "--report_csv=yes".into(),
        format!("--trx_level={}", t.trx_level.as_str()),
        format!("--rand-type={}", t.rand_type.as_str()),
        "run".into(),
    ]);
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    const PLAN: &str = r#"
[appliance]
name = "t"
platform = "debian12"
arch = "x86_64"
[postgres]
version = 15
[sysbench]
tpcc_source = "file:///srv/sysbench-tpcc.tar.gz"
tpcc_sha256 = "374dc49eca62d121a5c41d9ca7486d08e5ad0f065b2bbd834a7a069f0c80fee6"
[[workloads]]
name = "tpcc-mem"
kind = "sysbench-tpcc"
tables = 10
scale = 10
threads = [16, 32]
duration = "3600s"
warmup = "600s"
rand_type = "pareto"
"#;

    #[test]
    fn scenario_b_command_lines() {
        let plan = Plan::parse(PLAN).expect("test step");
        let points = crate::sweep::expand(&plan, 4);
        let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "w001-tpcc-mem-t00016-r1",
                "p002-tpcc-mem-t00016-r1",
                "w003-tpcc-mem-t00032-r1",
                "p004-tpcc-mem-t00032-r1"
            ]
        );
        let conn = Conn {
            socket_dir: PathBuf::from("/run/pg"),
            port: 5433,
            user: "postgres".into(),
        };
        let script = Path::new("/w/tpcc.lua");
        let run = run_args(script, &points[3], &conn)
            .expect("test step")
            .join(" ");
        assert_eq!(
            run,
            "/w/tpcc.lua --db-driver=pgsql --pgsql-host=/run/pg --pgsql-port=5433 --pgsql-user=postgres --pgsql-db=sbtest_w10_t10 --threads=32 --tables=10 --scale=10 --use_fk=0 --time=3600 --report-interval=1 --report_csv=yes --trx_level=RC --rand-type=pareto run"
        );
        let warm = run_args(script, &points[2], &conn)
            .expect("test step")
            .join(" ");
        assert!(
            warm.contains("--time=600 ") && warm.contains("--threads=32 "),
            "{warm}"
        );
        let ds = plan.tpcc_datasets()[0];
        assert_eq!(
            prepare_args(script, &ds, &conn, 4).join(" "),
            "/w/tpcc.lua --db-driver=pgsql --pgsql-host=/run/pg --pgsql-port=5433 --pgsql-user=postgres --pgsql-db=sbtest_w10_t10 --threads=4 --tables=10 --scale=10 --use_fk=0 prepare"
        );
        assert_eq!(default_prepare_threads(&ds, 32), 10);
        assert_eq!(default_prepare_threads(&ds, 2), 2);
    }
}
