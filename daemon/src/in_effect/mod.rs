//! Proof that the tuning took effect: after the tuning steps (on the appliance after the
//! OS tuning and its reboot) the kernel command line, THP, tuned's active profile and its
//! verify result, the profile's sysctls read back from /proc/sys, the CPU governor, the
//! data volume's mount and LVM layout, and PostgreSQL's settings are read and each planned
//! value is compared with what is in effect. The result goes into results.json
//! (`tuning_in_effect`) and the report; a planned value that is not in effect fails the
//! step. Local mode plans no OS tuning: it records what the host shows and checks only the
//! PostgreSQL settings.
//!
//! [`evaluate`] is pure (planned + observed → checks); [`observe`] reads the host.

pub(crate) mod parse;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::plan::{Devices, Layout, Plan};
use crate::platform::thp_mode;
use crate::postgres::sql::{literal, Session};
use crate::runner::{CommandSpec, Runner};
pub(crate) use parse::{LvSegment, MountInfo, PgSettingRow, TunedProfileFile};

/// What results.json records under `tuning_in_effect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningInEffect {
    pub(crate) collected_at: String,
    /// OS tuning was planned on this host (the appliance); false in local mode.
    pub(crate) os_tuning_planned: bool,
    /// `/proc/cmdline`.
    pub(crate) kernel_cmdline: Option<String>,
    /// The bracketed mode of /sys/kernel/mm/transparent_hugepage/enabled.
    pub(crate) transparent_hugepage: Option<String>,
    /// tuned's `active_profile` and `verify_profile` over D-Bus (null when no profile is planned).
    pub(crate) tuned: Option<TunedInEffect>,
    /// The CPUs' scaling governors (distinct, comma-separated), or "none" without cpufreq.
    pub(crate) cpu_governor: String,
    /// The data volume's mount (null without one).
    pub(crate) data_volume: Option<MountInfo>,
    /// The data volume's LVM segments (empty without one).
    pub(crate) lvm: Vec<LvSegment>,
    pub(crate) checks: Vec<Check>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TunedInEffect {
    pub(crate) active_profile: String,
    /// tuned's own verdict on every setting of the profile (false also when the machine
    /// lacks a setting, e.g. a CPU governor in a VM; the checks below say which).
    pub(crate) verified: bool,
}

/// One planned value and what is in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Check {
    /// `kernel`, `tuned`, `sysctl`, `cpu`, `volume`, `lvm`, `postgres`.
    pub(crate) area: String,
    pub(crate) name: String,
    pub(crate) planned: String,
    pub(crate) actual: Option<String>,
    pub(crate) status: CheckStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckStatus {
    InEffect,
    NotInEffect,
    /// This machine has no such setting (a sysctl the kernel lacks, no cpufreq): recorded,
    /// not a failure, as tuned itself skips it.
    Absent,
}

impl TuningInEffect {
    pub(crate) fn not_in_effect(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| c.status == CheckStatus::NotInEffect)
            .collect()
    }

    /// An error naming every planned value that is not in effect, planned vs actual.
    pub(crate) fn ensure(&self) -> Result<()> {
        let bad = self.not_in_effect();
        if bad.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = bad
            .iter()
            .map(|c| {
                format!(
                    "{} {}: planned {}, in effect {}",
                    c.area,
                    c.name,
                    c.planned,
                    c.actual.as_deref().unwrap_or("nothing")
                )
            })
            .collect();
        bail!("planned tuning is not in effect: {}", list.join("; "))
    }
}

/// The data volume the plan asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedVolume {
    pub(crate) mount_point: String,
    pub(crate) fstype: String,
    pub(crate) layout: Layout,
    pub(crate) stripe_size_bytes: u64,
    /// The number of devices when the plan lists them (`auto` takes what it finds).
    pub(crate) devices_listed: Option<usize>,
}

/// The OS tuning the plan asks for (the appliance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedOs {
    pub(crate) kernel_args: Vec<String>,
    /// None for `tuned_profile = "none"`.
    pub(crate) tuned_profile: Option<String>,
    /// The profile's readable settings, its includes merged.
    pub(crate) profile: TunedProfileFile,
    pub(crate) volume: Option<PlannedVolume>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub(crate) os: Option<PlannedOs>,
    /// The settings applied with ALTER SYSTEM.
    pub(crate) pg_settings: BTreeMap<String, String>,
}

