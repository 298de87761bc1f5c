//! `pgappliance check`: the daemon's plan parser and validator, run ahead of the build.

use std::path::PathBuf;

use anyhow::Result;
use pgappliance::plan::Plan;
use pgappliance::sweep::expand;

/// The plan's credentials file, when it names one that exists on this machine: mode,
/// owner and the profile, as the daemon will read it. One that is not here only warns: it
/// may be provisioned on the target later.
fn check_credentials_file(plan: &Plan) -> Result<()> {
    let Some(file) = plan.upload.credentials_file.as_deref() else {
        return Ok(());
    };
    if plan.upload.credentials != pgappliance::plan::Credentials::File {
        return Ok(());
    }
    let path = std::path::Path::new(file);
    if !path.exists() {
        eprintln!(
            "warning: credentials file {file} is not on this machine; it must be there (mode 0600, owned by the daemon's user, profile \"{}\") when the daemon runs",
            plan.upload.profile()
        );
        if let Some(target) = crate::build::credentials::target_file(plan) {
            eprintln!(
                "warning: {}",
                crate::build::credentials::undelivered_warning(plan, target)
            );
        }
        return Ok(());
    }
    pgappliance::upload::store::read_credentials_file(path, plan.upload.profile())?;
    Ok(())
}

/// Prints `PLAN: ok …` per valid plan and `PLAN:LINE:COL: key: problem` per problem.
/// Returns the exit code: 0 when every plan is valid, 1 otherwise.
pub fn run(plans: &[PathBuf]) -> Result<i32> {
    let mut code = 0;
    for path in plans {
        match Plan::load(path) {
            Ok(plan) => {
                // Thread counts depend on the target's cores; the point list does not.
                let points = expand(&plan, 1);
                let measured = points.iter().filter(|p| !p.warmup).count();
                println!(
                    "{}: ok: appliance {} ({:?}), PostgreSQL {}, {} workload(s), {} point(s), up to {} clients",
                    path.display(),
                    plan.appliance.name,
                    plan.appliance.platform,
                    plan.postgres
                        .version
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "newest installed".into()),
                    plan.workloads.len(),
                    measured,
                    plan.max_clients()
                );
                if let Err(problem) = check_credentials_file(&plan) {
                    eprintln!("{}: upload.credentials_file: {problem:#}", path.display());
                    code = 1;
                }
            }
            Err(e) => {
                eprintln!("{e}");
                code = 1;
            }
        }
    }
    Ok(code)
}
