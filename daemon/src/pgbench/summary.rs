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
    pub scaling_factor: Option<u32>,
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

    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim_end();
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
    s.output_format = if s.failed_transactions.is_some() || s.max_tries.is_some() {
        OutputFormat::V15Plus
    } else if at("pgbench (").is_some() || s.initial_connection_ms.is_some() {
        OutputFormat::V14
    } else {
        OutputFormat::V13
    };
    Ok(s)
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
