//! kill -9 of the daemon at several moments (inside initdb, inside dataset init, in the
//! middle of a pgbench point, right after a point was recorded, at a fixed delay), each
//! followed by the same command: the run finishes with every point present exactly once,
//! interrupted points rerun as new attempts, and no orphan pgbench is left behind.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pgappliance_test_support as harness;

use harness::{describe, processes_mentioning, Workdir};
use serde_json::Value;

fn plan() -> std::path::PathBuf {
    harness::workspace().join("tests/plans/resume.toml")
}

fn spawn(w: &Workdir, logs: &Path, n: usize) -> Child {
    let out = std::fs::File::create(logs.join(format!("run{n}.out"))).expect("log");
    let err = std::fs::File::create(logs.join(format!("run{n}.err"))).expect("log");
    w.run_command(&plan())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("spawn pgapplianced")
}

fn pending(j: &Value) -> (String, String) {
    let p = &j["pending"];
    (
        p["step"].as_str().unwrap_or("").to_string(),
        p["item"].as_str().unwrap_or("").to_string(),
    )
}

/// Starts run `n` with the fault point `fault` armed to stop the daemon there, lets what the
/// daemon started go on for `linger` (a pgbench point keeps running) after checking `cond` on
/// the journal, then kills the daemon (SIGKILL): a kill -9 at exactly that place.
fn kill_at(
    w: &Workdir,
    logs: &Path,
    n: usize,
    what: &str,
    fault: &str,
    linger: Duration,
    cond: impl Fn(&Value) -> bool,
) {
    let err = logs.join(format!("run{n}.err"));
    let mut cmd = w.run_command(&plan());
    cmd.stdout(Stdio::from(
        std::fs::File::create(logs.join(format!("run{n}.out"))).expect("log"),
    ));
    let child = harness::spawn_to_fault(&mut cmd, fault, &err);
    let j = w.journal().expect("journal");
    assert!(cond(&j), "at \"{what}\" the journal says {j}");
    std::thread::sleep(linger);
    harness::kill_stopped(child);
    eprintln!(
        "killed run {n} at: {what}; journal pending = {:?}",
        w.journal().map(|j| pending(&j))
    );
}

/// Whether a process named `comm` whose command line mentions the work dir (and `arg`)
/// is running.
fn running(workdir: &str, comm: &str, arg: &str) -> bool {
    processes_mentioning(workdir).into_iter().any(|pid| {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        name.trim() == comm && String::from_utf8_lossy(&cmd).contains(arg)
    })
}

fn assert_no_orphan_pgbench(w: &Workdir) {
    let needle = w.path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<u32> = processes_mentioning(&needle)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "pgbench")
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "orphan pgbench processes: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn killed_at_several_moments_resumes_and_records_each_point_once() {
    let w = Workdir::new("resume");
    let logs = tempfile::tempdir().expect("logs");
    let logs = logs.path();

    let workdir = w.path().display().to_string();
    kill_at(
        &w,
        logs,
        1,
        "inside initdb",
        "spawned:initdb",
        Duration::from_millis(100),
        |j| pending(j) == ("postgres".into(), "initdb".into()) && running(&workdir, "initdb", ""),
    );
    kill_at(
        &w,
        logs,
        2,
        "inside pgbench -i",
        "spawned:pgbench:raw/dataset-init.stdout",
        Duration::from_millis(100),
        |j| pending(j).0 == "dataset" && running(&workdir, "pgbench", "--initialize"),
    );
    kill_at(
        &w,
        logs,
        3,
        "in the middle of point 1",
        "spawned:pgbench:p001-rw-c00001-r1/attempt-1/stdout.txt",
        Duration::from_millis(1000),
        |j| pending(j).1.starts_with("p001") && running(&workdir, "pgbench", ""),
    );
    assert_no_orphan_pgbench(&w);
    kill_at(
        &w,
        logs,
        4,
        "right after point 2 was recorded",
        "point-recorded@2",
        Duration::ZERO,
        |j| j["points"].as_object().is_some_and(|p| p.len() == 2),
    );
    // The first point this process begins (the guest's power cut names its moment so).
    kill_at(
        &w,
        logs,
        5,
        "at the begin of point 3",
        "begin-point@1",
        Duration::ZERO,
        |j| pending(j) == ("sweep".into(), "p003-rw-c00004-r1".into()),
    );
    // A moment chosen by the clock rather than by the journal.
    let mut child = spawn(&w, logs, 6);
    std::thread::sleep(Duration::from_millis(2600));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_no_orphan_pgbench(&w);

    let out = w.run(&plan());
    assert!(out.status.success(), "{}", describe(&out));

    let run_dir = w.run_dir();
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json")).expect("results.json"),
    )
    .expect("json");
    let ids: Vec<&str> = r["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        ids,
        [
            "p001-rw-c00001-r1",
            "p002-rw-c00002-r1",
            "p003-rw-c00004-r1",
            "p004-rw-c00006-r1"
        ]
    );
    for p in r["points"].as_array().expect("points") {
        assert_eq!(p["status"], "ok", "{p}");
        let raw = run_dir.join(p["raw_dir"].as_str().expect("raw_dir"));
        assert!(raw.join("stdout.txt").exists());
    }
    let p1 = &r["points"][0];
    assert!(
        p1["attempt"].as_u64().expect("attempt") >= 2,
        "point 1 was interrupted once: {p1}"
    );
    assert!(run_dir
        .join("raw/points/p001-rw-c00001-r1/attempt-1")
        .exists());
    let p3 = &r["points"][2];
    assert!(
        p3["attempt"].as_u64().expect("attempt") >= 2,
        "point 3 was begun once before the kill at its begin: {p3}"
    );
    let csv = std::fs::read_to_string(run_dir.join("summary.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");

    let j = w.journal().expect("journal");
    assert!(j["finished_at"].is_string());
    assert!(
        j["steps"]["postgres"]["attempts"]
            .as_u64()
            .expect("attempts")
            >= 2
    );
    assert!(
        j["steps"]["dataset"]["attempts"]
            .as_u64()
            .expect("attempts")
            >= 2
    );
    // initdb was redone from scratch with the planned checksums.
    assert_eq!(r["postgres"]["data_checksums"], true);

    let status = std::process::Command::new(harness::daemon_binary())
        .args(["status", "--workdir"])
        .arg(w.path())
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}", describe(&status));
    assert!(
        text.contains("points: 4/4") && text.contains("finished"),
        "{text}"
    );
    assert!(
        text.contains("attempts"),
        "interrupted steps show their attempts: {text}"
    );

    // One status object for the run in the store, current: done, every point, the run's key.
    let run_id = j["run_id"].as_str().expect("run id");
    let statuses = harness::files_named(&w.path().join("store"), &format!("{run_id}.status.json"));
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    let live: Value = serde_json::from_str(&std::fs::read_to_string(&statuses[0]).expect("status"))
        .expect("json");
    assert_eq!(live["state"], "done", "{live}");
    assert_eq!(live["points_done"], 4, "{live}");
    assert_eq!(live["points_total"], 4, "{live}");
    assert!(live["last_tps"].as_f64().is_some_and(|t| t > 0.0), "{live}");
    assert!(live["failure"].is_null(), "{live}");
    assert!(
        live["stored_as"]
            .as_str()
            .is_some_and(|k| k.ends_with(run_id)),
        "{live}"
    );
}

