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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate plans with the daemon's own parser and warn about what a valid plan may
    /// still get wrong; exits 1 if any plan is invalid (warnings alone exit 0).
    Check {
        /// Plan files (TOML).
        #[arg(required = true)]
        plans: Vec<PathBuf>,
        /// Treat warnings as errors: exit 1 when any plan has one (for CI and release plans).
        #[arg(long)]
        deny_warnings: bool,
        /// Also say which packages each plan needs on its platform and whether this
        /// directory (as for `build --packages`) has them: exit 1 naming those it lacks.
        #[command(flatten)]
        packages: crate::build::medium::PackageArgs,
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
    Collect(crate::collect::CollectCli),
    /// [tools] Benchmarks of pgappliance itself (they measure; the last line is the ratio).
    #[command(display_order = 20)]
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Fill a loopback SeaweedFS with synthetic runs, then time a first collect, `aws s3
    /// sync` of the same objects, and an incremental collect after 1 % more runs. Last line:
    /// `collect vs awscli sync: X.XX, incremental: Y.YY of first`.
    Collect(crate::bench::BenchCollectCli),
    /// Calibrate the comparison's verdicts: seeded A/A trials (equal machines) and trials
    /// with a true shift, at a chosen noise and repeats, and A/A drawn from real repeats in
    /// the test fixtures. Last line: `stats: false verdicts X % on A/A, power Y % at 10 %
    /// shift` (power: the interval wholly on the shift's side of 0; the `faster` verdict's
    /// rate follows when it differs).
    Stats(crate::bench_stats::BenchStatsCli),
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
