//! `pgapplianced` command line (clap derive), what each command calls in the library, and
//! how its outcome is shown (text, exit status).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use pgappliance::engine::{PlanArg, RunMode, RunOptions};
use pgappliance::upload::StoreOverrides;

/// Exit statuses, shown in `--help`.
const EXIT_CODES: &str = "Exit status:
  0  done (run: every point ok)
  1  an error (the message names what is wrong)
  2  run: finished, but some points failed (listed)
  3  run (the appliance): refused; the plan or the machine must change (then `pgapplianced
     reset`); run --local exits 1 on a refusal, with the same message
  4  run --local: finished here, but the store did not take the run within --upload-timeout
     (the results are where it says; `pgapplianced upload` stores them)";

#[derive(Debug, Parser)]
#[command(
    name = "pgapplianced",
    version,
    about = "Runs a pgappliance benchmark plan (the appliance's daemon, or --local on a scratch cluster)",
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run (or resume) a plan: every step, the sweep, the report, the upload.
    #[command(display_order = 1, after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Show a work directory's run: steps, the current one, points, whether the daemon is
    /// alive and when it last reported, why it stopped, and the time left.
    #[command(display_order = 2)]
    Status {
        #[command(flatten)]
        workdir: WorkdirArg,
    },
    /// Upload the finished run of a work directory (again): complete, verified, never
    /// overwriting; a no-op once the store has its manifest.
    #[command(display_order = 3)]
    Upload {
        #[command(flatten)]
        workdir: WorkdirArg,
        #[command(flatten)]
        store: StoreOverrides,
        #[command(flatten)]
        parts: PartArgs,
    },
    /// Put a refused, failed or finished run aside and start clean: its evidence is kept
    /// under WORKDIR/archive/<run id>/ and uploaded under <appliance>/failed/ in the store when it was
    /// not stored; the server it left is stopped. The next run (or the next start of
    /// pgapplianced.service) begins a new run with the plan as it is now.
    #[command(display_order = 4)]
    Reset {
        #[command(flatten)]
        workdir: WorkdirArg,
        #[command(flatten)]
        store: StoreOverrides,
        #[command(flatten)]
        parts: PartArgs,
    },
    /// [tools] Parse a program's output and print it as JSON.
    #[command(subcommand, display_order = 20)]
    Parse(ParseCommand),
    /// [tools] Benchmarks of the appliance itself that print their ratio against a
    /// baseline (docs/performance.md).
    #[command(subcommand, display_order = 21)]
    Bench(BenchCommand),
}

#[derive(Debug, clap::Args)]
pub(crate) struct WorkdirArg {
    /// Where the journal, the cluster (local mode) and the run directories live.
    #[arg(long, default_value = pgappliance::platform::APPLIANCE_WORKDIR)]
    workdir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) plan: PlanArg,
    /// Run against a cluster under --workdir managed with pg_ctl, as plain processes.
    /// Without it the plan runs as the appliance (what pgapplianced.service does at boot):
    /// every step through systemd over D-Bus, PostgreSQL as the platform's service.
    #[arg(long)]
    pub(crate) local: bool,
    /// Where the journal, the cluster (local mode) and the run directories live. Required
    /// with --local (never the appliance's own); the appliance's is /var/lib/pgappliance.
    #[arg(long)]
    pub(crate) workdir: Option<PathBuf>,
    /// PostgreSQL bin directory (local mode; default: found from the plan's version).
    #[arg(long)]
    pub(crate) pg_bin: Option<PathBuf>,
    /// OS user that owns the cluster (local mode; default when root: postgres).
    #[arg(long)]
    pub(crate) cluster_user: Option<String>,
    /// Leave the cluster running at the end (local mode).
    #[arg(long)]
    pub(crate) keep_running: bool,
    /// Local mode: how long the upload at the end may try a store that does not take the
    /// run; then the run ends (exit 4) with its results here, and `pgapplianced upload`
    /// completes it. The appliance tries until the store takes it.
    #[arg(long, default_value = "2m", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) upload_timeout: std::time::Duration,
    #[command(flatten)]
    pub(crate) store: StoreOverrides,
    #[command(flatten)]
    pub(crate) parts: PartArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PartArgs {
    /// Multipart part size in MiB (at least 5); files of two parts or more go multipart.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(5..=1024))]
    pub(crate) part_size_mib: u32,
}

