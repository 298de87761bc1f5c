//! SELinux labels for PGDATA on platforms that run SELinux (Rocky): the persistent
//! file-context rule `<path>(/.*)?` → `postgresql_db_t` whenever SELinux is there (running,
//! or configured for the next boot), then a relabel of what is on disk when it runs. Called
//! after the data volume is mounted (or its directory made) and before PostgreSQL starts
//! (after initdb, and on every resume). The command lines are [`crate::platform`]'s.

use std::path::Path;

use anyhow::{Context, Result};

use crate::platform::{
    fcontext_rule_type, restorecon, selinux_fcontext_command, selinux_fcontext_list,
    selinux_fcontext_pattern, selinux_presence, Profile, SelinuxPresence, PGDATA_SELINUX_TYPE,
};
use crate::runner::Runner;

/// Labels `path` (PGDATA's mount point) for PostgreSQL; `stage` names the raw files in
/// `raw`.
pub(crate) async fn label_pgdata(
    runner: &Runner,
    profile: &Profile,
    path: &str,
    stage: &str,
    raw: &Path,
) -> Result<()> {
    if !profile.has_selinux() {
        return Ok(());
    }
    let enforce = std::fs::read_to_string("/sys/fs/selinux/enforce").ok();
    let config = std::fs::read_to_string("/etc/selinux/config").ok();
    let presence = selinux_presence(enforce.as_deref(), config.as_deref());
    if presence == SelinuxPresence::Absent {
        tracing::info!(
            path,
            "SELinux is neither running nor configured: no label needed"
        );
        return Ok(());
    }
    let pattern = selinux_fcontext_pattern(path);
    let list = runner
        .run(&selinux_fcontext_list())
        .await
        .context("listing SELinux's local file-context rules")?;
    let existing = fcontext_rule_type(&list.stdout, &pattern);
    if let Some(cmd) = selinux_fcontext_command(path, existing.as_deref()) {
        runner.run(&cmd).await.with_context(|| {
            format!("making {pattern} SELinux type {PGDATA_SELINUX_TYPE} (was: {existing:?})")
        })?;
    }
    if presence == SelinuxPresence::Running {
        runner
            .run(&restorecon(path).output_files(
                &raw.join(format!("restorecon-{stage}.stdout")),
                &raw.join(format!("restorecon-{stage}.stderr")),
            ))
            .await
            .with_context(|| format!("relabelling {path} for PostgreSQL"))?;
    } else {
        tracing::warn!(path, "SELinux is configured but not running: the rule is in place, the relabel happens when it runs");
    }
    Ok(())
}
