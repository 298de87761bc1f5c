//! The `pgappliance` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "pgappliance",
    version,
    about = "Plans, boot media and results of pgappliance benchmark appliances"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate plans with the daemon's own parser; exits non-zero if any is invalid.
    Check {
        /// Plan files (TOML).
        #[arg(required = true)]
        plans: Vec<PathBuf>,
    },
    /// Build the payload, kickstart, user-data and ISO that boot a server into the plan.
    Build(crate::build::BuildArgs),
    /// Build, then boot servers into the plan: Redfish BMCs mount appliance.iso as virtual
    /// media and boot it once, IPMI BMCs boot CD/DVD next; writes a launch record to the store.
    Launch(Box<crate::launch::LaunchArgs>),
    /// Eject the virtual CD/DVD of Redfish BMCs (after a launch).
    Eject(crate::launch::EjectArgs),
    /// Compare every uploaded run under a store prefix: index.html and summary.csv.
    Collect {
        /// s3://bucket/prefix or file:///dir
        store: String,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// S3 endpoint (path-style); default from AWS_ENDPOINT_URL or AWS.
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long, default_value = "us-east-1")]
        region: String,
        /// A 0600 file with access_key_id/secret_access_key; default: the environment.
        #[arg(long)]
        credentials_file: Option<PathBuf>,
        /// The profile (`[name]` section) of the credentials file to use.
        #[arg(long, default_value = "default", requires = "credentials_file")]
        credentials_profile: String,
    },
}
