//! `pgapplianced bench upload`: one file of `--size-mib` random bytes uploaded by the
//! appliance's uploader (in a child process, so its peak resident memory is its own) and
//! by `aws s3 cp` (awscli), to the same store, in the same invocation. The appliance's
//! figure includes what it always does: sha256 of the file, multipart with journaled
//! parts, and reading the object back to verify it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::runner::CommandSpec;
use crate::upload::{upload_run, RunKey, Store, StoreConfig, UploadOptions};

/// `bench upload`'s options (its command line).
#[derive(Debug, clap::Args)]
pub struct UploadBenchOptions {
    /// Size of the random file uploaded, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub size_mib: u64,
    /// s3://bucket/prefix; credentials and endpoint from AWS_* variables.
    #[arg(long)]
    pub store: String,
    /// The awscli executable.
    #[arg(long, default_value = "aws")]
    pub aws: PathBuf,
    /// Multipart part size of the appliance's uploader, in MiB.
    #[arg(long, default_value_t = 8)]
    pub part_size_mib: u32,
    /// Where the test file is written.
    #[arg(long, default_value = "/var/tmp")]
    pub workdir: PathBuf,
}

const FILE: &str = "data.bin";

fn write_random(path: &Path, mib: u64) -> Result<()> {
    let mut src = std::fs::File::open("/dev/urandom")?;
    let mut out = crate::fsutil::open_own_file(path, false, true)?;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        std::io::Read::read_exact(&mut src, &mut buf)?;
        out.write_all(&buf)?;
    }
    out.sync_all()?;
    Ok(())
}

fn max_rss_of_children_mib() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| u.max_rss() as f64 / 1024.0)
        .unwrap_or(0.0)
}

/// The environment of the two uploaders compared: what every command gets
/// ([`CommandSpec::environment`]) plus the `AWS_*` settings and credentials, which these
/// two need and nothing else the appliance runs is given.
fn uploader_environment() -> std::collections::BTreeMap<String, String> {
    let mut env = CommandSpec::new("upload")
        .environment(std::env::vars(), crate::sys::current_user().as_ref());
    env.extend(std::env::vars().filter(|(k, _)| k.starts_with("AWS_") || k == "RUST_LOG"));
    env
}

/// What `bench upload` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadBenchReport {
    pub size_mib: u64,
    /// Seconds the appliance's uploader took (sha256, multipart, read-back verified).
    pub ours_s: f64,
    /// Its peak resident memory.
    pub peak_rss_mib: f64,
    /// Seconds `aws s3 cp` took.
    pub awscli_s: f64,
}

impl UploadBenchReport {
    /// Throughput against awscli's (above 1: faster).
    pub fn ratio(&self) -> f64 {
        self.awscli_s / self.ours_s
    }
}

pub async fn run(o: UploadBenchOptions) -> Result<UploadBenchReport> {
    if !o.store.starts_with("s3://") {
        bail!("bench upload needs an s3:// store to compare with aws s3 cp");
    }
    let tag = format!(
        "{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let run_dir = o.workdir.join(format!("bench-upload-{tag}"));
    crate::fsutil::create_dir_all(&run_dir)?;
    let file = run_dir.join(FILE);
    write_random(&file, o.size_mib).with_context(|| format!("writing {}", file.display()))?;
    let exe = std::env::current_exe().context("locating pgapplianced")?;

    let t0 = Instant::now();
    let status = std::process::Command::new(&exe)
        .env_clear()
        .envs(uploader_environment())
        .args(["bench", "upload-child", "--dir"])
        .arg(&run_dir)
        .arg("--store")
        .arg(&o.store)
        .arg("--part-size-mib")
        .arg(o.part_size_mib.to_string())
        .arg("--tag")
        .arg(&tag)
        .status()
        .context("starting the upload child")?;
    let ours = t0.elapsed().as_secs_f64();
    let rss = max_rss_of_children_mib();
    if !status.success() {
        bail!("the appliance upload failed ({status})");
    }

    let target = format!("{}/awscli-{tag}/{FILE}", o.store.trim_end_matches('/'));
    let mut aws = std::process::Command::new(&o.aws);
    aws.env_clear()
        .envs(uploader_environment())
        .args(["s3", "cp", "--only-show-errors"])
        .arg(&file)
        .arg(&target);
    if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
        aws.args(["--endpoint-url", &endpoint]);
    }
    let t1 = Instant::now();
    let status = aws
        .status()
        .with_context(|| format!("running {} (pip install awscli)", o.aws.display()))?;
    let theirs = t1.elapsed().as_secs_f64();
    if !status.success() {
        bail!("aws s3 cp failed ({status})");
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok(UploadBenchReport {
        size_mib: o.size_mib,
        ours_s: ours,
        peak_rss_mib: rss,
        awscli_s: theirs,
    })
}

/// The measured side: uploads `dir` with the appliance's uploader.
pub async fn child(dir: &Path, store: &str, part_size_mib: u32, tag: &str) -> Result<()> {
    let store = Store::open(&StoreConfig::environment(
        store.to_string(),
        std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
    ))?;
    let part = (part_size_mib as usize) << 20;
    let key = RunKey {
        appliance: "bench".into(),
        machine_id: "upload".into(),
        run_id: tag.to_string(),
    };
    let workdir = dir.join(".journal");
    crate::fsutil::create_dir_all(&workdir)?;
    upload_run(
        &store,
        &key,
        dir,
        &workdir,
        UploadOptions {
            part_size: part,
            multipart_threshold: 2 * part as u64,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}
