//! Parser for pgbench's end-of-run summary, client versions 13 through 19.
//!
//! Pure: text in, [`Summary`] or [`SummaryError`] out. Lines it does not know (server log
//! lines, NOTICEs, progress lines on a merged stream) are skipped; the lines it does know
//! must be well formed. Format differences by version (the tps line changed in 14, failure lines arrived in 15, per-script counts in 18, other failures in 19) are in the fixtures' README, daemon/tests/fixtures/pgbench/README.md.

use serde::{Deserialize, Serialize};

/// Which generation of the summary format the text used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputFormat {
    /// No banner, two tps lines (including/excluding connections establishing).
    #[serde(rename = "13")]
    V13,
    /// Banner, `initial connection time`, one `(without initial connection time)` tps line.
    #[serde(rename = "14")]
    V14,
    /// As 14 plus `maximum number of tries` and `number of failed transactions`.
    #[serde(rename = "15+")]
    V15Plus,
}

/// One line of the `-r` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementLatency {
    pub latency_ms: f64,
    /// Present from 15 on (`… and failures:` block).
    pub failures: Option<u64>,
    pub command: String,
}

/// pgbench's own figures for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub output_format: OutputFormat,
    /// From the banner (`pgbench (15.3 (Ubuntu 15.3-1.pgdg20.04+1))` → `15.3`); 13 has none.
    pub client_version: Option<String>,
    /// The banner's full client text including a distro suffix.
    pub client_version_full: Option<String>,
    /// Present when the server's major version differs from the client's.
    pub server_version: Option<String>,
    pub transaction_type: Option<String>,
    pub(crate) scaling_factor: Option<u32>,
    pub query_mode: Option<String>,
    pub clients: u32,
    pub threads: u32,
    pub max_tries: Option<u32>,
    pub transactions_per_client: Option<u64>,
    pub duration_s: Option<f64>,
    pub transactions_processed: u64,
    /// The `b` of `a/b` for `-t` runs.
    pub transactions_expected: Option<u64>,
    /// 15+ only; `None` when the client does not report failures.
    pub failed_transactions: Option<u64>,
    pub latency_avg_ms: f64,
    /// Printed only with `-P`, `-R` or `-L`.
    pub latency_stddev_ms: Option<f64>,
    pub initial_connection_ms: Option<f64>,
    /// Throughput without connection set-up (13: "excluding connections establishing").
    pub tps: f64,
    /// 13 only: "including connections establishing".
    pub tps_including_connections: Option<f64>,
    pub statement_latencies: Vec<StatementLatency>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SummaryError {
    #[error("pgbench reported \"Run was aborted; the above results are incomplete\"{}", progress_note(.processed, .expected))]
    Aborted {
        processed: Option<u64>,
        expected: Option<u64>,
    },
    #[error("incomplete run: {processed} of {expected} transactions processed{}", failed_note(.failed))]
    Incomplete {
        processed: u64,
        expected: u64,
        failed: Option<u64>,
    },
    #[error("not a complete pgbench summary: no \"{0}\" line")]
    Missing(&'static str),
    #[error("line {line_no}: cannot read {what} from \"{line}\"")]
    Malformed {
        line_no: usize,
        what: &'static str,
        line: String,
    },
    /// A figure pgbench cannot have printed: not finite, negative, zero where at least one
    /// is needed, or contradicting another line; or a second summary in the same output.
    #[error("line {line_no}: {problem}: \"{line}\"")]
    Impossible {
        line_no: usize,
        problem: String,
        line: String,
    },
}

fn progress_note(processed: &Option<u64>, expected: &Option<u64>) -> String {
    match (processed, expected) {
        (Some(a), Some(b)) => format!(" ({a} of {b} transactions processed)"),
        (Some(a), None) => format!(" ({a} transactions processed)"),
        _ => String::new(),
    }
}

fn failed_note(failed: &Option<u64>) -> String {
    match failed {
        Some(f) if *f > 0 => format!(", {f} failed"),
        _ => String::new(),
    }
}

/// Splits `pgbench (17.2 (Debian 17.2-1.pgdg120+1), server 15.3 (Ubuntu …))` into
/// (client short, client full, server short).
fn parse_banner(rest: &str) -> (String, String, Option<String>) {
    // `rest` is what follows "pgbench (" without the final ')'.
    let (client_full, server) = match split_top_level(rest, ", server ") {
        Some((c, s)) => (c.trim().to_string(), Some(s.trim())),
        None => (rest.trim().to_string(), None),
    };
    let short = |s: &str| s.split_whitespace().next().unwrap_or("").to_string();
    (short(&client_full), client_full, server.map(short))
}

/// The major version of a banner's short client version: `15` of `15.18`, `16` of `16beta1`.
fn banner_major(short: &str) -> Option<u32> {
    let digits: String = short.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Finds `sep` outside parentheses.
fn split_top_level<'a>(s: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(sep) => {
                return Some((&s[..i], &s[i + sep.len()..]));
            }
            _ => {}
        }
    }
    None
}

