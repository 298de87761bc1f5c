//! The plan: one TOML file that drives the build, the first boot and the sweep.
//!
//! This module is the only parser of plans. The builder (`pgappliance check`/`build`) and
//! the daemon both call [`Plan::load`] so a plan that checks is a plan that runs. Unknown keys
//! are errors (`deny_unknown_fields`), and every error carries the file, line and column of
//! the key or value at fault (see [`PlanError`]).

mod location;
pub mod rewrite;
pub(crate) mod tuning;
mod type_errors;
pub(crate) mod units;
mod validate;
mod warnings;
pub(crate) mod workloads;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use location::KeyPath;
pub use validate::is_ssh_key_placeholder;
pub(crate) use validate::{check_store_url, parse_size};
pub use workloads::WorkloadKind;
pub(crate) use workloads::WorkloadSpec;

/// A parsed and validated plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub appliance: Appliance,
    pub postgres: Postgres,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default)]
    pub tuning: Tuning,
    /// pgbench's dataset (required when a workload is pgbench's).
    #[serde(default)]
    pub dataset: Dataset,
    pub workloads: Vec<Workload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysbench: Option<Sysbench>,
    #[serde(default)]
    pub upload: Upload,
    #[serde(default)]
    pub(crate) finish: Finish,
    /// The order of the sweep's points and what happens between its rounds.
    #[serde(default)]
    pub sweep: SweepOptions,
    /// How the builder's kickstart installs the OS. Present only in a bare-metal plan: its
    /// presence is what makes `pgappliance build` render the kickstart (and the ISO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<Install>,
}

/// The OS installation the kickstart performs (a bare-metal plan's `[install]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Install {
    /// Disk (kernel name, e.g. `sda`) that receives /boot/efi, /boot and the OS volume
    /// group; [`Install::DEFAULT_OS_DISK`] when the plan names none (`check` warns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) os_disk: Option<String>,
    /// Public keys allowed to log in as root over SSH.
    #[serde(default)]
    pub ssh_authorized_keys: Vec<String>,
    /// root's console password as a crypt(3) SHA-512 hash (`openssl passwd -6`); without
    /// it root's password is locked. Never a plain password. Never serialised: the plan
    /// in results.json (uploaded, shown in reports) leaves it out.
    #[serde(default, skip_serializing)]
    pub root_password_hash: Option<String>,
    #[serde(default = "Install::default_timezone")]
    pub timezone: String,
}

impl Install {
    /// The OS disk when the plan names none.
    pub(crate) const DEFAULT_OS_DISK: &'static str = "sda";

    /// The OS disk's kernel name (`/dev/` taken off), the default when the plan names none.
    pub fn os_disk(&self) -> &str {
        self.os_disk
            .as_deref()
            .unwrap_or(Install::DEFAULT_OS_DISK)
            .trim_start_matches("/dev/")
    }

    fn default_timezone() -> String {
        "UTC".to_string()
    }
}

/// Who this machine is in the comparison, and what it costs to run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Appliance {
    /// Short name used in object-store keys and reports (`[a-z0-9._-]`).
    pub name: String,
    pub platform: Platform,
    /// CPU architecture of the target; the builder checks the daemon binary against it.
    #[serde(default = "Arch::default_for_target")]
    pub arch: Arch,
    /// Free text describing the hardware, shown in reports.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// What an hour of this machine costs (USD), for tps per dollar-hour. 0 = unknown.
    #[serde(default)]
    pub(crate) hourly_price_usd: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Rocky8,
    Debian12,
}

impl Platform {
    /// The name as the plan spells it (lower case).
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Platform::Rocky8 => "rocky8",
            Platform::Debian12 => "debian12",
        }
    }

    /// PostgreSQL major version when the plan names none (scenario A used 14 on Rocky 8;
    /// Debian 12 ships 15).
    pub(crate) fn default_pg_version(&self) -> u32 {
        match self {
            Platform::Rocky8 => 14,
            Platform::Debian12 => 15,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    Aarch64,
    X86_64,
}

impl Arch {
    /// The name as the plan, `uname -m` and PGDG's paths spell it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::X86_64 => "x86_64",
        }
    }

    fn default_for_target() -> Self {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }
}

