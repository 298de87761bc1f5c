//! Free TCP ports on the loopback address for the servers this program and its tests start
//! (a local-mode PostgreSQL, the benchmarks' SeaweedFS, the tests' emulators). A port is
//! picked, then bound later by another process: in that gap a port of the kernel's
//! ephemeral range can become the source port of any outgoing connection on the machine
//! (SeaweedFS's own services connect to each other while it starts). So the pick is a
//! random free port below that range, which the kernel never hands out by itself.

use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

use anyhow::{Context, Result};

/// The lowest port picked.
const LOWEST: u16 = 10000;

/// Where Linux keeps its ephemeral range.
const RANGE_FILE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// Linux's default ephemeral range, when the file cannot be read.
const DEFAULT_EPHEMERAL: (u16, u16) = (32768, 60999);

/// The ephemeral range from `ip_local_port_range`'s text, e.g. "32768\t60999\n" (pure).
pub fn parse_ephemeral_range(text: &str) -> Option<(u16, u16)> {
    let mut it = text.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi)), None) if lo <= hi => Some((lo, hi)),
        _ => None,
    }
}

/// The ports a pick draws from: [`LOWEST`] up to just below the ephemeral range, or None
/// when that range starts too low to leave a hundred ports below it (pure).
pub fn pick_range(ephemeral: (u16, u16)) -> Option<(u16, u16)> {
    let top = ephemeral.0.checked_sub(1)?;
    (top >= LOWEST + 100).then_some((LOWEST, top))
}

/// A random number from the standard library's per-process random hasher keys.
fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// This machine's ephemeral range ([`DEFAULT_EPHEMERAL`] when it cannot be read).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string(RANGE_FILE)
        .ok()
        .and_then(|t| parse_ephemeral_range(&t))
        .unwrap_or(DEFAULT_EPHEMERAL)
}

/// A free TCP port on 127.0.0.1, below the kernel's ephemeral range (see the module's
/// text); a port the kernel assigns when that range leaves no room below it.
pub fn free_loopback_port() -> Result<u16> {
    if let Some((lo, hi)) = pick_range(ephemeral_range()) {
        let span = u64::from(hi - lo) + 1;
        for _ in 0..200 {
            let port = lo + (random() % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = TcpListener::bind(("127.0.0.1", 0)).context("binding 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ephemeral_range_is_read_and_the_pick_stays_below_it() {
        assert_eq!(
            parse_ephemeral_range("32768\t60999\n"),
            Some((32768, 60999))
        );
        assert_eq!(parse_ephemeral_range("1024 65535"), Some((1024, 65535)));
        for bad in ["", "32768", "60999 32768", "a b", "1 2 3", "70000 80000"] {
            assert_eq!(parse_ephemeral_range(bad), None, "{bad:?}");
        }
        assert_eq!(pick_range((32768, 60999)), Some((10000, 32767)));
        // A range starting low leaves nothing below it: the kernel's pick then.
        assert_eq!(pick_range((1024, 65535)), None);
        assert_eq!(pick_range((0, 10)), None);
    }

    #[test]
    fn a_picked_port_is_free_and_below_the_ephemeral_range() {
        let ephemeral = ephemeral_range();
        for _ in 0..20 {
            let p = free_loopback_port().expect("a port");
            if pick_range(ephemeral).is_some() {
                assert!(
                    (LOWEST..ephemeral.0).contains(&p),
                    "{p} against {ephemeral:?}"
                );
            }
            TcpListener::bind(("127.0.0.1", p)).expect("the port is free");
        }
    }
}
