//! The units of PostgreSQL's settings of memory and time, checked when the plan is read: a
//! value such as `shared_buffers = "128XB"` or `work_mem = "4 mb"` would otherwise pass
//! `check` and fail only when `ALTER SYSTEM` runs on the target. PostgreSQL reads a number
//! (decimal, `0x` hex, a fraction, an exponent), optional spaces and a unit, and knows
//! (case-sensitively) the memory units B, kB, MB, GB, TB and the time units us, ms, s, min,
//! h, d; a setting takes the units of its kind only. Other settings are left to the server
//! (a text setting may well read `"2nd"`). Pure.

/// PostgreSQL's memory units.
pub(crate) const MEMORY_UNITS: &[&str] = &["B", "kB", "MB", "GB", "TB"];
/// PostgreSQL's time units.
pub(crate) const TIME_UNITS: &[&str] = &["us", "ms", "s", "min", "h", "d"];

/// Settings measured in memory (PostgreSQL 12 to 19, `GUC_UNIT_BYTE`/`KB`/`MB`/`BLOCKS`/
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
    "io_max_combine_limit",
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

/// Settings measured in time (PostgreSQL 12 to 19, `GUC_UNIT_MS`/`S`/`MIN`), sorted.
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
    "idle_replication_slot_timeout",
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
pub(crate) fn unit_problem(name: &str, value: &str) -> Option<String> {
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
        Some((number, "")) => overflow_problem(name, value, number, None, memory),
        Some((number, unit)) if units.contains(&unit) => {
            overflow_problem(name, value, number, Some(unit), memory)
        }
        Some((_, unit)) => Some(format!(
            "\"{value}\": {name} takes a {kind} unit, one of {} (case matters), not \"{unit}\"",
            units.join(", ")
        )),
    }
}

/// Settings that arrived in a supported major version after 13: (name, first version).
/// Naming one in a plan for an older server fails `ALTER SYSTEM` ("unrecognized
/// configuration parameter"). Only settings of the release notes whose first version is
/// certain are listed; PostgreSQL 19 adds none the appliance would set. Sorted.
const SINCE: &[(&str, u32)] = &[
    ("allow_alter_system", 17),
    ("archive_library", 15),
    ("autovacuum_vacuum_max_threshold", 18),
    ("autovacuum_worker_slots", 18),
    ("client_connection_check_interval", 14),
    ("commit_timestamp_buffers", 17),
    ("compute_query_id", 14),
    ("createrole_self_grant", 16),
    ("debug_io_direct", 16),
    ("debug_parallel_query", 16),
    ("default_toast_compression", 14),
    ("enable_async_append", 14),
    ("enable_distinct_reordering", 18),
    ("enable_group_by_reordering", 17),
    ("enable_memoize", 14),
    ("enable_presorted_aggregate", 16),
    ("enable_self_join_elimination", 18),
    ("event_triggers", 17),
    ("extension_control_path", 18),
    ("file_copy_method", 18),
    ("huge_page_size", 14),
    ("icu_validation_level", 16),
    ("idle_replication_slot_timeout", 18),
    ("idle_session_timeout", 14),
    ("io_combine_limit", 17),
    ("io_max_combine_limit", 18),
    ("io_max_concurrency", 18),
    ("io_method", 18),
    ("io_workers", 18),
    ("log_lock_failures", 18),
    ("log_recovery_conflict_waits", 14),
    ("log_startup_progress_interval", 15),
    ("max_active_replication_origins", 18),
    ("max_notify_queue_pages", 17),
    ("max_parallel_apply_workers_per_subscription", 16),
    ("md5_password_warnings", 18),
    ("min_dynamic_shared_memory", 14),
    ("multixact_member_buffers", 17),
    ("multixact_offset_buffers", 17),
    ("notify_buffers", 17),
    ("oauth_validator_libraries", 18),
    ("recovery_init_sync_method", 14),
    ("recovery_prefetch", 15),
    ("remove_temp_files_after_crash", 14),
    ("reserved_connections", 16),
    ("scram_iterations", 16),
    ("serializable_buffers", 17),
    ("ssl_crl_dir", 14),
    ("ssl_groups", 18),
    ("ssl_tls13_ciphers", 18),
    ("stats_fetch_consistency", 15),
    ("subtransaction_buffers", 17),
    ("summarize_wal", 17),
    ("sync_replication_slots", 17),
    ("synchronized_standby_slots", 17),
    ("track_cost_delay_timing", 18),
    ("track_wal_io_timing", 14),
    ("transaction_buffers", 17),
    ("transaction_timeout", 17),
    ("vacuum_buffer_usage_limit", 16),
    ("vacuum_failsafe_age", 14),
    ("vacuum_max_eager_freeze_failure_rate", 18),
    ("vacuum_multixact_failsafe_age", 14),
    ("vacuum_truncate", 18),
    ("wal_decode_buffer_size", 15),
    ("wal_summary_keep_time", 17),
];

