//! Pure readers of what the host and the server show, and the comparison of each against
//! what the plan asked for. Tested on fixtures in `daemon/tests/fixtures/in_effect/`.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The word of `cmdline` that sets the same thing as `arg` (`key=…` or the bare word).
pub(crate) fn cmdline_word(cmdline: &str, arg: &str) -> Option<String> {
    let key = arg.split('=').next().unwrap_or(arg);
    // The last one wins on the kernel's command line.
    cmdline
        .split_whitespace()
        .rfind(|w| *w == key || w.split('=').next() == Some(key))
        .map(str::to_string)
}

/// What a tuned profile file sets that can be read back (pure): its `include`s and
/// `[sysctl]`, `[cpu] governor`, `[vm] transparent_hugepages` (or the singular alias).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TunedProfileFile {
    pub(crate) includes: Vec<String>,
    pub(crate) sysctls: BTreeMap<String, String>,
    pub(crate) governor: Option<String>,
    pub(crate) transparent_hugepages: Option<String>,
}

pub(crate) fn parse_tuned_profile(text: &str) -> TunedProfileFile {
    let mut out = TunedProfileFile::default();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim().to_string();
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match (section.as_str(), k) {
            ("main", "include") => out.includes.extend(
                v.split([',', ' '])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            ),
            ("sysctl", _) => {
                out.sysctls.insert(k.to_string(), v.to_string());
            }
            ("cpu", "governor") => out.governor = Some(v.to_string()),
            ("vm", "transparent_hugepages" | "transparent_hugepage") => {
                out.transparent_hugepages = Some(v.to_string())
            }
            _ => {}
        }
    }
    out
}

/// A profile and the profiles it includes, merged the way tuned does: the including
/// profile's values win (pure; `files` are the texts, the included ones first).
pub(crate) fn merge_profiles(files: &[TunedProfileFile]) -> TunedProfileFile {
    let mut out = TunedProfileFile::default();
    for f in files {
        out.includes.extend(f.includes.iter().cloned());
        out.sysctls
            .extend(f.sysctls.iter().map(|(k, v)| (k.clone(), v.clone())));
        if f.governor.is_some() {
            out.governor = f.governor.clone();
        }
        if f.transparent_hugepages.is_some() {
            out.transparent_hugepages = f.transparent_hugepages.clone();
        }
    }
    out
}

/// `/proc/sys/…` path of a sysctl name (`vm.swappiness` → `vm/swappiness`).
pub(crate) fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// Whether a sysctl's value as read back equals the planned one (white space as tuned
/// normalises it: any run of blanks is one separator).
pub(crate) fn sysctl_matches(planned: &str, actual: &str) -> bool {
    let a: Vec<&str> = planned.split_whitespace().collect();
    let b: Vec<&str> = actual.split_whitespace().collect();
    a == b
}

/// Whether the governor in effect is one the profile allows (`performance|powersave`:
/// tuned takes the first the driver offers).
pub(crate) fn governor_matches(planned: &str, actual: &str) -> bool {
    planned.split('|').any(|g| g.trim() == actual.trim())
}

/// One mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MountInfo {
    pub(crate) mount_point: String,
    pub(crate) source: String,
    pub(crate) fstype: String,
    /// Per-mount options, then the filesystem's own (super) options.
    pub(crate) options: Vec<String>,
}

fn unescape_octal(s: &str) -> String {
    // mountinfo writes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Some(n) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount at `mount_point` in `/proc/self/mountinfo` text (the last one: it hides the
/// earlier), or `None` (pure).
pub(crate) fn parse_mountinfo(text: &str, mount_point: &str) -> Option<MountInfo> {
    let want = match mount_point.trim_end_matches('/') {
        "" => "/",
        m => m,
    };
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            let point = unescape_octal(l.get(4)?);
            if point != want {
                return None;
            }
            let mut options: Vec<String> = l.get(5)?.split(',').map(str::to_string).collect();
            if let Some(sup) = r.get(2) {
                options.extend(sup.split(',').map(str::to_string));
            }
            Some(MountInfo {
                mount_point: point,
                fstype: r.first()?.to_string(),
                source: unescape_octal(r.get(1)?),
                options,
            })
        })
        .next_back()
}

/// One segment of a logical volume from `lvs --reportformat json --units b --nosuffix -o
/// lv_name,stripes,stripe_size,devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LvSegment {
    pub(crate) lv_name: String,
    pub(crate) stripes: u32,
    pub(crate) stripe_size_bytes: u64,
    /// The physical volumes, without lvm's `(first extent)` suffix.
    pub(crate) devices: Vec<String>,
}

