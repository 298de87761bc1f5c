//! The host a run works on, chosen once when the run starts: what differs between a scratch
//! cluster under a work directory ([`local`]) and a booted appliance ([`appliance`]). The
//! steps ask the host to do these things and never ask which host it is:
//!
//! | | local | appliance |
//! |---|---|---|
//! | executor | plain child processes | transient systemd units over D-Bus |
//! | steps that change the machine (packages, storage, OS tuning) | not run | run |
//! | PostgreSQL | binaries found by version or `--pg-bin`, `pg_ctl` on a loopback port | the platform's packages and service, PGDATA on the data volume |
//! | volume, labels, tuned, reboot | none | mount units, SELinux labels, tuned over D-Bus, systemd reboot |
//! | cloud metadata | not asked | EC2's IMDSv2 |
//! | end of run | stop the server (unless kept running) | done marker, power-off if planned |
//!
//! The unit tests have a third host, `stand_in` (compiled for tests only): commands
//! answered by a script and recorded, the machine's changes recorded, its files under a
//! temporary root ([`Host::machine_path`]), PostgreSQL a real scratch cluster.

pub(crate) mod appliance;
pub mod local;
mod selinux;
#[cfg(test)]
pub(crate) mod stand_in;

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::inventory::cloud::CloudInstance;
use crate::journal::StepName;
use crate::plan::{Plan, Storage};
use crate::postgres::Cluster;
use crate::runner::Runner;
use crate::systemd::tuned::TunedState;

pub(crate) use appliance::ApplianceHost;
pub(crate) use local::LocalHost;

/// Where the steps run.
pub(crate) enum Host {
    Local(LocalHost),
    Appliance(ApplianceHost),
    /// The unit tests' host (`stand_in`): a temporary directory, scripted commands,
    /// recorded changes to the machine.
    #[cfg(test)]
    StandIn(stand_in::StandInHost),
}

impl Host {
    /// The runner every command of the run goes through.
    pub(crate) fn runner(&self) -> Runner {
        match self {
            Host::Local(h) => h.runner(),
            Host::Appliance(h) => h.runner(),
            #[cfg(test)]
            Host::StandIn(h) => h.runner(),
        }
    }

    /// Whether a step is run on this host at all (local mode leaves out the steps that
    /// change the machine).
    pub(crate) fn runs(&self, step: StepName) -> bool {
        match self {
            Host::Local(_) => !step.changes_machine(),
            Host::Appliance(_) => true,
            #[cfg(test)]
            Host::StandIn(h) => h.changes_machine() || !step.changes_machine(),
        }
    }

    /// Whether the host tunes the operating system (tuned, kernel arguments): then what
    /// the tuning-in-effect step reads back includes them, and it reads again for a while,
    /// since tuned may still be applying its profile at boot.
    pub(crate) fn tunes_os(&self) -> bool {
        self.runs(StepName::OsTuning)
    }

    /// The cloud instance this host is, when the host asks the metadata service.
    pub(crate) async fn cloud_instance(&self) -> Option<CloudInstance> {
        match self {
            Host::Local(_) => None,
            Host::Appliance(h) => h.cloud_instance().await,
            #[cfg(test)]
            Host::StandIn(_) => None,
        }
    }

