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

#[test]
fn example_plans_are_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for name in [
        "quick.toml",
        "altra-q80.toml",
        "m6gd-8xlarge.toml",
        "m5d-8xlarge.toml",
    ] {
        let c = check_path(&examples.join(name));
        assert_eq!(c.code, 0, "{name}: {}", c.stderr);
    }
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
            .contains("expected \"auto\" or a number of threads"),
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
fn an_empty_plan_names_every_required_table_and_wrong_types_are_all_listed() {
    let c = check_text("");
    assert_ne!(c.code, 0);
    for key in ["appliance", "postgres", "dataset", "workloads"] {
        assert!(
            c.stderr.contains(&format!("missing field `{key}`")),
            "{key}: {}",
            c.stderr
        );
    }
    assert_eq!(c.stderr.lines().count(), 4, "{}", c.stderr);
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
    // An endless file is refused the same way, not read until memory runs out.
    let c = check_path(Path::new("/dev/zero"));
    assert_eq!(c.code, 1, "{}{}", c.stdout, c.stderr);
    assert!(c.stderr.contains("larger than 1024 KiB"), "{}", c.stderr);
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
