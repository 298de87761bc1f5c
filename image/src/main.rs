//! pgappliance: parses the command line and dispatches to the command modules.

// Everything here is this binary's own: an item is `pub(crate)` at most (the lint holds it).
#![deny(unreachable_pub)]

mod bench;
mod bench_stats;
mod build;
mod check;
mod cli;
mod collect;
mod launch;
mod outdir;

use clap::Parser;

fn main() {
    if let Err(why) = pgappliance::url::refuse_credentials_in_args(std::env::args_os()) {
        pgappliance::errln!("error: {why}");
        std::process::exit(2);
    }
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Check {
            plans,
            deny_warnings,
            packages,
        } => check::run(&plans, deny_warnings, &packages),
        cli::Command::Build(args) => build::run(args.into_args()),
        cli::Command::Collect(args) => collect::run(args),
        cli::Command::Bench {
            command: cli::BenchCommand::Collect(args),
        } => bench::run(args),
        cli::Command::Bench {
            command: cli::BenchCommand::Stats(args),
        } => bench_stats::run(&args),
        cli::Command::Credentials(cmd) => build::credentials::run_mint(cmd),
        cli::Command::Launch(args) => launch::run(*args),
        cli::Command::Wait(args) => launch::wait::run(*args),
        cli::Command::Eject(args) => launch::eject(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            pgappliance::errln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
