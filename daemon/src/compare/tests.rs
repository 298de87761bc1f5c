use super::stats::Verdict;
use super::*;
use crate::plan::WorkloadKind;

fn point(workload: &str, checksums: &str, clients: u32, tps: f64, p99: f64) -> DigestPoint {
    DigestPoint {
        workload: workload.into(),
        kind: WorkloadKind::Pgbench,
        builtin: "tpcb-like".into(),
        checksums: checksums.into(),
        clients,
        tps,
        latency_avg_ms: Some(1.0),
        latency: Percentiles {
            p25: Some(p99 / 8.0),
            p50: Some(p99 / 4.0),
            p75: Some(p99 / 2.0),
            p90: Some(p99 / 1.5),
            p95: Some(p99 / 1.2),
            p99: Some(p99),
            p99_9: Some(p99 * 1.5),
            max: Some(p99 * 3.0),
        },
        qps: None,
        ignored_errors: None,
        reconnects: None,
        tps_series: Vec::new(),
        client_bound: false,
    }
}

/// A sysbench-tpcc point: sysbench's mean and 95th percentile, a flat per-second series.
fn tpcc(workload: &str, threads: u32, tps: f64, p95: f64) -> DigestPoint {
    DigestPoint {
        workload: workload.into(),
        kind: WorkloadKind::SysbenchTpcc,
        builtin: String::new(),
        checksums: String::new(),
        clients: threads,
        tps,
        latency_avg_ms: Some(p95 / 2.0),
        latency: Percentiles {
            p95: Some(p95),
            max: Some(p95 * 10.0),
            ..Percentiles::default()
        },
        qps: Some(tps * 28.0),
        ignored_errors: Some(100),
        reconnects: Some(0),
        tps_series: (1..=3600).map(|s| (f64::from(s), tps)).collect::<Vec<_>>(),
        client_bound: false,
    }
}

/// Scenario B's TPC-C comparison: m6gd.8xlarge over m5d.8xlarge by +15.5 %, +8 %,
/// +4.5 % and +1.4 % at 16, 32, 64 and 128 threads (in memory).
fn scenario_b_tpcc() -> Vec<RunDigest> {
    let threads = [16u32, 32, 64, 128];
    let gain = [1.155, 1.08, 1.045, 1.014];
    let base = [4036.2, 6100.0, 7200.0, 7400.0];
    let digest = |series: &[(f64, f64)]| downsample(series, DIGEST_SERIES_SAMPLES);
    let points = |factor: &dyn Fn(usize) -> f64| -> Vec<DigestPoint> {
        threads
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let mut p = tpcc("tpcc-mem", t, base[i] * factor(i), 8.0);
                p.tps_series = digest(&p.tps_series);
                p
            })
            .collect()
    };
    vec![
        run("m5d.8xlarge", "r-01", 1.808, points(&|_| 1.0)),
        run("m6gd.8xlarge", "r-02", 1.4464, points(&|i| gain[i])),
    ]
}

/// Each point three times, its tps times 1, 1.004 and 0.996 (a CV of 0.4 %), as
/// repeats r1–r3 of a run.
fn repeated(points: Vec<DigestPoint>) -> Vec<DigestPoint> {
    let mut out = Vec::new();
    for f in [1.0, 1.004, 0.996] {
        for p in &points {
            out.push(DigestPoint {
                tps: p.tps * f,
                ..p.clone()
            });
        }
    }
    out
}

#[test]
fn an_unchanged_price_or_speed_is_said_in_words_not_as_zero_percent() {
    let at = |tps: f64| repeated(vec![point("rw", "", 16, tps, 4.0)]);
    let runs = vec![
        run("a", "r-01", 2.0, at(10_000.0)),
        run("b", "r-02", 2.0, at(12_000.0)),
        run("c", "r-03", 2.0, at(10_000.0)),
    ];
    let rows = rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    let s = &f[0].sentence;
    assert!(
        s.contains("b is faster than a: +20.0 % (+")
            && s.contains(") at 16 clients; at the same price it gives +20.0 % (+"),
        "{s}"
    );
    assert!(
        s.contains("c is the same as a within ±5 %: as fast as a (\u{2212}0.")
            && s.contains(") at 16 clients; at the same price it gives the same tps per dollar-hour (\u{2212}0."),
        "{s}"
    );
    assert!(!s.contains("+0.0 %") && !s.contains(" 0.0 %"), "{s}");
    // One sample a side: the unchanged figure in words too.
    let runs = vec![
        run("a", "r-01", 2.0, vec![point("rw", "", 16, 10_000.0, 4.0)]),
        run("c", "r-03", 2.0, vec![point("rw", "", 16, 10_000.0, 4.0)]),
    ];
    let rows = super::rows(&runs);
    let s = &findings(&runs, &rows, 0, 5.0)[0].sentence;
    assert_eq!(
        s,
        "rw: c against a: one sample at 16 clients (as fast, no interval)."
    );
}

