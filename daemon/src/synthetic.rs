//! Synthetic but schema-valid runs, for the tests and the benchmark of `pgappliance collect`:
//! a [`RunResults`] whose figures the caller chooses, and the objects an uploaded run has in
//! a store (results.json, summary.csv, manifest.json last). The machine description comes
//! from captured fixtures (Debian 12 x86_64 lscpu, meminfo, os-release, lsblk); the plan is
//! the quick example's with the appliance's name and price.

use std::collections::BTreeMap;

use crate::inventory::{parse, Inventory};
use sha2::{Digest, Sha256};

use crate::pgbench::summary::OutputFormat;
use crate::pgbench::txlog::LatencySource;
use crate::pgbench::{LatencyStats, ProgressSample, Summary};
use crate::plan::{Builtin, Checksums, Plan, Protocol};
use crate::results::steady::steady_window;
use crate::results::{PointResult, PointStatus, PostgresInfo, RunResults, RESULTS_SCHEMA_VERSION};
use crate::sweep::Limit;
use crate::upload::{Manifest, ManifestEntry, MANIFEST};

const QUICK_PLAN: &str = include_str!("../../examples/quick.toml");
const LSCPU: &str = include_str!("../tests/fixtures/inventory/lscpu-debian12-x86_64.json");
const MEMINFO: &str = include_str!("../tests/fixtures/inventory/meminfo-debian12.txt");
const OS_RELEASE: &str = include_str!("../tests/fixtures/inventory/os-release-debian12.txt");
const LSBLK: &str = include_str!("../tests/fixtures/inventory/lsblk-debian12-vm.json");

/// The figures of one synthetic point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub tps: f64,
    /// Latency p99 in ms; the other percentiles are set in proportion to it.
    pub p99_ms: f64,
}

/// One synthetic point: where it sits in the sweep and its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticPoint {
    pub workload: String,
    pub builtin: Builtin,
    pub checksums: Option<Checksums>,
    pub clients: u32,
    pub repeat: u32,
    pub figures: Figures,
}

/// A synthetic run.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticRun {
    pub appliance: String,
    pub run_id: String,
    /// RFC 3339; runs of one machine are ordered by it.
    pub started_at: String,
    pub hourly_price_usd: f64,
    pub points: Vec<SyntheticPoint>,
}

fn point_result(p: &SyntheticPoint, index: usize, started_at: &str) -> PointResult {
    let f = p.figures;
    let duration_s = 60u64;
    let transactions = (f.tps * duration_s as f64).round() as u64;
    let latency_avg_ms = if f.tps > 0.0 {
        1000.0 * f64::from(p.clients) / f.tps
    } else {
        0.0
    };
    let cs = Checksums::label(p.checksums);
    let id = format!(
        "p{:03}-{}{}-c{}-r{}",
        index,
        p.workload,
        if cs.is_empty() {
            String::new()
        } else {
            format!("-checksums-{cs}")
        },
        p.clients,
        p.repeat
    );
    let mut point = PointResult {
        schema_version: RESULTS_SCHEMA_VERSION,
        id: id.clone(),
        workload: p.workload.clone(),
        kind: crate::plan::WorkloadKind::Pgbench,
        builtin: p.builtin,
        clients: p.clients,
        threads: p.clients.min(2),
        limit: Limit::DurationS(duration_s),
        protocol: Protocol::Simple,
        repeat: p.repeat,
        checksums: p.checksums,
        status: PointStatus::Ok,
        error: None,
        attempt: 1,
        started_at: started_at.to_string(),
        finished_at: started_at.to_string(),
        wall_s: duration_s as f64,
        command: format!(
            "pgbench -b {} -c {} -j {} -T {duration_s} -P 1 bench",
            p.builtin.pgbench_name(),
            p.clients,
            p.clients.min(2)
        ),
        raw_dir: format!("raw/{id}/attempt-1"),
        summary: Some(Summary {
            output_format: OutputFormat::V15Plus,
            client_version: Some("16.4".into()),
            client_version_full: Some("16.4".into()),
            server_version: None,
            transaction_type: Some(format!("<builtin: {}>", p.builtin.pgbench_name())),
            scaling_factor: Some(10),
            query_mode: Some("simple".into()),
            clients: p.clients,
            threads: p.clients.min(2),
            max_tries: Some(1),
            transactions_per_client: None,
            duration_s: Some(duration_s as f64),
            transactions_processed: transactions,
            transactions_expected: None,
            failed_transactions: Some(0),
            latency_avg_ms,
            latency_stddev_ms: Some(f.p99_ms / 4.0),
            initial_connection_ms: Some(2.0),
            tps: f.tps,
            tps_including_connections: None,
            statement_latencies: Vec::new(),
        }),
        sysbench: None,
        latency: Some(LatencyStats {
            source: LatencySource::TransactionLog,
            transactions,
            failed: 0,
            skipped: 0,
            mean_ms: Some(f.p99_ms / 3.0),
            min_ms: Some(f.p99_ms / 20.0),
            p25_ms: Some(f.p99_ms / 8.0),
            p50_ms: Some(f.p99_ms / 4.0),
            p75_ms: Some(f.p99_ms / 2.0),
            p90_ms: Some(f.p99_ms / 1.5),
            p95_ms: Some(f.p99_ms / 1.2),
            p99_ms: Some(f.p99_ms),
            p99_9_ms: Some(f.p99_ms * 1.5),
            max_ms: Some(f.p99_ms * 3.0),
        }),
        // A gentle wave around the mean, one sample a second.
        tps_series: (1..=duration_s)
            .map(|s| {
                let wave = ((s as f64) / 7.0).sin() * 0.03 * f.tps;
                ProgressSample {
                    elapsed_s: s as f64,
                    tps: (f.tps + wave).max(0.0),
                    latency_ms: Some(latency_avg_ms),
                    stddev_ms: Some(f.p99_ms / 4.0),
                    lag_ms: None,
                    failed: Some(0),
                }
            })
            .collect(),
        steady: None,
        client: None,
        stats: None,
        os: None,
    };
    point.steady = steady_window(&point.tps_series);
    point
}

