//! sysbench-tpcc points, built from the captured (1.0.20) and composed (1.1) sysbench outputs
//! the way the sweep builds them, through results.json and its schema, summary.csv,
//! report.html and `pgappliance collect` (pages rendered in headless Chromium, screenshots
//! kept in target/artifacts/); and a version 1 results.json from before them, still
//! collected.

use pgappliance_test_support as harness;

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::describe;
use pgappliance::plan::{Builtin, Protocol, WorkloadKind};
use pgappliance::results::{PointResult, PointStatus, RunResults, RESULTS_SCHEMA_VERSION};
use pgappliance::sweep::Limit;
use pgappliance::synthetic::{results_objects, run_results, Figures, SyntheticPoint, SyntheticRun};
use pgappliance::sysbench::{parse_output, SysbenchRun};
use sha2::{Digest, Sha256};

fn fixture(name: &str) -> SysbenchRun {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysbench")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_output(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The captured 1.0.20 run (2 threads) and the composed 1.1 one (16 threads).
fn parsed() -> [SysbenchRun; 2] {
    [
        fixture("run-1.0.20-t2.txt"),
        fixture("run-1.1-t16-scenario-b-composed.txt"),
    ]
}

/// A run's throughput figures scaled by `factor` (another machine running the same test).
fn scaled(run: &SysbenchRun, factor: f64) -> SysbenchRun {
    let mut r = run.clone();
    r.tps *= factor;
    r.qps *= factor;
    for s in &mut r.series {
        s.tps *= factor;
        s.qps *= factor;
    }
    r
}

/// A sysbench-tpcc point as the sweep records it: kind sysbench-tpcc, clients = threads =
/// sysbench's threads, the default builtin, no pgbench summary or latency log, sysbench's
/// figures, and its per-second tps as the tps series.
fn tpcc_point(index: usize, workload: &str, run: SysbenchRun, started_at: &str) -> PointResult {
    let id = format!("p{index:03}-{workload}-t{:05}-r1", run.threads);
    PointResult {
        schema_version: RESULTS_SCHEMA_VERSION,
        id: id.clone(),
        workload: workload.into(),
        kind: WorkloadKind::SysbenchTpcc,
        builtin: Builtin::default(),
        clients: run.threads,
        threads: run.threads,
        limit: Limit::DurationS(run.total_time_s.round() as u64),
        protocol: Protocol::default(),
        repeat: 1,
        checksums: None,
        status: PointStatus::Ok,
        error: None,
        attempt: 1,
        started_at: started_at.into(),
        finished_at: started_at.into(),
        wall_s: run.total_time_s,
        command: format!(
            "sysbench tpcc.lua --db-driver=pgsql --threads={} --report-interval=1 --report_csv=yes run",
            run.threads
        ),
        raw_dir: format!("raw/points/{id}/attempt-1"),
        summary: None,
        steady: pgappliance::results::steady::steady_window(&run.tps_series()),
        tps_series: run.tps_series(),
        sysbench: Some(run),
        latency: None,
        client: None,
        stats: None,
        os: None,
    }
}

/// A machine's run: one pgbench point, and the two TPC-C points at `factors` of the
/// fixtures' throughput.
fn machine(appliance: &str, run_id: &str, price: f64, factors: [f64; 2]) -> RunResults {
    let started_at = format!("2026-11-{}T10:00:00Z", &run_id[run_id.len() - 2..]);
    let mut r = run_results(&SyntheticRun {
        appliance: appliance.into(),
        run_id: run_id.into(),
        started_at: started_at.clone(),
        hourly_price_usd: price,
        points: vec![SyntheticPoint {
            workload: "rw".into(),
            builtin: Builtin::TpcbLike,
            checksums: None,
            clients: 16,
            repeat: 1,
            figures: Figures {
                tps: 10_000.0 * factors[0],
                p99_ms: 4.0,
            },
        }],
    })
    .expect("synthetic run");
    for (i, (run, factor)) in parsed().iter().zip(factors).enumerate() {
        r.points
            .push(tpcc_point(i + 1, "tpcc", scaled(run, factor), &started_at));
    }
    r.points_total = r.points.len();
    r
}

fn artifacts() -> PathBuf {
    let d = harness::workspace().join("target/artifacts");
    std::fs::create_dir_all(&d).expect("artifacts dir");
    d
}

fn assert_clean_page(page: &Path, png_name: &str) -> String {
    let png = artifacts().join(png_name);
    let shown = harness::chromium_render(page, &png);
    assert!(
        shown.console.is_empty(),
        "{}: {:?}",
        page.display(),
        shown.console
    );
    assert!(
        shown.fetches.is_empty(),
        "{}: {:?}",
        page.display(),
        shown.fetches
    );
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "{}: screenshot is {size} bytes",
        png.display()
    );
    eprintln!("screenshot kept: {}", png.display());
    shown.dom
}

