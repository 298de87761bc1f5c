//! tuned over its D-Bus API: switch to a profile, confirm it is active, verify it.

use anyhow::{bail, Context, Result};

use super::{Systemd, TunedProxy};

/// What tuned reported after the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TunedState {
    pub(crate) active: String,
    /// tuned's own check that every setting of the profile is in place.
    pub(crate) verified: bool,
}

/// Starts tuned (enabled so it reapplies the profile at boot) and activates `profile`.
pub(crate) async fn activate(systemd: &Systemd, profile: &str) -> Result<TunedState> {
    systemd.enable_unit_files(&["tuned.service"]).await?;
    systemd.start_unit("tuned.service").await?;
    let tuned = connect(systemd).await?;
    let current = tuned
        .active_profile()
        .await
        .context("asking tuned for its active profile")?;
    if current != profile {
        let (ok, message) = tuned
            .switch_profile(profile)
            .await
            .with_context(|| format!("asking tuned to switch to profile \"{profile}\""))?;
        if !ok {
            bail!("tuned refused profile \"{profile}\": {message}");
        }
    }
    let active = tuned
        .active_profile()
        .await
        .context("asking tuned for its active profile")?;
    if active != profile {
        bail!("tuned reports profile \"{active}\" active after switching to \"{profile}\"");
    }
    let verified = tuned
        .verify_profile()
        .await
        .context("asking tuned to verify the profile")?;
    Ok(TunedState { active, verified })
}

/// tuned's active profile and its verdict on it, as they are now (no switch).
pub(crate) async fn state(systemd: &Systemd) -> Result<TunedState> {
    let tuned = connect(systemd).await?;
    let active = tuned
        .active_profile()
        .await
        .context("asking tuned for its active profile")?;
    let verified = tuned
        .verify_profile()
        .await
        .context("asking tuned to verify the profile")?;
    Ok(TunedState { active, verified })
}

async fn connect(systemd: &Systemd) -> Result<TunedProxy<'static>> {
    // tuned takes its bus name a moment after its unit is active (≈20 s on a first start
    // under emulation); wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let proxy = TunedProxy::new(systemd.connection())
            .await
            .context("building the tuned D-Bus proxy")?;
        match proxy.active_profile().await {
            Ok(_) => return Ok(proxy),
            Err(e) if std::time::Instant::now() > deadline => {
                return Err(e).context("tuned did not answer on the system bus within 120 s")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}
