//! The units of PostgreSQL's settings of memory and time, checked when the plan is read: a
//! value such as `shared_buffers = "128XB"` or `work_mem = "4 mb"` would otherwise pass
//! `check` and fail only when `ALTER SYSTEM` runs on the target. PostgreSQL reads a number
//! (decimal, `0x` hex, a fraction, an exponent), optional spaces and a unit, and knows
//! (case-sensitively) the memory units B, kB, MB, GB, TB and the time units us, ms, s, min,
//! h, d; a setting takes the units of its kind only. Other settings are left to the server
//! (a text setting may well read `"2nd"`). Pure.

/// PostgreSQL's memory units.
pub const MEMORY_UNITS: &[&str] = &["B", "kB", "MB", "GB", "TB"];
/// PostgreSQL's time units.
pub const TIME_UNITS: &[&str] = &["us", "ms", "s", "min", "h", "d"];

/// Settings measured in memory (PostgreSQL 12 to 17, `GUC_UNIT_BYTE`/`KB`/`MB`/`BLOCKS`/
/// `XBLOCKS`), sorted.
const MEMORY_SETTINGS: &[&str] = &[
    "autovacuum_work_mem",
    "backend_flush_after",
    "bgwriter_flush_after",
    "checkpoint_flush_after",
    "commit_timestamp_buffers",
    "effective_cache_size",
    "gin_pending_list_limit",
    "huge_page_size",
    "io_combine_limit",
    "log_parameter_max_length",
    "log_parameter_max_length_on_error",
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
    "multixact_member_buffers",
    "multixact_offset_buffers",
    "notify_buffers",
    "serializable_buffers",
    "shared_buffers",
    "subtransaction_buffers",
    "temp_buffers",
    "temp_file_limit",
    "track_activity_query_size",
    "transaction_buffers",
    "vacuum_buffer_usage_limit",
    "wal_buffers",
    "wal_decode_buffer_size",
    "wal_keep_size",
    "wal_skip_threshold",
    "wal_writer_flush_after",
    "work_mem",
];

/// Settings measured in time (PostgreSQL 12 to 17, `GUC_UNIT_MS`/`S`/`MIN`), sorted.
const TIME_SETTINGS: &[&str] = &[
    "archive_timeout",
    "authentication_timeout",
    "autovacuum_naptime",
    "autovacuum_vacuum_cost_delay",
    "bgwriter_delay",
    "checkpoint_timeout",
    "checkpoint_warning",
    "client_connection_check_interval",
    "deadlock_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
    "lock_timeout",
    "log_autovacuum_min_duration",
    "log_min_duration_sample",
    "log_min_duration_statement",
    "log_rotation_age",
    "log_startup_progress_interval",
    "max_standby_archive_delay",
    "max_standby_streaming_delay",
    "old_snapshot_threshold",
    "post_auth_delay",
    "pre_auth_delay",
    "recovery_min_apply_delay",
    "statement_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_user_timeout",
    "transaction_timeout",
    "vacuum_cost_delay",
    "wal_receiver_status_interval",
    "wal_receiver_timeout",
    "wal_retrieve_retry_interval",
    "wal_sender_timeout",
    "wal_summary_keep_time",
    "wal_writer_delay",
];

/// `value` split as a number and what follows it, as PostgreSQL reads them (`strtol` with
/// base 0, then `strtod`, then spaces): an optional sign, then `0x` and hex digits, or
/// digits with an optional `.`, more digits and an exponent; None when no number starts
/// the value (`"on"`, `"replica"`).
fn number_and_unit(value: &str) -> Option<(&str, &str)> {
    let v = value.trim_start();
    let b = v.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let start = i;
    if b.len() > i + 2
        && b[i] == b'0'
        && matches!(b[i + 1], b'x' | b'X')
        && b[i + 2].is_ascii_hexdigit()
    {
        i += 2;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            i += 1;
        }
    } else {
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let mut digits = i > int_start;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let frac_start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            digits |= i > frac_start;
        }
        if !digits {
            return None;
        }
        if i < b.len() && matches!(b[i], b'e' | b'E') {
            let mut j = i + 1;
            if j < b.len() && matches!(b[j], b'+' | b'-') {
                j += 1;
            }
            let exp_start = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > exp_start {
                i = j;
            }
        }
    }
    if i == start {
        return None;
    }
    Some((&v[..i], v[i..].trim()))
}

