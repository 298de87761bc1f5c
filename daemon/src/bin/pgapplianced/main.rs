//! pgapplianced: parses the command line and dispatches; the work is in the library.

// This binary's items are its own: `pub(crate)` at most (the lint holds it).
#![deny(unreachable_pub)]

mod cli;
mod identity;
mod present;

use clap::Parser;

fn main() {
    identity::keep();
    pgappliance::logging::init();
    if let Err(why) = pgappliance::url::refuse_credentials_in_args(std::env::args_os()) {
        pgappliance::errln!("error: {why}");
        std::process::exit(2);
    }
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            pgappliance::errln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    match runtime.block_on(cli::dispatch(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            pgappliance::errln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
