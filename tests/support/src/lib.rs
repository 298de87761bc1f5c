//! What the integration tests share (`tests/*.rs` of pgapplianced, `image/tests/*.rs` of
//! pgappliance), as a dev-dependency of both crates: locating the workspace and the built
//! binaries, scratch work directories that the cluster user can reach (and clean-up of
//! clusters left running by a failed test), the daemon's fault points, servers' readiness
//! (`wait_until_ready`), SeaweedFS (`seaweed`), moto (`moto`), misbehaving proxies (`proxy`)
//! and the launch tests' emulators (`launch`).

pub mod launch;
pub mod moto;
pub mod proxy;
pub mod seaweed;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The workspace root (this crate is `tests/support/` in it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support/ is two levels down the workspace")
        .to_path_buf()
}

/// A binary of the workspace that cargo built for the running test: where the test runner
/// says (`CARGO_BIN_EXE_<name>`, `NEXTEST_BIN_EXE_<name>` at run time, for the binaries of
/// the test's own package), else beside the test's own profile directory (a test binary is
/// `target/<profile>/deps/<test>-<hash>`, the binaries `target/<profile>/<name>`).
pub fn built_binary(name: &str) -> PathBuf {
    let from_runner = [
        format!("CARGO_BIN_EXE_{name}"),
        format!("NEXTEST_BIN_EXE_{name}"),
    ]
    .into_iter()
    .find_map(std::env::var_os);
    let p = from_runner.map(PathBuf::from).unwrap_or_else(|| {
        let test = std::env::current_exe().expect("the test binary's path");
        let mut dir = test.parent().expect("the test binary's directory");
        if dir.ends_with("deps") {
            dir = dir.parent().expect("the profile directory");
        }
        dir.join(name)
    });
    assert!(
        p.exists(),
        "{} is not built: run the tests with `cargo test --workspace` (or build it first)",
        p.display()
    );
    p
}

/// The daemon binary cargo built for these tests.
pub fn daemon_binary() -> PathBuf {
    built_binary("pgapplianced")
}

pub fn example(name: &str) -> PathBuf {
    workspace().join("examples").join(name)
}

/// A scratch work directory under /var/tmp, reachable by the `postgres` user when the
/// tests run as root. Any cluster still running in it is stopped when it is dropped.
pub struct Workdir {
    dir: tempfile::TempDir,
}

impl Workdir {
    pub fn new(tag: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("pga-{tag}-"))
            .tempdir_in("/var/tmp")
            .expect("create work dir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod work dir");
        Workdir { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn journal(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.path().join("state.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The single run directory under `runs/`.
    pub fn run_dir(&self) -> PathBuf {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.path().join("runs"))
            .expect("runs/ exists")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(runs.len(), 1, "exactly one run dir: {runs:?}");
        runs.into_iter().next().expect("one run")
    }

    /// The file store inside this work directory that runs upload to by default.
    pub fn file_store(&self) -> String {
        format!("file://{}/store", self.path().display())
    }

    /// `pgapplianced run --local` on a plan in this work directory, uploading to
    /// [`Workdir::file_store`].
    pub fn run_command(&self, plan: &Path) -> Command {
        self.run_command_to(plan, &self.file_store())
    }

    pub fn run_command_to(&self, plan: &Path, store: &str) -> Command {
        let mut c = Command::new(daemon_binary());
        c.args(["run", "--local"])
            .arg(plan)
            .arg("--workdir")
            .arg(self.path())
            .arg("--store")
            .arg(store)
            .env("RUST_LOG", "info");
        c
    }

    pub fn run(&self, plan: &Path) -> Output {
        self.run_command(plan).output().expect("start pgapplianced")
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let data = self.path().join("cluster/data");
        if !data.join("postmaster.pid").exists() {
            return;
        }
        let Some(pg_ctl) = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|rd| {
                rd.flatten()
                    .map(|e| e.path().join("bin/pg_ctl"))
                    .find(|p| p.exists())
            })
        else {
            return;
        };
        let mut c = if nix::unistd::Uid::effective().is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
            c
        } else {
            Command::new(&pg_ctl)
        };
        let _ = c
            .args(["stop", "-m", "immediate", "-D"])
            .arg(&data)
            .output();
    }
}

