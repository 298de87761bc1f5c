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
}
