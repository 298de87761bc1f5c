//! The dataset, the sweep, the report and the upload: small smoke runs on a real scratch
//! server (the dataset at the Step level only).

use super::*;
use crate::steps::dataset::Dataset;
use crate::steps::in_effect::InEffect;
use crate::steps::inventory::Inventory;
use crate::steps::postgres::Postgres;
use crate::steps::report::Report;
use crate::steps::sweep::Sweep;
use crate::steps::tuning::Tuning;
use crate::steps::upload::Upload;

/// A Debian 12 run whose store is a directory of the stand-in host, prepared up to the
/// tuning read back.
async fn prepared() -> Context {
    let machine = StandInHost::new().leaving_the_machine_alone();
    answer_inventory(&machine, "inventory/lsblk-debian12-vm.json");
    let store = format!("file://{}", machine.dir().join("store").display());
    let plan = DEBIAN_PLAN.replace("file:///nonexistent", &store);
    let mut cx = context(&plan, machine);
    bring_about(&Inventory, &mut cx).await;
    bring_about(&Postgres, &mut cx).await;
    bring_about(&Tuning, &mut cx).await;
    bring_about(&InEffect, &mut cx).await;
    cx
}

async fn pgbench_branches(cx: &Context) -> Option<String> {
    let c = cx.server().expect("server");
    let s = crate::postgres::sql::Session::connect(
        &c.socket_dir(),
        c.port,
        crate::postgres::cluster::SUPERUSER,
        &cx.plan.dataset.database,
    )
    .await
    .ok()?;
    s.value("SELECT count(*) FROM pgbench_branches")
        .await
        .ok()?
}

#[tokio::test]
async fn dataset_initialises_the_planned_scale_once() {
    let mut cx = prepared().await;
    assert!(todo(&check(&Dataset, &mut cx).await));
    assert_eq!(pgbench_branches(&cx).await, None);
    apply(&Dataset, &mut cx).await.expect("apply");
    assert_eq!(pgbench_branches(&cx).await.as_deref(), Some("1"));
    assert!(
        !host(&cx).script().commands_of("pgbench").is_empty(),
        "{:?}",
        host(&cx).script().commands()
    );
    // A check in place runs no pgbench.
    host(&cx).script().clear_commands();
    assert_eq!(check(&Dataset, &mut cx).await, Check::Done);
    assert!(host(&cx).script().commands_of("pgbench").is_empty());
}

#[tokio::test]
async fn sweep_report_and_upload_measure_every_point_write_the_report_and_store_the_run() {
    let mut cx = prepared().await;
    bring_about(&Dataset, &mut cx).await;

    // Sweep: every point measured once.
    assert!(todo(&check(&Sweep, &mut cx).await));
    host(&cx).script().clear_commands();
    apply(&Sweep, &mut cx).await.expect("sweep");
    let points = crate::steps::sweep::points(&cx).expect("points");
    for p in points.iter().filter(|p| !p.warmup) {
        let rec = cx.journal.state.points.get(&p.id).expect("recorded");
        assert!(cx.run_dir.join(&rec.result).is_file(), "{}", rec.result);
    }
    let runs = host(&cx).script().commands_of("pgbench");
    assert!(runs.iter().any(|c| c.contains(" --client=2 ")), "{runs:?}");
    assert_eq!(check(&Sweep, &mut cx).await, Check::Done);

    // Report.
    assert!(todo(&check(&Report, &mut cx).await));
    apply(&Report, &mut cx).await.expect("report");
    let results = cx.results().expect("given");
    assert_eq!(results.points.len(), 2);
    for f in ["results.json", "summary.csv", "report.html"] {
        assert!(cx.run_dir.join(f).is_file(), "{f}");
    }
    assert_eq!(check(&Report, &mut cx).await, Check::Done);

    // Upload: never in place by itself; applied, the store has the run, manifest last.
    assert!(todo(&check(&Upload, &mut cx).await));
    apply(&Upload, &mut cx).await.expect("upload");
    let stored = cx.stored().expect("given").describe();
    assert!(!stored.is_empty());
    assert!(cx.journal.state.state.upload.stored_in.is_some());
    let store = host(&cx).dir().join("store");
    let files = crate::upload::list_files(&store).expect("the store's files");
    let manifests: Vec<_> = files
        .iter()
        .filter(|p| p.ends_with("manifest.json"))
        .collect();
    assert_eq!(manifests.len(), 1, "{files:?}");
    assert!(files.iter().any(|p| p.ends_with("results.json")));
    assert!(
        todo(&check(&Upload, &mut cx).await),
        "the store is asked at every start"
    );
}