#[test]
fn a_tpcc_finding_speaks_of_tpcc_tps_over_thread_counts() {
    let mut runs = scenario_b_tpcc();
    for r in &mut runs {
        r.points = repeated(std::mem::take(&mut r.points));
    }
    // A pgbench workload of the same name is its own finding, not mixed in.
    runs[0].points.push(point("tpcc-mem", "", 16, 1.0, 1.0));
    runs[1].points.push(point("tpcc-mem", "", 16, 2.0, 1.0));
    let rows = rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    assert_eq!(f.len(), 2, "{f:?}");
    let t = f
        .iter()
        .find(|f| f.kind == WorkloadKind::SysbenchTpcc)
        .expect("TPC-C finding");
    let geo = ((1.155f64 * 1.08 * 1.045 * 1.014).powf(0.25) - 1.0) * 100.0;
    assert!(
        t.sentence.starts_with(&format!(
            "tpcc-mem: m6gd.8xlarge is faster in TPC-C tps than m5d.8xlarge: +{geo:.1} % ("
        )) && t.sentence.contains(
            ") by the geometric mean over 4 thread counts (16, 32, 64, 128); at 20.0 % cheaper per hour it gives +"
        ) && t.sentence.contains("TPC-C tps per dollar-hour"),
        "{}",
        t.sentence
    );
    // +4.5 % at 64 threads cannot be told from 5 %, +1.4 % at 128 is under it: named.
    assert!(
        t.sentence.contains("inconclusive at 64 threads (+4.5 % (")
            && t.sentence.contains("small at 128 threads (+1.4 % ("),
        "{}",
        t.sentence
    );
    let at16 = t
        .rows
        .iter()
        .find(|r| r.clients == 16 && r.machine == "m6gd.8xlarge")
        .expect("16 threads");
    let vs = at16.vs_baseline.as_ref().expect("vs");
    assert!((vs.change_pct() - 15.5).abs() < 1e-9);
    assert_eq!((vs.verdict, vs.n, vs.n_baseline), (Verdict::Faster, 3, 3));
    // One sample a side: named as such, no verdict, no number folded in.
    let pg = f
        .iter()
        .find(|f| f.kind == WorkloadKind::Pgbench)
        .expect("pgbench finding");
    assert_eq!(
        pg.sentence,
        "tpcc-mem: m6gd.8xlarge against m5d.8xlarge: one sample at 16 clients (+100.0 %, no interval)."
    );
}

#[test]
fn the_index_shows_tpcc_per_second_charts_and_the_csv_its_columns() {
    let runs = scenario_b_tpcc();
    let html = render_index(
        &runs,
        &[],
        &IndexOptions {
            baseline: 0,
            threshold_pct: Some(5.0),
            left_out: &[],
            run_pages: &[],
            stores: &["file:///s".to_string()],
        },
    );
    assert!(html.contains("<h3>tpcc-mem (TPC-C, sysbench-tpcc)</h3>"));
    assert!(html.contains(
        "<th>threads</th><th class=\"l\">machine</th><th>repeats</th><th>TPC-C tps</th>"
    ));
    assert!(html.contains("tpcc-mem: TPC-C tps by threads</title>"));
    assert!(html.contains("tpcc-mem: latency p95 by threads</title>"));
    for t in [16, 32, 64, 128] {
        assert!(
            html.contains(&format!(
                "tpcc-mem at {t} threads: TPC-C tps per second</title>"
            )),
            "{t}"
        );
    }
    assert!(html.contains("class=\"tpcc-table\""));
    // m5d is the baseline and m6gd is faster: no regression.
    assert!(html.contains("No point's tps fell"));
    let csv = summary_csv(&rows(&runs));
    let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let col = |c: &str| lines[0].iter().position(|h| *h == c).expect(c);
    let row = lines
        .iter()
        .find(|r| r[0] == "m6gd.8xlarge" && r[col("clients")] == "16")
        .expect("row");
    assert_eq!(row[col("kind")], "sysbench-tpcc");
    assert_eq!(row[col("builtin")], "");
    assert_eq!(row[col("p95_ms")], "8.000");
    assert_eq!(row[col("ignored_errors")], "100");
    assert_eq!(row[col("reconnects")], "0");
    let qps: f64 = row[col("qps_mean")].parse().expect("qps");
    assert!((qps - 4036.2 * 1.155 * 28.0).abs() < 0.01, "{qps}");
}

