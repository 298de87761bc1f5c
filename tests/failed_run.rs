//! A run that fails leaves no PostgreSQL server behind in local mode (unless
//! `--keep-running`), and a rerun with a corrected plan in the same work directory is
//! refused without orphaning a server the earlier run left: the refusal stops it and says
//! so.

use std::path::{Path, PathBuf};

use pgappliance_test_support as harness;

use harness::{describe, Workdir};

fn bad_plan() -> PathBuf {
    harness::workspace().join("tests/plans/bad-setting.toml")
}

/// The bad plan without its bad setting, written into the work directory.
fn corrected_plan(w: &Workdir) -> PathBuf {
    let text = std::fs::read_to_string(bad_plan()).expect("plan");
    let fixed: String = text
        .lines()
        .filter(|l| !l.starts_with("geqo_threshold"))
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
    // The plan's value the server refused, and what to do: resuming cannot help.
    assert!(
        err.contains("PostgreSQL refused the plan's tuning.settings.geqo_threshold = 1: ")
            && err.contains("outside the valid range")
            && err.contains("fix it in the plan, then `pgapplianced reset` and start again"),
        "{}",
        describe(&out)
    );
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

/// Runs the bad plan with `--keep-running` in `w`: the run fails (exit 1) and the server it
/// started stays up; returns the postmaster's pid.
fn fail_keeping_the_server(w: &Workdir) -> i32 {
    let out = w
        .run_command(&bad_plan())
        .arg("--keep-running")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    postmaster_pid(w).expect("--keep-running leaves the server up")
}

#[test]
fn keep_running_keeps_the_server_and_the_refused_rerun_stops_it() {
    let w = Workdir::new("failed-keep");
    let pid = fail_keeping_the_server(&w);
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

fn daemon(args: &[&str], w: &Workdir) -> std::process::Output {
    std::process::Command::new(harness::daemon_binary())
        .args(args)
        .arg("--workdir")
        .arg(w.path())
        .output()
        .expect("pgapplianced")
}

#[test]
fn status_says_why_a_run_stopped_and_reset_lets_the_corrected_plan_run() {
    let w = Workdir::new("failed-reset");
    let out = w.run(&bad_plan());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let run_id = w.journal().expect("journal")["run_id"]
        .as_str()
        .expect("run id")
        .to_string();

    // The store tells as much: the live status says failed, with the step and the error,
    // and the failure bundle is there (journal, failure, inventory, the raw stderr).
    let statuses = harness::files_named(&w.path().join("store"), &format!("{run_id}.status.json"));
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    let live: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&statuses[0]).expect("status"))
            .expect("json");
    assert_eq!(live["state"], "refused", "{live}");
    assert_eq!(live["failure"]["step"], "tuning", "{live}");
    assert!(
        live["failure"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("geqo_threshold")),
        "{live}"
    );
    let bundle = harness::files_named(&w.path().join("store/bad-setting/failed"), "failure.json");
    assert_eq!(bundle.len(), 1, "{bundle:?}");
    let bundle_dir = bundle[0].parent().expect("dir");
    assert!(bundle_dir.ends_with(&run_id), "{}", bundle_dir.display());
    let in_bundle = harness::files_under(bundle_dir);
    for f in [
        "journal.json",
        "inventory.json",
        "plan.toml",
        "manifest.json",
        "raw/initdb.stderr",
    ] {
        assert!(
            in_bundle.contains(&f.to_string()),
            "{f} not in {in_bundle:?}"
        );
    }

    // Why it stopped, that no daemon is at work, and what to do.
    let st = daemon(&["status"], &w);
    assert!(st.status.success(), "{}", describe(&st));
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains("stopped: refused in step tuning at "),
        "{text}"
    );
    assert!(text.contains("geqo_threshold"), "{text}");
    assert!(
        text.contains("change the plan (or the machine) as it says, then `pgapplianced reset`"),
        "{text}"
    );
    assert!(!text.contains("start it again to resume"), "{text}");
    assert!(text.contains("daemon: not running"), "{text}");
    assert!(
        text.contains("last report: refused in step tuning"),
        "{text}"
    );
    assert!(text.contains(" ago, at "), "{text}");
    assert!(text.contains("pgapplianced reset"), "{text}");
    assert!(
        text.contains("time left: 1 point(s) of unknown length"),
        "{text}"
    );

    // The corrected plan is refused here, and the refusal names the way out.
    let corrected = corrected_plan(&w);
    let out = w.run(&corrected);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pgapplianced reset"),
        "{}",
        describe(&out)
    );

    // reset: the evidence kept and uploaded under failed/, the directory clean.
    let out = daemon(&["reset", "--store", &w.file_store()], &w);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("run {run_id} put aside in ")),
        "{text}"
    );
    assert!(text.contains("evidence uploaded: "), "{text}");
    // What next: the refused plan changed first, then a run in this work directory.
    assert!(
        text.contains(
            "next: the run was refused: change the plan (or the machine) as its error said"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "next: start the next run with `pgapplianced run --local PLAN --workdir {}`",
            w.path().display()
        )),
        "{text}"
    );
    assert!(!w.path().join("state.json").exists());
    assert!(!w.path().join("cluster").exists());
    let archived = w.path().join("archive").join(&run_id);
    let kept = harness::files_under(&archived);
    for f in ["state.json", "run/plan.toml", "run/raw/initdb.stderr"] {
        assert!(kept.contains(&f.to_string()), "{f} not in {kept:?}");
    }
    let failed = w
        .path()
        .join("store/bad-setting/failed")
        .read_dir()
        .expect("<appliance>/failed/ in the store")
        .flatten()
        .next()
        .expect("a machine dir")
        .path()
        .join(&run_id);
    let stored = harness::files_under(&failed);
    assert!(stored.contains(&"manifest.json".to_string()), "{stored:?}");
    assert!(stored.contains(&"state.json".to_string()), "{stored:?}");
    // A second reset has nothing to do and says so.
    let out = daemon(&["reset"], &w);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to reset"),
        "{}",
        describe(&out)
    );

    // The corrected plan now runs to the end in the same work directory, as a new run.
    let out = w.run(&corrected);
    assert!(out.status.success(), "{}", describe(&out));
    let j = w.journal().expect("journal");
    assert_ne!(j["run_id"].as_str(), Some(run_id.as_str()));
    assert!(j["finished_at"].is_string());
    assert!(j["failure"].is_null(), "{j}");
}

