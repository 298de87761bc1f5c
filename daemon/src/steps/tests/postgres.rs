//! The steps that talk to PostgreSQL: postgres, tuning, in_effect (a real scratch server).

use super::*;
use crate::host::stand_in::Did;
use crate::steps::in_effect::{InEffect, IN_EFFECT_FILE};
use crate::steps::inventory::Inventory;
use crate::steps::postgres::Postgres;
use crate::steps::tuning::{PlanValueRefused, Tuning};

/// A Debian 12 run on a stand-in host that leaves the machine alone (as local mode).
fn debian(plan: &str) -> Context {
    let machine = StandInHost::new().leaving_the_machine_alone();
    answer_inventory(&machine, "inventory/lsblk-debian12-vm.json");
    context(plan, machine)
}

#[tokio::test]
async fn postgres_initialises_and_starts_the_server_once_and_starts_it_again_when_stopped() {
    let mut cx = debian(DEBIAN_PLAN);
    let Check::Todo(why) = check(&Postgres, &mut cx).await else {
        panic!("fresh host")
    };
    assert!(why.contains("not recorded yet"), "{why}");
    assert!(host(&cx).did().is_empty(), "check changes nothing");

    apply(&Postgres, &mut cx).await.expect("apply");
    assert_eq!(
        host(&cx).did(),
        [
            Did::InstallServer,
            Did::Initdb,
            Did::BeforeStart,
            Did::ServerStart
        ]
    );
    let initdb = host(&cx).script().commands_of("initdb");
    assert_eq!(initdb.len(), 1);
    assert!(initdb[0].contains("--auth-local=peer"), "{}", initdb[0]);
    assert!(!initdb[0].contains("--data-checksums"), "{}", initdb[0]);
    let state = &cx.journal.state.state.postgres;
    assert!(state.initdb_done_at.is_some() && state.port.is_some());
    assert_eq!(check(&Postgres, &mut cx).await, Check::Done);

    // A stopped server is started again, without another initdb.
    cx.server().expect("server").stop().await.expect("stop");
    assert_eq!(
        check(&Postgres, &mut cx).await,
        Check::Todo("the server is not running".into())
    );
    apply(&Postgres, &mut cx).await.expect("apply again");
    let did = host(&cx).did();
    assert_eq!(
        did[4..],
        [
            Did::ServerStop,
            Did::InstallServer,
            Did::BeforeStart,
            Did::ServerStart
        ]
    );
    assert_eq!(host(&cx).script().commands_of("initdb").len(), 1);
    assert_eq!(check(&Postgres, &mut cx).await, Check::Done);
}

#[tokio::test]
async fn tuning_sets_the_planned_settings_restarts_and_is_then_in_place() {
    let mut cx = debian(DEBIAN_PLAN);
    bring_about(&Inventory, &mut cx).await;
    bring_about(&Postgres, &mut cx).await;
    let Check::Todo(why) = check(&Tuning, &mut cx).await else {
        panic!("nothing set yet")
    };
    assert!(why.contains("postgresql.auto.conf differs"), "{why}");

    apply(&Tuning, &mut cx).await.expect("apply");
    assert_eq!(host(&cx).did().last(), Some(&Did::ServerRestart));
    let applied = cx.settings().expect("given").clone();
    assert_eq!(
        applied.get("shared_buffers").map(String::as_str),
        Some("32MB")
    );
    assert_eq!(applied.get("work_mem").map(String::as_str), Some("8MB"));
    let auto_conf = std::fs::read_to_string(
        cx.server()
            .expect("server")
            .data_dir()
            .join("postgresql.auto.conf"),
    )
    .expect("auto.conf");
    assert!(auto_conf.contains("shared_buffers = '32MB'"), "{auto_conf}");
    assert!(cx.run_dir.join("applied_settings.json").is_file());

    let restarts = host(&cx).did().len();
    assert_eq!(check(&Tuning, &mut cx).await, Check::Done);
    assert_eq!(
        host(&cx).did().len(),
        restarts,
        "the check restarts nothing"
    );
}

