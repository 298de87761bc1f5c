//! The pgbench parsers against captured and composed outputs (fixtures/pgbench/README.md).

use std::path::PathBuf;

use pgappliance::pgbench::summary::OutputFormat;
use pgappliance::pgbench::{
    latency_from_logs, parse_init, parse_progress, parse_summary, SummaryError,
};

fn fixture(name: &str) -> String {
    let path = fixture_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pgbench")
        .join(name)
}

#[test]
fn v13_transactions_two_tps_lines_no_stddev() {
    let s = parse_summary(&fixture("v13-t-rw.txt")).expect("parses");
    assert_eq!(s.output_format, OutputFormat::V13);
    assert_eq!(s.client_version, None);
    assert_eq!((s.clients, s.threads), (5, 1));
    assert_eq!(s.transactions_per_client, Some(10000));
    assert_eq!(s.transactions_processed, 50000);
    assert_eq!(s.transactions_expected, Some(50000));
    assert_eq!(s.tps, 712.221039);
    assert_eq!(s.tps_including_connections, Some(712.165617));
    assert_eq!(s.latency_avg_ms, 7.021);
    assert_eq!(s.latency_stddev_ms, None);
    assert_eq!(s.initial_connection_ms, None);
    assert_eq!(s.failed_transactions, None);
}

#[test]
fn v13_duration_with_progress_and_statement_latencies() {
    let text = fixture("v13-T-progress-r.txt");
    let s = parse_summary(&text).expect("parses");
    assert_eq!(s.duration_s, Some(3.0));
    assert_eq!(s.transactions_expected, None);
    assert_eq!(s.latency_stddev_ms, Some(6.874));
    assert_eq!(s.query_mode.as_deref(), Some("prepared"));
    assert_eq!(s.statement_latencies.len(), 11);
    assert_eq!(s.statement_latencies[7].latency_ms, 6.804);
    assert!(s.statement_latencies[7]
        .command
        .starts_with("UPDATE pgbench_tellers"));
    assert_eq!(s.statement_latencies[7].failures, None);
    let p = parse_progress(&text).expect("progress");
    assert_eq!(p.len(), 3);
    assert_eq!(p[1].tps, 701.9);
    assert_eq!(p[1].failed, None);
}

#[test]
fn v13_incomplete_counts_are_an_error() {
    let err = parse_summary(&fixture("v13-incomplete.txt")).expect_err("incomplete");
    assert_eq!(
        err,
        SummaryError::Incomplete {
            processed: 9000,
            expected: 10000,
            failed: None
        }
    );
    assert!(err.to_string().contains("9000 of 10000"));
}

#[test]
fn v14_banner_with_distro_suffix_scenario_a_figures() {
    let s = parse_summary(&fixture("v14-banner-distro-altra.txt")).expect("parses");
    assert_eq!(s.output_format, OutputFormat::V14);
    assert_eq!(s.client_version.as_deref(), Some("14.5"));
    assert_eq!(
        s.client_version_full.as_deref(),
        Some("14.5 (Rocky 14.5-1PGDG.rhel8)")
    );
    assert_eq!(s.server_version, None);
    assert_eq!(s.clients, 1000);
    assert_eq!(s.threads, 10);
    assert_eq!(s.tps, 44132.846931);
    assert_eq!(s.latency_avg_ms, 22.659);
    assert_eq!(s.initial_connection_ms, Some(436.926));
    assert_eq!(s.tps_including_connections, None);
}

#[test]
fn v14_server_version_differs() {
    let s = parse_summary(&fixture("v14-server-differs.txt")).expect("parses");
    assert_eq!(s.client_version.as_deref(), Some("14.8"));
    assert_eq!(s.server_version.as_deref(), Some("13.11"));
    assert_eq!(s.statement_latencies.len(), 2);
    assert_eq!(s.statement_latencies[1].failures, None);
}

#[test]
fn v14_and_v15_aborted_runs_are_errors() {
    for name in ["v14-aborted.txt", "v15-aborted.txt"] {
        let err = parse_summary(&fixture(name)).expect_err(name);
        assert!(
            matches!(err, SummaryError::Aborted { .. }),
            "{name}: {err:?}"
        );
        assert!(err.to_string().contains("Run was aborted"), "{name}");
    }
}

