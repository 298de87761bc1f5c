//! Everything the binaries print on stdout goes through here ([`outln!`](crate::outln) and
//! [`out!`](crate::out); clippy.toml disallows `println!` and `print!`), and what they print
//! on stderr through [`errln!`](crate::errln): a closed stderr loses the line, not the
//! command (`eprintln!` panics on it, exit 101, in the middle of a run). A reader that
//! closes the pipe (`pgappliance check plan.toml | head -1`) ends the command quietly,
//! with the status a shell gives a program killed by SIGPIPE, instead of the panic and
//! backtrace of `println!`. SIGPIPE itself stays ignored: the daemon writes to sockets and
//! to children's pipes, where a closed reader is an error to report, not a reason to die.

use std::io::Write;

/// The exit status of a command whose stdout was closed under it (128 + SIGPIPE).
pub const CLOSED_STDOUT_STATUS: i32 = 141;

/// Writes to stdout; a closed stdout ends the process quietly, another failure ends it
/// with the error on stderr.
pub fn write_fmt(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        exit_on_write_error(&e);
    }
}

/// Flushes stdout, as [`write_fmt`] treats a failure.
pub fn flush() {
    if let Err(e) = std::io::stdout().lock().flush() {
        exit_on_write_error(&e);
    }
}

fn exit_on_write_error(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(CLOSED_STDOUT_STATUS);
    }
    crate::errln!("error: writing to stdout: {e}");
    std::process::exit(1);
}

/// `println!` whose closed stdout ends the command quietly (see the module).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes a line to stderr; a stderr that cannot be written (its reader gone) loses it.
pub fn write_err_line(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// `eprintln!` that never panics: a closed stderr loses the line (see the module).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdout::write_err_line(format_args!($($arg)*))
    };
}

/// `print!` whose closed stdout ends the command quietly (see the module).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!($($arg)*))
    };
}
