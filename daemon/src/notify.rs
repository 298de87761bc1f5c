//! `sd_notify`: READY and STATUS lines for `systemctl status pgapplianced`. Without
//! `$NOTIFY_SOCKET` (local mode, tests) the status only goes to the log.

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

/// Reports progress: one STATUS= line, and the same text in the log.
pub fn status(text: &str) {
    tracing::info!("{text}");
    send(&format!("STATUS={text}"));
}

pub fn ready() {
    send("READY=1");
}