/// Settings removed in a supported major version: (name, the first version without it,
/// what replaced it). Sorted.
const UNTIL: &[(&str, u32, &str)] = &[
    ("db_user_namespace", 17, "nothing"),
    ("force_parallel_mode", 16, "debug_parallel_query"),
    ("old_snapshot_threshold", 17, "nothing"),
    ("operator_precedence_warning", 14, "nothing"),
    ("promote_trigger_file", 16, "pg_ctl promote or pg_promote()"),
    (
        "stats_temp_directory",
        15,
        "nothing: statistics live in shared memory",
    ),
    ("trace_recovery_messages", 17, "nothing"),
    ("vacuum_cleanup_index_scale_factor", 14, "nothing"),
    ("vacuum_defer_cleanup_age", 16, "nothing"),
    ("wal_keep_segments", 13, "wal_keep_size"),
];

/// What is wrong with setting `name` on PostgreSQL `major`: a setting that arrived later or
/// was removed; None for every other name (extensions' own included).
pub(crate) fn version_problem(name: &str, major: u32) -> Option<String> {
    if let Some((_, since)) = SINCE.iter().find(|(n, _)| *n == name) {
        if major < *since {
            return Some(format!(
                "{name} arrived in PostgreSQL {since}: postgres.version is {major}, whose server refuses it (remove it or plan {since} or later)"
            ));
        }
    }
    if let Some((_, until, instead)) = UNTIL.iter().find(|(n, _, _)| *n == name) {
        if major >= *until {
            return Some(format!(
                "{name} was removed in PostgreSQL {until}: postgres.version is {major}, whose server refuses it (instead: {instead})"
            ));
        }
    }
    None
}

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
fn overflow_problem(
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

/// How a setting counts: memory in a base unit of this many bytes, time in a base unit of
/// this many milliseconds, a plain integer or a real number.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Base {
    Bytes(f64),
    Millis(f64),
    Plain,
    Real,
}

const KB: f64 = 1024.0;
const MB: f64 = 1024.0 * 1024.0;
/// BLCKSZ and XLOG_BLCKSZ of every PGDG and distribution build.
const BLOCK: f64 = 8192.0;
const INT_MAX: f64 = 2_147_483_647.0;
/// `MAX_KILOBYTES` on 64-bit builds.
const MAX_KILOBYTES: f64 = INT_MAX;
/// The default `wal_segment_size` (initdb's 16MB): `min_wal_size` and `max_wal_size` must
/// be at least two segments or the server does not start.
const WAL_SEGMENT: f64 = 16.0 * MB;

