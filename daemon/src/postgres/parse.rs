//! Pure parsers for PostgreSQL tool output.

/// `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)` / `pgbench (PostgreSQL) 14.5`
/// → (major, full version).
pub(crate) fn parse_tool_version(text: &str) -> Option<(u32, String)> {
    let line = text.lines().find(|l| l.contains("(PostgreSQL)"))?;
    let version = line
        .split("(PostgreSQL)")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let major: u32 = version
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
        .filter(|m| *m > 0)?;
    Some((major, version.to_string()))
}

/// `Data page checksum version: 1` from pg_controldata → whether checksums are on. The
/// only versions PostgreSQL writes are 0 (off) and 1 (PG_DATA_CHECKSUM_VERSION).
pub(crate) fn parse_controldata_checksums(text: &str) -> Option<bool> {
    match text
        .lines()
        .find_map(|l| l.strip_prefix("Data page checksum version:"))
        .map(str::trim)?
    {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_versions() {
        assert_eq!(
            parse_tool_version("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"),
            Some((15, "15.18".to_string()))
        );
        assert_eq!(
            parse_tool_version("pgbench (PostgreSQL) 17beta2\n"),
            Some((17, "17beta2".to_string()))
        );
        assert_eq!(parse_tool_version("bash: pgbench: not found"), None);
        assert_eq!(parse_tool_version("pgbench (PostgreSQL) 0.9\n"), None);
    }

    #[test]
    fn controldata_checksums() {
        let on = "Mock authentication nonce: 1\nData page checksum version:           1\n";
        assert_eq!(parse_controldata_checksums(on), Some(true));
        let off = "Data page checksum version:           0\n";
        assert_eq!(parse_controldata_checksums(off), Some(false));
        assert_eq!(parse_controldata_checksums("garbage"), None);
        for impossible in ["2", "-1", "4294967296"] {
            let text = format!("Data page checksum version: {impossible}\n");
            assert_eq!(parse_controldata_checksums(&text), None, "{impossible}");
        }
    }
}