fn json_u64(v: &serde_json::Value, what: &str) -> Result<u64> {
    // lvm2 2.03.14 prints every value as a string; later versions may not.
    match v {
        serde_json::Value::String(s) if s.trim().is_empty() => Ok(0),
        serde_json::Value::String(s) => s
            .trim()
            .parse()
            .with_context(|| format!("lvs {what} \"{s}\" is not a number of bytes")),
        serde_json::Value::Number(n) => n
            .as_u64()
            .with_context(|| format!("lvs {what} {n} is not a whole number")),
        other => bail!("lvs {what} is {other}, not a number"),
    }
}

/// Parses the lvs report (pure).
pub(crate) fn parse_lvs(text: &str) -> Result<Vec<LvSegment>> {
    let v: serde_json::Value = serde_json::from_str(text).context("lvs output is not JSON")?;
    let reports = v
        .get("report")
        .and_then(|r| r.as_array())
        .context("lvs output has no \"report\" array")?;
    let mut out = Vec::new();
    for r in reports {
        let Some(lvs) = r.get("lv").and_then(|l| l.as_array()) else {
            continue;
        };
        for lv in lvs {
            let name = lv
                .get("lv_name")
                .and_then(|n| n.as_str())
                .context("an lvs row has no lv_name")?;
            let devices = lv
                .get("devices")
                .and_then(|d| d.as_str())
                .unwrap_or("")
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.split('(').next().unwrap_or(d).to_string())
                .collect();
            out.push(LvSegment {
                lv_name: name.to_string(),
                stripes: json_u64(
                    lv.get("stripes").unwrap_or(&serde_json::Value::Null),
                    "stripes",
                )? as u32,
                stripe_size_bytes: json_u64(
                    lv.get("stripe_size").unwrap_or(&serde_json::Value::Null),
                    "stripe_size",
                )?,
                devices,
            });
        }
    }
    Ok(out)
}

/// A `pg_settings` row of a planned setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgSettingRow {
    pub(crate) name: String,
    pub(crate) setting: String,
    pub(crate) unit: Option<String>,
    /// `bool`, `enum`, `integer`, `real`, `string`.
    pub(crate) vartype: String,
    pub(crate) enumvals: Vec<String>,
}

/// Rows of `SELECT name, setting, unit, vartype, array_to_string(enumvals, ',')` as
/// tab-separated text (psql -At), for fixtures (pure).
#[cfg(test)]
fn parse_pg_settings_tsv(text: &str) -> Vec<PgSettingRow> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let get = |i: usize| f.get(i).copied().unwrap_or("").to_string();
            PgSettingRow {
                name: get(0),
                setting: get(1),
                unit: Some(get(2)).filter(|u| !u.is_empty()),
                vartype: get(3),
                enumvals: get(4)
                    .split(',')
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect(),
            }
        })
        .collect()
}

impl PgSettingRow {
    /// The value as `SHOW` would print it with its unit (`16384` × `8kB` → `16384 8kB`).
    pub(crate) fn display(&self) -> String {
        match &self.unit {
            Some(u) => format!("{} ({})", self.setting, u),
            None => self.setting.clone(),
        }
    }
}

const TRUE_WORDS: [&str; 4] = ["on", "true", "yes", "1"];
const FALSE_WORDS: [&str; 4] = ["off", "false", "no", "0"];

fn bool_word(s: &str) -> Option<bool> {
    let s = s.trim().to_ascii_lowercase();
    if TRUE_WORDS.contains(&s.as_str()) || (s.len() > 1 && "true".starts_with(&s)) {
        Some(true)
    } else if FALSE_WORDS.contains(&s.as_str()) || (s.len() > 1 && "false".starts_with(&s)) {
        Some(false)
    } else {
        None
    }
}

/// Base-unit size of a unit: bytes for memory units, microseconds for time units.
fn unit_size(u: &str) -> Option<(f64, &'static str)> {
    Some(match u {
        "B" => (1.0, "mem"),
        "kB" => (1024.0, "mem"),
        "MB" => (1048576.0, "mem"),
        "GB" => (1073741824.0, "mem"),
        "TB" => (1099511627776.0, "mem"),
        "us" => (1.0, "time"),
        "ms" => (1e3, "time"),
        "s" => (1e6, "time"),
        "min" => (60e6, "time"),
        "h" => (3600e6, "time"),
        "d" => (86400e6, "time"),
        _ => return None,
    })
}

