//! `pgappliance check` against valid and broken plans: exit status and the located
//! `PLAN:LINE:COL: key: problem` message for every kind of mistake.

use std::path::Path;
use std::process::Command;

const BASE: &str = r#"[appliance]
name = "t1"
platform = "rocky8"
hourly_price_usd = 1.5
arch = "x86_64"
[postgres]
version = 14
repository = "https://download.postgresql.org/pub/repos/yum/reporpms/EL-8-x86_64/pgdg-redhat-repo-latest.noarch.rpm"
[storage]
devices = ["/dev/nvme0n1", "/dev/nvme1n1"]
layout = "stripe"
mount_point = "/pgdata"

[tuning]
auto = true

[dataset]
scale = 10

[[workloads]]
name = "rw"
clients = [10, 25, 50]
threads = 10
transactions = 1000
"#;

struct Checked {
    code: i32,
    stderr: String,
    stdout: String,
    path: String,
}

fn check_text(text: &str) -> Checked {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, text).expect("write plan");
    check_path(&path)
}

fn check_path(path: &Path) -> Checked {
    let out = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("check")
        .arg(path)
        .output()
        .expect("run pgappliance");
    Checked {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        path: path.display().to_string(),
    }
}

/// Replaces one exact line of the base plan.
fn with(old: &str, new: &str) -> String {
    assert!(BASE.contains(old), "base plan has no {old:?}");
    BASE.replacen(old, new, 1)
}

#[track_caller]
fn assert_error(text: &str, line: usize, col: usize, key: &str, words: &str) {
    let c = check_text(text);
    assert_ne!(c.code, 0, "should fail: {}", c.stdout);
    let want = format!("{}:{line}:{col}: {key}: ", c.path);
    assert!(
        c.stderr
            .lines()
            .any(|l| l.starts_with(&want) && l.contains(words)),
        "expected a line starting {want:?} containing {words:?}, got:\n{}",
        c.stderr
    );
}

#[test]
fn base_plan_is_valid() {
    let c = check_text(BASE);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(c.stdout.contains(": ok: appliance t1"), "{}", c.stdout);
}

/// The pinned sysbench-tpcc archive in third_party/ (the examples' sha256).
fn pinned_archive() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../third_party/sysbench-tpcc/sysbench-tpcc-585e2b8af327d35866aed7e56837c2134d8835a9.tar.gz")
        .canonicalize()
        .expect("the pinned sysbench-tpcc archive")
}

/// An example plan's text, its `tpcc_source` (a path on the operator's machine) pointed at
/// the pinned archive: check reads a `file://` archive.
fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let text = std::fs::read_to_string(path).expect("example");
    match text.lines().find(|l| l.starts_with("tpcc_source = ")) {
        Some(line) => text.replace(
            line,
            &format!("tpcc_source = \"file://{}\"", pinned_archive().display()),
        ),
        None => text,
    }
}

#[test]
fn example_plans_are_valid() {
    for name in [
        "quick.toml",
        "altra-q80.toml",
        "m6gd-8xlarge.toml",
        "m5d-8xlarge.toml",
    ] {
        let c = check_text(&example(name));
        assert_eq!(c.code, 0, "{name}: {}", c.stderr);
    }
}

#[test]
fn a_file_tpcc_source_must_be_here_and_of_the_plan_s_sha256() {
    let text = example("m5d-8xlarge.toml");
    let line_of = |text: &str| {
        text.lines()
            .position(|l| l.starts_with("tpcc_source = "))
            .expect("tpcc_source")
            + 1
    };
    let nowhere = text.replace(
        &format!("file://{}", pinned_archive().display()),
        "file:///nonexistent/sysbench-tpcc.tar.gz",
    );
    assert_error(
        &nowhere,
        line_of(&nowhere),
        15,
        "sysbench.tpcc_source",
        "/nonexistent/sysbench-tpcc.tar.gz is not on this machine: `build` packs the sysbench-tpcc archive from here",
    );
    // Present but another archive: the sha256 names both. (Named .tar.gz: `check` refuses
    // any other name before it looks at the file.)
    let scratch = tempfile::tempdir().expect("tempdir");
    let other_archive = scratch.path().join("other.tar.gz");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../third_party/SHA256SUMS"),
        &other_archive,
    )
    .expect("copy SHA256SUMS");
    let other = text.replace(
        &format!("file://{}", pinned_archive().display()),
        &format!("file://{}", other_archive.display()),
    );
    assert_error(
        &other,
        line_of(&other),
        15,
        "sysbench.tpcc_source",
        "but the plan's [sysbench] tpcc_sha256 is 374dc49e",
    );
    // A directory is not an archive, whatever its name.
    let dir_archive = scratch.path().join("dir.tar.gz");
    std::fs::create_dir(&dir_archive).expect("mkdir");
    let dir = text.replace(
        &format!("file://{}", pinned_archive().display()),
        &format!("file://{}", dir_archive.display()),
    );
    assert_error(
        &dir,
        line_of(&dir),
        15,
        "sysbench.tpcc_source",
        "cannot be read",
    );
}

#[test]
fn unknown_key() {
    assert_error(
        &with("threads = 10\n", "threads = 10\nthreds = 4\n"),
        24,
        1,
        "workloads[0].threds",
        "unknown field `threds`",
    );
}

#[test]
fn unknown_section() {
    assert_error(
        &format!("{BASE}\n[extras]\nx = 1\n"),
        26,
        2,
        "extras",
        "unknown field `extras`",
    );
}

#[test]
fn wrong_type() {
    assert_error(
        &with("scale = 10\n", "scale = \"ten\"\n"),
        18,
        9,
        "dataset.scale",
        "invalid type",
    );
}

#[test]
fn unknown_platform_value() {
    assert_error(
        &with("platform = \"rocky8\"", "platform = \"windows\""),
        3,
        12,
        "appliance.platform",
        "unknown variant",
    );
}

#[test]
fn a_platform_name_in_capitals_is_named_in_lower_case() {
    assert_error(
        &with("platform = \"rocky8\"", "platform = \"Rocky8\""),
        3,
        12,
        "appliance.platform",
        "unknown variant `Rocky8`, expected `rocky8` or `debian12` (names are lower case: \"rocky8\")",
    );
    assert_error(
        &with("arch = \"x86_64\"", "arch = \"X86_64\""),
        5,
        8,
        "appliance.arch",
        "(names are lower case: \"x86_64\")",
    );
    // A name that is simply wrong gets no such hint.
    let c = check_text(&with("platform = \"rocky8\"", "platform = \"windows\""));
    assert!(!c.stderr.contains("lower case"), "{}", c.stderr);
}

#[test]
fn clients_empty() {
    assert_error(
        &with("clients = [10, 25, 50]", "clients = []"),
        22,
        11,
        "workloads[0].clients",
        "clients list is empty",
    );
}

