//! OS tuning on the appliance: the tuned profile activated (over tuned's D-Bus API), then the
//! kernel arguments (grubby on Rocky, /etc/default/grub + update-grub on Debian) and the
//! reboot they need. The journal records the reboot before it is asked for; after the boot
//! the service resumes here, checks `/proc/cmdline` (and the THP mode when the arguments set
//! one) and goes on. In place when the profile is active and the arguments are on the
//! running kernel's command line.

use anyhow::{bail, Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::platform::{missing_kernel_args, thp_mode, Profile, GRUB_DEFAULT_FILE};

pub(crate) struct OsTuning;

/// A file of the machine (where the host keeps it), trimmed.
fn read_trimmed(cx: &Context, path: &str) -> Result<String> {
    Ok(std::fs::read_to_string(cx.host.machine_path(path))
        .with_context(|| format!("reading {path}"))?
        .trim()
        .to_string())
}

/// The planned kernel arguments missing from the running kernel's command line.
fn missing_args(cx: &Context) -> Result<(String, Vec<String>)> {
    let cmdline = read_trimmed(cx, "/proc/cmdline")?;
    let missing = missing_kernel_args(&cmdline, &cx.plan.tuning.kernel_args);
    Ok((cmdline, missing))
}

fn tuned_wanted(cx: &Context) -> Option<&str> {
    let profile = cx.plan.tuning.tuned_profile.as_str();
    (profile != "none").then_some(profile)
}

impl Step for OsTuning {
    const NAME: StepName = StepName::OsTuning;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        if let Some(profile) = tuned_wanted(cx) {
            if cx.journal.state.state.os_tuning.tuned_profile.as_deref() != Some(profile) {
                return Ok(Check::Todo(format!(
                    "tuned profile {profile} not activated"
                )));
            }
        }
        let (cmdline, missing) = missing_args(cx)?;
        if !missing.is_empty() {
            return Ok(Check::Todo(format!(
                "kernel arguments {} not on the command line",
                missing.join(" ")
            )));
        }
        if !cx.plan.tuning.kernel_args.is_empty() {
            // Booted with the arguments: what they set must be what the kernel does (a
            // reboot would not change that).
            thp_as_planned(cx, &cx.plan.tuning.kernel_args)?;
            if cx.journal.state.state.os_tuning.kernel_cmdline.as_deref() != Some(&cmdline) {
                // Booted with them (after the reboot apply asked for): apply records it.
                return Ok(Check::Todo(
                    "the kernel command line with the arguments is not recorded yet".into(),
                ));
            }
        }
        Ok(Check::Done)
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        if let Some(profile) = tuned_wanted(cx).map(str::to_string) {
            if cx.journal.state.state.os_tuning.tuned_profile.as_deref() != Some(&profile) {
                crate::notify::status(&format!("os tuning: tuned profile {profile}"));
                let state = cx.host.activate_tuned(&profile).await?;
                if !state.verified {
                    // tuned names what differs in its log; some settings (CPU governor, EPB)
                    // do not exist on every machine or hypervisor.
                    tracing::warn!(profile = %profile, "tuned's verify_profile reports settings that differ (see /var/log/tuned/tuned.log)");
                }
                cx.journal.update(|s| {
                    s.os_tuning.tuned_verified = Some(state.verified);
                    s.os_tuning.tuned_profile = Some(profile.clone());
                })?;
            }
        }
        let args = cx.plan.tuning.kernel_args.clone();
        if args.is_empty() {
            return Ok(());
        }
        let (cmdline, missing) = missing_args(cx)?;
        let boot_id = cx.host.boot_id()?;
        if !missing.is_empty() {
            if let Some(from) = &cx.journal.state.state.os_tuning.reboot_from_boot {
                if *from != boot_id {
                    bail!(
                        "kernel arguments {} are missing from /proc/cmdline after the reboot for them (cmdline: {cmdline}): the boot loader did not apply them",
                        missing.join(" ")
                    );
                }
            }
            set_kernel_args(cx, &args).await?;
            cx.journal
                .update(|s| s.os_tuning.reboot_from_boot = Some(boot_id))?;
            cx.journal
                .begin(StepName::OsTuning, Some("reboot for kernel arguments"))?;
            crate::notify::status(&format!(
                "os tuning: rebooting for kernel arguments {}",
                missing.join(" ")
            ));
            tracing::info!(args = %missing.join(" "), "rebooting for kernel arguments");
            match cx.host.reboot().await? {}
        }
        thp_as_planned(cx, &args)?;
        cx.journal
            .update(|s| s.os_tuning.kernel_cmdline = Some(cmdline))
    }
}

/// When the kernel arguments set a transparent-hugepage mode, the kernel runs in it.
fn thp_as_planned(cx: &Context, args: &[String]) -> Result<()> {
    for a in args {
        if let Some(want) = a.strip_prefix("transparent_hugepage=") {
            let path = "/sys/kernel/mm/transparent_hugepage/enabled";
            let have = thp_mode(&read_trimmed(cx, path)?);
            if have.as_deref() != Some(want) {
                bail!(
                    "the kernel runs with {a} but {path} says {}",
                    have.unwrap_or_else(|| "nothing readable".into())
                );
            }
        }
    }
    Ok(())
}

async fn set_kernel_args(cx: &Context, args: &[String]) -> Result<()> {
    let raw = cx.raw();
    let grub_default =
        std::fs::read_to_string(cx.host.machine_path(GRUB_DEFAULT_FILE)).unwrap_or_default();
    let change = Profile::of(cx.plan.appliance.platform).kernel_args_change(args, &grub_default);
    for f in &change.files {
        crate::fsutil::atomic_write(&cx.host.machine_path(&f.path), f.text.as_bytes())
            .with_context(|| format!("writing {}", f.path.display()))?;
    }
    for cmd in change.commands {
        let name = cmd.program.clone();
        cx.runner
            .run(&cmd.output_files(
                &raw.join(format!("{name}.stdout")),
                &raw.join(format!("{name}.stderr")),
            ))
            .await?;
    }
    Ok(())
}