#[test]
fn a_digest_keeps_a_tpcc_series_averaged_down_and_reads_old_digests_as_pgbench() {
    let series: Vec<(f64, f64)> = (1..=3600)
        .map(|s| (f64::from(s), f64::from(s % 2)))
        .collect();
    let d = downsample(&series, DIGEST_SERIES_SAMPLES);
    assert_eq!(d.len(), 600);
    assert_eq!(d[0], (6.0, 0.5));
    assert_eq!(d[599], (3600.0, 0.5));
    let short = [(1.0, 5.0), (2.0, 7.0)];
    assert_eq!(downsample(&short, DIGEST_SERIES_SAMPLES), short.to_vec());
    // A digest cached by a collector from before sysbench-tpcc.
    let mut old = serde_json::to_value(point("rw", "", 10, 100.0, 1.0)).expect("json");
    for k in ["kind", "qps", "ignored_errors", "reconnects", "tps_series"] {
        old.as_object_mut().expect("object").remove(k);
    }
    let p: DigestPoint = serde_json::from_value(old).expect("old digest reads");
    assert_eq!(p.kind, WorkloadKind::Pgbench);
    assert!(p.tps_series.is_empty());
}

fn run(appliance: &str, run_id: &str, price: f64, points: Vec<DigestPoint>) -> RunDigest {
    RunDigest {
        key: format!("{appliance}/m/{run_id}"),
        appliance: appliance.into(),
        run_id: run_id.into(),
        started_at: format!("2026-01-01T00:00:{}Z", &run_id[run_id.len() - 2..]),
        hourly_price_usd: price,
        cpu_model: "cpu".into(),
        cpus: 32,
        memory_bytes: 128 << 30,
        postgres_version: "13.1".into(),
        kernel: "5.4".into(),
        points,
        failed_points: 0,
        machine_identity: appliance.into(),
        plan_digest: String::new(),
    }
}

/// Scenario B's published figures: Graviton2 19 % faster read-write, 30 % read-only,
/// checksums 1.7 %, 25 % cheaper.
fn scenario_b() -> Vec<RunDigest> {
    vec![
        run(
            "m5d.8xlarge",
            "r-01",
            1.808,
            vec![
                point("rw", "off", 16, 10_000.0, 4.0),
                point("rw", "on", 16, 9_830.0, 4.1),
                point("ro", "off", 16, 100_000.0, 0.4),
            ],
        ),
        run(
            "m6gd.8xlarge",
            "r-02",
            1.4464,
            vec![
                point("rw", "off", 16, 11_900.0, 3.5),
                point("rw", "on", 16, 11_700.0, 3.6),
                point("ro", "off", 16, 130_000.0, 0.3),
            ],
        ),
    ]
}

