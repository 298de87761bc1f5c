//! Store credentials on real emulators on loopback: `pgappliance credentials` mints them
//! from moto's STS (moto_server with IAM authentication on, so every request's SigV4
//! signature and the caller's IAM policy are checked), a local run uploads to moto's S3
//! with them, a write outside the plan's prefix is refused, an expired file is reported at
//! run start, and an upload refused with `ExpiredToken` says so in the log and the STATUS
//! line until fresh keys are put in the file, then completes. The lab path: a SeaweedFS
//! key pair given to `pgappliance build --upload-credentials` is what the medium delivers,
//! and a run uploads with the file the user-data writes.

use pgappliance_test_support as harness;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use harness::moto::{element, Moto, ACCOUNT};
use harness::proxy::ExpiredTokenProxy;
use harness::{describe, example, image_binary, local_hashes, stored_hashes, Workdir};
use object_store::aws::AwsCredential;
use pgappliance::upload::store::read_credentials_file;

const BUCKET: &str = "pga-moto";
/// Requests moto takes without keys: the set-up in [`set_up`].
const SETUP_REQUESTS: u32 = 6;

/// Anything signs while authentication is off; moto only reads the credential scope.
fn anyone() -> AwsCredential {
    AwsCredential {
        key_id: "AKIASETUP0000000000".into(),
        secret_key: "setup".into(),
        token: None,
    }
}

/// The operator (an IAM user allowed STS calls) and the role to assume, whose own policy
/// is the session policy pgappliance sends (moto does not apply session policies: given
/// to the role, moto's policy evaluator applies the same document to every S3 request).
fn set_up(moto: &Moto, session_policy: &str) -> (AwsCredential, String) {
    let a = anyone();
    moto.query(
        "iam",
        &a,
        &[
            ("Action", "CreateUser"),
            ("Version", "2010-05-08"),
            ("UserName", "ops"),
        ],
    );
    let keys = moto.query(
        "iam",
        &a,
        &[
            ("Action", "CreateAccessKey"),
            ("Version", "2010-05-08"),
            ("UserName", "ops"),
        ],
    );
    let operator = AwsCredential {
        key_id: element(&keys, "AccessKeyId"),
        secret_key: element(&keys, "SecretAccessKey"),
        token: None,
    };
    moto.query(
        "iam",
        &a,
        &[
            ("Action", "PutUserPolicy"),
            ("Version", "2010-05-08"),
            ("UserName", "ops"),
            ("PolicyName", "mint"),
            (
                "PolicyDocument",
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["sts:GetFederationToken","sts:AssumeRole"],"Resource":"*"}]}"#,
            ),
        ],
    );
    let trust = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"AWS":"arn:aws:iam::{ACCOUNT}:user/ops"}},"Action":"sts:AssumeRole"}}]}}"#
    );
    moto.query(
        "iam",
        &a,
        &[
            ("Action", "CreateRole"),
            ("Version", "2010-05-08"),
            ("RoleName", "pga-upload"),
            ("AssumeRolePolicyDocument", &trust),
        ],
    );
    moto.query(
        "iam",
        &a,
        &[
            ("Action", "PutRolePolicy"),
            ("Version", "2010-05-08"),
            ("RoleName", "pga-upload"),
            ("PolicyName", "session"),
            ("PolicyDocument", session_policy),
        ],
    );
    moto.create_bucket(BUCKET, &a);
    (operator, format!("arn:aws:iam::{ACCOUNT}:role/pga-upload"))
}

/// examples/quick.toml uploading to `s3://pga-moto/campaign` at `endpoint` with the
/// credentials file `file`.
fn moto_plan(dir: &Path, endpoint: &str, file: &Path) -> PathBuf {
    let text = std::fs::read_to_string(example("quick.toml")).expect("quick.toml");
    let text = text.replace(
        "[upload]\nstore = \"file:///var/tmp/pgappliance-store\"\n",
        &format!(
            "[upload]\nstore = \"s3://{BUCKET}/campaign\"\nendpoint = \"{endpoint}\"\ncredentials = \"file\"\ncredentials_file = \"{}\"\n",
            file.display()
        ),
    );
    assert!(
        text.contains("credentials = \"file\""),
        "quick.toml's [upload] changed"
    );
    let p = dir.join("moto.toml");
    std::fs::write(&p, text).expect("plan");
    p
}

