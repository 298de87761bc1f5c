//! Wall-clock time stamps for records and state files: RFC 3339 in UTC, whole seconds.

/// Now, as `2026-12-02T09:49:20Z`.
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
