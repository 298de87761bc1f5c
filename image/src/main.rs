//! pgappliance: parses the command line and dispatches to the command modules.

mod build;
mod check;
mod cli;
mod collect;
mod launch;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Check { plans } => check::run(&plans),
        cli::Command::Build(args) => build::run(args),
        cli::Command::Launch(args) => launch::run(*args),
        cli::Command::Eject(args) => launch::eject(args),
        cli::Command::Collect {
            store,
            out,
            endpoint,
            region,
            credentials_file,
            credentials_profile,
        } => collect_command(
            store,
            &out,
            endpoint,
            region,
            credentials_file,
            credentials_profile,
        ),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn collect_command(
    url: String,
    out: &std::path::Path,
    endpoint: Option<String>,
    region: String,
    credentials_file: Option<std::path::PathBuf>,
    credentials_profile: String,
) -> anyhow::Result<i32> {
    use pgappliance::plan::Credentials;
    let store = pgappliance::upload::StoreConfig {
        url,
        endpoint,
        region,
        credentials: if credentials_file.is_some() {
            Credentials::File
        } else {
            Credentials::Environment
        },
        credentials_file: credentials_file.map(|p| p.display().to_string()),
        credentials_profile,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(collect::collect(collect::CollectArgs { store, out }))
}