/// Which PostgreSQL, from where, and how the cluster is initialised.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Postgres {
    /// Major version (see [`PG_MAJORS`]). Local mode uses the newest installed one when it is
    /// absent.
    #[serde(default)]
    pub version: Option<u32>,
    /// Where PostgreSQL comes from (platform-specific; see docs/plan.md): on rocky8 the
    /// PGDG repository RPM's URL (required unless `repository_baseurl` is given), on
    /// debian12 an apt base URL.
    #[serde(default)]
    pub(crate) repository: Option<String>,
    /// rocky8 only: base URL of a PGDG mirror (air-gapped labs), written to a `.repo` file
    /// with gpgcheck; exclusive with `repository`, needs `repository_gpgkey`.
    #[serde(default)]
    pub(crate) repository_baseurl: Option<String>,
    /// rocky8 only, with `repository_baseurl`: the PGDG signing key, a URL or an absolute path.
    #[serde(default)]
    pub(crate) repository_gpgkey: Option<String>,
    /// initdb with data checksums (`-k`).
    #[serde(default)]
    pub data_checksums: bool,
}

/// Where PGDATA lives on the appliance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// `"auto"` (every empty NVMe namespace) or an explicit list of block devices.
    #[serde(default)]
    pub devices: Devices,
    #[serde(default)]
    pub layout: Layout,
    /// Stripe unit for `layout = "stripe"`, e.g. `"64KiB"`.
    #[serde(default = "Storage::default_stripe_size")]
    pub stripe_size: String,
    #[serde(default)]
    pub filesystem: Filesystem,
    /// Mount point of the data volume; PGDATA is `<mount_point>/data`.
    #[serde(default = "Storage::default_mount_point")]
    pub mount_point: String,
    /// Allow the storage step to destroy what is on the listed devices.
    #[serde(default)]
    pub wipe: bool,
    /// Medium kind used by the `auto` tuning calculator.
    #[serde(default)]
    pub kind: StorageKind,
}

impl Storage {
    fn default_stripe_size() -> String {
        "64KiB".to_string()
    }
    fn default_mount_point() -> String {
        "/var/lib/pgappliance/pgdata".to_string()
    }
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            devices: Devices::default(),
            layout: Layout::default(),
            stripe_size: Storage::default_stripe_size(),
            filesystem: Filesystem::default(),
            mount_point: Storage::default_mount_point(),
            wipe: false,
            kind: StorageKind::default(),
        }
    }
}

/// Which block devices carry the data volume.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Devices {
    /// Every empty NVMe namespace.
    #[default]
    Auto,
    /// No data volume: PGDATA lives in `mount_point` on the root filesystem (containers,
    /// machines without spare drives).
    None,
    List(Vec<String>),
}

impl Serialize for Devices {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Devices::Auto => s.serialize_str("auto"),
            Devices::None => s.serialize_str("none"),
            Devices::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected \"auto\", \"none\" or a list of devices")
        })? {
            Raw::Word(w) if w == "auto" => Ok(Devices::Auto),
            Raw::Word(w) if w == "none" => Ok(Devices::None),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "expected \"auto\", \"none\" or a list of devices, found \"{w}\""
            ))),
            Raw::List(l) => Ok(Devices::List(l)),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    #[default]
    Stripe,
    Linear,
    Single,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    #[default]
    Xfs,
    Ext4,
}

