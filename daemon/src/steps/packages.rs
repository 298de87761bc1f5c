//! Packages: PostgreSQL of the planned version from PGDG (the repository RPM, a mirror's
//! `.repo` file or an apt source, from the plan) and the tools the later steps need (lvm2 and
//! xfsprogs for the data volume, tuned for the profile, what each workload kind asks for:
//! sysbench for sysbench-tpcc). Installs only what is missing; a machine that has
//! everything does nothing. When the payload carries packages (`pgappliance build
//! --packages DIR`, unpacked at [`crate::platform::MEDIUM_DIR`] with its index), they are
//! the only source: the payload's presence decides, not a plan key, and no network is used.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::{Check, Context, Looking, Product, Step};
use crate::journal::StepName;
use crate::plan::{Devices, Plan};
use crate::platform::{Medium, Profile};
use crate::runner::CommandError;

pub(crate) struct Packages;

/// A package or repository failed dnf's signature check: the transaction installed nothing,
/// and running it again would not change that.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what}: a package failed its signature check, so `{command}` installed nothing: {reason}; {fix}, then start again"
)]
pub(crate) struct SignatureRefused {
    pub(crate) what: String,
    pub(crate) reason: String,
    pub(crate) command: String,
    /// What must change: the plan's repository, or the payload's packages.
    pub(crate) fix: &'static str,
}

/// The fix of a signature refusal from the plan's repository.
const FIX_REPOSITORY: &str = "the repository's packages are not signed by the key it names: fix the repository or the key (postgres.repository, repository_baseurl, repository_gpgkey)";

/// The fix of a signature refusal from the payload's packages.
const FIX_MEDIUM: &str = "the payload's packages are not signed by the keys it carries: build the payload again (pgappliance build --packages DIR --packages-key FILE checks every package against the keys)";

/// The packages the plan needs on its platform (what `build --packages` and `check
/// --packages` look for in the operator's directory).
pub fn wanted(plan: &Plan) -> Vec<String> {
    let profile = Profile::of(plan.appliance.platform);
    let mut wanted = profile.packages(profile.pg_version(&plan.postgres));
    if plan.storage.devices == Devices::None {
        wanted.retain(|p| p != "lvm2" && p != "xfsprogs");
    }
    if plan.tuning.tuned_profile == "none" {
        wanted.retain(|p| p != "tuned");
    }
    for w in &plan.workloads {
        for pkg in crate::workload::of(w.kind()).packages(&profile) {
            if !wanted.contains(&pkg) {
                wanted.push(pkg);
            }
        }
    }
    wanted
}

