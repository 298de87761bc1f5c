//! Pure parsers for what the inventory reads: `lscpu -J`, `lsblk -J -b`, /proc/meminfo,
//! os-release. Each is tested against captured outputs in tests/fixtures/inventory/.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuInfo {
    pub architecture: String,
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    /// Logical CPUs.
    pub cpus: u32,
    pub(crate) threads_per_core: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub(crate) sockets: Option<u32>,
    pub numa_nodes: Option<u32>,
    /// Every field lscpu printed, flattened (`Model name` → `Neoverse-N1`).
    pub fields: BTreeMap<String, String>,
    /// An Arm CPU's implementer and part codes from /proc/cpuinfo (`0x41:0xd0c`, Arm's
    /// Neoverse-N1); absent on x86.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_part: Option<String>,
}

impl CpuInfo {
    /// Completes what lscpu said with /proc/cpuinfo: the model name when lscpu printed
    /// none (on Arm it names only the parts its table knows, and a Neoverse-N1 under an
    /// older util-linux or a newer part has none), in this order: lscpu's `Model name`,
    /// cpuinfo's `model name` (x86), the Arm part its implementer and part codes name,
    /// lscpu's `BIOS Model name` (SMBIOS, e.g. `Ampere(R) Altra(R) Processor`).
    pub fn with_cpuinfo(mut self, cpuinfo: &str) -> CpuInfo {
        let ids = parse_cpuinfo(cpuinfo);
        self.arm_part = ids
            .arm
            .map(|(implementer, part)| format!("0x{implementer:02x}:0x{part:03x}"));
        if self.model_name.is_none() {
            self.model_name = ids
                .model_name
                .or_else(|| {
                    ids.arm
                        .and_then(|(i, p)| arm_part_name(i, p))
                        .map(str::to_string)
                })
                .or_else(|| known(self.fields.get("BIOS Model name")));
        }
        self
    }