fn num<T: std::str::FromStr>(
    text: &str,
    line_no: usize,
    line: &str,
    what: &'static str,
) -> Result<T, SummaryError> {
    text.trim().parse().map_err(|_| SummaryError::Malformed {
        line_no,
        what,
        line: line.to_string(),
    })
}

fn impossible(line_no: usize, line: &str, problem: String) -> SummaryError {
    SummaryError::Impossible {
        line_no,
        problem,
        line: line.to_string(),
    }
}

/// A measured figure (tps, milliseconds, seconds): finite and not negative. Rust's float
/// parser takes `inf`, `NaN` and `1e400` (as infinity); pgbench prints none of them.
fn figure(text: &str, line_no: usize, line: &str, what: &'static str) -> Result<f64, SummaryError> {
    let v: f64 = num(text, line_no, line, what)?;
    if !v.is_finite() {
        return Err(impossible(
            line_no,
            line,
            format!("{what} is not a finite number"),
        ));
    }
    // `-0` is negative too: pgbench computes every figure from non-negative counts and
    // durations, so it never prints a minus sign.
    if v.is_sign_negative() {
        return Err(impossible(line_no, line, format!("{what} is negative")));
    }
    Ok(v)
}

/// A count that pgbench never prints as zero (clients, threads, scaling factor).
fn at_least_one(
    text: &str,
    line_no: usize,
    line: &str,
    what: &'static str,
) -> Result<u32, SummaryError> {
    let v: u32 = num(text, line_no, line, what)?;
    if v == 0 {
        return Err(impossible(line_no, line, format!("{what} is 0")));
    }
    Ok(v)
}

/// The summary lines the parser reads, each at most once per output.
const SUMMARY_LINES: &[&str] = &[
    "pgbench (",
    "transaction type: ",
    "scaling factor: ",
    "query mode: ",
    "number of clients: ",
    "number of threads: ",
    "maximum number of tries: ",
    "number of transactions per client: ",
    "duration: ",
    "number of transactions actually processed: ",
    "number of failed transactions: ",
    "latency average = ",
    "latency stddev = ",
    "initial connection time = ",
    "tps = ",
];

