//! `pgapplianced bench init`: pgbench's own init (client-side and server-side generate)
//! against the appliance's `parallel` loader, each on a fresh database of the cluster as
//! the plan configures it, the order rotating each round. The parallel figure runs until
//! the server is back in the plan's configuration (restart, OS sync, CHECKPOINT).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::median;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::runner::CommandSpec;
use crate::steps::Run;

pub struct InitBenchOptions {
    pub plan: PathBuf,
    pub workdir: PathBuf,
    pub scale: u32,
    pub rounds: u32,
    /// Worker counts to report for the parallel loader besides the default (CPU count).
    pub workers: Vec<u32>,
}

const DB: &str = "bench_init";

#[derive(Debug, Clone, PartialEq)]
enum Candidate {
    PgbenchClient,
    PgbenchServer,
    Parallel(u32),
}

impl Candidate {
    fn label(&self) -> String {
        match self {
            Candidate::PgbenchClient => "pgbench -i (client-side)".into(),
            Candidate::PgbenchServer => "pgbench -i -I dtGvp (server-side)".into(),
            Candidate::Parallel(n) => format!("parallel, {n} worker(s)"),
        }
    }
}

async fn fresh_database(run: &Run) -> Result<()> {
    let c = run.cluster()?;
    let s = Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await?;
    s.execute(&format!("DROP DATABASE IF EXISTS {DB}")).await?;
    s.execute(&format!("CREATE DATABASE {DB}")).await
}

async fn time_candidate(run: &Run, cand: &Candidate, scale: u32) -> Result<f64> {
    fresh_database(run).await?;
    let c = run.cluster()?;
    let t0 = Instant::now();
    match cand {
        Candidate::PgbenchClient | Candidate::PgbenchServer => {
            let mut args = vec!["--initialize".to_string(), "--quiet".to_string()];
            args.extend(crate::steps::dataset_conn_args(run)?);
            args.push(format!("--scale={scale}"));
            args.push(format!("--fillfactor={}", run.plan.dataset.fillfactor));
            if *cand == Candidate::PgbenchServer {
                args.push("--init-steps=dtGvp".into());
            }
            args.push(DB.into());
            run.runner
                .run(&CommandSpec::new(run.bin()?.tool("pgbench")).args(args))
                .await?;
        }
        Candidate::Parallel(n) => {
            let inv = run.inventory()?;
            let spec = crate::loader::LoadSpec {
                database: DB,
                scale,
                fillfactor: run.plan.dataset.fillfactor,
                degree: *n,
                cores: inv.cpu.cpus,
                ram_bytes: inv.memory_bytes,
            };
            let r = crate::loader::parallel_init(c, &spec, run.applied_settings()).await?;
            let phases: Vec<String> = r
                .phases
                .iter()
                .map(|(p, s)| format!("{p} {s:.2} s"))
                .collect();
            println!("  parallel, {n} worker(s) phases: {}", phases.join(", "));
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

pub async fn run(o: InitBenchOptions) -> Result<()> {
    let run = super::prepared_cluster(&o.plan, &o.workdir).await?;
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
            let t = time_candidate(&run, &candidates[i], o.scale)
                .await
                .with_context(|| format!("{} at scale {}", candidates[i].label(), o.scale))?;
            println!("round {}: {}: {t:.2} s", round + 1, candidates[i].label());
            times[i].push(t);
        }
    }
    let c = run.cluster()?;
    Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres")
        .await?
        .execute(&format!("DROP DATABASE IF EXISTS {DB}"))
        .await?;
    c.stop().await?;
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| median(t).unwrap_or(f64::NAN))
        .collect();
    println!("scale {}, {} round(s), medians:", o.scale, o.rounds.max(1));
    for (cand, m) in candidates.iter().zip(&medians) {
        println!("  {}: {m:.2} s", cand.label());
    }
    let best_pgbench = medians[0].min(medians[1]);
    for (cand, m) in candidates.iter().zip(&medians).skip(2) {
        println!(
            "  {} speedup vs best pgbench mode: {:.2}",
            cand.label(),
            best_pgbench / m
        );
    }
    println!(
        "init speedup vs best pgbench mode: {:.2}",
        best_pgbench / medians[2]
    );
    Ok(())
}
