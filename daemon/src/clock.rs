//! Wall-clock time stamps for records and state files: RFC 3339 in UTC, whole seconds.

/// Now, as `2026-12-02T09:49:20Z`.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The longest duration a command-line flag takes: a year. Longer is taken for a typo (a
/// deadline that far cannot be meant, and `Instant::now()` plus it may not be representable).
pub(crate) const LONGEST_FLAG_DURATION: std::time::Duration =
    std::time::Duration::from_secs(366 * 24 * 3600);

/// The value parser of a command line's duration flags (`2m`, `6h`, `1h 30m`): above zero
/// and at most [`LONGEST_FLAG_DURATION`]. The error says what is wrong with the value; clap
/// puts the flag and the value before it.
pub fn parse_flag_duration(text: &str) -> Result<std::time::Duration, String> {
    parse_duration_within(text, LONGEST_FLAG_DURATION, "a year")
}

/// A duration above zero and at most `max` (`max_text` says it in words).
pub fn parse_duration_within(
    text: &str,
    max: std::time::Duration,
    max_text: &str,
) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("not a duration ({e}); e.g. 90s, 2m, 6h"))?;
    if d.is_zero() {
        return Err("must be above zero (e.g. 90s, 2m, 6h)".into());
    }
    if d > max {
        return Err(format!(
            "{} is longer than {max_text} ({}), the most this takes",
            humantime::format_duration(d),
            humantime::format_duration(max)
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_flag_duration_is_above_zero_and_at_most_a_year() {
        assert_eq!(parse_flag_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_flag_duration(" 366d "), Ok(LONGEST_FLAG_DURATION));
        for (text, words) in [
            ("0", "above zero"),
            ("0s", "above zero"),
            ("5 parsecs", "unknown time unit \"parsecs\""),
            ("-5s", "not a duration"),
            ("", "not a duration"),
            ("367d", "longer than a year"),
            ("1000000000y", "longer than a year"),
            ("99999999999999999y", "not a duration"),
        ] {
            let e = parse_flag_duration(text).expect_err(text);
            assert!(e.contains(words), "{text}: {e}");
        }
    }
}
