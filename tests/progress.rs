//! Progress of a real local run (tests/plans/progress.toml, real PostgreSQL): the progress
//! lines of the dataset's generation and of a point reach the log and `pgapplianced status`
//! (elapsed, of the point's total, and the time left), and `pgappliance wait` with its
//! output in a pipe prints heartbeat lines with the run's step, status age and time left.
//!
//! Nothing here depends on timing: the progress interval is shortened for the test
//! (`PGAPPLIANCE_PROGRESS_INTERVAL`, read by debug builds only), the pgbench of the dataset and
//! of the first point are stopped at their start (fault point `spawned:pgbench`,
//! `stop-child`) so the operation cannot end before its progress lines, and the daemon stops
//! itself right after each progress line (`progress:dataset`, `progress:point`) and after
//! the status object said `sweep` (`live-published:sweep`); `status` and `wait` are read
//! while it stands still.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use pgappliance_test_support as harness;

use harness::{describe, image_binary, workspace, Rest, Workdir};

/// A whole second before the run can start (the record's times have whole seconds), so
/// the record is older than anything the run writes without waiting for the clock.
fn before_the_run() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() - Duration::from_secs(2)).to_string()
}

/// The fault point the daemon stopped at last, from its log.
fn last_fault(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find_map(|l| l.split_once("fault point ").map(|(_, r)| r))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no fault point in the log:\n{text}"))
        .to_string()
}

/// The pgbench processes the daemon `pid` started (stopped at their start).
fn pgbench_children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid …"; comm may hold spaces, so split at the last ')'.
        let comm = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map(|(c, _)| c.to_string());
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if comm.as_deref() == Some("pgbench") && ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

fn status(w: &Workdir) -> String {
    let o = Command::new(harness::daemon_binary())
        .args(["status", "--workdir"])
        .arg(w.path())
        .output()
        .expect("pgapplianced status");
    assert!(o.status.success(), "{}", describe(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wait(record: &Path, store: &str) -> Output {
    Command::new(image_binary())
        .arg("wait")
        .arg(record)
        .args(["--store", store, "--interval", "1s"])
        .args(["--timeout", "3s", "--heartbeat", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("pgappliance wait")
}

#[test]
fn progress_reaches_the_log_status_and_waits_heartbeat() {
    let w = Workdir::new("progress");
    let store = w.file_store();
    // A launch record whose IPMI target the run stands in for (`wait` without --teardown
    // never asks the BMC), made before the run starts.
    let record = w.path().join("launch.json");
    let rec = serde_json::json!({
        "schema": 1,
        "launch_id": "progress-1",
        "plan": {"name": "progress", "file": "progress.toml", "sha256": "0"},
        "created_at": before_the_run(),
        "iso_url": null, "iso_object": null, "payload_object": null,
        "targets": [{
            "address": "127.0.0.1:1", "method": "ipmi", "at": before_the_run(),
            "started": {"kind": "ipmi", "host": "127.0.0.1", "port": 1, "power": "on", "not_kept": []},
            "error": null,
        }],
    });
    std::fs::write(&record, serde_json::to_vec_pretty(&rec).expect("json")).expect("record");

    let mut cmd = w.run_command(&workspace().join("tests/plans/progress.toml"));
    cmd.env(pgappliance::progress::INTERVAL_VARIABLE, "1s");
    harness::with_fault(
        &mut cmd,
        "spawned:pgbench:dataset-init.stdout=stop-child,progress:dataset@*=stop,\
         live-published:sweep=stop,\
         spawned:pgbench:attempt-1/stdout.txt=stop-child,progress:point@*=stop",
    );
    let log = w.path().join("daemon.log");
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start pgapplianced");
    let mut seen: Vec<String> = Vec::new();
    loop {
        match harness::wait_for_rest(&child, Duration::from_secs(600), &log) {
            Rest::Exited(_) => break,
            Rest::Stopped => {}
        }
        let fault = last_fault(&log);
        match fault.as_str() {
            // A pgbench just started, stopped with the daemon: only the daemon goes on, so
            // its progress ticks while the operation cannot end.
            "spawned:pgbench" => {}
            // Every tick stops the daemon (a tick may come before the pgbench of its
            // operation started, so any tick may be the first after it): the first of each
            // kind is read, and each lets the pgbench held at its start go on.
            "progress:dataset" | "progress:point" if seen.contains(&fault) => {
                for p in pgbench_children(child.id()) {
                    harness::resume(p);
                }
            }
            "progress:dataset" => {
                let s = status(&w);
                assert!(
                    s.contains("current: dataset")
                        && s.contains("last report: dataset: pgbench -i -s 10: ")
                        && s.contains(" so far ("),
                    "{s}"
                );
                // The time left counts the dataset's generation (10 × 8.9 s / 50) and
                // both points (2 s each and their overhead).
                assert!(
                    s.contains("before the sweep: about 2 s for the dataset's generation")
                        && s.contains("time left: about 14 s for 2 point(s)"),
                    "{s}"
                );
                for p in pgbench_children(child.id()) {
                    harness::resume(p);
                }
            }
            "live-published:sweep" => {
                let o = wait(&record, &store);
                let text = describe(&o);
                assert_eq!(o.status.code(), Some(1), "{text}");
                let beat = text
                    .lines()
                    .find(|l| l.starts_with("wait: ") && l.contains(" elapsed of 3s; "))
                    .unwrap_or_else(|| panic!("no heartbeat line:\n{text}"));
                assert!(
                    beat.contains("127.0.0.1:1: running at step sweep, point 0/2, last status ")
                        && beat.contains(" ago, about ")
                        && beat.contains(" left in the sweep"),
                    "{beat}"
                );
            }
            "progress:point" => {
                let s = status(&w);
                assert!(
                    s.contains("current: sweep")
                        && s.contains("last report: sweep 1/2: 1 clients (rw): ")
                        && s.contains(" of 2s ("),
                    "{s}"
                );
                assert!(
                    s.contains("time left: about 14 s for 2 point(s)")
                        && !s.contains("before the sweep"),
                    "{s}"
                );
                for p in pgbench_children(child.id()) {
                    harness::resume(p);
                }
            }
            other => panic!("stopped at an unexpected fault point {other}"),
        }
        seen.push(fault);
        harness::resume(child.id());
    }
    let st = child.wait().expect("wait");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(st.success(), "{st}:\n{text}");
    for want in ["progress:dataset", "live-published:sweep", "progress:point"] {
        assert!(
            seen.iter().any(|f| f == want),
            "{want} not reached: {seen:?}"
        );
    }
    // The same lines in the daemon's log.
    assert!(
        text.lines()
            .any(|l| l.contains("dataset: pgbench -i -s 10: ") && l.contains(" so far")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("sweep 1/2: 1 clients (rw): ") && l.contains(" of 2s")),
        "{text}"
    );
}