    /// Settings the host's way of running the server decides (never taken from the plan).
    pub(crate) fn server_owned_settings(&self) -> &'static [&'static str] {
        match self {
            Host::Local(_) => &["port", "listen_addresses", "unix_socket_directories"],
            // The appliance's server listens where the plan says; socket and port are the
            // platform's.
            Host::Appliance(_) => &["port", "unix_socket_directories"],
            #[cfg(test)]
            Host::StandIn(_) => &["port", "listen_addresses", "unix_socket_directories"],
        }
    }

    /// The OS user pgbench runs as (None: the daemon's own).
    pub(crate) fn bench_user(&self) -> Option<&'static str> {
        match self {
            Host::Local(_) => None,
            Host::Appliance(_) => Some(appliance::SERVICE_USER),
            #[cfg(test)]
            Host::StandIn(_) => None,
        }
    }

    /// Where the payload put the sysbench-tpcc archive (None: this host has no payload and
    /// fetches the plan's source).
    pub(crate) fn packed_tpcc_archive(&self) -> Option<std::path::PathBuf> {
        match self {
            Host::Local(_) => None,
            Host::Appliance(_) => {
                Some(std::path::Path::new("/").join(crate::sysbench::scripts::PAYLOAD_ARCHIVE))
            }
            #[cfg(test)]
            Host::StandIn(_) => None,
        }
    }

    /// The service manager's bus, where the host has one (read by the tuning-in-effect
    /// observation for tuned's state).
    pub(crate) fn bus(&self) -> Option<&crate::systemd::Systemd> {
        match self {
            Host::Local(_) => None,
            Host::Appliance(h) => Some(h.systemd()),
            #[cfg(test)]
            Host::StandIn(_) => None,
        }
    }

    /// The PostgreSQL server of the plan on this host: binaries found, where its data and
    /// socket are, how it is started. Reads only. `port` is the port an earlier start of
    /// this run chose (local mode picks a free one otherwise).
    pub(crate) async fn server(&self, plan: &Plan, port: Option<u16>) -> Result<Cluster> {
        match self {
            Host::Local(h) => h.server(plan, port).await,
            Host::Appliance(h) => h.server(plan).await,
            #[cfg(test)]
            Host::StandIn(h) => h.server(plan, port).await,
        }
    }

    /// Where the dataset's snapshots are kept: on the data directory's volume, outside
    /// what a reset of the run removes (local mode: `<workdir>/snapshots`; the appliance:
    /// `<data volume>/snapshots`).
    pub(crate) fn snapshot_root(&self, cluster: &Cluster) -> PathBuf {
        match self {
            Host::Local(h) => h.workdir().join("snapshots"),
            Host::Appliance(_) => cluster.dir.join("snapshots"),
            #[cfg(test)]
            Host::StandIn(h) => h.snapshot_root(),
        }
    }

    /// Writes what the server needs before initdb (directories, unit files and drop-ins).
    pub(crate) async fn install_server(&self, cluster: &Cluster, plan: &Plan) -> Result<()> {
        match self {
            Host::Local(h) => h.install_server(cluster),
            Host::Appliance(h) => h.install_server(plan).await,
            #[cfg(test)]
            Host::StandIn(h) => h.install_server(cluster),
        }
    }

    /// Initialises the data directory (the platform's way on the appliance).
    pub(crate) async fn initdb(&self, cluster: &Cluster, plan: &Plan, raw: &Path) -> Result<()> {
        match self {
            Host::Local(h) => h.initdb(cluster, plan, raw).await,
            Host::Appliance(h) => h.initdb(cluster, plan, raw).await,
            #[cfg(test)]
            Host::StandIn(h) => h.initdb(cluster, plan, raw).await,
        }
    }

    /// What must hold every time before the server starts (labels, the enabled unit).
    pub(crate) async fn before_start(&self, plan: &Plan, raw: &Path) -> Result<()> {
        match self {
            Host::Local(_) => Ok(()),
            Host::Appliance(h) => h.before_start(plan, raw).await,
            #[cfg(test)]
            Host::StandIn(h) => {
                h.before_start();
                Ok(())
            }
        }
    }

    /// Mounts the data volume `what` where the plan says, now and at every boot.
    pub(crate) async fn mount_volume(&self, what: &str, storage: &Storage) -> Result<()> {
        match self {
            Host::Local(_) => anyhow::bail!("local mode does not mount data volumes"),
            Host::Appliance(h) => h.mount_volume(what, storage).await,
            #[cfg(test)]
            Host::StandIn(h) => h.mount_volume(what, storage),
        }
    }

    /// Labels PGDATA's directory for PostgreSQL where the platform confines it (SELinux).
    pub(crate) async fn label_data_dir(&self, path: &str, stage: &str, raw: &Path) -> Result<()> {
        match self {
            Host::Local(_) => Ok(()),
            Host::Appliance(h) => h.label_data_dir(path, stage, raw).await,
            #[cfg(test)]
            Host::StandIn(h) => {
                h.label_data_dir(path, stage);
                Ok(())
            }
        }
    }

    /// Installs (when it is the appliance's own) and activates a tuned profile.
    pub(crate) async fn activate_tuned(&self, profile: &str) -> Result<TunedState> {
        match self {
            Host::Local(_) => anyhow::bail!("local mode does not change the tuned profile"),
            Host::Appliance(h) => h.activate_tuned(profile).await,
            #[cfg(test)]
            Host::StandIn(h) => Ok(h.activate_tuned(profile)),
        }
    }

    /// Whether [`Host::reboot`] can reboot the machine (the appliance's can; local mode's
    /// never does).
    pub(crate) fn reboots(&self) -> bool {
        match self {
            Host::Local(_) => false,
            Host::Appliance(_) => true,
            #[cfg(test)]
            Host::StandIn(_) => true,
        }
    }

    /// Where this host keeps the machine's file `path` (an absolute path: `/proc/cmdline`,
    /// `/etc/default/grub`): the path itself, but for the tests' stand-in machine.
    pub(crate) fn machine_path(&self, path: impl AsRef<Path>) -> PathBuf {
        match self {
            Host::Local(_) | Host::Appliance(_) => path.as_ref().to_path_buf(),
            #[cfg(test)]
            Host::StandIn(h) => h.machine_path(path.as_ref()),
        }
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`, the stand-in machine's for the
    /// tests): every step and the engine read it here, so a test's boot is the one they see.
    pub(crate) fn boot_id(&self) -> Result<String> {
        let path = "/proc/sys/kernel/random/boot_id";
        Ok(std::fs::read_to_string(self.machine_path(path))
            .map_err(|e| anyhow::anyhow!("reading {path}: {e}"))?
            .trim()
            .to_string())
    }

    /// Writes back dirty pages and drops the page cache, dentries and inodes
    /// (`/proc/sys/vm/drop_caches`, the stand-in machine's for the tests).
    pub(crate) fn drop_page_cache(&self) -> Result<()> {
        let path = "/proc/sys/vm/drop_caches";
        let target = self.machine_path(path);
        if target.as_path() == Path::new(path) {
            nix::unistd::sync();
        }
        std::fs::write(&target, "3").map_err(|e| {
            anyhow::anyhow!("writing {path} (dropping the page cache needs root): {e}")
        })
    }

    /// Reboots the machine; returns only with an error.
    pub(crate) async fn reboot(&self) -> Result<std::convert::Infallible> {
        match self {
            Host::Local(_) => anyhow::bail!("local mode does not reboot the machine"),
            Host::Appliance(h) => h.reboot().await,
            #[cfg(test)]
            Host::StandIn(h) => Err(h.reboot()),
        }
    }

    /// Whether the run in `workdir` has ended (nothing left to do, not even the upload).
    pub(crate) fn run_is_complete(
        &self,
        workdir: &Path,
        journal: &crate::journal::Journal,
    ) -> bool {
        match self {
            Host::Local(_) => journal.finished_at.is_some(),
            Host::Appliance(_) => appliance::done_marker(workdir).exists(),
            #[cfg(test)]
            Host::StandIn(_) => journal.finished_at.is_some(),
        }
    }

    /// After the measuring steps, whether they succeeded or not: local mode stops the
    /// server it started (unless asked to keep it running).
    pub(crate) async fn after_measuring(&self, cluster: Option<&Cluster>) -> Result<()> {
        match self {
            Host::Local(h) => h.after_measuring(cluster).await,
            Host::Appliance(_) => Ok(()),
            #[cfg(test)]
            Host::StandIn(_) => Ok(()),
        }
    }

    /// After a refusal to resume a run (a different plan): stops a server the earlier run
    /// left, and says what it did.
    pub(crate) async fn after_refusal(&self, workdir: &Path) -> Result<Option<String>> {
        match self {
            Host::Local(_) => local::stop_left_server(workdir).await,
            Host::Appliance(_) => Ok(None),
            #[cfg(test)]
            Host::StandIn(_) => Ok(None),
        }
    }

    /// When the run is finished and stored: the appliance writes its done marker and
    /// powers off if the plan says so.
    pub(crate) async fn finish(&self, workdir: &Path, run_id: &str, plan: &Plan) -> Result<()> {
        match self {
            Host::Local(_) => Ok(()),
            Host::Appliance(h) => h.finish(workdir, run_id, plan).await,
            #[cfg(test)]
            Host::StandIn(h) => {
                h.finish(plan);
                Ok(())
            }
        }
    }
}
