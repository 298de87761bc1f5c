//! `pgapplianced` command line (clap derive), what each command calls in the library, and
//! how its outcome is shown (text, exit status).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use pgappliance::engine::{journal_path, RunMode, RunOptions};
use pgappliance::journal::JournalFile;

#[derive(Debug, Parser)]
#[command(
    name = "pgapplianced",
    version,
    about = "Runs a pgappliance benchmark plan"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run (or resume) a plan.
    Run(RunArgs),
    /// Parse a program's output and print it as JSON.
    #[command(subcommand)]
    Parse(ParseCommand),
    /// Upload the finished run of a work directory (again): complete, verified, never
    /// overwriting; a no-op once the store has its manifest.
    Upload {
        /// Work directory of the run.
        #[arg(long, default_value = pgappliance::platform::APPLIANCE_WORKDIR)]
        workdir: PathBuf,
        #[command(flatten)]
        upload: UploadArgs,
    },
    /// Benchmarks that print their ratio against a baseline (docs/performance.md).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Show the journal of a run: steps done, the current step, points done/total.
    Status {
        /// Work directory of the run.
        #[arg(long, default_value = pgappliance::platform::APPLIANCE_WORKDIR)]
        workdir: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Run against a cluster under --workdir managed with pg_ctl, as plain processes.
    /// Without it the plan runs as the appliance (what pgapplianced.service does at boot):
    /// every step through systemd over D-Bus, PostgreSQL as the platform's service.
    #[arg(long)]
    pub local: bool,
    /// The plan file.
    #[arg(long)]
    pub plan: PathBuf,
    /// Where the journal, the cluster and the run directories live.
    #[arg(long, default_value = pgappliance::platform::APPLIANCE_WORKDIR)]
    pub workdir: PathBuf,
    /// PostgreSQL bin directory (default: found from the plan's version).
    #[arg(long)]
    pub pg_bin: Option<PathBuf>,
    /// OS user that owns the cluster (default when root: postgres).
    #[arg(long)]
    pub cluster_user: Option<String>,
    /// Leave the cluster running at the end.
    #[arg(long)]
    pub keep_running: bool,
    #[command(flatten)]
    pub upload: UploadArgs,
}

#[derive(Debug, clap::Args)]
pub struct UploadArgs {
    /// Store URL overriding the plan's upload.store (s3://bucket/prefix or file:///dir).
    #[arg(long)]
    pub store: Option<String>,
    /// Multipart part size in MiB (at least 5); files of two parts or more go multipart.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(5..=1024))]
    pub part_size_mib: u32,
}