#[test]
fn clients_not_ascending() {
    assert_error(
        &with("clients = [10, 25, 50]", "clients = [10, 50, 25]"),
        22,
        20,
        "workloads[0].clients[2]",
        "strictly ascending: 25 follows 50",
    );
}

#[test]
fn threads_exceed_clients() {
    assert_error(
        &with("clients = [10, 25, 50]", "clients = [5, 25, 50]"),
        23,
        11,
        "workloads[0].threads",
        "threads = 10 exceeds clients = 5",
    );
}

#[test]
fn a_required_value_left_out_is_missing_not_its_default_s_problem() {
    assert_error(
        &with("scale = 10\n", "init = \"client\"\n"),
        17,
        1,
        "dataset.scale",
        "missing: a plan with pgbench workloads needs [dataset] scale",
    );
    let c = check_text(&with("scale = 10\n", "init = \"client\"\n"));
    assert!(!c.stderr.contains("at least 1"), "{}", c.stderr);
    assert_error(
        &with("clients = [10, 25, 50]\n", ""),
        20,
        1,
        "workloads[0].clients",
        "missing: a pgbench workload needs clients",
    );
    assert_error(
        &with("clients = [10, 25, 50]\n", "clients = []\n"),
        22,
        11,
        "workloads[0].clients",
        "clients list is empty",
    );
}

#[test]
fn scale_zero() {
    assert_error(
        &with("scale = 10\n", "scale = 0\n"),
        18,
        9,
        "dataset.scale",
        "at least 1",
    );
}

#[test]
fn both_transactions_and_duration() {
    assert_error(
        &with(
            "transactions = 1000\n",
            "transactions = 1000\nduration = \"60s\"\n",
        ),
        25,
        12,
        "workloads[0].duration",
        "not both",
    );
}

#[test]
fn neither_transactions_nor_duration() {
    assert_error(
        &with("transactions = 1000\n", ""),
        20,
        1,
        "workloads[0]",
        "set transactions (-t) or duration (-T)",
    );
}

#[test]
fn bad_duration() {
    assert_error(
        &with("transactions = 1000\n", "duration = \"ten minutes\"\n"),
        24,
        12,
        "workloads[0].duration",
        "is not a duration",
    );
}

#[test]
fn mount_point_not_absolute() {
    assert_error(
        &with("mount_point = \"/pgdata\"", "mount_point = \"pgdata\""),
        12,
        15,
        "storage.mount_point",
        "not an absolute path",
    );
}

#[test]
fn price_negative() {
    assert_error(
        &with("hourly_price_usd = 1.5", "hourly_price_usd = -1.5"),
        4,
        20,
        "appliance.hourly_price_usd",
        "zero (unknown) or positive",
    );
}

#[test]
fn stripe_needs_two_devices() {
    assert_error(
        &with(
            "devices = [\"/dev/nvme0n1\", \"/dev/nvme1n1\"]",
            "devices = [\"/dev/nvme0n1\"]",
        ),
        11,
        10,
        "storage.layout",
        "at least two devices",
    );
}

#[test]
fn max_connections_below_clients() {
    assert_error(
        &with(
            "auto = true\n",
            "auto = true\n[tuning.settings]\nmax_connections = 20\n",
        ),
        17,
        19,
        "tuning.settings.max_connections",
        "below the largest client count 50",
    );
}

#[test]
fn unsupported_version() {
    assert_error(
        &with("version = 14", "version = 12"),
        7,
        11,
        "postgres.version",
        "not supported",
    );
}

#[test]
fn postgresql_13_to_19_are_accepted_and_the_refusal_names_the_range() {
    for v in [13, 14, 15, 16, 17, 18, 19] {
        let c = check_text(&with("version = 14", &format!("version = {v}")));
        assert_eq!(c.code, 0, "{v}: {}", c.stderr);
        assert!(
            c.stdout.contains(&format!("PostgreSQL {v},")),
            "{}",
            c.stdout
        );
    }
    for v in [12, 20] {
        assert_error(
            &with("version = 14", &format!("version = {v}")),
            7,
            11,
            "postgres.version",
            &format!("PostgreSQL {v} is not supported: use a major version from 13 to 19"),
        );
    }
}

#[test]
fn a_setting_of_another_version_is_refused_naming_both_versions() {
    let text = |v: u32, setting: &str| {
        with("version = 14", &format!("version = {v}")).replace(
            "auto = true\n",
            &format!("auto = true\n[tuning.settings]\n{setting}\n"),
        )
    };
    for setting in [
        "io_method = \"io_uring\"",
        "io_max_combine_limit = \"256kB\"",
        "autovacuum_worker_slots = 16",
        "vacuum_truncate = false",
        "file_copy_method = \"clone\"",
        "md5_password_warnings = false",
        "track_cost_delay_timing = true",
    ] {
        let name = setting.split(' ').next().unwrap_or_default();
        assert_error(
            &text(17, setting),
            17,
            name.len() + 4,
            &format!("tuning.settings.{name}"),
            &format!("{name} arrived in PostgreSQL 18: postgres.version is 17"),
        );
        for v in [18, 19] {
            let c = check_text(&text(v, setting));
            assert_eq!(c.code, 0, "{v} {setting}: {}", c.stderr);
        }
    }
    assert_error(
        &text(17, "old_snapshot_threshold = \"1h\""),
        17,
        26,
        "tuning.settings.old_snapshot_threshold",
        "removed in PostgreSQL 17",
    );
}

#[test]
fn debian_with_a_version_debian_lacks_warns_about_the_repository() {
    let debian = with("platform = \"rocky8\"", "platform = \"debian12\"").replace(REPO_LINE, "");
    let c = check_text(&debian.replace("version = 14", "version = 18"));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(
        warnings(&c).iter().any(|(k, m)| k == "postgres.version"
            && m.contains("hold PostgreSQL 15 only")
            && m.contains("postgresql-18")
            && m.contains("apt.postgresql.org")),
        "{}",
        c.stderr
    );
    let c = check_text(&debian.replace("version = 14", "version = 15"));
    assert!(
        !warnings(&c).iter().any(|(k, _)| k == "postgres.version"),
        "{}",
        c.stderr
    );
    let c = check_text(&debian.replace(
        "version = 14",
        "version = 18\nrepository = \"https://apt.postgresql.org/pub/repos/apt\"",
    ));
    assert!(
        !warnings(&c).iter().any(|(k, _)| k == "postgres.version"),
        "{}",
        c.stderr
    );
}