impl Filesystem {
    /// The name the plan, mount(8) and the mount unit's `Type=` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Filesystem::Xfs => "xfs",
            Filesystem::Ext4 => "ext4",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum StorageKind {
    #[default]
    Nvme,
    Ssd,
    Hdd,
}

/// Server settings, OS profile and kernel arguments.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// Compute settings from RAM, cores, clients, storage and version (docs/tuning.md).
    #[serde(default = "yes")]
    pub(crate) auto: bool,
    /// Explicit `ALTER SYSTEM` settings; they win over the computed ones.
    #[serde(default)]
    pub(crate) settings: BTreeMap<String, SettingValue>,
    /// tuned profile to install and activate on the appliance (`"none"` to skip).
    #[serde(default = "Tuning::default_profile")]
    pub tuned_profile: String,
    /// Kernel command-line arguments; a change triggers the planned reboot.
    #[serde(default)]
    pub kernel_args: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Tuning {
    fn default_profile() -> String {
        "none".to_string()
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            auto: true,
            settings: BTreeMap::new(),
            tuned_profile: Tuning::default_profile(),
            kernel_args: Vec::new(),
        }
    }
}

/// A GUC value as written in the plan; rendered for `ALTER SYSTEM SET`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub(crate) enum SettingValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for SettingValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SettingValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a setting value: a string, a number or true/false")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<SettingValue, E> {
                Ok(SettingValue::Bool(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SettingValue, E> {
                Ok(SettingValue::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SettingValue, E> {
                i64::try_from(v)
                    .map(SettingValue::Int)
                    .map_err(|_| E::custom(format!("{v} is too large for a setting")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<SettingValue, E> {
                if v.is_finite() {
                    Ok(SettingValue::Float(v))
                } else {
                    Err(E::custom(format!("{v} is not a finite number")))
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SettingValue, E> {
                Ok(SettingValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingValue::Bool(b) => write!(f, "{}", if *b { "on" } else { "off" }),
            SettingValue::Int(i) => write!(f, "{i}"),
            SettingValue::Float(x) => write!(f, "{x}"),
            SettingValue::Text(s) => write!(f, "{s}"),
        }
    }
}

/// The pgbench dataset.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    /// pgbench scale factor (100,000 accounts per unit); 0 (absent) only in a plan without
    /// pgbench workloads.
    #[serde(default)]
    pub scale: u32,
    #[serde(default)]
    pub(crate) init: InitMode,
    /// Fill factor for the pgbench tables (10–100).
    #[serde(default = "Dataset::default_fillfactor")]
    pub(crate) fillfactor: u32,
    /// Database that holds the dataset.
    #[serde(default = "Dataset::default_database")]
    pub(crate) database: String,
    /// Connections for `init = "parallel"` (default: `loader::default_degree`, 1 below 8 CPUs, else half the CPUs).
    #[serde(default)]
    pub(crate) parallel_degree: Option<u32>,
    /// When the data directory is put back from the dataset's snapshot.
    #[serde(default)]
    pub(crate) restore: RestorePolicy,
    /// Keep a local snapshot of the stopped data directory after the dataset step (default:
    /// when `restore` is not `never` or `snapshot_store` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot: Option<bool>,
    /// Share the snapshot through an object store: `true` (the `[upload]` store) or a store
    /// URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot_store: Option<SnapshotStore>,
}

/// When the dataset's snapshot is put back as the data directory.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RestorePolicy {
    /// Before each workload that follows another one on the same data.
    EachWorkload,
    /// Before each point (a warm-up and the point after it share one restore).
    EachPoint,
    /// Never: every point runs on what the earlier ones left.
    #[default]
    Never,
}

/// `snapshot_store = true | "s3://…"`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub(crate) enum SnapshotStore {
    Enabled(bool),
    Url(String),
}

impl Dataset {
    /// The store URL snapshots are shared through, if any (`upload_store`: `[upload]`'s).
    pub(crate) fn snapshot_store_url(&self, upload_store: &str) -> Option<String> {
        match &self.snapshot_store {
            None | Some(SnapshotStore::Enabled(false)) => None,
            Some(SnapshotStore::Enabled(true)) => Some(upload_store.to_string()),
            Some(SnapshotStore::Url(u)) => Some(u.clone()),
        }
    }

    /// Whether the dataset step keeps a local snapshot.
    pub(crate) fn keeps_snapshot(&self) -> bool {
        self.snapshot.unwrap_or(
            self.restore != RestorePolicy::Never
                || matches!(
                    self.snapshot_store,
                    Some(SnapshotStore::Enabled(true)) | Some(SnapshotStore::Url(_))
                ),
        )
    }
}

impl Default for Dataset {
    fn default() -> Self {
        Dataset {
            scale: 0,
            init: InitMode::default(),
            fillfactor: Dataset::default_fillfactor(),
            database: Dataset::default_database(),
            parallel_degree: None,
            restore: RestorePolicy::default(),
            snapshot: None,
            snapshot_store: None,
        }
    }
}

/// One sysbench-tpcc dataset: what `tpcc.lua prepare` builds. Workloads that name the same
/// tables, scale and foreign-key choice share it (in one database).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TpccDataset {
    pub tables: u32,
    pub scale: u32,
    pub(crate) use_fk: bool,
}

impl TpccDataset {
    /// The database that holds it, e.g. `sbtest_w10_t10` (`_fk` appended with foreign keys).
    pub fn database(&self) -> String {
        format!(
            "sbtest_w{}_t{}{}",
            self.scale,
            self.tables,
            if self.use_fk { "_fk" } else { "" }
        )
    }
}

impl Dataset {
    fn default_fillfactor() -> u32 {
        100
    }
    fn default_database() -> String {
        "pgbench".to_string()
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum InitMode {
    /// `pgbench -i` (client-side generate).
    #[default]
    Client,
    /// `pgbench -i -I dtGvp` (server-side generate).
    Server,
    /// The appliance's own loader: the same tables, several connections, load settings
    /// (docs/performance.md).
    Parallel,
}

/// One workload: its name, how long and how often its points run, and its kind's own
/// options ([`workloads::WorkloadSpec`], one variant per kind). The plan writes it as one flat
/// `[[workloads]]` table ([`workloads::Written`]) whose `kind` picks the variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "workloads::Written", into = "workloads::Written")]
pub struct Workload {
    /// Name used in point ids and reports (`[a-z0-9_-]`).
    pub(crate) name: String,
    /// `-T` / `--time`: duration, e.g. `"600s"` or `"10min"`.
    pub(crate) duration: Option<String>,
    /// Times each point is measured.
    pub(crate) repeats: Repeats,
    /// Unrecorded run before the first point of the workload (same parameters).
    pub(crate) warmup: Option<String>,
    /// `CHECKPOINT` and wait before every point.
    pub(crate) checkpoint: bool,
    /// Data checksums for this workload's points; `["off", "on"]` makes a matrix.
    pub(crate) data_checksums: Vec<Checksums>,
    /// The per-interval series' interval in seconds (pgbench's `--progress`, sysbench's
    /// `--report-interval`).
    pub(crate) progress_interval_s: u32,
    /// What drives the load, with that program's options.
    pub(crate) spec: WorkloadSpec,
}

/// sysbench's `--rand-type`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RandType {
    #[default]
    Uniform,
    Gaussian,
    Special,
    Pareto,
    Zipfian,
}

impl RandType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RandType::Uniform => "uniform",
            RandType::Gaussian => "gaussian",
            RandType::Special => "special",
            RandType::Pareto => "pareto",
            RandType::Zipfian => "zipfian",
        }
    }
}

/// sysbench-tpcc's `--trx_level`: read committed, repeatable read, serializable.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, Hash)]
#[allow(clippy::upper_case_acronyms)] // sysbench-tpcc's own names
pub(crate) enum TrxLevel {
    #[default]
    RC,
    RR,
    SER,
}

impl TrxLevel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TrxLevel::RC => "RC",
            TrxLevel::RR => "RR",
            TrxLevel::SER => "SER",
        }
    }
}

