//! The plan's credentials file, checked where it will be read: by `pgappliance check` when
//! the file is on the checking machine (a warning when it is not: it may be provisioned
//! later) and by `pgapplianced run` before its first step. The plan's profile is used; a
//! missing profile, an ambiguous file, a file others can read are refused naming the file
//! and the profile, never a secret.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const SECRET: &str = "wJalrXUtnFEMI-secret-value";

fn plan(creds: &Path, profile: Option<&str>, credentials: &str) -> String {
    let profile = profile
        .map(|p| format!("credentials_profile = \"{p}\"\n"))
        .unwrap_or_default();
    let quick = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quick.toml"),
    )
    .expect("examples/quick.toml");
    let head = &quick[..quick.find("[upload]").expect("[upload] in quick.toml")];
    format!(
        "{head}[upload]\nstore = \"s3://bucket/prefix\"\nendpoint = \"http://127.0.0.1:9\"\ncredentials = \"{credentials}\"\ncredentials_file = \"{}\"\n{profile}",
        creds.display()
    )
}

const TWO_PROFILES: &str = "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = wJalrXUtnFEMI-secret-value\n\n[lab]\naws_access_key_id = AKIALAB\naws_secret_access_key = wJalrXUtnFEMI-secret-value\n";

fn check(dir: &Path, text: &str) -> Output {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).expect("plan");
    Command::new(env!("CARGO_BIN_EXE_pgappliance"))
        .arg("check")
        .arg(&p)
        .output()
        .expect("pgappliance")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn write_creds(path: &Path, body: &str, mode: u32) {
    std::fs::write(path, body).expect("creds");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn check_reads_the_file_when_it_is_here_and_uses_the_plans_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let creds = dir.path().join("credentials");

    // Not on this machine: a warning, the plan is still valid.
    let out = check(dir.path(), &plan(&creds, Some("lab"), "file"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("warning: credentials file") && text(&out).contains("\"lab\""),
        "{}",
        text(&out)
    );

    write_creds(&creds, TWO_PROFILES, 0o600);
    for profile in [Some("lab"), None] {
        let out = check(dir.path(), &plan(&creds, profile, "file"));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    // A profile the file does not have.
    let out = check(dir.path(), &plan(&creds, Some("prod"), "file"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains(&creds.display().to_string()) && t.contains("no profile \"prod\""),
        "{t}"
    );
    assert!(!t.contains(SECRET), "{t}");
    // Ambiguous: the same profile twice.
    write_creds(
        &creds,
        &format!("{TWO_PROFILES}[lab]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = x\n"),
        0o600,
    );
    let out = check(dir.path(), &plan(&creds, Some("lab"), "file"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("profile \"lab\" appears twice"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(SECRET));
    // Readable by others.
    write_creds(&creds, TWO_PROFILES, 0o644);
    let out = check(dir.path(), &plan(&creds, None, "file"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("chmod 600"), "{}", text(&out));
    // A profile without a credentials file to read it from.
    let out = check(
        dir.path(),
        &plan(&creds, Some("lab"), "environment").replace("credentials_file", "# credentials_file"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("credentials_profile only applies"),
        "{}",
        text(&out)
    );
}

#[test]
fn run_refuses_a_bad_credentials_file_before_its_first_step() {
    let daemon = Path::new(env!("CARGO_BIN_EXE_pgappliance")).with_file_name("pgapplianced");
    if !daemon.exists() {
        panic!(
            "{} is not built: run with `cargo test --workspace`",
            daemon.display()
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let creds = dir.path().join("credentials");
    write_creds(&creds, TWO_PROFILES, 0o600);
    let plan_path = dir.path().join("plan.toml");
    std::fs::write(&plan_path, plan(&creds, Some("prod"), "file")).expect("plan");
    let work = dir.path().join("work");
    let out = Command::new(&daemon)
        .args(["run", "--local"])
        .arg(&plan_path)
        .arg("--workdir")
        .arg(&work)
        .output()
        .expect("pgapplianced");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("no profile \"prod\"") && t.contains(&creds.display().to_string()),
        "{t}"
    );
    assert!(!t.contains(SECRET), "{t}");
    assert!(!work.join("cluster").exists(), "no step ran: {t}");
    assert!(
        !work.join("state.json").exists() || !t.contains("step "),
        "{t}"
    );
}
