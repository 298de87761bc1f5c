//! D-Bus proxies: systemd's Manager (only methods present in systemd 239, Rocky 8) and
//! tuned's control interface (snake_case member names, named explicitly).

use zbus::zvariant::{OwnedObjectPath, Value};

/// One entry of `ListUnitsByPatterns`.
pub(crate) type UnitListEntry = (
    String,
    String,
    String,
    String,
    String,
    String,
    OwnedObjectPath,
    u32,
    String,
    OwnedObjectPath,
);

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
pub(crate) trait Manager {
    fn subscribe(&self) -> zbus::Result<()>;

    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, Value<'_>)],
        aux: &[(&str, Vec<(&str, Value<'_>)>)],
    ) -> zbus::Result<OwnedObjectPath>;

    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn restart_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;
    fn load_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    fn enable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;

    fn reload(&self) -> zbus::Result<()>;

    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<Vec<UnitListEntry>>;

    #[zbus(signal)]
    fn job_removed(&self, id: u32, job: OwnedObjectPath, unit: String, result: String);
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
pub(crate) trait Unit {
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
pub(crate) trait Service {
    #[zbus(property)]
    fn exec_main_code(&self) -> zbus::Result<i32>;
    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;
    /// The unit's CPU time in nanoseconds (`CPUAccounting=yes`; kept after its processes
    /// exit); `u64::MAX` when systemd has no figure.
    #[zbus(property, name = "CPUUsageNSec")]
    fn cpu_usage_nsec(&self) -> zbus::Result<u64>;
}

#[zbus::proxy(
    interface = "com.redhat.tuned.control",
    default_service = "com.redhat.tuned",
    default_path = "/Tuned",
    gen_blocking = false
)]
pub(crate) trait Tuned {
    #[zbus(name = "switch_profile")]
    fn switch_profile(&self, profile: &str) -> zbus::Result<(bool, String)>;
    #[zbus(name = "active_profile")]
    fn active_profile(&self) -> zbus::Result<String>;
    #[zbus(name = "verify_profile")]
    fn verify_profile(&self) -> zbus::Result<bool>;
}