#[test]
fn values_outside_postgresql_s_own_ranges_are_refused_by_check() {
    for (setting, name, words) in [
        (
            "work_mem = \"1kB\"",
            "work_mem",
            "below PostgreSQL's minimum for work_mem, 64kB",
        ),
        (
            "shared_buffers = \"64kB\"",
            "shared_buffers",
            "minimum for shared_buffers, 128kB",
        ),
        (
            "maintenance_work_mem = \"100kB\"",
            "maintenance_work_mem",
            "minimum for maintenance_work_mem, 1MB",
        ),
        (
            "checkpoint_timeout = \"5s\"",
            "checkpoint_timeout",
            "minimum for checkpoint_timeout, 30s",
        ),
        (
            "checkpoint_timeout = \"2d\"",
            "checkpoint_timeout",
            "maximum for checkpoint_timeout, 1d",
        ),
        (
            "max_wal_size = \"16MB\"",
            "max_wal_size",
            "minimum for max_wal_size, 32MB",
        ),
        (
            "random_page_cost = -1.0",
            "random_page_cost",
            "minimum for random_page_cost, 0",
        ),
        ("work_mem = 10", "work_mem", "minimum for work_mem, 64kB"),
    ] {
        assert_error(
            &format!("{BASE}\n[tuning.settings]\n{setting}\n"),
            27,
            name.len() + 4,
            &format!("tuning.settings.{name}"),
            words,
        );
    }
}

#[test]
fn bad_store_url() {
    assert_error(
        &format!("{BASE}\n[upload]\nstore = \"ftp://x\"\n"),
        27,
        9,
        "upload.store",
        "not a store URL",
    );
}

#[test]
fn syntax_error_is_located() {
    let c = check_text(&with("scale = 10\n", "scale = = 10\n"));
    assert_ne!(c.code, 0);
    assert!(c.stderr.contains(":18:"), "{}", c.stderr);
}

#[test]
fn several_problems_are_all_reported_in_file_order() {
    let text = with("scale = 10\n", "scale = 0\n")
        .replace("mount_point = \"/pgdata\"", "mount_point = \"x\"");
    let c = check_text(&text);
    assert_ne!(c.code, 0);
    let lines: Vec<&str> = c.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", c.stderr);
    assert!(lines[0].contains("storage.mount_point") && lines[1].contains("dataset.scale"));
}

#[test]
fn missing_file_names_it() {
    let c = check_path(Path::new("/nonexistent/plan.toml"));
    assert_ne!(c.code, 0);
    assert!(c.stderr.contains("/nonexistent/plan.toml"), "{}", c.stderr);
}

#[test]
fn paths_that_escape_are_refused_with_their_meaning() {
    for (value, words) in [
        ("/var/..", "means \"/\""),
        ("/.", "means \"/\""),
        ("/var/lib/../../etc", "means \"/etc\""),
        ("/pgdata/", "means \"/pgdata\""),
        ("/srv//pgdata", "means \"/srv/pgdata\""),
        ("/etc/pgdata", "belongs to the operating system"),
        ("/usr", "belongs to the operating system"),
        ("/var", "would hide what the system keeps there"),
    ] {
        assert_error(
            &with(
                "mount_point = \"/pgdata\"",
                &format!("mount_point = \"{value}\""),
            ),
            12,
            15,
            "storage.mount_point",
            words,
        );
    }
    for (value, words) in [
        ("/dev/../etc/passwd", "means \"/etc/passwd\""),
        ("/dev/./nvme1n1", "means \"/dev/nvme1n1\""),
        ("/dev/", "means \"/dev\""),
    ] {
        assert_error(
            &with(
                "devices = [\"/dev/nvme0n1\", \"/dev/nvme1n1\"]",
                &format!("devices = [\"/dev/nvme0n1\", \"{value}\"]"),
            ),
            10,
            28,
            "storage.devices[1]",
            words,
        );
    }
    for (store, words) in [
        (
            "s3://bucket/results/../other",
            "\"results/../other\" has an empty",
        ),
        ("s3://bucket/./results", "\"./results\" has an empty"),
        ("s3://bucket/a//b", "\"a//b\" has an empty"),
        ("file:///var/lib/../../etc", "means \"/etc\""),
    ] {
        assert_error(
            &format!("{BASE}\n[upload]\nstore = \"{store}\"\n"),
            27,
            9,
            "upload.store",
            words,
        );
    }
    // Plainly written ones still pass.
    let ok = format!("{BASE}\n[upload]\nstore = \"s3://bucket/results/2026/\"\n");
    assert_eq!(check_text(&ok).code, 0, "{}", check_text(&ok).stderr);
    let creds = format!(
        "{BASE}\n[upload]\nstore = \"s3://bucket/r\"\ncredentials = \"file\"\ncredentials_file = \"/etc/../root/creds\"\n"
    );
    assert_error(
        &creds,
        29,
        20,
        "upload.credentials_file",
        "means \"/root/creds\"",
    );
}

#[test]
fn every_type_error_is_reported_at_once_in_plain_words() {
    let text = with("scale = 10\n", "scale = \"ten\"\n")
        .replace("threads = 10", "threads = \"many\"")
        .replace("platform = \"rocky8\"", "platform = \"windows\"")
        .replace("clients = [10, 25, 50]", "clients = [10, -25, 50]")
        .replace("auto = true", "auto = true\nbogus = 1")
        .replace("layout = \"stripe\"", "layout = \"stripe\"\nwipe = \"yes\"");
    let c = check_text(&text);
    assert_ne!(c.code, 0);
    let lines: Vec<&str> = c.stderr.lines().collect();
    let expect = [
        ("appliance.platform", "unknown variant `windows`"),
        ("storage.wipe", "expected a boolean"),
        ("tuning.bogus", "unknown field `bogus`"),
        (
            "dataset.scale",
            "expected a whole number from 0 to 4294967295",
        ),
        (
            "workloads[0].clients[1]",
            "expected a whole number from 0 to 4294967295",
        ),
        (
            "workloads[0].threads",
            "expected \"auto\" or a number of threads, found \"many\"",
        ),
    ];
    assert_eq!(lines.len(), expect.len(), "{}", c.stderr);
    for (line, (key, words)) in lines.iter().zip(expect) {
        assert!(
            line.contains(&format!(": {key}: ")),
            "{key} in {line}\n{}",
            c.stderr
        );
        assert!(line.contains(words), "{words} in {line}");
    }
    assert!(!c.stderr.contains("untagged"), "{}", c.stderr);
    assert!(!c.stderr.contains("u32"), "{}", c.stderr);
    // A missing required key and a type error are both reported, nothing about stand-ins.
    let text = with("name = \"rw\"\n", "")
        .replace("hourly_price_usd = 1.5", "hourly_price_usd = \"cheap\"");
    let c = check_text(&text);
    let lines: Vec<&str> = c.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", c.stderr);
    assert!(
        lines[0].contains("appliance.hourly_price_usd"),
        "{}",
        c.stderr
    );
    assert!(lines[1].contains("missing field `name`"), "{}", c.stderr);
    let c = check_text(&with("threads = 10", "threads = [1]"));
    assert!(
        c.stderr
            .contains("a list of threads is for kind = \"sysbench-tpcc\""),
        "{}",
        c.stderr
    );
    let c = check_text(&format!("{BASE}\n[tuning.settings]\nwork_mem = [1, 2]\n"));
    assert!(
        c.stderr.contains("a string, a number or true/false"),
        "{}",
        c.stderr
    );
}

