//! `pgapplianced parse …` and `status` as a user calls them.

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pgbench")
        .join(name)
}

fn daemon(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgapplianced"))
        .args(args)
        .output()
        .expect("run pgapplianced");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn parse_json(name: &str) -> serde_json::Value {
    let path = fixture(name);
    let (code, stdout, stderr) = daemon(&["parse", "pgbench", &path.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("JSON on stdout")
}

#[test]
fn parse_pgbench_prints_the_summary_fields() {
    let v = parse_json("v14-banner-distro-altra.txt");
    assert_eq!(v["tps"], 44132.846931);
    assert_eq!(v["latency_avg_ms"], 22.659);
    assert!(v["latency_stddev_ms"].is_null(), "absent stddev is null");
    assert_eq!(v["initial_connection_ms"], 436.926);
    assert_eq!(v["clients"], 1000);
    assert_eq!(v["threads"], 10);
    assert_eq!(v["transactions_processed"], 1_000_000);
    assert!(v["failed_transactions"].is_null());
    assert_eq!(v["client_version"], "14.5");
    assert!(v["server_version"].is_null());
    let v = parse_json("v17-distro-server-r.txt");
    assert_eq!(v["server_version"], "16.6");
    assert_eq!(v["failed_transactions"], 0);
    assert_eq!(v["latency_stddev_ms"], 0.843);
}

#[test]
fn parse_pgbench_refuses_incomplete_output() {
    for (name, words) in [
        ("not-pgbench.txt", "not a complete pgbench summary"),
        ("v14-aborted.txt", "Run was aborted"),
        ("v13-incomplete.txt", "9000 of 10000"),
    ] {
        let path = fixture(name);
        let (code, stdout, stderr) = daemon(&["parse", "pgbench", &path.display().to_string()]);
        assert_ne!(code, 0, "{name}");
        assert!(stdout.is_empty(), "{name}: nothing on stdout");
        assert!(stderr.contains(words), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: the file is named: {stderr}");
    }
}

#[test]
fn parse_init_prints_the_breakdown() {
    let path = fixture("init-v14-altra-scale10000.txt");
    let (code, stdout, stderr) = daemon(&["parse", "pgbench-init", &path.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["total_s"], 1568.0);
    assert_eq!(v["phases"][2]["phase"], "client-side generate");
}

#[test]
fn parse_missing_file_names_it() {
    let (code, _, stderr) = daemon(&["parse", "pgbench", "/nonexistent/out.txt"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("/nonexistent/out.txt"), "{stderr}");
}

#[test]
fn status_without_a_run_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = daemon(&["status", "--workdir", &dir.path().display().to_string()]);
    assert_ne!(code, 0);
    assert!(stderr.contains("no run journal"), "{stderr}");
}

#[test]
fn appliance_mode_without_a_system_bus_says_so() {
    // This host runs no systemd: the appliance mode must stop at once, naming the bus,
    // before it writes anything.
    if std::path::Path::new("/run/dbus/system_bus_socket").exists() {
        eprintln!("this host has a system bus: the appliance would really run; not tried");
        return;
    }
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let (code, _, stderr) = daemon(&[
        "run",
        "--plan",
        &plan.display().to_string(),
        "--workdir",
        &work.display().to_string(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("system D-Bus"), "{stderr}");
    assert!(!work.exists(), "nothing written before the bus answered");
}

#[test]
fn local_only_options_are_refused_in_appliance_mode() {
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let (code, _, stderr) = daemon(&[
        "run",
        "--plan",
        &plan.display().to_string(),
        "--keep-running",
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("belong to --local"), "{stderr}");
}

#[test]
fn parse_pgbench_refuses_impossible_figures_naming_the_line() {
    // The captured 15 summary with one line made impossible (composed here).
    let captured = std::fs::read_to_string(fixture("v15-captured-t.txt")).expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    for (from, to) in [
        ("tps = 1542.825956", "tps = 1e400"),
        ("tps = 1542.825956", "tps = NaN"),
        ("latency average = 2.593", "latency average = inf"),
        ("800/800", "900/800"),
        ("number of threads: 2", "number of threads: 0"),
    ] {
        let path = dir.path().join("out.txt");
        std::fs::write(&path, captured.replace(from, to)).expect("write");
        let (code, stdout, stderr) = daemon(&["parse", "pgbench", &path.display().to_string()]);
        assert_ne!(code, 0, "{to}: {stdout}");
        assert!(stdout.is_empty(), "{to}: nothing on stdout: {stdout}");
        assert!(stderr.contains(to), "{to}: the line is quoted: {stderr}");
        assert!(
            stderr.contains("line "),
            "{to}: the line is numbered: {stderr}"
        );
    }
}

#[test]
fn parse_refuses_an_endless_input_unread() {
    // /dev/zero never ends: refused as a device, not read until memory runs out.
    for kind in ["pgbench", "pgbench-init"] {
        let (code, _, stderr) = daemon(&["parse", kind, "/dev/zero"]);
        assert_eq!(code, 1, "{kind}: {stderr}");
        assert!(
            stderr.contains("/dev/zero is a character device, not a regular file"),
            "{kind}: {stderr}"
        );
    }
}

/// Runs pgapplianced, killing it if it has not ended within 10 s; its exit status
/// (`None` when it had to be killed) and stderr.
/// Runs pgapplianced to its end with no timer: a refusal ends at once, and a program that
/// blocked reading a FIFO would hang, which nextest's per-test bound for the FIFO tests
/// (.config/nextest.toml) ends and fails: no clock decides a pass.
fn daemon_to_its_end(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgapplianced"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run pgapplianced");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_fifo_as_input_or_plan_is_refused_at_once_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("input");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let fifo = fifo.display().to_string();
    let work = dir.path().join("work").display().to_string();
    for args in [
        vec!["parse", "pgbench", fifo.as_str()],
        vec!["parse", "pgbench-init", fifo.as_str()],
        vec!["parse", "sysbench", fifo.as_str()],
        vec!["run", "--local", fifo.as_str(), "--workdir", work.as_str()],
    ] {
        let (code, stderr) = daemon_to_its_end(&args);
        assert_eq!(code, Some(1), "{args:?} must end at once: {stderr}");
        assert!(
            stderr.contains(&format!("{fifo} is a FIFO, not a regular file")),
            "{args:?}: {stderr}"
        );
    }
}

fn sysbench_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysbench")
        .join(name)
}

#[test]
fn parse_sysbench_prints_the_run_with_its_series() {
    let path = sysbench_fixture("run-1.0.20-t2.txt");
    let (code, stdout, stderr) = daemon(&["parse", "sysbench", &path.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(v["version"], "1.0.20");
    assert_eq!(v["layout"], "1.0");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["tps"], 185.30);
    assert_eq!(v["qps"], 5216.91);
    assert_eq!(v["latency_p95_ms"], 30.81);
    assert_eq!(v["ignored_errors"], 6);
    assert_eq!(v["reconnects"], 0);
    let series = v["series"].as_array().expect("series");
    assert_eq!(series.len(), 10);
    assert_eq!(series[0]["tps"], 167.84);
    assert_eq!(series[0]["latency_p95_ms"], 30.81);
    let path = sysbench_fixture("run-1.1-t16-scenario-b-composed.txt");
    let (code, stdout, stderr) = daemon(&["parse", "sysbench", &path.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(v["layout"], "1.1");
    assert_eq!(v["tps"], 4661.83);
}

#[test]
fn parse_sysbench_refuses_aborted_output_naming_file_and_what_is_missing() {
    for (name, words) in [
        ("aborted-1.0.20-server-stopped.txt", "no final summary"),
        (
            "refused-1.0.20-no-server.txt",
            "FATAL: Connection to database failed",
        ),
        ("prepare-1.0.20.txt", "no final summary"),
    ] {
        let path = sysbench_fixture(name);
        let (code, stdout, stderr) = daemon(&["parse", "sysbench", &path.display().to_string()]);
        assert_eq!(code, 1, "{name}");
        assert!(stdout.is_empty(), "{name}: nothing on stdout");
        assert!(stderr.contains(words), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: the file is named: {stderr}");
    }
    let (code, _, stderr) = daemon(&["parse", "sysbench", "/nonexistent/sysbench.txt"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("/nonexistent/sysbench.txt"), "{stderr}");
}

/// Runs pgapplianced with stdout a pipe whose reader is already gone.
fn daemon_into_closed_pipe(args: &[&str]) -> (i32, String) {
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_pgapplianced"))
        .args(args)
        .stdout(std::process::Stdio::from(writer))
        .output()
        .expect("run pgapplianced");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_printing_commands_quietly() {
    let pgbench = fixture("v15-captured-t.txt").display().to_string();
    let sysbench = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysbench/run-1.0.20-t2.txt")
        .display()
        .to_string();
    for args in [
        vec!["parse", "pgbench", pgbench.as_str()],
        vec!["parse", "sysbench", sysbench.as_str()],
    ] {
        let (code, stderr) = daemon_into_closed_pipe(&args);
        assert_eq!(
            code,
            pgappliance::stdout::CLOSED_STDOUT_STATUS,
            "{args:?}: {stderr}"
        );
        assert!(stderr.is_empty(), "{args:?}: nothing on stderr: {stderr}");
    }
}

#[test]
fn a_url_with_credentials_on_the_command_line_is_refused_without_showing_them() {
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let (code, _, stderr) = daemon(&[
        "run",
        "--local",
        &plan.display().to_string(),
        "--workdir",
        &work.display().to_string(),
        "--store",
        "s3://bucket/r",
        "--endpoint",
        "http://user:PASS@minio:9000",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--endpoint: \"http://***@minio:9000\" has a user name or password"),
        "{stderr}"
    );
    assert!(!stderr.contains("PASS"), "{stderr}");
    assert!(!work.exists(), "nothing written");
}

#[test]
fn run_local_needs_a_work_directory_of_its_own() {
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let plan = plan.display().to_string();
    let (code, stdout, stderr) = daemon(&["run", "--local", &plan]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("run --local needs --workdir DIR")
            && stderr.contains("/var/lib/pgappliance is the appliance's own"),
        "{stderr}"
    );
    for appliance in ["/var/lib/pgappliance", "/var/lib/pgappliance/"] {
        let (code, _, stderr) = daemon(&["run", "--local", &plan, "--workdir", appliance]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("that is the appliance's own work directory"),
            "{stderr}"
        );
    }
}

#[test]
fn bench_init_refuses_a_scale_of_0_before_it_starts_anything() {
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    for extra in [
        &["--scale", "0"][..],
        &["--scale", "1", "--workers", "0"][..],
    ] {
        let mut args = vec![
            "bench",
            "init",
            "--plan",
            plan.to_str().expect("utf-8"),
            "--workdir",
            work.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        let (code, _, stderr) = daemon(&args);
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{} {}",
                extra[extra.len() - 2],
                extra[extra.len() - 1]
            )),
            "{stderr}"
        );
        assert!(!work.join("cluster").exists(), "no cluster made: {stderr}");
    }
}

#[test]
fn run_local_refuses_an_upload_timeout_it_cannot_keep_before_it_starts() {
    // 0 gave up on a store that works before its first answer ("not stored ... within
    // 0s", exit 4); a value past a year is a typo.
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    for (value, why) in [
        ("0", "above zero"),
        ("0s", "above zero"),
        ("5 parsecs", "unknown time unit \"parsecs\""),
        ("1000000000y", "longer than a year"),
    ] {
        let (code, _, stderr) = daemon(&[
            "run",
            "--local",
            plan.to_str().expect("utf-8"),
            "--workdir",
            work.to_str().expect("utf-8"),
            "--store",
            &format!("file://{}", dir.path().join("store").display()),
            "--upload-timeout",
            value,
        ]);
        assert_eq!(code, 2, "{value}: a usage error: {stderr}");
        assert!(
            stderr.contains(&format!("'{value}' for '--upload-timeout")) && stderr.contains(why),
            "{value}: {stderr}"
        );
        assert!(!work.exists(), "{value}: nothing started");
    }
}

#[test]
fn upload_without_a_run_names_the_missing_journal_and_makes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let (code, _, stderr) = daemon(&["upload", "--workdir", work.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no run journal at {}",
            work.join("state.json").display()
        )) && !stderr.contains("os error"),
        "{stderr}"
    );
    assert!(!work.exists(), "nothing made");
}

#[test]
fn a_mistyped_store_flag_is_a_usage_error_before_the_run_starts() {
    // It was found at the upload, after the whole sweep.
    let plan = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    for (flag, value, why) in [
        ("--store", "bogus://x", "is not a store URL"),
        ("--store", "file://relative/dir", "needs an absolute path"),
        (
            "--endpoint",
            "ftp://10.0.0.5",
            "must be an http:// or https:// URL",
        ),
    ] {
        for command in [&["run", "--local"][..], &["upload"][..], &["reset"][..]] {
            let mut args = command.to_vec();
            if command[0] == "run" {
                args.push(plan.to_str().expect("utf-8"));
            }
            args.extend(["--workdir", work.to_str().expect("utf-8"), flag, value]);
            let (code, _, stderr) = daemon(&args);
            assert_eq!(code, 2, "{args:?}: a usage error: {stderr}");
            assert!(
                stderr.contains(&format!("'{value}' for '{flag}")) && stderr.contains(why),
                "{args:?}: {stderr}"
            );
            assert!(!work.exists(), "{args:?}: nothing started");
        }
    }
}

/// Runs pgapplianced with stderr a pipe whose reader is already gone: its exit status and
/// stdout.
fn daemon_with_closed_stderr(args: &[&str]) -> (i32, String) {
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_pgapplianced"))
        .args(args)
        .stderr(std::process::Stdio::from(writer))
        .output()
        .expect("run pgapplianced");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_closed_stderr_loses_the_log_lines_not_the_command() {
    // `pgapplianced run --local … 2>&1 | head` killed the run at its first log line once
    // head had gone: tracing reports a failed write with eprintln!, which panics (exit 101).
    // A reset of an unreadable journal logs a warning, then does its work and says so.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("state.json"), "{garbage").expect("journal");
    let work = dir.path().display().to_string();
    let (code, stdout) = daemon_with_closed_stderr(&["reset", "--workdir", &work]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("the next run starts clean"), "{stdout}");
    // An error said on a closed stderr: still the error's exit status, not a panic's.
    let (code, _) = daemon_with_closed_stderr(&["status", "--workdir", "/nonexistent/work"]);
    assert_eq!(code, 1);
}

#[test]
fn upload_is_refused_while_a_daemon_holds_the_work_directory() {
    // It uploaded beside the daemon's own upload, both writing the upload journal.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("state.json"), "{}").expect("journal");
    let lock = std::fs::File::create(dir.path().join("lock")).expect("lock file");
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .expect("the daemon's lock");
    let (code, _, stderr) = daemon(&["upload", "--workdir", &dir.path().display().to_string()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "another pgapplianced (pid {}) is working in {}",
            std::process::id(),
            dir.path().display()
        )),
        "{stderr}"
    );
}