#[test]
fn v15_captured_transactions() {
    let s = parse_summary(&fixture("v15-captured-t.txt")).expect("parses");
    assert_eq!(s.output_format, OutputFormat::V15Plus);
    assert_eq!(s.client_version.as_deref(), Some("15.18"));
    assert_eq!(s.max_tries, Some(1));
    assert_eq!(s.failed_transactions, Some(0));
    assert_eq!(s.transactions_processed, 800);
    assert_eq!(s.transactions_expected, Some(800));
    assert!(s.tps > 0.0);
    assert_eq!(s.latency_stddev_ms, None);
}

#[test]
fn v15_captured_select_only_with_failures_column() {
    let text = fixture("v15-captured-T-select-r.txt");
    let s = parse_summary(&text).expect("parses");
    assert_eq!(
        s.transaction_type.as_deref(),
        Some("<builtin: select only>")
    );
    assert!(s.latency_stddev_ms.is_some());
    assert_eq!(s.statement_latencies.len(), 2);
    assert_eq!(s.statement_latencies[1].failures, Some(0));
    assert!(s.statement_latencies[1]
        .command
        .starts_with("SELECT abalance"));
    let p = parse_progress(&text).expect("progress");
    assert!(p.len() >= 2);
    assert_eq!(p[0].failed, Some(0));
}

#[test]
fn v15_interleaved_server_log_lines_are_ignored() {
    let s = parse_summary(&fixture("v15-interleaved-server-log.txt")).expect("parses");
    assert_eq!(s.tps, 1215.774312);
    assert_eq!((s.clients, s.threads), (4, 2));
    assert_eq!(s.latency_stddev_ms, Some(1.011));
}

#[test]
fn v16_failed_transactions_explain_the_gap() {
    let s = parse_summary(&fixture("v16-failures.txt")).expect("complete with failures");
    assert_eq!(s.failed_transactions, Some(12));
    assert_eq!(s.transactions_processed, 3988);
    assert_eq!(s.client_version.as_deref(), Some("16.4"));
}

#[test]
fn v16_more_missing_than_failed_is_incomplete() {
    let text = fixture("v16-failures.txt").replace("3988/4000", "3900/4000");
    let err = parse_summary(&text).expect_err("incomplete");
    assert!(matches!(
        err,
        SummaryError::Incomplete {
            processed: 3900,
            ..
        }
    ));
}

#[test]
fn v17_distro_banner_with_server_and_failures_block() {
    let s = parse_summary(&fixture("v17-distro-server-r.txt")).expect("parses");
    assert_eq!(s.client_version.as_deref(), Some("17.2"));
    assert_eq!(
        s.client_version_full.as_deref(),
        Some("17.2 (Debian 17.2-1.pgdg120+1)")
    );
    assert_eq!(s.server_version.as_deref(), Some("16.6"));
    assert_eq!(s.statement_latencies.len(), 11);
    assert!(s.statement_latencies.iter().all(|l| l.failures == Some(0)));
    assert_eq!(s.tps, 25074.912001);
}

#[test]
fn not_a_summary_names_what_is_missing() {
    let err = parse_summary(&fixture("not-pgbench.txt")).expect_err("not pgbench");
    assert!(
        err.to_string().contains("not a complete pgbench summary"),
        "{err}"
    );
    let err = parse_summary("").expect_err("empty");
    assert!(matches!(err, SummaryError::Missing(_)));
}

#[test]
fn truncated_summary_is_rejected() {
    let text = fixture("v15-captured-t.txt");
    let cut: String = text.lines().take(9).collect::<Vec<_>>().join("\n");
    let err = parse_summary(&cut).expect_err("truncated");
    assert!(matches!(err, SummaryError::Missing(_)), "{err:?}");
}

#[test]
fn malformed_known_line_is_named() {
    let text = fixture("v13-t-rw.txt").replace("number of clients: 5", "number of clients: five");
    let err = parse_summary(&text).expect_err("malformed");
    assert!(err.to_string().contains("line 5"), "{err}");
}

#[test]
fn init_breakdown_scenario_a() {
    let b = parse_init(&fixture("init-v14-altra-scale10000.txt")).expect("parses");
    assert_eq!(b.total_s, 1568.00);
    assert_eq!(b.phase("client-side generate"), Some(742.72));
    assert_eq!(b.phase("primary keys"), Some(712.03));
    assert_eq!(b.phases.len(), 5);
}