/// PostgreSQL's own bounds of common settings (`guc_tables.c`, unchanged from 13 to 19),
/// in the setting's base unit: (name, base, min, max, note on the minimum). Sorted.
const RANGES: &[(&str, Base, f64, f64, &str)] = &[
    ("autovacuum_max_workers", Base::Plain, 1.0, 262_143.0, ""),
    (
        "autovacuum_naptime",
        Base::Millis(1000.0),
        1.0,
        INT_MAX / 1000.0,
        "",
    ),
    ("backend_flush_after", Base::Bytes(BLOCK), 0.0, 256.0, ""),
    ("bgwriter_delay", Base::Millis(1.0), 10.0, 10_000.0, ""),
    ("bgwriter_flush_after", Base::Bytes(BLOCK), 0.0, 256.0, ""),
    ("bgwriter_lru_maxpages", Base::Plain, 0.0, INT_MAX / 2.0, ""),
    ("bgwriter_lru_multiplier", Base::Real, 0.0, 10.0, ""),
    ("checkpoint_completion_target", Base::Real, 0.0, 1.0, ""),
    ("checkpoint_flush_after", Base::Bytes(BLOCK), 0.0, 256.0, ""),
    (
        "checkpoint_timeout",
        Base::Millis(1000.0),
        30.0,
        86_400.0,
        "",
    ),
    ("commit_delay", Base::Plain, 0.0, 100_000.0, ""),
    ("commit_siblings", Base::Plain, 0.0, 1000.0, ""),
    ("cpu_index_tuple_cost", Base::Real, 0.0, f64::MAX, ""),
    ("cpu_operator_cost", Base::Real, 0.0, f64::MAX, ""),
    ("cpu_tuple_cost", Base::Real, 0.0, f64::MAX, ""),
    ("deadlock_timeout", Base::Millis(1.0), 1.0, INT_MAX, ""),
    ("default_statistics_target", Base::Plain, 1.0, 10_000.0, ""),
    ("effective_cache_size", Base::Bytes(BLOCK), 1.0, INT_MAX, ""),
    ("effective_io_concurrency", Base::Plain, 0.0, 1000.0, ""),
    ("maintenance_io_concurrency", Base::Plain, 0.0, 1000.0, ""),
    (
        "maintenance_work_mem",
        Base::Bytes(KB),
        1024.0,
        MAX_KILOBYTES,
        "",
    ),
    ("max_locks_per_transaction", Base::Plain, 10.0, INT_MAX, ""),
    (
        "max_parallel_maintenance_workers",
        Base::Plain,
        0.0,
        1024.0,
        "",
    ),
    ("max_parallel_workers", Base::Plain, 0.0, 1024.0, ""),
    (
        "max_parallel_workers_per_gather",
        Base::Plain,
        0.0,
        1024.0,
        "",
    ),
    ("max_prepared_transactions", Base::Plain, 0.0, 262_143.0, ""),
    ("max_wal_senders", Base::Plain, 0.0, 262_143.0, ""),
    (
        "max_wal_size",
        Base::Bytes(MB),
        2.0 * WAL_SEGMENT / MB,
        MAX_KILOBYTES,
        " (two WAL segments of 16MB)",
    ),
    ("max_worker_processes", Base::Plain, 0.0, 262_143.0, ""),
    (
        "min_wal_size",
        Base::Bytes(MB),
        2.0 * WAL_SEGMENT / MB,
        MAX_KILOBYTES,
        " (two WAL segments of 16MB)",
    ),
    ("parallel_setup_cost", Base::Real, 0.0, f64::MAX, ""),
    ("parallel_tuple_cost", Base::Real, 0.0, f64::MAX, ""),
    ("random_page_cost", Base::Real, 0.0, f64::MAX, ""),
    ("seq_page_cost", Base::Real, 0.0, f64::MAX, ""),
    (
        "shared_buffers",
        Base::Bytes(BLOCK),
        16.0,
        INT_MAX / 2.0,
        "",
    ),
    ("statement_timeout", Base::Millis(1.0), 0.0, INT_MAX, ""),
    ("temp_buffers", Base::Bytes(BLOCK), 100.0, INT_MAX / 2.0, ""),
    ("vacuum_cost_limit", Base::Plain, 1.0, 10_000.0, ""),
    (
        "wal_buffers",
        Base::Bytes(BLOCK),
        -1.0,
        INT_MAX / BLOCK,
        " (-1: from shared_buffers)",
    ),
    ("wal_writer_delay", Base::Millis(1.0), 1.0, 10_000.0, ""),
    (
        "wal_writer_flush_after",
        Base::Bytes(BLOCK),
        0.0,
        INT_MAX,
        "",
    ),
    ("work_mem", Base::Bytes(KB), 64.0, MAX_KILOBYTES, ""),
];

/// `bytes` in the largest unit that divides it (`64kB`, `2MB`, `32GB`); `n B` otherwise.
fn memory_text(bytes: f64) -> String {
    for (unit, size) in [("TB", MB * MB), ("GB", MB * KB), ("MB", MB), ("kB", KB)] {
        if bytes != 0.0 && bytes.abs() >= size && (bytes / size).fract() == 0.0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes}B")
}

