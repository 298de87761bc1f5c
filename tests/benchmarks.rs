//! The benchmark commands run and print their result line (at a tiny size; the figures
//! themselves are in docs/performance.md, not asserted).

use pgappliance_test_support as harness;

use std::process::Command;

use harness::{describe, Workdir};

fn last_line(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .to_string()
}

fn number_after(line: &str, prefix: &str) -> f64 {
    line.strip_prefix(prefix)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("\"{line}\" is not \"{prefix}<number>\""))
}

#[test]
fn bench_overhead_prints_the_harness_ratio() {
    let w = Workdir::new("bench-overhead");
    let out = Command::new(harness::daemon_binary())
        .args(["bench", "overhead", "--rounds", "1", "--plan"])
        .arg(harness::workspace().join("tests/plans/tiny-bench.toml"))
        .arg("--workdir")
        .arg(w.path())
        .output()
        .expect("bench overhead");
    assert!(out.status.success(), "{}", describe(&out));
    let ratio = number_after(&last_line(&out), "harness tps ratio: ");
    assert!(ratio > 0.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("daemon CPU per minute of sweep: "),
        "{stdout}"
    );
    assert_eq!(stdout.matches("round 1 p00").count(), 2, "{stdout}");
}

#[test]
fn bench_upload_prints_the_ratio_against_awscli() {
    let weed = harness::seaweed::SeaweedFs::start();
    let w = Workdir::new("bench-upload");
    let mut cmd = Command::new(harness::daemon_binary());
    cmd.args([
        "bench",
        "upload",
        "--size-mib",
        "12",
        "--part-size-mib",
        "5",
    ])
    .args([
        "--store",
        &format!("s3://{}/bench", harness::seaweed::BUCKET),
    ])
    .arg("--aws")
    .arg(harness::seaweed::venv().join("bin/aws"))
    .arg("--workdir")
    .arg(w.path());
    for (k, v) in weed.env() {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("bench upload");
    assert!(out.status.success(), "{}", describe(&out));
    let ratio = number_after(&last_line(&out), "upload throughput vs awscli: ");
    assert!(ratio > 0.0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("peak RSS"));
}

#[test]
fn bench_init_prints_the_speedup() {
    let w = Workdir::new("bench-init");
    let out = Command::new(harness::daemon_binary())
        .args([
            "bench",
            "init",
            "--scale",
            "1",
            "--rounds",
            "1",
            "--workers",
            "1",
            "--plan",
        ])
        .arg(harness::workspace().join("tests/plans/tiny-bench.toml"))
        .arg("--workdir")
        .arg(w.path())
        .output()
        .expect("bench init");
    assert!(out.status.success(), "{}", describe(&out));
    let speedup = number_after(&last_line(&out), "init speedup vs best pgbench mode: ");
    assert!(speedup > 0.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for label in [
        "pgbench -i (client-side): ",
        "pgbench -i -I dtGvp (server-side): ",
        "parallel, 1 worker(s): ",
    ] {
        assert!(stdout.contains(label), "{label} missing:\n{stdout}");
    }
}

#[test]
fn the_init_floor_script_prints_each_phase_and_the_ceiling() {
    let out = Command::new("bash")
        .arg(harness::workspace().join("tools/bench-init-floor"))
        .arg("1")
        .output()
        .expect("tools/bench-init-floor");
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for phase in [
        "pgbench -i -s 1: ",
        "COPY FREEZE of 100000 rows",
        "VACUUM (FREEZE, ANALYZE): ",
        "primary key, no parallel workers: ",
        "sum of the floors",
    ] {
        assert!(stdout.contains(phase), "no \"{phase}\" in {stdout}");
    }
    let ceiling = number_after(&last_line(&out), "init speedup ceiling vs pgbench -i: ");
    assert!(ceiling > 0.0);

    let bad = Command::new("bash")
        .arg(harness::workspace().join("tools/bench-init-floor"))
        .arg("fifty")
        .output()
        .expect("tools/bench-init-floor");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("scale must be a positive integer, got 'fifty'"));
}

#[test]
fn bench_collect_prints_the_ratio_against_awscli_and_the_incremental_share() {
    let w = Workdir::new("bench-collect");
    let venv = harness::seaweed::venv();
    let out = Command::new(harness::image_binary())
        .args([
            "bench",
            "collect",
            "--runs",
            "12",
            "--machines",
            "3",
            "--weed",
        ])
        .arg(venv.join("bin/weed"))
        .arg("--aws")
        .arg(venv.join("bin/aws"))
        .arg("--workdir")
        .arg(w.path())
        .output()
        .expect("bench collect");
    assert!(out.status.success(), "{}", describe(&out));
    let line = last_line(&out);
    let rest = line
        .strip_prefix("collect vs awscli sync: ")
        .unwrap_or_else(|| panic!("last line: {line}"));
    let (ratio, incremental) = rest
        .split_once(", incremental: ")
        .unwrap_or_else(|| panic!("last line: {line}"));
    let ratio: f64 = ratio.parse().expect("ratio");
    let incremental: f64 = incremental
        .strip_suffix(" of first")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("last line: {line}"));
    assert!(ratio > 0.0 && incremental > 0.0, "{line}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The measured collects did what they claim: every run fetched first, then only the
    // one added run (1 % of 12, rounded up), the rest from the cache.
    assert!(
        stdout.contains("first collect: ") && stdout.contains("(fetched 12 runs)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(fetched 1, 12 from the cache)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(24 files)"),
        "awscli synced each run's two objects: {stdout}"
    );
    let left: Vec<_> = std::fs::read_dir(w.path()).expect("workdir").collect();
    assert!(
        left.is_empty(),
        "the benchmark removes what it made: {left:?}"
    );
}

#[test]
fn bench_restore_prints_the_local_and_store_speedups() {
    let w = Workdir::new("bench-restore");
    let out = Command::new(harness::daemon_binary())
        .args([
            "bench",
            "restore",
            "--scale",
            "1",
            "--scale",
            "2",
            "--rounds",
            "1",
            "--threads",
            "2",
            "--plan",
        ])
        .arg(harness::workspace().join("tests/plans/tiny-bench.toml"))
        .arg("--workdir")
        .arg(w.path())
        .env("PGAPPLIANCE_VENV", harness::seaweed::venv())
        .output()
        .expect("bench restore");
    assert!(out.status.success(), "{}", describe(&out));
    let last = last_line(&out);
    let rest = last
        .strip_prefix("restore speedup vs best pgbench mode: ")
        .unwrap_or_else(|| panic!("last line: {last}"));
    let (local, store) = rest
        .split_once(" local, ")
        .and_then(|(l, s)| {
            Some((
                l.parse::<f64>().ok()?,
                s.strip_suffix(" store")?.parse::<f64>().ok()?,
            ))
        })
        .unwrap_or_else(|| panic!("last line: {last}"));
    assert!(local > 0.0 && store > 0.0, "{last}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let growth = format!(
        "\nlocal restore growth from scale 1 to 2 on {}: ",
        w.path().display()
    );
    for label in [
        "pgbench -i (client-side): ",
        "local snapshot restore: ",
        "object store restore: ",
        "object store restore into a new directory: ",
        "floor: making the data directory's files",
        "object store restore into a new directory (an appliance's first): speedup ",
        "floor: write + fsync",
        "zstd-3: ",
        "gzip-1: ",
        "object store restore, one thread: ",
        "scale 2: speedup vs best pgbench mode ",
        "\nstore restore threads 2 vs 1: ",
        "\nfirst restore speedup: ",
        growth.as_str(),
    ] {
        assert!(stdout.contains(label), "{label} missing:\n{stdout}");
    }
    assert!(!w
        .path()
        .join("snapshots")
        .read_dir()
        .is_ok_and(|mut d| d.next().is_some()));
    // Nothing of the restores is left beside the data directory.
    let cluster: Vec<String> = std::fs::read_dir(w.path().join("cluster"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !cluster
            .iter()
            .any(|n| n.ends_with(".restoring") || n.ends_with("-floor")),
        "{cluster:?}"
    );
}
