//! Tuning in effect: reads back everything the tuning steps planned (kernel command line,
//! THP, tuned profile and its verdict, the profile's sysctls, CPU governor, mount options,
//! LVM stripes, pg_settings) and records it (`tuning_in_effect.json`, which the report puts
//! into results.json); a planned value not in effect fails the step. In place when it was
//! read back in effect in this boot.

use std::time::Duration;

use anyhow::Result;

use super::{Check, Context, Looking, Product, Step};
use crate::in_effect::{evaluate, load_tuned_profile, observe, planned};
use crate::journal::StepName;
use crate::platform::Profile;

pub(crate) struct InEffect;

/// Where the record is written in the run directory.
pub(crate) const IN_EFFECT_FILE: &str = "tuning_in_effect.json";

impl Step for InEffect {
    const NAME: StepName = StepName::InEffect;
    const NEEDS: &'static [Product] = &[Product::Server, Product::Settings];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let boot = cx.host.boot_id()?;
        let recorded = cx.run_dir.join(IN_EFFECT_FILE).is_file();
        Ok(match &cx.journal.state.state.in_effect.observed_in_boot {
            Some(b) if *b == boot && recorded => Check::Done,
            Some(_) if recorded => Check::Todo("read back in an earlier boot".into()),
            _ => Check::Todo("not read back yet".into()),
        })
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let os_tuning = cx.host.tunes_os();
        let profile = if os_tuning && cx.plan.tuning.tuned_profile != "none" {
            load_tuned_profile(
                &cx.plan.tuning.tuned_profile,
                &Profile::of(cx.plan.appliance.platform).tuned_profile_dirs(),
            )
        } else {
            Default::default()
        };
        let want = planned(&cx.plan, os_tuning, profile, cx.settings()?);
        let cluster = cx.server()?;
        let session = crate::postgres::sql::Session::connect(
            &cluster.socket_dir(),
            cluster.port,
            crate::postgres::cluster::SUPERUSER,
            "postgres",
        )
        .await?;
        // tuned answers on the bus as soon as it starts at boot, while it may still be
        // applying the profile: where the OS is tuned, a value not in effect is read again
        // for a minute before it counts.
        let raw = cx.raw();
        let mut tries = if os_tuning { 12 } else { 1 };
        let result = loop {
            let host = &cx.host;
            let machine = |p: &str| host.machine_path(p);
            let seen = observe(&want, &cx.runner, cx.host.bus(), &session, &raw, &machine).await?;
            let result = evaluate(&want, &seen, crate::clock::now());
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
        crate::fsutil::write_json(&cx.run_dir.join(IN_EFFECT_FILE), &result)?;
        result.ensure()?;
        let boot = cx.host.boot_id()?;
        cx.journal
            .update(|s| s.in_effect.observed_in_boot = Some(boot))
    }
}