impl PartArgs {
    fn options(&self) -> pgappliance::upload::UploadOptions {
        let part = (self.part_size_mib as usize) << 20;
        pgappliance::upload::UploadOptions {
            part_size: part,
            multipart_threshold: 2 * part as u64,
            ..Default::default()
        }
    }
}

// The benchmarks: each one's options are its module's (`pgappliance::bench::…`).
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// tps of the plan's points run directly vs through the appliance; daemon CPU cost.
    Overhead(pgappliance::bench::overhead::OverheadOptions),
    /// pgbench's init modes vs the parallel loader: medians and the speedup.
    Init(pgappliance::bench::init::InitBenchOptions),
    /// Generating a dataset (pgbench -i) vs restoring its snapshot, locally and from an
    /// object store: medians and the speedups.
    Restore(pgappliance::bench::restore::RestoreBenchOptions),
    /// Upload throughput and peak memory vs `aws s3 cp` to the same S3 store.
    Upload(pgappliance::bench::upload::UploadBenchOptions),
    /// The measured side of `bench upload` (run by it in a child process).
    #[command(hide = true)]
    UploadChild {
        /// The directory uploaded.
        #[arg(long)]
        dir: PathBuf,
        /// The store.
        #[arg(long)]
        store: String,
        /// Part size in MiB.
        #[arg(long)]
        part_size_mib: u32,
        /// The run id used as key.
        #[arg(long)]
        tag: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ParseCommand {
    /// A pgbench run's output (stdout, or stdout and stderr merged).
    Pgbench {
        /// The file holding the output.
        file: PathBuf,
    },
    /// `pgbench -i` output: the `done in …` breakdown.
    PgbenchInit {
        /// The file holding the output.
        file: PathBuf,
    },
    /// A sysbench-tpcc run's stdout (`--report-interval=1 --report_csv=yes`): the summary
    /// (1.0.x or 1.1 layout) and the per-second CSV lines as `series`.
    Sysbench {
        /// The file holding the output.
        file: PathBuf,
    },
}

/// The largest program output `parse` reads (a pgbench run's stdout with a progress line
/// per second for a day is a few MiB).
const MAX_PARSE_BYTES: u64 = 64 << 20;

fn read(file: &std::path::Path) -> Result<String> {
    pgappliance::fsutil::read_to_string_limited(file, MAX_PARSE_BYTES, "a program's output")
        .with_context(|| format!("reading {}", file.display()))
}

pub(crate) async fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::Parse(ParseCommand::Pgbench { file }) => {
            let text = read(&file)?;
            let summary = pgappliance::pgbench::parse_summary(&text)
                .with_context(|| format!("{}", file.display()))?;
            pgappliance::outln!("{}", serde_json::to_string_pretty(&summary)?);
            Ok(0)
        }
        Command::Parse(ParseCommand::PgbenchInit { file }) => {
            let text = read(&file)?;
            let b = pgappliance::pgbench::parse_init(&text)
                .with_context(|| format!("{}", file.display()))?;
            pgappliance::outln!("{}", serde_json::to_string_pretty(&b)?);
            Ok(0)
        }
        Command::Parse(ParseCommand::Sysbench { file }) => {
            let text = read(&file)?;
            let run = pgappliance::sysbench::parse_output(&text)
                .with_context(|| format!("{}", file.display()))?;
            pgappliance::outln!("{}", serde_json::to_string_pretty(&run)?);
            Ok(0)
        }
        Command::Status { workdir } => crate::present::status(&workdir.workdir),
        Command::Reset {
            workdir,
            store,
            parts,
        } => {
            let outcome =
                pgappliance::engine::reset::reset(&workdir.workdir, &store, parts.options())
                    .await?;
            crate::present::reset(&outcome, &workdir.workdir);
            Ok(0)
        }
        Command::Bench(BenchCommand::Overhead(options)) => {
            let report = pgappliance::bench::overhead::run(options, &mut |p| {
                pgappliance::outln!(
                    "round {} {}: direct {:.1} tps, appliance {:.1} tps, ratio {:.3}",
                    p.round,
                    p.point,
                    p.direct_tps,
                    p.appliance_tps,
                    p.ratio()
                )
            })
            .await?;
            crate::present::overhead(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::Init(options)) => {
            let report =
                pgappliance::bench::init::run(options, &mut crate::present::init_event).await?;
            crate::present::init(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::Restore(options)) => {
            let report =
                pgappliance::bench::restore::run(options, &mut crate::present::restore_event)
                    .await?;
            crate::present::restore(&report);
            Ok(0)
        }
        Command::Bench(BenchCommand::Upload(options)) => {
            let report = pgappliance::bench::upload::run(options).await?;
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
        Command::Upload {
            workdir,
            store,
            parts,
        } => {
            let (run_id, m) = pgappliance::engine::upload::upload_finished(
                &workdir.workdir,
                &store,
                parts.options(),
            )
            .await?;
            pgappliance::outln!("run {run_id}: {}", m.describe());
            Ok(0)
        }
    }
}

/// The first SIGTERM or SIGINT this process receives: its name and number.
async fn termination() -> Result<(&'static str, i32)> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("watching for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("watching for SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => ("SIGTERM", 15),
        _ = int.recv() => ("SIGINT", 2),
    })
}