/// `[sysbench]`: where the sysbench-tpcc Lua scripts come from. Required when a workload is
/// `kind = "sysbench-tpcc"`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sysbench {
    /// A `.tar.gz` of Percona-Lab/sysbench-tpcc (https:// or file://); packed into the
    /// payload by `pgappliance build`, fetched by the daemon when the payload lacks it.
    pub tpcc_source: String,
    /// The archive's sha256 (64 hex digits); a different archive is refused.
    pub(crate) tpcc_sha256: String,
}

impl Workload {
    /// The kind's tag (what results, points and the comparison record).
    pub(crate) fn kind(&self) -> WorkloadKind {
        self.spec.kind()
    }

    /// The kind's part: its checks, connections, dataset and point options.
    pub(crate) fn section(&self) -> &dyn workloads::Section {
        self.spec.section()
    }

    /// Whether it runs on a sysbench-tpcc dataset (its kind's, [`workloads::Section`]).
    pub(crate) fn is_tpcc(&self) -> bool {
        self.tpcc_dataset().is_some()
    }

    /// The sysbench-tpcc dataset this workload runs on (None for pgbench workloads).
    pub(crate) fn tpcc_dataset(&self) -> Option<TpccDataset> {
        self.section().tpcc_dataset()
    }

    /// The connection counts swept: pgbench's `clients`, sysbench-tpcc's `threads` list.
    pub(crate) fn connections(&self) -> Vec<u32> {
        self.section().connections()
    }