#[test]
fn values_that_would_only_fail_at_run_time_are_refused() {
    assert_error(
        &with("clients = [10, 25, 50]", "clients = [10, 25, 4000000000]"),
        22,
        20,
        "workloads[0].clients[2]",
        "more than the 100000",
    );
    assert_error(
        &with("clients = [10, 25, 50]", "clients = [10, 25, 4294967295]"),
        22,
        20,
        "workloads[0].clients[2]",
        "more than the 100000",
    );
    assert_error(
        &with("clients = [10, 25, 50]", "clients = [10, 25, 4e9]"),
        22,
        20,
        "workloads[0].clients[2]",
        "invalid type",
    );
    assert_error(
        &with("transactions = 1000", "transactions = 3000000000"),
        24,
        16,
        "workloads[0].transactions",
        "at most 2147483647",
    );
    assert_error(
        &with("scale = 10\n", "scale = 3000000000\n"),
        18,
        9,
        "dataset.scale",
        "at most 2147483647",
    );
    assert_error(
        &with("transactions = 1000", "duration = \"100years\""),
        24,
        12,
        "workloads[0].duration",
        "at most 2147483647s",
    );
    assert_error(
        &format!("{BASE}\n[tuning.settings]\nmax_connections = 300000\n"),
        27,
        19,
        "tuning.settings.max_connections",
        "above PostgreSQL's limit",
    );
}

#[test]
fn setting_units_postgresql_would_refuse_are_found_by_check() {
    assert_error(
        &format!("{BASE}\n[tuning.settings]\nshared_buffers = \"128XB\"\n"),
        27,
        18,
        "tuning.settings.shared_buffers",
        "takes a memory unit, one of B, kB, MB, GB, TB (case matters), not \"XB\"",
    );
    assert_error(
        &format!("{BASE}\n[tuning.settings]\ncheckpoint_timeout = \"15 sec\"\n"),
        27,
        22,
        "tuning.settings.checkpoint_timeout",
        "takes a time unit",
    );
    assert_error(
        &format!("{BASE}\n[tuning.settings]\nwork_mem = \"lots\"\n"),
        27,
        12,
        "tuning.settings.work_mem",
        "takes a number with an optional memory unit",
    );
    let c = check_text(&format!(
        "{BASE}\n[tuning.settings]\nwork_mem = \"64 MB\"\ncheckpoint_timeout = \"30min\"\n"
    ));
    assert_eq!(c.code, 0, "{}{}", c.stdout, c.stderr);
}

#[test]
fn an_empty_plan_names_every_required_table_and_wrong_types_are_all_listed() {
    let c = check_text("");
    assert_ne!(c.code, 0);
    // [dataset] is pgbench's and only needed by pgbench workloads (checked once they exist).
    for key in ["appliance", "postgres", "workloads"] {
        assert!(
            c.stderr.contains(&format!("missing field `{key}`")),
            "{key}: {}",
            c.stderr
        );
    }
    assert_eq!(c.stderr.lines().count(), 3, "{}", c.stderr);
    // Required keys of the wrong type are each reported once, with nothing about the
    // stand-ins that let the rest of the plan be checked.
    let c = check_text(
        &with("name = \"t1\"", "name = 1")
            .replace("platform = \"rocky8\"", "platform = 2")
            .replace("hourly_price_usd = 1.5", "hourly_price_usd = \"x\"")
            .replace("arch = \"x86_64\"", "arch = 3"),
    );
    let keys: Vec<&str> = c
        .stderr
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .collect();
    assert_eq!(
        keys,
        [
            "appliance.name",
            "appliance.platform",
            "appliance.hourly_price_usd",
            "appliance.arch"
        ],
        "{}",
        c.stderr
    );
}

#[test]
fn a_plan_larger_than_the_limit_is_refused_unread() {
    // A valid plan padded with comments to one byte over 1 MiB: refused by its size.
    let mut text = BASE.to_string();
    while text.len() <= 1 << 20 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    let c = check_text(&text);
    assert_eq!(c.code, 1, "{}{}", c.stdout, c.stderr);
    assert!(
        c.stderr.contains("cannot read plan") && c.stderr.contains("larger than 1024 KiB"),
        "{}",
        c.stderr
    );
    // An endless device is refused as what it is, not read until memory runs out.
    let c = check_path(Path::new("/dev/zero"));
    assert_eq!(c.code, 1, "{}{}", c.stdout, c.stderr);
    assert!(
        c.stderr
            .contains("/dev/zero is a character device, not a regular file"),
        "{}",
        c.stderr
    );
}

#[test]
fn a_fifo_or_directory_as_the_plan_is_refused_at_once_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("plan.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    for (path, what) in [(fifo.as_path(), "a FIFO"), (dir.path(), "a directory")] {
        // Run to its end with no timer: a program that blocked reading the FIFO would hang,
        // and nextest's per-test bound for FIFO tests (.config/nextest.toml) fails it.
        let out = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
            .arg("check")
            .arg(path)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run pgappliance");
        let (code, stderr) = (out.status.code(), String::from_utf8_lossy(&out.stderr));
        assert_eq!(code, Some(1), "{what}: must end at once: {stderr}");
        assert!(
            stderr.contains(&format!("{} is {what}, not a regular file", path.display())),
            "{stderr}"
        );
    }
}

const REPO_LINE: &str = "repository = \"https://download.postgresql.org/pub/repos/yum/reporpms/EL-8-x86_64/pgdg-redhat-repo-latest.noarch.rpm\"";

#[test]
fn rocky_needs_a_repository() {
    // Without one nothing adds PGDG and the install would fail at boot: the error points
    // at the [postgres] table.
    assert_error(
        &with(REPO_LINE, ""),
        6,
        1,
        "postgres.repository",
        "is required for platform rocky8",
    );
}

#[test]
fn rocky_repository_must_match_the_architecture() {
    assert_error(
        &with("arch = \"x86_64\"", "arch = \"aarch64\""),
        8,
        14,
        "postgres.repository",
        "is for x86_64, but appliance.arch is aarch64",
    );
    assert_error(
        &with(REPO_LINE, &REPO_LINE.replace("EL-8-", "EL-9-")),
        8,
        14,
        "postgres.repository",
        "is for EL 9",
    );
}

#[test]
fn rocky_repository_is_an_rpm_not_a_mirror() {
    assert_error(
        &with(
            REPO_LINE,
            "repository = \"https://mirror.lab/pgdg/14/redhat/rhel-8-x86_64\"",
        ),
        8,
        14,
        "postgres.repository",
        "use `repository_baseurl`",
    );
}