/// A local run stopped by a signal: the run (dropped at its next await, its journal as
/// last written, so a later `run` resumes it) is said to have stopped, and the server it
/// started is stopped unless `--keep-running`. Exits 128 + the signal's number.
async fn stopped_by(
    (name, number): (&'static str, i32),
    workdir: &std::path::Path,
    keep_running: bool,
) -> Result<i32> {
    tracing::warn!(signal = name, "stopping the run: a later `run` resumes it");
    if keep_running {
        tracing::info!("--keep-running: the PostgreSQL server is left running");
    } else {
        match pgappliance::host::local::stop_left_server(workdir).await {
            Ok(Some(stopped)) => tracing::info!("{stopped}"),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "stopping the PostgreSQL server"),
        }
    }
    pgappliance::errln!("stopped by {name}");
    Ok(128 + number)
}

/// Exit status of a local run that finished but whose store did not take it in time.
pub(crate) const EXIT_UPLOAD_POSTPONED: i32 = 4;

/// A local run complete here whose store did not take it: where its results are, why, and
/// the command that stores them.
fn upload_postponed(
    p: &pgappliance::upload::UploadPostponed,
    workdir: &std::path::Path,
    store: &StoreOverrides,
) -> i32 {
    pgappliance::outln!("results: {}", p.run_dir.join("results.json").display());
    pgappliance::outln!("summary: {}", p.run_dir.join("summary.csv").display());
    pgappliance::outln!("report:  {}", p.run_dir.join("report.html").display());
    pgappliance::outln!(
        "not stored: {} did not take run {} within {}: {} (last failure: {})",
        p.store,
        p.run_id,
        humantime::format_duration(p.waited),
        p.cause,
        p.last
    );
    let mut flags = String::new();
    for (flag, value) in [
        ("--store", &store.store),
        ("--endpoint", &store.endpoint),
        ("--region", &store.region),
        ("--credentials-file", &store.credentials_file),
        ("--credentials-profile", &store.credentials_profile),
    ] {
        if let Some(v) = value {
            flags.push_str(&format!(" {flag} {v}"));
        }
    }
    pgappliance::outln!(
        "next: once the store answers, `pgapplianced upload --workdir {}{flags}` completes the upload (nothing is uploaded twice)",
        workdir.display()
    );
    EXIT_UPLOAD_POSTPONED
}

