//! Results reach a real S3-compatible store (SeaweedFS on loopback) complete and verified:
//! plain upload, wrong secret refused, store down until after the run ends, the daemon
//! killed in the middle of a multipart upload, and a proxy injecting 503s and cut
//! connections. In every case each object's sha256 in the store equals the local file's.

use pgappliance_test_support as harness;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use harness::proxy::{CorruptingProxy, FaultyProxy};
use harness::seaweed::{generate_keys, Ports, SeaweedFs, BUCKET};
use harness::{describe, example, local_hashes, stored_hashes, Workdir};

/// One store at a time: weed mini is heavy for a 2-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn key_of(w: &Workdir) -> String {
    let run_id = w
        .run_dir()
        .file_name()
        .expect("run id")
        .to_string_lossy()
        .into_owned();
    format!("quick/{}/{run_id}", pgappliance::upload::machine_id())
}

/// Everything local arrived, plus the manifest, which lists exactly the local files.
fn assert_arrived(store: &pgappliance::upload::Store, w: &Workdir) {
    let key = key_of(w);
    let mut remote = stored_hashes(store, &key);
    let local = local_hashes(&w.run_dir());
    let manifest_entry = remote
        .remove("manifest.json")
        .expect("manifest.json is in the store");
    assert_eq!(remote, local, "store and run dir differ");
    let rt = harness::runtime();
    let bytes = rt.block_on(async {
        use object_store::ObjectStoreExt;
        store
            .objects
            .get(&store.path(&[&key, "manifest.json"]))
            .await
            .expect("get manifest")
            .bytes()
            .await
            .expect("bytes")
    });
    assert_eq!(bytes.len() as u64, manifest_entry.0);
    let m: pgappliance::upload::Manifest = serde_json::from_slice(&bytes).expect("manifest");
    let listed: std::collections::BTreeMap<String, (u64, String)> = m
        .objects
        .into_iter()
        .map(|o| (o.path, (o.size, o.sha256)))
        .collect();
    assert_eq!(
        listed, local,
        "manifest lists every object with size and sha256"
    );
}

fn upload_cmd(w: &Workdir, store: &str, part_mib: u32) -> Command {
    let mut c = Command::new(harness::daemon_binary());
    c.args(["upload", "--workdir"]).arg(w.path()).args([
        "--store",
        store,
        "--part-size-mib",
        &part_mib.to_string(),
    ]);
    c
}

fn with_env(mut c: Command, env: &[(&str, String)]) -> Command {
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn finished_quick_run(tag: &str) -> Workdir {
    let w = Workdir::new(tag);
    let out = w.run(&example("quick.toml"));
    assert!(out.status.success(), "{}", describe(&out));
    w
}

fn write_random(path: &Path, mib: usize) {
    let mut f = std::fs::File::open("/dev/urandom").expect("urandom");
    let mut out = std::fs::File::create(path).expect("create");
    std::io::copy(
        &mut std::io::Read::take(&mut f, (mib as u64) << 20),
        &mut out,
    )
    .expect("copy");
}

fn no_secret_anywhere(dir: &Path, secret: &str, outputs: &[&Output]) {
    for rel in pgappliance::upload::list_files(dir).expect("list") {
        let bytes = std::fs::read(dir.join(&rel)).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the secret key appears in {rel}"
        );
    }
    for out in outputs {
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(secret),
            "secret on stdout"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains(secret),
            "secret on stderr"
        );
    }
}

