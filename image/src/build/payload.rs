//! The payload: a deterministic tar.gz of what the appliance installs. Members are sorted,
//! owned by root with explicit modes, and stamped with one mtime (`SOURCE_DATE_EPOCH`, else
//! 0); gzip carries no name or time. The same inputs give byte-identical files. The systemd
//! units of `units/` are compiled into the builder, so a build does not depend on where it
//! is run from, and a payload is checked for completeness before it is written.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use flate2::{Compression, GzBuilder};
use pgappliance::plan::Plan;
use pgappliance::platform::{APPLIANCE_DAEMON, APPLIANCE_PLAN};

/// The units the payload installs (`units/` of the repository, embedded at compile time).
pub(crate) const UNITS: [(&str, &str); 1] = [(
    "pgapplianced.service",
    include_str!("../../../units/pgapplianced.service"),
)];

/// Where the payload puts systemd units.
pub(crate) const UNIT_DIR: &str = "usr/lib/systemd/system";

/// Largest payload the builder writes (it travels on install media and in user-data URLs).
pub(crate) const MAX_PAYLOAD_BYTES: u64 = 256 << 20;

/// One file of the payload.
pub(crate) struct Member {
    pub(crate) mode: u32,
    pub(crate) data: Vec<u8>,
}

pub(crate) fn mtime() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH=\"{v}\" is not a number of seconds")),
        Err(_) => Ok(0),
    }
}

/// Writes `members` (path → file) as a deterministic tar.gz; returns its bytes.
pub(crate) fn build(members: &BTreeMap<String, Member>, mtime: u64) -> Result<Vec<u8>> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in members.keys() {
        let mut p = Path::new(path).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(format!("{}/", d.display()));
            p = d.parent();
        }
    }
    let mut entries: Vec<(String, Option<&Member>)> = dirs.into_iter().map(|d| (d, None)).collect();
    entries.extend(members.iter().map(|(p, m)| (p.clone(), Some(m))));
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let gz = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, member) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        h.set_mtime(mtime);
        match member {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                h.set_cksum();
                tar.append_data(&mut h, &path, std::io::empty())?;
            }
            Some(m) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(m.mode);
                h.set_size(m.data.len() as u64);
                h.set_cksum();
                tar.append_data(&mut h, &path, m.data.as_slice())?;
            }
        }
    }
    let gz = tar.into_inner()?;
    let mut bytes = gz.finish()?;
    bytes.flush()?;
    if bytes.len() as u64 > MAX_PAYLOAD_BYTES {
        bail!(
            "the payload would be {} MiB, over the {} MiB limit: is the daemon binary a debug build? (strip it or build with --release)",
            bytes.len() >> 20,
            MAX_PAYLOAD_BYTES >> 20
        );
    }
    Ok(bytes)
}

/// The paths a unit's `ExecStart=` lines need on the machine: the program and the file
/// given to `--plan`.
fn exec_start_paths(unit: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in unit.lines() {
        let Some(cmd) = line.trim().strip_prefix("ExecStart=") else {
            continue;
        };
        let words: Vec<&str> = cmd.split_whitespace().collect();
        if let Some(program) = words.first() {
            paths.push(
                program
                    .trim_start_matches(['-', '@', ':', '+', '!'])
                    .to_string(),
            );
        }
        // `run PLAN` (or `run --plan PLAN`): the first word after `run` that is neither an
        // option nor an option's value.
        const WITH_VALUE: [&str; 9] = [
            "--workdir",
            "--store",
            "--endpoint",
            "--region",
            "--credentials-file",
            "--credentials-profile",
            "--part-size-mib",
            "--pg-bin",
            "--cluster-user",
        ];
        let mut rest = words.iter().skip_while(|w| **w != "run").skip(1);
        while let Some(w) = rest.next() {
            if *w == "--plan" {
                if let Some(plan) = rest.next() {
                    paths.push(plan.to_string());
                }
                break;
            }
            if WITH_VALUE.contains(w) {
                rest.next();
                continue;
            }
            if !w.starts_with('-') {
                paths.push(w.to_string());
                break;
            }
        }
    }
    paths
}