fn mint(plan: &Path, out: &Path, operator: &AwsCredential, moto: &Moto, extra: &[&str]) -> Output {
    Command::new(image_binary())
        .arg("credentials")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .args(["--sts-endpoint", &moto.endpoint()])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", &operator.key_id)
        .env("AWS_SECRET_ACCESS_KEY", &operator.secret_key)
        .env_remove("AWS_SESSION_TOKEN")
        .output()
        .expect("pgappliance credentials")
}

fn expires_in(file: &Path) -> Duration {
    let pair = read_credentials_file(file, "default").expect("minted file");
    pair.expires_at
        .expect("an expiry beside the keys")
        .duration_since(SystemTime::now())
        .unwrap_or_default()
}

/// A store client with the keys of a credentials file, under `prefix` of the bucket.
fn store_with(file: &Path, endpoint: &str, prefix: &str) -> pgappliance::upload::Store {
    pgappliance::upload::Store::open(&pgappliance::upload::StoreConfig {
        url: format!("s3://{BUCKET}/{prefix}"),
        endpoint: Some(endpoint.to_string()),
        region: "us-east-1".into(),
        credentials: pgappliance::plan::Credentials::File,
        credentials_file: Some(file.display().to_string()),
        credentials_profile: "default".into(),
        caller: None,
    })
    .expect("open store")
}