#[test]
fn run_arrives_in_s3_complete_and_a_wrong_secret_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weed = SeaweedFs::start();
    let w = Workdir::new("s3");
    let store_url = format!("s3://{BUCKET}/plain");
    let out = with_env(
        w.run_command_to(&example("quick.toml"), &store_url),
        &weed.env(),
    )
    .output()
    .expect("run");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stored:"));
    let store = weed.store("plain");
    assert_arrived(&store, &w);

    // Uploading again is a no-op: the manifest is there.
    let before = stored_hashes(&store, &key_of(&w));
    let again = with_env(upload_cmd(&w, &store_url, 8), &weed.env())
        .output()
        .expect("upload");
    assert!(again.status.success(), "{}", describe(&again));
    assert_eq!(before, stored_hashes(&store, &key_of(&w)));

    // The server refuses a wrong secret, and the daemon stops with that, naming no secret.
    let mut env = weed.env();
    env[1].1 = "not-the-secret-0123456789".to_string();
    let started = Instant::now();
    let refused = with_env(upload_cmd(&w, &format!("s3://{BUCKET}/other"), 8), &env)
        .output()
        .expect("upload");
    assert!(!refused.status.success(), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("403"), "{err}");
    // One line: the store's answer once (not the library's chain with its XML body at each
    // level), the key it refused and where it came from.
    assert!(
        !err.contains("<?xml")
            && err.matches("SignatureDoesNotMatch").count() == 1
            && err.contains(&format!("refused key {}", weed.access_key)),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "refusal is not retried for minutes (a bound, not a timing: a retried refusal takes forever)"
    );
    assert!(stored_hashes(&store, "")
        .keys()
        .all(|k| !k.starts_with("other")));
    no_secret_anywhere(w.path(), &weed.secret_key, &[&out, &again, &refused]);
    no_secret_anywhere(w.path(), "not-the-secret-0123456789", &[&refused]);
}

#[test]
fn store_down_when_the_upload_starts_arrives_once_it_is_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ports = Ports::pick();
    let keys = generate_keys();
    let endpoint = format!("http://127.0.0.1:{}", ports.s3);
    let w = Workdir::new("s3down");
    let log = w.path().join("daemon.log");
    let env = vec![
        ("AWS_ACCESS_KEY_ID", keys.0.clone()),
        ("AWS_SECRET_ACCESS_KEY", keys.1.clone()),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1".to_string()),
    ];
    let mut child = with_env(
        w.run_command_to(&example("quick.toml"), &format!("s3://{BUCKET}/late")),
        &env,
    )
    // This run waits for the store however long it takes to come up.
    .args(["--upload-timeout", "1h"])
    .stdout(Stdio::null())
    .stderr(Stdio::from(std::fs::File::create(&log).expect("log")))
    .spawn()
    .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(240);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("unreachable")
    {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "daemon ended early"
        );
        assert!(
            Instant::now() < deadline,
            "never reported the store unreachable"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let journal = w.journal().expect("journal");
    assert!(
        journal["finished_at"].is_null(),
        "not finished while the store is down"
    );
    assert!(
        w.run_dir().join("results.json").exists(),
        "results kept on disk"
    );
    let weed = SeaweedFs::start_on(ports, Some(keys));
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "upload did not finish after the store came up"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_arrived(&weed.store("late"), &w);
}