/// `ms` in the largest unit that divides it (`30s`, `1d`, `10ms`).
fn time_text(ms: f64) -> String {
    for (unit, size) in [
        ("d", 86_400_000.0),
        ("h", 3_600_000.0),
        ("min", 60_000.0),
        ("s", 1000.0),
    ] {
        if ms != 0.0 && ms.abs() >= size && (ms / size).fract() == 0.0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A number as PostgreSQL reads it: decimal (a fraction and an exponent allowed) or `0x`
/// hex.
fn number(text: &str) -> Option<f64> {
    let (neg, t) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok()? as f64,
        None => t.parse::<f64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// What is wrong with `value` (as the plan gives it: text, or a TOML number's text) for
/// setting `name` against PostgreSQL's own bounds: below the minimum or above the maximum,
/// in the setting's unit; None when it is in range, not a number, or not a setting known
/// here (its unit is [`unit_problem`]'s to judge).
pub(crate) fn range_problem(name: &str, value: &str) -> Option<String> {
    let (_, base, min, max, note) = RANGES.iter().find(|(n, ..)| *n == name)?;
    let (num, unit) = number_and_unit(value)?;
    let n = number(num)?;
    let in_base = match (base, unit) {
        (_, "") => n,
        (Base::Bytes(size), u) => {
            let unit_bytes = match u {
                "B" => 1.0,
                "kB" => KB,
                "MB" => MB,
                "GB" => MB * KB,
                "TB" => MB * MB,
                _ => return None,
            };
            n * unit_bytes / size
        }
        (Base::Millis(size), u) => {
            let unit_ms = match u {
                "us" => 0.001,
                "ms" => 1.0,
                "s" => 1000.0,
                "min" => 60_000.0,
                "h" => 3_600_000.0,
                "d" => 86_400_000.0,
                _ => return None,
            };
            n * unit_ms / size
        }
        (Base::Plain | Base::Real, _) => return None,
    };
    // Integer settings are rounded to their base unit, as the server does.
    let v = if *base == Base::Real {
        in_base
    } else {
        in_base.round()
    };
    let shown = |x: f64| match base {
        _ if x < 0.0 => format!("{x}"),
        Base::Bytes(size) => memory_text(x * size),
        Base::Millis(size) => time_text(x * size),
        Base::Plain | Base::Real => format!("{x}"),
    };
    if v < *min {
        Some(format!(
            "\"{value}\" is below PostgreSQL's minimum for {name}, {}{note}: the server refuses it",
            shown(*min)
        ))
    } else if v > *max {
        Some(format!(
            "\"{value}\" is above PostgreSQL's maximum for {name}, {}: the server refuses it",
            shown(*max)
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_sorted_and_apart() {
        for list in [MEMORY_SETTINGS, TIME_SETTINGS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        assert!(SINCE.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(UNTIL.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(RANGES.windows(2).all(|w| w[0].0 < w[1].0));
        for (name, since) in SINCE {
            assert!(super::super::PG_MAJORS.contains(since), "{name}");
        }
        // A setting with a unit in the ranges is in the unit lists too.
        for (name, base, ..) in RANGES {
            match base {
                Base::Bytes(_) => assert!(MEMORY_SETTINGS.contains(name), "{name}"),
                Base::Millis(_) => assert!(TIME_SETTINGS.contains(name), "{name}"),
                Base::Plain | Base::Real => {
                    assert!(!MEMORY_SETTINGS.contains(name) && !TIME_SETTINGS.contains(name))
                }
            }
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

    #[test]
    fn postgresql_18_settings_are_known_with_their_units() {
        assert!(unit_problem("io_max_combine_limit", "128kB").is_none());
        let p = unit_problem("io_max_combine_limit", "16").map(|_| ());
        assert_eq!(p, None);
        assert!(unit_problem("io_max_combine_limit", "1s").is_some());
        assert!(unit_problem("idle_replication_slot_timeout", "1d").is_none());
        assert!(unit_problem("idle_replication_slot_timeout", "1GB").is_some());
    }

    #[test]
    fn settings_of_a_later_or_an_earlier_server_are_named_with_the_version() {
        for name in [
            "io_method",
            "io_workers",
            "io_max_combine_limit",
            "autovacuum_worker_slots",
            "vacuum_truncate",
            "file_copy_method",
            "md5_password_warnings",
            "track_cost_delay_timing",
        ] {
            let p = version_problem(name, 17).expect(name);
            assert!(
                p.contains(&format!("{name} arrived in PostgreSQL 18"))
                    && p.contains("postgres.version is 17"),
                "{p}"
            );
            assert_eq!(version_problem(name, 18), None, "{name}");
            assert_eq!(version_problem(name, 19), None, "{name}");
        }
        assert_eq!(version_problem("io_combine_limit", 17), None);
        assert!(version_problem("io_combine_limit", 16).is_some());
        let p = version_problem("old_snapshot_threshold", 17).expect("removed");
        assert!(p.contains("removed in PostgreSQL 17"), "{p}");
        assert_eq!(version_problem("old_snapshot_threshold", 16), None);
        let p = version_problem("force_parallel_mode", 18).expect("renamed");
        assert!(p.contains("debug_parallel_query"), "{p}");
        assert_eq!(version_problem("shared_buffers", 13), None);
        assert_eq!(version_problem("pg_stat_statements.max", 13), None);
    }

    #[test]
    fn values_outside_the_server_s_own_range_are_named_with_the_bound() {
        for (name, value, words) in [
            (
                "work_mem",
                "1kB",
                "below PostgreSQL's minimum for work_mem, 64kB",
            ),
            ("work_mem", "63", "minimum for work_mem, 64kB"),
            ("work_mem", "4TB", "maximum for work_mem"),
            (
                "shared_buffers",
                "64kB",
                "minimum for shared_buffers, 128kB",
            ),
            ("shared_buffers", "8", "minimum for shared_buffers, 128kB"),
            (
                "maintenance_work_mem",
                "512kB",
                "minimum for maintenance_work_mem, 1MB",
            ),
            (
                "checkpoint_timeout",
                "10s",
                "minimum for checkpoint_timeout, 30s",
            ),
            (
                "checkpoint_timeout",
                "2d",
                "maximum for checkpoint_timeout, 1d",
            ),
            (
                "max_wal_size",
                "16MB",
                "minimum for max_wal_size, 32MB (two WAL segments",
            ),
            ("min_wal_size", "1MB", "minimum for min_wal_size, 32MB"),
            ("random_page_cost", "-1", "minimum for random_page_cost, 0"),
            (
                "effective_cache_size",
                "0",
                "minimum for effective_cache_size, 8kB",
            ),
            (
                "checkpoint_completion_target",
                "1.4",
                "maximum for checkpoint_completion_target, 1",
            ),
            ("wal_buffers", "-2", "minimum for wal_buffers"),
            (
                "max_parallel_workers",
                "2000",
                "maximum for max_parallel_workers, 1024",
            ),
            ("bgwriter_delay", "5ms", "minimum for bgwriter_delay, 10ms"),
        ] {
            let p = range_problem(name, value).unwrap_or_else(|| panic!("{name} = {value}"));
            assert!(
                p.contains(words) && p.contains(&format!("\"{value}\"")),
                "{p}"
            );
        }
        for (name, value) in [
            ("work_mem", "64kB"),
            ("work_mem", "64MB"),
            ("work_mem", "0.0625MB"),
            ("shared_buffers", "128kB"),
            ("shared_buffers", "64GB"),
            ("shared_buffers", "16"),
            ("maintenance_work_mem", "8000MB"),
            ("checkpoint_timeout", "30s"),
            ("checkpoint_timeout", "1d"),
            ("checkpoint_timeout", "15min"),
            ("max_wal_size", "16384MB"),
            ("max_wal_size", "32MB"),
            ("min_wal_size", "1024MB"),
            ("random_page_cost", "1.1"),
            ("random_page_cost", "0"),
            ("wal_buffers", "-1"),
            ("wal_buffers", "512MB"),
            ("effective_cache_size", "192GB"),
            ("checkpoint_completion_target", "0.9"),
            ("max_parallel_workers", "80"),
            ("bgwriter_delay", "200ms"),
            ("bgwriter_flush_after", "0"),
            ("work_mem", "lots"),
            ("work_mem", "4 mb"),
            ("listen_addresses", "*"),
        ] {
            assert_eq!(range_problem(name, value), None, "{name} = {value}");
        }
    }
}
