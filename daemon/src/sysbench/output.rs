//! Parser for sysbench's whole stdout of a sysbench-tpcc run made with
//! `--report-interval=1 --report_csv=yes`: the banner, the options block, one bare CSV line
//! per interval (`time,threads,tps,qps,r,w,o,lat,err,reconn`, lat being the 95th percentile
//! in ms) and the final summary, in 1.0.x's layout ("General statistics:") and 1.1's
//! ("Throughput:").
//!
//! Pure: text in, [`SysbenchRun`] or [`SysbenchParseError`] out. Lines it does not know
//! (`DB SCHEMA public`, `Threads started!`, warnings) are skipped; the lines it reads must
//! be well formed and appear once. Output that stops early (no summary, a summary without
//! one of its lines, a CSV line cut off) or that carries a `FATAL:` line is refused naming
//! what is missing or the line.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::pgbench::ProgressSample;

/// Which final-summary layout the output used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SummaryLayout {
    /// sysbench 1.0.x: `General statistics:` with `total time:` and `total number of events:`.
    #[serde(rename = "1.0")]
    V1_0,
    /// sysbench 1.1: `Throughput:` with `events/s (eps):`, `time elapsed:` and
    /// `total number of events:`.
    #[serde(rename = "1.1")]
    V1_1,
}

/// One per-interval CSV line: `time,threads,tps,qps,r,w,o,lat,err,reconn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SysbenchSecond {
    /// Seconds since the run started (end of the interval).
    pub time_s: f64,
    /// Threads running in the interval.
    pub threads: u32,
    pub tps: f64,
    pub qps: f64,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub other_per_s: f64,
    /// The interval's 95th percentile latency (0 when no event finished in it).
    pub latency_p95_ms: f64,
    /// Ignored errors per second (deadlocks, serialization failures the script retries).
    pub errors_per_s: f64,
    pub reconnects_per_s: f64,
}

/// sysbench's own figures for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SysbenchRun {
    /// From the banner: `sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)` → `1.0.20`.
    pub version: String,
    /// The whole banner line.
    pub banner: String,
    pub layout: SummaryLayout,
    /// `Number of threads:`.
    pub threads: u32,
    /// `Report intermediate results every N second(s)`; `None` without `--report-interval`.
    pub report_interval_s: Option<u32>,
    pub queries_read: u64,
    pub queries_write: u64,
    pub queries_other: u64,
    pub queries_total: u64,
    pub transactions: u64,
    /// Transactions per second over the run.
    pub tps: f64,
    pub queries: u64,
    pub qps: f64,
    pub ignored_errors: u64,
    pub ignored_errors_per_s: f64,
    pub reconnects: u64,
    pub reconnects_per_s: f64,
    /// 1.0's `total time:`, 1.1's `time elapsed:`.
    pub total_time_s: f64,
    /// `total number of events:` (one event is one TPC-C transaction).
    pub events: u64,
    /// 1.1's `events/s (eps):`; 1.0 does not print it.
    pub events_per_s: Option<f64>,
    pub latency_min_ms: f64,
    pub latency_avg_ms: f64,
    pub latency_max_ms: f64,
    pub latency_p95_ms: f64,
    /// The sum of every event's latency.
    pub latency_sum_ms: f64,
    /// `Threads fairness:`: events per thread and execution time per thread, mean and stddev.
    pub fairness_events_avg: f64,
    pub fairness_events_stddev: f64,
    pub fairness_time_avg_s: f64,
    pub fairness_time_stddev_s: f64,
    /// One entry per CSV line, in order.
    pub series: Vec<SysbenchSecond>,
}

