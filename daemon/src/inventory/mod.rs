//! The inventory step's data: what machine this is. Collection runs commands through the
//! runner and reads /proc and /etc; the parsing is in [`parse`].

pub(crate) mod cloud;
pub mod parse;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use parse::{BlockDevice, CpuInfo};

use crate::runner::{CommandSpec, Runner};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub(crate) collected_at: String,
    pub(crate) hostname: String,
    pub(crate) kernel: String,
    pub(crate) os: BTreeMap<String, String>,
    pub(crate) cpu: CpuInfo,
    pub(crate) memory_bytes: u64,
    /// Read at run time: 4 KiB on x86_64/Debian, 64 KiB on Rocky 8 aarch64.
    pub(crate) page_size: u64,
    pub(crate) block_devices: Vec<BlockDevice>,
    /// DMI identity (vendor, product, board, BIOS) when the machine has one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) dmi: BTreeMap<String, String>,
    /// The cloud instance (IMDSv2), absent on bare metal and in local mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cloud: Option<cloud::CloudInstance>,
}

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
}

pub(crate) async fn collect(runner: &Runner) -> Result<Inventory> {
    let lscpu = runner.run(&CommandSpec::new("lscpu").arg("-J")).await?;
    // lscpu on Arm names the part only when its table knows it (util-linux 2.32.1 has no
    // Neoverse-V1): /proc/cpuinfo's implementer and part codes fill the model in.
    let cpuinfo = read("/proc/cpuinfo")?;
    Ok(Inventory {
        collected_at: crate::clock::now(),
        hostname: read("/proc/sys/kernel/hostname")?.trim().to_string(),
        kernel: read("/proc/sys/kernel/osrelease")?.trim().to_string(),
        os: parse::parse_os_release(&read("/etc/os-release").unwrap_or_default()),
        cpu: parse::parse_lscpu(&lscpu.stdout)?.with_cpuinfo(&cpuinfo),
        memory_bytes: parse::parse_meminfo_total(&read("/proc/meminfo")?)?,
        page_size: page_size()?,
        block_devices: block_devices(runner).await?,
        dmi: cloud::dmi(std::path::Path::new("/sys/class/dmi/id")),
        cloud: None,
    })
}

/// The kernel's page size, read at run time: 4 KiB on x86_64 and Debian's arm64 kernel,
/// 64 KiB on Rocky 8 aarch64. No value is assumed when the C library cannot say.
pub(crate) fn page_size() -> Result<u64> {
    let size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .context("sysconf(_SC_PAGESIZE)")?
        .context("sysconf(_SC_PAGESIZE) gave no page size")?;
    u64::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .with_context(|| format!("sysconf(_SC_PAGESIZE) gave {size}, not a page size"))
}

/// The lsblk columns the inventory and the storage step read. Every one exists in
/// util-linux 2.32.1 (Rocky 8), whose lsblk has no PATH column (it came in 2.33): the
/// device path comes from `-p`, which prints NAME as the path (`/dev/nvme0n1`,
/// `/dev/mapper/<vg>-<lv>`), as PATH would.
pub(crate) const LSBLK_COLUMNS: &str =
    "NAME,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT,PKNAME,TRAN";

/// `lsblk -J -b -p -o …` (pure; the el8 facts tests check it against lsblk 2.32.1).
pub fn lsblk_command() -> CommandSpec {
    CommandSpec::new("lsblk").args(["-J", "-b", "-p", "-o", LSBLK_COLUMNS])
}

/// The block devices as lsblk sees them now (the storage step reads them again).
pub(crate) async fn block_devices(runner: &Runner) -> Result<Vec<BlockDevice>> {
    let lsblk = runner.run(&lsblk_command()).await?;
    Ok(parse::parse_lsblk(&lsblk.stdout)?)
}