/// Text of a command's output for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// PIDs of live processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(needle) {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

/// A current-thread runtime for the async checks the tests make.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// sha256 of every object under `key` in the store, by path relative to `key`.
pub fn stored_hashes(
    store: &pgappliance::upload::Store,
    key: &str,
) -> std::collections::BTreeMap<String, (u64, String)> {
    use futures::TryStreamExt;
    use object_store::{ObjectStore, ObjectStoreExt};
    use sha2::Digest;
    let rt = runtime();
    rt.block_on(async {
        let base = store.path(&[key]);
        let metas: Vec<object_store::ObjectMeta> = store
            .objects
            .list(Some(&base))
            .try_collect()
            .await
            .expect("list");
        let mut out = std::collections::BTreeMap::new();
        for m in metas {
            let bytes = store
                .objects
                .get(&m.location)
                .await
                .expect("get")
                .bytes()
                .await
                .expect("bytes");
            let rel = m.location.as_ref()[base.as_ref().len() + 1..].to_string();
            out.insert(
                rel,
                (
                    bytes.len() as u64,
                    format!("{:x}", sha2::Sha256::digest(&bytes)),
                ),
            );
        }
        out
    })
}

/// sha256 of every file under a local directory, by relative path.
pub fn local_hashes(dir: &Path) -> std::collections::BTreeMap<String, (u64, String)> {
    pgappliance::upload::list_files(dir)
        .expect("list")
        .into_iter()
        .map(|rel| {
            let h = pgappliance::upload::hash_file(&dir.join(&rel)).expect("hash");
            (rel, h)
        })
        .collect()
}

/// Every file under `dir` (recursively), relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                found.push(rel.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// Every file under `dir` (recursively) whose name is `name`.
pub fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .map(|rel| dir.join(rel))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == name))
        .collect()
}

/// A small program standing in for the daemon in a build: `/bin/true` with the mark of a
/// pgapplianced build appended (`pgappliance::identity`), written into `dir`.
pub fn stand_in_daemon(dir: &Path) -> PathBuf {
    let p = dir.join("pgapplianced-stand-in");
    let mut bytes = std::fs::read("/bin/true").expect("/bin/true");
    bytes.extend_from_slice(pgappliance::identity::marker().as_bytes());
    std::fs::write(&p, bytes).expect("write the stand-in daemon");
    p
}

/// The `pgappliance` binary, built beside pgapplianced by `cargo test --workspace`.
pub fn image_binary() -> PathBuf {
    built_binary("pgappliance")
}

/// What headless Chromium made of a page.
pub struct Rendered {
    /// The DOM after scripts ran.
    pub dom: String,
    /// Console messages Chromium logged (empty for a clean page).
    pub console: Vec<String>,
    /// URLs the page itself asked the network for (from Chromium's net log: requests whose
    /// network isolation key is the page's `file://` site; the browser's own background
    /// requests have other keys). Empty for a self-contained page.
    pub fetches: Vec<String>,
}

