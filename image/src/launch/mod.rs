//! `pgappliance launch PLAN`: build with `build`'s own code, then start each target: Redfish
//! BMCs mount the ISO as virtual media and boot it once; IPMI BMCs (ISO mounted by hand)
//! boot CD/DVD next and are reset or powered on. Every launch leaves a record in the plan's
//! store (`<prefix>/launches/<launch id>.json`).
//!
//! Exit status: 0 every target started and the BMCs kept what they were asked; 2 every
//! target started but some BMC did not keep a setting it accepted (listed); 1 an error or a
//! target that could not be started (the record says which).

pub mod credentials;
pub mod ipmi;
pub mod presign;
pub mod record;
pub mod redfish;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use pgappliance::plan::{Credentials, Plan};
use pgappliance::upload::StoreConfig;
use sha2::{Digest, Sha256};

use crate::build::BuildArgs;

/// How to reach Redfish BMCs (shared by `launch` and `eject`).
#[derive(Debug, clap::Args)]
pub struct BmcArgs {
    /// Redfish BMC base URL (https://BMC); repeat for several servers.
    #[arg(long = "bmc", value_name = "URL")]
    pub bmcs: Vec<String>,
    /// The Redfish system id on the BMC (needed when it has several).
    #[arg(long, value_name = "ID")]
    pub system: Option<String>,
    /// A 0600 file with `user = …` and `password = …` lines; default: PGAPPLIANCE_BMC_USER
    /// and PGAPPLIANCE_BMC_PASSWORD.
    #[arg(long, value_name = "FILE")]
    pub bmc_credentials: Option<PathBuf>,
    /// PEM certificate (or CA) the BMC's https certificate must chain to.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub bmc_ca: Option<PathBuf>,
    /// Do not check the BMC's certificate (and allow plain http BMC URLs).
    #[arg(long)]
    pub insecure: bool,
    /// Timeout of each request to a BMC.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub bmc_timeout: Duration,
}

impl BmcArgs {
    fn connect(&self, url: &str, creds: &credentials::BmcCredentials) -> Result<redfish::Bmc> {
        let ca_pem = match &self.bmc_ca {
            Some(p) => Some(
                std::fs::read(p).with_context(|| format!("reading --bmc-ca {}", p.display()))?,
            ),
            None => None,
        };
        redfish::Bmc::new(redfish::BmcOptions {
            url: url.to_string(),
            credentials: creds.clone(),
            ca_pem,
            insecure: self.insecure,
            timeout: self.bmc_timeout,
        })
    }
}

/// Where the launch record (and an uploaded ISO) go: the plan's `[upload]` store unless
/// overridden.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// s3://bucket/prefix or file:///dir; default: the plan's upload.store.
    #[arg(long)]
    pub store: Option<String>,
    /// S3 endpoint (path-style); default: the plan's, else AWS_ENDPOINT_URL or AWS.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// S3 region; default: the plan's.
    #[arg(long)]
    pub region: Option<String>,
    /// A 0600 file with access_key_id/secret_access_key; default: the plan's credentials.
    #[arg(long)]
    pub credentials_file: Option<PathBuf>,
    /// The profile (`[name]` section) of the credentials file to use.
    #[arg(long, requires = "credentials_file")]
    pub credentials_profile: Option<String>,
}

impl StoreArgs {
    pub fn config(&self, plan: &Plan) -> StoreConfig {
        let mut c = StoreConfig::from_plan(&plan.upload, self.store.as_deref());
        if let Some(e) = &self.endpoint {
            c.endpoint = Some(e.clone());
        }
        if let Some(r) = &self.region {
            c.region = r.clone();
        }
        if let Some(f) = &self.credentials_file {
            c.credentials = Credentials::File;
            c.credentials_file = Some(f.display().to_string());
            c.credentials_profile = self
                .credentials_profile
                .clone()
                .unwrap_or_else(|| pgappliance::upload::store::DEFAULT_PROFILE.into());
        }
        c
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 every target started and kept what it was asked; 2 every \
target started but a BMC did not keep a setting it accepted; 1 an error or a target not started."
)]
pub struct LaunchArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub bmc: BmcArgs,
    /// IPMI BMC (HOST or HOST:PORT) of a server whose ISO is mounted by hand; repeatable.
    #[arg(long = "ipmi", value_name = "HOST")]
    pub ipmis: Vec<String>,
    /// Where BMCs fetch appliance.iso (served by you). Default: upload it to the store and
    /// presign it.
    #[arg(long, value_name = "URL")]
    pub iso_url: Option<String>,
    /// How long the presigned ISO URL stays valid.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub url_lifetime: Duration,
    /// How long to wait for a Redfish system to read PowerState On after the reset.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub power_wait: Duration,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 ejected on every BMC; 1 an error.")]
