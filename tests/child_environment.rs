//! Secrets stay in the daemon: a local run started with object-store credentials, a BMC
//! password and a random canary in its environment, and the environments of the postmaster
//! (with every server process) and of a pgbench caught during the sweep read from
//! `/proc/<pid>/environ`, also through SQL as the superuser would. None holds a credential.
//! The local socket takes `peer` through the appliance's ident map, never `trust`.

use pgappliance_test_support as harness;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{describe, example, processes_mentioning, Workdir};

const SECRETS: [&str; 4] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "PGAPPLIANCE_BMC_PASSWORD",
];

fn environ(pid: u32) -> Option<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).replace('\0', "\n"))
}

/// The parent's pid, from /proc/PID/stat (the field after the parenthesised name).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Fails naming the process and the variable when a secret (name or value) is in `env`.
fn assert_clean(what: &str, env: &str, canary: &str, values: &[String]) {
    for name in SECRETS.iter().chain([&canary]) {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{name}="))),
            "{what} has {name} in its environment:\n{env}"
        );
    }
    for v in values {
        assert!(!env.contains(v.as_str()), "{what} holds a secret value");
    }
}

fn psql(
    cluster: &Path,
    port: &str,
    user: &str,
    sql: &str,
    as_os_user: Option<&str>,
) -> std::process::Output {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL installed")
        .flatten()
        .map(|e| e.path().join("bin/psql"))
        .find(|p| p.exists())
        .expect("psql");
    let mut c = match as_os_user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    c.args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-h"])
        .arg(cluster.join("socket"))
        .args(["-p", port, "-U", user, "-d", "postgres", "-c", sql])
        .output()
        .expect("psql")
}

#[test]
fn no_credential_reaches_postgres_or_pgbench_and_the_socket_takes_peer() {
    let w = Workdir::new("env");
    let canary = format!("PGA_CANARY_{:x}", std::process::id() as u64 * 7919 + 17);
    let values: Vec<String> = SECRETS
        .iter()
        .map(|n| format!("{n}-value-{canary}"))
        .chain([format!("{canary}-value")])
        .collect();
    let mut cmd = w.run_command(&example("quick.toml"));
    cmd.arg("--keep-running");
    for (name, value) in SECRETS.iter().chain([&canary.as_str()]).zip(&values) {
        cmd.env(name, value);
    }
    // Every pgbench the run starts is stopped right after it started, together with the
    // daemon (a fault point), read, and let go on.
    harness::with_fault(&mut cmd, "spawned:pgbench@*=stop-child");
    let log = w.path().join("daemon.log");
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start pgapplianced");
    let needle = w.path().display().to_string();
    let mut pgbench_seen = 0;
    loop {
        match harness::wait_for_rest(&child, Duration::from_secs(600), &log) {
            harness::Rest::Exited(_) => break,
            harness::Rest::Stopped => {}
        }
        // The pgbench just started (the one before it was waited for and reaped).
        let stopped: Vec<u32> = processes_mentioning(&needle)
            .into_iter()
            .filter(|&pid| comm(pid) == "pgbench" && parent(pid) == Some(child.id()))
            .collect();
        assert_eq!(
            stopped.len(),
            1,
            "the daemon stopped at a pgbench start: one pgbench of it expected"
        );
        for pid in stopped {
            let env = environ(pid).expect("a stopped pgbench's environment");
            assert_clean(&format!("pgbench (pid {pid})"), &env, &canary, &values);
            pgbench_seen += 1;
            harness::resume(pid);
        }
        harness::resume(child.id());
    }
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(pgbench_seen > 0, "no pgbench was caught during the sweep");

    // The postmaster and every server process, read directly and as the superuser in SQL.
    let cluster = w.path().join("cluster");
    let pid_file = std::fs::read_to_string(cluster.join("data/postmaster.pid"))
        .expect("postmaster.pid (--keep-running)");
    let mut lines = pid_file.lines();
    let postmaster: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("pid");
    let port = pid_file
        .lines()
        .nth(3)
        .expect("port line")
        .trim()
        .to_string();
    let env = environ(postmaster).expect("postmaster environ");
    assert_clean("the postmaster", &env, &canary, &values);
    let mut server_processes = 0;
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok())
            });
        if ppid == Some(postmaster) {
            if let Some(env) = environ(pid) {
                assert_clean(&format!("server process {pid}"), &env, &canary, &values);
                server_processes += 1;
            }
        }
    }
    assert!(
        server_processes > 0,
        "the postmaster has children (checkpointer, …)"
    );
    let sql = format!("SELECT pg_read_binary_file('/proc/{postmaster}/environ')");
    let out = psql(&cluster, &port, "postgres", &sql, None);
    assert!(out.status.success(), "{}", describe(&out));
    let hex = String::from_utf8_lossy(&out.stdout);
    let bytes: Vec<u8> = (2..hex.trim().len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&hex.trim()[i..i + 2], 16).ok())
        .collect();
    let via_sql = String::from_utf8_lossy(&bytes).replace('\0', "\n");
    assert!(
        via_sql.contains("PATH="),
        "read the server's environment: {via_sql}"
    );
    assert_clean("the postmaster (read in SQL)", &via_sql, &canary, &values);

    // Local socket: peer through the ident map. No rule trusts anyone.
    let rules = psql(
        &cluster,
        &port,
        "postgres",
        "SELECT type || ' ' || auth_method || ' ' || coalesce(array_to_string(options, ','), '') FROM pg_hba_file_rules ORDER BY line_number",
        None,
    );
    assert!(rules.status.success(), "{}", describe(&rules));
    let rules = String::from_utf8_lossy(&rules.stdout).into_owned();
    assert!(!rules.contains("trust"), "{rules}");
    assert!(
        rules
            .lines()
            .filter(|l| l.starts_with("local"))
            .all(|l| l.starts_with("local peer map=pgappliance")),
        "{rules}"
    );
    // The mapped users get in as the superuser; no one gets in as another role.
    let made = psql(
        &cluster,
        &port,
        "postgres",
        "CREATE ROLE intruder LOGIN",
        None,
    );
    assert!(made.status.success(), "{}", describe(&made));
    let refused = psql(&cluster, &port, "intruder", "SELECT 1", None);
    assert!(
        !refused.status.success(),
        "a local OS user logged in as a role the map does not give it"
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("authentication failed"),
        "{}",
        describe(&refused)
    );
    if nix::unistd::Uid::effective().is_root() {
        let owner = psql(
            &cluster,
            &port,
            "postgres",
            "SELECT current_user",
            Some("postgres"),
        );
        assert!(
            owner.status.success(),
            "the cluster's OS user logs in: {}",
            describe(&owner)
        );
    }
}
