//! Storage planning for the data volume: which devices, whether they may be touched, and
//! the exact commands that build the volume. Pure: a plan's `[storage]` and the inventory's
//! block devices in, a [`StoragePlan`] or a refusal naming the device and what is on it out.
//! (Executing the commands through the runner belongs to the first-boot storage step.)
//!
//! Refuse to destroy data: a device is used only when it is empty (no partition table,
//! filesystem, LVM signature, holders or mounts) or when the plan names it explicitly with
//! `wipe = true`; a mounted device is never used.

use crate::inventory::BlockDevice;
use crate::plan::{Devices, Filesystem, Layout, Storage};

/// Volume group and logical volume the appliance creates.
pub(crate) const VG: &str = "pgappliance";
pub(crate) const LV: &str = "data";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoragePlan {
    /// `devices = "none"`: PGDATA is a directory on the root filesystem.
    Directory,
    /// The volume from an earlier boot is there (every device a PV of our VG, the LV on it).
    AlreadyBuilt { devices: Vec<String> },
    /// Commands to run, in order, and the mount unit to write.
    Build {
        devices: Vec<String>,
        commands: Vec<Vec<String>>,
        mount_unit: String,
        what: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageRefusal {
    #[error("{device} is not a block device on this machine (lsblk does not list it)")]
    Unknown { device: String },
    #[error("{device} {what}; refusing to touch it: set wipe = true in [storage] of the plan (the device is listed in storage.devices) to destroy that")]
    NotEmpty { device: String, what: String },
    #[error("{device} {what}; a mounted device is never wiped")]
    Mounted { device: String, what: String },
    #[error("no empty NVMe namespace found for the data volume{}", seen_note(.seen))]
    NoneFound { seen: Vec<String> },
    #[error("layout \"{layout}\" needs {need} device(s) but {found} {}: {}", if *.found == 1 { "is available" } else { "are available" }, .devices.join(", "))]
    WrongCount {
        layout: &'static str,
        need: &'static str,
        found: usize,
        devices: Vec<String>,
    },
}

fn seen_note(seen: &[String]) -> String {
    if seen.is_empty() {
        String::new()
    } else {
        format!(" ({})", seen.join("; "))
    }
}

/// What is on a device, in words, or `None` when it is empty.
pub(crate) fn occupant(d: &BlockDevice) -> Option<String> {
    if !d.mountpoints.is_empty() {
        return Some(format!("is mounted at {}", d.mountpoints.join(", ")));
    }
    if let Some(fs) = &d.fstype {
        return Some(match fs.as_str() {
            "LVM2_member" => "holds an LVM physical volume".to_string(),
            "linux_raid_member" => "is part of a software RAID".to_string(),
            other => format!("holds a {other} filesystem"),
        });
    }
    if !d.children.is_empty() {
        let parts: Vec<String> = d
            .children
            .iter()
            .map(|c| match (&c.fstype, c.mountpoints.first()) {
                (Some(fs), Some(m)) => format!("{} ({fs}, mounted at {m})", c.name),
                (Some(fs), None) => format!("{} ({fs})", c.name),
                (None, _) => c.name.clone(),
            })
            .collect();
        return Some(format!("holds partitions or volumes: {}", parts.join(", ")));
    }
    None
}

fn mounted_anywhere(d: &BlockDevice) -> Option<String> {
    if !d.mountpoints.is_empty() {
        return Some(d.mountpoints.join(", "));
    }
    d.children.iter().find_map(mounted_anywhere)
}

/// The systemd mount unit name for a mount point (`systemd-escape --path --suffix=mount`).
pub fn mount_unit_name(mount_point: &str) -> String {
    let trimmed = mount_point.trim_matches('/');
    if trimmed.is_empty() {
        return "-.mount".to_string();
    }
    let mut out = String::new();
    for (i, c) in trimmed.chars().enumerate() {
        match c {
            '/' => out.push('-'),
            '.' if i == 0 => out.push_str("\\x2e"),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':' => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
    }
    format!("{out}.mount")
}

fn owned_by_us(d: &BlockDevice) -> bool {
    d.fstype.as_deref() == Some("LVM2_member")
        && d.children
            .iter()
            .any(|c| c.kind == "lvm" && c.name == format!("{VG}-{LV}"))
}

fn find<'a>(devices: &'a [BlockDevice], path: &str) -> Option<&'a BlockDevice> {
    devices
        .iter()
        .find(|d| d.path == path || format!("/dev/{}", d.name) == path)
}

pub fn plan_storage(
    storage: &Storage,
    devices: &[BlockDevice],
) -> Result<StoragePlan, StorageRefusal> {
    let mut chosen: Vec<&BlockDevice> = Vec::new();
    match &storage.devices {
        Devices::None => return Ok(StoragePlan::Directory),
        Devices::Auto => {
            let ours: Vec<&BlockDevice> = devices.iter().filter(|d| owned_by_us(d)).collect();
            if !ours.is_empty() {
                return Ok(StoragePlan::AlreadyBuilt {
                    devices: ours.iter().map(|d| d.path.clone()).collect(),
                });
            }
            let mut seen = Vec::new();
            for d in devices
                .iter()
                .filter(|d| d.kind == "disk" && d.name.starts_with("nvme"))
            {
                match occupant(d) {
                    None => chosen.push(d),
                    Some(what) => seen.push(format!("{} {what}", d.path)),
                }
            }
            if chosen.is_empty() {
                return Err(StorageRefusal::NoneFound { seen });
            }
        }
        Devices::List(paths) => {
            let found: Vec<&BlockDevice> = paths
                .iter()
                .map(|p| {
                    find(devices, p).ok_or_else(|| StorageRefusal::Unknown { device: p.clone() })
                })
                .collect::<Result<_, _>>()?;
            if found.iter().all(|d| owned_by_us(d)) {
                return Ok(StoragePlan::AlreadyBuilt {
                    devices: found.iter().map(|d| d.path.clone()).collect(),
                });
            }
            for d in &found {
                if let Some(m) = mounted_anywhere(d) {
                    return Err(StorageRefusal::Mounted {
                        device: d.path.clone(),
                        what: format!("is mounted at {m}"),
                    });
                }
                if let Some(what) = occupant(d) {
                    if !storage.wipe {
                        return Err(StorageRefusal::NotEmpty {
                            device: d.path.clone(),
                            what,
                        });
                    }
                }
            }
            chosen = found;
        }
    }
    let paths: Vec<String> = chosen.iter().map(|d| d.path.clone()).collect();
    let (name, need, ok) = match storage.layout {
        Layout::Single => ("single", "exactly 1", paths.len() == 1),
        Layout::Stripe => ("stripe", "at least 2", paths.len() >= 2),
        Layout::Linear => ("linear", "at least 1", !paths.is_empty()),
    };
    if !ok {
        return Err(StorageRefusal::WrongCount {
            layout: name,
            need,
            found: paths.len(),
            devices: paths,
        });
    }
    let mut commands: Vec<Vec<String>> = Vec::new();
    let sv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Every claimed device is wiped first, not only those lsblk shows something on: lvm2
    // 2.03's partition filter rejects a disk that carries only a partition table (lsblk
    // 2.32.1 has no PTTYPE column to show one), and the device is empty or named with
    // `wipe = true` by now.
    for d in &chosen {
        commands.push(sv(&["wipefs", "--all", &d.path]));
    }
    // --yes on every LVM command that may ask: with stdin at /dev/null lvm2 answers a
    // prompt with "n" and aborts.
    let mut pv = sv(&["pvcreate", "--yes"]);
    pv.extend(paths.iter().cloned());
    commands.push(pv);
    let mut vg = sv(&["vgcreate", "--yes", VG]);
    vg.extend(paths.iter().cloned());
    commands.push(vg);
    let mut lv = sv(&["lvcreate", "--yes", "--name", LV, "--extents", "100%FREE"]);
    if storage.layout == Layout::Stripe {
        let stripe_k = crate::plan::parse_size(&storage.stripe_size).unwrap_or(64 << 10) / 1024;
        lv.extend([
            "--stripes".to_string(),
            paths.len().to_string(),
            "--stripesize".to_string(),
            format!("{stripe_k}k"),
        ]);
    }
    lv.push(VG.to_string());
    commands.push(lv);
    let what = format!("/dev/{VG}/{LV}");
    commands.push(match storage.filesystem {
        Filesystem::Xfs => sv(&["mkfs.xfs", "-f", &what]),
        Filesystem::Ext4 => sv(&["mkfs.ext4", "-F", &what]),
    });
    Ok(StoragePlan::Build {
        devices: paths,
        commands,
        mount_unit: mount_unit_name(&storage.mount_point),
        what,
    })
}

/// Removes the volume group of an interrupted build (its exit status 5 means there is none).
pub(crate) fn clear_interrupted_build_command() -> Vec<String> {
    ["vgremove", "--force", "--yes", VG]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The mount unit's text (pure).
pub fn mount_unit(what: &str, where_: &str, fs: Filesystem) -> String {
    let fstype = fs.as_str();
    format!(
        "# Written by pgapplianced: the data volume holding PGDATA.\n\
         [Unit]\n\
         Description=pgappliance data volume\n\
         \n\
         [Mount]\n\
         What={what}\n\
         Where={where_}\n\
         Type={fstype}\n\
         # No access-time writes while benchmarking.\n\
         Options=noatime\n\
         \n\
         [Install]\n\
         WantedBy=local-fs.target\n"
    )
}

#[cfg(test)]
mod tests {
    use super::mount_unit_name;

    #[test]
    fn mount_units_are_escaped_like_systemd() {
        assert_eq!(
            mount_unit_name("/var/lib/pgappliance/pgdata"),
            "var-lib-pgappliance-pgdata.mount"
        );
        assert_eq!(mount_unit_name("/home/PG14"), "home-PG14.mount");
        assert_eq!(mount_unit_name("/data-1/"), "data\\x2d1.mount");
        assert_eq!(mount_unit_name("/.hidden"), "\\x2ehidden.mount");
        assert_eq!(mount_unit_name("/"), "-.mount");
    }
}
