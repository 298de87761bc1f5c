//! sysbench-tpcc end to end in local mode against a real PostgreSQL with Debian's sysbench:
//! the pinned sysbench-tpcc scripts fetched over loopback HTTP and checked against the
//! plan's sha256, a kill -9 inside `tpcc.lua prepare` redone cleanly by the next start,
//! then every point's figures checked against sysbench's own output kept in raw/.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pgappliance_test_support as harness;

use harness::{describe, processes_mentioning, Workdir};
use serde_json::Value;

/// The pinned copy of sysbench-tpcc (third_party/README.md), checked, and its sha256.
fn pinned_archive() -> (PathBuf, String) {
    let (path, _, sha) = pgappliance::third_party::pinned(pgappliance::third_party::SYSBENCH_TPCC)
        .unwrap_or_else(|e| panic!("{e:#}"));
    (path, sha)
}

/// Starts run `n` with the fault point `fault` armed to stop the daemon right after it
/// started that command, checks `cond` on the journal there, lets the command work for 2 s,
/// then kills the daemon (SIGKILL): a kill -9 in the middle of that command.
fn kill_at(
    w: &Workdir,
    plan: &Path,
    logs: &Path,
    n: usize,
    fault: &str,
    cond: impl Fn(&Value) -> bool,
) {
    let err = logs.join(format!("run{n}.err"));
    let mut cmd = w.run_command(plan);
    cmd.stdout(Stdio::from(
        std::fs::File::create(logs.join(format!("run{n}.out"))).expect("log"),
    ));
    let child = harness::spawn_to_fault(&mut cmd, fault, &err);
    let j = w.journal().expect("journal");
    assert!(cond(&j), "run {n} at {fault}: {j}");
    std::thread::sleep(Duration::from_secs(2));
    harness::kill_stopped(child);
}

/// Serves `bytes` to every GET on a loopback port; returns the URL and a counter of
/// requests served.
fn serve(bytes: Vec<u8>) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&bytes);
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    (
        format!("http://127.0.0.1:{port}/sysbench-tpcc.tar.gz"),
        served,
    )
}

fn plan_text(source: &str, sha: &str) -> String {
    format!(
        r#"[appliance]
name = "tpcc-small"
platform = "debian12"
hourly_price_usd = 0.10

[postgres]
data_checksums = false

[tuning]
auto = true
tuned_profile = "none"

[tuning.settings]
shared_buffers = "128MB"
max_wal_size = "1GB"
huge_pages = "off"

[dataset]
# Scenario B: every test starts from the prepared data directory.
restore = "each-point"

[sysbench]
tpcc_source = "{source}"
tpcc_sha256 = "{sha}"

[[workloads]]
name = "tpcc"
kind = "sysbench-tpcc"
tables = 2
scale = 1
prepare_threads = 2
threads = [1, 2]
duration = "4s"
warmup = "2s"
rand_type = "pareto"
use_fk = false
trx_level = "RC"

[finish]
action = "stay-up"
"#
    )
}