#[test]
fn the_finding_states_scenario_b() {
    let mut runs = scenario_b();
    for r in &mut runs {
        r.points = repeated(std::mem::take(&mut r.points));
    }
    let rows = rows(&runs);
    let base = baseline_index(&runs, None).expect("default baseline");
    assert_eq!(runs[base].appliance, "m5d.8xlarge", "first by name");
    let f = findings(&runs, &rows, base, 5.0);
    assert_eq!(f.len(), 2);
    let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
    let grav = rw
        .rows
        .iter()
        .find(|r| r.machine == "m6gd.8xlarge")
        .expect("m6gd row");
    let vs = grav.vs_baseline.as_ref().expect("vs");
    assert!((vs.change_pct() - 19.0).abs() < 1e-9);
    let (lo, hi) = vs.ci_pct().expect("three repeats a side");
    assert!(lo < 19.0 && hi > 19.0 && lo > 5.0, "{lo} … {hi}");
    assert_eq!(vs.verdict, Verdict::Faster);
    assert_eq!(grav.checksums, "off");
    let cost = grav.checksums_on.as_ref().expect("both states ran");
    assert!((cost.change_pct() + 200.0 / 119.0).abs() < 1e-9);
    assert_eq!(cost.verdict, Verdict::Small, "{:?}", cost.ci_pct());
    // 19 % more tps at 80 % of the price: 48.75 % more tps per dollar-hour.
    let (per, per_ci) = grav.per_dollar_vs_baseline.expect("priced");
    assert!(
        (per - (1.19 * 1.808 / 1.4464 - 1.0) * 100.0).abs() < 1e-9,
        "{per}"
    );
    assert!(per_ci.is_some_and(|(lo, hi)| lo < per && per < hi));
    assert!(
        rw.sentence.starts_with(
            "rw: m6gd.8xlarge is faster than m5d.8xlarge: +19.0 % (+1"
        ) && rw.sentence.contains(") at 16 clients; at 20.0 % cheaper per hour it gives +48.")
            && rw.sentence.contains(
                "tps per dollar-hour. Data checksums on against off: m5d.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % (\u{2212}"
            )
            && rw.sentence.contains("; m6gd.8xlarge: slower with them on by less than 5 %, \u{2212}1.7 % ("),
        "{}",
        rw.sentence
    );
    let ro = f.iter().find(|f| f.workload == "ro").expect("ro");
    assert!(
        ro.sentence
            .contains("m6gd.8xlarge is faster than m5d.8xlarge: +30.0 % ("),
        "{}",
        ro.sentence
    );
    let base_row = &rw.rows[0];
    assert_eq!(base_row.machine, "m5d.8xlarge", "the baseline leads");
    assert_eq!(base_row.vs_baseline, None);
    // Another baseline turns the sign.
    let b2 = baseline_index(&runs, Some("m6gd.8xlarge")).expect("named");
    let f2 = findings(&runs, &rows, b2, 5.0);
    assert!(
        f2[1]
            .sentence
            .contains("m5d.8xlarge is slower than m6gd.8xlarge: \u{2212}16.0 % ("),
        "{}",
        f2[1].sentence
    );
    let err = baseline_index(&runs, Some("c7g")).expect_err("unknown");
    assert!(
        err.contains("\"c7g\"") && err.contains("m5d.8xlarge, m6gd.8xlarge"),
        "{err}"
    );
}

#[test]
fn one_sample_and_noisy_points_are_named_never_judged() {
    // Scenario B as published: one sample of each point.
    let runs = scenario_b();
    let rows = super::rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
    assert_eq!(
        rw.sentence,
        "rw: m6gd.8xlarge against m5d.8xlarge: one sample at 16 clients (+19.0 %, no interval). \
         Data checksums on against off: m5d.8xlarge: one sample at 16 clients (\u{2212}1.7 %, no interval); \
         m6gd.8xlarge: one sample at 16 clients (\u{2212}1.7 %, no interval)."
    );
    // A second repeat on one side: the one-sample point says what its noise suggests.
    let mut runs = scenario_b();
    runs[0].points.push(point("rw", "off", 16, 10_300.0, 4.0));
    let rows = super::rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
    let vs = rw.rows[1].vs_baseline.as_ref().expect("vs");
    assert_eq!((vs.n, vs.n_baseline), (1, 2));
    assert!(vs.repeats_suggested.is_some());
    assert!(
        rw.sentence.contains("repeats a side would do)"),
        "{}",
        rw.sentence
    );
    // Repeats spread ±15 %: inconclusive, with the interval shown.
    let mut runs = scenario_b();
    runs[1].points.push(point("rw", "off", 16, 14_000.0, 3.5));
    runs[1].points.push(point("rw", "off", 16, 9_000.0, 3.5));
    runs[0].points.push(point("rw", "off", 16, 11_500.0, 4.0));
    runs[0].points.push(point("rw", "off", 16, 8_500.0, 4.0));
    let rows = super::rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    let rw = f.iter().find(|f| f.workload == "rw").expect("rw");
    assert!(
        rw.sentence
            .starts_with("rw: m6gd.8xlarge against m5d.8xlarge is inconclusive at ±5 %: +"),
        "{}",
        rw.sentence
    );
}