#[test]
fn one_daemon_per_work_directory() {
    let w = Workdir::new("failed-lock");
    let plan = harness::workspace().join("tests/plans/resume.toml");
    // The first daemon holds the work directory, stopped at its first step (a fault point).
    let log = w.path().join("first.log");
    let mut cmd = w.run_command(&plan);
    cmd.stdout(std::process::Stdio::null());
    let mut first = harness::spawn_to_fault(&mut cmd, "begin:inventory", &log);
    let second = w.run(&plan);
    let reset = daemon(&["reset"], &w);
    let status = daemon(&["status"], &w);
    let _ = first.kill();
    let _ = first.wait();
    let pid = first.id();
    for (what, out) in [("run", &second), ("reset", &reset)] {
        assert_eq!(out.status.code(), Some(1), "{what}: {}", describe(out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("another pgapplianced (pid {pid}) is working in")),
            "{what}: {}",
            describe(out)
        );
    }
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("daemon: running (pid {pid})")),
        "{}",
        describe(&status)
    );
    // The refused reset took nothing away.
    assert!(w.path().join("state.json").exists());
}

#[test]
fn a_journal_naming_paths_outside_the_work_directory_or_unreadable_is_refused_and_reset_puts_it_aside(
) {
    let w = Workdir::new("journal-names");
    let pid = fail_keeping_the_server(&w);
    // `runs/../../<name>` is beside the work directory.
    let name = format!(
        "{}-victim",
        w.path().file_name().expect("name").to_string_lossy()
    );
    let victim = w.path().parent().expect("parent").join(&name);
    let mut j = w.journal().expect("journal");
    j["run_id"] = format!("../../{name}").into();
    let state = w.path().join("state.json");
    std::fs::write(&state, serde_json::to_vec(&j).expect("json")).expect("write");

    let out = w.run(&bad_plan());
    let _ = std::fs::remove_dir_all(&victim);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("run_id \"../../") && err.contains("pgapplianced reset"),
        "{}",
        describe(&out)
    );
    assert!(
        !victim.exists(),
        "nothing written outside the work directory"
    );
    // The refusal stopped the server the earlier run left.
    assert!(!alive(pid), "postmaster {pid} stopped: {}", describe(&out));

    // reset puts the journal aside inside the work directory, whatever it names.
    let out = daemon(&["reset"], &w);
    let _ = std::fs::remove_dir_all(&victim);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!victim.exists(), "nothing moved outside the work directory");
    assert!(!state.exists());
    let archived = w.path().join("archive/unreadable-journal");
    assert!(archived.join("state.json").exists(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("journal could not be read"), "{text}");

    // A journal that is not JSON at all: reset puts it aside too, and stops the server.
    let pid = fail_keeping_the_server(&w);
    std::fs::write(&state, b"{ garbage").expect("write");
    let out = daemon(&["reset"], &w);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!alive(pid), "postmaster {pid} stopped: {}", describe(&out));
    assert!(w
        .path()
        .join("archive/unreadable-journal.2/state.json")
        .exists());
    assert!(!state.exists());
}

