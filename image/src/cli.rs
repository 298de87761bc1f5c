//! The `pgappliance` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Exit statuses, shown in `--help`.
const EXIT_CODES: &str = "Exit status:
  0  done (check: every plan valid; warnings alone do not fail it)
  1  an error: an invalid plan, a refused build, a store that cannot be read (the message
     names what is wrong); wait: a target that failed or did not arrive in time
  2  the command line is malformed
  3  collect --fail-on-regression: a point's verdict is slower past --threshold";

#[derive(Debug, Parser)]
#[command(
    name = "pgappliance",
    version,
    about = "Plans, boot media and results of pgappliance benchmark appliances",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate plans with the daemon's own parser and warn about what a valid plan may
    /// still get wrong; exits 1 if any plan is invalid (warnings alone exit 0).
    Check {
        /// Plan files (TOML).
        #[arg(required = true)]
        plans: Vec<PathBuf>,
        /// Treat warnings as errors: exit 1 when any plan has one (for CI and release plans).
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Build the payload, kickstart, user-data and ISO that boot a server into the plan.
    Build(crate::build::BuildCommand),
    /// Build, then boot servers into the plan: Redfish BMCs mount appliance.iso as virtual
    /// media and boot it once, IPMI BMCs boot CD/DVD next; writes a launch record to the store.
    Launch(Box<crate::launch::LaunchArgs>),
    /// Watch a launch's targets through their status objects in the store until each has a
    /// complete run, has failed, or --timeout passes; with --teardown, then terminate / power
    /// off and eject them and collect the store. Exits 0 only when every target arrived.
    Wait(Box<crate::launch::wait::WaitArgs>),
    /// Eject the virtual CD/DVD of Redfish BMCs (after a launch).
    Eject(crate::launch::EjectArgs),
    /// Mint fresh short-lived store credentials for a plan into a new 0600 file (AWS STS).
    Credentials(crate::build::credentials::MintCommand),
    /// Compare the uploaded runs of one or more stores: index.html (the finding first),
    /// a page per run, and summary.csv.
    #[command(after_help = COLLECT_HELP)]
    Collect(CollectCli),
    /// [tools] Benchmarks of pgappliance itself (they measure; the last line is the ratio).
    #[command(display_order = 20)]
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Fill a loopback SeaweedFS with synthetic runs, then time a first collect, `aws s3
    /// sync` of the same objects, and an incremental collect after 1 % more runs. Last line:
    /// `collect vs awscli sync: X.XX, incremental: Y.YY of first`.
    Collect(BenchCollectCli),
    /// Calibrate the comparison's verdicts: seeded A/A trials (equal machines) and trials
    /// with a true shift, at a chosen noise and repeats, and A/A drawn from real repeats in
    /// the test fixtures. Last line: `stats: false verdicts X % on A/A, power Y % at 10 %
    /// shift`.
    Stats(BenchStatsCli),
}

#[derive(Debug, clap::Args)]
pub struct BenchStatsCli {
    /// Trials of each kind.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(100..=10_000_000))]
    pub trials: u32,
    /// Repeats on each side of a trial.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub repeats: u32,
    /// The noise of each repeat: its coefficient of variation in percent.
    #[arg(long, default_value_t = 3.0)]
    pub cv: f64,
    /// The true shift of the shifted trials, in percent.
    #[arg(long, default_value_t = 10.0)]
    pub shift: f64,
    /// The verdicts' threshold T in percent (collect's --threshold).
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// The generator's seed (the same seed gives the same figures).
    #[arg(long, default_value_t = 27)]
    pub seed: u64,
}