/// What is wrong with `value` for setting `name` when it is a setting of memory or time:
/// a unit PostgreSQL would refuse for it, or no number at all; None otherwise. Other
/// settings (text, enums, extensions' own) are left to PostgreSQL.
pub fn unit_problem(name: &str, value: &str) -> Option<String> {
    let memory = MEMORY_SETTINGS.contains(&name);
    let time = TIME_SETTINGS.contains(&name);
    if !memory && !time {
        return None;
    }
    let (kind, units, example) = if memory {
        ("memory", MEMORY_UNITS, "64MB")
    } else {
        ("time", TIME_UNITS, "30s")
    };
    match number_and_unit(value) {
        None => Some(format!(
            "\"{value}\": {name} takes a number with an optional {kind} unit, e.g. \"{example}\""
        )),
        Some((number, "")) => range_problem(name, value, number, None, memory),
        Some((number, unit)) if units.contains(&unit) => {
            range_problem(name, value, number, Some(unit), memory)
        }
        Some((_, unit)) => Some(format!(
            "\"{value}\": {name} takes a {kind} unit, one of {} (case matters), not \"{unit}\"",
            units.join(", ")
        )),
    }
}

const KB: f64 = 1024.0;
const BLOCK: f64 = 8192.0;
const MB: f64 = 1024.0 * 1024.0;

/// The unit a memory setting counts in, in bytes (PostgreSQL's `GUC_UNIT_*` of each, with
/// the default 8 kB block); the others count in kB.
fn memory_base(name: &str) -> f64 {
    match name {
        "log_parameter_max_length"
        | "log_parameter_max_length_on_error"
        | "track_activity_query_size"
        | "wal_decode_buffer_size" => 1.0,
        "backend_flush_after"
        | "bgwriter_flush_after"
        | "checkpoint_flush_after"
        | "commit_timestamp_buffers"
        | "effective_cache_size"
        | "io_combine_limit"
        | "min_parallel_index_scan_size"
        | "min_parallel_table_scan_size"
        | "multixact_member_buffers"
        | "multixact_offset_buffers"
        | "notify_buffers"
        | "serializable_buffers"
        | "shared_buffers"
        | "subtransaction_buffers"
        | "temp_buffers"
        | "transaction_buffers"
        | "wal_buffers"
        | "wal_writer_flush_after" => BLOCK,
        "max_slot_wal_keep_size"
        | "max_wal_size"
        | "min_dynamic_shared_memory"
        | "min_wal_size"
        | "wal_keep_size" => MB,
        _ => KB,
    }
}

/// The unit a time setting counts in, in milliseconds; None for the two that are real
/// numbers (`vacuum_cost_delay`, `autovacuum_vacuum_cost_delay`).
fn time_base(name: &str) -> Option<f64> {
    match name {
        "autovacuum_vacuum_cost_delay" | "vacuum_cost_delay" => None,
        "archive_timeout"
        | "authentication_timeout"
        | "autovacuum_naptime"
        | "checkpoint_timeout"
        | "checkpoint_warning"
        | "post_auth_delay"
        | "pre_auth_delay"
        | "tcp_keepalives_idle"
        | "tcp_keepalives_interval"
        | "wal_receiver_status_interval" => Some(1000.0),
        "log_rotation_age" | "old_snapshot_threshold" | "wal_summary_keep_time" => Some(60_000.0),
        _ => Some(1.0),
    }
}

fn unit_size(unit: &str) -> f64 {
    match unit {
        "B" => 1.0,
        "kB" => KB,
        "MB" => MB,
        "GB" => MB * KB,
        "TB" => MB * MB,
        "us" => 0.001,
        "s" => 1000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => 1.0,
    }
}