#[test]
fn init_breakdown_captured_client_and_server_side() {
    let c = parse_init(&fixture("init-v15-client.txt")).expect("client");
    assert!(c.phase("client-side generate").is_some());
    let s = parse_init(&fixture("init-v15-server.txt")).expect("server");
    assert!(s.phase("server-side generate").is_some());
    assert!(s.phase("client-side generate").is_none());
}

#[test]
fn init_interrupted_is_an_error() {
    assert!(parse_init(&fixture("init-v13-interrupted.txt")).is_err());
}

#[test]
fn progress_handles_nan_and_lag() {
    let p = parse_progress(&fixture("progress-v13.txt")).expect("progress");
    assert_eq!(p.len(), 3);
    assert_eq!(p[0].elapsed_s, 60.0);
    assert_eq!(p[1].tps, 0.0);
    assert_eq!(p[1].latency_ms, None);
    assert_eq!(p[2].lag_ms, Some(0.412));
}

#[test]
fn transaction_log_percentiles_match_a_direct_computation() {
    let path = fixture_path("txlog-v15-captured.log");
    let stats = latency_from_logs(std::slice::from_ref(&path), false, 15).expect("parses");
    let mut lat: Vec<u64> = fixture("txlog-v15-captured.log")
        .lines()
        .map(|l| {
            l.split_whitespace()
                .nth(2)
                .unwrap_or("0")
                .parse()
                .unwrap_or(0)
        })
        .collect();
    lat.sort_unstable();
    assert_eq!(stats.transactions, lat.len() as u64);
    let exact_max = *lat.last().unwrap_or(&0) as f64 / 1000.0;
    let max = stats.max_ms.unwrap_or(0.0);
    assert!(
        (max - exact_max).abs() / exact_max < 0.001,
        "{max} vs {exact_max}"
    );
    let exact_p50 = lat[(lat.len() - 1) / 2] as f64 / 1000.0;
    let p50 = stats.p50_ms.unwrap_or(0.0);
    assert!(
        (p50 - exact_p50).abs() / exact_p50 < 0.01,
        "{p50} vs {exact_p50}"
    );
    let summary = parse_summary(&fixture("v15-captured-txlog-summary.txt")).expect("summary");
    assert_eq!(stats.transactions, summary.transactions_processed);
}

#[test]
fn transaction_log_counts_failed_and_skipped() {
    let path = fixture_path("txlog-v16-failed-skipped.log");
    let stats = latency_from_logs(&[path], false, 16).expect("parses");
    assert_eq!(stats.transactions, 3);
    assert_eq!(stats.failed, 2);
    assert_eq!(stats.skipped, 1);
    let max = stats.max_ms.unwrap_or(0.0);
    assert!((max - 2.5).abs() < 0.0025, "{max}");
}

#[test]
fn aggregate_log_gives_count_mean_and_extremes() {
    let path = fixture_path("aggregate-v15-captured.log");
    let text = fixture("aggregate-v15-captured.log");
    let stats = latency_from_logs(std::slice::from_ref(&path), true, 15).expect("parses");
    let count: u64 = text
        .lines()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .unwrap_or("0")
                .parse::<u64>()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(stats.transactions, count);
    assert!(stats.p99_ms.is_none());
    assert!(stats.max_ms.unwrap_or(0.0) >= stats.mean_ms.unwrap_or(f64::MAX));
}

#[test]
fn malformed_transaction_log_names_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("log.1");
    std::fs::write(&f, "0 1 100 0 1 2\nnonsense\n").expect("write");
    let err = latency_from_logs(&[f], false, 15).expect_err("malformed");
    assert!(err.to_string().contains("log.1:2"), "{err}");
}