#[test]
fn rocky_mirror_mode() {
    let mirror = with(
        REPO_LINE,
        "repository_baseurl = \"https://mirror.lab/pgdg/14/redhat/rhel-8-x86_64\"\nrepository_gpgkey = \"/etc/pki/rpm-gpg/PGDG-RPM-GPG-KEY-RHEL\"",
    );
    let c = check_text(&mirror);
    assert_eq!(c.code, 0, "{}", c.stderr);
    // dnf's variables are left to dnf.
    let c = check_text(&mirror.replace("rhel-8-x86_64", "rhel-$releasever-$basearch"));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_error(
        &mirror.replace(
            "repository_gpgkey = \"/etc/pki/rpm-gpg/PGDG-RPM-GPG-KEY-RHEL\"",
            "",
        ),
        6,
        1,
        "postgres.repository_gpgkey",
        "is required with `repository_baseurl`",
    );
    assert_error(
        &mirror.replace("rhel-8-x86_64", "rhel-8-aarch64"),
        8,
        22,
        "postgres.repository_baseurl",
        "is for aarch64, but appliance.arch is x86_64",
    );
    assert_error(
        &mirror.replace("\"/etc/pki", "\"etc/pki"),
        9,
        21,
        "postgres.repository_gpgkey",
        "neither a URL",
    );
    assert_error(
        &mirror.replacen("[postgres]\n", &format!("[postgres]\n{REPO_LINE}\n"), 1),
        9,
        22,
        "postgres.repository_baseurl",
        "is exclusive with `repository`",
    );
}

#[test]
fn debian_repository_is_an_apt_base_url() {
    let debian = with("platform = \"rocky8\"", "platform = \"debian12\"");
    assert_error(
        &debian,
        8,
        14,
        "postgres.repository",
        "is an RPM: on debian12",
    );
    let apt = debian.replace(
        REPO_LINE,
        "repository = \"http://apt.lab/pgdg\"\nrepository_gpgkey = \"/k.asc\"",
    );
    assert_error(
        &apt,
        9,
        21,
        "postgres.repository_gpgkey",
        "is for platform rocky8 only",
    );
    let c = check_text(&apt.replace("repository_gpgkey = \"/k.asc\"", ""));
    assert_eq!(c.code, 0, "{}", c.stderr);
}

/// `pgappliance check` with extra arguments.
fn check_args(text: &str, args: &[&str]) -> Checked {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, text).expect("write plan");
    let out = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("check")
        .args(args)
        .arg(&path)
        .output()
        .expect("run pgappliance");
    Checked {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        path: path.display().to_string(),
    }
}

/// The located warning lines of a check (`PLAN:LINE:COL: key: warning: …`).
fn warnings(c: &Checked) -> Vec<(String, String)> {
    c.stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&format!("{}:", c.path))?;
            let (_, rest) = rest.split_once(": ")?;
            let (key, message) = rest.split_once(": warning: ")?;
            Some((key.to_string(), message.to_string()))
        })
        .collect()
}

#[test]
fn an_unknown_key_a_type_error_and_a_validation_error_are_reported_in_one_check() {
    // In one table and across tables: the unknown key, the wrong type and the rule broken
    // next to them are all reported, in file order, by one run.
    let text = with("name = \"t1\"", "name = \"t1\"\ncolour = \"blue\"")
        .replace("scale = 10\n", "scale = \"ten\"\nfillfactor = 5\n")
        .replace("clients = [10, 25, 50]", "clients = [10, 50, 25]")
        .replace("threads = 10", "threads = \"many\"\nthred = 2");
    let c = check_text(&text);
    assert_eq!(c.code, 1, "{}", c.stderr);
    let keys: Vec<&str> = c
        .stderr
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .collect();
    assert_eq!(
        keys,
        [
            "appliance.colour",
            "dataset.scale",
            "dataset.fillfactor",
            "workloads[0].clients[2]",
            "workloads[0].threads",
            "workloads[0].thred",
        ],
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("unknown field `colour`"), "{}", c.stderr);
    assert!(c.stderr.contains("fillfactor must be from 10 to 100"));
    assert!(c.stderr.contains("strictly ascending: 25 follows 50"));
    assert!(c.stdout.is_empty(), "no ok line: {}", c.stdout);
}

#[test]
fn warnings_are_located_printed_and_do_not_fail_check_unless_denied() {
    let text = with("version = 14\n", "")
        .replace(
            "devices = [\"/dev/nvme0n1\", \"/dev/nvme1n1\"]",
            "devices = \"auto\"\nwipe = true\nkind = \"ssd\"",
        )
        .replace("auto = true", "auto = false")
        .replace(
            "transactions = 1000",
            "transactions = 1000\nwarmup = \"0s\"",
        );
    let c = check_text(&text);
    assert_eq!(c.code, 0, "warnings alone pass: {}", c.stderr);
    assert!(c.stdout.contains(": ok: "), "{}", c.stdout);
    let w = warnings(&c);
    let keys: Vec<&str> = w.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "postgres.version",
            "storage.wipe",
            "storage.kind",
            "workloads[0].warmup",
        ],
        "{}",
        c.stderr
    );
    let says = |key: &str, words: &str| {
        assert!(
            w.iter().any(|(k, m)| k == key && m.contains(words)),
            "{key}: {words}: {}",
            c.stderr
        )
    };
    says(
        "postgres.version",
        "an appliance installs PostgreSQL 14 (the rocky8 default)",
    );
    // One warning about auto's drives: wipe does nothing, and drives holding data are
    // skipped (said once, at wipe).
    says("storage.wipe", "no effect with devices = \"auto\"");
    says("storage.wipe", "one holding data is skipped");
    says("storage.kind", "no effect with tuning.auto = false");
    says("workloads[0].warmup", "no effect");
    // Located at the key: `wipe = true` is on line 10 of this plan.
    assert!(
        c.stderr
            .contains(&format!("{}:10:8: storage.wipe: warning: ", c.path)),
        "{}",
        c.stderr
    );
    // --deny-warnings makes them fail the plan, and says why.
    let denied = check_args(&text, &["--deny-warnings"]);
    assert_eq!(denied.code, 1, "{}", denied.stderr);
    assert!(
        denied
            .stderr
            .contains("4 warning(s), denied by --deny-warnings"),
        "{}",
        denied.stderr
    );
    // A plan without warnings passes --deny-warnings.
    let clean = check_args(BASE, &["--deny-warnings"]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert!(clean.stderr.is_empty(), "{}", clean.stderr);
    // Settings without effect on a plan without a data volume or an S3 store.
    let none = with(
        "devices = [\"/dev/nvme0n1\", \"/dev/nvme1n1\"]",
        "devices = \"none\"\nstripe_size = \"128KiB\"\nfilesystem = \"ext4\"",
    ) + "\n[upload]\nstore = \"file:///srv/results\"\nregion = \"eu-west-1\"\n";
    let c = check_text(&none);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let keys: Vec<String> = warnings(&c).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "storage.stripe_size",
            "storage.filesystem",
            "storage.layout",
            "upload.region"
        ],
        "{}",
        c.stderr
    );
    // A stripe size with a single device.
    let single = with(
        "devices = [\"/dev/nvme0n1\", \"/dev/nvme1n1\"]\nlayout = \"stripe\"",
        "devices = [\"/dev/nvme0n1\"]\nlayout = \"single\"\nstripe_size = \"1MiB\"",
    );
    let c = check_text(&single);
    assert_eq!(
        warnings(&c),
        [(
            "storage.stripe_size".to_string(),
            "stripe_size has no effect unless layout = \"stripe\"".to_string()
        )],
        "{}",
        c.stderr
    );
}