/// A client count measured once is named beside the mean of the others, never in it.
#[test]
fn a_one_sample_count_is_named_beside_the_mean_of_the_others() {
    let points = |speed: f64| {
        let mut p = repeated(
            [10u32, 100, 250]
                .iter()
                .map(|&c| point("rw", "", c, 1000.0 * speed * f64::from(c).ln(), 1.0))
                .collect(),
        );
        p.push(point("rw", "", 1000, 9000.0 * speed.powi(3), 1.0));
        p
    };
    let runs = vec![
        run("a", "r-01", 0.0, points(1.0)),
        run("b", "r-02", 0.0, points(1.2)),
    ];
    let rows = rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    assert_eq!(
        f[0].sentence.split(" (+").next(),
        Some("rw: b is faster than a: +20.0 %"),
        "{}",
        f[0].sentence
    );
    assert!(
        f[0].sentence
            .contains(") by the geometric mean over 3 client counts (10, 100, 250); one sample at 1000 clients (+72.8 %, no interval)."),
        "{}",
        f[0].sentence
    );
    assert_eq!(f[0].versus[0].mean.as_ref().map(|m| m.count), Some(3));
}

#[test]
fn a_client_bound_count_is_named_as_such_never_folded_into_the_machines_difference() {
    let points = |speed: f64, bound_at_250: bool| {
        let mut p = repeated(
            [10u32, 100]
                .iter()
                .map(|&c| point("rw", "", c, 1000.0 * speed * f64::from(c).ln(), 1.0))
                .collect(),
        );
        // At 250 clients b is 30 % faster, but b's client was at its CPU's limit in a
        // repeat: b's client, not b's server, set that tps.
        let mut top = repeated(vec![point("rw", "", 250, 5000.0 * speed.powf(1.44), 1.0)]);
        top[1].client_bound = bound_at_250;
        p.extend(top);
        p
    };
    let runs = vec![
        run("a", "r-01", 0.0, points(1.0, false)),
        run("b", "r-02", 0.0, points(1.2, true)),
    ];
    let rows = rows(&runs);
    assert_eq!(
        rows.iter().map(|r| r.client_bound).collect::<Vec<_>>(),
        [0, 0, 0, 0, 0, 1],
        "one repeat of b at 250 clients"
    );
    let f = findings(&runs, &rows, 0, 5.0);
    let s = &f[0].sentence;
    assert!(
        s.starts_with("rw: b is faster than a: +20.0 % (")
            && s.contains(") by the geometric mean over 2 client counts (10, 100); client-bound at 250 clients (+30.0 % (")
            && s.ends_with("; the benchmark client's CPU, not the server, set the tps there: no server difference)."),
        "{s}"
    );
    assert_eq!(f[0].versus[0].mean.as_ref().map(|m| m.count), Some(2));
    assert_eq!(
        f[0].versus[0]
            .client_bound
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [250]
    );
    let marked: Vec<(u32, &str, bool)> = f[0]
        .rows
        .iter()
        .map(|r| (r.clients, r.machine.as_str(), r.client_bound))
        .collect();
    assert!(marked.contains(&(250, "b", true)) && marked.contains(&(250, "a", false)));
    // findings.json says which point comparison is the client's.
    let json: serde_json::Value =
        serde_json::from_str(&findings_json(&runs, &rows, 0, 5.0)).expect("json");
    let bound: Vec<(u64, bool)> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|e| e["scope"] == "point")
        .map(|e| {
            (
                e["clients"].as_u64().unwrap_or(0),
                e["client_bound"] == true,
            )
        })
        .collect();
    assert_eq!(bound, [(10, false), (100, false), (250, true)]);
    // The baseline's client at its limit counts the same: a is client-bound at 250, b is
    // slower there by its verdict, and no regression is confirmed.
    let mut slow = points(1.2, false);
    for p in slow.iter_mut().filter(|p| p.clients == 250) {
        p.tps *= 0.7;
    }
    let runs = vec![
        run("a", "r-01", 0.0, points(1.2, true)),
        run("b", "r-02", 0.0, slow),
    ];
    let rows = super::model::rows(&runs);
    let list = regressions(&rows, "a", 5.0);
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(list[0].tps_fell && list[0].client_bound && !list[0].confirmed());
    assert!(
        regression_line(&list[0]).starts_with("client-bound: tps \u{2212}30.0 % ("),
        "{}",
        regression_line(&list[0])
    );
    let f = findings(&runs, &rows, 0, 5.0);
    assert!(
        f[0].sentence
            .contains("client-bound at 250 clients (\u{2212}30.0 % ("),
        "{}",
        f[0].sentence
    );
}

