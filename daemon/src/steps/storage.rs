//! Storage: the data volume for PGDATA. Discovers the empty NVMe namespaces (or takes the
//! plan's list), refuses any device that holds something unless the plan names it with
//! `wipe = true`, builds the PV/VG and the striped (or linear/single) LV, makes the
//! filesystem, and mounts it with a `.mount` unit enabled and started over D-Bus. Finds its
//! own earlier work: a volume already built is only mounted; a build that was interrupted
//! is cleared and redone on the devices it had claimed.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::Run;
use crate::journal::StepName;
use crate::plan::Devices;
use crate::runner::CommandSpec;
use crate::storage::{plan_storage, StoragePlan, LV, VG};

/// Devices the interrupted build had claimed (comma-separated).
const FACT_CLAIMED: &str = "storage_claimed";

pub async fn run(run: &mut Run) -> Result<()> {
    let t0 = Instant::now();
    let storage = run.plan.storage.clone();
    let mount_point = storage.mount_point.clone();
    let devices = crate::inventory::block_devices(&run.runner).await?;
    let mut planned = plan_storage(&storage, &devices);
    // A build this daemon started and did not finish left signatures of its own on the
    // devices it claimed: those may be cleared again.
    if let (Err(_), Some(claimed)) = (&planned, run.journal.fact(FACT_CLAIMED)) {
        let claimed: Vec<String> = claimed.split(',').map(str::to_string).collect();
        tracing::warn!(devices = %claimed.join(" "), "redoing the interrupted data-volume build");
        let vgremove = crate::storage::clear_interrupted_build_command();
        let _ = run
            .runner
            .run_accepting(
                &CommandSpec::new(&vgremove[0]).args(vgremove[1..].iter().cloned()),
                &[0, 5],
            )
            .await;
        let mut again = storage.clone();
        again.devices = Devices::List(claimed);
        again.wipe = true;
        let devices = crate::inventory::block_devices(&run.runner).await?;
        planned = plan_storage(&again, &devices);
    }
    let planned = planned?;
    match planned {
        StoragePlan::Directory => {
            crate::fsutil::create_dir_all(std::path::Path::new(&mount_point))?;
            tracing::info!(dir = %mount_point, "no data volume planned: PGDATA on the root filesystem");
            super::selinux::label_pgdata(run, &mount_point, "storage").await?;
        }
        StoragePlan::AlreadyBuilt { devices } => {
            tracing::info!(devices = %devices.join(" "), "data volume from an earlier boot");
            mount(run, &format!("/dev/{VG}/{LV}")).await?;
            super::selinux::label_pgdata(run, &mount_point, "storage").await?;
        }
        StoragePlan::Build {
            devices,
            commands,
            what,
            ..
        } => {
            run.journal
                .begin(StepName::Storage, Some(&devices.join(",")))?;
            run.journal.set_fact(FACT_CLAIMED, devices.join(","))?;
            crate::notify::status(&format!(
                "storage: building the data volume on {}",
                devices.join(" ")
            ));
            let raw = run.run_dir.join("raw");
            for (n, argv) in commands.iter().enumerate() {
                let cmd = CommandSpec::new(&argv[0])
                    .args(argv[1..].iter().cloned())
                    .output_files(
                        &raw.join(format!("storage-{n}.stdout")),
                        &raw.join(format!("storage-{n}.stderr")),
                    )
                    .timeout(Duration::from_secs(1800));
                run.runner.run(&cmd).await?;
            }
            mount(run, &what).await?;
            super::selinux::label_pgdata(run, &mount_point, "storage").await?;
            run.journal.remove_fact(FACT_CLAIMED)?;
        }
    }
    if !run.journal.is_done(StepName::Storage) {
        run.journal.begin(StepName::Storage, None)?;
    }
    run.journal
        .finish(StepName::Storage, t0.elapsed().as_secs_f64())
}

async fn mount(run: &Run, what: &str) -> Result<()> {
    let storage = &run.plan.storage;
    let unit = crate::storage::mount_unit_name(&storage.mount_point);
    let path = run.profile().unit_file(&unit);
    let text = crate::storage::mount_unit(what, &storage.mount_point, storage.filesystem);
    crate::fsutil::write_if_changed(&path, &text)?;
    crate::fsutil::create_dir_all(std::path::Path::new(&storage.mount_point))?;
    let systemd = run.systemd()?;
    systemd.enable_unit_files(&[unit.as_str()]).await?;
    systemd.start_unit(&unit).await?;
    Ok(())
}