#[test]
fn the_summary_names_platform_arch_checksums_storage_and_the_run_time() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let c = check_text(&example("m5d-8xlarge.toml"));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(
        c.stdout.contains(
            ": ok: appliance m5d-8xlarge (rocky8, x86_64), PostgreSQL 13, checksums off then on"
        ),
        "{}",
        c.stdout
    );
    assert!(
        c.stdout
            .contains("storage: stripe (64KiB) over the empty NVMe namespaces found at boot, xfs at /var/lib/pgappliance/pgdata"),
        "{}",
        c.stdout
    );
    // Scenario B: four pgbench points of 600 s (40 min) and eight TPC-C tests of 1 h, each
    // after a 600 s warm-up (9 h 20 min): 10 h before anything else.
    assert!(
        c.stdout.contains(
            ": run time: at least 10 h 0 min of -T over 12 point(s) and 8 warm-up(s); plus the dataset init (scale 200"
        ),
        "{}",
        c.stdout
    );
    assert!(
        c.stdout.contains("up to 128 connections, sysbench-tpcc datasets: 10 x 10 warehouses (sbtest_w10_t10), 10 x 200 warehouses (sbtest_w200_t10)")
            && c.stdout.contains("2 sysbench-tpcc prepare(s)"),
        "{}",
        c.stdout
    );
    assert!(!c.stdout.contains("Rocky8"), "{}", c.stdout);
    // Warm-ups count (one before each round of the workload: two rounds, two warm-ups),
    // -t points are named as such, the quick plan's default version.
    let c = check_text(
        &with(
            "transactions = 1000",
            "duration = \"10min\"\nwarmup = \"5min\"\nrepeats = 2",
        )
        .replace("version = 14\n", ""),
    );
    assert!(
        c.stdout
            .contains("run time: at least 70 min of -T over 6 point(s) and 2 warm-up(s)"),
        "{}",
        c.stdout
    );
    assert!(
        c.stdout.contains(
            "PostgreSQL 14 on an appliance (rocky8 default), newest installed in local mode"
        ),
        "{}",
        c.stdout
    );
    let c = check_path(&examples.join("altra-q80.toml"));
    assert!(
        c.stdout.contains("(rocky8, aarch64)")
            && c.stdout.contains("checksums off")
            && c.stdout
                .contains("stripe (64KiB) over /dev/nvme0n1, /dev/nvme1n1, xfs at /home/PG14")
            && c.stdout.contains(
                "7 point(s) bounded by -t: 1,935,000 transactions, roughly 38 s to 32 min"
            )
            && c.stdout.contains("scale 10000: roughly 30 min")
            && c.stdout.contains(
                "bare metal: the kickstart installs the OS on sda, root logs in over SSH with 1 key(s), 1 workload(s)"
            ),
        "{}",
        c.stdout
    );
}

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests0000000000000000000000 ops@lab";
/// `openssl passwd -6 -salt abcdefgh secretpw`.
const HASH: &str = "$6$abcdefgh$NUEwtPiqb.Qt1V3Yi77GwJrTOkwNudr4Zg70eABz2v9Ul0C0X60dAP4frAE3oTyO0l.m2C1awRDIlv2.2OJY3.";

#[test]
fn a_bare_metal_plan_names_a_way_in_and_its_os_disk() {
    // [install] without keys or a password hash: nobody could log in.
    assert_error(
        &format!("{BASE}[install]\nos_disk = \"sda\"\n"),
        25,
        1,
        "install",
        "must name a way in",
    );
    // Keys, or a console password hash, each do; the default os_disk warns.
    for way in [
        format!("ssh_authorized_keys = [\"{KEY}\"]"),
        format!("root_password_hash = \"{HASH}\""),
        format!("root_password_hash = \"$6$rounds=5000${}\"", &HASH[3..]),
    ] {
        let c = check_text(&format!("{BASE}[install]\n{way}\n"));
        assert_eq!(c.code, 0, "{way}: {}", c.stderr);
        let w = warnings(&c);
        assert_eq!(w.len(), 1, "{}", c.stderr);
        assert_eq!(w[0].0, "install.os_disk");
        assert!(w[0].1.contains("installs the OS on \"sda\""), "{}", w[0].1);
        let c = check_text(&format!("{BASE}[install]\nos_disk = \"nvme2n1\"\n{way}\n"));
        assert!(c.stderr.is_empty(), "{}", c.stderr);
        let said = if way.starts_with("ssh") {
            "the kickstart installs the OS on nvme2n1, root logs in over SSH with 1 key(s),"
        } else {
            "the kickstart installs the OS on nvme2n1, root logs in on the console,"
        };
        assert!(c.stdout.contains(said), "{}", c.stdout);
    }
    // A password typed where the hash belongs is refused and never printed.
    for (bad, words) in [
        (
            "hunter2-secret",
            "may be a plain password (it is not shown here)",
        ),
        (
            "$1$abcdefgh$Hs7aDzMDLwLj5dHKVxXfj.",
            "must start with \"$6$\"",
        ),
        ("$6$abcdefgh$short", "not a well-formed SHA-512 crypt hash"),
        ("$6$rounds=10$abcdefgh$x", "rounds="),
    ] {
        let c = check_text(&format!(
            "{BASE}[install]\nos_disk = \"sda\"\nroot_password_hash = \"{bad}\"\n"
        ));
        assert_eq!(c.code, 1, "{bad}");
        let line = c
            .stderr
            .lines()
            .find(|l| l.contains(": install.root_password_hash: "))
            .unwrap_or_else(|| panic!("{bad}: {}", c.stderr));
        assert!(line.contains(words), "{bad}: {line}");
        assert!(
            !c.stderr.contains(bad),
            "the value is not echoed: {}",
            c.stderr
        );
    }
    // A malformed key is an error; the examples' placeholder is a warning naming what to do.
    assert_error(
        &format!("{BASE}[install]\nos_disk = \"sda\"\nssh_authorized_keys = [\"ssh-ed25519 not_base64!!_at_all_here x\"]\n"),
        27,
        24,
        "install.ssh_authorized_keys[0]",
        "not an OpenSSH public key line",
    );
    let c = check_text(&format!(
        "{BASE}[install]\nos_disk = \"sda\"\nssh_authorized_keys = [\"ssh-ed25519 REPLACE-WITH-YOUR-PUBLIC-KEY you@laptop\"]\n"
    ));
    assert_eq!(c.code, 0, "{}", c.stderr);
    let w = warnings(&c);
    assert_eq!(w.len(), 1, "{}", c.stderr);
    assert_eq!(w[0].0, "install.ssh_authorized_keys[0]");
    assert!(w[0].1.contains("a placeholder, not a key") && w[0].1.contains("refuses"));
    // The kickstart is Rocky 8: a debian12 plan with [install] is refused.
    let debian = with("platform = \"rocky8\"", "platform = \"debian12\"")
        .replace("repository = \"https://download.postgresql.org/pub/repos/yum/reporpms/EL-8-x86_64/pgdg-redhat-repo-latest.noarch.rpm\"\n", "");
    assert_eq!(
        check_text(&debian).code,
        0,
        "{}",
        check_text(&debian).stderr
    );
    assert_error(
        &format!("{debian}[install]\nos_disk = \"sda\"\nssh_authorized_keys = [\"{KEY}\"]\n"),
        24,
        1,
        "install",
        "render a Rocky 8 kickstart, but appliance.platform is debian12",
    );
}