#[test]
fn with_many_machines_the_sentence_groups_them_by_verdict() {
    let runs: Vec<RunDigest> = (0..6)
        .map(|i| {
            run(
                &format!("m{i}"),
                &format!("r-{i:02}"),
                1.0 + f64::from(i),
                repeated(vec![point(
                    "rw",
                    "",
                    10,
                    1000.0 * (1.0 + f64::from(i) / 10.0),
                    1.0,
                )]),
            )
        })
        .collect();
    let rows = rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    assert_eq!(
        f[0].sentence,
        "rw: against m0 in tps, by the geometric mean over client counts at ±5 %, the 5 other \
         runs are: 5 faster (m1, m2, m3, m4, m5)."
    );
}

#[test]
fn latest_run_per_machine_unless_all_runs_and_the_baseline_run_is_kept() {
    let runs = vec![
        run("a", "r-01", 0.0, vec![point("rw", "", 10, 100.0, 1.0)]),
        run("a", "r-03", 0.0, vec![point("rw", "", 10, 90.0, 1.2)]),
        run("b", "r-02", 0.0, vec![point("rw", "", 10, 80.0, 1.0)]),
        run("a", "r-02", 0.0, vec![point("rw", "", 10, 95.0, 1.0)]),
    ];
    let (shown, left) = select_runs(runs.clone(), false, None);
    let ids: Vec<&str> = shown.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["r-03", "r-02"]);
    assert_eq!(left, ["a/m/r-01", "a/m/r-02"]);
    assert_eq!(labels(&shown), ["a", "b"]);
    let (shown, left) = select_runs(runs.clone(), true, None);
    assert_eq!(shown.len(), 4);
    assert!(left.is_empty());
    assert_eq!(labels(&shown)[0], "a (r-01)");
    let (shown, _) = select_runs(runs, false, Some("r-01"));
    let ids: Vec<&str> = shown.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["r-01", "r-03", "r-02"]);
    assert_eq!(baseline_index(&shown, Some("r-01")), Ok(0));
    assert_eq!(
        baseline_index(&shown, Some("a")),
        Ok(0),
        "a machine's earliest shown run"
    );
}

#[test]
fn regressions_are_slower_verdicts_worst_first_and_moves_without_one_are_listed_after() {
    let runs = vec![
        run(
            "a",
            "r-01",
            0.0,
            repeated(vec![
                point("rw", "", 10, 1000.0, 10.0),
                point("rw", "", 100, 2000.0, 20.0),
                point("rw", "", 1000, 3000.0, 30.0),
                point("ro", "", 10, 5000.0, 1.0),
            ]),
        ),
        run("a", "r-02", 0.0, {
            let mut p = repeated(vec![
                // 4.9 % down: within 5 %.
                point("rw", "", 10, 951.0, 10.0),
                // 10 % down, p99 up 20 %.
                point("rw", "", 100, 1800.0, 24.0),
                // tps level, p99 up 6 %.
                point("rw", "", 1000, 3000.0, 31.8),
            ]);
            // 30 % down, but one sample.
            p.push(point("ro", "", 10, 3500.0, 1.0));
            p
        }),
    ];
    let rows = rows(&runs);
    let labels = labels(&runs);
    let list = regressions(&rows, &labels[0], 5.0);
    // Each line leads with what regressed (or, unconfirmed, what moved).
    let lines: Vec<String> = list.iter().map(regression_line).collect();
    assert!(
        lines[0].starts_with("regressed: tps \u{2212}10.0 % (\u{2212}")
            && lines[0].contains(") slower and latency p99 +20.0 % (")
            && lines[0].ends_with(&format!(") higher: {} rw at 100 clients", labels[1])),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&format!(
            "regressed: latency p99 +6.0 % (+6.0 … +6.0) higher: {} rw at 1000 clients (tps +0.0 % (",
            labels[1]
        )) && lines[1].ends_with(") same)"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        format!(
            "unconfirmed: tps \u{2212}30.0 % (one sample): {} ro at 10 clients (latency p99 +0.0 % (one sample))",
            labels[1]
        )
    );
    let got: Vec<(&str, u32, bool, bool, bool)> = list
        .iter()
        .map(|r| {
            (
                r.workload.as_str(),
                r.clients,
                r.tps_fell,
                r.p99_rose,
                r.confirmed(),
            )
        })
        .collect();
    // p99 +6 % with identical repeats: an interval of no width above 5 %.
    assert_eq!(
        got,
        [
            ("rw", 100, true, true, true),
            ("rw", 1000, false, true, true),
            ("ro", 10, false, false, false)
        ]
    );
    assert!((list[2].tps_change_pct() + 30.0).abs() < 0.01);
    assert_eq!(list[2].tps_change.verdict, Verdict::OneSample);
    assert!(regressions(&rows, &labels[0], 50.0).is_empty());
    let html = render_index(
        &runs,
        &[],
        &IndexOptions {
            baseline: 0,
            threshold_pct: Some(5.0),
            left_out: &[],
            run_pages: &[],
            stores: &["file:///s".to_string()],
        },
    );
    let regress = html.find("id=\"regressions\"").expect("regressions");
    let finding = html.find("id=\"finding\"").expect("finding");
    assert!(finding < regress, "the finding stays first");
    assert!(html.contains("2 point(s) regressed by more than 5 %"));
    assert!(html.contains("1 more moved past 5 % by their figure alone"));
}