/// The packages the payload carries for `profile` under `dir`, when their index is there;
/// the key files under its `keys/`, sorted.
pub(crate) fn medium_at(profile: &Profile, dir: &Path) -> Result<Option<Medium>> {
    if !dir.join(profile.medium_index()).is_file() {
        return Ok(None);
    }
    let mut keys = Vec::new();
    let key_dir = dir.join(crate::platform::MEDIUM_KEYS);
    if key_dir.is_dir() {
        for entry in std::fs::read_dir(&key_dir)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", key_dir.display()))?
        {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                keys.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    keys.sort();
    if keys.is_empty() && profile.package_extension() == "rpm" {
        anyhow::bail!(
            "the payload's packages at {} carry no key under {}/: dnf could check none of them (build the payload again with pgappliance build --packages DIR --packages-key FILE)",
            dir.display(),
            crate::platform::MEDIUM_KEYS
        );
    }
    Ok(Some(Medium {
        dir: dir.to_path_buf(),
        keys,
    }))
}

/// The wanted packages that are not installed.
async fn missing(cx: &Context) -> Result<Vec<String>> {
    let profile = Profile::of(cx.plan.appliance.platform);
    let mut missing = Vec::new();
    for pkg in wanted(&cx.plan) {
        let out = cx
            .runner
            .run_accepting(&profile.query_installed(&pkg), &[0, 1])
            .await?;
        if !(out.success() && profile.installed_from_output(&out.stdout)) {
            missing.push(pkg);
        }
    }
    Ok(missing)
}

impl Step for Packages {
    const NAME: StepName = StepName::Packages;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        let missing = missing(cx).await?;
        if missing.is_empty() {
            tracing::info!(packages = %wanted(&cx.plan).join(" "), "packages already installed");
            return Ok(Check::Done);
        }
        Ok(Check::Todo(format!("missing {}", missing.join(" "))))
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let profile = Profile::of(cx.plan.appliance.platform);
        let v = profile.pg_version(&cx.plan.postgres);
        let missing = missing(cx).await?;
        cx.journal
            .begin(StepName::Packages, Some(&missing.join(" ")))?;
        crate::notify::status(&format!("packages: installing {}", missing.join(" ")));
        let pg_missing = missing.iter().any(|p| p.starts_with("postgresql"));
        let raw = cx.raw();
        let medium = medium_at(
            &profile,
            &cx.host.machine_path(Path::new(crate::platform::MEDIUM_DIR)),
        )?;
        let commands = match &medium {
            Some(medium) => {
                let f = profile.medium_repository_file(medium);
                crate::fsutil::write_if_changed(&cx.host.machine_path(&f.path), &f.text)?;
                tracing::info!(dir = %medium.dir.display(), "installing from the packages the payload carries");
                profile.medium_install_commands(&missing)
            }
            None => {
                if pg_missing {
                    for f in profile.repository_files(&cx.plan.postgres, v) {
                        crate::fsutil::write_if_changed(&cx.host.machine_path(&f.path), &f.text)?;
                    }
                }
                profile.install_commands(&missing, pg_missing, &cx.plan.postgres)
            }
        };
        for (n, cmd) in commands.into_iter().enumerate() {
            let cmd = cmd
                .output_files(
                    &raw.join(format!("packages-{n}.stdout")),
                    &raw.join(format!("packages-{n}.stderr")),
                )
                .timeout(Duration::from_secs(3600));
            if let Err(e) = cx.runner.run(&cmd).await {
                // A package or repository that fails its signature check is named first:
                // dnf's own summary ("GPG check FAILED") does not say which.
                let signature = match &e {
                    CommandError::Failed { stderr_tail, .. } => {
                        let full =
                            std::fs::read_to_string(raw.join(format!("packages-{n}.stderr")))
                                .unwrap_or_else(|_| stderr_tail.clone());
                        crate::platform::dnf_signature_failure(&full)
                    }
                    CommandError::Spawn { .. } => None,
                };
                let what = format!("installing {} on {}", missing.join(" "), profile.name());
                return Err(match signature {
                    // Trying again installs nothing: the repository or its key must change.
                    Some(reason) => anyhow::Error::new(SignatureRefused {
                        what,
                        reason,
                        command: cmd.display(),
                        fix: if medium.is_some() {
                            FIX_MEDIUM
                        } else {
                            FIX_REPOSITORY
                        },
                    }),
                    None => anyhow::Error::new(e).context(what),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Platform;

    #[test]
    fn the_medium_is_found_by_its_index_with_its_keys() {
        let d = tempfile::tempdir().expect("tmp");
        let rocky = Profile::of(Platform::Rocky8);
        let debian = Profile::of(Platform::Debian12);
        // No index: no medium, whatever else is there.
        std::fs::write(d.path().join("x.rpm"), "x").expect("write");
        assert_eq!(medium_at(&rocky, d.path()).expect("read"), None);
        std::fs::create_dir(d.path().join("repodata")).expect("mkdir");
        std::fs::write(d.path().join("repodata/repomd.xml"), "<repomd/>").expect("write");
        // RPMs nobody could check are refused.
        let e = medium_at(&rocky, d.path()).expect_err("no key");
        assert!(e.to_string().contains("carry no key under keys/"), "{e}");
        std::fs::create_dir(d.path().join("keys")).expect("mkdir");
        for k in ["RPM-GPG-KEY-rockyofficial", "PGDG-RPM-GPG-KEY-RHEL"] {
            std::fs::write(d.path().join("keys").join(k), "key").expect("write");
        }
        assert_eq!(
            medium_at(&rocky, d.path()).expect("read"),
            Some(Medium {
                dir: d.path().to_path_buf(),
                keys: vec![
                    "PGDG-RPM-GPG-KEY-RHEL".into(),
                    "RPM-GPG-KEY-rockyofficial".into()
                ],
            })
        );
        // debian12's index is Packages.
        assert_eq!(medium_at(&debian, d.path()).expect("read"), None);
        std::fs::write(d.path().join("Packages"), "").expect("write");
        assert!(medium_at(&debian, d.path()).expect("read").is_some());
    }
}