/// Loads a page in headless Chromium at 1280 px wide: a PNG screenshot into `png`, the
/// rendered DOM, the console messages and the page's network requests.
pub fn chromium_render(page: &Path, png: &Path) -> Rendered {
    let profile = tempfile::tempdir().expect("profile dir");
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let url = format!("file://{}", page.display());
    let net_log = profile.path().join("net-log.json");
    let shot = Command::new("chromium")
        .args(base)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .args([
            "--window-size=1280,2400",
            &format!("--screenshot={}", png.display()),
            &url,
        ])
        .output()
        .expect("run chromium (apt-get install chromium)");
    let dom = Command::new("chromium")
        .args(base)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("run chromium");
    let console: Vec<String> = [&shot.stderr, &dom.stderr]
        .iter()
        .flat_map(|e| {
            String::from_utf8_lossy(e)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    Rendered {
        dom: String::from_utf8_lossy(&dom.stdout).into_owned(),
        console,
        fetches: page_fetches(&net_log),
    }
}

/// The URLs of a Chromium net log's requests made for a `file://` page.
fn page_fetches(net_log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(net_log)
        .unwrap_or_else(|e| panic!("{}: {e} (chromium wrote no net log)", net_log.display()));
    // Chromium may stop before closing the JSON document; the events are complete lines.
    let mut urls = std::collections::BTreeSet::new();
    for line in text.lines() {
        let line = line.trim().trim_end_matches(',');
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let params = &event["params"];
        let for_page = params["network_isolation_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("file://"));
        if let (true, Some(url)) = (for_page, params["url"].as_str()) {
            urls.insert(url.to_string());
        }
    }
    urls.into_iter().collect()
}

/// Validates a results.json against docs/results.schema.json with Python's jsonschema
/// (from the venv tools/install-deps fills); returns the validator's complaint on failure.
pub fn validate_results_schema(results: &Path) -> Result<(), String> {
    let python = seaweed::venv().join("bin/python");
    let out = Command::new(&python)
        .args([
            "-c",
            "import json,sys,jsonschema\n\
             schema=json.load(open(sys.argv[1]))\n\
             jsonschema.Draft202012Validator.check_schema(schema)\n\
             jsonschema.validate(json.load(open(sys.argv[2])), schema)",
        ])
        .arg(workspace().join("docs/results.schema.json"))
        .arg(results)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run tools/install-deps)", python.display()));
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// One query (psql) against the cluster a run left running in `w`.
pub fn query(w: &Workdir, db: &str, sql: &str) -> String {
    let j = w.journal().expect("journal");
    let port = j["state"]["postgres"]["port"]
        .as_u64()
        .expect("port")
        .to_string();
    let out = Command::new("psql")
        .args(["-X", "-A", "-t", "-U", "postgres", "-h"])
        .arg(w.path().join("cluster/socket"))
        .args(["-p", &port, "-d", db, "-c", sql])
        .output()
        .expect("psql");
    assert!(out.status.success(), "{sql}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What `tests/parallel_init.rs` compares between two datasets: per pgbench table its rows,
/// a content checksum, columns, options, indexes, all-visible and all-frozen pages, and
/// whether it was vacuumed and analysed.
pub fn fingerprint(w: &Workdir) -> Vec<(String, String)> {
    query(w, "pgbench", "create extension if not exists pg_visibility");
    let mut f = Vec::new();
    for (table, key) in [
        ("pgbench_branches", "bid"),
        ("pgbench_tellers", "tid"),
        ("pgbench_accounts", "aid"),
        ("pgbench_history", "tid"),
    ] {
        let checks = [
            ("rows", format!("select count(*) from {table}")),
            (
                "content",
                format!("select md5(coalesce(string_agg(t::text, '|' order by {key}), '')) from {table} t"),
            ),
            (
                "nulls",
                format!("select count(*) filter (where filler is null) from {table}"),
            ),
            (
                "columns",
                format!(
                    "select string_agg(attname || ' ' || format_type(atttypid, atttypmod) || case when attnotnull then ' not null' else '' end || case when atthasdef then ' default' else '' end, ', ' order by attnum) \
                     from pg_attribute where attrelid = '{table}'::regclass and attnum > 0 and not attisdropped"
                ),
            ),
            (
                "reloptions",
                format!("select coalesce(array_to_string(reloptions, ','), '') from pg_class where oid = '{table}'::regclass"),
            ),
            (
                "indexes",
                format!("select coalesce(string_agg(regexp_replace(indexdef, 'INDEX \\S+ ON', 'INDEX ON'), '; '), '') from pg_indexes where tablename = '{table}'"),
            ),
            (
                // Every page all-visible after the VACUUM; pgbench's COPY FREEZE also leaves
                // every page of pgbench_accounts all-frozen (15's small tables: not frozen).
                "frozen",
                format!(
                    "select (all_visible = pg_relation_size('{table}') / 8192)::text || '/' || \
                     (all_frozen = pg_relation_size('{table}') / 8192)::text \
                     from pg_visibility_map_summary('{table}')"
                ),
            ),
            (
                "vacuumed and analysed",
                format!("select (last_vacuum is not null)::text || (last_analyze is not null)::text from pg_stat_user_tables where relname = '{table}'"),
            ),
        ];
        for (what, sql) in checks {
            f.push((format!("{table} {what}"), query(w, "pgbench", &sql)));
        }
    }
    f
}

/// Arms the daemon's fault points (`pgappliance::faults`): `spec` is `NAME[@N]=ACTION,...`.
pub fn with_fault<'a>(cmd: &'a mut Command, spec: &str) -> &'a mut Command {
    cmd.env(pgappliance::faults::VARIABLE, spec)
}

/// How a child armed with a `stop` fault point came to rest.
pub enum Rest {
    /// Stopped at the fault point: alive, holding whatever it held there.
    Stopped,
    /// Ended, not yet reaped (`Child::wait` gives its status): how it ended.
    Exited(String),
}

/// Waits until `child` stops at its fault point or ends; waits on the process's state,
/// which stays as it is once reached, so no moment can be missed. An ended child is left
/// for `Child::wait` to reap. `log` is shown when it does not rest within `limit`.
pub fn wait_for_rest(child: &Child, limit: Duration, log: &Path) -> Rest {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let deadline = Instant::now() + limit;
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG;
    loop {
        match waitid(Id::Pid(pid), flags | WaitPidFlag::WNOWAIT) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(WaitStatus::Stopped(..)) => {
                // Take the stop's report, so the next wait sees only what comes after it.
                let _ = waitid(Id::Pid(pid), WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG);
                return Rest::Stopped;
            }
            Ok(other) => return Rest::Exited(format!("{other:?}")),
            Err(e) => return Rest::Exited(format!("waitid: {e}")),
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} neither stopped at its fault point nor ended within {limit:?}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a server started by a test is ready (`ready()` says so). A server that ended
/// is reported at once with its log; a live one has five minutes: it starts in seconds on
/// a quiet machine, far slower beside two test binaries' builds. A bound on a slow start,
/// not a race: nothing here depends on how soon it is ready.
pub fn wait_until_ready(
    what: &str,
    child: &mut Child,
    log: impl Fn() -> String,
    mut ready: impl FnMut() -> bool,
) {
    let limit = Duration::from_secs(300);
    let deadline = Instant::now() + limit;
    while !ready() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} ended ({status}) before it was ready; its log:\n{}",
                log()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{what} was not ready within {limit:?}; its log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts `cmd` (its stderr to `log`) with the fault point `fault` armed to stop it there
/// (`NAME[@N]`), and returns it stopped at that point; panics with the log when it ends
/// before reaching it, or does not reach it within ten minutes.
pub fn spawn_to_fault(cmd: &mut Command, fault: &str, log: &Path) -> Child {
    with_fault(cmd, &format!("{fault}=stop"));
    let child = cmd
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn");
    match wait_for_rest(&child, Duration::from_secs(600), log) {
        Rest::Stopped => child,
        Rest::Exited(how) => panic!(
            "ended ({how}) before the fault point {fault}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        ),
    }
}

/// Kills (SIGKILL) and reaps a child that [`wait_for_rest`] saw stopped.
pub fn kill_stopped(mut child: Child) {
    child.kill().expect("SIGKILL");
    let _ = child.wait();
}

/// Lets a child stopped at a fault point go on.
pub fn resume(pid: u32) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
}

/// The members of a payload (`payload.tar.gz` as `pgappliance build` writes it): path and
/// content, in the archive's order.
pub fn payload_members(payload: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let bytes = std::fs::read(payload).expect("payload");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    tar.entries()
        .expect("entries")
        .map(|e| {
            let mut e = e.expect("entry");
            let path = e.path().expect("path").display().to_string();
            let mut data = Vec::new();
            e.read_to_end(&mut data).expect("read member");
            (path, data)
        })
        .collect()
}
