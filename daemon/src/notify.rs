//! `sd_notify`: READY and STATUS lines for `systemctl status pgapplianced`. Without
//! `$NOTIFY_SOCKET` (local mode, tests) the status only goes to the log. A run also keeps
//! its latest status line in the work directory ([`STATUS_FILE`]), which `pgapplianced
//! status` reads: what the daemon is doing, and when it last said so.

use std::path::PathBuf;
use std::sync::Mutex;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

fn send(message: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(&path),
    };
    let sent = addr.and_then(|addr| {
        let sock = UnixDatagram::unbound()?;
        sock.send_to_addr(message.as_bytes(), &addr)
    });
    if let Err(e) = sent {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}

/// The latest status line of a run, in its work directory.
pub(crate) const STATUS_FILE: &str = "last-status.json";

/// What [`STATUS_FILE`] holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LastStatus {
    pub text: String,
    pub at: String,
    /// The daemon that wrote it.
    pub(crate) pid: u32,
}

static STATUS_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Keeps the latest status line in `workdir` from now on.
pub(crate) fn keep_status_in(workdir: &std::path::Path) {
    if let Ok(mut p) = STATUS_PATH.lock() {
        *p = Some(workdir.join(STATUS_FILE));
    }
}

/// Reports progress: one STATUS= line, and the same text in the log (and in the work
/// directory's status file when the run keeps one; a failure to write it is only logged).
pub fn status(text: &str) {
    tracing::info!("{text}");
    send(&format!("STATUS={text}"));
    let path = STATUS_PATH.lock().ok().and_then(|p| p.clone());
    if let Some(path) = path {
        let last = LastStatus {
            text: text.to_string(),
            at: crate::clock::now(),
            pid: std::process::id(),
        };
        if let Err(e) = crate::fsutil::write_json(&path, &last) {
            tracing::debug!(error = %format!("{e:#}"), "writing the status file");
        }
    }
}

pub(crate) fn ready() {
    send("READY=1");
}