/// Exit status of a run that refuses to go on until a person changes the plan or the
/// machine (the unit's `RestartPreventExitStatus=`).
pub(crate) const EXIT_REFUSED: i32 = 3;

/// The work directory of `run`: the appliance's own without --local; with --local the one
/// given, never the appliance's (a scratch cluster there would be taken for the
/// appliance's run). A missing or the appliance's directory is a usage error (exit 2).
fn run_workdir(local: bool, workdir: Option<PathBuf>) -> PathBuf {
    use clap::CommandFactory;
    let appliance = std::path::Path::new(pgappliance::platform::APPLIANCE_WORKDIR);
    match (local, workdir) {
        (false, w) => w.unwrap_or_else(|| appliance.to_path_buf()),
        (true, None) => Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                format!(
                    "run --local needs --workdir DIR: the scratch cluster, the journal and the runs live there ({} is the appliance's own)",
                    appliance.display()
                ),
            )
            .exit(),
        (true, Some(w)) => {
            let same = w == appliance
                || std::fs::canonicalize(&w)
                    .is_ok_and(|c| std::fs::canonicalize(appliance).is_ok_and(|a| a == c));
            if same {
                Cli::command()
                    .error(
                        clap::error::ErrorKind::ValueValidation,
                        format!(
                            "--workdir {}: that is the appliance's own work directory; run --local keeps its scratch cluster elsewhere (e.g. /var/tmp/pgappliance-local)",
                            w.display()
                        ),
                    )
                    .exit()
            }
            w
        }
    }
}

async fn run(args: RunArgs) -> Result<i32> {
    let workdir = run_workdir(args.local, args.workdir);
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
    let keep_running = matches!(
        mode,
        RunMode::Local {
            keep_running: true,
            ..
        }
    );
    let mut upload = args.parts.options();
    if !appliance {
        upload.give_up_after = Some(args.upload_timeout);
    }
    let store_flags = args.store.clone();
    let options = RunOptions {
        plan_path: args.plan.path(),
        workdir: workdir.clone(),
        mode,
        store: args.store,
        upload,
    };
    let result = if appliance {
        // systemd stops the appliance's run with SIGTERM and starts it again: it resumes.
        pgappliance::engine::run(options).await
    } else {
        tokio::select! {
            r = pgappliance::engine::run(options) => r,
            signal = termination() => return stopped_by(signal?, &workdir, keep_running).await,
        }
    };
    let outcome = match result {
        Ok(o) => o,
        // A refusal needs a person (the plan or the machine must change): the appliance
        // exits with the status its unit does not restart on.
        Err(e) if appliance && pgappliance::engine::is_refusal(&e) => {
            pgappliance::errln!("error: {e:#}");
            pgappliance::notify::status(&format!("refused: {}", e.root_cause()));
            return Ok(EXIT_REFUSED);
        }
        Err(e) => {
            if let Some(p) = e
                .chain()
                .find_map(|c| c.downcast_ref::<pgappliance::upload::UploadPostponed>())
            {
                return Ok(upload_postponed(p, &workdir, &store_flags));
            }
            return Err(e);
        }
    };
    if outcome.already_complete {
        pgappliance::outln!("run {} was already complete", outcome.run_id);
    }
    pgappliance::outln!("results: {}", outcome.results.display());
    pgappliance::outln!("summary: {}", outcome.summary_csv.display());
    pgappliance::outln!("report:  {}", outcome.report.display());
    if let Some((store, n)) = &outcome.uploaded {
        pgappliance::outln!("stored:  {n} objects and manifest.json in {store}");
    }
    if outcome.failed_points.is_empty() {
        pgappliance::outln!("{} points, all ok", outcome.points);
        Ok(0)
    } else {
        pgappliance::outln!(
            "{} points, {} failed: {}",
            outcome.points,
            outcome.failed_points.len(),
            outcome.failed_points.join(", ")
        );
        Ok(2)
    }
}