/// The "(X per sec.)" figure of a sysbench summary line, read without the parser.
fn per_sec(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(label))?;
    let inner = line.split('(').nth(1)?;
    inner.split_whitespace().next()?.parse().ok()
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn tpcc_plan_prepares_resumes_a_killed_prepare_and_matches_sysbench_output() {
    let (archive, sha) = pinned_archive();
    let (url, served) = serve(std::fs::read(&archive).expect("archive"));
    let w = Workdir::new("tpcc");
    let plan = w.path().join("tpcc.toml");
    std::fs::write(&plan, plan_text(&url, &sha)).expect("write plan");

    // A wrong sha256 is refused before anything is unpacked, naming both digests.
    let wrong = w.path().join("wrong.toml");
    std::fs::write(&wrong, plan_text(&url, &"ab".repeat(32))).expect("write plan");
    let w2 = Workdir::new("tpcc-wrong");
    let out = w2.run(&wrong);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = describe(&out);
    assert!(
        text.contains(&sha) && text.contains(&"ab".repeat(32)),
        "both digests named: {text}"
    );
    drop(w2);

    // First start: killed while tpcc.lua prepare runs (a fault point right after it started).
    let logs = w.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    kill_at(
        &w,
        &plan,
        &logs,
        1,
        "spawned:sysbench:raw/dataset-sbtest_w1_t2.stdout",
        |j| j["state"]["dataset"]["tpcc_preparing"].is_string(),
    );
    let j = w.journal().expect("journal");
    assert_eq!(
        j["state"]["dataset"]["tpcc_preparing"], "sbtest_w1_t2",
        "the interrupted prepare is on record: {j}"
    );
    // The prepare dies with the daemon (PR_SET_PDEATHSIG): bounded, not timed.
    let deadline = Instant::now() + Duration::from_secs(120);
    while processes_mentioning("tpcc.lua").into_iter().any(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sysbench")
    }) {
        assert!(Instant::now() < deadline, "an orphan sysbench is left");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Second start: the prepare is redone from an empty database, the first warm-up runs,
    // and the run is killed again in the middle of the measured point after it.
    kill_at(
        &w,
        &plan,
        &logs,
        2,
        "spawned:sysbench:p002-tpcc-t00001-r1/attempt-1/stdout.txt",
        |j| j["pending"]["item"] == "p002-tpcc-t00001-r1",
    );
    let log2 = std::fs::read_to_string(logs.join("run2.err")).unwrap_or_default();
    assert!(
        log2.contains("sysbench-tpcc prepare was interrupted"),
        "the resume says what it redoes: {log2}"
    );

    // Third start: the interrupted point's warm-up runs again right before it (from the
    // snapshot, since the killed point wrote to the data), then the rest.
    let out = w.run(&plan);
    assert!(out.status.success(), "{}", describe(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    let restores: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("restoring the data directory"))
        .collect();
    assert_eq!(restores.len(), 2, "{restores:?}");
    assert!(restores[0].contains("w001-tpcc-t00001-r1"), "{restores:?}");
    assert!(restores[1].contains("w003-tpcc-t00002-r1"), "{restores:?}");
    let j = w.journal().expect("journal");
    assert_eq!(j["points"]["w001-tpcc-t00001-r1"]["attempts"], 2, "{j}");
    assert_eq!(j["points"]["p002-tpcc-t00001-r1"]["attempts"], 2, "{j}");
    assert_eq!(j["points"]["w003-tpcc-t00002-r1"]["attempts"], 1, "{j}");
    assert!(
        served.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the scripts came over HTTP"
    );
    let j = w.journal().expect("journal");
    assert!(j["state"]["dataset"]["tpcc_preparing"].is_null(), "{j}");
    assert_eq!(
        j["state"]["dataset"]["tpcc"],
        serde_json::json!(["db=sbtest_w1_t2 tables=2 scale=1 use_fk=false"])
    );

    let run_dir = w.run_dir();
    let r = read_json(&run_dir.join("results.json"));
    harness::validate_results_schema(&run_dir.join("results.json")).expect("matches the schema");
    let points = r["points"].as_array().expect("points");
    let ids: Vec<&str> = points.iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(
        ids,
        ["p002-tpcc-t00001-r1", "p004-tpcc-t00002-r1"],
        "{ids:?}"
    );
    for p in points {
        let id = p["id"].as_str().expect("id");
        assert_eq!(p["status"], "ok", "{id}: {p}");
        assert_eq!(p["kind"], "sysbench-tpcc", "{id}");
        let raw = run_dir.join(p["raw_dir"].as_str().expect("raw_dir"));
        let stdout = std::fs::read_to_string(raw.join("stdout.txt")).expect("stdout.txt");
        let sb = &p["sysbench"];
        assert_eq!(
            sb["tps"].as_f64(),
            per_sec(&stdout, "transactions:"),
            "{id}"
        );
        assert_eq!(sb["qps"].as_f64(), per_sec(&stdout, "queries:"), "{id}");
        assert_eq!(sb["threads"], p["threads"], "{id}");
        assert_eq!(p["clients"], p["threads"], "{id}");
        let csv_lines = stdout
            .lines()
            .filter(|l| l.split(',').count() == 10 && l.starts_with(|c: char| c.is_ascii_digit()))
            .count();
        assert!(csv_lines >= 3, "{id}: {csv_lines} per-second lines");
        assert_eq!(
            sb["series"].as_array().map(Vec::len),
            Some(csv_lines),
            "{id}"
        );
        assert_eq!(
            p["tps_series"].as_array().map(Vec::len),
            Some(csv_lines),
            "{id}"
        );
        assert!(
            p["command"]
                .as_str()
                .is_some_and(|c| c.contains("--rand-type=pareto") && c.contains("--report_csv=yes")),
            "{id}: {}",
            p["command"]
        );
        let commits = p["stats"]["database"]["xact_commit"]
            .as_f64()
            .expect("xact_commit");
        assert!(commits > 0.0, "{id}: server statistics of the run");
    }
    // Each measured point had its own warm-up, kept as evidence.
    for warm in ["w001-tpcc-t00001-r1", "w003-tpcc-t00002-r1"] {
        assert!(
            run_dir.join("points").join(format!("{warm}.json")).exists(),
            "{warm}"
        );
    }
    // The prepared dataset and the plan's settings back after the load settings.
    assert_eq!(
        r["tpcc_datasets"][0]["database"], "sbtest_w1_t2",
        "{}",
        r["tpcc_datasets"]
    );
    assert_eq!(r["tpcc_datasets"][0]["source"], "generated");
    assert!(
        r["dataset"].is_null(),
        "no pgbench dataset in a TPC-C-only plan"
    );
    let ds = read_json(&run_dir.join("dataset-tpcc.json"));
    assert_eq!(ds[0]["database"], "sbtest_w1_t2", "{ds}");
    assert!(ds[0]["bytes"].as_u64().expect("bytes") > 1 << 20, "{ds}");
    let settings = r["postgres"]["effective_settings"]
        .as_array()
        .expect("settings");
    // Only settings off their defaults are listed: none of the load settings may be left.
    for (name, load_value) in [
        ("fsync", "off"),
        ("autovacuum", "off"),
        ("wal_level", "minimal"),
        ("full_page_writes", "off"),
    ] {
        assert!(
            !settings
                .iter()
                .any(|s| s["name"] == name && s["setting"] == load_value),
            "{name} = {load_value} left after the prepare: {settings:?}"
        );
    }
    assert!(run_dir.join("report.html").exists());
}