/// Parses the summary pgbench prints at the end of a run. Every figure must be one pgbench
/// can print (finite, in range, consistent with the other lines) and every line appear
/// once, or the output is refused naming the line.
pub fn parse_summary(text: &str) -> Result<Summary, SummaryError> {
    let mut s = Summary {
        output_format: OutputFormat::V13,
        client_version: None,
        client_version_full: None,
        server_version: None,
        transaction_type: None,
        scaling_factor: None,
        query_mode: None,
        clients: 0,
        threads: 0,
        max_tries: None,
        transactions_per_client: None,
        duration_s: None,
        transactions_processed: 0,
        transactions_expected: None,
        failed_transactions: None,
        latency_avg_ms: f64::NAN,
        latency_stddev_ms: None,
        initial_connection_ms: None,
        tps: f64::NAN,
        tps_including_connections: None,
        statement_latencies: Vec::new(),
    };
    // Where each summary line was seen (its number and text), to refuse a second one and
    // to name the line when figures contradict each other.
    let mut seen: Vec<(&'static str, usize, &str)> = Vec::new();
    let mut aborted = false;
    let mut in_statements = false;
    let mut statements_have_failures = false;

    // Lines only one generation of the format prints: 13's two tps notes against 14's banner,
    // connection time and tps note (15+ adds to 14, so 14 and 15+ lines mix legitimately).
    let mut v13_line: Option<(usize, &str)> = None;
    let mut v14_line: Option<(usize, &str)> = None;
    let mut throttled = false;

    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim_end();
        if let Some((col, c)) = line
            .chars()
            .enumerate()
            .find(|(_, c)| *c == '\u{feff}' || (c.is_control() && *c != '\t'))
        {
            return Err(impossible(
                line_no,
                &line.escape_debug().to_string(),
                format!(
                    "character U+{:04X} at column {}: pgbench prints no such character, the output is damaged",
                    u32::from(c),
                    col + 1
                ),
            ));
        }
        if line.starts_with("rate limit schedule lag") {
            throttled = true;
        }
        if line.contains("connections establishing)") {
            v13_line.get_or_insert((line_no, line));
        }
        if line.starts_with("pgbench (")
            || line.starts_with("number of failed transactions: ")
            || line.starts_with("maximum number of tries: ")
            || line.starts_with("initial connection time = ")
            || line.starts_with("average connection time = ")
            || line.contains("(without initial connection time)")
            || line.contains("(including reconnection times)")
        {
            v14_line.get_or_insert((line_no, line));
        }
        if let (Some((a, _)), Some((b, _))) = (v13_line, v14_line) {
            let (later_no, later, earlier_no, earlier_v, later_v) = if a > b {
                (a, v13_line.map_or("", |l| l.1), b, "14+", "13")
            } else {
                (b, v14_line.map_or("", |l| l.1), a, "13", "14+")
            };
            return Err(impossible(
                later_no,
                later,
                format!(
                    "a pgbench {later_v} line after a pgbench {earlier_v} line (line {earlier_no}): two versions' summaries mixed"
                ),
            ));
        }
        if line.contains("Run was aborted") {
            aborted = true;
            in_statements = false;
            continue;
        }
        if in_statements {
            if let Some(st) = parse_statement_line(line, statements_have_failures) {
                if !st.latency_ms.is_finite() || st.latency_ms < 0.0 {
                    return Err(impossible(
                        line_no,
                        line,
                        "statement latency is not a finite, non-negative number".into(),
                    ));
                }
                s.statement_latencies.push(st);
                continue;
            }
            // A script header of a multi-script run keeps the block open.
            if line.starts_with("SQL script") || line.starts_with(" - ") {
                continue;
            }
            in_statements = false;
        }
        // With several scripts each script's block is ` - statement latencies …`.
        let unprefixed = line.strip_prefix(" - ").unwrap_or(line);
        if unprefixed.starts_with("statement latencies in milliseconds")
            || line.starts_with("script statistics:")
        {
            in_statements = true;
            statements_have_failures |= line.contains("failures");
            continue;
        }
        let Some(prefix) = SUMMARY_LINES.iter().find(|k| line.starts_with(**k)) else {
            continue;
        };
        let v = &line[prefix.len()..];
        // pgbench 13 prints two tps lines, told apart by their note.
        let kind = if *prefix == "tps = " && line.contains("including connections establishing") {
            "tps = (including connections establishing)"
        } else {
            prefix
        };
        if let Some((_, first, _)) = seen.iter().find(|(k, _, _)| *k == kind) {
            return Err(impossible(
                line_no,
                line,
                format!(
                    "a second \"{}\" line (the first is line {first}): two summaries in one output",
                    kind.trim_end_matches([' ', ':', '('])
                ),
            ));
        }
        seen.push((kind, line_no, line));
        match kind {
            "pgbench (" => {
                let rest = v.strip_suffix(')').unwrap_or(v);
                let (short, full, server) = parse_banner(rest);
                let major = banner_major(&short).ok_or_else(|| SummaryError::Malformed {
                    line_no,
                    what: "the client version",
                    line: line.to_string(),
                })?;
                // 13 prints no banner; the formats of 14 to the newest supported major
                // (plan::PG_MAJORS) are the ones this parser knows.
                let majors = crate::plan::PG_MAJORS;
                if major == *majors.start() || !majors.contains(&major) {
                    return Err(impossible(
                        line_no,
                        line,
                        format!(
                            "pgbench {major} is not a version this parser knows ({} to {}; {} prints no banner)",
                            majors.start(),
                            majors.end(),
                            majors.start()
                        ),
                    ));
                }
                s.client_version = Some(short);
                s.client_version_full = Some(full);
                s.server_version = server;
            }
            "transaction type: " => s.transaction_type = Some(v.to_string()),
            "scaling factor: " => {
                s.scaling_factor = Some(at_least_one(v, line_no, line, "scaling factor")?)
            }
            "query mode: " => s.query_mode = Some(v.to_string()),
            "number of clients: " => {
                s.clients = at_least_one(v, line_no, line, "number of clients")?
            }
            "number of threads: " => {
                s.threads = at_least_one(v, line_no, line, "number of threads")?
            }
            "maximum number of tries: " => {
                s.max_tries = Some(num(v, line_no, line, "maximum number of tries")?)
            }
            "number of transactions per client: " => {
                let n: u64 = num(v, line_no, line, "transactions per client")?;
                if n == 0 {
                    return Err(impossible(
                        line_no,
                        line,
                        "transactions per client is 0".into(),
                    ));
                }
                s.transactions_per_client = Some(n);
            }
            "duration: " => {
                let v = v.strip_suffix(" s").unwrap_or(v);
                s.duration_s = Some(figure(v, line_no, line, "duration")?);
            }
            "number of transactions actually processed: " => match v.split_once('/') {
                Some((a, b)) => {
                    s.transactions_processed = num(a, line_no, line, "processed transactions")?;
                    s.transactions_expected = Some(num(b, line_no, line, "expected transactions")?);
                }
                None => s.transactions_processed = num(v, line_no, line, "processed transactions")?,
            },
            "number of failed transactions: " => {
                let count = v.split_whitespace().next().unwrap_or("");
                s.failed_transactions = Some(num(count, line_no, line, "failed transactions")?);
            }
            "latency average = " => {
                // 15+ without -P: `… ms (including failures)` when some transactions failed.
                let v = v.strip_suffix(" (including failures)").unwrap_or(v);
                let v = v.strip_suffix(" ms").unwrap_or(v);
                s.latency_avg_ms = figure(v, line_no, line, "latency average")?;
            }
            "latency stddev = " => {
                let v = v.strip_suffix(" ms").unwrap_or(v);
                s.latency_stddev_ms = Some(figure(v, line_no, line, "latency stddev")?);
            }
            "initial connection time = " => {
                let v = v.strip_suffix(" ms").unwrap_or(v);
                s.initial_connection_ms =
                    Some(figure(v, line_no, line, "initial connection time")?);
            }
            "tps = " | "tps = (including connections establishing)" => {
                let value = v.split_once(' ').map_or(v, |(value, _)| value);
                let value = figure(value, line_no, line, "tps")?;
                if kind == "tps = " {
                    s.tps = value;
                } else {
                    s.tps_including_connections = Some(value);
                }
            }
            _ => {}
        }
    }
    let at = |kind: &str| {
        seen.iter()
            .find(|(k, _, _)| *k == kind)
            .map(|(_, n, l)| (*n, *l))
    };

    if aborted {
        return Err(SummaryError::Aborted {
            processed: at("number of transactions actually processed: ")
                .map(|_| s.transactions_processed),
            expected: s.transactions_expected,
        });
    }
    if at("number of clients: ").is_none() {
        return Err(SummaryError::Missing("number of clients:"));
    }
    let Some((threads_no, threads_line)) = at("number of threads: ") else {
        return Err(SummaryError::Missing("number of threads:"));
    };
    let Some((processed_no, processed_line)) = at("number of transactions actually processed: ")
    else {
        return Err(SummaryError::Missing(
            "number of transactions actually processed:",
        ));
    };
    let Some((tps_no, tps_line)) = at("tps = ") else {
        return Err(SummaryError::Missing("tps ="));
    };
    // tps is the processed count over the run's duration: no throughput without a
    // transaction processed.
    if s.transactions_processed == 0 && s.tps > 0.0 {
        return Err(impossible(
            tps_no,
            tps_line,
            format!("tps is {} with no transaction processed", s.tps),
        ));
    }
    if at("latency average = ").is_none() {
        return Err(SummaryError::Missing("latency average ="));
    }
    // pgbench never runs more threads than clients.
    if s.threads > s.clients {
        return Err(impossible(
            threads_no,
            threads_line,
            format!("{} threads for {} clients", s.threads, s.clients),
        ));
    }
    if let Some(expected) = s.transactions_expected {
        let failed = s.failed_transactions.unwrap_or(0);
        if s.transactions_processed.saturating_add(failed) > expected {
            return Err(impossible(
                processed_no,
                processed_line,
                format!(
                    "{} processed{} of {expected} expected transactions",
                    s.transactions_processed,
                    if failed > 0 {
                        format!(" and {failed} failed")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        if let Some(per_client) = s.transactions_per_client {
            if u64::from(s.clients).checked_mul(per_client) != Some(expected) {
                return Err(impossible(
                    processed_no,
                    processed_line,
                    format!(
                        "{expected} expected transactions is not {} clients × {per_client} per client",
                        s.clients
                    ),
                ));
            }
        }
        // 15+ counts failed transactions apart from processed ones: a gap they explain is a
        // complete run with failures, anything more is an incomplete run.
        if s.transactions_processed + failed < expected {
            return Err(SummaryError::Incomplete {
                processed: s.transactions_processed,
                expected,
                failed: s.failed_transactions,
            });
        }
    }
    check_banner_against_lines(&s, &at)?;
    check_figures_agree(&s, &at, throttled)?;
    s.output_format = if s.failed_transactions.is_some() || s.max_tries.is_some() {
        OutputFormat::V15Plus
    } else if at("pgbench (").is_some() || s.initial_connection_ms.is_some() {
        OutputFormat::V14
    } else {
        OutputFormat::V13
    };
    Ok(s)
}

/// Where a summary line was seen: its number and text.
type SeenAt<'a> = dyn Fn(&str) -> Option<(usize, &'a str)> + 'a;

/// The banner's major version against the lines only some versions print: 15 and later
/// always print the failed-transactions line, 14 never does; 13's two tps lines come
/// together.
fn check_banner_against_lines(s: &Summary, at: &SeenAt<'_>) -> Result<(), SummaryError> {
    if let Some((banner_no, banner)) = at("pgbench (") {
        let major = s
            .client_version
            .as_deref()
            .and_then(banner_major)
            .unwrap_or(0);
        let failed_line =
            at("number of failed transactions: ").or_else(|| at("maximum number of tries: "));
        match (major >= 15, failed_line) {
            (false, Some((no, line))) => {
                return Err(impossible(
                    no,
                    line,
                    format!("pgbench {major} (line {banner_no}) prints no such line: it arrived in 15"),
                ))
            }
            (true, _) if at("number of failed transactions: ").is_none() => {
                return Err(impossible(
                    banner_no,
                    banner,
                    format!(
                        "pgbench {major} always prints \"number of failed transactions\", and this summary has none"
                    ),
                ))
            }
            _ => {}
        }
    }
    let including = at("tps = (including connections establishing)");
    if let Some((tps_no, tps_line)) = at("tps = ") {
        let excluding = tps_line.contains("(excluding connections establishing)");
        if excluding && including.is_none() {
            return Err(SummaryError::Missing(
                "tps = … (including connections establishing)",
            ));
        }
        if !excluding && including.is_some() {
            return Err(impossible(
                tps_no,
                tps_line,
                "pgbench 13's \"including connections establishing\" tps line without its \"excluding\" one".into(),
            ));
        }
    }
    Ok(())
}

/// Relative tolerance of the tps × latency = clients identity when pgbench computed the
/// latency from the run time (no `latency stddev` line): the latency is printed to three
/// decimals (that rounding is allowed for apart) and transactions skipped or retried move
/// it a little.
const LITTLE_TOLERANCE: f64 = 0.01;
/// Above this, no pgbench run has ever been seen: a hundred million transactions a second.
const MAX_PLAUSIBLE_TPS: f64 = 1e8;

/// The figures of one summary against each other, naming the tps line when they disagree:
/// - tps is the processed count over the run time, so with `-T` the count over tps is the
///   duration, within a factor of 2 and a second (connection time, the last transactions);
/// - latency and tps come from the same run time: tps × latency is the number of busy
///   clients, exactly the clients (within [`LITTLE_TOLERANCE`]) when pgbench computed the
///   latency from the run time, at most the clients (within 10 %) when it measured it,
///   unless `-R` throttled the run (then the latency includes the schedule lag);
/// - 13's tps excluding connection time is never below the tps including it.
fn check_figures_agree(s: &Summary, at: &SeenAt<'_>, throttled: bool) -> Result<(), SummaryError> {
    let Some((tps_no, tps_line)) = at("tps = ") else {
        return Ok(());
    };
    let refuse = |problem: String| Err(impossible(tps_no, tps_line, problem));
    if s.tps > MAX_PLAUSIBLE_TPS {
        return refuse(format!(
            "tps {} is beyond any pgbench run (more than {MAX_PLAUSIBLE_TPS:e} a second)",
            s.tps
        ));
    }
    if s.transactions_processed > 0 && s.tps == 0.0 {
        return refuse(format!(
            "tps is 0 with {} transactions processed",
            s.transactions_processed
        ));
    }
    if s.transactions_processed == 0 {
        return Ok(());
    }
    if let Some(including) = s.tps_including_connections {
        if including > s.tps * (1.0 + 1e-6) {
            return refuse(format!(
                "tps excluding connections ({}) is below tps including them ({including})",
                s.tps
            ));
        }
    }
    if let Some(duration) = s.duration_s {
        let implied = s.transactions_processed as f64 / s.tps;
        if implied < duration / 2.0 - 1.0 || implied > duration * 2.0 + 1.0 {
            return refuse(format!(
                "{} transactions at {} tps take {implied:.3} s, not the {duration} s run \
                 (allowed: within a factor of 2 and a second)",
                s.transactions_processed, s.tps
            ));
        }
    }
    if throttled {
        return Ok(());
    }
    // 13 computes its latency from the run time including connections.
    let tps = s.tps_including_connections.unwrap_or(s.tps);
    let lat = s.latency_avg_ms;
    let busy_low = tps * (lat - 0.0005).max(0.0) / 1000.0;
    let busy_high = tps * (lat + 0.0005) / 1000.0;
    let clients = f64::from(s.clients);
    let (lat_no, _) = at("latency average = ").unwrap_or((0, ""));
    if s.latency_stddev_ms.is_none() {
        let failed = s.failed_transactions.unwrap_or(0) as f64;
        let processed = s.transactions_processed as f64;
        let busy = clients * processed / (processed + failed);
        if busy_low > busy * (1.0 + LITTLE_TOLERANCE) || busy_high < busy * (1.0 - LITTLE_TOLERANCE)
        {
            return refuse(format!(
                "{tps} tps at the latency average of {lat} ms (line {lat_no}) keep {:.3} clients busy, \
                 not the {} of this run (pgbench computes both from the run time: allowed {:.0} %)",
                tps * lat / 1000.0,
                s.clients,
                LITTLE_TOLERANCE * 100.0
            ));
        }
    } else if busy_low > clients * 1.1 {
        return refuse(format!(
            "{tps} tps at the latency average of {lat} ms (line {lat_no}) keep {:.3} clients busy, \
             more than the {} of this run (allowed: 10 % over)",
            tps * lat / 1000.0,
            s.clients
        ));
    }
    Ok(())
}

/// `   0.177           0  SELECT …` (15+) or `   0.177  SELECT …` (13/14).
fn parse_statement_line(line: &str, with_failures: bool) -> Option<StatementLatency> {
    if !line.starts_with(' ') {
        return None;
    }
    let mut rest = line.trim_start();
    let (lat, after) = rest.split_once(char::is_whitespace)?;
    let latency_ms: f64 = lat.parse().ok()?;
    rest = after.trim_start();
    let mut failures = None;
    if with_failures {
        let (f, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        failures = Some(f.parse().ok()?);
        rest = after.trim_start();
    }
    Some(StatementLatency {
        latency_ms,
        failures,
        command: rest.to_string(),
    })
}
