//! The sysbench output parser against captured and composed outputs
//! (fixtures/sysbench/README.md).

use std::path::PathBuf;

use pgappliance::sysbench::{parse_output, SummaryLayout, SysbenchParseError};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysbench")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const CAPTURED: &str = "run-1.0.20-t2.txt";
const COMPOSED_1_1: &str = "run-1.1-t16-scenario-b-composed.txt";

#[test]
fn captured_1_0_20_run_every_figure() {
    let r = parse_output(&fixture(CAPTURED)).expect("parses");
    assert_eq!(r.version, "1.0.20");
    assert_eq!(
        r.banner,
        "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)"
    );
    assert_eq!(r.layout, SummaryLayout::V1_0);
    assert_eq!(r.threads, 2);
    assert_eq!(r.report_interval_s, Some(1));
    assert_eq!(
        (
            r.queries_read,
            r.queries_write,
            r.queries_other,
            r.queries_total
        ),
        (23956, 24816, 3734, 52506)
    );
    assert_eq!((r.transactions, r.tps), (1865, 185.30));
    assert_eq!((r.queries, r.qps), (52506, 5216.91));
    assert_eq!((r.ignored_errors, r.ignored_errors_per_s), (6, 0.60));
    assert_eq!((r.reconnects, r.reconnects_per_s), (0, 0.0));
    assert_eq!(
        (r.total_time_s, r.events, r.events_per_s),
        (10.0639, 1865, None)
    );
    assert_eq!(
        (
            r.latency_min_ms,
            r.latency_avg_ms,
            r.latency_max_ms,
            r.latency_p95_ms,
            r.latency_sum_ms
        ),
        (0.26, 10.76, 101.14, 30.81, 20076.20)
    );
    assert_eq!(
        (r.fairness_events_avg, r.fairness_events_stddev),
        (932.5, 5.5)
    );
    assert_eq!(
        (r.fairness_time_avg_s, r.fairness_time_stddev_s),
        (10.0381, 0.02)
    );

    assert_eq!(r.series.len(), 10, "one CSV line a second for 10 s");
    let first = &r.series[0];
    assert_eq!((first.time_s, first.threads), (1.0, 2));
    assert_eq!((first.tps, first.qps), (167.84, 4739.35));
    assert_eq!(
        (first.reads_per_s, first.writes_per_s, first.other_per_s),
        (2165.88, 2231.81, 341.67)
    );
    assert_eq!(first.latency_p95_ms, 30.81);
    assert_eq!((first.errors_per_s, first.reconnects_per_s), (1.0, 0.0));
    assert_eq!(r.series[9].time_s, 10.0);
    assert_eq!(r.series[9].errors_per_s, 0.98);

    let tps = r.tps_series();
    assert_eq!(tps.len(), 10);
    assert_eq!((tps[4].elapsed_s, tps[4].tps), (5.0, 165.11));
    assert!(tps
        .iter()
        .all(|s| s.latency_ms.is_none() && s.failed.is_none()));

    let json = serde_json::to_string(&r).expect("serialises");
    assert_eq!(
        serde_json::from_str::<pgappliance::sysbench::SysbenchRun>(&json).expect("reads back"),
        r
    );
}

#[test]
fn composed_1_1_throughput_layout_with_scenario_b_figures() {
    let r = parse_output(&fixture(COMPOSED_1_1)).expect("parses");
    assert_eq!(r.layout, SummaryLayout::V1_1);
    assert_eq!(r.version, "1.1.0-bbee5d5");
    assert_eq!(r.threads, 16);
    assert_eq!((r.transactions, r.tps), (16_782_655, 4661.83));
    assert_eq!(r.events_per_s, Some(4661.8346));
    assert_eq!((r.total_time_s, r.events), (3600.0108, 16_782_655));
    assert_eq!(r.latency_p95_ms, 8.13);
    assert_eq!((r.ignored_errors, r.ignored_errors_per_s), (72_980, 20.27));
    assert_eq!(r.reconnects, 0);
    assert_eq!(r.series.len(), 10);
    assert_eq!(r.series.last().map(|s| s.time_s), Some(3600.0));
}

