//! The booted appliance's host: every command a transient systemd unit, PostgreSQL the
//! platform's service (PGDG's layout, PGDATA on the data volume through a drop-in), the
//! data volume a `.mount` unit, tuned and the reboot over D-Bus, SELinux labels where the
//! platform has SELinux. The names, paths and command lines are [`crate::platform`]'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::inventory::cloud::CloudInstance;
use crate::plan::{Devices, FinishAction, Plan, Storage};
use crate::platform::{Profile, DONE_MARKER};
use crate::postgres::cluster::{ControlFuture, ServerControl};
use crate::postgres::{Cluster, PgBin};
use crate::runner::Runner;
use crate::systemd::tuned::TunedState;
use crate::systemd::{Systemd, SystemdExecutor};

/// The OS user of the platform's PostgreSQL service.
pub(crate) const SERVICE_USER: &str = "postgres";

/// The marker of a finished run in the work directory (the unit's
/// `ConditionPathExists=!`).
pub(crate) fn done_marker(workdir: &Path) -> PathBuf {
    workdir.join(DONE_MARKER)
}

pub(crate) struct ApplianceHost {
    systemd: Systemd,
    runner: Runner,
    profile: Profile,
}

impl ApplianceHost {
    /// With the system's systemd ([`Systemd::connect`], made before anything is written):
    /// the transient-unit executor (capturing output under `workdir/capture`), after
    /// stopping the command units an earlier daemon left running.
    pub(crate) async fn new(systemd: Systemd, workdir: &Path, plan: &Plan) -> Result<Self> {
        let executor = SystemdExecutor::new(systemd.clone(), &workdir.join("capture"))?;
        let left = executor.stop_leftovers().await?;
        if left > 0 {
            tracing::warn!(
                units = left,
                "stopped commands an earlier daemon left running"
            );
        }
        Ok(ApplianceHost {
            systemd,
            runner: Runner::new(executor),
            profile: Profile::of(plan.appliance.platform),
        })
    }

    pub(crate) fn runner(&self) -> Runner {
        self.runner.clone()
    }

    pub(crate) fn systemd(&self) -> &Systemd {
        &self.systemd
    }

    pub(crate) async fn cloud_instance(&self) -> Option<CloudInstance> {
        // A few seconds at most where nothing answers.
        let endpoint = std::env::var("PGAPPLIANCE_IMDS_ENDPOINT")
            .unwrap_or_else(|_| crate::inventory::cloud::IMDS_ENDPOINT.to_string());
        crate::inventory::cloud::ec2_instance(&endpoint).await
    }

    pub(crate) async fn server(&self, plan: &Plan) -> Result<Cluster> {
        let v = self.profile.pg_version(&plan.postgres);
        let bin = PgBin::find(&self.runner, Some(v), Some(&self.profile.pg_bin_dir(v))).await?;
        let pgdata = crate::platform::pgdata(&plan.storage.mount_point);
        Ok(Cluster::controlled(
            bin,
            Path::new(&pgdata),
            &self.profile.socket_dir(),
            5432,
            SERVICE_USER,
            self.runner.clone(),
            Arc::new(Service {
                systemd: self.systemd.clone(),
                unit: self.profile.pg_unit(v),
            }),
        ))
    }

    /// The service's unit (where the platform's packages do not ship one in PGDG's layout)
    /// and the drop-in that puts PGDATA on the data volume; systemd reloaded when they
    /// changed, since PGDG's setup script reads PGDATA from the unit.
    pub(crate) async fn install_server(&self, plan: &Plan) -> Result<()> {
        let v = self.profile.pg_version(&plan.postgres);
        let unit = self.profile.pg_unit(v);
        let mut changed = false;
        if let Some(text) = self.profile.pg_unit_file(v) {
            changed |= crate::fsutil::write_if_changed(&self.profile.unit_file(&unit), &text)?;
        }
        let mount_point = plan.storage.mount_point.as_str();
        let pgdata = crate::platform::pgdata(mount_point);
        let volume = plan.storage.devices != Devices::None;
        let drop_in = crate::platform::service_drop_in(&pgdata, volume.then_some(mount_point));
        changed |= crate::fsutil::write_if_changed(&self.profile.pg_drop_in_file(v), &drop_in)?;
        if changed {
            self.systemd.reload().await?;
        }
        Ok(())
    }