/// Comma-separated records of a summary.csv (no field of these tests is quoted).
fn records(csv: &str) -> Vec<Vec<String>> {
    csv.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn tpcc_points_through_results_schema_summary_csv_and_report() {
    let r = machine("m6gd.8xlarge", "20261101T100000Z-0001", 1.4464, [1.0, 1.0]);
    assert_eq!(r.points[1].tps(), Some(185.30));
    assert_eq!(r.points[2].tps(), Some(4661.83));
    assert_eq!(r.points[2].figures().latency.p95, Some(8.13));
    let dir = tempfile::tempdir().expect("dir");
    let results = dir.path().join("results.json");
    std::fs::write(&results, serde_json::to_vec_pretty(&r).expect("json")).expect("write");
    harness::validate_results_schema(&results).expect("schema-valid with TPC-C points");
    let back: RunResults =
        serde_json::from_slice(&std::fs::read(&results).expect("read")).expect("reads back");
    for (b, p) in back.points.iter().zip(&r.points) {
        assert_eq!(
            (b.kind, b.tps(), b.figures().latency.p95),
            (p.kind, p.tps(), p.figures().latency.p95)
        );
        assert_eq!(b.tps_series.len(), p.tps_series.len());
        assert_eq!(
            b.sysbench
                .as_ref()
                .map(|s| (s.series.len(), s.ignored_errors, s.layout)),
            p.sysbench
                .as_ref()
                .map(|s| (s.series.len(), s.ignored_errors, s.layout))
        );
    }

    let csv = records(&pgappliance::results::summary_csv(&r));
    let col = |c: &str| csv[0].iter().position(|h| h == c).expect(c);
    assert_eq!(
        csv[0][9], "tps",
        "the columns before schema 2 keep their places"
    );
    let pg = &csv[1];
    assert_eq!(
        (pg[col("kind")].as_str(), pg[col("qps")].as_str()),
        ("pgbench", "")
    );
    let t = &csv[2];
    assert_eq!(t[col("kind")], "sysbench-tpcc");
    assert_eq!(t[col("builtin")], "");
    assert_eq!(
        (t[col("clients")].as_str(), t[col("threads")].as_str()),
        ("2", "2")
    );
    assert_eq!(t[col("tps")], "185.3");
    assert_eq!(t[col("qps")], "5216.91");
    assert_eq!(t[col("p95_ms")], "30.81");
    assert_eq!(t[col("latency_avg_ms")], "10.76");
    assert_eq!(t[col("max_ms")], "101.14");
    assert_eq!(t[col("transactions")], "1865");
    assert_eq!(t[col("ignored_errors")], "6");
    assert_eq!(t[col("reconnects")], "0");
    assert_eq!(t[col("p99_ms")], "", "no pgbench latency log");
    assert_eq!(csv[3][col("ignored_errors")], "72980");

    let html = pgappliance::report::render(&r);
    for want in [
        "tps vs clients",
        "TPC-C tps vs threads",
        "tpcc: TPC-C latency (sysbench avg and 95th percentile)",
        "tpcc: TPC-C tps per second",
        "<title>2 threads</title>",
        "<title>16 threads</title>",
        "class=\"tpcc-points\"",
        "<td>30.810</td>",
        "<td>72980</td>",
    ] {
        assert!(html.contains(want), "report lacks {want:?}");
    }
    // The pgbench point table does not list the TPC-C points and vice versa.
    let pg_table = &html[html.find("<h2>Points</h2>").expect("points")
        ..html.find("<h2>TPC-C points</h2>").expect("tpcc points")];
    assert!(pg_table.contains("p000-rw") && !pg_table.contains("-tpcc-"));
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).expect("write report");
    let dom = assert_clean_page(&page, "tpcc-run-report.png");
    assert!(dom.contains("TPC-C tps per second"));
}

/// A results.json of schema version 1 (a run from before sysbench-tpcc) as an uploader
/// left it: results.json, then manifest.json.
fn version_1_objects(appliance: &str, run_id: &str) -> Vec<(String, Vec<u8>)> {
    let r = run_results(&SyntheticRun {
        appliance: appliance.into(),
        run_id: run_id.into(),
        started_at: format!("2026-11-{}T10:00:00Z", &run_id[run_id.len() - 2..]),
        hourly_price_usd: 1.0,
        points: vec![SyntheticPoint {
            workload: "rw".into(),
            builtin: Builtin::TpcbLike,
            checksums: None,
            clients: 16,
            repeat: 1,
            figures: Figures {
                tps: 9_000.0,
                p99_ms: 4.0,
            },
        }],
    })
    .expect("synthetic run");
    let mut v = serde_json::to_value(&r).expect("json");
    v["schema_version"] = 1.into();
    for p in v["points"].as_array_mut().expect("points") {
        p["schema_version"] = 1.into();
        let p = p.as_object_mut().expect("point");
        assert!(p.remove("kind").is_some() && p.remove("sysbench").is_some());
    }
    let bytes = serde_json::to_vec_pretty(&v).expect("json");
    let manifest = serde_json::json!({
        "schema_version": 1, "appliance": appliance, "machine_id": "i-old", "run_id": run_id,
        "created_at": r.started_at,
        "objects": [{"path": "results.json", "size": bytes.len(),
                     "sha256": format!("{:x}", Sha256::digest(&bytes))}],
    });
    vec![
        ("results.json".into(), bytes),
        (
            "manifest.json".into(),
            serde_json::to_vec_pretty(&manifest).expect("manifest"),
        ),
    ]
}

