//! IPMI fallback for BMCs without Redfish virtual media (the ISO mounted by hand): next boot
//! from CD/DVD in EFI mode, then a hard reset when the server is on or power on when it is
//! off (the IPMI counterparts of Redfish's ForceRestart and On). `ipmitool -I lanplus` runs
//! through the daemon library's runner; the password goes in `IPMI_PASSWORD` (`-E`), never
//! on the command line.

use std::time::Duration;

use anyhow::{Context, Result};
use pgappliance::runner::{CommandSpec, Runner};

use super::credentials::BmcCredentials;

/// Where the BMC is: `HOST` or `HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpmiTarget {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

pub(crate) fn parse_target(s: &str) -> Result<IpmiTarget, String> {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("--ipmi {s}: \"{p}\" is not a port"))?;
            (h, Some(port))
        }
        _ => (s, None),
    };
    if host.is_empty() || host.starts_with('-') || host.contains('/') {
        return Err(format!("--ipmi \"{s}\" is not a host name or address"));
    }
    Ok(IpmiTarget {
        host: host.to_string(),
        port,
    })
}

/// `ipmitool -I lanplus -H … [-p …] -U … -E ARGS…` with the password in the environment.
pub(crate) fn command(target: &IpmiTarget, creds: &BmcCredentials, args: &[&str]) -> CommandSpec {
    let mut spec = CommandSpec::new("ipmitool")
        .args(["-I", "lanplus", "-H", target.host.as_str()])
        .args(["-U", creds.user.as_str(), "-E"])
        .env("IPMI_PASSWORD", creds.password())
        .timeout(Duration::from_secs(60));
    if let Some(p) = target.port {
        spec = spec.args(["-p".to_string(), p.to_string()]);
    }
    spec.args(args.iter().copied())
}

/// The power state from `chassis power status` ("Chassis Power is on").
pub(crate) fn parse_power(stdout: &str) -> Option<bool> {
    let line = stdout.lines().find(|l| l.starts_with("Chassis Power is"))?;
    match line.trim_start_matches("Chassis Power is").trim() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

/// What `chassis bootparam get 5` says the next boot is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BootFlags {
    pub(crate) device: Option<String>,
    pub(crate) efi: bool,
    pub(crate) next_boot_only: bool,
}

pub(crate) fn parse_boot_flags(stdout: &str) -> BootFlags {
    let mut f = BootFlags {
        device: None,
        efi: false,
        next_boot_only: false,
    };
    for line in stdout.lines() {
        let l = line.trim().trim_start_matches("- ").trim();
        if let Some(d) = l.strip_prefix("Boot Device Selector :") {
            f.device = Some(d.trim().to_string());
        } else if l == "BIOS EFI boot" {
            f.efi = true;
        } else if l == "Options apply to only next boot" {
            f.next_boot_only = true;
        }
    }
    f
}

/// What the BMC did not keep of "next boot from CD/DVD in EFI mode".
pub(crate) fn boot_not_kept(f: &BootFlags) -> Vec<String> {
    let mut out = Vec::new();
    if f.device.as_deref() != Some("Force Boot from CD/DVD") {
        out.push(format!(
            "boot device reads \"{}\", not CD/DVD",
            f.device.as_deref().unwrap_or("nothing")
        ));
    }
    if !f.efi {
        out.push("EFI boot was asked for but the boot flags read legacy (PC compatible)".into());
    }
    if !f.next_boot_only {
        out.push("the boot flags apply to every boot, not only the next".into());
    }
    out
}

/// What an IPMI launch did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct IpmiLaunch {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    pub(crate) power: String,
    pub(crate) not_kept: Vec<String>,
}

pub(crate) async fn launch(
    runner: &Runner,
    target: &IpmiTarget,
    creds: &BmcCredentials,
    say: &mut dyn FnMut(String),
) -> Result<IpmiLaunch> {
    let run = |args: &'static [&'static str]| {
        let spec = command(target, creds, args);
        async move { runner.run(&spec).await.map(|o| o.stdout) }
    };
    let status = run(&["chassis", "power", "status"])
        .await
        .with_context(|| format!("asking the BMC at {} for the power state", target.host))?;
    let on = parse_power(&status).with_context(|| {
        format!("`ipmitool chassis power status` printed no power state: {status}")
    })?;
    run(&["chassis", "bootdev", "cdrom", "options=efiboot"]).await?;
    let flags = parse_boot_flags(&run(&["chassis", "bootparam", "get", "5"]).await?);
    let not_kept = boot_not_kept(&flags);
    say(format!("next boot from CD/DVD set on {}", target.host));
    let power = if on { "reset" } else { "on" };
    match power {
        "reset" => run(&["chassis", "power", "reset"]).await?,
        _ => run(&["chassis", "power", "on"]).await?,
    };
    say(format!("power {power}"));
    Ok(IpmiLaunch {
        host: target.host.clone(),
        port: target.port,
        power: power.into(),
        not_kept,
    })
}

/// `chassis power off` (a hard power off), unless the server is off already.
pub(crate) async fn power_off(
    runner: &Runner,
    target: &IpmiTarget,
    creds: &BmcCredentials,
) -> Result<String> {
    let status = runner
        .run(&command(target, creds, &["chassis", "power", "status"]))
        .await
        .with_context(|| format!("asking the BMC at {} for the power state", target.host))?
        .stdout;
    if parse_power(&status) == Some(false) {
        return Ok("already powered off".into());
    }
    runner
        .run(&command(target, creds, &["chassis", "power", "off"]))
        .await
        .with_context(|| format!("powering off through the BMC at {}", target.host))?;
    Ok("powered off".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ipmi")
            .join(name);
        std::fs::read_to_string(&p).expect("fixture")
    }

    #[test]
    fn fakebmc_keeps_the_device_but_not_efi() {
        let f = parse_boot_flags(&fixture("bootparam5-fakebmc-cdrom.txt"));
        assert_eq!(f.device.as_deref(), Some("Force Boot from CD/DVD"));
        assert!(!f.efi);
        assert!(f.next_boot_only);
        let n = boot_not_kept(&f);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("EFI"), "{n:?}");
    }

    #[test]
    fn an_efi_cdrom_answer_is_all_kept() {
        let f = parse_boot_flags(&fixture("bootparam5-efi-cdrom-composed.txt"));
        assert!(f.efi);
        assert!(boot_not_kept(&f).is_empty());
    }

    #[test]
    fn power_status_and_targets() {
        assert_eq!(parse_power("Chassis Power is on\n"), Some(true));
        assert_eq!(parse_power("Chassis Power is off\n"), Some(false));
        assert_eq!(parse_power("garbage"), None);
        assert_eq!(
            parse_target("10.0.0.5:6230"),
            Ok(IpmiTarget {
                host: "10.0.0.5".into(),
                port: Some(6230)
            })
        );
        assert_eq!(parse_target("bmc1").map(|t| t.port), Ok(None));
        assert!(parse_target("bmc:x").is_err());
        assert!(parse_target("-H").is_err());
    }

    #[test]
    fn the_password_is_not_on_the_command_line() {
        let c = parse_credentials();
        let spec = command(
            &parse_target("h").expect("target"),
            &c,
            &["chassis", "power", "status"],
        );
        assert!(!spec.display().contains("pw-x"), "{}", spec.display());
        assert!(spec.display().contains(" -E "), "{}", spec.display());
    }

    fn parse_credentials() -> BmcCredentials {
        super::super::credentials::parse("user = u\npassword = pw-x\n").expect("creds")
    }
}