#[test]
fn the_altra_example_is_flagged_until_its_placeholder_key_is_replaced() {
    let altra = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml");
    let text = std::fs::read_to_string(&altra).expect("example");
    let c = check_text(&text);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let keys: Vec<String> = warnings(&c).into_iter().map(|(k, _)| k).collect();
    assert!(
        keys.contains(&"install.ssh_authorized_keys[0]".to_string()),
        "{}",
        c.stderr
    );
    assert!(
        !keys.contains(&"install.os_disk".to_string()),
        "{}",
        c.stderr
    );
    assert_eq!(check_args(&text, &["--deny-warnings"]).code, 1);
}

/// A plan with scenario B's in-memory sysbench-tpcc test (shortened).
const TPCC: &str = r#"[appliance]
name = "t1"
platform = "debian12"
arch = "x86_64"
[postgres]
version = 15
[sysbench]
tpcc_source = "file:///srv/sysbench-tpcc.tar.gz"
tpcc_sha256 = "374dc49eca62d121a5c41d9ca7486d08e5ad0f065b2bbd834a7a069f0c80fee6"
[[workloads]]
name = "tpcc-mem"
kind = "sysbench-tpcc"
tables = 10
scale = 10
threads = [16, 32, 64, 128]
duration = "3600s"
warmup = "600s"
rand_type = "pareto"
use_fk = false
trx_level = "RC"
report_interval_s = 1
"#;

/// [`TPCC`] with its archive pointed at the pinned one (check reads a `file://` archive).
fn tpcc() -> String {
    TPCC.replace(
        "file:///srv/sysbench-tpcc.tar.gz",
        &format!("file://{}", pinned_archive().display()),
    )
}

fn tpcc_with(old: &str, new: &str) -> String {
    let tpcc = tpcc();
    assert!(tpcc.contains(old), "tpcc plan has no {old:?}");
    tpcc.replacen(old, new, 1)
}

#[test]
fn a_sysbench_tpcc_plan_checks_without_a_pgbench_dataset() {
    let c = check_text(&tpcc());
    assert_eq!(c.code, 0, "{}", c.stderr);
    // Four tests on data none of them restores: warned, silent once each test restores.
    assert!(
        c.stderr
            .contains("workloads[0].kind: warning: sysbench-tpcc writes")
            && c.stderr.contains("each of its 4 tests after the first"),
        "{}",
        c.stderr
    );
    let c = check_text(&format!("{}[dataset]\nrestore = \"each-point\"\n", tpcc()));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(!c.stderr.contains("sysbench-tpcc writes"), "{}", c.stderr);
}

#[test]
fn sysbench_tpcc_workloads_are_validated_like_the_rest() {
    let cases: &[(String, &str, &str)] = &[
        (
            tpcc_with("threads = [16, 32, 64, 128]", "clients = [16]"),
            "workloads[0].clients",
            "write threads = [16, 32, …] instead of clients",
        ),
        (
            tpcc_with("threads = [16, 32, 64, 128]", "threads = [16, 64, 32]"),
            "workloads[0].threads[2]",
            "strictly ascending: 32 follows 64",
        ),
        (
            tpcc_with("threads = [16, 32, 64, 128]", "threads = \"auto\""),
            "workloads[0].threads",
            "threads = [16, 32, 64, 128]",
        ),
        (tpcc_with("tables = 10\n", ""), "workloads[0]", "set tables"),
        (
            tpcc_with("scale = 10\n", "scale = 0\n"),
            "workloads[0].scale",
            "at least 1",
        ),
        (
            tpcc_with("rand_type = \"pareto\"", "rand_type = \"zipf\""),
            "workloads[0].rand_type",
            "zipf",
        ),
        (
            tpcc_with("trx_level = \"RC\"", "trx_level = \"RU\""),
            "workloads[0].trx_level",
            "RU",
        ),
        (
            tpcc_with("duration = \"3600s\"", "transactions = 100"),
            "workloads[0].transactions",
            "set duration, not transactions",
        ),
        (
            tpcc_with(
                "use_fk = false",
                "use_fk = false\nstatement_latencies = true",
            ),
            "workloads[0].statement_latencies",
            "a pgbench option",
        ),
        (
            tpcc_with("tpcc_sha256 = \"374dc49e", "tpcc_sha256 = \"74dc49e"),
            "sysbench.tpcc_sha256",
            "not a sha256",
        ),
        (
            tpcc_with("file:///", "ftp://"),
            "sysbench.tpcc_source",
            "not an https://, http:// or file:/// URL",
        ),
    ];
    for (text, key, words) in cases {
        let c = check_text(text);
        assert_eq!(c.code, 1, "{key}: {}", c.stderr);
        assert!(
            c.stderr
                .lines()
                .any(|l| l.contains(&format!(": {key}: ")) && l.contains(words)),
            "{key}: {words} in:\n{}",
            c.stderr
        );
    }
    // Without [sysbench] the workload says where its scripts would come from.
    let no_source = TPCC
        .lines()
        .filter(|l| !l.starts_with("tpcc_") && *l != "[sysbench]")
        .collect::<Vec<_>>()
        .join("\n");
    let c = check_text(&no_source);
    assert!(
        c.stderr.contains("workloads[0].kind: ") && c.stderr.contains("[sysbench] section"),
        "{}",
        c.stderr
    );
    // tpcc keys on a pgbench workload, and a pgbench plan still needs its scale.
    let c = check_text(&with("threads = 10", "threads = 10\nwarehouses = 3"));
    assert_eq!(c.code, 1);
    let c = check_text(&with("threads = 10", "threads = 10\nuse_fk = true"));
    assert!(
        c.stderr
            .contains("use_fk only applies to kind = \"sysbench-tpcc\" workloads"),
        "{}",
        c.stderr
    );
    let c = check_text(&with("scale = 10\n", ""));
    assert!(c.stderr.contains("dataset.scale"), "{}", c.stderr);
}

#[test]
fn a_closed_stdout_ends_check_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, BASE).expect("write plan");
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("check")
        .arg(&path)
        .stdout(std::process::Stdio::from(writer))
        .output()
        .expect("run pgappliance");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(pgappliance::stdout::CLOSED_STDOUT_STATUS),
        "{stderr}"
    );
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
}