/// The plan of a synthetic run: the quick example named after the appliance, at its price.
fn plan(appliance: &str, price: f64) -> Result<Plan, String> {
    let text = QUICK_PLAN
        .replace(
            "name = \"quick\"",
            &format!("name = {}", toml_string(appliance)),
        )
        .replace(
            "hourly_price_usd = 0.10",
            &format!("hourly_price_usd = {price:?}"),
        );
    Plan::parse(&text).map_err(|issues| {
        let text: Vec<String> = issues.iter().map(|i| format!("{i:?}")).collect();
        format!(
            "a synthetic run of \"{appliance}\" at ${price}/hour makes no valid plan: {}",
            text.join("; ")
        )
    })
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn inventory(started_at: &str) -> Inventory {
    Inventory {
        collected_at: started_at.to_string(),
        hostname: "synthetic".into(),
        kernel: "6.1.0-synthetic".into(),
        os: parse::parse_os_release(OS_RELEASE),
        cpu: parse::parse_lscpu(LSCPU).expect("the lscpu fixture parses"),
        memory_bytes: parse::parse_meminfo_total(MEMINFO).expect("the meminfo fixture parses"),
        page_size: 4096,
        block_devices: parse::parse_lsblk(LSBLK).expect("the lsblk fixture parses"),
        dmi: BTreeMap::new(),
        cloud: None,
    }
}

/// The results of a synthetic run; an error when its appliance name or price could not be
/// a plan's.
pub fn run_results(run: &SyntheticRun) -> Result<RunResults, String> {
    let points: Vec<PointResult> = run
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| point_result(p, i, &run.started_at))
        .collect();
    Ok(RunResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        run_id: run.run_id.clone(),
        appliance: run.appliance.clone(),
        hourly_price_usd: run.hourly_price_usd,
        started_at: run.started_at.clone(),
        finished_at: Some(run.started_at.clone()),
        plan: plan(&run.appliance, run.hourly_price_usd)?,
        inventory: inventory(&run.started_at),
        postgres: PostgresInfo {
            major: 16,
            version: "16.4".into(),
            bin_dir: "/usr/lib/postgresql/16/bin".into(),
            server_version: Some("PostgreSQL 16.4 (synthetic)".into()),
            data_checksums: false,
            applied_settings: BTreeMap::new(),
            effective_settings: Vec::new(),
        },
        dataset: None,
        tpcc_datasets: Vec::new(),
        tuning_in_effect: None,
        step_timings_s: BTreeMap::new(),
        points_total: points.len(),
        points,
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The objects of a synthetic run as an uploader leaves them, relative to the run's key:
/// results.json and summary.csv, then manifest.json (last, as a reader expects).
pub fn run_objects(run: &SyntheticRun, machine_id: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    Ok(results_objects(&run_results(run)?, machine_id))
}

/// The objects an uploader leaves for these results (a synthetic run's, or one a test has
/// added points to): results.json, summary.csv, then manifest.json.
pub fn results_objects(results: &RunResults, machine_id: &str) -> Vec<(String, Vec<u8>)> {
    let mut objects = vec![
        (
            "results.json".to_string(),
            serde_json::to_vec_pretty(results).expect("results serialise"),
        ),
        (
            "summary.csv".to_string(),
            crate::results::summary_csv(results).into_bytes(),
        ),
    ];
    let manifest = Manifest {
        schema_version: 1,
        appliance: results.appliance.clone(),
        machine_id: machine_id.to_string(),
        run_id: results.run_id.clone(),
        created_at: results.started_at.clone(),
        objects: objects
            .iter()
            .map(|(path, bytes)| ManifestEntry {
                path: path.clone(),
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            })
            .collect(),
    };
    objects.push((
        MANIFEST.to_string(),
        serde_json::to_vec_pretty(&manifest).expect("manifest serialises"),
    ));
    objects
}

/// A fleet for benchmarks: run `n` of `machines` machines, scenario A's client counts on a
/// read-write and a read-only workload, figures varying with the run so no two runs'
/// results are the same.
pub fn fleet_run(n: usize, machines: usize) -> SyntheticRun {
    let machine = n % machines.max(1);
    let speed = 1.0 + machine as f64 * 0.07 + (n % 13) as f64 * 0.001;
    let mut points = Vec::new();
    for (workload, builtin, base) in [
        ("rw", Builtin::TpcbLike, 4000.0),
        ("ro", Builtin::SelectOnly, 40000.0),
    ] {
        for clients in [10u32, 25, 50, 100, 250, 500, 1000] {
            let scaling = (f64::from(clients)).ln() / 10f64.ln();
            points.push(SyntheticPoint {
                workload: workload.into(),
                builtin,
                checksums: None,
                clients,
                repeat: 1,
                figures: Figures {
                    tps: base * speed * scaling + n as f64 * 0.001,
                    p99_ms: f64::from(clients) / (speed * 10.0),
                },
            });
        }
    }
    SyntheticRun {
        appliance: format!("machine-{machine:03}"),
        run_id: format!("20260101T{:06}Z-{:04x}", n, n % 0x10000),
        started_at: format!(
            "2026-01-{:02}T{:02}:{:02}:{:02}Z",
            1 + (n / 86400) % 28,
            (n / 3600) % 24,
            (n / 60) % 60,
            n % 60
        ),
        hourly_price_usd: 1.0 + machine as f64 * 0.25,
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_run_round_trips_and_its_manifest_matches() {
        let run = fleet_run(7, 3);
        let results = run_results(&run).expect("results");
        assert_eq!(results.plan.appliance.name, run.appliance);
        let objects = run_objects(&run, "m1").expect("objects");
        assert_eq!(objects.last().map(|o| o.0.as_str()), Some(MANIFEST));
        let back: RunResults = serde_json::from_slice(&objects[0].1).expect("parses back");
        // serde_json reads floats back to within an ulp, not always exactly.
        assert_eq!(back.points.len(), 14);
        assert_eq!(
            (back.appliance.as_str(), back.run_id.as_str()),
            ("machine-001", run.run_id.as_str())
        );
        let (a, b) = (
            back.points[3].tps().expect("tps"),
            results.points[3].tps().expect("tps"),
        );
        assert!((a - b).abs() < 1e-9 * b, "{a} vs {b}");
        let manifest: Manifest = serde_json::from_slice(&objects[2].1).expect("manifest");
        assert_eq!(manifest.objects[0].sha256, sha256_hex(&objects[0].1));
        let bad = SyntheticRun {
            appliance: "Not A Name!".into(),
            ..run
        };
        let err = run_results(&bad).expect_err("not a plan name");
        assert!(err.contains("Not A Name!"), "{err}");
        assert_ne!(
            run_results(&fleet_run(8, 3)).expect("results").points[0].tps(),
            results.points[0].tps()
        );
    }
}
