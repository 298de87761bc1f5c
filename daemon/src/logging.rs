//! Tracing to stderr without timestamps (journald adds them). `RUST_LOG` filters.

use std::io::IsTerminal;

pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // object_store logs each retry at info: the daemon's own lines say what the upload
        // does (RUST_LOG=object_store=info shows them).
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("info,object_store=warn,reqwest=warn,hyper=warn")
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .with_target(false)
        // A closed stderr (`pgapplianced run --local … 2>&1 | head`) loses the log lines,
        // not the run: tracing's own report of a failed write is an `eprintln!`, which
        // panics on a closed stderr.
        .log_internal_errors(false)
        .try_init();
}