#[test]
fn a_url_with_credentials_is_refused_under_any_key_without_showing_them() {
    let cases = [
        (
            format!("{BASE}\n[upload]\nstore = \"s3://bucket/r\"\nendpoint = \"http://user:PASS@minio:9000\"\n"),
            "upload.endpoint",
            "\"http://***@minio:9000\" has a user name or password in it",
        ),
        (
            format!("{BASE}\n[upload]\nstore = \"s3://key:PASS@bucket/r\"\n"),
            "upload.store",
            "\"s3://***@bucket/r\" has a user name or password in it",
        ),
        (
            TPCC.replacen(
                "file:///srv/sysbench-tpcc.tar.gz",
                "https://user:PASS@mirror.lab/sysbench-tpcc.tar.gz",
                1,
            ),
            "sysbench.tpcc_source",
            "\"https://***@mirror.lab/sysbench-tpcc.tar.gz\" has a user name or password",
        ),
        (
            with(
                "repository = \"https://",
                "repository = \"https://u:PASS@",
            ),
            "postgres.repository",
            "has a user name or password in it",
        ),
    ];
    for (text, key, words) in cases {
        let c = check_text(&text);
        assert_eq!(c.code, 1, "{key}: {}", c.stderr);
        assert!(
            c.stderr
                .lines()
                .any(|l| l.contains(&format!(": {key}: ")) && l.contains(words)),
            "{key}: {words}: {}",
            c.stderr
        );
        assert!(
            !c.stderr.contains("PASS") && !c.stdout.contains("PASS"),
            "{key}: the password is shown: {}{}",
            c.stdout,
            c.stderr
        );
    }
}

#[test]
fn a_file_store_that_is_a_regular_file_here_is_refused_by_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("store");
    std::fs::write(&file, b"not a directory").expect("write");
    let quick = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml"),
    )
    .expect("quick.toml");
    for store in [file.clone(), file.join("below")] {
        let text = quick.replace(
            "store = \"file:///var/tmp/pgappliance-store\"",
            &format!("store = \"file://{}\"", store.display()),
        );
        assert_ne!(text, quick);
        let c = check_text(&text);
        assert_eq!(c.code, 1, "{}", c.stderr);
        assert!(
            c.stderr.contains("upload.store") && c.stderr.contains("is not a directory"),
            "{}",
            c.stderr
        );
    }
}

#[test]
fn a_url_with_credentials_on_the_command_line_is_refused_without_showing_them() {
    for args in [
        &["eject", "--bmc", "https://admin:PASS@bmc.lab", "--insecure"][..],
        &["eject", "--bmc=https://admin:PASS@bmc.lab", "--insecure"][..],
        &[
            "collect",
            "--store",
            "s3://bucket/r",
            "--endpoint",
            "http://u:PASS@minio:9000",
            "--out",
            "/nonexistent-out",
        ][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_pgappliance"))
            .args(args)
            .env_remove("PGAPPLIANCE_BMC_PASSWORD")
            .output()
            .expect("run pgappliance");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("has a user name or password in it"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("PASS"),
            "{args:?}: the password is shown: {stderr}"
        );
    }
}

#[test]
fn a_loopback_store_endpoint_warns_that_the_appliance_cannot_reach_it() {
    for endpoint in [
        "http://127.0.0.1:8333",
        "http://localhost:9000",
        "http://[::1]:8333",
    ] {
        let c = check_text(&format!(
            "{BASE}\n[upload]\nstore = \"s3://bucket/r\"\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\n"
        ));
        assert_eq!(c.code, 0, "{}", c.stderr);
        let w = warnings(&c);
        assert!(
            w.iter().any(|(k, m)| k == "upload.endpoint"
                && m.contains(&format!("\"{endpoint}\" is a loopback address"))
                && m.contains("the upload cannot reach it")),
            "{endpoint}: {}",
            c.stderr
        );
    }
    let c = check_text(&format!(
        "{BASE}\n[upload]\nstore = \"s3://bucket/r\"\nendpoint = \"https://objects.lab.example:9000\"\nregion = \"us-east-1\"\n"
    ));
    assert!(warnings(&c).is_empty(), "{}", c.stderr);
}

#[test]
fn a_warning_says_each_thing_once() {
    let c = check_text(&example("altra-q80.toml"));
    let w = warnings(&c);
    let (_, creds) = w
        .iter()
        .find(|(k, _)| k == "upload.credentials_file")
        .expect("the credentials file warning");
    assert_eq!(creds.matches("mode 0600").count(), 1, "{creds}");
    assert_eq!(creds.matches("profile \"default\"").count(), 1, "{creds}");
    // No two warnings of one check say the same.
    let mut messages: Vec<&String> = w.iter().map(|(_, m)| m).collect();
    messages.sort();
    messages.dedup();
    assert_eq!(messages.len(), w.len(), "{}", c.stderr);
    // A file:// store: its endpoint and credentials have no effect, said once each (not
    // also that the loopback endpoint is unreachable, nor that the credentials file is
    // not here).
    let c = check_text(&format!(
        "{BASE}\n[upload]\nstore = \"file:///tmp/results\"\nendpoint = \"http://127.0.0.1:8333\"\ncredentials = \"file\"\ncredentials_file = \"/nonexistent/creds\"\n"
    ));
    let keys: Vec<String> = warnings(&c).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        ["upload.endpoint", "upload.credentials"],
        "{}",
        c.stderr
    );
    assert!(
        c.stderr
            .contains("endpoint has no effect with a file:// store"),
        "{}",
        c.stderr
    );
}

#[test]
fn a_transactions_plan_gets_a_run_time_range() {
    let c = check_text(BASE);
    assert!(
        c.stdout.contains(
            "run time: 3 point(s) bounded by -t: 85,000 transactions, roughly 1 s to 85 s"
        ),
        "{}",
        c.stdout
    );
    let c = check_text(&with("transactions = 1000", "transactions = 1"));
    assert!(
        c.stdout.contains("85 transactions, roughly under 1 s ("),
        "{}",
        c.stdout
    );
}

#[test]
fn adaptive_repeats_give_the_run_time_as_a_range_from_min_to_max_rounds() {
    let c = check_text(&with(
        "transactions = 1000",
        "duration = \"60s\"\nrepeats = { min = 3, max = 10, ci_pct = 2.0 }\n[sweep]\nbetween_rounds = \"restart\"",
    ));
    assert_eq!(c.code, 0, "{}", c.stderr);
    // 3 client counts × 3 rounds of 60 s, to × 10 rounds.
    assert!(
        c.stdout.contains(
            "run time: adaptive repeats: from at least 9 min of -T over 9 point(s) (every point's min rounds) to at least 30 min of -T over 30 point(s) (every point's max rounds); plus"
        ),
        "{}",
        c.stdout
    );
    assert!(
        c.stdout.contains(
            "a PostgreSQL restart with the page cache dropped before each round after the first"
        ),
        "{}",
        c.stdout
    );
}
