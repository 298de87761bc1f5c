//! `pgapplianced bench restore`: putting a pgbench dataset in place by generating it
//! (`pgbench -i`, client-side and server-side generate, the faster is the baseline), by a
//! local snapshot restore, and by a restore from an object store (the test store,
//! SeaweedFS on loopback, started here unless `--store` names one), alternating over
//! rounds. Each candidate is timed until the server accepts connections in the plan's
//! configuration and the data is on disk: pgbench's until its CHECKPOINT and a `sync`, a
//! restore's from stopping the server through fsyncing every file to the server accepting
//! again. Also measures the archive's compression (zstd levels, gzip) on a sample.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::median;
use crate::engine::Prepared;
use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::runner::CommandSpec;
use crate::snapshot::copy::{self, Hashing, Owner};
use crate::snapshot::local;
use crate::snapshot::manifest::Manifest;
use crate::snapshot::store as snapstore;
use crate::upload::{Store, StoreConfig};

const DB: &str = "bench_restore";

/// `bench restore`'s options (its command line).
#[derive(Debug, clap::Args)]
pub struct RestoreBenchOptions {
    // The plan whose cluster configuration is used (examples/quick.toml in the source tree
    // is a small one).
    #[command(flatten)]
    pub plan: crate::engine::PlanArg,
    /// pgbench scale factor of the dataset; repeated, each scale is measured in turn
    /// (how restore time grows) and the first gives the last line.
    #[arg(id = "scale", long = "scale", value_name = "SCALE", required = true)]
    pub scales: Vec<u32>,
    /// Where the benchmark's cluster and snapshot live.
    #[arg(long, default_value = "/var/tmp/pgappliance-bench-restore")]
    pub workdir: PathBuf,
    /// Put the benchmark's cluster (its data directory) and snapshots on this file
    /// system instead (in DIR/pgappliance-bench-restore), e.g. an XFS made with reflink=1.
    #[arg(long, value_name = "DIR", conflicts_with = "workdir")]
    pub dir: Option<PathBuf>,
    /// Threads of the object store restore and upload (default: the CPUs, at most 64).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Rounds over all candidates (the order rotates each round).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// s3://bucket/prefix (credentials and endpoint from AWS_* variables); without it
    /// the test object store (SeaweedFS on loopback) is started.
    #[arg(long)]
    pub store: Option<String>,
}

