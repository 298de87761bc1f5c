//! `pgapplianced bench overhead`: the plan's points run directly (a plain pgbench process,
//! nothing else) and through the appliance (runner, OS sampler, statistics), interleaved
//! with the order alternating each round, on the same cluster. Both get the same pgbench
//! arguments and a CHECKPOINT before; what differs is only the harness around pgbench.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::{geometric_mean, own_cpu_seconds};
use crate::pgbench::parse_summary;
use crate::steps::sweep::{before_point, measure_point, point_command, points};

pub struct OverheadOptions {
    pub plan: PathBuf,
    pub workdir: PathBuf,
    pub rounds: u32,
}

pub async fn run(o: OverheadOptions) -> Result<()> {
    let run = super::prepared_cluster(&o.plan, &o.workdir).await?;
    let points: Vec<_> = points(&run)?.into_iter().filter(|p| !p.warmup).collect();
    let bench_dir = run.workdir.join("bench-overhead");
    let mut ratios = Vec::new();
    let mut appliance_cpu = 0.0;
    let mut appliance_wall = 0.0;
    let mut points_done = 0usize;
    for round in 0..o.rounds {
        for p in &points {
            let mut direct_tps = None;
            let mut appliance_tps = None;
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for through_appliance in order {
                let raw = bench_dir.join(format!(
                    "r{round}-{}-{}",
                    p.id,
                    if through_appliance {
                        "appliance"
                    } else {
                        "direct"
                    }
                ));
                if through_appliance {
                    let cpu0 = own_cpu_seconds();
                    let t0 = Instant::now();
                    let r = measure_point(&run, p, &raw, 1).await?;
                    appliance_wall += t0.elapsed().as_secs_f64();
                    appliance_cpu += own_cpu_seconds() - cpu0;
                    appliance_tps = Some(r.tps().with_context(|| {
                        format!("point {} failed through the appliance: {:?}", p.id, r.error)
                    })?);
                } else {
                    if raw.exists() {
                        std::fs::remove_dir_all(&raw)?;
                    }
                    crate::fsutil::create_dir_all(&raw)?;
                    before_point(&run, p).await?;
                    let spec = point_command(&run, p, &raw)?;
                    let mut cmd = tokio::process::Command::new(&spec.program);
                    let identity = spec.identity()?;
                    cmd.env_clear()
                        .envs(spec.environment(std::env::vars(), identity.as_ref()))
                        .args(&spec.args)
                        .current_dir(&raw)
                        .stdout(std::fs::File::create(raw.join("stdout.txt"))?)
                        .stderr(std::fs::File::create(raw.join("stderr.txt"))?);
                    let status = cmd.status().await.context("running pgbench directly")?;
                    let out = std::fs::read_to_string(raw.join("stdout.txt"))?;
                    let s = parse_summary(&out)
                        .with_context(|| format!("point {} run directly ({status})", p.id))?;
                    direct_tps = Some(s.tps);
                }
            }
            let (d, a) = (direct_tps.unwrap_or(0.0), appliance_tps.unwrap_or(0.0));
            let ratio = if d > 0.0 { a / d } else { 0.0 };
            ratios.push(ratio);
            points_done += 1;
            println!(
                "round {} {}: direct {d:.1} tps, appliance {a:.1} tps, ratio {ratio:.3}",
                round + 1,
                p.id
            );
        }
    }
    run.cluster()?.stop().await?;
    let per_minute = if appliance_wall > 0.0 {
        appliance_cpu / appliance_wall * 60.0
    } else {
        0.0
    };
    println!(
        "{points_done} point pairs; daemon CPU {appliance_cpu:.3} s over {appliance_wall:.1} s of sweep through the appliance"
    );
    println!("daemon CPU per minute of sweep: {per_minute:.3} s");
    let ratio = geometric_mean(&ratios).context("no point produced a tps figure")?;
    println!("harness tps ratio: {ratio:.3}");
    Ok(())
}