impl UploadArgs {
    fn options(&self) -> pgappliance::upload::UploadOptions {
        let part = (self.part_size_mib as usize) << 20;
        pgappliance::upload::UploadOptions {
            part_size: part,
            multipart_threshold: 2 * part as u64,
            ..Default::default()
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// tps of the plan's points run directly vs through the appliance; daemon CPU cost.
    Overhead {
        #[arg(long)]
        plan: PathBuf,
        /// Where the benchmark's cluster lives.
        #[arg(long, default_value = "/var/tmp/pgappliance-bench")]
        workdir: PathBuf,
        /// Rounds over all points (the order alternates each round).
        #[arg(long, default_value_t = 3)]
        rounds: u32,
    },
    /// pgbench's init modes vs the parallel loader: medians and the speedup.
    Init {
        #[arg(long)]
        scale: u32,
        /// The plan whose cluster configuration is used.
        #[arg(long, default_value = "examples/quick.toml")]
        plan: PathBuf,
        #[arg(long, default_value = "/var/tmp/pgappliance-bench-init")]
        workdir: PathBuf,
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Other worker counts of the parallel loader to report (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        workers: Vec<u32>,
    },
    /// Upload throughput and peak memory vs `aws s3 cp` to the same S3 store.
    Upload {
        #[arg(long, default_value_t = 1024)]
        size_mib: u64,
        /// s3://bucket/prefix; credentials and endpoint from AWS_* variables.
        #[arg(long)]
        store: String,
        /// The awscli executable.
        #[arg(long, default_value = "aws")]
        aws: PathBuf,
        #[arg(long, default_value_t = 8)]
        part_size_mib: u32,
        /// Where the test file is written.
        #[arg(long, default_value = "/var/tmp")]
        workdir: PathBuf,
    },
    /// The measured side of `bench upload` (run by it in a child process).
    #[command(hide = true)]
    UploadChild {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        store: String,
        #[arg(long)]
        part_size_mib: u32,
        #[arg(long)]
        tag: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ParseCommand {
    /// A pgbench run's output (stdout, or stdout and stderr merged).
    Pgbench { file: PathBuf },
    /// `pgbench -i` output: the `done in …` breakdown.
    PgbenchInit { file: PathBuf },
}

/// The largest program output `parse` reads (a pgbench run's stdout with a progress line
/// per second for a day is a few MiB).
const MAX_PARSE_BYTES: u64 = 64 << 20;

fn read(file: &std::path::Path) -> Result<String> {
    pgappliance::fsutil::read_to_string_limited(file, MAX_PARSE_BYTES, "a program's output")
        .with_context(|| format!("reading {}", file.display()))
}

pub async fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::Parse(ParseCommand::Pgbench { file }) => {
            let text = read(&file)?;
            let summary = pgappliance::pgbench::parse_summary(&text)
                .with_context(|| format!("{}", file.display()))?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(0)
        }
        Command::Parse(ParseCommand::PgbenchInit { file }) => {
            let text = read(&file)?;
            let b = pgappliance::pgbench::parse_init(&text)
                .with_context(|| format!("{}", file.display()))?;
            println!("{}", serde_json::to_string_pretty(&b)?);
            Ok(0)
        }
        Command::Status { workdir } => status(&workdir),
        Command::Bench(BenchCommand::Overhead {
            plan,
            workdir,
            rounds,
        }) => {
            let report = pgappliance::bench::overhead::run(
                pgappliance::bench::overhead::OverheadOptions {
                    plan,
                    workdir,
                    rounds,
                },
                &mut |p| {
                    println!(
                        "round {} {}: direct {:.1} tps, appliance {:.1} tps, ratio {:.3}",
                        p.round,
                        p.point,
                        p.direct_tps,
                        p.appliance_tps,
                        p.ratio()
                    )
                },
            )
            .await?;
            crate::present::overhead(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::Init {
            scale,
            plan,
            workdir,
            rounds,
            workers,
        }) => {
            let report = pgappliance::bench::init::run(
                pgappliance::bench::init::InitBenchOptions {
                    plan,
                    workdir,
                    scale,
                    rounds,
                    workers,
                },
                &mut crate::present::init_event,
            )
            .await?;
            crate::present::init(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::Upload {
            size_mib,
            store,
            aws,
            part_size_mib,
            workdir,
        }) => {
            let report =
                pgappliance::bench::upload::run(pgappliance::bench::upload::UploadBenchOptions {
                    size_mib,
                    store,
                    aws,
                    part_size_mib,
                    workdir,
                })
                .await?;
            crate::present::upload(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::UploadChild {
            dir,
            store,
            part_size_mib,
            tag,
        }) => {
            pgappliance::bench::upload::child(&dir, &store, part_size_mib, &tag).await?;
            Ok(0)
        }
        Command::Upload { workdir, upload } => {
            let (run_id, m) = pgappliance::steps::upload::upload_finished(
                &workdir,
                upload.store.as_deref(),
                upload.options(),
            )
            .await?;
            println!("run {run_id}: {}", m.describe());
            Ok(0)
        }
    }
}

/// Exit status of a run that refuses to go on until a person changes the plan or the
/// machine (the unit's `RestartPreventExitStatus=`).
pub const EXIT_REFUSED: i32 = 3;

async fn run(args: RunArgs) -> Result<i32> {
    let mode = if args.local {
        RunMode::Local {
            pg_bin: args.pg_bin,
            cluster_user: args.cluster_user,
            keep_running: args.keep_running,
        }
    } else {
        if args.pg_bin.is_some() || args.cluster_user.is_some() || args.keep_running {
            bail!("--pg-bin, --cluster-user and --keep-running belong to --local; the appliance runs the platform's PostgreSQL service");
        }
        RunMode::Appliance
    };
    let appliance = mode == RunMode::Appliance;
    let options = RunOptions {
        plan_path: args.plan,
        workdir: args.workdir,
        mode,
        store: args.upload.store.clone(),
        upload: args.upload.options(),
    };
    let outcome = match pgappliance::engine::run(options).await {
        Ok(o) => o,
        // A refusal needs a person (the plan or the machine must change): the appliance
        // exits with the status its unit does not restart on.
        Err(e)
            if appliance
                && e.chain().any(|c| {
                    c.downcast_ref::<pgappliance::storage::StorageRefusal>()
                        .is_some()
                }) =>
        {
            eprintln!("error: {e:#}");
            pgappliance::notify::status(&format!("refused: {}", e.root_cause()));
            return Ok(EXIT_REFUSED);
        }
        Err(e) => return Err(e),
    };
    if outcome.already_complete {
        println!("run {} was already complete", outcome.run_id);
    }
    println!("results: {}", outcome.results.display());
    println!("summary: {}", outcome.summary_csv.display());
    println!("report:  {}", outcome.report.display());
    if let Some((store, n)) = &outcome.uploaded {
        println!("stored:  {n} objects and manifest.json in {store}");
    }
    if outcome.failed_points.is_empty() {
        println!("{} points, all ok", outcome.points);
        Ok(0)
    } else {
        println!(
            "{} points, {} failed: {}",
            outcome.points,
            outcome.failed_points.len(),
            outcome.failed_points.join(", ")
        );
        Ok(2)
    }
}

fn status(workdir: &std::path::Path) -> Result<i32> {
    let path = journal_path(workdir);
    if !path.exists() {
        bail!(
            "no run journal at {}: nothing has run in this work directory",
            path.display()
        );
    }
    let j = JournalFile::load(&path)?;
    println!("run {} (started {})", j.run_id, j.started_at);
    for (step, _) in pgappliance::engine::ORDER {
        let line = match j.steps.get(&step) {
            Some(r) if r.finished_at.is_some() => format!(
                "done in {:.1} s{}",
                r.duration_s.unwrap_or(0.0),
                if r.attempts > 1 {
                    format!(" ({} attempts)", r.attempts)
                } else {
                    String::new()
                }
            ),
            Some(_) => "started".to_string(),
            None => "-".to_string(),
        };
        println!("  {:<10} {line}", step.as_str());
    }
    if let Some(p) = &j.pending {
        println!(
            "current: {}{} since {}",
            p.step.as_str(),
            p.item
                .as_deref()
                .map(|i| format!(" {i}"))
                .unwrap_or_default(),
            p.started_at
        );
    }
    println!("points: {}/{}", j.points.len(), j.points_total);
    match &j.finished_at {
        Some(t) => println!("finished {t}"),
        None => println!("not finished"),
    }
    Ok(0)
}
