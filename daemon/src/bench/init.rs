//! `pgapplianced bench init`: pgbench's own init (client-side and server-side generate)
//! against the appliance's `parallel` loader, each on a fresh database of the cluster as
//! the plan configures it, the order rotating each round. The parallel figure runs until
//! the server is back in the plan's configuration (restart, OS sync, CHECKPOINT).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::median;
use crate::engine::Prepared;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::runner::CommandSpec;

/// `bench init`'s options (its command line).
#[derive(Debug, clap::Args)]
pub struct InitBenchOptions {
    // The plan whose cluster configuration is used (examples/quick.toml in the source tree
    // is a small one).
    #[command(flatten)]
    pub plan: crate::engine::PlanArg,
    /// pgbench scale factor of the datasets generated.
    #[arg(long)]
    pub scale: u32,
    /// Where the benchmark's cluster lives.
    #[arg(long, default_value = "/var/tmp/pgappliance-bench-init")]
    pub workdir: PathBuf,
    /// Rounds over all candidates (the order rotates each round).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Other worker counts of the parallel loader to report (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<u32>,
}

const DB: &str = "bench_init";

#[derive(Debug, Clone, PartialEq)]
pub enum Candidate {
    PgbenchClient,
    PgbenchServer,
    Parallel(u32),
}

impl Candidate {
    pub fn label(&self) -> String {
        match self {
            Candidate::PgbenchClient => "pgbench -i (client-side)".into(),
            Candidate::PgbenchServer => "pgbench -i -I dtGvp (server-side)".into(),
            Candidate::Parallel(n) => format!("parallel, {n} worker(s)"),
        }
    }
}

async fn fresh_database(run: &Prepared) -> Result<()> {
    let c = run.cluster()?;
    let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await?;
    s.execute(&format!("DROP DATABASE IF EXISTS {DB}")).await?;
    s.execute(&format!("CREATE DATABASE {DB}")).await
}

/// What happens while `bench init` runs.
#[derive(Debug, Clone, PartialEq)]
pub enum InitEvent {
    /// The parallel loader's phases (name, seconds) in one timing.
    Phases {
        workers: u32,
        phases: Vec<(String, f64)>,
    },
    /// One timing of a candidate.
    Timed {
        round: u32,
        candidate: Candidate,
        seconds: f64,
    },
}

/// What `bench init` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct InitReport {
    pub scale: u32,
    pub rounds: u32,
    /// Each candidate's median seconds; the first two are pgbench's modes, the third the
    /// loader's default degree.
    pub medians: Vec<(Candidate, f64)>,
}

impl InitReport {
    /// The faster of pgbench's two modes.
    pub(crate) fn best_pgbench_s(&self) -> f64 {
        self.medians[0].1.min(self.medians[1].1)
    }
    /// Each loader candidate's speedup against the best pgbench mode.
    pub fn speedups(&self) -> Vec<(&Candidate, f64)> {
        let best = self.best_pgbench_s();
        self.medians
            .iter()
            .skip(2)
            .map(|(c, m)| (c, best / m))
            .collect()
    }
    /// The default degree's speedup: the benchmark's ratio.
    pub fn ratio(&self) -> f64 {
        self.best_pgbench_s() / self.medians[2].1
    }
}

async fn time_candidate(
    run: &Prepared,
    cand: &Candidate,
    scale: u32,
    on_event: &mut dyn FnMut(&InitEvent),
) -> Result<f64> {
    fresh_database(run).await?;
    let c = run.cluster()?;
    let t0 = Instant::now();
    match cand {
        Candidate::PgbenchClient | Candidate::PgbenchServer => {
            let mut args = vec!["--initialize".to_string(), "--quiet".to_string()];
            args.extend(run.conn_args()?);
            args.push(format!("--scale={scale}"));
            args.push(format!("--fillfactor={}", run.plan().dataset.fillfactor));
            if *cand == Candidate::PgbenchServer {
                args.push("--init-steps=dtGvp".into());
            }
            args.push(DB.into());
            run.runner()
                .run(&CommandSpec::new(run.bin()?.tool("pgbench")).args(args))
                .await?;
        }
        Candidate::Parallel(n) => {
            let inv = run.inventory()?;
            let spec = crate::loader::LoadSpec {
                database: DB,
                scale,
                fillfactor: run.plan().dataset.fillfactor,
                degree: *n,
                cores: inv.cpu.cpus,
                ram_bytes: inv.memory_bytes,
            };
            let r = crate::loader::parallel_init(c, &spec, run.settings()?).await?;
            on_event(&InitEvent::Phases {
                workers: *n,
                phases: r.phases.iter().map(|(p, s)| (p.to_string(), *s)).collect(),
            });
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// The options a benchmark can run with, checked before anything starts (pure).
pub(crate) fn check_options(o: &InitBenchOptions) -> Result<()> {
    if o.scale == 0 {
        anyhow::bail!("--scale 0: pgbench's scale factor is at least 1");
    }
    if let Some(w) = o.workers.iter().find(|w| **w == 0) {
        anyhow::bail!("--workers {w}: the parallel loader needs at least 1 worker");
    }
    Ok(())
}

/// Runs the benchmark; `on_event` sees each timing as it is made. The options are checked
/// before the cluster starts, and the cluster is stopped however the timings end.
pub async fn run(o: InitBenchOptions, on_event: &mut dyn FnMut(&InitEvent)) -> Result<InitReport> {
    check_options(&o)?;
    let run = crate::engine::prepare(&o.plan.path(), &o.workdir).await?;
    let measured = measure(&run, &o, on_event).await;
    let stopped = run.stop().await;
    let report = measured?;
    stopped?;
    Ok(report)
}

async fn measure(
    run: &crate::engine::Prepared,
    o: &InitBenchOptions,
    on_event: &mut dyn FnMut(&InitEvent),
) -> Result<InitReport> {
    let cores = run.inventory()?.cpu.cpus.max(1);
    let mut candidates = vec![
        Candidate::PgbenchClient,
        Candidate::PgbenchServer,
        // The default degree the dataset step uses.
        Candidate::Parallel(crate::loader::default_degree(cores)),
    ];
    for w in &o.workers {
        if !candidates.contains(&Candidate::Parallel(*w)) {
            candidates.push(Candidate::Parallel(*w));
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for round in 0..o.rounds.max(1) {
        let n = candidates.len();
        for k in 0..n {
            let i = (k + round as usize) % n;
            let t = time_candidate(run, &candidates[i], o.scale, on_event)
                .await
                .with_context(|| format!("{} at scale {}", candidates[i].label(), o.scale))?;
            on_event(&InitEvent::Timed {
                round: round + 1,
                candidate: candidates[i].clone(),
                seconds: t,
            });
            times[i].push(t);
        }
    }
    let c = run.cluster()?;
    Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres")
        .await?
        .execute(&format!("DROP DATABASE IF EXISTS {DB}"))
        .await?;
    let medians = candidates
        .into_iter()
        .zip(times.iter_mut())
        .map(|(c, t)| (c, median(t).unwrap_or(f64::NAN)))
        .collect();
    Ok(InitReport {
        scale: o.scale,
        rounds: o.rounds.max(1),
        medians,
    })
}