fn put(store: &pgappliance::upload::Store, key: &str) -> Result<(), String> {
    harness::runtime().block_on(async {
        use object_store::ObjectStoreExt;
        store
            .objects
            .put(&store.path(&[key]), b"outside".to_vec().into())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

/// Replaces `file` by a copy whose expiry is `expiry` (the keys unchanged).
fn set_expiry(file: &Path, expiry: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("aws_session_expiration") {
                format!("aws_session_expiration = {expiry}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    replace_private(file, &text);
}

fn replace_private(file: &Path, text: &str) {
    let tmp = file.with_extension("next");
    std::fs::write(&tmp, text).expect("write");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::rename(&tmp, file).expect("rename");
}

#[test]
fn minted_credentials_upload_a_run_only_under_the_prefix_and_say_when_they_expired() {
    let scratch = Workdir::new("creds");
    let file = scratch.path().join("s3.credentials");
    // The session policy of the plan, as the mint sends it (the endpoint plays no part).
    let scope_dir = scratch.path().join("scope");
    std::fs::create_dir_all(&scope_dir).expect("mkdir");
    let scope_plan = moto_plan(&scope_dir, "http://127.0.0.1:1", &file);
    let policy = pgappliance::upload::sts::Scope::of_plan(
        &pgappliance::plan::Plan::load(&scope_plan).expect("plan"),
    )
    .expect("scope")
    .session_policy();
    let moto = Moto::start(SETUP_REQUESTS);
    let (operator, role) = set_up(&moto, &policy);
    let proxy = ExpiredTokenProxy::start(moto.port);
    let plan = moto_plan(scratch.path(), &proxy.endpoint(), &file);

    // GetFederationToken: the operator's IAM user keys, up to 36 h.
    let fed = scratch.path().join("federation.credentials");
    let o = mint(&plan, &fed, &operator, &moto, &["--credentials-ttl", "36h"]);
    assert!(o.status.success(), "{}\n{}", describe(&o), moto.log());
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("federated-user/pga-quick"), "{said}");
    let left = expires_in(&fed);
    assert!(
        left > Duration::from_secs(36 * 3600 - 120) && left <= Duration::from_secs(36 * 3600),
        "{left:?}"
    );
    assert_eq!(
        std::fs::metadata(&fed).expect("md").permissions().mode() & 0o777,
        0o600
    );
    // Past STS's limit: refused before anything is sent; an existing file is not replaced.
    let o = mint(&plan, &fed, &operator, &moto, &["--credentials-ttl", "37h"]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("from 15m to 1day 12h"),
        "{}",
        describe(&o)
    );
    let o = mint(&plan, &fed, &operator, &moto, &["--credentials-ttl", "1h"]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("exists"),
        "{}",
        describe(&o)
    );
    // Keys moto does not know, or a wrong secret, are refused by moto's STS: it checks.
    let mut wrong = operator.clone_for_test();
    wrong.secret_key.push('x');
    let o = mint(
        &plan,
        &scratch.path().join("never"),
        &wrong,
        &moto,
        &["--credentials-ttl", "1h"],
    );
    assert!(!o.status.success(), "{}", describe(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("SignatureDoesNotMatch"),
        "{}",
        describe(&o)
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains(&wrong.secret_key));

    // AssumeRole: these keys upload the run.
    let o = mint(
        &plan,
        &file,
        &operator,
        &moto,
        &["--credentials-ttl", "15m", "--role-arn", &role],
    );
    assert!(o.status.success(), "{}\n{}", describe(&o), moto.log());
    assert!(String::from_utf8_lossy(&o.stdout).contains("assumed-role/pga-upload/pga-quick"));
    let left = expires_in(&file);
    assert!(
        left > Duration::from_secs(13 * 60) && left <= Duration::from_secs(15 * 60),
        "{left:?}"
    );
    let minted = read_credentials_file(&file, "default").expect("minted");
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&minted.secret_access_key));

    // `build --mint-credentials` mints the same way and delivers them in the user-data
    // (0600), never in the payload.
    let built = scratch.path().join("build");
    let o = Command::new(image_binary())
        .arg("build")
        .arg(&plan)
        .arg("--out")
        .arg(&built)
        .arg("--daemon-binary")
        .arg(harness::stand_in_daemon(scratch.path()))
        .args([
            "--payload-url",
            "https://h.example/p.tar.gz",
            "--mint-credentials",
            "--credentials-ttl",
            "1h",
            "--role-arn",
            &role,
            "--sts-endpoint",
            &moto.endpoint(),
        ])
        .env("AWS_ACCESS_KEY_ID", &operator.key_id)
        .env("AWS_SECRET_ACCESS_KEY", &operator.secret_key)
        .env_remove("AWS_SESSION_TOKEN")
        .output()
        .expect("build");
    assert!(o.status.success(), "{}\n{}", describe(&o), moto.log());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(
            "minted by STS for arn:aws:sts::123456789012:assumed-role/pga-upload/pga-quick"
        ),
        "{}",
        describe(&o)
    );
    let ud_path = built.join("user-data.yaml");
    let ud = std::fs::read_to_string(&ud_path).expect("user-data");
    assert_eq!(
        std::fs::metadata(&ud_path)
            .expect("md")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert!(
        ud.contains("aws_session_token = ") && ud.contains("aws_session_expiration = "),
        "{ud}"
    );
    let payload = std::fs::read(built.join("payload.tar.gz")).expect("payload");
    let mut raw = Vec::new();
    gunzip(&payload, &mut raw);
    assert!(!String::from_utf8_lossy(&raw).contains("aws_session_token"));

    let w = Workdir::new("creds-run");
    let out = Command::new(harness::daemon_binary())
        .args(["run", "--local", "--plan"])
        .arg(&plan)
        .arg("--workdir")
        .arg(w.path())
        .env("RUST_LOG", "info")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}\n{}", describe(&out), moto.log());
    let run_id = w
        .run_dir()
        .file_name()
        .expect("id")
        .to_string_lossy()
        .into_owned();
    let key = format!("quick/{}/{run_id}", pgappliance::upload::machine_id());
    let store = store_with(&file, &moto.endpoint(), "campaign");
    let mut stored = stored_hashes(&store, &key);
    assert!(
        stored.remove("manifest.json").is_some(),
        "the manifest is there"
    );
    assert_eq!(stored, local_hashes(&w.run_dir()), "the run arrived whole");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(&minted.secret_access_key));
    assert!(!text.contains(minted.session_token.as_deref().expect("token")));

    // Outside the plan's prefix and appliance: refused (moto applies the session policy
    // document). A wrong secret is refused too, so the upload above was checked.
    for outside in ["other", "campaign/another-appliance", ""] {
        let e = put(&store_with(&file, &moto.endpoint(), outside), "x.txt").expect_err(outside);
        assert!(
            e.contains("AccessDenied") || e.contains("403"),
            "{outside}: {e}"
        );
    }
    assert_eq!(put(&store, "quick/probe.txt"), Ok(()), "inside the prefix");
    let forged = scratch.path().join("forged.credentials");
    replace_private(
        &forged,
        &std::fs::read_to_string(&file)
            .expect("read")
            .replace(&minted.secret_access_key, "not-the-secret"),
    );
    let e = put(
        &store_with(&forged, &moto.endpoint(), "campaign"),
        &format!("{key}/forged.txt"),
    )
    .expect_err("a wrong secret");
    assert!(
        e.contains("SignatureDoesNotMatch") || e.contains("403"),
        "{e}"
    );

    // Run start with an expired file: reported, and the run goes on.
    set_expiry(&file, "2020-01-01T00:00:00Z");
    let again = Command::new(harness::daemon_binary())
        .args(["run", "--local", "--plan"])
        .arg(&plan)
        .arg("--workdir")
        .arg(w.path())
        .env("RUST_LOG", "info")
        .output()
        .expect("run");
    assert!(again.status.success(), "{}", describe(&again));
    let expired_line = format!(
        "the store credentials in {} expired at 2020-01-01T00:00:00Z; put fresh ones there",
        file.display()
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains(&expired_line),
        "{}",
        describe(&again)
    );

    // The store refuses the token as expired: the log and STATUS say so while the upload
    // retries; fresh keys put in the file let it finish.
    proxy.expire(minted.session_token.as_deref().expect("token"));
    let notify_dir = tempfile::tempdir().expect("tmp");
    let notify_path = notify_dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("notify socket");
    notify.set_nonblocking(true).expect("nonblocking");
    let log_path = scratch.path().join("upload.log");
    let mut upload = Command::new(harness::daemon_binary())
        .args(["upload", "--workdir"])
        .arg(w.path())
        .env("RUST_LOG", "info")
        .env("NOTIFY_SOCKET", &notify_path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("upload");
    let mut statuses = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !statuses.iter().any(|s: &String| s.contains(&expired_line)) {
        assert!(
            Instant::now() < deadline,
            "no STATUS about the expiry: {statuses:?}\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        let mut buf = [0u8; 4096];
        while let Ok(n) = notify.recv(&mut buf) {
            statuses.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(proxy.refused.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(upload.try_wait().expect("wait").is_none(), "still retrying");
    let fresh = scratch.path().join("fresh.credentials");
    let o = mint(
        &plan,
        &fresh,
        &operator,
        &moto,
        &["--credentials-ttl", "15m", "--role-arn", &role],
    );
    assert!(o.status.success(), "{}", describe(&o));
    std::fs::rename(&fresh, &file).expect("put fresh ones there");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = upload.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = upload.kill();
            panic!(
                "the upload did not finish with fresh keys:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut log = String::new();
    std::fs::File::open(&log_path)
        .expect("log")
        .read_to_string(&mut log)
        .expect("read");
    assert!(status.success(), "{log}");
    assert!(log.contains(&expired_line), "{log}");
    assert!(log.contains("the credentials file changed"), "{log}");
    assert!(!log.contains(&minted.secret_access_key));
}

/// The lab path on SeaweedFS (no STS): the operator's key pair file, given to `build`,
/// is what the user-data writes (the ISO carries the same text: tests of image/tests/build.rs);
/// a run uploads with it.
#[test]
fn a_lab_key_pair_delivered_on_the_medium_uploads_to_seaweedfs() {
    let weed = harness::seaweed::SeaweedFs::start();
    let scratch = Workdir::new("creds-lab");
    // The operator's file: another profile beside the plan's "lab".
    let operator_file = scratch.path().join("operator.credentials");
    replace_private(
        &operator_file,
        &format!(
            "[default]\naws_access_key_id = SOMEONEELSE\naws_secret_access_key = not-this-one\n[lab]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            weed.access_key, weed.secret_key
        ),
    );
    let target = scratch.path().join("etc/s3.credentials");
    let text = std::fs::read_to_string(example("quick.toml")).expect("quick.toml").replace(
        "[upload]\nstore = \"file:///var/tmp/pgappliance-store\"\n",
        &format!(
            "[upload]\nstore = \"s3://{}/lab\"\nendpoint = \"{}\"\ncredentials = \"file\"\ncredentials_file = \"{}\"\ncredentials_profile = \"lab\"\n",
            harness::seaweed::BUCKET,
            weed.endpoint(),
            target.display()
        ),
    );
    let plan = scratch.path().join("lab.toml");
    std::fs::write(&plan, text).expect("plan");
    let out = scratch.path().join("build");
    let o = Command::new(image_binary())
        .arg("build")
        .arg(&plan)
        .arg("--out")
        .arg(&out)
        .arg("--daemon-binary")
        .arg(harness::stand_in_daemon(scratch.path()))
        .args([
            "--payload-url",
            "https://h.example/p.tar.gz",
            "--upload-credentials",
        ])
        .arg(&operator_file)
        .output()
        .expect("build");
    assert!(o.status.success(), "{}", describe(&o));
    // What the user-data writes is the file the appliance reads.
    let ud = std::fs::read_to_string(out.join("user-data.yaml")).expect("user-data");
    let body: String = ud
        .split("    content: |\n")
        .nth(2)
        .expect("the credentials entry")
        .lines()
        .take_while(|l| l.starts_with("      "))
        .map(|l| format!("{}\n", &l[6..]))
        .collect();
    std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
    replace_private(&target, &body);
    assert!(!body.contains("not-this-one"), "only the plan's profile");
    let w = Workdir::new("creds-lab-run");
    let run = Command::new(harness::daemon_binary())
        .args(["run", "--local", "--plan"])
        .arg(&plan)
        .arg("--workdir")
        .arg(w.path())
        .env("RUST_LOG", "info")
        .output()
        .expect("run");
    assert!(run.status.success(), "{}", describe(&run));
    let run_id = w
        .run_dir()
        .file_name()
        .expect("id")
        .to_string_lossy()
        .into_owned();
    let key = format!("quick/{}/{run_id}", pgappliance::upload::machine_id());
    let mut stored = stored_hashes(&weed.store("lab"), &key);
    assert!(stored.remove("manifest.json").is_some());
    assert_eq!(stored, local_hashes(&w.run_dir()));
    assert!(!describe(&run).contains(&weed.secret_key));
}

trait CloneForTest {
    fn clone_for_test(&self) -> AwsCredential;
}

impl CloneForTest for AwsCredential {
    fn clone_for_test(&self) -> AwsCredential {
        AwsCredential {
            key_id: self.key_id.clone(),
            secret_key: self.secret_key.clone(),
            token: self.token.clone(),
        }
    }
}

/// gunzip with the system's gzip (this package does not depend on flate2); the input is
/// written from another thread so neither pipe can fill up and stall both sides.
fn gunzip(gz: &[u8], out: &mut Vec<u8>) {
    use std::io::Write;
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = gz.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let o = child.wait_with_output().expect("gzip");
    writer.join().expect("writer").expect("write");
    assert!(o.status.success());
    out.extend_from_slice(&o.stdout);
}
