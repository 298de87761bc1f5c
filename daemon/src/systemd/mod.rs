//! The systemd/D-Bus layer: services are started, restarted, stopped and enabled through
//! the Manager API, waiting for each job's `JobRemoved` signal (subscribed before the job
//! is queued, matched on the returned job path); external commands run as transient units
//! ([`transient::SystemdExecutor`]); tuned is driven over its own D-Bus API ([`tuned`]).
//! Only methods and unit properties present in systemd 239 (Rocky 8) are used.

mod proxies;
pub(crate) mod transient;
pub(crate) mod tuned;

use std::future::Future;

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use zbus::zvariant::OwnedObjectPath;

pub(crate) use proxies::{ManagerProxy, ServiceProxy, TunedProxy, UnitProxy};
pub(crate) use transient::SystemdExecutor;

/// Keeps `daemon-reload` and running command units apart. systemd 239-58 writes a transient
/// unit's `StandardErrorFile=` into /run/systemd/transient as `StandardOutput=file:…`
/// (fixed in 239-68), so a reload while a command unit is loaded would re-read it with its
/// stdout pointed at the stderr file. Command units hold a shared guard from before
/// `StartTransientUnit` until they are stopped; [`Systemd::reload`] takes the exclusive one.
#[derive(Clone, Default)]
pub(crate) struct CommandGate(std::sync::Arc<tokio::sync::RwLock<()>>);

impl CommandGate {
    /// Held while a command unit exists; several may run at once.
    pub(crate) async fn command(&self) -> tokio::sync::OwnedRwLockReadGuard<()> {
        self.0.clone().read_owned().await
    }

    /// Held while systemd reloads: waits until no command unit exists.
    pub(crate) async fn exclusive(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.0.clone().write_owned().await
    }
}

/// A connection to the system bus with systemd's Manager, subscribed to job signals.
#[derive(Clone)]
pub struct Systemd {
    conn: zbus::Connection,
    manager: ManagerProxy<'static>,
    gate: CommandGate,
}

impl Systemd {
    pub(crate) async fn connect() -> Result<Self> {
        let conn = zbus::Connection::system().await.context(
            "connecting to the system D-Bus (is dbus running, and is this a systemd machine?)",
        )?;
        let manager = ManagerProxy::new(&conn)
            .await
            .context("reaching systemd's Manager on the system bus")?;
        manager
            .subscribe()
            .await
            .context("subscribing to systemd's job signals")?;
        Ok(Systemd {
            conn,
            manager,
            gate: CommandGate::default(),
        })
    }

    pub(crate) fn connection(&self) -> &zbus::Connection {
        &self.conn
    }

    pub(crate) fn manager(&self) -> &ManagerProxy<'static> {
        &self.manager
    }

    /// Queues a job with `call` and waits for its `JobRemoved`; returns the job's result
    /// (`done`, `failed`, `timeout`, `canceled`, `dependency`, `skipped`).
    pub(crate) async fn job<F, Fut>(&self, what: &str, call: F) -> Result<String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = zbus::Result<OwnedObjectPath>>,
    {
        // Listen before queueing, so a job that ends at once is not missed.
        let mut removed = self
            .manager
            .receive_job_removed()
            .await
            .context("listening for systemd's JobRemoved")?;
        let job = call()
            .await
            .with_context(|| format!("asking systemd to {what}"))?;
        while let Some(signal) = removed.next().await {
            let args = signal.args().context("reading a JobRemoved signal")?;
            if args.job == job {
                return Ok(args.result);
            }
        }
        bail!("the system bus closed while waiting for systemd to {what}")
    }

    async fn unit_job(&self, verb: &str, unit: &str, mode: &str) -> Result<()> {
        let what = format!("{verb} {unit}");
        let result = self
            .job(&what, || async {
                match verb {
                    "start" => self.manager.start_unit(unit, mode).await,
                    "restart" => self.manager.restart_unit(unit, mode).await,
                    _ => self.manager.stop_unit(unit, mode).await,
                }
            })
            .await?;
        if result != "done" {
            bail!(
                "systemd could not {what}: the job ended \"{result}\" (see `journalctl -u {unit}` and `systemctl status {unit}`)"
            );
        }
        Ok(())
    }

    pub(crate) async fn start_unit(&self, unit: &str) -> Result<()> {
        self.unit_job("start", unit, "replace").await
    }

    pub(crate) async fn restart_unit(&self, unit: &str) -> Result<()> {
        self.unit_job("restart", unit, "replace").await
    }

    pub(crate) async fn stop_unit(&self, unit: &str) -> Result<()> {
        self.unit_job("stop", unit, "replace").await
    }

    /// `systemctl enable` for unit files (by name or path); then a Reload.
    pub(crate) async fn enable_unit_files(&self, units: &[&str]) -> Result<()> {
        self.manager
            .enable_unit_files(units, false, true)
            .await
            .with_context(|| format!("enabling {}", units.join(", ")))?;
        self.reload().await
    }

    /// The gate command units and reloads share (see [`CommandGate`]).
    pub(crate) fn gate(&self) -> &CommandGate {
        &self.gate
    }

    /// `systemctl daemon-reload`: systemd rereads unit files and drop-ins. Waits until no
    /// command unit of this daemon exists (systemd 239-58's StandardErrorFile bug).
    pub(crate) async fn reload(&self) -> Result<()> {
        let _no_commands = self.gate.exclusive().await;
        self.manager
            .reload()
            .await
            .context("asking systemd to reload its unit files")
    }

    /// The unit's object path (loading the unit if systemd has not yet).
    pub(crate) async fn unit_path(&self, unit: &str) -> Result<OwnedObjectPath> {
        self.manager
            .load_unit(unit)
            .await
            .with_context(|| format!("loading unit {unit}"))
    }

    /// `ActiveState` of a unit: active, inactive, failed, activating, …
    pub(crate) async fn active_state(&self, unit: &str) -> Result<String> {
        let proxy = UnitProxy::builder(&self.conn)
            .path(self.unit_path(unit).await?)?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        proxy
            .active_state()
            .await
            .with_context(|| format!("reading ActiveState of {unit}"))
    }

    /// Reboots through systemd (`systemctl reboot`). Returns once the job is queued; the
    /// daemon is then stopped by the shutdown.
    pub(crate) async fn reboot(&self) -> Result<()> {
        self.manager
            .start_unit("reboot.target", "replace-irreversibly")
            .await
            .context("asking systemd to reboot")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::CommandGate;
    use std::time::Duration;

    #[tokio::test]
    async fn a_reload_waits_for_running_command_units() {
        let gate = CommandGate::default();
        let first = gate.command().await;
        let second = gate.command().await;
        let reload = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let _g = gate.exclusive().await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reload.is_finished(), "reloaded while command units ran");
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reload.is_finished(), "reloaded while a command unit ran");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), reload)
            .await
            .expect("the reload goes ahead once no command unit is left")
            .expect("join");
    }
}