fn put(
    root: &Path,
    appliance: &str,
    machine_id: &str,
    run_id: &str,
    objects: Vec<(String, Vec<u8>)>,
) -> PathBuf {
    let dir = root.join(appliance).join(machine_id).join(run_id);
    for (rel, bytes) in objects {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
    }
    dir
}

#[test]
fn collect_shows_tpcc_as_its_own_workload_and_reads_version_1_results() {
    let store = tempfile::tempdir().expect("store");
    let cache = tempfile::tempdir().expect("cache");
    // Scenario B's TPC-C gains of m6gd over m5d at 16 and 32 threads, here at 2 and 16.
    let m5d = machine("m5d.8xlarge", "20261101T100000Z-0001", 1.808, [1.0, 1.0]);
    let m6gd = machine(
        "m6gd.8xlarge",
        "20261101T110000Z-0002",
        1.4464,
        [1.155, 1.08],
    );
    for (r, id) in [(&m5d, "i-0m5d"), (&m6gd, "i-0m6gd")] {
        put(
            store.path(),
            &r.appliance,
            id,
            &r.run_id,
            results_objects(r, id),
        );
    }
    let old = put(
        store.path(),
        "old-machine",
        "i-old",
        "20261030T100000Z-0003",
        version_1_objects("old-machine", "20261030T100000Z-0003"),
    );
    harness::validate_results_schema(&old.join("results.json"))
        .expect("a version 1 results.json is valid under the schema");

    let out = tempfile::tempdir().expect("out");
    let url = format!("file://{}", store.path().display());
    let run = Command::new(harness::image_binary())
        .args(["collect", "--store", &url, "--out"])
        .arg(out.path())
        .arg("--cache")
        .arg(cache.path())
        .output()
        .expect("collect");
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("collected 3 run(s), skipped 0"),
        "{}",
        describe(&run)
    );

    let html = std::fs::read_to_string(out.path().join("index.html")).expect("index");
    // One run a machine, one sample a point: the gains are shown as measured, not judged
    // and not folded into a mean or a per-dollar claim.
    assert!(
        !html.contains("TPC-C tps per dollar-hour"),
        "no verdict, no price claim"
    );
    for want in [
        "tpcc: m6gd.8xlarge against m5d.8xlarge: one sample at 2 and 16 threads (+15.5 %; +8.0 %, no interval)".to_string(),
        "<h3>tpcc (TPC-C, sysbench-tpcc)</h3>".to_string(),
        "tpcc at 2 threads: TPC-C tps per second</title>".to_string(),
        "tpcc at 16 threads: TPC-C tps per second</title>".to_string(),
        "tpcc: latency p95 by threads</title>".to_string(),
        // The version 1 run's pgbench point is compared with the others'.
        "rw: ".to_string(),
        "old-machine".to_string(),
    ] {
        assert!(html.contains(&want), "index lacks {want:?}");
    }
    // The per-second charts show each machine's line.
    let at2 = &html[html
        .find("tpcc at 2 threads: TPC-C tps per second")
        .expect("chart")..];
    let at2 = &at2[..at2.find("</figure>").expect("end of chart")];
    assert!(at2.contains("m5d.8xlarge</li>") && at2.contains("m6gd.8xlarge</li>"));

    let csv = records(&std::fs::read_to_string(out.path().join("summary.csv")).expect("csv"));
    let col = |c: &str| csv[0].iter().position(|h| h == c).expect(c);
    let row = csv[1..]
        .iter()
        .find(|r| {
            r[col("machine")] == "m6gd.8xlarge"
                && r[col("workload")] == "tpcc"
                && r[col("clients")] == "2"
        })
        .expect("m6gd's TPC-C row at 2 threads");
    assert_eq!(row[col("kind")], "sysbench-tpcc");
    assert_eq!(row[col("p95_ms")], "30.810");
    assert_eq!(row[col("ignored_errors")], "6");
    assert_eq!(row[col("reconnects")], "0");
    let qps: f64 = row[col("qps_mean")].parse().expect("qps");
    assert!((qps - 5216.91 * 1.155).abs() < 0.01, "{qps}");
    let old_row = csv[1..]
        .iter()
        .find(|r| r[col("machine")] == "old-machine")
        .expect("the version 1 run's row");
    assert_eq!(old_row[col("kind")], "pgbench");

    let dom = assert_clean_page(&out.path().join("index.html"), "collect-tpcc.png");
    assert!(dom.contains("m6gd.8xlarge against m5d.8xlarge: one sample at 2 and 16 threads"));
    let page = std::fs::read_dir(out.path().join("runs"))
        .expect("runs/")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().contains("m6gd"))
        .expect("m6gd's page");
    let dom = assert_clean_page(&page, "collect-tpcc-run-page.png");
    assert!(dom.contains("TPC-C tps per second"));
}
