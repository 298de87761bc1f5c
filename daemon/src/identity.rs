//! How a pgapplianced binary is told from any other program of the right architecture (a
//! shared library that can also run, such as `libc.so.6`, another tool): every build
//! carries the bytes of [`marker`] (the `MARKER` static of the binary's `identity`
//! module), which `pgappliance build` looks for before it packs a daemon. Pure.

/// The package version the marker names.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The marker's first part (NUL, `pgapplianced-binary:`), kept reversed: every program that
/// holds this library (the image tool, its test binaries) would otherwise carry the forward
/// bytes and look marked with whatever the linker placed after them (a CI run of the image
/// tool's own tests read the version "Error" there).
const PREFIX_REVERSED: &[u8] = b":yranib-decnailppagp\0";

fn prefix() -> Vec<u8> {
    PREFIX_REVERSED.iter().rev().copied().collect()
}

/// The marker's bytes: NUL, `pgapplianced-binary:`, the version, NUL.
pub fn marker() -> String {
    let mut m = String::from_utf8(prefix()).expect("the prefix is ASCII");
    m.push_str(VERSION);
    m.push('\0');
    m
}

/// The versions the markers in `bytes` name (a version: 1 to 40 of `0-9 A-Z a-z . + -`,
/// then NUL); empty when `bytes` carry none. A program holding this library also holds
/// the marker's first part (this module's constant), so every occurrence is looked at.
pub fn marker_versions(bytes: &[u8]) -> Vec<String> {
    let prefix = prefix();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = bytes[from..]
        .windows(prefix.len())
        .position(|w| w == prefix)
    {
        let at = from + pos + prefix.len();
        let rest = &bytes[at..];
        let end = rest.iter().take(41).position(|b| *b == 0);
        if let Some(end) = end.filter(|e| *e > 0) {
            let v = &rest[..end];
            if v.iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
            {
                let v = String::from_utf8_lossy(v).into_owned();
                if !found.contains(&v) {
                    found.push(v);
                }
            }
        }
        from = at;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_with_its_version_and_nothing_else_passes() {
        assert_eq!(
            marker(),
            format!("\0pgapplianced-binary:{VERSION}\0"),
            "the bytes the daemon's MARKER static carries"
        );
        let mut bin = vec![0x7fu8, b'E', b'L', b'F', 0, 0, 3];
        bin.extend_from_slice(marker().as_bytes());
        bin.extend_from_slice(&[1, 2, 3]);
        assert_eq!(marker_versions(&bin), [VERSION]);
        assert!(marker_versions(b"\x7fELF libc.so.6 GNU C Library").is_empty());
        assert!(
            marker_versions(b"\0pgapplianced-binary:").is_empty(),
            "cut short"
        );
        assert!(
            marker_versions(b"\0pgapplianced-binary:\0").is_empty(),
            "no version"
        );
        // The constant followed by other bytes, then a marker further on.
        let mut two = b"\0pgapplianced-binary:kB\xff\xfe\0".to_vec();
        two.extend_from_slice(b"..\0pgapplianced-binary:9.9.9\0..");
        assert_eq!(marker_versions(&two), ["9.9.9"]);
    }
}
