//! `pgappliance check`: the daemon's plan parser and validator, run ahead of the build.

use std::path::PathBuf;

use anyhow::Result;
use pgappliance::plan::Plan;
use pgappliance::sweep::expand;

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
            }
            Err(e) => {
                eprintln!("{e}");
                code = 1;
            }
        }
    }
    Ok(code)
}