/// A local run whose store never answers (a loopback port nothing listens on) finishes
/// here: the report's paths are printed, the upload gets --upload-timeout, then the run ends
/// (exit 4) with the cause and the `pgapplianced upload` command that stores it, which does
/// once the store is up. object_store's retry lines stay out of the log.
#[test]
fn a_local_run_whose_store_does_not_answer_ends_with_its_results_and_the_command_that_stores_them()
{
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ports = Ports::pick();
    let keys = generate_keys();
    let endpoint = format!("http://127.0.0.1:{}", ports.s3);
    let w = Workdir::new("s3never");
    let store = format!("s3://{BUCKET}/postponed");
    let env = vec![
        ("AWS_ACCESS_KEY_ID", keys.0.clone()),
        ("AWS_SECRET_ACCESS_KEY", keys.1.clone()),
    ];
    let out = with_env(w.run_command_to(&example("quick.toml"), &store), &env)
        .args(["--endpoint", &endpoint, "--upload-timeout", "5s"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run");
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let run_dir = w.run_dir();
    for name in ["results.json", "summary.csv", "report.html"] {
        assert!(run_dir.join(name).is_file(), "{name}: {text}");
        assert!(
            stdout.contains(&run_dir.join(name).display().to_string()),
            "{name}: {text}"
        );
    }
    assert!(
        stdout.contains(&format!("not stored: {store} did not take run "))
            && stdout.contains(&format!(
                "within 5s: the connection to 127.0.0.1:{} was refused (nothing listens there) (last failure: ",
                ports.s3
            )),
        "{text}"
    );
    let next = format!(
        "pgapplianced upload --workdir {} --store {store} --endpoint {endpoint}",
        w.path().display()
    );
    assert!(
        stdout.contains(&format!(
            "next: once the store answers, `{next}` completes the upload"
        )),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("backing off") && !stderr.contains("Encountered"),
        "{text}"
    );
    assert!(w.journal().expect("journal")["finished_at"].is_null());

    // The store comes up; the command printed stores the run.
    let weed = SeaweedFs::start_on(ports, Some(keys));
    let mut c = Command::new(harness::daemon_binary());
    c.args(next.split(' ').skip(1));
    let up = with_env(c, &env).output().expect("upload");
    assert!(up.status.success(), "{}", describe(&up));
    assert_arrived(&weed.store("postponed"), &w);
}

#[test]
fn killed_in_the_middle_of_a_multipart_upload_resumes_the_same_upload() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weed = SeaweedFs::start();
    let w = finished_quick_run("s3kill");
    write_random(&w.run_dir().join("raw/big.bin"), 23);
    let store_url = format!("s3://{BUCKET}/resume");
    // Killed right after the second part of raw/big.bin was journaled (a fault point).
    let log = w.path().join("killed-upload.log");
    let mut cmd = with_env(upload_cmd(&w, &store_url, 5), &weed.env());
    cmd.stdout(Stdio::null());
    let child = harness::spawn_to_fault(&mut cmd, "upload-part-journaled@2", &log);
    let state_path = w.path().join("upload-state.json");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).expect("state")).expect("json");
    let mp = &state["multipart"]["raw/big.bin"];
    assert_eq!(
        mp["parts"].as_object().map(|p| p.len()),
        Some(2),
        "two parts journaled: {state}"
    );
    let upload_id = mp["upload_id"].as_str().expect("upload id").to_string();
    let mut child = child;
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let out = with_env(upload_cmd(&w, &store_url, 5), &weed.env())
        .output()
        .expect("upload");
    assert!(out.status.success(), "{}", describe(&out));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).expect("state")).expect("json");
    let resumed = state["resumed"]["raw/big.bin"]
        .as_str()
        .expect("resumed entry");
    assert!(
        resumed.starts_with(&upload_id),
        "resumed {resumed}, was {upload_id}"
    );
    assert!(state["multipart"].as_object().is_some_and(|m| m.is_empty()));
    assert_arrived(&weed.store("resume"), &w);
}

#[test]
fn a_proxy_returning_503s_and_cutting_connections_cannot_stop_the_upload() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weed = SeaweedFs::start();
    let proxy = FaultyProxy::start(weed.ports.s3, Duration::from_millis(1500));
    let w = finished_quick_run("s3proxy");
    write_random(&w.run_dir().join("raw/big.bin"), 12);
    let mut env = weed.env();
    env[2].1 = proxy.endpoint();
    let out = with_env(upload_cmd(&w, &format!("s3://{BUCKET}/faulty"), 5), &env)
        .output()
        .expect("upload");
    assert!(out.status.success(), "{}", describe(&out));
    use std::sync::atomic::Ordering;
    let c = &proxy.counters;
    assert!(
        c.answered_503.load(Ordering::Relaxed) > 0,
        "the proxy answered 503s"
    );
    assert!(
        c.cut.load(Ordering::Relaxed) > 0,
        "the proxy cut connections"
    );
    assert_arrived(&weed.store("faulty"), &w);
}