#[derive(Debug, clap::Args)]
pub struct BenchCollectCli {
    /// Synthetic runs in the store before the first collect.
    #[arg(long, required = true)]
    pub runs: usize,
    /// Machines the runs are spread over.
    #[arg(long, default_value_t = 10)]
    pub machines: usize,
    /// Runs uploaded, listed and fetched at once (collect's --jobs).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// The SeaweedFS `weed` executable [default: $PGAPPLIANCE_VENV/bin/weed, else weed].
    #[arg(long, value_name = "PATH")]
    pub weed: Option<PathBuf>,
    /// The awscli executable [default: $PGAPPLIANCE_VENV/bin/aws, else aws].
    #[arg(long, value_name = "PATH")]
    pub aws: Option<PathBuf>,
    /// Where the server's data, the cache and the outputs go (removed afterwards).
    #[arg(long, default_value = "/var/tmp", value_name = "DIR")]
    pub workdir: PathBuf,
}

const COLLECT_HELP: &str = "\
Store options (--endpoint, --region, --credentials-file, --credentials-profile) given once
apply to every store; given once per store they apply in the order of the stores (STORE_URL
arguments first, then --store). `-` stands for the default (no endpoint: AWS or
AWS_ENDPOINT_URL; no credentials file: the environment).

Example: a lab SeaweedFS and an AWS bucket at once
  pgappliance collect --store s3://lab/results --store s3://campaign/results --out cmp \\
    --endpoint http://10.0.0.5:8333 --endpoint - \\
    --credentials-file ~/.lab.credentials --credentials-file -

Exit status: 0 compared (runs that could not be used are listed, not fatal); 1 error (a
store that cannot be listed, a baseline that is not among the runs, a bad --threshold); 2 the
command line is malformed; 3 with --fail-on-regression when a point's verdict says it regressed past
--threshold (the pages are written all the same).";

#[derive(Debug, clap::Args)]
pub struct CollectCli {
    /// Stores to read: s3://bucket/prefix or file:///dir (the same as --store).
    #[arg(value_name = "STORE_URL")]
    pub store_urls: Vec<String>,
    /// A store to read (s3://bucket/prefix or file:///dir); repeat for several stores.
    #[arg(long = "store", value_name = "URL")]
    pub stores: Vec<String>,
    /// Output directory (index.html, runs/*.html, summary.csv).
    #[arg(long, required = true, value_name = "DIR")]
    pub out: PathBuf,
    /// S3 endpoint (path-style); default from AWS_ENDPOINT_URL or AWS. Once, or once per store.
    #[arg(long, value_name = "URL")]
    pub endpoint: Vec<String>,
    /// S3 region [default: us-east-1]. Once, or once per store.
    #[arg(long)]
    pub region: Vec<String>,
    /// A 0600 file with access_key_id/secret_access_key; default: the environment. Once, or
    /// once per store.
    #[arg(long, value_name = "FILE")]
    pub credentials_file: Vec<String>,
    /// The profile (`[name]` section) of the credentials file [default: default]. Once, or
    /// once per store.
    #[arg(long, value_name = "NAME", requires = "credentials_file")]
    pub credentials_profile: Vec<String>,
    /// Show every run; by default only the latest run of each machine is compared.
    #[arg(long)]
    pub all_runs: bool,
    /// The machine (appliance name) or run id everything is compared against; default: the
    /// first machine by name. A run id is compared even when it is not its machine's latest.
    #[arg(long, value_name = "MACHINE_OR_RUN")]
    pub baseline: Option<String>,
    /// The threshold T of every verdict (default 5%), and a regression check against the
    /// baseline: list every point whose tps is `slower` (its 95 % interval wholly below −T)
    /// or whose latency p99 is higher (its interval wholly above +T), after the finding,
    /// and the points that moved past T without a verdict that says so.
    #[arg(long, value_name = "PERCENT")]
    pub threshold: Option<String>,
    /// Exit 3 when a point regressed past --threshold by its verdict (not by one sample or
    /// an inconclusive interval).
    #[arg(long, requires = "threshold")]
    pub fail_on_regression: bool,
    /// Where fetched runs are kept, keyed by their manifest's sha256, so the next collect
    /// fetches only new runs [default: $XDG_CACHE_HOME/pgappliance/collect, else
    /// ~/.cache/pgappliance/collect].
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Runs listed and fetched at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}