#[test]
fn sigterm_to_a_local_run_is_logged_and_stops_the_server_it_started() {
    let w = Workdir::new("sigterm");
    let plan = harness::workspace().join("tests/plans/resume.toml");
    let child = w
        .run_command(&plan)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Until the server is up (the run is past initdb and the start).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let pid = loop {
        if let Some(pid) = postmaster_pid(&w).filter(|p| alive(*p)) {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(143), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SIGTERM") && err.contains("stopping the run"),
        "{}",
        describe(&out)
    );
    assert!(!alive(pid), "postmaster {pid} stopped: {}", describe(&out));
    assert!(servers_of(&w).is_empty(), "{:?}", servers_of(&w));
}

#[test]
fn evidence_a_stopped_reset_did_not_upload_is_uploaded_by_the_next_reset() {
    let w = Workdir::new("reset-retry");
    // What a reset killed during its evidence upload leaves: the archive, its mark, and no
    // journal (it was moved into the archive first).
    let run_id = "20261201T100000Z-0abc";
    let archived = w.path().join("archive").join(run_id);
    std::fs::create_dir_all(archived.join("run")).expect("mkdir");
    std::fs::copy(bad_plan(), archived.join("run/plan.toml")).expect("plan");
    std::fs::write(archived.join("state.json"), b"{}").expect("state");
    let pending = w.path().join("archive/.upload/pending");
    std::fs::create_dir_all(&pending).expect("mkdir");
    std::fs::write(pending.join(run_id), run_id).expect("mark");

    let out = daemon(&["reset", "--store", &w.file_store()], &w);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("earlier evidence in") && text.contains("uploaded: "),
        "{}",
        describe(&out)
    );
    assert!(!pending.join(run_id).exists(), "the mark is cleared");
    let machine = pgappliance::upload::machine_id();
    let stored = w
        .path()
        .join("store/bad-setting/failed")
        .join(&machine)
        .join(run_id);
    let files = harness::files_under(&stored);
    for f in ["manifest.json", "state.json", "run/plan.toml"] {
        assert!(files.contains(&f.to_string()), "{f} not in {files:?}");
    }
    // Nothing left to do: the next reset says so.
    let out = daemon(&["reset"], &w);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to reset"));
}