/// What the host and the server show.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Observed {
    pub(crate) kernel_cmdline: Option<String>,
    pub(crate) thp: Option<String>,
    pub(crate) tuned: Option<TunedInEffect>,
    /// scaling_governor of each CPU (empty without cpufreq).
    pub(crate) governors: Vec<String>,
    /// Each planned sysctl's value from /proc/sys (None: the kernel has no such sysctl).
    pub(crate) sysctls: BTreeMap<String, Option<String>>,
    pub(crate) mount: Option<MountInfo>,
    pub(crate) lvm: Vec<LvSegment>,
    pub(crate) pg_rows: Vec<PgSettingRow>,
}

fn check(area: &str, name: &str, planned: &str, actual: Option<String>, ok: bool) -> Check {
    Check {
        area: area.into(),
        name: name.into(),
        planned: planned.into(),
        actual,
        status: if ok {
            CheckStatus::InEffect
        } else {
            CheckStatus::NotInEffect
        },
    }
}

/// The planned sysctls whose values can be compared (tuned's `${…}` expressions cannot).
pub(crate) fn comparable_sysctls(p: &TunedProfileFile) -> BTreeMap<String, String> {
    p.sysctls
        .iter()
        .filter(|(_, v)| !v.contains("${"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Planned against observed (pure).
pub(crate) fn evaluate(planned: &Planned, seen: &Observed, collected_at: String) -> TuningInEffect {
    let mut checks = Vec::new();
    let mut governors: Vec<String> = seen.governors.clone();
    governors.sort();
    governors.dedup();
    let cpu_governor = if governors.is_empty() {
        "none".to_string()
    } else {
        governors.join(",")
    };
    if let Some(os) = &planned.os {
        let cmdline = seen.kernel_cmdline.clone().unwrap_or_default();
        for a in &os.kernel_args {
            let w = parse::cmdline_word(&cmdline, a);
            let ok = w.as_deref() == Some(a.as_str());
            checks.push(check("kernel", a, a, w, ok));
        }
        let thp_arg = os
            .kernel_args
            .iter()
            .find_map(|a| a.strip_prefix("transparent_hugepage="));
        // tuned ignores its [vm] value when the command line sets one (tuned 2.18).
        if let Some(want) = thp_arg.or(os
            .tuned_profile
            .as_ref()
            .and(os.profile.transparent_hugepages.as_deref()))
        {
            checks.push(check(
                "kernel",
                "transparent_hugepage",
                want,
                seen.thp.clone(),
                seen.thp.as_deref() == Some(want),
            ));
        }
        if let Some(profile) = &os.tuned_profile {
            // tuned 2.18 answers "" for no profile, and also when polkit refuses the call.
            let active = seen
                .tuned
                .as_ref()
                .map(|t| t.active_profile.clone())
                .filter(|a| !a.is_empty());
            let ok = active.as_deref() == Some(profile.as_str());
            checks.push(check("tuned", "active_profile", profile, active, ok));
            for (name, want) in comparable_sysctls(&os.profile) {
                match seen.sysctls.get(&name).cloned().flatten() {
                    Some(have) => {
                        let ok = parse::sysctl_matches(&want, &have);
                        checks.push(check("sysctl", &name, &want, Some(have), ok));
                    }
                    None => checks.push(Check {
                        status: CheckStatus::Absent,
                        ..check("sysctl", &name, &want, None, false)
                    }),
                }
            }
            if let Some(want) = &os.profile.governor {
                if governors.is_empty() {
                    checks.push(Check {
                        status: CheckStatus::Absent,
                        ..check("cpu", "governor", want, Some("none".into()), false)
                    });
                } else {
                    let ok = governors.iter().all(|g| parse::governor_matches(want, g));
                    checks.push(check(
                        "cpu",
                        "governor",
                        want,
                        Some(cpu_governor.clone()),
                        ok,
                    ));
                }
            }
        }
        if let Some(v) = &os.volume {
            volume_checks(v, seen, &mut checks);
        }
    }
    for (name, want) in &planned.pg_settings {
        let row = seen
            .pg_rows
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name));
        let ok = row.is_some_and(|r| parse::setting_matches(want, r));
        checks.push(check(
            "postgres",
            name,
            want,
            row.map(PgSettingRow::display),
            ok,
        ));
    }
    TuningInEffect {
        collected_at,
        os_tuning_planned: planned.os.is_some(),
        kernel_cmdline: seen.kernel_cmdline.clone(),
        transparent_hugepage: seen.thp.clone(),
        tuned: seen.tuned.clone(),
        cpu_governor,
        data_volume: seen.mount.clone(),
        lvm: seen.lvm.clone(),
        checks,
    }
}

fn volume_checks(v: &PlannedVolume, seen: &Observed, checks: &mut Vec<Check>) {
    let m = seen.mount.as_ref();
    checks.push(check(
        "volume",
        &format!("{} filesystem", v.mount_point),
        &v.fstype,
        Some(m.map_or_else(
            || "not mounted".to_string(),
            |m| format!("{} on {}", m.fstype, m.source),
        )),
        m.is_some_and(|m| m.fstype == v.fstype),
    ));
    if let Some(m) = m {
        checks.push(check(
            "volume",
            &format!("{} options", v.mount_point),
            "noatime",
            Some(m.options.join(",")),
            m.options.iter().any(|o| o == "noatime"),
        ));
    }
    let segs: Vec<&LvSegment> = seen
        .lvm
        .iter()
        .filter(|s| s.lv_name == crate::storage::LV)
        .collect();
    let mut devices: Vec<&str> = segs
        .iter()
        .flat_map(|s| s.devices.iter().map(String::as_str))
        .collect();
    devices.sort();
    devices.dedup();
    let stripes: Vec<String> = segs.iter().map(|s| s.stripes.to_string()).collect();
    let actual = (!segs.is_empty()).then(|| stripes.join(","));
    match v.layout {
        Layout::Stripe => {
            let want = v.devices_listed.unwrap_or(devices.len()).max(2);
            checks.push(check(
                "lvm",
                "stripes",
                &want.to_string(),
                actual,
                !segs.is_empty() && segs.iter().all(|s| s.stripes as usize == want),
            ));
            let sizes: Vec<String> = segs
                .iter()
                .map(|s| s.stripe_size_bytes.to_string())
                .collect();
            checks.push(check(
                "lvm",
                "stripe_size_bytes",
                &v.stripe_size_bytes.to_string(),
                (!segs.is_empty()).then(|| sizes.join(",")),
                !segs.is_empty()
                    && segs
                        .iter()
                        .all(|s| s.stripe_size_bytes == v.stripe_size_bytes),
            ));
        }
        Layout::Linear | Layout::Single => checks.push(check(
            "lvm",
            "stripes",
            "1",
            actual,
            !segs.is_empty() && segs.iter().all(|s| s.stripes == 1),
        )),
    }
}

/// What the plan asks of this host; `os_tuning` says whether the host tunes the OS (the
/// appliance does, local mode does not).
pub(crate) fn planned(
    plan: &Plan,
    os_tuning: bool,
    profile: TunedProfileFile,
    pg_settings: &BTreeMap<String, String>,
) -> Planned {
    let os = os_tuning.then(|| {
        let s = &plan.storage;
        PlannedOs {
            kernel_args: plan.tuning.kernel_args.clone(),
            tuned_profile: (plan.tuning.tuned_profile != "none")
                .then(|| plan.tuning.tuned_profile.clone()),
            profile,
            volume: (s.devices != Devices::None).then(|| PlannedVolume {
                mount_point: s.mount_point.clone(),
                fstype: s.filesystem.as_str().into(),
                layout: s.layout,
                stripe_size_bytes: crate::plan::parse_size(&s.stripe_size).unwrap_or(0),
                devices_listed: match &s.devices {
                    Devices::List(l) => Some(l.len()),
                    _ => None,
                },
            }),
        }
    });
    Planned {
        os,
        pg_settings: pg_settings.clone(),
    }
}

/// Reads a tuned profile and what it includes from `dirs` (the first that has it), the
/// included ones first (depth-limited; a missing file reads as empty).
pub(crate) fn load_tuned_profile(name: &str, dirs: &[PathBuf]) -> TunedProfileFile {
    fn walk(name: &str, dirs: &[PathBuf], depth: usize, out: &mut Vec<TunedProfileFile>) {
        if depth > 8 {
            return;
        }
        let Some(text) = dirs
            .iter()
            .find_map(|d| std::fs::read_to_string(d.join(name).join("tuned.conf")).ok())
        else {
            tracing::warn!(
                profile = name,
                "tuned profile not found: its settings are not checked"
            );
            return;
        };
        let f = parse::parse_tuned_profile(&text);
        for inc in &f.includes {
            walk(inc, dirs, depth + 1, out);
        }
        out.push(f);
    }
    let mut files = Vec::new();
    for n in name.split_whitespace() {
        walk(n, dirs, 0, &mut files);
    }
    parse::merge_profiles(&files)
}

fn read_opt(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The lvs command whose report [`parse::parse_lvs`] reads.
pub(crate) fn lvs_command() -> CommandSpec {
    CommandSpec::new("lvs").args([
        "--reportformat",
        "json",
        "--units",
        "b",
        "--nosuffix",
        "-o",
        "lv_name,stripes,stripe_size,devices",
        crate::storage::VG,
    ])
}

/// Reads what the host and the server show for `planned`. `tuned` is asked only when a
/// profile is planned (the appliance's systemd connection). `machine` says where the
/// machine's file at an absolute path is (the path itself but for the tests' stand-in).
pub(crate) async fn observe(
    planned: &Planned,
    runner: &Runner,
    tuned: Option<&crate::systemd::Systemd>,
    session: &Session,
    raw_dir: &std::path::Path,
    machine: &dyn Fn(&str) -> std::path::PathBuf,
) -> Result<Observed> {
    let mut seen = Observed {
        kernel_cmdline: read_opt(&machine("/proc/cmdline")),
        thp: read_opt(&machine("/sys/kernel/mm/transparent_hugepage/enabled"))
            .and_then(|t| thp_mode(&t)),
        ..Observed::default()
    };
    if let Ok(entries) = std::fs::read_dir(machine("/sys/devices/system/cpu")) {
        for e in entries.flatten() {
            let p = e.path().join("cpufreq/scaling_governor");
            if let Ok(g) = std::fs::read_to_string(&p) {
                seen.governors.push(g.trim().to_string());
            }
        }
    }
    if let Some(os) = &planned.os {
        if let (Some(_), Some(systemd)) = (&os.tuned_profile, tuned) {
            let s = crate::systemd::tuned::state(systemd).await?;
            seen.tuned = Some(TunedInEffect {
                active_profile: s.active,
                verified: s.verified,
            });
        }
        for name in comparable_sysctls(&os.profile).keys() {
            seen.sysctls
                .insert(name.clone(), read_opt(&machine(&parse::sysctl_path(name))));
        }
        if let Some(v) = &os.volume {
            let mountinfo = std::fs::read_to_string(machine("/proc/self/mountinfo"))
                .context("reading /proc/self/mountinfo")?;
            seen.mount = parse::parse_mountinfo(&mountinfo, &v.mount_point);
            let out = runner.run(&lvs_command()).await?;
            crate::fsutil::atomic_write(&raw_dir.join("lvs.json"), out.stdout.as_bytes())?;
            seen.lvm = parse::parse_lvs(&out.stdout)?;
        }
    }
    if !planned.pg_settings.is_empty() {
        let names: Vec<String> = planned
            .pg_settings
            .keys()
            .map(|n| literal(&n.to_ascii_lowercase()))
            .collect();
        let rows = session
            .rows(&format!(
                "SELECT name, setting, unit, vartype, array_to_string(enumvals, ',') \
                 FROM pg_settings WHERE name IN ({}) ORDER BY name",
                names.join(", ")
            ))
            .await?;
        seen.pg_rows = rows
            .into_iter()
            .map(|r| PgSettingRow {
                name: r.first().cloned().flatten().unwrap_or_default(),
                setting: r.get(1).cloned().flatten().unwrap_or_default(),
                unit: r.get(2).cloned().flatten(),
                vartype: r.get(3).cloned().flatten().unwrap_or_default(),
                enumvals: r
                    .get(4)
                    .cloned()
                    .flatten()
                    .map(|e| e.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
            .collect();
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text_extra: &str) -> Plan {
        let text = format!(
            r#"[appliance]
name = "t"
platform = "debian12"
[postgres]
version = 15
[storage]
devices = ["/dev/nvme0n1", "/dev/nvme1n1"]
stripe_size = "64KiB"
[tuning]
tuned_profile = "postgresql"
kernel_args = ["transparent_hugepage=never"]
{text_extra}
[dataset]
scale = 1
[[workloads]]
name = "w"
clients = [1]
transactions = 10
"#
        );
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, text).expect("write");
        Plan::load(&p).expect("plan")
    }

    fn settings() -> BTreeMap<String, String> {
        [("shared_buffers", "128MB"), ("huge_pages", "off")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn pg_rows(shared_buffers: &str) -> Vec<PgSettingRow> {
        vec![
            PgSettingRow {
                name: "shared_buffers".into(),
                setting: shared_buffers.into(),
                unit: Some("8kB".into()),
                vartype: "integer".into(),
                enumvals: vec![],
            },
            PgSettingRow {
                name: "huge_pages".into(),
                setting: "off".into(),
                unit: None,
                vartype: "enum".into(),
                enumvals: vec!["off".into(), "on".into(), "try".into()],
            },
        ]
    }

    /// What a correctly tuned appliance shows (one sysctl the kernel lacks).
    fn good() -> Observed {
        let profile = parse::parse_tuned_profile(crate::assets::TUNED_POSTGRESQL);
        let mut sysctls: BTreeMap<String, Option<String>> = profile
            .sysctls
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        sysctls.insert("kernel.sched_min_granularity_ns".into(), None);
        Observed {
            kernel_cmdline: Some("root=/dev/vda ro transparent_hugepage=never".into()),
            thp: Some("never".into()),
            tuned: Some(TunedInEffect {
                active_profile: "postgresql".into(),
                verified: false,
            }),
            governors: vec![],
            sysctls,
            mount: Some(MountInfo {
                mount_point: "/var/lib/pgappliance/pgdata".into(),
                source: "/dev/mapper/pgappliance-data".into(),
                fstype: "xfs".into(),
                options: vec!["rw".into(), "noatime".into()],
            }),
            lvm: vec![LvSegment {
                lv_name: "data".into(),
                stripes: 2,
                stripe_size_bytes: 65536,
                devices: vec!["/dev/nvme0n1".into(), "/dev/nvme1n1".into()],
            }],
            pg_rows: pg_rows("16384"),
        }
    }

    fn appliance_plan() -> Planned {
        planned(
            &plan(""),
            true,
            parse::parse_tuned_profile(crate::assets::TUNED_POSTGRESQL),
            &settings(),
        )
    }

    #[test]
    fn a_tuned_appliance_passes_and_records_everything() {
        let t = evaluate(&appliance_plan(), &good(), "now".into());
        t.ensure().expect("all in effect");
        assert!(t.os_tuning_planned);
        assert_eq!(t.cpu_governor, "none");
        let areas: Vec<&str> = t.checks.iter().map(|c| c.area.as_str()).collect();
        for a in [
            "kernel", "tuned", "sysctl", "cpu", "volume", "lvm", "postgres",
        ] {
            assert!(areas.contains(&a), "{a} checked: {areas:?}");
        }
        let absent: Vec<&str> = t
            .checks
            .iter()
            .filter(|c| c.status == CheckStatus::Absent)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(absent, vec!["kernel.sched_min_granularity_ns", "governor"]);
        let json = serde_json::to_value(&t).expect("json");
        assert_eq!(json["checks"][0]["status"], "in_effect");
    }

    #[test]
    fn each_planned_value_not_in_effect_fails_naming_it() {
        let want = appliance_plan();
        type Spoil = Box<dyn Fn(&mut Observed)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (
                Box::new(|o| o.kernel_cmdline = Some("root=/dev/vda".into())),
                "kernel transparent_hugepage=never: planned transparent_hugepage=never, in effect nothing",
            ),
            (
                Box::new(|o| o.thp = Some("madvise".into())),
                "kernel transparent_hugepage: planned never, in effect madvise",
            ),
            (
                Box::new(|o| {
                    o.tuned = Some(TunedInEffect {
                        active_profile: "balanced".into(),
                        verified: true,
                    })
                }),
                "tuned active_profile: planned postgresql, in effect balanced",
            ),
            (
                Box::new(|o| {
                    o.tuned = Some(TunedInEffect {
                        active_profile: String::new(),
                        verified: false,
                    })
                }),
                "tuned active_profile: planned postgresql, in effect nothing",
            ),
            (
                Box::new(|o| {
                    o.sysctls.insert("vm.swappiness".into(), Some("60".into()));
                }),
                "sysctl vm.swappiness: planned 1, in effect 60",
            ),
            (
                Box::new(|o| o.governors = vec!["schedutil".into(), "performance".into()]),
                "cpu governor: planned performance, in effect performance,schedutil",
            ),
            (
                Box::new(|o| o.mount = None),
                "volume /var/lib/pgappliance/pgdata filesystem: planned xfs, in effect not mounted",
            ),
            (
                Box::new(|o| o.mount.as_mut().expect("m").options = vec!["rw".into(), "relatime".into()]),
                "volume /var/lib/pgappliance/pgdata options: planned noatime, in effect rw,relatime",
            ),
            (
                Box::new(|o| o.lvm[0].stripes = 1),
                "lvm stripes: planned 2, in effect 1",
            ),
            (
                Box::new(|o| o.lvm[0].stripe_size_bytes = 4096),
                "lvm stripe_size_bytes: planned 65536, in effect 4096",
            ),
            (
                Box::new(|o| o.pg_rows = pg_rows("4096")),
                "postgres shared_buffers: planned 128MB, in effect 4096 (8kB)",
            ),
            (
                Box::new(|o| o.pg_rows.retain(|r| r.name != "huge_pages")),
                "postgres huge_pages: planned off, in effect nothing",
            ),
        ];
        for (spoil, message) in cases {
            let mut seen = good();
            spoil(&mut seen);
            let t = evaluate(&want, &seen, "now".into());
            let err = format!("{:#}", t.ensure().expect_err(message));
            assert!(err.contains(message), "{err}\nshould name: {message}");
            assert_eq!(t.not_in_effect().len(), 1, "{err}");
        }
    }

    #[test]
    fn local_mode_checks_only_postgres() {
        let want = planned(&plan(""), false, TunedProfileFile::default(), &settings());
        assert!(want.os.is_none());
        let mut seen = good();
        seen.thp = Some("always".into());
        seen.tuned = None;
        seen.governors = vec!["schedutil".into()];
        let t = evaluate(&want, &seen, "now".into());
        t.ensure().expect("nothing OS-side is planned");
        assert!(!t.os_tuning_planned);
        assert_eq!(t.cpu_governor, "schedutil");
        assert_eq!(t.transparent_hugepage.as_deref(), Some("always"));
        assert!(t.checks.iter().all(|c| c.area == "postgres"));
        assert_eq!(t.checks.len(), 2);
        seen.pg_rows = pg_rows("1");
        assert!(evaluate(&want, &seen, "now".into()).ensure().is_err());
    }

    #[test]
    fn linear_volumes_and_auto_devices() {
        let want = planned(
            &plan("").clone(),
            true,
            TunedProfileFile::default(),
            &BTreeMap::new(),
        );
        let v = want
            .os
            .as_ref()
            .and_then(|o| o.volume.clone())
            .expect("volume");
        assert_eq!(v.devices_listed, Some(2));
        assert_eq!(v.stripe_size_bytes, 65536);
        let mut linear = want.clone();
        if let Some(os) = linear.os.as_mut() {
            os.volume.as_mut().expect("v").layout = Layout::Linear;
            os.tuned_profile = None;
        }
        let mut seen = good();
        seen.lvm[0].stripes = 1;
        evaluate(&linear, &seen, "now".into())
            .ensure()
            .expect("linear");
        seen.lvm.clear();
        let err = evaluate(&linear, &seen, "now".into())
            .ensure()
            .expect_err("no LV");
        assert!(format!("{err}").contains("lvm stripes: planned 1, in effect nothing"));
    }
}
