//! Storage: the data volume for PGDATA. Discovers the empty NVMe namespaces (or takes the
//! plan's list), refuses any device that holds something unless the plan names it with
//! `wipe = true`, builds the PV/VG and the striped (or linear/single) LV, makes the
//! filesystem, and has the host mount it (now and at every boot). Finds its own earlier
//! work: a volume already built and mounted is in place, one built but not mounted is only
//! mounted; a build that was interrupted is cleared and redone on the devices it had
//! claimed.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::plan::Devices;
use crate::runner::CommandSpec;
use crate::storage::{plan_storage, StoragePlan, LV, VG};

pub(crate) struct Storage;

fn mounted(cx: &Context, mount_point: &str) -> bool {
    std::fs::read_to_string(cx.host.machine_path("/proc/self/mountinfo"))
        .ok()
        .and_then(|t| crate::in_effect::parse::parse_mountinfo(&t, mount_point))
        .is_some()
}

impl Step for Storage {
    const NAME: StepName = StepName::Storage;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let storage = &cx.plan.storage;
        let claimed = cx.journal.state.state.storage.claimed.clone();
        let devices = crate::inventory::block_devices(&cx.runner).await?;
        let planned = match (plan_storage(storage, &devices), &claimed) {
            // The devices hold the signatures of a build this daemon did not finish.
            (Err(_), Some(claimed)) => {
                return Ok(Check::Todo(format!(
                    "the build on {} was interrupted",
                    claimed.join(" ")
                )))
            }
            // A device the plan may not touch is refused here, before anything is done.
            (planned, _) => planned?,
        };
        Ok(match planned {
            StoragePlan::Directory if Path::new(&storage.mount_point).is_dir() => Check::Done,
            StoragePlan::Directory => {
                Check::Todo(format!("{} does not exist", storage.mount_point))
            }
            // Built and mounted, but a claim is left (a stop after the mount): apply
            // finds the volume built and clears it.
            StoragePlan::AlreadyBuilt { devices } if claimed.is_some() => Check::Todo(format!(
                "the build on {} ended but its claim was not cleared",
                devices.join(" ")
            )),
            StoragePlan::AlreadyBuilt { .. } if mounted(cx, &storage.mount_point) => Check::Done,
            StoragePlan::AlreadyBuilt { devices } => Check::Todo(format!(
                "the volume on {} is not mounted",
                devices.join(" ")
            )),
            StoragePlan::Build { devices, .. } => {
                Check::Todo(format!("no data volume yet on {}", devices.join(" ")))
            }
        })
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let storage = cx.plan.storage.clone();
        let mount_point = storage.mount_point.clone();
        let raw = cx.raw();
        let devices = crate::inventory::block_devices(&cx.runner).await?;
        let planned = match (
            plan_storage(&storage, &devices),
            cx.journal.state.state.storage.claimed.clone(),
        ) {
            // A build this daemon started and did not finish left signatures of its own on
            // the devices it claimed: those may be cleared again (only then: a volume that
            // is built is never removed).
            (Err(_), Some(claimed)) => {
                tracing::warn!(devices = %claimed.join(" "), "redoing the interrupted data-volume build");
                let vgremove = crate::storage::clear_interrupted_build_command();
                let _ = cx
                    .runner
                    .run_accepting(
                        &CommandSpec::new(&vgremove[0]).args(vgremove[1..].iter().cloned()),
                        &[0, 5],
                    )
                    .await;
                let mut again = storage.clone();
                again.devices = Devices::List(claimed);
                again.wipe = true;
                let devices = crate::inventory::block_devices(&cx.runner).await?;
                plan_storage(&again, &devices)?
            }
            (planned, _) => planned?,
        };
        match planned {
            StoragePlan::Directory => {
                crate::fsutil::create_dir_all(&cx.host.machine_path(&mount_point))?;
                tracing::info!(dir = %mount_point, "no data volume planned: PGDATA on the root filesystem");
            }
            StoragePlan::AlreadyBuilt { devices } => {
                tracing::info!(devices = %devices.join(" "), "data volume from an earlier boot");
                cx.host
                    .mount_volume(&format!("/dev/{VG}/{LV}"), &storage)
                    .await?;
                cx.journal.update(|s| s.storage.claimed = None)?;
            }
            StoragePlan::Build {
                devices,
                commands,
                what,
                ..
            } => {
                cx.journal
                    .begin(StepName::Storage, Some(&devices.join(",")))?;
                cx.journal
                    .update(|s| s.storage.claimed = Some(devices.clone()))?;
                crate::notify::status(&format!(
                    "storage: building the data volume on {}",
                    devices.join(" ")
                ));
                for (n, argv) in commands.iter().enumerate() {
                    let cmd = CommandSpec::new(&argv[0])
                        .args(argv[1..].iter().cloned())
                        .output_files(
                            &raw.join(format!("storage-{n}.stdout")),
                            &raw.join(format!("storage-{n}.stderr")),
                        )
                        .timeout(Duration::from_secs(1800));
                    cx.runner.run(&cmd).await?;
                }
                cx.host.mount_volume(&what, &storage).await?;
                cx.journal.update(|s| s.storage.claimed = None)?;
            }
        }
        cx.host.label_data_dir(&mount_point, "storage", &raw).await
    }
}
