//! The parallel loader produces exactly pgbench's tables: same columns and types,
//! fillfactor, row counts, values (a content checksum per table), primary keys, vacuumed
//! and analysed; and the server is back in the plan's configuration afterwards.

use pgappliance_test_support as harness;

use std::path::Path;

use harness::{describe, fingerprint, query, Workdir};

fn run_plan(w: &Workdir, plan: &Path) {
    let out = w
        .run_command(plan)
        .arg("--keep-running")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn parallel_init_equals_pgbench_init_and_restores_the_plan() {
    let plans = harness::workspace().join("tests/plans");
    let theirs = Workdir::new("pgbench-init");
    run_plan(&theirs, &plans.join("pgbench-init.toml"));
    let a = fingerprint(&theirs);
    assert!(a
        .iter()
        .any(|(k, v)| k == "pgbench_accounts rows" && v == "300000"));
    assert!(
        a.iter()
            .any(|(k, v)| k == "pgbench_accounts frozen" && v == "true/true"),
        "pgbench -i leaves its tables frozen: {a:?}"
    );

    // One connection: the table created in the loading transaction, COPY FREEZE.
    let single = Workdir::new("parallel-init-1");
    let text = std::fs::read_to_string(plans.join("parallel-init.toml")).expect("plan");
    assert!(text.contains("parallel_degree = 2"));
    let plan1 = single.path().join("parallel-init-1.toml");
    std::fs::write(
        &plan1,
        text.replace("parallel_degree = 2", "parallel_degree = 1"),
    )
    .expect("write plan");
    run_plan(&single, &plan1);
    for (x, y) in a.iter().zip(&fingerprint(&single)) {
        assert_eq!(x, y, "pgbench -i vs parallel with 1 connection");
    }

    // Two connections: the table created first, then frozen by the VACUUM.
    let ours = Workdir::new("parallel-init");
    run_plan(&ours, &plans.join("parallel-init.toml"));
    let b = fingerprint(&ours);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "pgbench -i vs parallel with 2 connections");
    }

    // Back in the plan's configuration: durable settings, nothing pending.
    for (setting, want) in [
        ("fsync", "on"),
        ("full_page_writes", "on"),
        ("wal_level", "replica"),
        ("synchronous_commit", "on"),
        ("autovacuum", "on"),
    ] {
        assert_eq!(
            query(&ours, "postgres", &format!("show {setting}")),
            want,
            "{setting}"
        );
    }
    assert_eq!(
        query(
            &ours,
            "postgres",
            "select count(*) from pg_settings where pending_restart"
        ),
        "0"
    );
    let journal = ours.journal().expect("journal");
    assert!(
        journal["state"]["dataset"]["load_degree"].is_null(),
        "load settings recorded as restored"
    );
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ours.run_dir().join("results.json")).expect("results"),
    )
    .expect("json");
    assert_eq!(r["dataset"]["init_mode"], "parallel");
    let phases: Vec<&str> = r["dataset"]["init"]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["phase"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        phases,
        [
            "load settings",
            "create tables",
            "generate",
            "vacuum",
            "primary keys",
            "restore settings"
        ]
    );
}

#[test]
fn a_parallel_load_killed_midway_is_redone_with_the_plan_settings_restored() {
    let plan = harness::workspace().join("tests/plans/parallel-init.toml");
    let w = Workdir::new("parallel-kill");
    // Killed inside the COPY streams, after the third piece went out.
    let log = w.path().join("killed-load.log");
    let mut cmd = w.run_command(&plan);
    cmd.stdout(std::process::Stdio::null());
    let child = harness::spawn_to_fault(&mut cmd, "loader-chunk-sent@3", &log);
    assert!(
        w.journal()
            .is_some_and(|j| j["state"]["dataset"]["load_degree"].is_u64()),
        "the load is on record"
    );
    harness::kill_stopped(child);
    run_plan(&w, &plan);
    assert_eq!(query(&w, "postgres", "show fsync"), "on");
    assert_eq!(query(&w, "postgres", "show wal_level"), "replica");
    assert_eq!(
        query(&w, "pgbench", "select count(*) from pgbench_accounts"),
        "300000"
    );
    let j = w.journal().expect("journal");
    assert!(j["state"]["dataset"]["load_degree"].is_null());
    assert!(
        j["steps"]["dataset"]["attempts"]
            .as_u64()
            .expect("attempts")
            >= 2
    );
}
