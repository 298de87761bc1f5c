//! OS tuning on the appliance: the tuned profile installed and activated over tuned's D-Bus
//! API, then the kernel arguments (grubby on Rocky, /etc/default/grub + update-grub on
//! Debian) and the reboot they need. The journal records the reboot before it is asked
//! for; after the boot the service resumes here, checks `/proc/cmdline` (and the THP mode
//! when the arguments set one) and goes on.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::platform::{missing_kernel_args, thp_mode, GRUB_DEFAULT_FILE};

/// Boot id of the boot that asked for the kernel-argument reboot.
const FACT_REBOOT_FROM: &str = "kernel_args_reboot_from_boot";
const FACT_TUNED: &str = "tuned_profile";
const FACT_TUNED_VERIFIED: &str = "tuned_verified";
const FACT_CMDLINE: &str = "kernel_cmdline";

fn read_trimmed(path: &str) -> Result<String> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {path}"))?
        .trim()
        .to_string())
}

pub async fn run(run: &mut Run) -> Result<()> {
    let t0 = Instant::now();
    let first = !run.journal.is_done(StepName::OsTuning);
    if first {
        run.journal.begin(StepName::OsTuning, None)?;
    }
    let profile = run.plan.tuning.tuned_profile.clone();
    if profile != "none" && run.journal.fact(FACT_TUNED) != Some(profile.as_str()) {
        crate::notify::status(&format!("os tuning: tuned profile {profile}"));
        install_profile(run, &profile)?;
        let state = crate::systemd::tuned::activate(run.systemd()?, &profile).await?;
        if !state.verified {
            // tuned names what differs in its log; some settings (CPU governor, EPB) do
            // not exist on every machine or hypervisor.
            tracing::warn!(profile = %profile, "tuned's verify_profile reports settings that differ (see /var/log/tuned/tuned.log)");
        }
        run.journal
            .set_fact(FACT_TUNED_VERIFIED, state.verified.to_string())?;
        run.journal.set_fact(FACT_TUNED, profile.clone())?;
    }
    let args = run.plan.tuning.kernel_args.clone();
    if !args.is_empty() {
        let cmdline = read_trimmed("/proc/cmdline")?;
        let missing = missing_kernel_args(&cmdline, &args);
        let boot_id = read_trimmed("/proc/sys/kernel/random/boot_id")?;
        if !missing.is_empty() {
            if let Some(from) = run.journal.fact(FACT_REBOOT_FROM) {
                if from != boot_id {
                    bail!(
                        "kernel arguments {} are missing from /proc/cmdline after the reboot for them (cmdline: {cmdline}): the boot loader did not apply them",
                        missing.join(" ")
                    );
                }
            }
            set_kernel_args(run, &args).await?;
            run.journal.set_fact(FACT_REBOOT_FROM, boot_id)?;
            run.journal
                .begin(StepName::OsTuning, Some("reboot for kernel arguments"))?;
            crate::notify::status(&format!(
                "os tuning: rebooting for kernel arguments {}",
                missing.join(" ")
            ));
            tracing::info!(args = %missing.join(" "), "rebooting for kernel arguments");
            nix::unistd::sync();
            run.systemd()?.reboot().await?;
            // The shutdown stops this service; never go on measuring a machine that is
            // about to reboot.
            loop {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        }
        run.journal.set_fact(FACT_CMDLINE, cmdline)?;
        for a in &args {
            if let Some(want) = a.strip_prefix("transparent_hugepage=") {
                let path = "/sys/kernel/mm/transparent_hugepage/enabled";
                let have = thp_mode(&read_trimmed(path)?);
                if have.as_deref() != Some(want) {
                    bail!(
                        "the kernel runs with {a} but {path} says {}",
                        have.unwrap_or_else(|| "nothing readable".into())
                    );
                }
            }
        }
    }
    record_in_effect(run)
        .await
        .context("checking that the planned tuning is in effect")?;
    if first || run.journal.state.pending.is_some() {
        run.journal
            .finish(StepName::OsTuning, t0.elapsed().as_secs_f64())?;
    }
    Ok(())
}

/// Writes the profile shipped with the appliance (`postgresql`) where tuned finds it;
/// other names must be profiles tuned already has.
fn install_profile(run: &Run, profile: &str) -> Result<()> {
    if profile != "postgresql" {
        return Ok(());
    }
    let path = run.profile().tuned_profile_file(profile);
    crate::fsutil::write_if_changed(&path, crate::assets::TUNED_POSTGRESQL)?;
    Ok(())
}

async fn set_kernel_args(run: &Run, args: &[String]) -> Result<()> {
    let raw = run.run_dir.join("raw");
    let grub_default = std::fs::read_to_string(GRUB_DEFAULT_FILE).unwrap_or_default();
    let change = run.profile().kernel_args_change(args, &grub_default);
    for f in &change.files {
        crate::fsutil::atomic_write(&f.path, f.text.as_bytes())
            .with_context(|| format!("writing {}", f.path.display()))?;
    }
    for cmd in change.commands {
        let name = cmd.program.clone();
        run.runner
            .run(&cmd.output_files(
                &raw.join(format!("{name}.stdout")),
                &raw.join(format!("{name}.stderr")),
            ))
            .await?;
    }
    Ok(())
}

/// Reads back what the tuning steps planned and records it (`tuning_in_effect.json`, which
/// the report puts into results.json); a planned value not in effect fails the step. On
/// the appliance after the OS tuning (and its reboot); in local mode after the PostgreSQL
/// tuning, with no OS tuning planned.
pub(super) async fn record_in_effect(run: &Run) -> Result<()> {
    use crate::in_effect::{evaluate, load_tuned_profile, observe, planned};
    let appliance = run.is_appliance();
    let profile = if appliance && run.plan.tuning.tuned_profile != "none" {
        load_tuned_profile(
            &run.plan.tuning.tuned_profile,
            &run.profile().tuned_profile_dirs(),
        )
    } else {
        Default::default()
    };
    let want = planned(&run.plan, appliance, profile, run.applied_settings());
    let cluster = run.cluster()?;
    let session = crate::postgres::sql::Session::connect(
        &cluster.socket_dir(),
        cluster.port,
        crate::postgres::cluster::SUPERUSER,
        "postgres",
    )
    .await?;
    let systemd = if appliance {
        Some(run.systemd()?)
    } else {
        None
    };
    // tuned answers on the bus as soon as it starts at boot, while it may still be
    // applying the profile: on the appliance a value not in effect is read again for a
    // minute before it counts.
    let raw = run.run_dir.join("raw");
    let mut tries = if appliance { 12 } else { 1 };
    let result = loop {
        let seen = observe(&want, &run.runner, systemd, &session, &raw).await?;
        let result = evaluate(&want, &seen, crate::journal::now());
        tries -= 1;
        if result.not_in_effect().is_empty() || tries == 0 {
            break result;
        }
        tracing::info!(
            not_in_effect = result.not_in_effect().len(),
            "planned tuning not all in effect yet; reading again in 5 s"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    crate::fsutil::write_json(&run.run_dir.join(IN_EFFECT_FILE), &result)?;
    result.ensure()
}

/// Where [`record_in_effect`] writes its record in the run directory.
pub const IN_EFFECT_FILE: &str = "tuning_in_effect.json";