pub struct EjectArgs {
    #[command(flatten)]
    pub bmc: BmcArgs,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub fn run(args: LaunchArgs) -> Result<i32> {
    if args.bmc.bmcs.is_empty() && args.ipmis.is_empty() {
        bail!("nothing to launch: give --bmc URL (Redfish) or --ipmi HOST");
    }
    if !args.bmc.bmcs.is_empty() && args.iso_url.is_none() && args.build.iso.is_none() {
        bail!("Redfish BMCs mount appliance.iso: give --iso ROCKY.iso to build it (or --iso-url where you serve it)");
    }
    if let Some(u) = &args.iso_url {
        redfish::check_image_url(u, redfish::Firmware::Other)?;
    }
    let ipmi_targets = args
        .ipmis
        .iter()
        .map(|s| ipmi::parse_target(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let creds = credentials::load(args.bmc.bmc_credentials.as_deref())?;
    let bmcs = args
        .bmc
        .bmcs
        .iter()
        .map(|u| args.bmc.connect(u, &creds).map(|b| (u.clone(), b)))
        .collect::<Result<Vec<_>>>()?;
    let plan = Plan::load(&args.build.plan)?;
    let plan_bytes = std::fs::read(&args.build.plan)
        .with_context(|| format!("reading {}", args.build.plan.display()))?;
    let store_cfg = args.store.config(&plan);
    store_cfg.preflight()?;
    let store = pgappliance::upload::Store::open(&store_cfg)?;

    let now = SystemTime::now();
    let entropy = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
        ^ std::process::id();
    let id = record::launch_id(&plan.appliance.name, now, entropy);
    let out = args.build.out.clone();
    let plan_file = args.build.plan.display().to_string();
    let LaunchArgs {
        build,
        bmc: bmc_args,
        ipmis,
        iso_url,
        url_lifetime,
        power_wait,
        ..
    } = args;
    crate::build::run(build)?;

    let rt = runtime()?;
    rt.block_on(async {
        let (iso_url, iso_object) = match (&iso_url, bmcs.is_empty()) {
            (Some(u), _) => (Some(u.clone()), None),
            (None, true) => (None, None),
            (None, false) => {
                let (object, url) = presign::upload_and_presign(
                    &store,
                    &out.join("appliance.iso"),
                    &["launches", &id, "appliance.iso"],
                    url_lifetime,
                )
                .await?;
                println!(
                    "uploaded appliance.iso to {object}, presigned for {}",
                    humantime::format_duration(url_lifetime)
                );
                (Some(url), Some(object))
            }
        };
        let mut targets = Vec::new();
        for (address, bmc) in &bmcs {
            let at = record::timestamp(SystemTime::now());
            let url = iso_url.as_deref().unwrap_or_default();
            let mut say = |line: String| println!("{address}: {line}");
            let r =
                redfish::launch(bmc, bmc_args.system.as_deref(), url, power_wait, &mut say).await;
            targets.push(record_target(
                address,
                "redfish",
                at,
                r.map(record::Started::Redfish),
            ));
        }
        let runner = pgappliance::runner::Runner::local();
        for (address, t) in ipmis.iter().zip(&ipmi_targets) {
            let at = record::timestamp(SystemTime::now());
            let mut say = |line: String| println!("{address}: {line}");
            let r = ipmi::launch(&runner, t, &creds, &mut say).await;
            targets.push(record_target(
                address,
                "ipmi",
                at,
                r.map(record::Started::Ipmi),
            ));
        }
        let rec = record::LaunchRecord {
            schema: record::SCHEMA,
            launch_id: id.clone(),
            plan: record::PlanRef {
                name: plan.appliance.name.clone(),
                file: plan_file,
                sha256: format!("{:x}", Sha256::digest(&plan_bytes)),
            },
            created_at: record::timestamp(now),
            iso_url: iso_url.as_deref().map(record::without_query),
            iso_object,
            targets,
        };
        let key = record::write(&store, &rec).await?;
        Ok(summarize(&rec, &key))
    })
}

fn record_target(
    address: &str,
    method: &'static str,
    at: String,
    r: Result<record::Started>,
) -> record::Target {
    match r {
        Ok(s) => record::Target {
            address: address.to_string(),
            method,
            at,
            started: Some(s),
            error: None,
        },
        Err(e) => {
            eprintln!("{address}: not started: {e:#}");
            record::Target {
                address: address.to_string(),
                method,
                at,
                started: None,
                error: Some(format!("{e:#}")),
            }
        }
    }
}

/// Prints what happened and returns the exit status.
fn summarize(rec: &record::LaunchRecord, key: &str) -> i32 {
    let mut failed = 0;
    let mut not_kept = 0;
    for t in &rec.targets {
        let kept = match &t.started {
            None => {
                failed += 1;
                continue;
            }
            Some(record::Started::Redfish(r)) => &r.not_kept,
            Some(record::Started::Ipmi(i)) => &i.not_kept,
        };
        for k in kept {
            println!("{}: the BMC did not keep what it accepted: {k}", t.address);
        }
        if !kept.is_empty() {
            not_kept += 1;
        }
    }
    println!(
        "launch {}: {} of {} targets started; record {key}",
        rec.launch_id,
        rec.targets.len() - failed,
        rec.targets.len()
    );
    match (failed, not_kept) {
        (0, 0) => 0,
        (0, _) => 2,
        _ => 1,
    }
}

/// `pgappliance eject`: takes the virtual CD/DVD out on each BMC.
pub fn eject(args: EjectArgs) -> Result<i32> {
    if args.bmc.bmcs.is_empty() {
        bail!("give --bmc URL");
    }
    let creds = credentials::load(args.bmc.bmc_credentials.as_deref())?;
    runtime()?.block_on(async {
        for url in &args.bmc.bmcs {
            let bmc = args.bmc.connect(url, &creds)?;
            let media = redfish::eject(&bmc, args.bmc.system.as_deref()).await?;
            println!("{url}: ejected {media}");
        }
        Ok(0)
    })
}