impl SysbenchRun {
    /// The per-interval tps as the results' tps-over-time series. sysbench's CSV gives the
    /// interval's 95th percentile, not its mean, so `latency_ms` is left empty; the
    /// percentile and the error rate stay in [`SysbenchRun::series`].
    pub fn tps_series(&self) -> Vec<ProgressSample> {
        self.series
            .iter()
            .map(|s| ProgressSample {
                elapsed_s: s.time_s,
                tps: s.tps,
                latency_ms: None,
                stddev_ms: None,
                lag_ms: None,
                failed: None,
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SysbenchParseError {
    #[error("sysbench reported a fatal error at line {line_no}: \"{line}\"")]
    Fatal { line_no: usize, line: String },
    #[error("not sysbench output: no banner line (\"sysbench 1.0.20 (…)\")")]
    NoBanner,
    #[error(
        "incomplete sysbench output: no final summary (no \"SQL statistics:\" block) after {seconds} per-second line(s); the run stopped early"
    )]
    NoSummary { seconds: usize },
    #[error("incomplete sysbench output: no {0}")]
    Missing(String),
    #[error(
        "line {line_no}: a cut per-second CSV line ({problem}; time,threads,tps,qps,r,w,o,lat,err,reconn): \"{line}\""
    )]
    CutCsvLine {
        line_no: usize,
        problem: String,
        line: String,
    },
    /// sysbench ends every line it prints: text that stops inside one was cut short.
    #[error("line {line_no}: the output ends inside this line, without a line end: cut short: \"{line}\"")]
    CutLine { line_no: usize, line: String },
    #[error("line {line_no}: cannot read {what} from \"{line}\"")]
    Malformed {
        line_no: usize,
        what: String,
        line: String,
    },
    /// A figure sysbench cannot have printed (not finite, negative, contradicting another
    /// line), a line seen twice, or a layout that mixes versions.
    #[error("line {line_no}: {problem}: \"{line}\"")]
    Impossible {
        line_no: usize,
        problem: String,
        line: String,
    },
}

/// The block of the final summary a line is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// Before the summary: banner, options, CSV lines.
    Preamble,
    Sql,
    General,
    Throughput,
    Latency,
    Fairness,
}

impl Block {
    fn header(self) -> &'static str {
        match self {
            Block::Preamble => "",
            Block::Sql => "SQL statistics:",
            Block::General => "General statistics:",
            Block::Throughput => "Throughput:",
            Block::Latency => "Latency (ms):",
            Block::Fairness => "Threads fairness:",
        }
    }
}

const CSV_FIELDS: usize = 10;

/// One line as the parser saw it, for errors.
#[derive(Clone, Copy)]
struct Line<'a> {
    no: usize,
    text: &'a str,
}

impl Line<'_> {
    fn malformed(&self, what: &str) -> SysbenchParseError {
        SysbenchParseError::Malformed {
            line_no: self.no,
            what: what.to_string(),
            line: self.text.to_string(),
        }
    }

    fn impossible(&self, problem: String) -> SysbenchParseError {
        SysbenchParseError::Impossible {
            line_no: self.no,
            problem,
            line: self.text.to_string(),
        }
    }

    /// A figure sysbench prints: finite and not negative (Rust's parser takes `inf`, `NaN`).
    fn figure(&self, text: &str, what: &str) -> Result<f64, SysbenchParseError> {
        let v: f64 = text.trim().parse().map_err(|_| self.malformed(what))?;
        if !v.is_finite() || v.is_sign_negative() {
            return Err(self.impossible(format!("{what} is not a finite, non-negative number")));
        }
        Ok(v)
    }

    fn count<T: std::str::FromStr>(&self, text: &str, what: &str) -> Result<T, SysbenchParseError> {
        text.trim().parse().map_err(|_| self.malformed(what))
    }

    /// `1865   (185.30 per sec.)`.
    fn count_and_rate(&self, text: &str, what: &str) -> Result<(u64, f64), SysbenchParseError> {
        let (count, rate) = text.split_once('(').ok_or_else(|| self.malformed(what))?;
        let rate = rate
            .trim()
            .strip_suffix("per sec.)")
            .ok_or_else(|| self.malformed(what))?;
        Ok((
            self.count(count, what)?,
            self.figure(rate, &format!("{what} per second"))?,
        ))
    }

    /// `10.0639s`.
    fn seconds(&self, text: &str, what: &str) -> Result<f64, SysbenchParseError> {
        let v = text.trim();
        let v = v.strip_suffix('s').ok_or_else(|| self.malformed(what))?;
        self.figure(v, what)
    }

    /// `932.5000/5.50`.
    fn avg_stddev(&self, text: &str, what: &str) -> Result<(f64, f64), SysbenchParseError> {
        let (avg, sd) = text.split_once('/').ok_or_else(|| self.malformed(what))?;
        Ok((self.figure(avg, what)?, self.figure(sd, what)?))
    }
}