    /// Physical cores when lscpu says, else logical CPUs.
    pub fn cores(&self) -> u32 {
        match (self.cores_per_socket, self.sockets) {
            (Some(c), Some(s)) if c > 0 && s > 0 => c.checked_mul(s).unwrap_or(self.cpus),
            _ => self.cpus,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InventoryParseError {
    #[error("{what}: not valid JSON: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("{what}: {message}")]
    Shape { what: &'static str, message: String },
}

/// Parses `lscpu -J` (flat in util-linux 2.32/RHEL 8; nested `children` in newer ones).
pub fn parse_lscpu(json: &str) -> Result<CpuInfo, InventoryParseError> {
    let v: Value = serde_json::from_str(json).map_err(|source| InventoryParseError::Json {
        what: "lscpu -J",
        source,
    })?;
    let list =
        v.get("lscpu")
            .and_then(Value::as_array)
            .ok_or_else(|| InventoryParseError::Shape {
                what: "lscpu -J",
                message: "no \"lscpu\" array".into(),
            })?;
    let mut fields = BTreeMap::new();
    fn walk(items: &[Value], out: &mut BTreeMap<String, String>) {
        for item in items {
            let field = item.get("field").and_then(Value::as_str).unwrap_or("");
            let key = field.trim().trim_end_matches(':').to_string();
            if let Some(data) = item.get("data").and_then(Value::as_str) {
                out.insert(key, data.trim().to_string());
            }
            if let Some(children) = item.get("children").and_then(Value::as_array) {
                walk(children, out);
            }
        }
    }
    walk(list, &mut fields);
    let num = |k: &str| fields.get(k).and_then(|s| s.parse::<u32>().ok());
    let cpus = num("CPU(s)")
        .filter(|n| *n > 0)
        .ok_or_else(|| InventoryParseError::Shape {
            what: "lscpu -J",
            message: "no \"CPU(s)\" field with at least one CPU".into(),
        })?;
    Ok(CpuInfo {
        architecture: fields.get("Architecture").cloned().unwrap_or_default(),
        vendor: fields.get("Vendor ID").cloned(),
        model_name: known(fields.get("Model name")),
        cpus,
        threads_per_core: num("Thread(s) per core"),
        cores_per_socket: num("Core(s) per socket"),
        sockets: num("Socket(s)"),
        numa_nodes: num("NUMA node(s)"),
        fields,
        arm_part: None,
    })
}

/// A value lscpu printed, unless it is empty or its "unknown" (`-`).
fn known(v: Option<&String>) -> Option<String> {
    v.map(|s| s.trim())
        .filter(|s| !s.is_empty() && *s != "-")
        .map(str::to_string)
}

/// What /proc/cpuinfo says of the first CPU's identity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuIds {
    /// `model name` (x86; Arm kernels print none).
    pub model_name: Option<String>,
    /// `CPU implementer` and `CPU part` (Arm: the MIDR fields).
    pub arm: Option<(u32, u32)>,
}

/// Parses /proc/cpuinfo's first processor block (pure; the x86 and arm64 kernels' formats).
pub fn parse_cpuinfo(text: &str) -> CpuIds {
    let mut ids = CpuIds::default();
    let (mut implementer, mut part) = (None, None);
    let hex = |v: &str| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok();
    for line in text.lines() {
        if line.trim().is_empty() && (ids.model_name.is_some() || implementer.is_some()) {
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "model name" if !value.is_empty() => ids.model_name = Some(value.to_string()),
            "CPU implementer" => implementer = hex(value),
            "CPU part" => part = hex(value),
            _ => {}
        }
    }
    ids.arm = implementer.zip(part);
    ids
}

/// The name of an Arm part by its implementer and part codes (MIDR_EL1), as util-linux's
/// lscpu-arm.c and Arm's technical reference manuals give them, for the server parts the
/// appliance meets (Ampere Altra and Graviton) and the cores emulators report.
pub fn arm_part_name(implementer: u32, part: u32) -> Option<&'static str> {
    Some(match (implementer, part) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd0c) => "Neoverse-N1",
        (0x41, 0xd40) => "Neoverse-V1",
        (0x41, 0xd49) => "Neoverse-N2",
        (0x41, 0xd4f) => "Neoverse-V2",
        (0xc0, 0xac3) => "Ampere-1",
        (0xc0, 0xac4) => "Ampere-1a",
        _ => return None,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockDevice {
    pub name: String,
    pub path: String,
    pub size_bytes: u64,
    /// `disk`, `part`, `lvm`, …
    pub kind: String,
    pub rotational: bool,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub fstype: Option<String>,
    pub mountpoints: Vec<String>,
    pub transport: Option<String>,
    pub children: Vec<BlockDevice>,
}

impl BlockDevice {
    /// A whole NVMe namespace with nothing on it: no partitions, filesystem or holders.
    pub fn is_empty_nvme(&self) -> bool {
        self.kind == "disk"
            && self.name.starts_with("nvme")
            && self.fstype.is_none()
            && self.children.is_empty()
            && self.mountpoints.is_empty()
    }
}

/// util-linux 2.32.1 (Rocky 8) prints every lsblk JSON value as a string (`"size":
/// "2147483648"`); 2.33 and later print JSON numbers. Both are read.
fn loose_u64(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// 2.32.1 prints flags as `"1"`/`"0"`; 2.33 and later as JSON booleans.
fn loose_bool(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "1" || s == "true",
        Some(Value::Number(n)) => n.as_u64() == Some(1),
        _ => false,
    }
}

fn opt_str(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The kernel's short name for a NAME printed with `-p` (`/dev/mapper/vg-lv` → `vg-lv`,
/// `/dev/nvme0n1` → `nvme0n1`); a NAME printed without `-p` is already short.
fn short_name(name: &str) -> &str {
    name.strip_prefix("/dev/mapper/")
        .or_else(|| name.strip_prefix("/dev/"))
        .unwrap_or(name)
}

fn block_device(v: &Value) -> BlockDevice {
    let printed = opt_str(v.get("name")).unwrap_or_default();
    // With -p the NAME column is the device path (what 2.33's PATH column prints).
    let path = opt_str(v.get("path")).unwrap_or_else(|| {
        if printed.starts_with('/') {
            printed.clone()
        } else {
            format!("/dev/{printed}")
        }
    });
    let name = short_name(&printed).to_string();
    let mut mountpoints: Vec<String> = match v.get("mountpoints") {
        Some(Value::Array(a)) => a.iter().filter_map(|m| opt_str(Some(m))).collect(),
        _ => Vec::new(),
    };
    if let Some(m) = opt_str(v.get("mountpoint")) {
        mountpoints.push(m);
    }
    BlockDevice {
        path,
        name,
        size_bytes: loose_u64(v.get("size")).unwrap_or(0),
        kind: opt_str(v.get("type")).unwrap_or_default(),
        rotational: loose_bool(v.get("rota")),
        model: opt_str(v.get("model")),
        serial: opt_str(v.get("serial")),
        fstype: opt_str(v.get("fstype")),
        mountpoints,
        transport: opt_str(v.get("tran")),
        children: v
            .get("children")
            .and_then(Value::as_array)
            .map(|c| c.iter().map(block_device).collect())
            .unwrap_or_default(),
    }
}

/// Parses `lsblk -J -b [-p] -o NAME,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT,PKNAME,TRAN`
/// (see [`super::lsblk_command`]) from util-linux 2.32.1 (every value a string or null, one
/// MOUNTPOINT) and from 2.33 and later (numbers, booleans, a PATH or MOUNTPOINTS column
/// when asked for).
pub fn parse_lsblk(json: &str) -> Result<Vec<BlockDevice>, InventoryParseError> {
    let v: Value = serde_json::from_str(json).map_err(|source| InventoryParseError::Json {
        what: "lsblk -J -b",
        source,
    })?;
    let list = v
        .get("blockdevices")
        .and_then(Value::as_array)
        .ok_or_else(|| InventoryParseError::Shape {
            what: "lsblk -J -b",
            message: "no \"blockdevices\" array".into(),
        })?;
    Ok(list.iter().map(block_device).collect())
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn parse_meminfo_total(text: &str) -> Result<u64, InventoryParseError> {
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            let mut it = rest.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            match it.next() {
                Some("kB") | None => n.checked_mul(1024).filter(|b| *b > 0),
                _ => None,
            }
        })
        .ok_or_else(|| InventoryParseError::Shape {
            what: "/proc/meminfo",
            message: "no readable MemTotal line".into(),
        })
}

/// os-release as key → value with quotes removed.
pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.trim_start().starts_with('#'))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (k.trim().to_string(), v.to_string())
        })
        .collect()
}
