//! The units of PostgreSQL setting values, checked when the plan is read: a value such as
//! `"128XB"` or `"4 mb"` would otherwise pass `check` and fail only when `ALTER SYSTEM`
//! runs on the target. PostgreSQL reads a number, optional spaces and a unit, and knows
//! (case-sensitively) the memory units B, kB, MB, GB, TB and the time units us, ms, s, min,
//! h, d; a setting takes the units of its kind only. Pure.

/// PostgreSQL's memory units.
pub const MEMORY_UNITS: &[&str] = &["B", "kB", "MB", "GB", "TB"];
/// PostgreSQL's time units.
pub const TIME_UNITS: &[&str] = &["us", "ms", "s", "min", "h", "d"];

/// Settings measured in memory (PostgreSQL 12 to 17, `GUC_UNIT_BYTE`/`KB`/`MB`/`BLOCKS`/
/// `XBLOCKS`).
const MEMORY_SETTINGS: &[&str] = &[
    "autovacuum_work_mem",
    "backend_flush_after",
    "bgwriter_flush_after",
    "checkpoint_flush_after",
    "effective_cache_size",
    "gin_pending_list_limit",
    "huge_page_size",
    "log_rotation_size",
    "log_temp_files",
    "logical_decoding_work_mem",
    "maintenance_work_mem",
    "max_slot_wal_keep_size",
    "max_stack_depth",
    "max_wal_size",
    "min_dynamic_shared_memory",
    "min_parallel_index_scan_size",
    "min_parallel_table_scan_size",
    "min_wal_size",
    "shared_buffers",
    "temp_buffers",
    "temp_file_limit",
    "track_activity_query_size",
    "vacuum_buffer_usage_limit",
    "wal_buffers",
    "wal_keep_size",
    "wal_skip_threshold",
    "wal_writer_flush_after",
    "work_mem",
];

/// Settings measured in time (PostgreSQL 12 to 17, `GUC_UNIT_MS`/`S`/`MIN`).
const TIME_SETTINGS: &[&str] = &[
    "archive_timeout",
    "authentication_timeout",
    "autovacuum_naptime",
    "autovacuum_vacuum_cost_delay",
    "bgwriter_delay",
    "checkpoint_timeout",
    "checkpoint_warning",
    "deadlock_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
    "lock_timeout",
    "log_autovacuum_min_duration",
    "log_min_duration_sample",
    "log_min_duration_statement",
    "log_rotation_age",
    "statement_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "vacuum_cost_delay",
    "wal_receiver_timeout",
    "wal_sender_timeout",
    "wal_writer_delay",
];

/// `value` split as a number and the unit after it, when it has that shape (`"8GB"`,
/// `"1.5 min"`, `"-1"`); None for other values (`"on"`, `"replica"`, `"0.0.0.0"`).
fn number_and_unit(value: &str) -> Option<(&str, &str)> {
    let v = value.trim();
    let digits_end = v
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+'))))
        .map_or(v.len(), |(i, _)| i);
    let number = &v[..digits_end];
    if !number.chars().any(|c| c.is_ascii_digit())
        || number.matches('.').count() > 1
        || number.ends_with('.')
    {
        return None;
    }
    let unit = v[digits_end..].trim_start();
    if !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    Some((number, unit))
}

/// What is wrong with `value` for setting `name`, if PostgreSQL would refuse its unit, or
/// it is not a number at all for a setting of memory or time; None otherwise (a value
/// that is not a number with a unit, for any other setting, is left to PostgreSQL).
pub fn unit_problem(name: &str, value: &str) -> Option<String> {
    let memory = MEMORY_SETTINGS.contains(&name);
    let time = TIME_SETTINGS.contains(&name);
    let Some((_, unit)) = number_and_unit(value) else {
        return match (memory, time) {
            (true, _) => Some(format!(
                "\"{value}\": {name} takes a number with an optional memory unit, e.g. \"64MB\""
            )),
            (_, true) => Some(format!(
                "\"{value}\": {name} takes a number with an optional time unit, e.g. \"30s\""
            )),
            _ => None,
        };
    };
    if unit.is_empty() {
        return None;
    }
    let list = |units: &[&str]| units.join(", ");
    if memory && !MEMORY_UNITS.contains(&unit) {
        return Some(format!(
            "\"{value}\": {name} takes a memory unit, one of {} (case matters), not \"{unit}\"",
            list(MEMORY_UNITS)
        ));
    }
    if time && !TIME_UNITS.contains(&unit) {
        return Some(format!(
            "\"{value}\": {name} takes a time unit, one of {} (case matters), not \"{unit}\"",
            list(TIME_UNITS)
        ));
    }
    if !memory && !time && !MEMORY_UNITS.contains(&unit) && !TIME_UNITS.contains(&unit) {
        return Some(format!(
            "\"{value}\": \"{unit}\" is not a PostgreSQL unit: memory units are {}, time units {} (case matters)",
            list(MEMORY_UNITS),
            list(TIME_UNITS)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgresql_s_units_pass_and_others_are_named() {
        for (name, value) in [
            ("shared_buffers", "8GB"),
            ("shared_buffers", "131072"),
            ("work_mem", "64 MB"),
            ("effective_cache_size", " 192GB "),
            ("wal_buffers", "-1"),
            ("checkpoint_timeout", "30min"),
            ("checkpoint_completion_target", "0.9"),
            ("statement_timeout", "0"),
            ("vacuum_cost_delay", "2.5ms"),
            ("wal_level", "replica"),
            ("listen_addresses", "0.0.0.0"),
            ("some_extension.size", "4kB"),
            ("some_extension.delay", "10s"),
            ("log_line_prefix", "%m [%p] "),
        ] {
            assert_eq!(unit_problem(name, value), None, "{name} = {value}");
        }
        let p = unit_problem("shared_buffers", "128XB").expect("XB");
        assert!(
            p.contains("shared_buffers takes a memory unit") && p.contains("\"XB\""),
            "{p}"
        );
        let p = unit_problem("work_mem", "4 mb").expect("mb");
        assert!(p.contains("kB, MB, GB") && p.contains("\"mb\""), "{p}");
        let p = unit_problem("max_wal_size", "10min").expect("time for memory");
        assert!(p.contains("max_wal_size takes a memory unit"), "{p}");
        let p = unit_problem("checkpoint_timeout", "15MB").expect("memory for time");
        assert!(p.contains("checkpoint_timeout takes a time unit"), "{p}");
        let p = unit_problem("checkpoint_timeout", "15 sec").expect("sec");
        assert!(p.contains("us, ms, s, min, h, d"), "{p}");
        let p = unit_problem("work_mem", "lots").expect("lots");
        assert!(
            p.contains("work_mem takes a number with an optional memory unit"),
            "{p}"
        );
        let p = unit_problem("statement_timeout", "off").expect("off");
        assert!(
            p.contains("statement_timeout takes a number with an optional time unit"),
            "{p}"
        );
        assert_eq!(unit_problem("my.setting", "lots"), None);
        let p = unit_problem("my.setting", "3 KB").expect("KB");
        assert!(p.contains("\"KB\" is not a PostgreSQL unit"), "{p}");
    }
}
