//! Plans `check` must refuse before a run starts, each problem at the key the plan wrote
//! (composed here from the examples by replacing one line).

use std::path::PathBuf;

use pgappliance::plan::{Plan, PlanIssue};

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The example with its first line equal to `line` replaced (the line must be there).
fn with(name: &str, line: &str, replacement: &str) -> String {
    let text = example(name);
    assert!(
        text.lines().any(|l| l == line),
        "{name} has the line {line:?}"
    );
    text.replacen(&format!("{line}\n"), &format!("{replacement}\n"), 1)
}

fn errors(text: &str) -> Vec<PlanIssue> {
    Plan::examine(text).errors
}

/// The one error of `text` about `key`, at the line that says `at`.
fn error_at(text: &str, key: &str, at: &str, words: &str) {
    let errs = errors(text);
    let line = text
        .lines()
        .position(|l| l.trim_start().starts_with(at))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("a line starting {at:?}"));
    let e = errs
        .iter()
        .find(|e| e.key == key)
        .unwrap_or_else(|| panic!("an error at {key}: {errs:?}"));
    assert!(e.message.contains(words), "{key}: {}", e.message);
    assert_eq!(e.line, line, "{key}: {e:?}");
}

#[test]
fn a_sub_second_duration_is_refused_naming_the_key() {
    let text = with("quick.toml", "duration = \"2s\"", "duration = \"1.5s\"");
    error_at(
        &text,
        "workloads[1].duration",
        "duration = \"1.5s\"",
        "not a whole number of seconds",
    );
    let text = with("quick.toml", "duration = \"2s\"", "duration = \"1s 500ms\"");
    error_at(&text, "workloads[1].duration", "duration =", "whole number");
    let text = with(
        "quick.toml",
        "duration = \"2s\"",
        "duration = \"2s\"\nwarmup = \"2500ms\"",
    );
    error_at(&text, "workloads[1].warmup", "warmup =", "whole number");
}

#[test]
fn settings_the_daemons_own_connection_sets_are_refused() {
    for (setting, value) in [
        ("application_name", "\"bench\""),
        ("client_encoding", "\"LATIN1\""),
    ] {
        let text = with(
            "quick.toml",
            "huge_pages = \"off\"",
            &format!("huge_pages = \"off\"\n{setting} = {value}"),
        );
        error_at(
            &text,
            &format!("tuning.settings.{setting}"),
            setting,
            "set by the daemon's own connection",
        );
    }
}

#[test]
fn memory_and_time_values_out_of_range_are_refused() {
    for (line, words) in [
        ("work_mem = \"1e400\"", "overflows"),
        ("work_mem = \"99999999999999999999999GB\"", "out of range"),
        ("work_mem = 9999999999999", "out of range"),
        ("statement_timeout = \"30d\"", "out of range"),
    ] {
        let text = with(
            "quick.toml",
            "huge_pages = \"off\"",
            &format!("huge_pages = \"off\"\n{line}"),
        );
        let key = line.split(' ').next().expect("key");
        error_at(&text, &format!("tuning.settings.{key}"), key, words);
    }
}

#[test]
fn pgbench_keys_on_a_tpcc_workload_are_refused_even_at_their_defaults() {
    for line in [
        "builtin = \"tpcb-like\"",
        "protocol = \"simple\"",
        "statement_latencies = false",
        "latency_log = \"full\"",
        "clients = []",
    ] {
        let text = example("m6gd-8xlarge.toml").replacen(
            "kind = \"sysbench-tpcc\"\n",
            &format!("kind = \"sysbench-tpcc\"\n{line}\n"),
            1,
        );
        let key = line.split(' ').next().expect("key");
        let errs = errors(&text);
        assert!(
            errs.iter()
                .any(|e| e.key.ends_with(&format!("].{key}")) && e.message.contains(key)),
            "{line}: {errs:?}"
        );
    }
}

#[test]
fn a_tpcc_source_the_code_cannot_unpack_is_refused() {
    let source = "tpcc_source = \"file:///srv/pgappliance/sysbench-tpcc-585e2b8af327d35866aed7e56837c2134d8835a9.tar.gz\"";
    for bad in [
        "tpcc_source = \"https://example.com/sysbench-tpcc.zip\"",
        "tpcc_source = \"file:///srv/sysbench-tpcc.tar.xz\"",
    ] {
        let text = with("m6gd-8xlarge.toml", source, bad);
        error_at(
            &text,
            "sysbench.tpcc_source",
            "tpcc_source",
            "only archive format",
        );
    }
    let ok = with(
        "m6gd-8xlarge.toml",
        source,
        "tpcc_source = \"https://example.com/a/sysbench-tpcc.tgz?download=1\"",
    );
    assert!(
        !errors(&ok).iter().any(|e| e.key == "sysbench.tpcc_source"),
        "{:?}",
        errors(&ok)
    );
}

#[test]
fn a_problem_of_report_interval_s_is_named_and_shown_at_its_own_line() {
    let text = example("m6gd-8xlarge.toml").replacen(
        "report_interval_s = 1\n",
        "report_interval_s = 0\n",
        1,
    );
    error_at(
        &text,
        "workloads[2].report_interval_s",
        "report_interval_s = 0",
        "report_interval",
    );
}

#[test]
fn adaptive_repeats_and_between_rounds_are_checked_naming_the_key() {
    let repeats = |table: &str| {
        with(
            "quick.toml",
            "duration = \"2s\"",
            &format!("duration = \"2s\"\nrepeats = {table}"),
        )
    };
    assert!(errors(&repeats("{ min = 3, max = 10, ci_pct = 2.0 }")).is_empty());
    error_at(
        &repeats("{ min = 1, max = 10, ci_pct = 2.0 }"),
        "workloads[1].repeats.min",
        "repeats =",
        "needs two repeats",
    );
    error_at(
        &repeats("{ min = 4, max = 3, ci_pct = 2.0 }"),
        "workloads[1].repeats.max",
        "repeats =",
        "from min (4) to 100, found 3",
    );
    error_at(
        &repeats("{ min = 3, max = 10, ci_pct = 0.0 }"),
        "workloads[1].repeats.ci_pct",
        "repeats =",
        "above 0 and at most 50",
    );
    let unknown = errors(&repeats("{ min = 3, maximum = 10, ci_pct = 2.0 }"));
    assert!(
        unknown
            .iter()
            .any(|e| e.key.starts_with("workloads[1].repeats") && e.message.contains("maximum")),
        "{unknown:?}"
    );
    let text = with(
        "quick.toml",
        "[finish]",
        "[sweep]\norder = \"points\"\nbetween_rounds = \"restart\"\n\n[finish]",
    );
    error_at(
        &text,
        "sweep.between_rounds",
        "between_rounds",
        "order = \"points\" runs each point's repeats back to back",
    );
    let text = with(
        "quick.toml",
        "[finish]",
        "[sweep]\nbetween_rounds = \"reboot\"\n\n[finish]",
    );
    assert!(errors(&text).is_empty(), "{:?}", errors(&text));
}
