//! Packages: PostgreSQL of the planned version from PGDG (the repository RPM, a mirror's
//! `.repo` file or an apt source, from the plan)
//! and the tools the later steps need (lvm2 and xfsprogs for the data volume, tuned for the
//! profile). Installs only what is missing; a machine that has everything does nothing.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::Run;
use crate::journal::StepName;
use crate::plan::Devices;

pub async fn run(run: &mut Run) -> Result<()> {
    let profile = run.profile();
    let v = run.pg_version();
    let mut wanted = profile.packages(v);
    if run.plan.storage.devices == Devices::None {
        wanted.retain(|p| p != "lvm2" && p != "xfsprogs");
    }
    if run.plan.tuning.tuned_profile == "none" {
        wanted.retain(|p| p != "tuned");
    }
    let mut missing = Vec::new();
    for pkg in &wanted {
        let out = run
            .runner
            .run_accepting(&profile.query_installed(pkg), &[0, 1])
            .await?;
        if !(out.success() && profile.installed_from_output(&out.stdout)) {
            missing.push(pkg.clone());
        }
    }
    if missing.is_empty() {
        if !run.journal.is_done(StepName::Packages) {
            run.journal.begin(StepName::Packages, None)?;
            run.journal.finish(StepName::Packages, 0.0)?;
        }
        tracing::info!(packages = %wanted.join(" "), "packages already installed");
        return Ok(());
    }
    let t0 = Instant::now();
    run.journal
        .begin(StepName::Packages, Some(&missing.join(" ")))?;
    crate::notify::status(&format!("packages: installing {}", missing.join(" ")));
    let pg_missing = missing.iter().any(|p| p.starts_with("postgresql"));
    let raw = run.run_dir.join("raw");
    if pg_missing {
        for f in profile.repository_files(&run.plan.postgres, v) {
            crate::fsutil::write_if_changed(&f.path, &f.text)?;
        }
    }
    for (n, cmd) in profile
        .install_commands(&missing, pg_missing, &run.plan.postgres)
        .into_iter()
        .enumerate()
    {
        let cmd = cmd
            .output_files(
                &raw.join(format!("packages-{n}.stdout")),
                &raw.join(format!("packages-{n}.stderr")),
            )
            .timeout(Duration::from_secs(3600));
        run.runner
            .run(&cmd)
            .await
            .with_context(|| format!("installing {} on {}", missing.join(" "), profile.name()))?;
    }
    run.journal
        .finish(StepName::Packages, t0.elapsed().as_secs_f64())
}