/// Adaptive repeats in rounds with PostgreSQL restarted between them, killed right after
/// the third point was recorded (round 2) and resumed: every point is recorded once, and a
/// round past `min` ran exactly when the earlier rounds' interval was still wider than the
/// bound (checked here against the recorded tps with the same rule).
#[test]
fn adaptive_rounds_killed_and_resumed_record_each_point_once_by_the_rule() {
    let w = Workdir::new("adaptive");
    let logs = tempfile::tempdir().expect("logs");
    let plans = tempfile::tempdir().expect("plans");
    let text = std::fs::read_to_string(plan())
        .expect("resume.toml")
        .replace("clients = [1, 2, 4, 6]", "clients = [1, 2]")
        .replace(
            "duration = \"2s\"",
            "duration = \"1s\"\nrepeats = { min = 2, max = 4, ci_pct = 10.0 }",
        )
        + "\n[sweep]\nbetween_rounds = \"restart\"\n";
    let adaptive = plans.path().join("adaptive.toml");
    std::fs::write(&adaptive, text).expect("plan");
    let mut cmd = w.run_command(&adaptive);
    cmd.stdout(Stdio::from(
        std::fs::File::create(logs.path().join("run1.out")).expect("log"),
    ));
    let err = logs.path().join("run1.err");
    let child = harness::spawn_to_fault(&mut cmd, "point-recorded@3", &err);
    let j = w.journal().expect("journal");
    assert_eq!(j["points"].as_object().map(|p| p.len()), Some(3), "{j}");
    assert_eq!(j["state"]["sweep"]["prepared_round"], 2, "{j}");
    harness::kill_stopped(child);

    let out = w.run(&adaptive);
    assert!(out.status.success(), "{}", describe(&out));
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(w.run_dir().join("results.json")).expect("results.json"),
    )
    .expect("json");
    let points = r["points"].as_array().expect("points");
    let ids: std::collections::BTreeSet<&str> = points
        .iter()
        .map(|p| p["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.len(), points.len(), "each point once");
    let mut max_round = 0;
    for clients in [1u64, 2] {
        let mut tps: Vec<(u64, f64)> = points
            .iter()
            .filter(|p| p["clients"].as_u64() == Some(clients))
            .map(|p| {
                (
                    p["repeat"].as_u64().expect("repeat"),
                    p["summary"]["tps"].as_f64().expect("tps"),
                )
            })
            .collect();
        tps.sort_by_key(|t| t.0);
        let rounds: Vec<u64> = tps.iter().map(|t| t.0).collect();
        let k = rounds.len();
        assert!((2..=4).contains(&k), "{rounds:?}");
        assert_eq!(rounds, (1..=k as u64).collect::<Vec<_>>());
        let figures: Vec<f64> = tps.iter().map(|t| t.1).collect();
        for r in 3..=k {
            assert!(
                pgappliance::sweep::wants_another_round(10.0, &figures[..r - 1]),
                "{clients} clients: round {r} ran though rounds 1..{} were within ±10 %: {figures:?}",
                r - 1
            );
        }
        if k < 4 {
            assert!(
                !pgappliance::sweep::wants_another_round(10.0, &figures),
                "{clients} clients stopped at {k} rounds with an interval wider than ±10 %: {figures:?}"
            );
        }
        max_round = max_round.max(k);
    }
    let j = w.journal().expect("journal");
    assert_eq!(
        j["state"]["sweep"]["prepared_round"].as_u64(),
        Some(max_round as u64),
        "{j}"
    );
}