/// `pg_settings.unit` such as `8kB` or `16MB`: multiplier × unit.
fn column_unit(u: &str) -> Option<(f64, &'static str)> {
    let split = u.find(|c: char| !c.is_ascii_digit()).unwrap_or(u.len());
    let (n, rest) = u.split_at(split);
    let mult: f64 = if n.is_empty() { 1.0 } else { n.parse().ok()? };
    let (size, kind) = unit_size(rest)?;
    Some((mult * size, kind))
}

/// A number with an optional unit (`64MB`, `15min`, `0.9`, `-1`).
fn number_with_unit(s: &str) -> Option<(f64, Option<&str>)> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(s.len());
    let (n, u) = s.split_at(split);
    let n: f64 = n.trim().parse().ok()?;
    let u = u.trim();
    Some((n, (!u.is_empty()).then_some(u)))
}

/// Whether `planned` (as written in the plan or computed) is what `row` says is in effect
/// (pure). Units are converted to the setting's own unit and rounded as PostgreSQL rounds;
/// booleans and enum aliases (`wal_compression = on` runs as `pglz`) are compared by meaning.
pub(crate) fn setting_matches(planned: &str, row: &PgSettingRow) -> bool {
    let p = planned.trim();
    let actual = row.setting.trim();
    match row.vartype.as_str() {
        "bool" => bool_word(p).is_some() && bool_word(p) == bool_word(actual),
        "enum" => {
            if p.eq_ignore_ascii_case(actual) {
                return true;
            }
            // A boolean word may run under another name (`wal_compression = on` runs as
            // `pglz` in 15): it matches a value that is not itself a boolean word, by
            // meaning; on/off against off/on is a mismatch.
            match (bool_word(p), bool_word(actual)) {
                (Some(want), Some(have)) => want == have,
                (Some(want), None) => want,
                _ => false,
            }
        }
        "integer" | "real" => {
            let Some((pv, pu)) = number_with_unit(p) else {
                return false;
            };
            let Ok(av) = actual.parse::<f64>() else {
                return false;
            };
            let want = match (pu, row.unit.as_deref().and_then(column_unit)) {
                (None, _) => pv,
                (Some(u), Some((col, kind))) => match unit_size(u) {
                    Some((size, k)) if k == kind => pv * size / col,
                    _ => return false,
                },
                (Some(_), None) => return false,
            };
            if row.vartype == "integer" {
                want.round() == av
            } else {
                (want - av).abs() <= 1e-9 * want.abs().max(1.0)
            }
        }
        _ => p.trim_matches('\'') == actual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/in_effect/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture")
    }

    #[test]
    fn kernel_words_are_found_by_key() {
        let c =
            "BOOT_IMAGE=/vmlinuz ro transparent_hugepage=always quiet transparent_hugepage=never";
        assert_eq!(
            cmdline_word(c, "transparent_hugepage=never").as_deref(),
            Some("transparent_hugepage=never")
        );
        assert_eq!(cmdline_word(c, "quiet").as_deref(), Some("quiet"));
        assert_eq!(cmdline_word(c, "nosmt"), None);
        assert_eq!(cmdline_word("a=1", "a=2").as_deref(), Some("a=1"));
    }

    #[test]
    fn tuned_profiles_are_read_and_merged() {
        let own = parse_tuned_profile(crate::assets::TUNED_POSTGRESQL);
        assert_eq!(own.includes, vec!["throughput-performance"]);
        assert_eq!(own.governor.as_deref(), Some("performance"));
        assert_eq!(own.transparent_hugepages.as_deref(), Some("never"));
        assert_eq!(own.sysctls["vm.swappiness"], "1");
        assert_eq!(own.sysctls.len(), 12);
        let parent = parse_tuned_profile(&fixture("tuned-throughput-performance.composed.conf"));
        assert_eq!(parent.sysctls["vm.dirty_ratio"], "40");
        assert!(parent.transparent_hugepages.is_none());
        let merged = merge_profiles(&[parent, own]);
        // The including profile wins; the parent's own keys stay.
        assert_eq!(merged.sysctls["vm.dirty_ratio"], "2");
        assert_eq!(merged.sysctls["vm.swappiness"], "1");
        assert_eq!(
            merged.sysctls["kernel.numa_balancing"],
            "${f:exec:cat:/dev/null}"
        );
        assert_eq!(sysctl_path("vm.dirty_ratio"), "/proc/sys/vm/dirty_ratio");
        assert!(sysctl_matches(
            "4096\t87380   6291456",
            "4096 87380 6291456"
        ));
        assert!(!sysctl_matches("1", "10"));
        assert!(governor_matches("performance|powersave", "powersave"));
        assert!(!governor_matches("performance", "schedutil"));
    }

    #[test]
    fn mountinfo_finds_the_data_volume() {
        let text = fixture("mountinfo-xfs-stripe.composed.txt");
        let m = parse_mountinfo(&text, "/var/lib/pgappliance/pgdata/").expect("mounted");
        assert_eq!(m.source, "/dev/mapper/pgappliance-data");
        assert_eq!(m.fstype, "xfs");
        assert!(m.options.contains(&"noatime".to_string()));
        assert!(m.options.contains(&"swidth=256".to_string()));
        // The later mount hides the earlier one.
        let shm = parse_mountinfo(&text, "/dev/shm").expect("shm");
        assert!(shm.options.contains(&"size=1024k".to_string()));
        assert_eq!(
            parse_mountinfo(&text, "/srv/with space")
                .map(|m| m.fstype)
                .as_deref(),
            Some("ext4")
        );
        assert_eq!(
            parse_mountinfo(&text, "/").map(|m| m.fstype).as_deref(),
            Some("xfs")
        );
        assert_eq!(parse_mountinfo(&text, "/pgdata"), None);
    }

    #[test]
    fn lvs_reports_strings_and_numbers() {
        let segs = parse_lvs(&fixture("lvs-2.03.14-stripe.composed.json")).expect("parses");
        assert_eq!(segs.len(), 2);
        assert_eq!(
            segs[0],
            LvSegment {
                lv_name: "data".into(),
                stripes: 2,
                stripe_size_bytes: 65536,
                devices: vec!["/dev/nvme0n1".into(), "/dev/nvme1n1".into()],
            }
        );
        let n = parse_lvs(&fixture("lvs-numbers.composed.json")).expect("parses");
        assert_eq!((n[0].stripes, n[0].stripe_size_bytes), (1, 0));
        assert!(parse_lvs("not json").is_err());
        let bad = parse_lvs(
            r#"{"report":[{"lv":[{"lv_name":"data","stripes":"two","stripe_size":"0","devices":""}]}]}"#,
        );
        assert!(format!("{:#}", bad.expect_err("a word")).contains("stripes \"two\""));
    }

    #[test]
    fn pg_settings_are_compared_in_their_own_units() {
        let rows = parse_pg_settings_tsv(&fixture("pg_settings-15-captured.tsv"));
        let row = |n: &str| rows.iter().find(|r| r.name == n).expect(n).clone();
        let cases: [(&str, &str, bool); 24] = [
            ("shared_buffers", "128MB", true),
            ("shared_buffers", "16384", true),
            ("shared_buffers", "131072kB", true),
            ("shared_buffers", "256MB", false),
            ("shared_buffers", "128ms", false),
            ("max_wal_size", "1GB", true),
            ("max_wal_size", "1024", true),
            ("max_wal_size", "2GB", false),
            ("work_mem", "4MB", true),
            ("work_mem", "4096kB", true),
            ("checkpoint_timeout", "15min", true),
            ("checkpoint_timeout", "900s", true),
            ("checkpoint_timeout", "5min", false),
            ("vacuum_cost_delay", "2ms", true),
            ("vacuum_cost_delay", "2000us", true),
            ("random_page_cost", "1.1", true),
            ("random_page_cost", "4", false),
            ("hash_mem_multiplier", "2.0", true),
            ("huge_pages", "off", true),
            ("huge_pages", "on", false),
            ("wal_compression", "on", true),
            ("wal_compression", "off", false),
            ("synchronous_commit", "OFF", true),
            ("effective_io_concurrency", "200", true),
        ];
        for (name, planned, want) in cases {
            assert_eq!(
                setting_matches(planned, &row(name)),
                want,
                "{name} planned {planned} vs {:?}",
                row(name)
            );
        }
        assert_eq!(row("shared_buffers").display(), "16384 (8kB)");
        let b = PgSettingRow {
            name: "fsync".into(),
            setting: "on".into(),
            unit: None,
            vartype: "bool".into(),
            enumvals: vec![],
        };
        assert!(setting_matches("true", &b) && setting_matches("ON", &b));
        assert!(!setting_matches("off", &b) && !setting_matches("maybe", &b));
        let s = PgSettingRow {
            vartype: "string".into(),
            setting: "*".into(),
            ..b
        };
        assert!(setting_matches("*", &s) && !setting_matches("localhost", &s));
    }
}