/// The captured 15 summary with one line replaced (composed here, from the captured file).
fn captured_with(line: &str, replacement: &str) -> String {
    let text = fixture("v15-captured-t.txt");
    let found = text.lines().filter(|l| l.starts_with(line)).count();
    assert_eq!(found, 1, "one \"{line}\" line in the captured fixture");
    text.lines()
        .map(|l| if l.starts_with(line) { replacement } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn impossible_figures_are_refused_naming_the_line() {
    let text = fixture("v15-captured-t.txt");
    let line_of = |prefix: &str| {
        text.lines()
            .position(|l| l.starts_with(prefix))
            .map(|i| i + 1)
            .expect("line in fixture")
    };
    // (line replaced, its replacement, words of the error, the line the error names)
    let thr = "number of threads: ";
    let processed = "number of transactions actually processed: ";
    let cases = [
        (
            "tps = ",
            "tps = 1e400 (without initial connection time)",
            "not a finite",
            "tps = ",
        ),
        (
            "tps = ",
            "tps = inf (without initial connection time)",
            "not a finite",
            "tps = ",
        ),
        (
            "tps = ",
            "tps = NaN (without initial connection time)",
            "not a finite",
            "tps = ",
        ),
        (
            "tps = ",
            "tps = -1542.8 (without initial connection time)",
            "negative",
            "tps = ",
        ),
        (
            "tps = ",
            "tps = -0 (without initial connection time)",
            "negative",
            "tps = ",
        ),
        (
            "latency average = ",
            "latency average = -0.000 ms",
            "negative",
            "latency",
        ),
        (
            "initial connection time = ",
            "initial connection time = -0.0 ms",
            "negative",
            "initial",
        ),
        (
            "latency average = ",
            "latency average = inf ms",
            "not a finite",
            "latency",
        ),
        (
            "latency average = ",
            "latency average = -2.5 ms",
            "negative",
            "latency",
        ),
        (
            "initial connection time = ",
            "initial connection time = NaN ms",
            "not a finite",
            "initial",
        ),
        (thr, "number of threads: 0", "is 0", thr),
        (
            "number of clients: ",
            "number of clients: 0",
            "is 0",
            "number of clients: ",
        ),
        (thr, "number of threads: 5", "5 threads for 4 clients", thr),
        (
            "scaling factor: ",
            "scaling factor: 0",
            "is 0",
            "scaling factor: ",
        ),
        (
            processed,
            "number of transactions actually processed: 900/800",
            "900 processed of 800 expected",
            processed,
        ),
        (
            processed,
            "number of transactions actually processed: 900/900",
            "not 4 clients × 200 per client",
            processed,
        ),
        (
            "number of transactions per client: ",
            "number of transactions per client: 0",
            "is 0",
            "number of transactions per client: ",
        ),
    ];
    for (prefix, replacement, words, at) in cases {
        let err = parse_summary(&captured_with(prefix, replacement))
            .expect_err(replacement)
            .to_string();
        assert!(err.contains(words), "{replacement}: {err}");
        let at = line_of(at);
        assert!(
            err.starts_with(&format!("line {at}:")),
            "{replacement}: {err}"
        );
    }
    // A -T run (no expected count) claiming throughput without a transaction processed.
    let none_processed = captured_with(processed, "number of transactions actually processed: 0")
        .replace("number of transactions per client: 200", "duration: 10 s");
    let err = parse_summary(&none_processed)
        .expect_err("tps with no transaction processed")
        .to_string();
    assert!(
        err.starts_with(&format!("line {}:", line_of("tps = ")))
            && err.contains("no transaction processed"),
        "{err}"
    );
    let failed = captured_with(
        "number of failed transactions: ",
        "number of failed transactions: 1 (0.125%)",
    );
    let err = parse_summary(&failed).expect_err("800 processed and 1 failed of 800");
    assert!(err.to_string().contains("and 1 failed"), "{err}");
}

#[test]
fn a_second_summary_is_refused_not_merged() {
    let one = fixture("v15-captured-t.txt");
    let twice = format!("{one}\n{}", one.replace("1542.825956", "9999.0"));
    let err = parse_summary(&twice)
        .expect_err("two summaries")
        .to_string();
    assert!(err.contains("two summaries in one output"), "{err}");
    let first = one.lines().count() + 1;
    assert!(err.starts_with(&format!("line {}:", first + 1)), "{err}");
}

#[test]
fn impossible_progress_lines_are_refused_naming_the_line() {
    let good = "progress: 1.0 s, 1201.0 tps, lat 3.321 ms stddev 1.002, 0 failed\n";
    for bad in [
        "progress: 2.0 s, -5.0 tps, lat 3.3 ms stddev 1.0",
        "progress: 2.0 s, inf tps, lat 3.3 ms stddev 1.0",
        "progress: 2.0 s, 10.0 tps, lat -3.3 ms stddev 1.0",
        "progress: 2.0 s, 10.0 tps, lat 3.3 ms stddev inf",
        "progress: 2.0 s, 10.0 tps, lat 3.3 ms, lag 1e400 ms",
        "progress: 0.5 s, 10.0 tps, lat 3.3 ms stddev 1.0",
        "progress: 2.0 s, 10.0 tps, lat 3.3 ms stddev 1.0, -1 failed",
    ] {
        let err = parse_progress(&format!("{good}{bad}\n")).expect_err(bad);
        assert_eq!(err.line_no, 2, "{bad}: {err}");
    }
    // pgbench prints NaN latencies for an interval without a finished transaction.
    let idle = parse_progress("progress: 1.0 s, 0.0 tps, lat NaN ms stddev NaN\n").expect("idle");
    assert_eq!(idle[0].latency_ms, None);
}

#[test]
fn impossible_init_and_aggregate_figures_are_refused() {
    for bad in [
        "done in inf s (drop tables 0.00 s, create tables 0.01 s).",
        "done in 1.00 s (drop tables -0.50 s, create tables 0.01 s).",
        "done in 1.00 s (drop tables NaN s, create tables 0.01 s).",
        "done in 1.00 s (vacuum 0.10 s, vacuum 0.20 s).",
    ] {
        assert!(parse_init(bad).is_err(), "{bad}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for bad in [
        "1795988045 -380 557163 921375609 767 6164 0 0 0 0 0 0 0 0 0",
        "1795988045 380 inf 921375609 767 6164 0 0 0 0 0 0 0 0 0",
        "1795988045 380 557163 921375609 7670 6164 0 0 0 0 0 0 0 0 0",
        "1795988045 380 557163 921375609 767 6164 0 0 0 0 -1 0 0 0 0",
        "1795988045 380 557163 921375609 767 NaN 0 0 0 0 0 0 0 0 0",
    ] {
        let f = dir.path().join("agg.1");
        std::fs::write(&f, format!("{bad}\n")).expect("write");
        let err = latency_from_logs(&[f], true, 15).expect_err(bad);
        assert!(err.to_string().contains("agg.1:1"), "{bad}: {err}");
    }
}

#[test]
fn an_impossible_statement_latency_is_refused_naming_the_line() {
    let text = fixture("v17-distro-server-r.txt");
    let at = text
        .lines()
        .position(|l| l.contains("\\set aid"))
        .expect("statement line")
        + 1;
    for bad in ["inf", "-0.001", "NaN"] {
        let broken = text.replacen(
            "         0.001           0  \\set aid",
            &format!("         {bad}           0  \\set aid"),
            1,
        );
        assert_ne!(broken, text);
        let err = parse_summary(&broken).expect_err(bad).to_string();
        assert!(err.starts_with(&format!("line {at}:")), "{bad}: {err}");
        assert!(err.contains("statement latency"), "{bad}: {err}");
    }
}

#[test]
fn v18_duration_with_progress_and_statement_latencies() {
    let text = fixture("v18-T-progress-r.txt");
    let s = parse_summary(&text).expect("parses");
    assert_eq!(s.output_format, OutputFormat::V15Plus);
    assert_eq!(s.client_version.as_deref(), Some("18.1"));
    assert_eq!(s.duration_s, Some(10.0));
    assert_eq!(s.transactions_processed, 249570);
    assert_eq!(s.failed_transactions, Some(0));
    assert_eq!(s.latency_stddev_ms, Some(0.801));
    assert_eq!(s.tps, 24957.013210);
    assert_eq!(s.statement_latencies.len(), 11);
    assert!(s.statement_latencies.iter().all(|l| l.failures == Some(0)));
    let p = parse_progress(&text).expect("progress");
    assert_eq!(p.len(), 2);
    assert_eq!(p[1].failed, Some(0));
}

#[test]
fn v18_per_script_counts_are_not_taken_for_the_run_s() {
    // 18 prints each script's processed and failed counts (` - number of …`) and each
    // script's statement block behind ` - `.
    let s = parse_summary(&fixture("v18-multiple-scripts-r.txt")).expect("parses");
    assert_eq!(s.transaction_type.as_deref(), Some("multiple scripts"));
    assert_eq!(s.transactions_processed, 4000);
    assert_eq!(s.transactions_expected, Some(4000));
    assert_eq!(s.failed_transactions, Some(0));
    assert_eq!(s.latency_avg_ms, 0.512);
    assert_eq!(s.latency_stddev_ms, None);
    assert_eq!(s.tps, 7812.5);
    assert_eq!(s.statement_latencies.len(), 11);
    assert_eq!(s.statement_latencies[10].latency_ms, 0.124);
}

#[test]
fn v19_other_failures_and_the_latency_including_failures() {
    let s = parse_summary(&fixture("v19-failures-detailed.txt")).expect("parses");
    assert_eq!(s.client_version.as_deref(), Some("19.1"));
    assert_eq!(s.transactions_processed, 3988);
    assert_eq!(s.failed_transactions, Some(12));
    assert_eq!(s.latency_avg_ms, 4.021);
    assert_eq!(s.tps, 1983.586173);
}

#[test]
fn v19_logs_count_other_failures() {
    let stats = latency_from_logs(&[fixture_path("txlog-v19-other.log")], false, 19)
        .expect("transaction log");
    assert_eq!((stats.transactions, stats.failed), (3, 2));
    let stats = latency_from_logs(
        &[fixture_path("aggregate-v19-failures-detailed.log")],
        true,
        19,
    )
    .expect("aggregate log");
    assert_eq!(stats.transactions, 380 + 942);
    assert_eq!(stats.failed, 1 + 4 + 1 + 2);
}

/// A fixture with one line replaced (composed here); the replaced line must exist once.
fn fixture_with(name: &str, line: &str, replacement: &str) -> String {
    let text = fixture(name);
    assert_eq!(
        text.lines().filter(|l| l.starts_with(line)).count(),
        1,
        "one \"{line}\" line in {name}"
    );
    text.lines()
        .map(|l| if l.starts_with(line) { replacement } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn figures_the_other_lines_contradict_are_refused_naming_the_line() {
    let line_no = |text: &str, prefix: &str| {
        text.lines()
            .position(|l| l.starts_with(prefix))
            .map(|i| i + 1)
            .expect("line")
    };
    // (fixture, line replaced, replacement, words of the error)
    let cases = [
        // A -t run: 4 clients at 2.593 ms are 1542.8 tps; "154" is the line cut short.
        ("v15-captured-t.txt", "tps = ", "tps = 154", "clients busy"),
        (
            "v15-captured-t.txt",
            "tps = ",
            "tps = 1e308 (without initial connection time)",
            "beyond any pgbench run",
        ),
        // A -T run with measured latency: 54187 transactions in 3 s are not 1808.9 tps.
        (
            "v15-captured-T-select-r.txt",
            "tps = ",
            "tps = 1808.909313 (without initial connection time)",
            "not the 3 s run",
        ),
        (
            "v15-captured-T-select-r.txt",
            "tps = ",
            "tps = 0.000000 (without initial connection time)",
            "tps is 0 with 54187",
        ),
        // 13's excluding figure can never be below its including one.
        (
            "v13-t-rw.txt",
            "tps = 712.221039",
            "tps = 71.221039 (excluding connections establishing)",
            "below tps including",
        ),
    ];
    for (name, prefix, replacement, words) in cases {
        let text = fixture_with(name, prefix, replacement);
        let err = parse_summary(&text).expect_err(replacement).to_string();
        assert!(err.contains(words), "{replacement}: {err}");
        let at = line_no(&text, replacement);
        assert!(
            err.starts_with(&format!("line {at}:")),
            "{replacement}: {err}"
        );
    }
}

#[test]
fn damaged_characters_unknown_versions_and_mixed_formats_are_refused() {
    // A BOM before the banner used to hide the banner (and with it the client version).
    let bom = format!("\u{feff}{}", fixture("v15-captured-t.txt"));
    let err = parse_summary(&bom).expect_err("BOM").to_string();
    assert!(
        err.starts_with("line 1:") && err.contains("U+FEFF"),
        "{err}"
    );
    // A NUL inside "latency stddev" used to drop the line and its figure.
    let nul = fixture("v15-captured-T-select-r.txt").replace("latency stddev", "latency\0stddev");
    let at = nul
        .lines()
        .position(|l| l.contains('\0'))
        .expect("NUL line")
        + 1;
    let err = parse_summary(&nul).expect_err("NUL").to_string();
    assert!(
        err.starts_with(&format!("line {at}:")) && err.contains("U+0000"),
        "{err}"
    );
    let cases = [
        // An unknown major version.
        ("pgbench (", "pgbench (99.0)", "pgbench 99 is not a version"),
        ("pgbench (", "pgbench (13.4)", "pgbench 13 is not a version"),
        // Past the newest supported major (plan::PG_MAJORS ends at 19).
        (
            "pgbench (",
            "pgbench (20.0)",
            "(13 to 19; 13 prints no banner)",
        ),
        // A 14 banner over 15's failed-transactions line.
        (
            "pgbench (",
            "pgbench (14.8)",
            "prints no such line: it arrived in 15",
        ),
    ];
    for (prefix, replacement, words) in cases {
        let err = parse_summary(&fixture_with("v15-captured-t.txt", prefix, replacement))
            .expect_err(replacement)
            .to_string();
        assert!(err.contains(words), "{replacement}: {err}");
    }
    // A 15 banner without the failed-transactions line 15 always prints.
    let no_failed = fixture("v15-captured-t.txt")
        .lines()
        .filter(|l| !l.starts_with("number of failed transactions"))
        .collect::<Vec<_>>()
        .join("\n");
    let err = parse_summary(&no_failed).expect_err("15 without failures line");
    assert!(
        err.to_string().starts_with("line 1:") && err.to_string().contains("always prints"),
        "{err}"
    );
    // 13's tps lines in a 15 summary: two versions mixed.
    let mixed = fixture("v15-captured-t.txt").replace(
        "tps = 1542.825956 (without initial connection time)",
        "tps = 1542.825956 (without initial connection time)\n\
         tps = 1542.0 (including connections establishing)",
    );
    let err = parse_summary(&mixed).expect_err("mixed").to_string();
    assert!(err.contains("two versions' summaries mixed"), "{err}");
    // 13's summary with a 14+ connection-time line.
    let mixed13 = fixture("v13-t-rw.txt").replace(
        "latency average = 7.021 ms",
        "latency average = 7.021 ms\ninitial connection time = 3.100 ms",
    );
    let err = parse_summary(&mixed13).expect_err("mixed 13").to_string();
    assert!(err.contains("two versions' summaries mixed"), "{err}");
    // 13's summary with 15's failed-transactions line.
    let mixed15 = fixture("v13-t-rw.txt").replace(
        "latency average = 7.021 ms",
        "number of failed transactions: 0 (0.000%)\nlatency average = 7.021 ms",
    );
    let err = parse_summary(&mixed15)
        .expect_err("mixed 13/15")
        .to_string();
    assert!(err.contains("two versions' summaries mixed"), "{err}");
    // 13 with only one of its two tps lines.
    let one_tps = fixture("v13-t-rw.txt")
        .lines()
        .filter(|l| !l.contains("including connections establishing"))
        .collect::<Vec<_>>()
        .join("\n");
    let err = parse_summary(&one_tps).expect_err("one 13 tps line");
    assert!(
        err.to_string()
            .contains("including connections establishing"),
        "{err}"
    );
}

#[test]
fn init_lines_cut_short_repeated_or_not_adding_up_are_refused() {
    let good = fixture("init-v14-altra-scale10000.txt");
    let done = good
        .lines()
        .find(|l| l.starts_with("done in"))
        .expect("done line")
        .to_string();
    let cut_after_total = good.replace(&done, "done in 1568.00 s");
    let cut_in_phases = good.replace(
        &done,
        "done in 1568.00 s (drop tables 0.00 s, create tables 0.03 s, client-side generate 742.72 s",
    );
    let twice = format!("{good}\n{done}\n");
    let not_adding_up = good.replace("vacuum 113.22 s", "vacuum 13.22 s");
    let unknown_phase = good.replace("vacuum 113.22 s", "vacuuum 113.22 s");
    for (text, words) in [
        (cut_after_total, "cut short"),
        (cut_in_phases, "cut short"),
        (twice, "a second \"done in\" line"),
        (
            not_adding_up,
            "add up to 1468.00 s, not the total 1568.00 s",
        ),
        (unknown_phase, "not a phase"),
    ] {
        let err = parse_init(&text).expect_err(words).to_string();
        assert!(err.contains(words), "{words}: {err}");
    }
}
