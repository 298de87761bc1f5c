//! Schema-1 journals (the string `facts` map) are migrated to schema 2's typed step state
//! when opened, and anything the migration cannot read is refused naming it. The `v1-local-*`
//! fixtures were written by the schema-1 daemon (a finished quick run, and a run killed
//! with `kill -9` in the middle of its sweep); the `-composed` ones were composed from the
//! facts the schema-1 steps set on an appliance.

use std::path::{Path, PathBuf};

use pgappliance::journal::{self, JournalFile, StepName, JOURNAL_SCHEMA_VERSION};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/journal")
        .join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture")
}

fn facts(name: &str) -> serde_json::Map<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&text(name)).expect("json");
    v["facts"].as_object().cloned().expect("facts")
}

#[test]
fn a_finished_local_run_keeps_everything() {
    let name = "v1-local-finished.json";
    let f = facts(name);
    let j = journal::parse(&text(name), &fixture(name)).expect("migrated");
    assert_eq!(j.schema_version, JOURNAL_SCHEMA_VERSION);
    assert_eq!(
        j.state.postgres.port.map(|p| p.to_string()).as_deref(),
        f["port"].as_str()
    );
    assert_eq!(
        j.state.postgres.initdb_done_at.as_deref(),
        f["initdb_done"].as_str()
    );
    let initdb_s: f64 = f["initdb_s"]
        .as_str()
        .expect("initdb_s")
        .parse()
        .expect("number");
    assert_eq!(j.state.postgres.initdb_s, Some(initdb_s));
    assert_eq!(j.state.dataset.spec.as_deref(), f["dataset"].as_str());
    assert_eq!(
        j.state.upload.stored_in.as_deref(),
        f["uploaded_to"].as_str()
    );
    assert!(j.finished_at.is_some());
    assert_eq!(j.points.len(), j.points_total);
    assert!(j.steps[&StepName::Upload].finished_at.is_some());
}

#[test]
fn a_run_killed_in_its_sweep_resumes_from_the_migrated_journal() {
    let name = "v1-local-killed-in-sweep.json";
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    std::fs::copy(fixture(name), &path).expect("copy");
    let v1: serde_json::Value = serde_json::from_str(&text(name)).expect("json");
    let sha = v1["plan_sha256"].as_str().expect("sha");
    let j = JournalFile::open_or_create(&path, sha, "a-new-run".into()).expect("opened");
    // The same run, the point in flight still pending, the finished ones kept.
    assert_eq!(j.state.run_id, v1["run_id"].as_str().expect("run id"));
    let pending = j.state.pending.as_ref().expect("pending");
    assert_eq!(pending.step, StepName::Sweep);
    assert_eq!(pending.item.as_deref(), v1["pending"]["item"].as_str());
    assert_eq!(
        j.state.points.keys().collect::<Vec<_>>(),
        v1["points"]
            .as_object()
            .expect("points")
            .keys()
            .collect::<Vec<_>>()
    );
    assert!(j.state.state.postgres.port.is_some());
    assert!(j.state.state.dataset.spec.is_some());
    // Written back as schema 2 at once, and read the same way again.
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    assert_eq!(on_disk["schema_version"], JOURNAL_SCHEMA_VERSION);
    assert!(on_disk.get("facts").is_none(), "{on_disk}");
    let again = JournalFile::open_or_create(&path, sha, "another".into()).expect("reopened");
    assert_eq!(again.state, j.state);
    // A different plan is still refused after the migration.
    let err = JournalFile::open_or_create(&path, "bbbb", "x".into())
        .err()
        .expect("refused");
    assert!(err.is::<journal::DifferentPlan>(), "{err:#}");
}

#[test]
fn every_schema_1_fact_of_an_appliance_has_its_typed_place() {
    let name = "v1-appliance-composed.json";
    let j = journal::parse(&text(name), &fixture(name)).expect("migrated");
    let s = &j.state;
    assert_eq!(s.postgres.port, Some(5432));
    assert_eq!(s.postgres.initdb_s, Some(1.25));
    assert_eq!(
        s.storage.claimed.as_deref(),
        Some(&["/dev/nvme0n1".to_string(), "/dev/nvme1n1".to_string()][..])
    );
    assert_eq!(s.os_tuning.tuned_profile.as_deref(), Some("postgresql"));
    assert_eq!(s.os_tuning.tuned_verified, Some(false));
    assert_eq!(
        s.os_tuning.reboot_from_boot.as_deref(),
        Some("5f0c6b9e-1d9a-4c1e-9d3e-8f1f3e0b2a11")
    );
    assert!(s
        .os_tuning
        .kernel_cmdline
        .as_deref()
        .is_some_and(|c| c.contains("transparent_hugepage=never")));
    assert_eq!(s.dataset.load_degree, Some(2));
    assert_eq!(s.upload.stored_in.as_deref(), Some("s3://bench/runs"));
    assert_eq!(
        j.pending.as_ref().map(|p| p.step),
        Some(StepName::Storage),
        "the interrupted storage build is still pending"
    );
}

#[test]
fn what_cannot_be_migrated_is_refused_naming_it() {
    for (name, wanted) in [
        ("v1-unknown-fact-composed.json", "\"unheard_of\""),
        ("v1-bad-port-composed.json", "port = \"fivefour\""),
        ("v3-future-composed.json", "schema version 3, newer"),
    ] {
        let err = journal::parse(&text(name), &fixture(name))
            .err()
            .unwrap_or_else(|| panic!("{name} was accepted"));
        let msg = format!("{err:#}");
        assert!(msg.contains(wanted), "{name}: {msg}");
        assert!(msg.contains(name), "{name}: the journal is named: {msg}");
    }
    let p = Path::new("/x/state.json");
    let msg = format!(
        "{:#}",
        journal::parse("{\"run_id\": \"r\"}", p).expect_err("refused")
    );
    assert!(msg.contains("no schema_version"), "{msg}");
    let msg = format!(
        "{:#}",
        journal::parse("{\"schema_version\": 0}", p).expect_err("refused")
    );
    assert!(msg.contains("schema version 0"), "{msg}");
    let msg = format!("{:#}", journal::parse("not json", p).expect_err("refused"));
    assert!(msg.contains("not valid JSON"), "{msg}");
}
