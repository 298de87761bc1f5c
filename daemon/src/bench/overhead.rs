//! `pgapplianced bench overhead`: the plan's points run directly (a plain pgbench process,
//! nothing else) and through the appliance (runner, OS sampler, statistics), interleaved
//! with the order alternating each round, on the same cluster. Both get the same pgbench
//! arguments and a CHECKPOINT before; what differs is only the harness around pgbench.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::{geometric_mean, own_cpu_seconds};
use crate::pgbench::parse_summary;

/// `bench overhead`'s options (its command line).
#[derive(Debug, clap::Args)]
pub struct OverheadOptions {
    #[command(flatten)]
    pub plan: crate::engine::PlanArg,
    /// Where the benchmark's cluster lives.
    #[arg(long, default_value = "/var/tmp/pgappliance-bench")]
    pub workdir: PathBuf,
    /// Rounds over all points (the order alternates each round).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
}

/// One point run directly and through the appliance.
#[derive(Debug, Clone, PartialEq)]
pub struct PointPair {
    pub round: u32,
    pub point: String,
    pub direct_tps: f64,
    pub appliance_tps: f64,
}

impl PointPair {
    pub fn ratio(&self) -> f64 {
        if self.direct_tps > 0.0 {
            self.appliance_tps / self.direct_tps
        } else {
            0.0
        }
    }
}

/// What `bench overhead` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct OverheadReport {
    pub pairs: Vec<PointPair>,
    /// The daemon's own CPU seconds while it ran points, and the wall time of those points.
    pub daemon_cpu_s: f64,
    pub sweep_wall_s: f64,
    /// Geometric mean of the pairs' tps ratios (appliance / direct).
    pub ratio: f64,
}

impl OverheadReport {
    /// Daemon CPU seconds per minute of sweep.
    pub fn cpu_per_minute(&self) -> f64 {
        if self.sweep_wall_s > 0.0 {
            self.daemon_cpu_s / self.sweep_wall_s * 60.0
        } else {
            0.0
        }
    }
}

/// Runs the benchmark; `on_pair` sees each pair as it is measured.
pub async fn run(
    o: OverheadOptions,
    on_pair: &mut dyn FnMut(&PointPair),
) -> Result<OverheadReport> {
    let run = crate::engine::prepare(&o.plan.path(), &o.workdir).await?;
    let points: Vec<_> = run.points()?.into_iter().filter(|p| !p.warmup).collect();
    let bench_dir = o.workdir.join("bench-overhead");
    let mut pairs = Vec::new();
    let mut appliance_cpu = 0.0;
    let mut appliance_wall = 0.0;
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
                    let r = run.measure_point(p, &raw, 1).await?;
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
                    run.before_point(p).await?;
                    let spec = run.point_command(p, &raw)?;
                    let mut cmd = tokio::process::Command::new(&spec.program);
                    let identity = spec.identity()?;
                    cmd.env_clear()
                        .envs(spec.environment(std::env::vars(), identity.as_ref()))
                        .args(&spec.args)
                        .current_dir(&raw)
                        .stdout(crate::fsutil::open_own_file(
                            &raw.join("stdout.txt"),
                            false,
                            true,
                        )?)
                        .stderr(crate::fsutil::open_own_file(
                            &raw.join("stderr.txt"),
                            false,
                            true,
                        )?);
                    let status = cmd.status().await.context("running pgbench directly")?;
                    let out = std::fs::read_to_string(raw.join("stdout.txt"))?;
                    let s = parse_summary(&out)
                        .with_context(|| format!("point {} run directly ({status})", p.id))?;
                    direct_tps = Some(s.tps);
                }
            }
            let pair = PointPair {
                round: round + 1,
                point: p.id.clone(),
                direct_tps: direct_tps.unwrap_or(0.0),
                appliance_tps: appliance_tps.unwrap_or(0.0),
            };
            on_pair(&pair);
            pairs.push(pair);
        }
    }
    run.stop().await?;
    let ratios: Vec<f64> = pairs.iter().map(PointPair::ratio).collect();
    let ratio = geometric_mean(&ratios).context("no point produced a tps figure")?;
    Ok(OverheadReport {
        pairs,
        daemon_cpu_s: appliance_cpu,
        sweep_wall_s: appliance_wall,
        ratio,
    })
}