    /// The `-T` duration, when the workload is time-bounded.
    pub(crate) fn duration(&self) -> Option<Duration> {
        self.duration
            .as_deref()
            .and_then(|d| humantime::parse_duration(d).ok())
    }

    pub(crate) fn warmup(&self) -> Option<Duration> {
        self.warmup
            .as_deref()
            .and_then(|d| humantime::parse_duration(d).ok())
            .filter(|d| !d.is_zero())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Builtin {
    #[default]
    TpcbLike,
    SimpleUpdate,
    SelectOnly,
}

impl Builtin {
    pub(crate) fn pgbench_name(self) -> &'static str {
        match self {
            Builtin::TpcbLike => "tpcb-like",
            Builtin::SimpleUpdate => "simple-update",
            Builtin::SelectOnly => "select-only",
        }
    }
}

/// Threads per point: a number, or `"auto"` = min(clients, cores); for sysbench-tpcc the
/// list of thread counts to sweep (each sysbench thread is one connection).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Threads {
    #[default]
    Auto,
    Fixed(u32),
    List(Vec<u32>),
}

impl Serialize for Threads {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Threads::Auto => s.serialize_str("auto"),
            Threads::Fixed(n) => s.serialize_u32(*n),
            Threads::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Threads;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"auto\", a number of threads or a list of them")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Threads, A::Error> {
                let mut list = Vec::new();
                while let Some(n) = seq.next_element::<u32>()? {
                    list.push(n);
                }
                Ok(Threads::List(list))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Threads, E> {
                u32::try_from(v).map(Threads::Fixed).map_err(|_| {
                    E::custom(format!(
                        "expected \"auto\" or a number of threads, found {v}"
                    ))
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Threads, E> {
                u32::try_from(v).map(Threads::Fixed).map_err(|_| {
                    E::custom(format!(
                        "expected \"auto\" or a number of threads, found {v}"
                    ))
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Threads, E> {
                if v == "auto" {
                    Ok(Threads::Auto)
                } else {
                    Err(E::custom(format!(
                        "expected \"auto\" or a number of threads, found \"{v}\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Simple,
    Extended,
    Prepared,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::Simple => "simple",
            Protocol::Extended => "extended",
            Protocol::Prepared => "prepared",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Checksums {
    Off,
    On,
}

impl Checksums {
    /// `"on"`/`"off"` for a required state, `""` for none.
    pub fn label(state: Option<Checksums>) -> &'static str {
        match state {
            Some(Checksums::On) => "on",
            Some(Checksums::Off) => "off",
            None => "",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LatencyLog {
    #[default]
    Full,
    Sampled,
    Aggregate,
}

/// Where results go.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    /// `s3://bucket/prefix` or `file:///dir`.
    #[serde(default = "Upload::default_store")]
    pub store: String,
    /// S3 endpoint URL for S3-compatible stores (path-style).
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default = "Upload::default_region")]
    pub region: String,
    #[serde(default)]
    pub credentials: Credentials,
    /// A 0600 file with the key pair when `credentials = "file"`.
    #[serde(default)]
    pub credentials_file: Option<String>,
    /// The profile (`[name]` section) of the credentials file to use; `default` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credentials_profile: Option<String>,
}

impl Upload {
    fn default_store() -> String {
        "file:///var/lib/pgappliance/store".to_string()
    }
    fn default_region() -> String {
        "us-east-1".to_string()
    }

    /// The credentials file's profile the plan names (`default` when it names none).
    pub fn profile(&self) -> &str {
        self.credentials_profile
            .as_deref()
            .unwrap_or(DEFAULT_PROFILE)
    }
}

impl Default for Upload {
    fn default() -> Self {
        Upload {
            store: Upload::default_store(),
            endpoint: None,
            region: Upload::default_region(),
            credentials: Credentials::default(),
            credentials_file: None,
            credentials_profile: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Credentials {
    #[default]
    Environment,
    InstanceRole,
    File,
}

/// `[sweep]`: the order of the points and what happens between rounds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct SweepOptions {
    /// `"rounds"` (default): round 1 runs every workload's whole client ladder, then round
    /// 2, and so on; `"points"`: each point's repeats back to back.
    #[serde(default)]
    pub(crate) order: SweepOrder,
    /// What happens before each round after the first.
    #[serde(default)]
    pub between_rounds: BetweenRounds,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SweepOrder {
    #[default]
    Rounds,
    Points,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BetweenRounds {
    /// Nothing: the next round starts at once.
    #[default]
    None,
    /// PostgreSQL restarted with the page cache dropped.
    Restart,
    /// The machine rebooted (the appliance; local mode refuses it).
    Reboot,
}

impl BetweenRounds {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BetweenRounds::None => "none",
            BetweenRounds::Restart => "restart",
            BetweenRounds::Reboot => "reboot",
        }
    }
}

/// How many times each point is measured: a fixed number of rounds, or adaptive rounds
/// (at least `min`; further rounds, up to `max`, only for the points whose 95 % interval
/// of mean tps is still wider than ±`ci_pct` %).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Repeats {
    Fixed(u32),
    Adaptive(AdaptiveRepeats),
}

/// `repeats = { min = 3, max = 10, ci_pct = 2.0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdaptiveRepeats {
    pub(crate) min: u32,
    pub(crate) max: u32,
    pub(crate) ci_pct: f64,
}

impl Repeats {
    /// The rounds every point runs.
    pub(crate) fn min(&self) -> u32 {
        match self {
            Repeats::Fixed(n) => *n,
            Repeats::Adaptive(a) => a.min,
        }
    }

    /// The most rounds a point can run.
    pub(crate) fn max(&self) -> u32 {
        match self {
            Repeats::Fixed(n) => *n,
            Repeats::Adaptive(a) => a.max.max(a.min),
        }
    }

    /// The half-width, in percent of the mean, a point's 95 % interval must reach for its
    /// further rounds to be left out (adaptive repeats only).
    pub(crate) fn ci_pct(&self) -> Option<f64> {
        match self {
            Repeats::Fixed(_) => None,
            Repeats::Adaptive(a) => Some(a.ci_pct),
        }
    }
}

impl Serialize for Repeats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Repeats::Fixed(n) => s.serialize_u32(*n),
            Repeats::Adaptive(a) => a.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Repeats;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of repeats or { min = N, max = M, ci_pct = P }")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Repeats, E> {
                u32::try_from(v)
                    .map(Repeats::Fixed)
                    .map_err(|_| E::custom(format!("repeats must be from 1 to 100, found {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Repeats, E> {
                u32::try_from(v)
                    .map(Repeats::Fixed)
                    .map_err(|_| E::custom(format!("repeats must be from 1 to 100, found {v}")))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Repeats, A::Error> {
                AdaptiveRepeats::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Repeats::Adaptive)
            }
        }
        d.deserialize_any(V)
    }
}

/// What the machine does once the results are safe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Finish {
    #[serde(default)]
    pub(crate) action: FinishAction,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FinishAction {
    #[default]
    StayUp,
    PowerOff,
}

/// A plan problem located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanIssue {
    pub line: usize,
    pub column: usize,
    /// Dotted key path, e.g. `workloads[1].clients`.
    pub key: String,
    pub message: String,
}

impl PlanIssue {
    /// `PLAN:LINE:COL: key: LABELmessage` (the label: `""`, or `"warning: "`).
    pub fn render(&self, path: &Path, label: &str) -> String {
        format!(
            "{}:{}:{}: {}: {label}{}",
            path.display(),
            self.line,
            self.column,
            self.key,
            self.message
        )
    }
}

/// Why a plan could not be loaded: one or more located problems, or an unreadable file.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{path}: cannot read plan: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", render_issues(.path, .issues))]
    Invalid {
        path: PathBuf,
        issues: Vec<PlanIssue>,
    },
}

fn render_issues(path: &Path, issues: &[PlanIssue]) -> String {
    issues
        .iter()
        .map(|i| i.render(path, ""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The PostgreSQL major versions a plan may name: every decision by version (the plan
/// check, the settings' lists, the pgbench parsers, the package names) covers these.
pub(crate) const PG_MAJORS: std::ops::RangeInclusive<u32> = 13..=19;

/// The credentials profile read when the plan names none.
pub const DEFAULT_PROFILE: &str = "default";

/// Whether a profile name can be written as a `[name]` section (the error says why not).
pub(crate) fn check_profile_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("the credentials profile name is empty".into());
    }
    if name.trim() != name || name.chars().any(|c| c.is_control() || c == '[' || c == ']') {
        return Err(format!(
            "credentials profile \"{}\" cannot be a [section] name (no brackets, control characters or surrounding spaces)",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// The largest plan file `load` reads.
pub(crate) const MAX_PLAN_BYTES: u64 = 1 << 20;

/// Everything `check` says about a plan's text: the plan when it has no errors, its errors
/// and its warnings, each located and in file order.
#[derive(Debug)]
pub struct Findings {
    pub plan: Option<Plan>,
    pub errors: Vec<PlanIssue>,
    pub warnings: Vec<PlanIssue>,
}

impl Plan {
    /// Whether any workload runs pgbench (and so needs `[dataset]`'s tables).
    pub fn has_pgbench(&self) -> bool {
        self.workloads.iter().any(|w| !w.is_tpcc())
    }

    /// Every sysbench-tpcc dataset the workloads need, once each, in first-named order.
    pub fn tpcc_datasets(&self) -> Vec<TpccDataset> {
        let mut out: Vec<TpccDataset> = Vec::new();
        for d in self.workloads.iter().filter_map(Workload::tpcc_dataset) {
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }
}

impl Plan {
    /// Reads, parses and validates a plan file.
    /// Reads at most [`MAX_PLAN_BYTES`]: a larger file (or an endless one such as
    /// `/dev/zero`) is refused without being read into memory.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let text = Plan::read_text(path)?;
        Plan::parse(&text).map_err(|issues| PlanError::Invalid {
            path: path.to_path_buf(),
            issues,
        })
    }

    /// A plan file's text, read as [`Plan::load`] reads it (at most [`MAX_PLAN_BYTES`]).
    pub fn read_text(path: &Path) -> Result<String, PlanError> {
        crate::fsutil::read_to_string_limited(
            path,
            MAX_PLAN_BYTES,
            "a plan (plans are a few KiB of TOML)",
        )
        .map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Parses and validates plan text; on failure every problem found, in file order:
    /// every type error (not only serde's first) and every validation problem.
    pub(crate) fn parse(text: &str) -> Result<Plan, Vec<PlanIssue>> {
        let found = Plan::examine(text);
        match found.plan {
            Some(plan) => Ok(plan),
            None => Err(found.errors),
        }
    }

    /// Parses and validates plan text and, when it has no errors, also finds what it may
    /// still get wrong (`warnings`): a plan with errors gets its errors only, all at once.
    pub fn examine(text: &str) -> Findings {
        let found = match type_errors::deserialise(text) {
            Ok(found) => found,
            Err(syntax) => {
                return Findings {
                    plan: None,
                    errors: vec![syntax],
                    warnings: Vec::new(),
                }
            }
        };
        // A URL with credentials in it, under any key: refused, and no other finding about
        // that key is shown (it could quote the URL whole).
        let credentials = validate::urls_with_credentials(text);
        let mut errors = found.issues;
        errors.extend(
            credentials
                .iter()
                .map(|(path, message)| location::locate(text, path, message.clone())),
        );
        let doc = text.parse::<toml_edit::DocumentMut>().ok();
        if let Some(plan) = &found.plan {
            errors.extend(
                validate::validate(plan, doc.as_ref())
                    .into_iter()
                    .map(|(path, message)| {
                        // A required key left out is missing, whatever its default breaks.
                        // (Looked up read-only: toml_edit's mutable lookup would leave an
                        // empty item where the key is not, which `as_written` would see.)
                        let absent = doc
                            .as_ref()
                            .is_some_and(|d| path.item(d).is_none_or(|i| i.is_none()));
                        match validate::missing_message(&path).filter(|_| absent) {
                            Some(missing) => (path, missing),
                            None => (path, message),
                        }
                    })
                    .filter(|(path, _)| !credentials.iter().any(|(c, _)| path.starts_with(c)))
                    .map(|(path, message)| match &doc {
                        Some(doc) => path.as_written(doc, message),
                        None => (path, message),
                    })
                    .filter(|(path, _)| {
                        // Not real when the key, or a key it is judged against, holds a
                        // stand-in.
                        let judged = validate::judged_against(path);
                        !found
                            .stand_ins
                            .iter()
                            .any(|s| path.starts_with(s) || judged.iter().any(|d| d.starts_with(s)))
                    })
                    .map(|(path, message)| location::locate(text, &path, message)),
            );
        }
        let in_file_order = |mut v: Vec<PlanIssue>| {
            v.sort_by_key(|i| (i.line, i.column));
            v.dedup();
            v
        };
        let errors = in_file_order(errors);
        let plan = found.plan.filter(|_| errors.is_empty());
        let warnings = match (&plan, &doc) {
            (Some(plan), Some(doc)) => in_file_order(
                warnings::warnings(plan, doc)
                    .into_iter()
                    .map(|(path, message)| location::locate(text, &path, message))
                    .collect(),
            ),
            _ => Vec::new(),
        };
        Findings {
            plan,
            errors,
            warnings,
        }
    }

    /// Locates a finding about `path` in the plan's text (the key's value, else its
    /// nearest existing parent), for checks made outside this module.
    pub fn locate(text: &str, path: &KeyPath, message: String) -> PlanIssue {
        location::locate(text, path, message)
    }

    /// The most connections any workload opens: pgbench's clients, sysbench-tpcc's threads
    /// (sizes max_connections).
    pub fn max_clients(&self) -> u32 {
        self.workloads
            .iter()
            .flat_map(|w| {
                w.connections()
                    .into_iter()
                    .chain(w.section().prepare_threads())
            })
            .max()
            .unwrap_or(1)
    }
}