/// Two machines whose points are the same but for noise, three to six repeats: no
/// client count, and no geometric mean, is ever called faster or slower.
#[test]
fn identical_machines_with_repeats_are_never_faster_or_slower() {
    let mut rng = stats::SplitMix64::new(4242);
    let clients = [10u32, 25, 50, 100, 250, 500, 1000];
    for trial in 0..100 {
        let repeats = 3 + trial % 4;
        let cv = [0.01, 0.03, 0.05][trial % 3];
        let machine = |rng: &mut stats::SplitMix64, name: &str, id: &str| {
            let mut points = Vec::new();
            for &c in &clients {
                let truth = 1000.0 * f64::from(c).ln();
                for tps in rng.repeats(truth, cv, repeats) {
                    points.push(point("rw", "", c, tps, 1.0));
                }
            }
            run(name, id, 1.0, points)
        };
        let runs = vec![
            machine(&mut rng, "a", "r-01"),
            machine(&mut rng, "b", "r-02"),
        ];
        let rows = rows(&runs);
        let f = findings(&runs, &rows, 0, 5.0);
        let v = &f[0].versus[0];
        assert_eq!(v.points.len(), 7);
        for (c, p) in &v.points {
            assert!(
                !matches!(p.verdict, Verdict::Faster | Verdict::Slower),
                "trial {trial} at {c}: {:?}",
                p.ci_pct()
            );
        }
        assert!(
            !matches!(v.verdict(), Verdict::Faster | Verdict::Slower),
            "trial {trial}: {}",
            f[0].sentence
        );
        assert!(regressions(&rows, "a", 5.0).iter().all(|r| !r.confirmed()));
    }
}

