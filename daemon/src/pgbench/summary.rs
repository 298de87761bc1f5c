//! Parser for pgbench's end-of-run summary, client versions 13 through 17.
//!
//! Pure: text in, [`Summary`] or [`SummaryError`] out. Lines it does not know (server log
//! lines, NOTICEs, progress lines on a merged stream) are skipped; the lines it does know
//! must be well formed. Format differences by version are listed in REFERENCE.md.

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

/// Parses the summary pgbench prints at the end of a run.
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
    let mut seen_clients = false;
    let mut seen_threads = false;
    let mut seen_processed = false;
    let mut seen_banner = false;
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
                s.statement_latencies.push(st);
                continue;
            }
            // A script header of a multi-script run keeps the block open.
            if line.starts_with("SQL script") || line.starts_with(" - ") {
                continue;
            }
            in_statements = false;
        }
        if let Some(rest) = line.strip_prefix("pgbench (") {
            let rest = rest.strip_suffix(')').unwrap_or(rest);
            let (short, full, server) = parse_banner(rest);
            s.client_version = Some(short);
            s.client_version_full = Some(full);
            s.server_version = server;
            seen_banner = true;
        } else if let Some(v) = line.strip_prefix("transaction type: ") {
            s.transaction_type = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("scaling factor: ") {
            s.scaling_factor = Some(num(v, line_no, line, "scaling factor")?);
        } else if let Some(v) = line.strip_prefix("query mode: ") {
            s.query_mode = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("number of clients: ") {
            s.clients = num(v, line_no, line, "number of clients")?;
            seen_clients = true;
        } else if let Some(v) = line.strip_prefix("number of threads: ") {
            s.threads = num(v, line_no, line, "number of threads")?;
            seen_threads = true;
        } else if let Some(v) = line.strip_prefix("maximum number of tries: ") {
            s.max_tries = Some(num(v, line_no, line, "maximum number of tries")?);
        } else if let Some(v) = line.strip_prefix("number of transactions per client: ") {
            s.transactions_per_client = Some(num(v, line_no, line, "transactions per client")?);
        } else if let Some(v) = line.strip_prefix("duration: ") {
            let v = v.strip_suffix(" s").unwrap_or(v);
            s.duration_s = Some(num(v, line_no, line, "duration")?);
        } else if let Some(v) = line.strip_prefix("number of transactions actually processed: ") {
            match v.split_once('/') {
                Some((a, b)) => {
                    s.transactions_processed = num(a, line_no, line, "processed transactions")?;
                    s.transactions_expected = Some(num(b, line_no, line, "expected transactions")?);
                }
                None => s.transactions_processed = num(v, line_no, line, "processed transactions")?,
            }
            seen_processed = true;
        } else if let Some(v) = line.strip_prefix("number of failed transactions: ") {
            let count = v.split_whitespace().next().unwrap_or("");
            s.failed_transactions = Some(num(count, line_no, line, "failed transactions")?);
        } else if let Some(v) = line.strip_prefix("latency average = ") {
            let v = v.strip_suffix(" ms").unwrap_or(v);
            s.latency_avg_ms = num(v, line_no, line, "latency average")?;
        } else if let Some(v) = line.strip_prefix("latency stddev = ") {
            let v = v.strip_suffix(" ms").unwrap_or(v);
            s.latency_stddev_ms = Some(num(v, line_no, line, "latency stddev")?);
        } else if let Some(v) = line.strip_prefix("initial connection time = ") {
            let v = v.strip_suffix(" ms").unwrap_or(v);
            s.initial_connection_ms = Some(num(v, line_no, line, "initial connection time")?);
        } else if let Some(v) = line.strip_prefix("tps = ") {
            let (value, note) = v.split_once(' ').unwrap_or((v, ""));
            let value: f64 = num(value, line_no, line, "tps")?;
            if note.contains("including connections establishing") {
                s.tps_including_connections = Some(value);
            } else {
                s.tps = value;
            }
        } else if line.starts_with("statement latencies in milliseconds")
            || line.starts_with("script statistics:")
        {
            in_statements = true;
            statements_have_failures |= line.contains("failures");
        }
    }

    if aborted {
        return Err(SummaryError::Aborted {
            processed: seen_processed.then_some(s.transactions_processed),
            expected: s.transactions_expected,
        });
    }
    if !seen_clients {
        return Err(SummaryError::Missing("number of clients:"));
    }
    if !seen_threads {
        return Err(SummaryError::Missing("number of threads:"));
    }
    if !seen_processed {
        return Err(SummaryError::Missing(
            "number of transactions actually processed:",
        ));
    }
    if s.tps.is_nan() {
        return Err(SummaryError::Missing("tps ="));
    }
    if s.latency_avg_ms.is_nan() {
        return Err(SummaryError::Missing("latency average ="));
    }
    if let Some(expected) = s.transactions_expected {
        // 15+ counts failed transactions apart from processed ones: a gap they explain is a
        // complete run with failures, anything more is an incomplete run.
        let accounted = s.transactions_processed + s.failed_transactions.unwrap_or(0);
        if accounted < expected {
            return Err(SummaryError::Incomplete {
                processed: s.transactions_processed,
                expected,
                failed: s.failed_transactions,
            });
        }
    }
    s.output_format = if s.failed_transactions.is_some() || s.max_tries.is_some() {
        OutputFormat::V15Plus
    } else if seen_banner || s.initial_connection_ms.is_some() {
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