/// What the scan found, each figure with the line it came from.
#[derive(Default)]
struct Found<'a> {
    banner: Option<(Line<'a>, String)>,
    threads: Option<u32>,
    report_interval_s: Option<u32>,
    blocks: Vec<(Block, Line<'a>)>,
    queries_read: Option<u64>,
    queries_write: Option<u64>,
    queries_other: Option<u64>,
    queries_total: Option<(Line<'a>, u64)>,
    transactions: Option<(Line<'a>, u64, f64)>,
    queries: Option<(Line<'a>, u64, f64)>,
    ignored_errors: Option<(Line<'a>, u64, f64)>,
    reconnects: Option<(Line<'a>, u64, f64)>,
    total_time_s: Option<f64>,
    events: Option<u64>,
    events_per_s: Option<(Line<'a>, f64)>,
    latency_min_ms: Option<f64>,
    latency_avg_ms: Option<f64>,
    latency_max_ms: Option<f64>,
    latency_p95_ms: Option<f64>,
    latency_sum_ms: Option<f64>,
    /// Percentile lines other than the 95th (`--percentile=99` prints the 99th instead).
    other_percentiles: Vec<&'a str>,
    fairness_events: Option<(f64, f64)>,
    fairness_time: Option<(f64, f64)>,
    series: Vec<(Line<'a>, SysbenchSecond)>,
}

/// Stores a figure once; a second line of the same kind is refused.
fn once<T>(slot: &mut Option<T>, v: T, line: Line, key: &str) -> Result<(), SysbenchParseError> {
    if slot.is_some() {
        return Err(line.impossible(format!("a second \"{key}:\" line: two runs' output in one")));
    }
    *slot = Some(v);
    Ok(())
}

/// Parses sysbench's whole stdout of a run (see the module documentation).
pub fn parse_output(text: &str) -> Result<SysbenchRun, SysbenchParseError> {
    let mut f = Found::default();
    let mut block = Block::Preamble;
    let mut fatal: Option<Line> = None;
    let mut line_error: Option<SysbenchParseError> = None;
    let lines: Vec<&str> = text.lines().collect();
    for (idx, raw) in lines.iter().enumerate() {
        let line = Line {
            no: idx + 1,
            text: raw.trim_end(),
        };
        if let Some((col, c)) = line
            .text
            .chars()
            .enumerate()
            .find(|(_, c)| *c == '\u{feff}' || (c.is_control() && *c != '\t'))
        {
            line_error.get_or_insert(SysbenchParseError::Impossible {
                line_no: line.no,
                problem: format!(
                    "character U+{:04X} at column {}: sysbench prints no such character, the output is damaged",
                    u32::from(c),
                    col + 1
                ),
                line: line.text.escape_debug().to_string(),
            });
            continue;
        }
        let t = line.text.trim_start();
        if t.starts_with("FATAL:") {
            fatal.get_or_insert(line);
            continue;
        }
        let last_unterminated = idx + 1 == lines.len() && !text.ends_with('\n');
        if let Err(e) = read_line(&mut f, &mut block, line, t, last_unterminated) {
            line_error.get_or_insert(e);
        }
    }
    if let Some(line) = fatal {
        return Err(SysbenchParseError::Fatal {
            line_no: line.no,
            line: line.text.to_string(),
        });
    }
    if let Some(e) = line_error {
        return Err(e);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(SysbenchParseError::CutLine {
            line_no: lines.len(),
            line: lines.last().map(|l| l.to_string()).unwrap_or_default(),
        });
    }
    assemble(f)
}

fn read_line<'a>(
    f: &mut Found<'a>,
    block: &mut Block,
    line: Line<'a>,
    t: &'a str,
    last_unterminated: bool,
) -> Result<(), SysbenchParseError> {
    if let Some(next) = [
        Block::Sql,
        Block::General,
        Block::Throughput,
        Block::Latency,
        Block::Fairness,
    ]
    .into_iter()
    .find(|b| t == b.header())
    {
        if let Some((_, first)) = f.blocks.iter().find(|(b, _)| *b == next) {
            return Err(line.impossible(format!(
                "a second \"{}\" block (the first is line {}): two summaries in one output",
                next.header(),
                first.no
            )));
        }
        f.blocks.push((next, line));
        *block = next;
        return Ok(());
    }
    if *block == Block::Preamble {
        return read_preamble_line(f, line, t, last_unterminated);
    }
    let Some((key, value)) = t.split_once(':') else {
        return Ok(());
    };
    let value = value.trim();
    match (*block, key) {
        (Block::Sql, "read") => once(
            &mut f.queries_read,
            line.count(value, "read queries")?,
            line,
            key,
        ),
        (Block::Sql, "write") => once(
            &mut f.queries_write,
            line.count(value, "write queries")?,
            line,
            key,
        ),
        (Block::Sql, "other") => once(
            &mut f.queries_other,
            line.count(value, "other queries")?,
            line,
            key,
        ),
        (Block::Sql, "total") => {
            let v = line.count(value, "total queries")?;
            once(&mut f.queries_total, (line, v), line, key)
        }
        (Block::Sql, "transactions") => {
            let (n, rate) = line.count_and_rate(value, "transactions")?;
            once(&mut f.transactions, (line, n, rate), line, key)
        }
        (Block::Sql, "queries") => {
            let (n, rate) = line.count_and_rate(value, "queries")?;
            once(&mut f.queries, (line, n, rate), line, key)
        }
        (Block::Sql, "ignored errors") => {
            let (n, rate) = line.count_and_rate(value, "ignored errors")?;
            once(&mut f.ignored_errors, (line, n, rate), line, key)
        }
        (Block::Sql, "reconnects") => {
            let (n, rate) = line.count_and_rate(value, "reconnects")?;
            once(&mut f.reconnects, (line, n, rate), line, key)
        }
        (Block::General, "total time") | (Block::Throughput, "time elapsed") => {
            let v = line.seconds(value, key)?;
            once(&mut f.total_time_s, v, line, key)
        }
        (Block::General | Block::Throughput, "total number of events") => {
            let v = line.count(value, "total number of events")?;
            once(&mut f.events, v, line, key)
        }
        (Block::Throughput, "events/s (eps)") => {
            let v = line.figure(value, "events per second")?;
            once(&mut f.events_per_s, (line, v), line, key)
        }
        (Block::Latency, "min") => once(
            &mut f.latency_min_ms,
            line.figure(value, "latency min")?,
            line,
            key,
        ),
        (Block::Latency, "avg") => once(
            &mut f.latency_avg_ms,
            line.figure(value, "latency avg")?,
            line,
            key,
        ),
        (Block::Latency, "max") => once(
            &mut f.latency_max_ms,
            line.figure(value, "latency max")?,
            line,
            key,
        ),
        (Block::Latency, "sum") => once(
            &mut f.latency_sum_ms,
            line.figure(value, "latency sum")?,
            line,
            key,
        ),
        (Block::Latency, "95th percentile") => {
            let v = line.figure(value, "latency 95th percentile")?;
            once(&mut f.latency_p95_ms, v, line, key)
        }
        (Block::Latency, k) if k.ends_with(" percentile") => {
            f.other_percentiles.push(k);
            Ok(())
        }
        (Block::Fairness, "events (avg/stddev)") => {
            let v = line.avg_stddev(value, "events per thread (avg/stddev)")?;
            once(&mut f.fairness_events, v, line, key)
        }
        (Block::Fairness, "execution time (avg/stddev)") => {
            let v = line.avg_stddev(value, "execution time per thread (avg/stddev)")?;
            once(&mut f.fairness_time, v, line, key)
        }
        _ => Ok(()),
    }
}

fn read_preamble_line<'a>(
    f: &mut Found<'a>,
    line: Line<'a>,
    t: &'a str,
    last_unterminated: bool,
) -> Result<(), SysbenchParseError> {
    if let Some(rest) = t.strip_prefix("sysbench ") {
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let version = rest.split_whitespace().next().unwrap_or(rest).to_string();
            if let Some((first, _)) = &f.banner {
                return Err(line.impossible(format!(
                    "a second banner (the first is line {}): two runs in one output",
                    first.no
                )));
            }
            f.banner = Some((line, version));
        }
        return Ok(());
    }
    if let Some(n) = t.strip_prefix("Number of threads:") {
        let n: u32 = line.count(n, "the number of threads")?;
        if n == 0 {
            return Err(line.impossible("the number of threads is 0".into()));
        }
        return once(&mut f.threads, n, line, "Number of threads");
    }
    if let Some(n) = t
        .strip_prefix("Report intermediate results every ")
        .and_then(|r| r.strip_suffix(" second(s)"))
    {
        let n = line.count(n, "the report interval")?;
        return once(
            &mut f.report_interval_s,
            n,
            line,
            "Report intermediate results",
        );
    }
    // A CSV line; at the very end of a cut output even its first field alone.
    if t.starts_with(|c: char| c.is_ascii_digit()) && (t.contains(',') || last_unterminated) {
        let second = csv_line(line, t, last_unterminated)?;
        // Times are printed rounded to whole seconds: a late report may share its second
        // with the next one, but time never goes back.
        if let Some((prev_line, prev)) = f.series.last() {
            if second.time_s < prev.time_s {
                return Err(line.impossible(format!(
                    "time {} s is before line {}'s {} s",
                    second.time_s, prev_line.no, prev.time_s
                )));
            }
        }
        f.series.push((line, second));
    }
    Ok(())
}

fn csv_line(
    line: Line,
    t: &str,
    last_unterminated: bool,
) -> Result<SysbenchSecond, SysbenchParseError> {
    let fields: Vec<&str> = t.split(',').collect();
    let cut = |problem: String| SysbenchParseError::CutCsvLine {
        line_no: line.no,
        problem,
        line: line.text.to_string(),
    };
    if fields.len() != CSV_FIELDS {
        return Err(cut(format!("{} of {CSV_FIELDS} fields", fields.len())));
    }
    if last_unterminated {
        return Err(cut("the output ends inside it, without a line end".into()));
    }
    let v = |i: usize, what: &str| line.figure(fields[i], what);
    Ok(SysbenchSecond {
        time_s: v(0, "the CSV time")?,
        threads: line.count(fields[1], "the CSV threads")?,
        tps: v(2, "the CSV tps")?,
        qps: v(3, "the CSV qps")?,
        reads_per_s: v(4, "the CSV reads per second")?,
        writes_per_s: v(5, "the CSV writes per second")?,
        other_per_s: v(6, "the CSV other queries per second")?,
        latency_p95_ms: v(7, "the CSV 95th percentile latency")?,
        errors_per_s: v(8, "the CSV errors per second")?,
        reconnects_per_s: v(9, "the CSV reconnects per second")?,
    })
}

/// A summary rate (`N (X per sec.)`, `events/s`) against its count over the run's time:
/// sysbench divides one by the other, so they agree to the printed decimals (half a unit of
/// the last one, times the run's time) and 1 %, which covers the slightly different clocks
/// of its counters. A rate above any real run is refused too.
fn check_rate(
    line: Line,
    count: u64,
    rate: f64,
    total_time_s: f64,
    decimals: i32,
    what: &str,
) -> Result<(), SysbenchParseError> {
    const MAX_PLAUSIBLE_RATE: f64 = 1e9;
    if rate > MAX_PLAUSIBLE_RATE {
        return Err(line.impossible(format!(
            "{what}: {rate} a second is beyond any sysbench run (more than {MAX_PLAUSIBLE_RATE:e})"
        )));
    }
    let slack = 0.5 * 10f64.powi(-decimals) * total_time_s + 0.01 * count as f64;
    if (rate * total_time_s - count as f64).abs() > slack {
        return Err(line.impossible(format!(
            "{what}: {rate} a second over the {total_time_s} s run is {:.0}, not the {count} counted \
             (allowed: {slack:.2})",
            rate * total_time_s
        )));
    }
    Ok(())
}

/// The banner's version against the summary's layout: 1.0.x prints "General statistics:",
/// 1.1 "Throughput:"; other versions are not ones this parser knows.
fn check_version_and_layout(
    banner: Line,
    version: &str,
    layout: SummaryLayout,
) -> Result<(), SysbenchParseError> {
    let known = if version.starts_with("1.0.") {
        SummaryLayout::V1_0
    } else if version.starts_with("1.1.") || version == "1.1" {
        SummaryLayout::V1_1
    } else {
        return Err(banner.impossible(format!(
            "sysbench {version} is not a version this parser knows (1.0.x and 1.1)"
        )));
    };
    if known != layout {
        return Err(banner.impossible(format!(
            "sysbench {version} prints the {} summary layout, but this output has the {} one",
            layout_name(known),
            layout_name(layout)
        )));
    }
    Ok(())
}

fn layout_name(layout: SummaryLayout) -> &'static str {
    match layout {
        SummaryLayout::V1_0 => "1.0 (\"General statistics:\")",
        SummaryLayout::V1_1 => "1.1 (\"Throughput:\")",
    }
}

fn missing(what: &str, block: Block) -> SysbenchParseError {
    SysbenchParseError::Missing(format!(
        "\"{what}:\" line in the \"{}\" block",
        block.header()
    ))
}

fn need<T>(v: Option<T>, what: &str, block: Block) -> Result<T, SysbenchParseError> {
    v.ok_or_else(|| missing(what, block))
}

fn assemble(f: Found) -> Result<SysbenchRun, SysbenchParseError> {
    let Some((banner_line, version)) = f.banner else {
        return Err(SysbenchParseError::NoBanner);
    };
    let has = |b: Block| f.blocks.iter().find(|(x, _)| *x == b).map(|(_, l)| *l);
    if has(Block::Sql).is_none() {
        return Err(SysbenchParseError::NoSummary {
            seconds: f.series.len(),
        });
    }
    let threads = f
        .threads
        .ok_or_else(|| SysbenchParseError::Missing("\"Number of threads:\" line".into()))?;
    let layout = match (has(Block::General), has(Block::Throughput)) {
        (Some(_), None) => SummaryLayout::V1_0,
        (None, Some(_)) => SummaryLayout::V1_1,
        (Some(g), Some(t)) => {
            return Err(t.impossible(format!(
                "a 1.1 \"Throughput:\" block beside the 1.0 \"General statistics:\" of line {}",
                g.no
            )))
        }
        (None, None) => {
            return Err(SysbenchParseError::Missing(
                "\"General statistics:\" (sysbench 1.0) or \"Throughput:\" (1.1) block".into(),
            ))
        }
    };
    let time_block = match layout {
        SummaryLayout::V1_0 => Block::General,
        SummaryLayout::V1_1 => Block::Throughput,
    };
    for b in [Block::Latency, Block::Fairness] {
        if has(b).is_none() {
            return Err(SysbenchParseError::Missing(format!(
                "\"{}\" block",
                b.header()
            )));
        }
    }
    let sql = Block::Sql;
    let queries_read = need(f.queries_read, "read", sql)?;
    let queries_write = need(f.queries_write, "write", sql)?;
    let queries_other = need(f.queries_other, "other", sql)?;
    let (total_line, queries_total) = need(f.queries_total, "total", sql)?;
    let (tx_line, transactions, tps) = need(f.transactions, "transactions", sql)?;
    let (q_line, queries, qps) = need(f.queries, "queries", sql)?;
    let (errors_line, ignored_errors, ignored_errors_per_s) =
        need(f.ignored_errors, "ignored errors", sql)?;
    let (reconnects_line, reconnects, reconnects_per_s) = need(f.reconnects, "reconnects", sql)?;
    let total_time_s = need(
        f.total_time_s,
        match layout {
            SummaryLayout::V1_0 => "total time",
            SummaryLayout::V1_1 => "time elapsed",
        },
        time_block,
    )?;
    let events = need(f.events, "total number of events", time_block)?;
    let events_per_s = match layout {
        SummaryLayout::V1_0 => None,
        SummaryLayout::V1_1 => Some(need(f.events_per_s, "events/s (eps)", time_block)?),
    };
    let eps_line = events_per_s.map(|(l, _)| l);
    let events_per_s = events_per_s.map(|(_, v)| v);
    let lat = Block::Latency;
    let latency_min_ms = need(f.latency_min_ms, "min", lat)?;
    let latency_avg_ms = need(f.latency_avg_ms, "avg", lat)?;
    let latency_max_ms = need(f.latency_max_ms, "max", lat)?;
    let latency_p95_ms = f.latency_p95_ms.ok_or_else(|| {
        let mut e = format!("\"95th percentile:\" line in the \"{}\" block", lat.header());
        if !f.other_percentiles.is_empty() {
            let _ = write!(
                e,
                " (it has the {} instead: the run was made with a --percentile other than sysbench's default 95)",
                f.other_percentiles.join(", ")
            );
        }
        SysbenchParseError::Missing(e)
    })?;
    let latency_sum_ms = need(f.latency_sum_ms, "sum", lat)?;
    let fair = Block::Fairness;
    let (fairness_events_avg, fairness_events_stddev) =
        need(f.fairness_events, "events (avg/stddev)", fair)?;
    let (fairness_time_avg_s, fairness_time_stddev_s) =
        need(f.fairness_time, "execution time (avg/stddev)", fair)?;

    // Figures that contradict each other: sysbench prints them from the same counters.
    if queries_read + queries_write + queries_other != queries_total {
        return Err(total_line.impossible(format!(
            "total queries {queries_total} is not read + write + other ({queries_read} + {queries_write} + {queries_other})"
        )));
    }
    if queries != queries_total {
        return Err(q_line.impossible(format!(
            "queries {queries} differ from the total queries performed {queries_total}"
        )));
    }
    if transactions != events {
        return Err(tx_line.impossible(format!(
            "transactions {transactions} differ from the total number of events {events}"
        )));
    }
    if transactions > 0 && !(latency_min_ms <= latency_avg_ms && latency_avg_ms <= latency_max_ms) {
        return Err(SysbenchParseError::Impossible {
            line_no: has(Block::Latency).map(|l| l.no).unwrap_or(0),
            problem: format!(
                "latency min {latency_min_ms} ≤ avg {latency_avg_ms} ≤ max {latency_max_ms} does not hold"
            ),
            line: Block::Latency.header().into(),
        });
    }
    check_version_and_layout(banner_line, &version, layout)?;
    for (line, count, rate, what) in [
        (tx_line, transactions, tps, "transactions"),
        (q_line, queries, qps, "queries"),
        (
            errors_line,
            ignored_errors,
            ignored_errors_per_s,
            "ignored errors",
        ),
        (reconnects_line, reconnects, reconnects_per_s, "reconnects"),
    ] {
        check_rate(line, count, rate, total_time_s, 2, what)?;
    }
    if let (Some(eps), Some(line)) = (events_per_s, eps_line) {
        check_rate(line, events, eps, total_time_s, 4, "events/s (eps)")?;
    }
    let clients = f64::from(threads);
    if transactions > 0 {
        // sysbench prints the average to two decimals: the sum may differ from
        // average × events by half a hundredth per event, and 1 % more.
        let expected = latency_avg_ms * events as f64;
        let slack = 0.005 * events as f64 + 0.01 * expected;
        if (latency_sum_ms - expected).abs() > slack {
            return Err(SysbenchParseError::Impossible {
                line_no: has(Block::Latency).map(|l| l.no).unwrap_or(0),
                problem: format!(
                    "latency sum {latency_sum_ms} ms is not avg {latency_avg_ms} ms × {events} events (allowed: {slack:.2} ms)"
                ),
                line: Block::Latency.header().into(),
            });
        }
    }
    let fairness_no = has(Block::Fairness).map(|l| l.no).unwrap_or(0);
    let fairness_wrong = |problem: String| SysbenchParseError::Impossible {
        line_no: fairness_no,
        problem,
        line: Block::Fairness.header().into(),
    };
    // Events per thread are printed to four decimals.
    if (fairness_events_avg * clients - events as f64).abs()
        > 0.0001 * clients + 0.01 * events as f64
    {
        return Err(fairness_wrong(format!(
            "{fairness_events_avg} events per thread × {threads} threads is not the {events} events"
        )));
    }
    if fairness_time_avg_s > total_time_s * 1.01 + 0.01 {
        return Err(fairness_wrong(format!(
            "{fairness_time_avg_s} s of execution per thread is longer than the {total_time_s} s run"
        )));
    }
    let mut series = Vec::with_capacity(f.series.len());
    for (line, s) in f.series {
        if s.threads > threads {
            return Err(line.impossible(format!(
                "{} threads running, more than the {threads} the run started",
                s.threads
            )));
        }
        // Intervals end on whole seconds (printed rounded); the last may round up.
        if s.time_s > total_time_s.ceil() + 1.0 {
            return Err(line.impossible(format!(
                "time {} s is after the run's end at {total_time_s} s",
                s.time_s
            )));
        }
        series.push(s);
    }
    if let Some(interval) = f.report_interval_s.filter(|i| *i > 0) {
        if series.is_empty() && total_time_s >= 2.0 * f64::from(interval) {
            return Err(SysbenchParseError::Missing(format!(
                "per-second CSV line in a {total_time_s} s run reporting every {interval} s (was it run with --report_csv=yes?)"
            )));
        }
    }
    Ok(SysbenchRun {
        version,
        banner: banner_line.text.trim().to_string(),
        layout,
        threads,
        report_interval_s: f.report_interval_s,
        queries_read,
        queries_write,
        queries_other,
        queries_total,
        transactions,
        tps,
        queries,
        qps,
        ignored_errors,
        ignored_errors_per_s,
        reconnects,
        reconnects_per_s,
        total_time_s,
        events,
        events_per_s,
        latency_min_ms,
        latency_avg_ms,
        latency_max_ms,
        latency_p95_ms,
        latency_sum_ms,
        fairness_events_avg,
        fairness_events_stddev,
        fairness_time_avg_s,
        fairness_time_stddev_s,
        series,
    })
}