impl RestoreBenchOptions {
    /// Where the cluster (its data directory), the snapshots and the test store live:
    /// `--workdir`, or `pgappliance-bench-restore` in `--dir`.
    pub fn base(&self) -> PathBuf {
        self.dir.as_ref().map_or_else(
            || self.workdir.clone(),
            |d| d.join("pgappliance-bench-restore"),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate {
    PgbenchClient,
    PgbenchServer,
    /// A restore as the sweep makes them (a snapshot checked before: sizes only), into the
    /// directory the restore before it replaced (its files reused).
    Local,
    /// A restore as the dataset step's first one (every chunk read and hashed).
    LocalVerified,
    /// A restore from the store into the directory the restore before it replaced, on
    /// the benchmark's threads.
    Store,
    /// The same on one thread.
    StoreOneThread,
    /// A restore from the store into a new directory, as an appliance's first restore.
    StoreNew,
    /// The floor of a restore here: stopping and starting the server with nothing done.
    FloorRestart,
    /// The floor of a restore here: writing and fsyncing the data directory's bytes.
    FloorWrite,
    /// The floor of a restore into a new directory here: making its files, empty.
    FloorCreate,
}

impl Candidate {
    pub fn label(self) -> &'static str {
        match self {
            Candidate::PgbenchClient => "pgbench -i (client-side)",
            Candidate::PgbenchServer => "pgbench -i -I dtGvp (server-side)",
            Candidate::Local => "local snapshot restore",
            Candidate::LocalVerified => "local snapshot restore, every chunk hashed",
            Candidate::Store => "object store restore",
            Candidate::StoreOneThread => "object store restore, one thread",
            Candidate::StoreNew => "object store restore into a new directory",
            Candidate::FloorRestart => "floor: server stop + start",
            Candidate::FloorWrite => "floor: write + fsync of the data directory's bytes",
            Candidate::FloorCreate => "floor: making the data directory's files, empty",
        }
    }
}

/// What happens while the benchmark runs.
#[derive(Debug, Clone, PartialEq)]
pub enum RestoreEvent {
    Note(String),
    Timed {
        round: u32,
        candidate: Candidate,
        seconds: f64,
    },
}

/// One codec on the archive sample: compressed fraction and speeds.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecFigure {
    pub codec: String,
    pub ratio: f64,
    pub compress_mib_s: f64,
    pub decompress_mib_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RestoreReport {
    pub scale: u32,
    /// Threads of the store restore candidates but [`Candidate::StoreOneThread`].
    pub threads: usize,
    pub rounds: u32,
    pub data_bytes: u64,
    pub archive_bytes: u64,
    pub medians: Vec<(Candidate, f64)>,
    pub codecs: Vec<CodecFigure>,
    pub sample_bytes: u64,
}

impl RestoreReport {
    fn median_of(&self, c: Candidate) -> f64 {
        self.medians
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(f64::NAN, |(_, m)| *m)
    }
    pub(crate) fn best_pgbench_s(&self) -> f64 {
        self.median_of(Candidate::PgbenchClient)
            .min(self.median_of(Candidate::PgbenchServer))
    }
    pub fn local_speedup(&self) -> f64 {
        self.best_pgbench_s() / self.median_of(Candidate::Local)
    }
    pub fn verified_speedup(&self) -> f64 {
        self.best_pgbench_s() / self.median_of(Candidate::LocalVerified)
    }
    pub fn store_speedup(&self) -> f64 {
        self.best_pgbench_s() / self.median_of(Candidate::Store)
    }
    /// A store restore into a new directory (an appliance's first restore).
    pub fn store_new_speedup(&self) -> f64 {
        self.best_pgbench_s() / self.median_of(Candidate::StoreNew)
    }
    /// How much faster the store restore is on [`RestoreReport::threads`] than on one.
    pub fn threads_speedup(&self) -> f64 {
        self.median_of(Candidate::StoreOneThread) / self.median_of(Candidate::Store)
    }
    pub(crate) fn local_s(&self) -> f64 {
        self.median_of(Candidate::Local)
    }
    /// The least a restore into a new directory can take here: a restart, making the
    /// files and the write of their bytes.
    pub fn new_dir_floor_s(&self) -> f64 {
        self.floor_s() + self.median_of(Candidate::FloorCreate)
    }
    /// The least a local restore can take here: a restart and the write of its bytes.
    pub fn floor_s(&self) -> f64 {
        self.median_of(Candidate::FloorRestart) + self.median_of(Candidate::FloorWrite)
    }
    /// The best local speedup this machine allows.
    pub fn ceiling(&self) -> f64 {
        self.best_pgbench_s() / self.floor_s()
    }
}

/// The test object store: `weed mini` on loopback ports, killed when dropped.
struct Seaweed {
    child: Child,
    dir: PathBuf,
    endpoint: String,
    keys: (String, String),
}

use super::seaweed::{free_port, BUCKET};

/// `weed` from the venv tools/install-deps fills (PGAPPLIANCE_VENV or ./.venv), or PATH.
fn weed_binary() -> Result<PathBuf> {
    let venv = std::env::var_os("PGAPPLIANCE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".venv"));
    let candidates = std::iter::once(venv.join("bin/weed")).chain(
        std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("weed"))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!("no SeaweedFS `weed` in $PGAPPLIANCE_VENV/bin, ./.venv/bin or PATH (tools/install-deps installs it): install it or pass --store s3://bucket/prefix")
}

/// What one start of the test object store came to.
enum Started {
    Ready(Seaweed),
    /// A port it was given was taken before it bound it: its log.
    PortTaken(String),
}

impl Seaweed {
    /// Starts with its data in `dir` (emptied first, removed when dropped), on fresh ports
    /// again when one it was given was taken before it could bind it (three tries).
    async fn start(dir: PathBuf) -> Result<Seaweed> {
        let mut log = String::new();
        for _ in 0..3 {
            match Self::start_once(&dir).await? {
                Started::Ready(s) => return Ok(s),
                Started::PortTaken(l) => log = l,
            }
        }
        bail!(
            "SeaweedFS found a port taken in each of 3 starts on fresh ports; the last log: {log}"
        )
    }

    async fn start_once(dir: &Path) -> Result<Started> {
        let dir = dir.to_path_buf();
        let weed = weed_binary()?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        crate::fsutil::create_dir_all(&dir)?;
        let keys = super::seaweed::new_keys()?;
        let config = dir.join("s3.json");
        crate::fsutil::atomic_write(
            &config,
            super::seaweed::s3_config(&keys.0, &keys.1).as_bytes(),
        )?;
        std::fs::create_dir_all(dir.join("data"))?;
        let s3 = free_port()?;
        let args = super::seaweed::mini_args(&dir.join("data"), &config, s3)?;
        let log = crate::fsutil::open_own_file(&dir.join("weed.log"), false, true)?;
        let child = Command::new(&weed)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting {}", weed.display()))?;
        let mut s = Seaweed {
            child,
            dir,
            endpoint: format!("http://127.0.0.1:{s3}"),
            keys,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let log = std::fs::read_to_string(s.dir.join("weed.log")).unwrap_or_default();
            if super::seaweed::port_taken(&log) {
                return Ok(Started::PortTaken(log));
            }
            if let Some(status) = s.child.try_wait()? {
                bail!("SeaweedFS ended ({status}) before it answered: {log}");
            }
            let store = s.store("probe")?;
            use futures::TryStreamExt;
            use object_store::ObjectStore;
            if store
                .objects
                .list(None)
                .try_collect::<Vec<_>>()
                .await
                .is_ok()
            {
                return Ok(Started::Ready(s));
            }
            if Instant::now() > deadline {
                bail!("SeaweedFS did not answer within 90 s: {log}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn store(&self, prefix: &str) -> Result<Store> {
        let cred = self.dir.join("credentials");
        if !cred.exists() {
            let text = format!(
                "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                self.keys.0, self.keys.1
            );
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&cred)?;
            f.write_all(text.as_bytes())?;
        }
        Store::open(&StoreConfig {
            url: format!("s3://{BUCKET}/{prefix}"),
            endpoint: Some(self.endpoint.clone()),
            region: "us-east-1".into(),
            credentials: crate::plan::Credentials::File,
            credentials_file: Some(cred.display().to_string()),
            credentials_profile: crate::upload::store::DEFAULT_PROFILE.into(),
            caller: None,
        })
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn pgbench_init(run: &Prepared, scale: u32, server_side: bool) -> Result<()> {
    let mut args = vec!["--initialize".to_string(), "--quiet".to_string()];
    args.extend(run.conn_args()?);
    args.push(format!("--scale={scale}"));
    args.push(format!("--fillfactor={}", run.plan().dataset.fillfactor));
    if server_side {
        args.push("--init-steps=dtGvp".into());
    }
    args.push(DB.into());
    run.runner()
        .run(&CommandSpec::new(run.bin()?.tool("pgbench")).args(args))
        .await?;
    Ok(())
}

async fn admin(run: &Prepared) -> Result<Session> {
    let c = run.cluster()?;
    Session::connect(&c.socket_dir(), c.port, SUPERUSER, "postgres").await
}

/// A fresh database, then pgbench -i, CHECKPOINT and sync (the data on disk): seconds.
async fn time_pgbench(run: &Prepared, scale: u32, server_side: bool) -> Result<f64> {
    let s = admin(run).await?;
    s.execute(&format!("DROP DATABASE IF EXISTS {DB}")).await?;
    s.execute(&format!("CREATE DATABASE {DB}")).await?;
    s.execute("CHECKPOINT").await?;
    drop(s);
    nix::unistd::sync();
    let t0 = Instant::now();
    pgbench_init(run, scale, server_side).await?;
    admin(run).await?.execute("CHECKPOINT").await?;
    nix::unistd::sync();
    Ok(t0.elapsed().as_secs_f64())
}

/// Stop, restore from the local snapshot `dir`, start and wait: seconds. The replaced
/// directory is then kept for the next restore (or removed, untimed, as pgbench's DROP
/// DATABASE is, when the file system lacks the room: [`local::retire`]).
async fn time_local(
    run: &Prepared,
    dir: &Path,
    manifest: &Manifest,
    hashing: Hashing,
) -> Result<f64> {
    let c = run.cluster()?;
    let t0 = Instant::now();
    c.stop().await?;
    let data = c.data_dir();
    let owner = Some(Owner::of(&data)?);
    let (d, m) = (dir.to_path_buf(), manifest.clone());
    let r = tokio::task::spawn_blocking(move || local::restore(&d, &m, &data, owner, hashing))
        .await??;
    c.start().await?;
    let secs = t0.elapsed().as_secs_f64();
    local::retire(
        r.replaced.as_deref(),
        crate::snapshot::room_to_keep(manifest.total_bytes(), false),
    )?;
    Ok(secs)
}

/// Stop, download (streaming, every file checked) into the data directory's place,
/// exchange, start and wait: seconds. The replaced directory is kept as the local
/// restore's is.
async fn time_store(
    run: &Prepared,
    store: &Store,
    stored: &Manifest,
    threads: usize,
) -> Result<f64> {
    let c = run.cluster()?;
    let data = c.data_dir();
    let owner = Some(Owner::of(&data)?);
    let tmp = local::restoring_dir(&data);
    let t0 = Instant::now();
    c.stop().await?;
    snapstore::download_into(store, stored, &tmp, owner, threads).await?;
    let replaced = local::install(&tmp, &data, &stored.dirs)?;
    c.start().await?;
    let secs = t0.elapsed().as_secs_f64();
    local::retire(
        replaced.as_deref(),
        crate::snapshot::room_to_keep(stored.total_bytes(), false),
    )?;
    Ok(secs)
}

/// As [`time_store`], into a new directory: the directory the restore before replaced is
/// removed first (untimed, with a `sync`).
async fn time_store_new(
    run: &Prepared,
    store: &Store,
    stored: &Manifest,
    threads: usize,
) -> Result<f64> {
    let spare = local::restoring_dir(&run.cluster()?.data_dir());
    local::discard(Some(&spare))?;
    nix::unistd::sync();
    time_store(run, store, stored, threads).await
}

/// Makes the manifest's directories (untimed) and files (timed: empty, with their mode,
/// by the copy's threads) in `dir`, then fsyncs the directories: seconds. Removed after.
fn time_create(dir: &Path, manifest: &Manifest, owner: Option<Owner>) -> Result<f64> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    copy::make_dirs(dir, &manifest.dirs, owner)?;
    nix::unistd::sync();
    let files = &manifest.files;
    let t0 = Instant::now();
    copy::each_on_copy_threads(files.len(), |i| {
        let (f, path) = (&files[i], dir.join(&files[i].path));
        let (file, _) = copy::open_target(&path, f.mode)?;
        copy::set_mode_and_owner(&file, &path, f.mode, owner)
    })?;
    copy::sync_dirs(dir, &manifest.dirs)?;
    let secs = t0.elapsed().as_secs_f64();
    std::fs::remove_dir_all(dir)?;
    Ok(secs)
}

/// Stop and start the server, nothing else: seconds.
async fn time_restart(run: &Prepared) -> Result<f64> {
    let c = run.cluster()?;
    let t0 = Instant::now();
    c.stop().await?;
    c.start().await?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Writes `bytes` (in files of one chunk, by the copy's threads) over the files of `dir`
/// and fsyncs them: the disk's part of any restore of that size. The files are made (and
/// written once) untimed the first time, so each timing rewrites blocks the file system
/// has already allocated, as a restore into the directory the previous restore replaced
/// does. Seconds.
fn time_write(dir: &Path, bytes: u64) -> Result<f64> {
    use crate::snapshot::manifest::CHUNK_BYTES;
    use std::os::unix::fs::FileExt;
    let n = bytes.div_ceil(CHUNK_BYTES) as usize;
    let len_of = |i: usize| (bytes - i as u64 * CHUNK_BYTES).min(CHUNK_BYTES);
    let block: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 251) as u8).collect();
    let write_all = |create: bool| -> Result<f64> {
        let t0 = Instant::now();
        copy::each_on_copy_threads(n, |i| {
            let len = len_of(i);
            let path = dir.join(format!("{i}"));
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(create)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            let mut off = 0u64;
            while off < len {
                let k = ((len - off) as usize).min(block.len());
                f.write_all_at(&block[..k], off)
                    .with_context(|| format!("writing {}", path.display()))?;
                off += k as u64;
            }
            f.sync_all()
                .with_context(|| format!("syncing {}", path.display()))
        })?;
        Ok(t0.elapsed().as_secs_f64())
    };
    let made = (0..n)
        .all(|i| std::fs::metadata(dir.join(format!("{i}"))).is_ok_and(|m| m.len() == len_of(i)));
    if !made {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        crate::fsutil::create_dir_all(dir)?;
        write_all(true)?;
        nix::unistd::sync();
    }
    write_all(false)
}

/// The first `limit` bytes of the snapshot's uncompressed archive stream.
fn archive_sample(dir: &Path, manifest: &Manifest, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(limit);
    let mut builder = tar::Builder::new(&mut out);
    for f in &manifest.files {
        let mut h = tar::Header::new_gnu();
        h.set_mode(f.mode);
        h.set_size(f.size);
        h.set_mtime(0);
        let file = std::fs::File::open(dir.join(&f.path))?;
        builder.append_data(&mut h, &f.path, file.take(f.size))?;
        if builder.get_ref().len() >= limit {
            break;
        }
    }
    builder.finish()?;
    drop(builder);
    out.truncate(limit);
    Ok(out)
}

/// zstd at several levels and gzip on the sample, one thread each.
pub(crate) fn measure_codecs(sample: &[u8]) -> Result<Vec<CodecFigure>> {
    let mib = sample.len() as f64 / (1 << 20) as f64;
    let mut figures = Vec::new();
    for level in [1, 3, 9] {
        let t0 = Instant::now();
        let packed = zstd::bulk::compress(sample, level)?;
        let c = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let back = zstd::bulk::decompress(&packed, sample.len())?;
        let d = t0.elapsed().as_secs_f64();
        if back != sample {
            bail!("zstd-{level} did not round-trip");
        }
        figures.push(CodecFigure {
            codec: format!("zstd-{level}"),
            ratio: packed.len() as f64 / sample.len() as f64,
            compress_mib_s: mib / c,
            decompress_mib_s: mib / d,
        });
    }
    for level in [1, 6] {
        let t0 = Instant::now();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        enc.write_all(sample)?;
        let packed = enc.finish()?;
        let c = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let mut back = Vec::with_capacity(sample.len());
        flate2::read::GzDecoder::new(packed.as_slice()).read_to_end(&mut back)?;
        let d = t0.elapsed().as_secs_f64();
        if back != sample {
            bail!("gzip-{level} did not round-trip");
        }
        figures.push(CodecFigure {
            codec: format!("gzip-{level}"),
            ratio: packed.len() as f64 / sample.len() as f64,
            compress_mib_s: mib / c,
            decompress_mib_s: mib / d,
        });
    }
    Ok(figures)
}

/// What a run of the benchmark measured: one report per scale, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreRun {
    pub reports: Vec<RestoreReport>,
    /// Where the data directory was (the workdir's file system).
    pub dir: PathBuf,
}

impl RestoreRun {
    /// The local restore's median at the last scale over the first's.
    pub fn growth(&self) -> Option<(u32, u32, f64)> {
        match (self.reports.first(), self.reports.last()) {
            (Some(a), Some(b)) if self.reports.len() > 1 => {
                Some((a.scale, b.scale, b.local_s() / a.local_s()))
            }
            _ => None,
        }
    }
}

/// Runs the benchmark at each scale; `on_event` sees each timing as it is made.
pub async fn run(
    o: RestoreBenchOptions,
    on_event: &mut dyn FnMut(&RestoreEvent),
) -> Result<RestoreRun> {
    if o.scales.is_empty() {
        bail!("bench restore needs at least one --scale");
    }
    if o.threads == Some(0) {
        bail!("--threads 0: a restore needs at least one thread");
    }
    let threads = o.threads.unwrap_or_else(snapstore::transfer_threads);
    let base = o.base();
    let run = crate::engine::prepare(&o.plan.path(), &base).await?;
    let weed;
    let store = match &o.store {
        Some(url) => Store::open(&StoreConfig::environment(
            url.clone(),
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        ))?,
        None => {
            on_event(&RestoreEvent::Note(
                "starting the test object store (SeaweedFS on loopback)".into(),
            ));
            weed = Seaweed::start(base.join("weed")).await?;
            weed.store("bench")?
        }
    };
    let mut reports = Vec::new();
    for &scale in &o.scales {
        reports.push(run_scale(&run, &o, &store, scale, threads, on_event).await?);
    }
    run.cluster()?.stop().await?;
    Ok(RestoreRun { reports, dir: base })
}

async fn run_scale(
    run: &Prepared,
    o: &RestoreBenchOptions,
    store: &Store,
    scale: u32,
    threads: usize,
    on_event: &mut dyn FnMut(&RestoreEvent),
) -> Result<RestoreReport> {
    // The server runs (prepared, or left running by the scale before).
    let c = run.cluster()?.clone();
    on_event(&RestoreEvent::Note(format!(
        "generating scale {scale} once for the snapshot"
    )));
    {
        let s = admin(run).await?;
        s.execute(&format!("DROP DATABASE IF EXISTS {DB}")).await?;
        s.execute(&format!("CREATE DATABASE {DB}")).await?;
    }
    pgbench_init(run, scale, false).await?;
    let key = crate::snapshot::current_key(&c, &format!("bench-restore scale={scale}")).await?;
    let root = o.base().join("snapshots");
    c.stop().await?;
    let (checksums, redo) = crate::snapshot::stopped_state(&c).await?;
    let (data, r, k) = (c.data_dir(), root.clone(), key.clone());
    let (manifest, _) =
        tokio::task::spawn_blocking(move || local::take(&data, &r, &k, checksums, &redo)).await??;
    c.start().await?;
    let snap = local::snapshot_dir(&root, &manifest.id);

    let sample = {
        let (d, m) = (snap.clone(), manifest.clone());
        tokio::task::spawn_blocking(move || archive_sample(&d, &m, 256 << 20)).await??
    };
    let codecs = measure_codecs(&sample)?;
    let sample_bytes = sample.len() as u64;
    drop(sample);

    on_event(&RestoreEvent::Note(format!(
        "uploading snapshot {} on {threads} thread(s)",
        manifest.id
    )));
    let t0 = Instant::now();
    let stored = snapstore::upload(store, &snap, &manifest, None, threads, &mut |_| Ok(())).await?;
    let archive_bytes = stored.stored_bytes();
    on_event(&RestoreEvent::Note(format!(
        "uploaded {} bytes as {archive_bytes} compressed in {} part(s) in {:.2} s",
        manifest.total_bytes(),
        stored.parts.as_ref().map_or(1, |p| p.list.len()),
        t0.elapsed().as_secs_f64()
    )));

    // Every candidate starts with what the one before left written back (a `sync`,
    // untimed: on a file system mounted with online discard it also waits for the
    // discards of what the earlier candidate removed).
    let candidates = [
        Candidate::PgbenchClient,
        Candidate::PgbenchServer,
        Candidate::Local,
        Candidate::LocalVerified,
        Candidate::Store,
        Candidate::StoreOneThread,
        Candidate::StoreNew,
        Candidate::FloorRestart,
        Candidate::FloorWrite,
        Candidate::FloorCreate,
    ];
    let create_dir = c.dir.join("create-floor");
    let owner = Some(Owner::of(&c.data_dir())?);
    let floor_dir = c.dir.join("write-floor");
    let data_bytes = manifest.total_bytes();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for round in 0..o.rounds.max(1) {
        let n = candidates.len();
        for k in 0..n {
            let i = (k + round as usize) % n;
            let cand = candidates[i];
            nix::unistd::sync();
            let t = match cand {
                Candidate::PgbenchClient => time_pgbench(run, scale, false).await,
                Candidate::PgbenchServer => time_pgbench(run, scale, true).await,
                Candidate::Local => time_local(run, &snap, &manifest, Hashing::Never).await,
                Candidate::LocalVerified => {
                    time_local(run, &snap, &manifest, Hashing::Always).await
                }
                Candidate::Store => time_store(run, store, &stored, threads).await,
                Candidate::StoreOneThread => time_store(run, store, &stored, 1).await,
                Candidate::StoreNew => time_store_new(run, store, &stored, threads).await,
                Candidate::FloorCreate => {
                    let (d, m) = (create_dir.clone(), manifest.clone());
                    tokio::task::spawn_blocking(move || time_create(&d, &m, owner))
                        .await
                        .context("the file-making thread")?
                }
                Candidate::FloorRestart => time_restart(run).await,
                Candidate::FloorWrite => {
                    let d = floor_dir.clone();
                    tokio::task::spawn_blocking(move || time_write(&d, data_bytes))
                        .await
                        .context("the write thread")?
                }
            }
            .with_context(|| format!("{} at scale {scale}", cand.label()))?;
            on_event(&RestoreEvent::Timed {
                round: round + 1,
                candidate: cand,
                seconds: t,
            });
            times[i].push(t);
        }
    }
    admin(run)
        .await?
        .execute(&format!("DROP DATABASE IF EXISTS {DB}"))
        .await?;
    std::fs::remove_dir_all(&snap).with_context(|| format!("removing {}", snap.display()))?;
    local::discard(Some(&local::restoring_dir(&c.data_dir())))?;
    local::discard(Some(&floor_dir))?;
    let medians = candidates
        .into_iter()
        .zip(times.iter_mut())
        .map(|(c, t)| (c, median(t).unwrap_or(f64::NAN)))
        .collect();
    Ok(RestoreReport {
        scale,
        threads,
        rounds: o.rounds.max(1),
        data_bytes: manifest.total_bytes(),
        archive_bytes,
        medians,
        codecs,
        sample_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_round_trip_and_compress_repetitive_pages() {
        let mut sample = Vec::new();
        for i in 0..2000u32 {
            sample.extend_from_slice(format!("{i:>10}|1|0|{:84}\n", "").as_bytes());
        }
        let figures = measure_codecs(&sample).expect("codecs");
        let names: Vec<&str> = figures.iter().map(|f| f.codec.as_str()).collect();
        assert_eq!(names, ["zstd-1", "zstd-3", "zstd-9", "gzip-1", "gzip-6"]);
        assert!(figures
            .iter()
            .all(|f| f.ratio < 0.5 && f.compress_mib_s > 0.0));
    }

    #[test]
    fn the_speedups_are_against_the_faster_pgbench_mode() {
        let r = RestoreReport {
            scale: 1,
            threads: 2,
            rounds: 1,
            data_bytes: 0,
            archive_bytes: 0,
            medians: vec![
                (Candidate::PgbenchClient, 12.0),
                (Candidate::PgbenchServer, 9.0),
                (Candidate::Local, 3.0),
                (Candidate::LocalVerified, 4.5),
                (Candidate::Store, 4.5),
                (Candidate::StoreOneThread, 9.0),
                (Candidate::FloorRestart, 0.5),
                (Candidate::FloorWrite, 1.0),
                (Candidate::StoreNew, 6.0),
                (Candidate::FloorCreate, 0.25),
            ],
            codecs: Vec::new(),
            sample_bytes: 0,
        };
        assert_eq!(r.best_pgbench_s(), 9.0);
        assert_eq!(r.local_speedup(), 3.0);
        assert_eq!(r.store_speedup(), 2.0);
        assert_eq!(r.verified_speedup(), 2.0);
        assert_eq!(r.floor_s(), 1.5);
        assert_eq!(r.ceiling(), 6.0);
        assert_eq!(r.store_new_speedup(), 1.5);
        assert_eq!(r.new_dir_floor_s(), 1.75);
        assert_eq!(r.threads_speedup(), 2.0);
        let mut big = r.clone();
        big.scale = 8;
        big.medians[2].1 = 4.5;
        let one = RestoreRun {
            reports: vec![r.clone()],
            dir: PathBuf::from("/d"),
        };
        assert_eq!(one.growth(), None, "one scale: nothing to compare");
        let two = RestoreRun {
            reports: vec![r, big],
            dir: PathBuf::from("/d"),
        };
        assert_eq!(two.growth(), Some((1, 8, 1.5)));
    }
}