/// A machine 30 % faster at CV 3 % with three repeats: `faster` at every client count
/// and by the geometric mean; findings.json carries each comparison.
#[test]
fn a_large_difference_is_faster_at_every_client_count_and_in_findings_json() {
    let mut rng = stats::SplitMix64::new(30);
    let clients = [10u32, 25, 50, 100, 250, 500, 1000];
    let machine = |rng: &mut stats::SplitMix64, name: &str, id: &str, speed: f64| {
        let mut points = Vec::new();
        for &c in &clients {
            for tps in rng.repeats(1000.0 * speed * f64::from(c).ln(), 0.03, 3) {
                points.push(point("rw", "", c, tps, 1.0));
            }
        }
        run(name, id, 1.0, points)
    };
    let runs = vec![
        machine(&mut rng, "a", "r-01", 1.0),
        machine(&mut rng, "b", "r-02", 1.3),
    ];
    let rows = rows(&runs);
    let f = findings(&runs, &rows, 0, 5.0);
    let v = &f[0].versus[0];
    assert!(
        v.points.iter().all(|p| p.1.verdict == Verdict::Faster),
        "{:?}",
        v.points
    );
    assert_eq!(v.verdict(), Verdict::Faster);
    assert!(
        f[0].sentence.starts_with("rw: b is faster than a: +")
            && f[0].sentence.contains(
                ") by the geometric mean over 7 client counts (10, 25, 50, 100, 250, 500, 1000);"
            ),
        "{}",
        f[0].sentence
    );
    let json: serde_json::Value =
        serde_json::from_str(&findings_json(&runs, &rows, 0, 5.0)).expect("json");
    assert_eq!(json["schema_version"], 2);
    assert_eq!(json["threshold_pct"], 5.0);
    let entries = json["findings"].as_array().expect("findings");
    assert_eq!(entries.len(), 8, "7 points and their geometric mean");
    let e = &entries[0];
    for key in [
        "workload",
        "checksums",
        "clients",
        "machine",
        "baseline",
        "n",
        "n_baseline",
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "cliffs_delta",
        "verdict",
    ] {
        assert!(e.get(key).is_some(), "{key}: {e}");
    }
    assert_eq!(e["verdict"], "faster");
    assert_eq!(
        (e["n"].as_u64(), e["n_baseline"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(e["cliffs_delta"], 1.0);
    let geo = &entries[7];
    assert_eq!(geo["scope"], "geometric_mean");
    assert!(geo["clients"].is_null());
    assert_eq!(geo["client_counts"].as_array().map(Vec::len), Some(7));
    let html = render_index(
        &runs,
        &[],
        &IndexOptions {
            baseline: 0,
            threshold_pct: None,
            left_out: &[],
            run_pages: &[],
            stores: &["file:///s".to_string()],
        },
    );
    assert_eq!(
        html.matches("class=\"error-bar\"").count(),
        14 * 2,
        "tps and p99 bars of 2 machines × 7 counts"
    );
}

#[test]
fn csv_keeps_every_percentile() {
    let runs = scenario_b();
    let csv = summary_csv(&rows(&runs));
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    for col in [
        "p25_ms", "p50_ms", "p75_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms",
    ] {
        assert!(header.contains(&col), "{col}: {header:?}");
    }
    let first: Vec<&str> = csv
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[0] == "m5d.8xlarge" && f[2] == "rw" && f[4] == "off")
        .expect("m5d rw row");
    let at = |c: &str| first[header.iter().position(|h| *h == c).expect(c)];
    assert_eq!(at("p99_9_ms"), "6.000");
    assert_eq!(at("max_ms"), "12.000");
    assert_eq!(at("p90_ms"), "2.667");
}

#[test]
fn the_checksums_on_state_is_charted_beside_off() {
    // a ran both states (on costs 10 %), b only off.
    let runs = vec![
        run(
            "a",
            "r-01",
            0.0,
            repeated(vec![
                point("rw", "off", 10, 1000.0, 10.0),
                point("rw", "on", 10, 900.0, 11.0),
                point("rw", "off", 100, 2000.0, 20.0),
                point("rw", "on", 100, 1800.0, 22.0),
            ]),
        ),
        run(
            "b",
            "r-02",
            0.0,
            repeated(vec![
                point("rw", "off", 10, 1100.0, 10.0),
                point("rw", "off", 100, 2100.0, 20.0),
            ]),
        ),
    ];
    let html = render_index(
        &runs,
        &[],
        &IndexOptions {
            baseline: 0,
            threshold_pct: None,
            left_out: &[],
            run_pages: &[],
            stores: &["file:///s".to_string()],
        },
    );
    let tps_chart = html
        .split("<figure")
        .find(|f| f.contains("rw: tps by clients"))
        .expect("the tps chart");
    let legend: Vec<&str> = tps_chart
        .split("</span>")
        .skip(1)
        .filter_map(|s| s.split("</li>").next())
        .collect();
    assert_eq!(legend, ["a (checksums off)", "a (checksums on)", "b"]);
    // The on line has the on figures, each with its own error bar.
    assert!(
        tps_chart.contains("<title>a (checksums on): 10 → 900"),
        "{tps_chart}"
    );
    assert!(tps_chart.contains("<title>a (checksums on): 10: 95 % interval"));
    let p99_chart = html
        .split("<figure")
        .find(|f| f.contains("rw: latency p99 by clients"))
        .expect("the p99 chart");
    assert!(p99_chart.contains("</span>a (checksums on)</li>"));
}