#[test]
fn captured_run_cut_short_by_the_server_stopping_has_no_summary() {
    let err = parse_output(&fixture("aborted-1.0.20-server-stopped.txt")).expect_err("aborted");
    assert_eq!(err, SysbenchParseError::NoSummary { seconds: 3 });
    let msg = err.to_string();
    assert!(
        msg.contains("no final summary") && msg.contains("SQL statistics:"),
        "{msg}"
    );
}

#[test]
fn captured_fatal_lines_are_an_error_naming_the_first() {
    let err = parse_output(&fixture("refused-1.0.20-no-server.txt")).expect_err("fatal");
    let SysbenchParseError::Fatal { line_no, line } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*line_no, 11);
    assert!(
        line.starts_with("FATAL: Connection to database failed"),
        "{line}"
    );
    // A FATAL line wins even when a whole summary follows it.
    let text = fixture(CAPTURED).replacen(
        "Threads started!\n",
        "Threads started!\nFATAL: `thread_run' function failed: ./tpcc_run.lua:260: SQL error\n",
        1,
    );
    let err = parse_output(&text).expect_err("fatal");
    assert!(err.to_string().contains("thread_run"), "{err}");
}

#[test]
fn a_csv_line_cut_off_is_an_error_naming_it() {
    let text = fixture(CAPTURED);
    // The output ends inside the fifth CSV line.
    let at = text.find("5,2,165.11,4643").expect("fifth line") + "5,2,165.11,4643".len();
    let err = parse_output(&text[..at]).expect_err("cut");
    assert!(
        matches!(&err, SysbenchParseError::CutCsvLine { line, .. } if line == "5,2,165.11,4643"),
        "{err:?}"
    );
    assert!(err.to_string().contains("4 of 10 fields"), "{err}");
    // Cut inside the last field: ten fields, but no line end.
    let at = text.find("5,2,165.11,").expect("fifth line");
    let end = at + text[at..].find('\n').expect("line end") - 1;
    let err = parse_output(&text[..end]).expect_err("cut");
    assert!(err.to_string().contains("without a line end"), "{err}");
    // A line cut and the rest of the output after it.
    let cut = text.replacen(
        "5,2,165.11,4643.81,2121.90,2191.68,330.23,28.16,1.97,0.00\n",
        "5,2,165.11,4643.81,21\n",
        1,
    );
    let err = parse_output(&cut).expect_err("cut");
    assert!(err.to_string().contains("5 of 10 fields"), "{err}");
    // Cut right after the first digit of a line.
    let at = text.find("5,2,165.11,").expect("fifth line") + 1;
    let err = parse_output(&text[..at]).expect_err("cut");
    assert!(err.to_string().contains("1 of 10 fields"), "{err}");
}

#[test]
fn every_cut_of_the_captured_output_before_its_last_line_is_refused() {
    let text = fixture(CAPTURED);
    let last = "execution time (avg/stddev):   10.0381/0.02\n";
    let complete = text.find(last).expect("last line") + last.len();
    for end in 0..text.len() {
        let cut = &text[..end];
        match parse_output(cut) {
            Ok(_) => assert!(end >= complete, "cut at byte {end} parsed"),
            Err(e) => assert!(end < complete, "cut at byte {end}: {e}"),
        }
    }
    let err = parse_output(&text[..complete - 2]).expect_err("cut in the last line");
    assert!(
        matches!(&err, SysbenchParseError::CutLine { line, .. } if line.ends_with("10.0381/0.0")),
        "{err:?}"
    );
}

#[test]
fn a_late_report_sharing_its_rounded_second_is_kept() {
    // sysbench prints the time rounded to whole seconds (`%.0f`): a report half a second
    // late and the next one on time print the same second.
    let text = fixture(CAPTURED).replacen("4,2,191.94", "3,2,191.94", 1);
    let r = parse_output(&text).expect("parses");
    assert_eq!(r.series.len(), 10);
    assert_eq!((r.series[2].time_s, r.series[3].time_s), (3.0, 3.0));
}

