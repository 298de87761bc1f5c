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
    Build(crate::build::BuildArgs),
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