/// A snapshot part that arrives with a flipped byte (SeaweedFS behind a proxy that flips
/// one byte of the first response for that part) is fetched again alone: the other parts
/// are fetched once, the download is whole.
#[test]
fn a_snapshot_part_arriving_wrong_is_fetched_again_alone() {
    use pgappliance::snapshot::{key::SnapshotKey, local, manifest::CHUNK_BYTES, store};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weed = SeaweedFs::start();
    let w = Workdir::new("snapshot-parts");
    let data = w.path().join("data");
    std::fs::create_dir_all(data.join("base/1")).expect("mkdir");
    std::fs::create_dir_all(data.join("pg_wal")).expect("mkdir");
    std::fs::write(data.join("PG_VERSION"), "15\n").expect("write");
    std::fs::write(data.join("pg_wal/000000010000000000000001"), [1u8; 100]).expect("write");
    let big: Vec<u8> = (0..CHUNK_BYTES as usize + 5000)
        .map(|i| (i / 8192 % 251) as u8)
        .collect();
    std::fs::write(data.join("base/1/16384"), &big).expect("write");
    let key = SnapshotKey {
        postgres_major: 15,
        controldata: Default::default(),
        architecture: "x86_64".into(),
        encoding: "UTF8".into(),
        lc_collate: "C".into(),
        lc_ctype: "C".into(),
        dataset: "parts".into(),
    };
    let root = w.path().join("snapshots");
    let (m, _) = local::take(&data, &root, &key, false, "000000010000000000000001").expect("take");
    let snap = local::snapshot_dir(&root, &m.id);
    let rt = harness::runtime();
    let stored = rt
        .block_on(store::upload(
            &weed.store("parts"),
            &snap,
            &m,
            None,
            2,
            &mut |_| Ok(()),
        ))
        .expect("upload");
    let parts = stored.parts.clone().expect("parts");
    // PG_VERSION alone before the large file, its two chunks, then the WAL segment.
    assert_eq!(parts.list.len(), 4, "{parts:?}");
    let proxy = CorruptingProxy::start(weed.ports.s3, "part-00001.zst", 1);
    let out = w.path().join("restored");
    let got = rt
        .block_on(store::download_into(
            &weed.store_at(&proxy.endpoint(), "parts"),
            &stored,
            &out,
            None,
            2,
        ))
        .expect("download");
    assert_eq!(
        proxy.corrupted.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(got.parts, 4);
    assert_eq!(
        got.refetched
            .iter()
            .map(|(o, _)| o.as_str())
            .collect::<Vec<_>>(),
        ["part-00001.zst"],
        "{got:?}"
    );
    assert!(
        got.refetched[0].1.contains("sha256"),
        "why it was fetched again: {}",
        got.refetched[0].1
    );
    let gets = proxy.gets.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let part_gets: Vec<(String, usize)> = gets
        .into_iter()
        .filter_map(|(p, n)| {
            p.rsplit('/')
                .next()
                .filter(|o| o.starts_with("part-"))
                .map(|o| (o.to_string(), n))
        })
        .collect();
    assert_eq!(
        part_gets,
        [
            ("part-00000.zst".to_string(), 1),
            ("part-00001.zst".to_string(), 2),
            ("part-00002.zst".to_string(), 1),
            ("part-00003.zst".to_string(), 1),
        ],
        "only the part that arrived wrong was fetched again"
    );
    for f in &m.files {
        assert!(
            std::fs::read(out.join(&f.path)).expect("read")
                == std::fs::read(snap.join(&f.path)).expect("read"),
            "{} differs",
            f.path
        );
    }
}

/// Puts `bytes` at `rel` of the run in the store (what a corruption or a stray writer does).
fn put_object(store: &pgappliance::upload::Store, key: &str, rel: &str, bytes: Vec<u8>) {
    use object_store::ObjectStoreExt;
    harness::runtime().block_on(async {
        store
            .objects
            .put(&store.path(&[key, rel]), bytes.into())
            .await
            .expect("put");
    });
}

fn delete_object(store: &pgappliance::upload::Store, key: &str, rel: &str) {
    use object_store::ObjectStoreExt;
    harness::runtime().block_on(async {
        store
            .objects
            .delete(&store.path(&[key, rel]))
            .await
            .expect("delete");
    });
}

fn modified(store: &pgappliance::upload::Store, key: &str, rel: &str) -> (String, u64) {
    use object_store::ObjectStoreExt;
    harness::runtime().block_on(async {
        let m = store
            .objects
            .head(&store.path(&[key, rel]))
            .await
            .expect("head");
        (m.last_modified.to_rfc3339(), m.size)
    })
}

/// `upload` on a run the store no longer holds as uploaded: it verifies in the store (not in
/// its journal), repairs, says what it repaired, and leaves the run complete and verified.
fn upload_repairs(
    w: &Workdir,
    store_url: &str,
    env: &[(&str, String)],
    store: &pgappliance::upload::Store,
) {
    let key = key_of(w);
    let upload = |what: &str| {
        let out = with_env(upload_cmd(w, store_url, 8), env)
            .output()
            .expect("upload");
        assert!(out.status.success(), "{what}: {}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_arrived(store, w);
        stdout
    };
    // Stored and intact: verified, nothing repaired, nothing rewritten.
    let untouched = modified(store, &key, "summary.csv");
    let said = upload("intact");
    assert!(
        said.contains("verified") && !said.contains("repaired"),
        "{said}"
    );

    // results.json corrupted in the store, same size and another size.
    let results = std::fs::read(w.run_dir().join("results.json")).expect("results.json");
    let mut flipped = results.clone();
    flipped[10] ^= 0x20;
    for (case, bytes) in [
        ("same size", flipped),
        ("truncated", results[..100].to_vec()),
    ] {
        put_object(store, &key, "results.json", bytes);
        let said = upload(case);
        assert!(
            said.contains("repaired") && said.contains("results.json"),
            "{case}: {said}"
        );
        assert!(
            !said.contains("summary.csv ("),
            "{case}: only what was wrong: {said}"
        );
    }
    // One object deleted.
    delete_object(store, &key, "report.html");
    let said = upload("one object deleted");
    assert!(said.contains("repaired 1: report.html (missing)"), "{said}");
    // The manifest corrupted: repaired, the objects left as they are.
    put_object(
        store,
        &key,
        "manifest.json",
        b"{\"not\": \"a manifest\"}".to_vec(),
    );
    let said = upload("manifest corrupted");
    assert!(said.contains("manifest.json (not a manifest"), "{said}");
    assert_eq!(
        modified(store, &key, "summary.csv"),
        untouched,
        "a correct object was rewritten"
    );
    // The whole run deleted from the store.
    for rel in stored_hashes(store, &key).keys() {
        delete_object(store, &key, rel);
    }
    assert!(stored_hashes(store, &key).is_empty());
    let said = upload("run deleted");
    assert!(
        said.contains("repaired") && said.contains("manifest.json (missing)"),
        "{said}"
    );
}

#[test]
fn upload_verifies_the_run_in_s3_and_repairs_what_is_missing_or_different() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weed = SeaweedFs::start();
    let w = finished_quick_run("s3repair");
    let store_url = format!("s3://{BUCKET}/repair");
    let first = with_env(upload_cmd(&w, &store_url, 8), &weed.env())
        .output()
        .expect("upload");
    assert!(first.status.success(), "{}", describe(&first));
    upload_repairs(&w, &store_url, &weed.env(), &weed.store("repair"));
}

#[test]
fn upload_verifies_the_run_in_a_file_store_and_repairs_what_is_missing_or_different() {
    let w = finished_quick_run("filerepair");
    let store_url = w.file_store();
    let store = pgappliance::upload::Store::open(&pgappliance::upload::StoreConfig {
        url: store_url.clone(),
        endpoint: None,
        region: "us-east-1".into(),
        credentials: pgappliance::plan::Credentials::Environment,
        credentials_file: None,
        credentials_profile: pgappliance::upload::store::DEFAULT_PROFILE.into(),
        caller: None,
    })
    .expect("open file store");
    upload_repairs(&w, &store_url, &[], &store);
}
