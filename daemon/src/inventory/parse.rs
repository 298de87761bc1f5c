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
    pub threads_per_core: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub sockets: Option<u32>,
    pub numa_nodes: Option<u32>,
    /// Every field lscpu printed, flattened (`Model name` → `Neoverse-N1`).
    pub fields: BTreeMap<String, String>,
}

impl CpuInfo {
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
        model_name: fields.get("Model name").cloned(),
        cpus,
        threads_per_core: num("Thread(s) per core"),
        cores_per_socket: num("Core(s) per socket"),
        sockets: num("Socket(s)"),
        numa_nodes: num("NUMA node(s)"),
        fields,
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

/// RHEL 8's lsblk prints numbers and booleans as strings; newer ones as JSON numbers.
fn loose_u64(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

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

fn block_device(v: &Value) -> BlockDevice {
    let name = opt_str(v.get("name")).unwrap_or_default();
    let mut mountpoints: Vec<String> = match v.get("mountpoints") {
        Some(Value::Array(a)) => a.iter().filter_map(|m| opt_str(Some(m))).collect(),
        _ => Vec::new(),
    };
    if let Some(m) = opt_str(v.get("mountpoint")) {
        mountpoints.push(m);
    }
    BlockDevice {
        path: opt_str(v.get("path")).unwrap_or_else(|| format!("/dev/{name}")),
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

/// Parses `lsblk -J -b -o NAME,PATH,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT(S),PKNAME,TRAN`.
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