    pub(crate) async fn initdb(&self, cluster: &Cluster, plan: &Plan, raw: &Path) -> Result<()> {
        let dir = cluster.data_dir();
        crate::fsutil::create_dir_all(&dir)?;
        let id = crate::sys::lookup_user(SERVICE_USER)?;
        nix::unistd::chown(
            &dir,
            Some(nix::unistd::Uid::from_raw(id.uid)),
            Some(nix::unistd::Gid::from_raw(id.gid)),
        )
        .with_context(|| format!("giving {} to {SERVICE_USER}", dir.display()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("restricting {}", dir.display()))?;
        }
        let v = self.profile.pg_version(&plan.postgres);
        self.runner
            .run(
                &self
                    .profile
                    .initdb(v, &dir.display().to_string(), plan.postgres.data_checksums)
                    .output_files(&raw.join("initdb.stdout"), &raw.join("initdb.stderr"))
                    .timeout(Duration::from_secs(1800)),
            )
            .await?;
        cluster.configure_local_auth()
    }

    /// After initdb and on every resume: the labels PostgreSQL needs and the service
    /// enabled for the next boots.
    pub(crate) async fn before_start(&self, plan: &Plan, raw: &Path) -> Result<()> {
        self.label_data_dir(&plan.storage.mount_point, "postgres", raw)
            .await?;
        let unit = self
            .profile
            .pg_unit(self.profile.pg_version(&plan.postgres));
        self.systemd.enable_unit_files(&[unit.as_str()]).await
    }

    pub(crate) async fn mount_volume(&self, what: &str, storage: &Storage) -> Result<()> {
        let unit = crate::storage::mount_unit_name(&storage.mount_point);
        let path = self.profile.unit_file(&unit);
        let text = crate::storage::mount_unit(what, &storage.mount_point, storage.filesystem);
        crate::fsutil::write_if_changed(&path, &text)?;
        crate::fsutil::create_dir_all(Path::new(&storage.mount_point))?;
        self.systemd.enable_unit_files(&[unit.as_str()]).await?;
        self.systemd.start_unit(&unit).await
    }

    pub(crate) async fn label_data_dir(&self, path: &str, stage: &str, raw: &Path) -> Result<()> {
        super::selinux::label_pgdata(&self.runner, &self.profile, path, stage, raw).await
    }

    pub(crate) async fn activate_tuned(&self, profile: &str) -> Result<TunedState> {
        if profile == crate::assets::TUNED_POSTGRESQL_NAME {
            // The profile shipped with the appliance; other names must be tuned's own.
            let path = self.profile.tuned_profile_file(profile);
            crate::fsutil::write_if_changed(&path, crate::assets::TUNED_POSTGRESQL)?;
        }
        crate::systemd::tuned::activate(&self.systemd, profile).await
    }

    pub(crate) async fn reboot(&self) -> Result<std::convert::Infallible> {
        nix::unistd::sync();
        self.systemd.reboot().await?;
        // The shutdown stops this service; never go on measuring a machine that is about
        // to reboot.
        let asked = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            tracing::warn!(
                waited_s = asked.elapsed().as_secs(),
                "still waiting for the reboot"
            );
        }
    }

    pub(crate) async fn finish(&self, workdir: &Path, run_id: &str, plan: &Plan) -> Result<()> {
        let done = done_marker(workdir);
        crate::fsutil::atomic_write(&done, run_id.as_bytes())
            .with_context(|| format!("writing {}", done.display()))?;
        if plan.finish.action == FinishAction::PowerOff {
            tracing::info!("results are safe; powering off as the plan says");
            self.systemd
                .manager()
                .start_unit("poweroff.target", "replace-irreversibly")
                .await
                .context("asking systemd to power off")?;
        }
        Ok(())
    }
}

/// Stops the plan's PostgreSQL service (for a reset: the next run initialises its data
/// directory again). Says what it stopped; nothing when the service was not running.
pub(crate) async fn stop_service(plan: &Plan) -> Result<Option<String>> {
    let profile = Profile::of(plan.appliance.platform);
    let unit = profile.pg_unit(profile.pg_version(&plan.postgres));
    let systemd = Systemd::connect()
        .await
        .context("reaching systemd to stop the run's PostgreSQL service")?;
    if systemd.active_state(&unit).await? != "active" {
        return Ok(None);
    }
    systemd.stop_unit(&unit).await?;
    Ok(Some(format!("stopped {unit}")))
}

/// The platform's PostgreSQL service, started and stopped as systemd jobs.
struct Service {
    systemd: Systemd,
    unit: String,
}

impl ServerControl for Service {
    fn is_running(&self) -> ControlFuture<'_, bool> {
        Box::pin(async move { Ok(self.systemd.active_state(&self.unit).await? == "active") })
    }
    fn start(&self) -> ControlFuture<'_, ()> {
        Box::pin(self.systemd.start_unit(&self.unit))
    }
    fn stop(&self) -> ControlFuture<'_, ()> {
        Box::pin(self.systemd.stop_unit(&self.unit))
    }
    fn restart(&self) -> ControlFuture<'_, ()> {
        Box::pin(self.systemd.restart_unit(&self.unit))
    }
}