#[tokio::test]
async fn a_plan_setting_the_server_refuses_is_a_refusal_naming_it() {
    // geqo_threshold takes 2 at least: the plan's checks leave that to the server.
    let plan = DEBIAN_PLAN.replace(
        "work_mem = \"8MB\"",
        "work_mem = \"8MB\"\ngeqo_threshold = 1",
    );
    let mut cx = debian(&plan);
    bring_about(&Inventory, &mut cx).await;
    bring_about(&Postgres, &mut cx).await;
    let e = apply(&Tuning, &mut cx).await.expect_err("refused");
    let refused = e
        .chain()
        .find_map(|c| c.downcast_ref::<PlanValueRefused>())
        .unwrap_or_else(|| panic!("not a refusal: {e:#}"));
    assert_eq!(refused.name, "geqo_threshold");
    assert!(
        refused.reason.contains("outside the valid range"),
        "{}",
        refused.reason
    );
    assert!(!host(&cx).did().contains(&Did::ServerRestart));
}

#[tokio::test]
async fn in_effect_reads_the_settings_back_once_per_boot() {
    let mut cx = debian(DEBIAN_PLAN);
    bring_about(&Inventory, &mut cx).await;
    bring_about(&Postgres, &mut cx).await;
    bring_about(&Tuning, &mut cx).await;
    assert_eq!(
        check(&InEffect, &mut cx).await,
        Check::Todo("not read back yet".into())
    );
    apply(&InEffect, &mut cx).await.expect("apply");
    let record = std::fs::read_to_string(cx.run_dir.join(IN_EFFECT_FILE)).expect("record");
    assert!(record.contains("shared_buffers"), "{record}");
    // What the machine shows is read from the stand-in machine, not from the one the tests
    // run on.
    let record: serde_json::Value = serde_json::from_str(&record).expect("json");
    assert_eq!(
        record["kernel_cmdline"], "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro",
        "{record}"
    );
    assert_eq!(record["transparent_hugepage"], "madvise", "{record}");
    assert_eq!(
        cx.journal.state.state.in_effect.observed_in_boot.as_deref(),
        Some("boot-1")
    );
    assert_eq!(check(&InEffect, &mut cx).await, Check::Done);

    host(&cx).boot("boot-2", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro");
    assert_eq!(
        check(&InEffect, &mut cx).await,
        Check::Todo("read back in an earlier boot".into())
    );
}

#[tokio::test]
async fn a_planned_setting_not_in_effect_fails_in_effect() {
    let mut cx = debian(DEBIAN_PLAN);
    bring_about(&Inventory, &mut cx).await;
    bring_about(&Postgres, &mut cx).await;
    bring_about(&Tuning, &mut cx).await;
    // The server runs with another value than the one the tuning applied.
    let mut settings = cx.settings().expect("settings").clone();
    settings.insert("work_mem".into(), "16MB".into());
    cx.set_settings(settings);
    let e = apply(&InEffect, &mut cx).await.expect_err("not in effect");
    assert!(format!("{e:#}").contains("work_mem"), "{e:#}");
    assert!(todo(&check(&InEffect, &mut cx).await));
}

#[tokio::test]
async fn a_missing_database_or_table_counts_as_no_rows_not_as_an_error() {
    use crate::postgres::cluster::SUPERUSER;
    use crate::postgres::sql::{rows_in, Session};
    let mut cx = debian(DEBIAN_PLAN);
    bring_about(&Postgres, &mut cx).await;
    let c = cx.server().expect("server").clone();
    let rows = |db: &'static str, table: &'static str| {
        let c = c.clone();
        async move { rows_in(&c.socket_dir(), c.port, SUPERUSER, db, table).await }
    };
    assert_eq!(rows("no_such_db", "t").await.expect("no database"), None);
    let admin = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres")
        .await
        .expect("connect");
    admin
        .execute("CREATE DATABASE half")
        .await
        .expect("createdb");
    // The database is there, the table not yet (a load cut off before it made its tables):
    // a query that names the table would fail when parsed.
    assert_eq!(
        rows("half", "pgbench_branches").await.expect("no table"),
        None
    );
    let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "half")
        .await
        .expect("connect");
    s.execute("CREATE TABLE pgbench_branches (bid int); INSERT INTO pgbench_branches SELECT generate_series(1, 3)")
        .await
        .expect("table");
    assert_eq!(
        rows("half", "pgbench_branches")
            .await
            .expect("count")
            .as_deref(),
        Some("3")
    );
}