/// The summary's lines, each of which the parser needs.
const NEEDED: &[&str] = &[
    "SQL statistics:",
    "read:",
    "write:",
    "other:",
    "total:",
    "transactions:",
    "queries:",
    "ignored errors:",
    "reconnects:",
    "General statistics:",
    "total time:",
    "total number of events:",
    "Latency (ms):",
    "min:",
    "avg:",
    "max:",
    "95th percentile:",
    "sum:",
    "Threads fairness:",
    "events (avg/stddev):",
    "execution time (avg/stddev):",
    "Number of threads:",
];

fn without_line(text: &str, start: &str) -> String {
    let mut found = false;
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            let drop = !found && l.trim_start().starts_with(start);
            found |= drop;
            !drop
        })
        .collect();
    assert!(found, "the fixture has a \"{start}\" line");
    kept.join("\n") + "\n"
}

#[test]
fn every_summary_line_is_needed_and_named_when_missing() {
    let text = fixture(CAPTURED);
    for key in NEEDED {
        let err = parse_output(&without_line(&text, key)).expect_err(key);
        let msg = err.to_string();
        let named = key.trim_end_matches(':');
        assert!(msg.contains(named), "without \"{key}\": {msg}");
    }
    let text = fixture(COMPOSED_1_1);
    for key in ["Throughput:", "events/s (eps):", "time elapsed:"] {
        let err = parse_output(&without_line(&text, key)).expect_err(key);
        assert!(err.to_string().contains(key.trim_end_matches(':')), "{err}");
    }
}

#[test]
fn the_whole_latency_block_missing_is_named() {
    let text = fixture(CAPTURED);
    let start = text.find("Latency (ms):").expect("latency");
    let end = text.find("Threads fairness:").expect("fairness");
    let cut = format!("{}{}", &text[..start], &text[end..]);
    let err = parse_output(&cut).expect_err("no latency");
    assert_eq!(
        err,
        SysbenchParseError::Missing("\"Latency (ms):\" block".into())
    );
}

#[test]
fn another_percentile_than_the_95th_is_named() {
    let text = fixture(CAPTURED).replace("95th percentile:", "99th percentile:");
    let err = parse_output(&text).expect_err("p99");
    let msg = err.to_string();
    assert!(
        msg.contains("95th percentile") && msg.contains("99th percentile"),
        "{msg}"
    );
}