/// A number PostgreSQL cannot take for the setting: one that overflows (`1e400`), or one
/// that, in the setting's own unit, is beyond the 32-bit integer every integer setting is
/// (`"99999999999999999999999GB"`); PostgreSQL refuses both when ALTER SYSTEM runs.
fn range_problem(
    name: &str,
    value: &str,
    number: &str,
    unit: Option<&str>,
    memory: bool,
) -> Option<String> {
    let digits = number.trim_start_matches(['+', '-']);
    let magnitude = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u128::from_str_radix(hex, 16).map_or(f64::INFINITY, |v| v as f64),
        None => digits.parse::<f64>().unwrap_or(f64::INFINITY),
    };
    if !magnitude.is_finite() {
        return Some(format!(
            "\"{value}\": the number overflows: {name} takes a finite number"
        ));
    }
    let base = if memory {
        memory_base(name)
    } else {
        time_base(name)?
    };
    let in_base = magnitude * unit.map_or(base, unit_size) / base;
    let max = f64::from(i32::MAX);
    // PostgreSQL rounds to the setting's unit before it checks the range.
    if in_base.round() > max {
        let names: &[(f64, &str)] = if memory {
            &[
                (1.0, "bytes"),
                (BLOCK, "8 kB blocks"),
                (MB, "MB"),
                (KB, "kB"),
            ]
        } else {
            &[
                (1000.0, "seconds"),
                (60_000.0, "minutes"),
                (1.0, "milliseconds"),
            ]
        };
        let unit_name = names
            .iter()
            .find(|(size, _)| *size == base)
            .map_or("units", |(_, n)| *n);
        return Some(format!(
            "\"{value}\": out of range: {name} counts in {unit_name} and takes at most {} of them (a 32-bit integer); this is {in_base:.3e}",
            i32::MAX
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_sorted_and_apart() {
        for list in [MEMORY_SETTINGS, TIME_SETTINGS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        assert!(!MEMORY_SETTINGS.iter().any(|m| TIME_SETTINGS.contains(m)));
    }

    #[test]
    fn postgresql_s_units_pass_and_others_are_named() {
        for (name, value) in [
            ("shared_buffers", "8GB"),
            ("shared_buffers", "131072"),
            ("shared_buffers", "0x400"),
            ("shared_buffers", "0xffMB"),
            ("work_mem", "64 MB"),
            ("work_mem", "1e3"),
            ("work_mem", "5.GB"),
            ("work_mem", ".5GB"),
            ("work_mem", "+4MB"),
            ("effective_cache_size", " 192GB "),
            ("wal_buffers", "-1"),
            ("checkpoint_timeout", "30min"),
            ("statement_timeout", "1e6"),
            ("vacuum_cost_delay", "2.5ms"),
            ("vacuum_cost_delay", "1e-3s"),
            ("vacuum_cost_delay", "1.5e3ms"),
            ("checkpoint_completion_target", "0.9"),
            ("statement_timeout", "0"),
            ("wal_level", "replica"),
            ("listen_addresses", "0.0.0.0"),
            ("cluster_name", "2nd"),
            ("max_connections", "0x64"),
            ("some_extension.size", "3 KB"),
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
        for (name, value, words) in [
            ("work_mem", "1e400", "overflows"),
            ("work_mem", "1e400MB", "overflows"),
            ("work_mem", "99999999999999999999999GB", "out of range"),
            (
                "work_mem",
                "0xffffffffffffffffffffffffffffffffff",
                "overflows",
            ),
            ("work_mem", "2048GB", "out of range"),
            ("shared_buffers", "17TB", "8 kB blocks"),
            ("max_wal_size", "3000000000", "counts in MB"),
            ("statement_timeout", "25d", "milliseconds"),
            ("checkpoint_timeout", "1e10", "seconds"),
            ("vacuum_cost_delay", "1e999ms", "overflows"),
        ] {
            let p = unit_problem(name, value).unwrap_or_else(|| panic!("{name} = {value}"));
            assert!(
                p.contains(words) && p.contains(value),
                "{name} = {value}: {p}"
            );
        }
        // The largest values in range pass.
        for (name, value) in [
            ("work_mem", "2147483647"),
            ("work_mem", "2047GB"),
            ("shared_buffers", "15TB"),
            ("max_wal_size", "2147483647MB"),
            ("statement_timeout", "24d"),
            ("wal_buffers", "-1"),
        ] {
            assert_eq!(unit_problem(name, value), None, "{name} = {value}");
        }
        let p = unit_problem("statement_timeout", "off").expect("off");
        assert!(
            p.contains("statement_timeout takes a number with an optional time unit"),
            "{p}"
        );
    }
}