/// Refuses a payload the appliance could not start from: every unit the install scripts
/// enable is in it, so is what those units run (the daemon, the plan), and the tuned
/// profile the plan names when the payload is what provides it.
pub(crate) fn check_complete(
    members: &BTreeMap<String, Member>,
    plan: &Plan,
    enabled_units: &[String],
) -> Result<()> {
    let mut missing = Vec::new();
    let mut need = |path: String, why: String| {
        if !members.contains_key(&path) && !missing.iter().any(|(p, _)| *p == path) {
            missing.push((path, why));
        }
    };
    need(super::installed(APPLIANCE_DAEMON), "the daemon".into());
    need(super::installed(APPLIANCE_PLAN), "the plan".into());
    if enabled_units.is_empty() {
        bail!("internal: the install scripts enable no unit, so nothing would start the daemon");
    }
    for unit in enabled_units {
        let path = format!("{UNIT_DIR}/{unit}");
        match members.get(&path) {
            None => need(path, format!("{unit}, which the install scripts enable")),
            Some(m) => {
                let text = String::from_utf8_lossy(&m.data);
                for p in exec_start_paths(&text) {
                    let rel = p.trim_start_matches('/').to_string();
                    need(rel, format!("{p}, which {unit} runs"));
                }
            }
        }
    }
    if plan.tuning.tuned_profile == "postgresql" {
        need(
            format!(
                "{}/postgresql/tuned.conf",
                pgappliance::assets::TUNED_PROFILE_DIR
            ),
            "the tuned profile \"postgresql\" the plan names".into(),
        );
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(p, why)| format!("{p} ({why})"))
            .collect();
        bail!(
            "the payload would lack {}: the appliance could not start from it",
            list.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(text: &str) -> Member {
        Member {
            mode: 0o644,
            data: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn embedded_units_are_the_units_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../units");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("units/")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e != "md"))
            .map(|p| {
                (
                    p.file_name().expect("name").to_string_lossy().into_owned(),
                    std::fs::read_to_string(&p).expect("read"),
                )
            })
            .collect();
        on_disk.sort();
        let embedded: Vec<(String, String)> = UNITS
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(embedded, on_disk, "UNITS lists every file of units/");
    }

    #[test]
    fn what_a_unit_runs() {
        // The unit runs the daemon and the plan where the payload installs them, in the
        // work directory the daemon's commands default to.
        assert_eq!(
            exec_start_paths(UNITS[0].1),
            [APPLIANCE_DAEMON, APPLIANCE_PLAN]
        );
        assert!(UNITS[0].1.contains(&format!(
            "--workdir {}\n",
            pgappliance::platform::APPLIANCE_WORKDIR
        )));
        assert_eq!(exec_start_paths("ExecStart=-/bin/x a\n"), ["/bin/x"]);
        assert_eq!(
            exec_start_paths("ExecStart=/d run --workdir /w --local /p.toml\n"),
            ["/d", "/p.toml"]
        );
        assert_eq!(
            exec_start_paths("ExecStart=/d run --workdir /w --plan /p.toml\n"),
            ["/d", "/p.toml"]
        );
    }

    #[test]
    fn incomplete_payloads_are_refused_naming_what_is_missing() {
        let plan =
            Plan::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml"))
                .expect("altra plan");
        assert_eq!(plan.tuning.tuned_profile, "postgresql");
        let full: BTreeMap<String, Member> = [
            ("usr/bin/pgapplianced", "elf"),
            ("etc/pgappliance/plan.toml", "plan"),
            ("usr/lib/tuned/postgresql/tuned.conf", "tuned"),
            ("usr/lib/systemd/system/pgapplianced.service", UNITS[0].1),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), member(t)))
        .collect();
        let enabled = vec!["pgapplianced.service".to_string()];
        check_complete(&full, &plan, &enabled).expect("complete");
        for (drop, says) in [
            (
                "usr/lib/systemd/system/pgapplianced.service",
                "pgapplianced.service, which the install scripts enable",
            ),
            ("usr/bin/pgapplianced", "usr/bin/pgapplianced (the daemon)"),
            (
                "etc/pgappliance/plan.toml",
                "etc/pgappliance/plan.toml (the plan)",
            ),
            ("usr/lib/tuned/postgresql/tuned.conf", "tuned profile"),
        ] {
            let mut m: BTreeMap<String, Member> = full
                .iter()
                .map(|(p, x)| (p.clone(), member(&String::from_utf8_lossy(&x.data))))
                .collect();
            m.remove(drop);
            let e = check_complete(&m, &plan, &enabled)
                .expect_err(drop)
                .to_string();
            assert!(e.contains(says), "{drop}: {e}");
        }
        let e = check_complete(&full, &plan, &["other.timer".to_string()])
            .expect_err("unit not shipped")
            .to_string();
        assert!(e.contains("usr/lib/systemd/system/other.timer"), "{e}");
        // A unit that runs a program the payload lacks.
        let mut odd: BTreeMap<String, Member> = full
            .iter()
            .map(|(p, x)| (p.clone(), member(&String::from_utf8_lossy(&x.data))))
            .collect();
        odd.insert(
            "usr/lib/systemd/system/pgapplianced.service".into(),
            member("[Service]\nExecStart=/usr/bin/pgapplianced run --plan /etc/pgappliance/other.toml\n"),
        );
        let e = check_complete(&odd, &plan, &enabled)
            .expect_err("plan path")
            .to_string();
        assert!(e.contains("etc/pgappliance/other.toml"), "{e}");
        assert!(check_complete(&full, &plan, &[]).is_err());
    }
}