#[test]
fn figures_that_contradict_each_other_are_refused() {
    let text = fixture(CAPTURED);
    for (from, to, words) in [
        (
            "total:                           52506",
            "total:                           52507",
            "not read + write + other",
        ),
        (
            "total number of events:              1865",
            "total number of events:              1866",
            "differ from the total number of events",
        ),
        (
            "queries:                             52506",
            "queries:                             52505",
            "differ from the total queries",
        ),
        ("3,2,194.00", "3,3,194.00", "more than the 2"),
        ("3,2,194.00", "1,2,194.00", "is before line"),
        ("3,2,194.00,5422.00", "3,2,NaN,5422.00", "the CSV tps"),
        ("3,2,194.00,5422.00", "3,2,-194.00,5422.00", "the CSV tps"),
        ("10,2,220.05", "99,2,220.05", "after the run's end"),
        (
            "min:                                    0.26",
            "min:                                    20.26",
            "does not hold",
        ),
        ("(185.30 per sec.)", "(185.30 per second)", "transactions"),
        (
            "total time:                          10.0639s",
            "total time:                          10.0639",
            "total time",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let err = parse_output(&text.replacen(from, to, 1)).expect_err(to);
        assert!(err.to_string().contains(words), "{to}: {err}");
    }
}

#[test]
fn two_outputs_in_one_or_mixed_layouts_are_refused() {
    let run = fixture(CAPTURED);
    let err = parse_output(&format!("{run}{run}")).expect_err("two runs");
    assert!(err.to_string().contains("a second"), "{err}");
    let mixed = run.replacen(
        "Latency (ms):",
        "Throughput:\n    events/s (eps):                      185.3171\n\nLatency (ms):",
        1,
    );
    let err = parse_output(&mixed).expect_err("mixed");
    assert!(err.to_string().contains("beside the 1.0"), "{err}");
}

#[test]
fn output_that_is_not_sysbench_or_not_csv_is_refused() {
    let pgbench = "pgbench (15.8)\ntransaction type: <builtin: TPC-B (sort of)>\n";
    assert_eq!(
        parse_output(pgbench).expect_err("pgbench"),
        SysbenchParseError::NoBanner
    );
    // sysbench's default report lines instead of --report_csv=yes.
    let text = fixture(CAPTURED);
    let default: String = text
        .lines()
        .map(|l| {
            if l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(',') {
                let f: Vec<&str> = l.split(',').collect();
                format!(
                    "[ {}s ] thds: {} tps: {} qps: {} (r/w/o: {}/{}/{}) lat (ms,95%): {} err/s: {} reconn/s: {}",
                    f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]
                )
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let err = parse_output(&default).expect_err("not CSV");
    assert!(err.to_string().contains("--report_csv=yes"), "{err}");
}

#[test]
fn rates_their_count_and_time_contradict_are_refused_naming_the_line() {
    let line_no = |text: &str, needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i + 1)
            .expect("line")
    };
    let captured = fixture(CAPTURED);
    let composed = fixture(COMPOSED_1_1);
    for (text, from, to, words) in [
        (
            &captured,
            "(185.30 per sec.)",
            "(1e308 per sec.)",
            "beyond any sysbench run",
        ),
        (
            &captured,
            "(185.30 per sec.)",
            "(18.53 per sec.)",
            "not the 1865 counted",
        ),
        (
            &captured,
            "(5216.91 per sec.)",
            "(52169.10 per sec.)",
            "not the 52506 counted",
        ),
        (
            &captured,
            "(0.60 per sec.)",
            "(6.00 per sec.)",
            "not the 6 counted",
        ),
        (
            &composed,
            "4661.8346",
            "466.1835",
            "not the 16782655 counted",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let broken = text.replacen(from, to, 1);
        let err = parse_output(&broken).expect_err(to).to_string();
        assert!(err.contains(words), "{to}: {err}");
        let at = line_no(&broken, to);
        assert!(err.starts_with(&format!("line {at}:")), "{to}: {err}");
    }
    for (from, to, words) in [
        (
            "sum:                                20076.20",
            "sum:                                2007.62",
            "latency sum",
        ),
        ("932.5000/5.50", "93.2500/5.50", "events per thread"),
        (
            "10.0381/0.02",
            "100.0381/0.02",
            "longer than the 10.0639 s run",
        ),
    ] {
        assert!(captured.contains(from), "{from}");
        let err = parse_output(&captured.replacen(from, to, 1))
            .expect_err(to)
            .to_string();
        assert!(err.contains(words), "{to}: {err}");
    }
}

#[test]
fn damaged_characters_and_unknown_versions_are_refused() {
    let captured = fixture(CAPTURED);
    let bom = format!("\u{feff}{captured}");
    let err = parse_output(&bom).expect_err("BOM").to_string();
    assert!(
        err.starts_with("line 1:") && err.contains("U+FEFF"),
        "{err}"
    );
    // A NUL that made the "ignored errors" key unknown used to drop the line's figures
    // silently (here it is refused before the key is looked at).
    let nul = captured.replacen("ignored errors:", "ignored\0errors:", 1);
    let err = parse_output(&nul).expect_err("NUL").to_string();
    assert!(err.contains("U+0000"), "{err}");
    let err = parse_output(&captured.replacen("sysbench 1.0.20", "sysbench 9.0.1", 1))
        .expect_err("unknown version")
        .to_string();
    assert!(err.contains("sysbench 9.0.1 is not a version"), "{err}");
    let composed = fixture(COMPOSED_1_1);
    let err = parse_output(&composed.replacen("sysbench 1.1.0-bbee5d5", "sysbench 1.0.20", 1))
        .expect_err("1.0 banner over a 1.1 layout")
        .to_string();
    assert!(err.contains("prints the 1.0"), "{err}");
}
