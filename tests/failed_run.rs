//! A run that fails leaves no PostgreSQL server behind in local mode (unless
//! `--keep-running`), and a rerun with a corrected plan in the same work directory is
//! refused without orphaning a server the earlier run left: the refusal stops it and says
//! so.

use std::path::{Path, PathBuf};

#[path = "harness/mod.rs"]
mod harness;

use harness::{describe, Workdir};

fn bad_plan() -> PathBuf {
    harness::workspace().join("tests/plans/bad-setting.toml")
}

/// The bad plan without its bad setting, written into the work directory.
fn corrected_plan(w: &Workdir) -> PathBuf {
    let text = std::fs::read_to_string(bad_plan()).expect("plan");
    let fixed: String = text
        .lines()
        .filter(|l| !l.starts_with("work_mem"))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = w.path().join("corrected.toml");
    std::fs::write(&p, fixed).expect("write plan");
    p
}

/// The postmaster's pid from the cluster's pid file, if the file is there.
fn postmaster_pid(w: &Workdir) -> Option<i32> {
    std::fs::read_to_string(w.path().join("cluster/data/postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Postmasters whose data directory is this work directory's cluster.
fn servers_of(w: &Workdir) -> Vec<u32> {
    harness::processes_mentioning(&w.path().join("cluster/data").display().to_string())
}

#[test]
fn a_failed_run_stops_the_server_it_started() {
    let w = Workdir::new("failed-run");
    let out = w.run(&bad_plan());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("step tuning failed"), "{}", describe(&out));
    assert!(err.contains("work_mem"), "{}", describe(&out));
    // The server did run (initdb and start happened) and is gone now.
    assert!(w.path().join("cluster/data/PG_VERSION").exists());
    assert_eq!(
        postmaster_pid(&w),
        None,
        "pid file left: {}",
        describe(&out)
    );
    assert!(servers_of(&w).is_empty(), "{:?}", servers_of(&w));

    // The corrected plan is a different plan: refused in this work directory, nothing to
    // stop, and it says to use another work directory.
    let out = w.run(&corrected_plan(&w));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("different plan"), "{}", describe(&out));
    assert!(
        !err.contains("stopped the PostgreSQL server"),
        "{}",
        describe(&out)
    );
}

#[test]
fn keep_running_keeps_the_server_and_the_refused_rerun_stops_it() {
    let w = Workdir::new("failed-keep");
    let out = w
        .run_command(&bad_plan())
        .arg("--keep-running")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let pid = postmaster_pid(&w).expect("--keep-running leaves the server up");
    assert!(alive(pid), "postmaster {pid} runs");

    let out = w.run(&corrected_plan(&w));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("different plan"), "{}", describe(&out));
    assert!(
        err.contains(&format!("stopped the PostgreSQL server (pid {pid})")),
        "{}",
        describe(&out)
    );
    assert!(!alive(pid), "postmaster {pid} stopped");
    assert_eq!(postmaster_pid(&w), None);
    assert!(servers_of(&w).is_empty(), "{:?}", servers_of(&w));
    // The earlier run's evidence is kept.
    assert!(w.path().join("state.json").exists());
    assert!(w.path().join("runs").read_dir().expect("runs").count() == 1);
}
