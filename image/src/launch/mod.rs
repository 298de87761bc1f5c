//! `pgappliance launch PLAN`: build with `build`'s own code, then start each target: Redfish
//! BMCs mount the ISO as virtual media and boot it once; IPMI BMCs (ISO mounted by hand)
//! boot CD/DVD next and are reset or powered on. Every launch leaves a record in the plan's
//! store (`<prefix>/launches/<launch id>.json`).
//!
//! Exit status: 0 every target started and the BMCs kept what they were asked; 2 every
//! target started but some BMC did not keep a setting it accepted (listed); 1 an error or a
//! target that could not be started (the record says which).

pub(crate) mod bmc;
pub(crate) mod credentials;
pub(crate) mod ec2;
pub(crate) mod ipmi;
pub(crate) mod presign;
pub(crate) mod record;
pub(crate) mod redfish;
pub(crate) mod wait;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use pgappliance::plan::Plan;
use pgappliance::upload::caller::{CallerKeys, Chain};
use pgappliance::upload::StoreConfig;
use sha2::{Digest, Sha256};

use crate::build::BuildArgs;

/// Which Redfish BMCs, and how to reach them (shared by `launch` and `eject`).
#[derive(Debug, clap::Args)]
pub(crate) struct BmcArgs {
    /// Redfish BMC base URL (https://BMC); repeat for several servers.
    #[arg(long = "bmc", value_name = "URL")]
    pub(crate) bmcs: Vec<String>,
    /// The Redfish system id on the BMC (needed when it has several).
    #[arg(long, value_name = "ID")]
    pub(crate) system: Option<String>,
    #[command(flatten)]
    pub(crate) access: BmcAccess,
}

/// How every request reaches a BMC: its credentials, the check of its certificate and a
/// timeout (`launch` and `eject` with [`BmcArgs`], `wait --teardown` alone).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BmcAccess {
    /// A 0600 file with `user = …` and `password = …` lines; default: PGAPPLIANCE_BMC_USER
    /// and PGAPPLIANCE_BMC_PASSWORD.
    #[arg(long, value_name = "FILE")]
    pub(crate) bmc_credentials: Option<PathBuf>,
    /// PEM certificate (or CA) the BMC's https certificate must chain to.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub(crate) bmc_ca: Option<PathBuf>,
    /// Do not check the BMC's certificate (and allow plain http BMC URLs).
    #[arg(long)]
    pub(crate) insecure: bool,
    /// Timeout of each request to a BMC.
    #[arg(long, default_value = "60s", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) bmc_timeout: Duration,
}

impl BmcAccess {
    fn connect(&self, url: &str, creds: &credentials::BmcCredentials) -> Result<bmc::Bmc> {
        let ca_pem = match &self.bmc_ca {
            Some(p) => Some(
                pgappliance::fsutil::read_regular(p)
                    .with_context(|| format!("reading --bmc-ca {}", p.display()))?,
            ),
            None => None,
        };
        bmc::Bmc::new(bmc::BmcOptions {
            url: url.to_string(),
            credentials: creds.clone(),
            ca_pem,
            insecure: self.insecure,
            timeout: self.bmc_timeout,
        })
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 every target started and kept what it was asked; 2 every \
target started but a BMC did not keep a setting it accepted, or the command line is \
malformed (no target: --bmc, --ipmi or --ec2); 1 an error or a target not started.",
    group(clap::ArgGroup::new("target").required(true).multiple(true).args(["bmcs", "ipmis", "ec2"]))
)]
pub(crate) struct LaunchArgs {
    #[command(flatten)]
    pub(crate) build: BuildArgs,
    #[command(flatten)]
    pub(crate) bmc: BmcArgs,
    /// IPMI BMC (HOST or HOST:PORT) of a server whose ISO is mounted by hand; repeatable.
    #[arg(long = "ipmi", value_name = "HOST")]
    pub(crate) ipmis: Vec<String>,
    /// Where BMCs fetch appliance.iso (served by you). Default: upload it to the store and
    /// presign it.
    #[arg(long, value_name = "URL")]
    pub(crate) iso_url: Option<String>,
    /// How long the presigned ISO URL stays valid.
    #[arg(long, default_value = "24h", value_parser = url_lifetime)]
    pub(crate) url_lifetime: Duration,
    /// How long to wait for a Redfish system to read PowerState On after the reset.
    #[arg(long, default_value = "60s", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) power_wait: Duration,
    #[command(flatten)]
    pub(crate) ec2: Ec2Args,
    #[command(flatten)]
    pub(crate) store: pgappliance::upload::StoreOverrides,
}

/// The name of an EC2 instance's install failure report, under
/// `<appliance>/failed/<launch id>/` in the store.
pub(crate) const INSTALL_FAILURE: &str = "install-failed.txt";

/// How long the presigned failure report URL stays valid at least: longer than the payload
/// URL's, so that an instance whose payload URL expired can still say so (7 days, the most
/// a SigV4 presigned URL allows). It can only write that one object.
pub(crate) const FAILURE_URL_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// The value parser of `--url-lifetime`: above zero and at most 7 days, the most a SigV4
/// presigned URL is valid (S3 refuses a longer one when it is used, at the server's boot).
fn url_lifetime(text: &str) -> Result<Duration, String> {
    pgappliance::clock::parse_duration_within(
        text,
        FAILURE_URL_LIFETIME,
        "7 days (the most a SigV4 presigned URL is valid)",
    )
}

/// EC2 instances booting a stock Rocky 8 image with the build's user-data.
#[derive(Debug, clap::Args)]
pub(crate) struct Ec2Args {
    /// Launch EC2 instances (RunInstances): the payload is uploaded to the store and
    /// presigned, the user-data fetches it; shutting down terminates the instance.
    #[arg(long, requires_all = ["image_id", "instance_type"])]
    pub(crate) ec2: bool,
    /// The AMI (a Rocky 8 image of the plan's architecture).
    #[arg(long, value_name = "AMI", requires = "ec2")]
    pub(crate) image_id: Option<String>,
    /// The instance type (e.g. m6gd.8xlarge).
    #[arg(long, value_name = "TYPE", requires = "ec2")]
    pub(crate) instance_type: Option<String>,
    /// The subnet to launch in; default: the account's default VPC.
    #[arg(long, value_name = "ID", requires = "ec2")]
    pub(crate) subnet_id: Option<String>,
    /// The EC2 key pair for ssh (none by default: the appliance needs no login).
    #[arg(long, value_name = "NAME", requires = "ec2")]
    pub(crate) key_name: Option<String>,
    /// A security group for the instances; repeatable.
    #[arg(long = "security-group-id", value_name = "SG", requires = "ec2")]
    pub(crate) security_group_ids: Vec<String>,
    /// The instance profile whose role lets the appliance upload (for a plan with
    /// `credentials = "instance-role"`); none by default.
    #[arg(long, value_name = "NAME", requires = "ec2")]
    pub(crate) iam_instance_profile: Option<String>,
    /// How many instances.
    #[arg(long, requires = "ec2", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) count: u32,
    /// EC2 region; default: AWS_REGION, else the plan's upload.region.
    #[arg(long)]
    pub(crate) ec2_region: Option<String>,
    /// EC2 endpoint; default: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, else
    /// https://ec2.REGION.amazonaws.com.
    #[arg(long)]
    pub(crate) ec2_endpoint: Option<String>,
    /// A 0600 credentials file with this machine's keys for EC2; default: --ec2-profile,
    /// else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else ~/.aws/credentials
    /// (AWS_PROFILE). Never the store's keys or the plan's `credentials`.
    #[arg(long, value_name = "FILE", requires = "ec2")]
    pub(crate) ec2_credentials_file: Option<PathBuf>,
    /// The profile of --ec2-credentials-file, or of ~/.aws/credentials, for EC2.
    #[arg(long, value_name = "NAME", requires = "ec2")]
    pub(crate) ec2_profile: Option<String>,
    /// How long to wait for every instance to be running.
    #[arg(long, default_value = "10m", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) ec2_wait: Duration,
}

impl Ec2Args {
    /// The EC2 client, with this machine's keys for EC2 ([`ec2_keys`]).
    fn client(&self, store: &StoreConfig) -> Result<ec2::Ec2Client> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = self
            .ec2_region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .unwrap_or_else(|| store.region.clone());
        let endpoint = self
            .ec2_endpoint
            .clone()
            .or_else(|| env("AWS_ENDPOINT_URL_EC2"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://ec2.{region}.amazonaws.com"));
        let keys = ec2_keys(
            self.ec2_credentials_file.as_deref(),
            self.ec2_profile.as_deref(),
        )?;
        ec2::Ec2Client::new(endpoint, region, keys)
    }

    fn request(&self, plan: &str, launch_id: &str, user_data: String) -> Result<ec2::Ec2Request> {
        Ok(ec2::Ec2Request {
            image_id: self.image_id.clone().context("--ec2 needs --image-id")?,
            instance_type: self
                .instance_type
                .clone()
                .context("--ec2 needs --instance-type")?,
            count: self.count,
            subnet_id: self.subnet_id.clone(),
            key_name: self.key_name.clone(),
            security_group_ids: self.security_group_ids.clone(),
            iam_instance_profile: self.iam_instance_profile.clone(),
            user_data,
            tags: vec![
                ("Name".into(), format!("pgappliance {plan}")),
                ("pgappliance:plan".into(), plan.into()),
                ("pgappliance:launch".into(), launch_id.into()),
            ],
        })
    }
}

/// The chain of this machine's keys for EC2 (`--ec2-credentials-file`, `--ec2-profile`, the
/// environment, `~/.aws/credentials`): never the store's keys, never the plan's setting.
pub(crate) fn ec2_chain<'a>(file: Option<&'a Path>, profile: Option<&'a str>) -> Chain<'a> {
    Chain {
        purpose: "EC2",
        file,
        profile,
        file_flag: "--ec2-credentials-file",
        profile_flag: "--ec2-profile",
    }
}

/// This machine's keys for EC2 ([`ec2_chain`]).
pub(crate) fn ec2_keys(file: Option<&Path>, profile: Option<&str>) -> Result<CallerKeys> {
    ec2_chain(file, profile).resolve()
}

pub(crate) use pgappliance::upload::caller::{store_chain, store_here};

/// One line for a store request that failed: the cause and the fix, with the keys used.
pub(crate) fn store_failure(
    store: &pgappliance::upload::Store,
    doing: &str,
    e: &dyn std::fmt::Display,
) -> anyhow::Error {
    anyhow::anyhow!(pgappliance::upload::aws_error::one_line(
        doing,
        &format!("{e:#}"),
        "store",
        store.keys.as_deref(),
        &store_chain(None, None).how(),
    ))
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 ejected on every BMC; 1 an error.")]
pub(crate) struct EjectArgs {
    #[command(flatten)]
    pub(crate) bmc: BmcArgs,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub(crate) fn run(args: LaunchArgs) -> Result<i32> {
    if args.bmc.bmcs.is_empty() && args.ipmis.is_empty() && !args.ec2.ec2 {
        bail!("nothing to launch: give --bmc URL (Redfish), --ipmi HOST or --ec2");
    }
    if !args.bmc.bmcs.is_empty() && args.iso_url.is_none() && args.build.iso.is_none() {
        bail!("Redfish BMCs mount appliance.iso: give --iso ROCKY.iso to build it (or --iso-url where you serve it)");
    }
    if let Some(u) = &args.iso_url {
        redfish::check_image_url(u, redfish::Firmware::Other)?;
    }
    // --out is refused before anything is presigned, uploaded or started (the build
    // checks it again, with all its inputs, when it writes it).
    let mut inputs = vec![("the plan", args.build.plan.as_path())];
    inputs.extend(
        args.build
            .daemon_binary
            .as_deref()
            .map(|d| ("the daemon binary", d)),
    );
    inputs.extend(args.build.iso.as_deref().map(|i| ("the ISO", i)));
    crate::outdir::check(&args.build.out, &inputs, crate::outdir::Kind::Build)?;
    let plan = Plan::load(&args.build.plan)?;
    let store_change = match &args.store.store {
        Some(url) if *url == plan.upload.store => None,
        Some(url) => Some(pgappliance::plan::rewrite::StoreChange {
            store: url.clone(),
            endpoint: args.store.endpoint.clone(),
            region: args.store.region.clone(),
        }),
        None => None,
    };
    if let Some(url) = store_change
        .as_ref()
        .map(|c| c.store.as_str())
        .filter(|u| u.starts_with("file://"))
    {
        pgappliance::errln!(
            "warning: --store {url}: the servers write their runs to that directory on their own disks; `wait` and `collect` here see them only when it is shared with this machine (an s3:// store both reach is the usual choice)"
        );
    }
    let upload = match &store_change {
        Some(c) => record::UploadRef {
            store: c.store.clone(),
            endpoint: c.endpoint.clone().or_else(|| plan.upload.endpoint.clone()),
            region: c
                .region
                .clone()
                .unwrap_or_else(|| plan.upload.region.clone()),
        },
        None => record::UploadRef {
            store: plan.upload.store.clone(),
            endpoint: plan.upload.endpoint.clone(),
            region: plan.upload.region.clone(),
        },
    };
    if !args.ipmis.is_empty() && plan.install.is_none() {
        bail!(
            "--ipmi boots the server from the CD mounted on it, and only a bare-metal plan's ISO installs anything: {} has no [install] table (os_disk and a way in, docs/plan.md), so the CD would boot no kickstart; add [install] and build the ISO with --iso, or launch EC2 instances with --ec2",
            args.build.plan.display()
        );
    }
    let ipmi_targets = args
        .ipmis
        .iter()
        .map(|s| ipmi::parse_target(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let bmc_targets = !args.bmc.bmcs.is_empty() || !ipmi_targets.is_empty();
    let creds = if bmc_targets {
        Some(credentials::load(
            args.bmc.access.bmc_credentials.as_deref(),
        )?)
    } else {
        None
    };
    let bmcs = match &creds {
        Some(c) => args
            .bmc
            .bmcs
            .iter()
            .map(|u| args.bmc.access.connect(u, c).map(|b| (u.clone(), b)))
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let plan_bytes = pgappliance::fsutil::read_regular(&args.build.plan)
        .with_context(|| format!("reading {}", args.build.plan.display()))?;
    let store_cfg = store_here(
        args.store.config(&plan.upload),
        args.store.credentials_file.as_deref().map(Path::new),
        args.store.credentials_profile.as_deref(),
    )?;
    store_cfg.preflight()?;
    let store = pgappliance::upload::Store::open(&store_cfg)?;
    if !bmcs.is_empty() && args.iso_url.is_none() && store.signer.is_none() {
        bail!(
            "the store {} cannot presign the ISO for the BMCs (only s3:// stores can): give --iso-url where you serve appliance.iso, or an s3:// --store",
            store.url
        );
    }
    if args.ec2.ec2 && args.build.payload_url.is_none() && store.signer.is_none() {
        bail!(
            "the store {} cannot presign the payload for the EC2 instances (only s3:// stores can): give --payload-url where you serve payload.tar.gz, or an s3:// --store",
            store.url
        );
    }
    let ec2_client = if args.ec2.ec2 {
        Some(args.ec2.client(&store_cfg)?)
    } else {
        None
    };

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
        mut build,
        bmc: bmc_args,
        ipmis,
        iso_url,
        url_lifetime,
        power_wait,
        ec2: ec2_args,
        store: store_options,
        ..
    } = args;
    let rt = runtime()?;
    // The payload URL is rendered into the user-data, so it is presigned before the build
    // (a presigned URL depends on the object's path, not its content).
    let payload_object = if ec2_client.is_some() && build.payload_url.is_none() {
        let (object, url) = rt.block_on(presign::presign(
            &store,
            &["launches", &id, "payload.tar.gz"],
            url_lifetime,
            "payload.tar.gz",
        ))?;
        build.payload_url = Some(url);
        Some(object)
    } else {
        None
    };
    // An instance whose install fails says why in the store, under the appliance's failure
    // bundles (`<appliance>/failed/`), keyed by the launch (instances have no run yet).
    let failure_object =
        if ec2_client.is_some() && build.failure_url.is_none() && store.signer.is_some() {
            let (object, url) = rt.block_on(presign::presign_method(
                &store,
                reqwest::Method::PUT,
                &[
                    &plan.appliance.name,
                    pgappliance::engine::reset::FAILED_PREFIX,
                    &id,
                    INSTALL_FAILURE,
                ],
                FAILURE_URL_LIFETIME,
                "the install failure report",
            ))?;
            build.failure_url = Some(url);
            Some(object)
        } else {
            None
        };
    let payload_url = build.payload_url.clone();
    build.for_launch = true;
    build.store = store_change;
    crate::build::run(build)?;

    rt.block_on(async {
        let (iso_url, iso_object) = match (&iso_url, bmcs.is_empty()) {
            (Some(u), _) => (Some(u.clone()), None),
            (None, true) => (None, None),
            (None, false) => {
                let parts = ["launches", id.as_str(), "appliance.iso"];
                presign::upload(&store, &out.join("appliance.iso"), &parts).await?;
                let (object, url) =
                    presign::presign(&store, &parts, url_lifetime, "appliance.iso").await?;
                pgappliance::outln!(
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
            let mut say = |line: String| pgappliance::outln!("{address}: {line}");
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
            let mut say = |line: String| pgappliance::outln!("{address}: {line}");
            let r = match &creds {
                Some(c) => ipmi::launch(&runner, t, c, &mut say).await,
                None => Err(anyhow::anyhow!("no BMC credentials")),
            };
            targets.push(record_target(
                address,
                "ipmi",
                at,
                r.map(record::Started::Ipmi),
            ));
        }
        if let Some(client) = &ec2_client {
            let at = record::timestamp(SystemTime::now());
            let address = client.endpoint().to_string();
            let r = async {
                if let Some(object) = &payload_object {
                    let parts = ["launches", id.as_str(), "payload.tar.gz"];
                    presign::upload(&store, &out.join("payload.tar.gz"), &parts)
                        .await
                        .map(|()| pgappliance::outln!("uploaded payload.tar.gz to {object}"))?;
                }
                let user_data = std::fs::read_to_string(out.join("user-data.yaml"))
                    .context("reading the user-data the build wrote")?;
                let request = ec2_args.request(&plan.appliance.name, &id, user_data)?;
                let mut say = |line: String| pgappliance::outln!("{address}: {line}");
                ec2::launch(
                    client,
                    &request,
                    ec2_args.ec2_wait,
                    payload_url.as_deref().unwrap_or_default(),
                    &mut say,
                )
                .await
            }
            .await;
            targets.push(record_target(
                &address,
                "ec2",
                at,
                r.map(record::Started::Ec2),
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
            payload_object,
            failure_object,
            targets: targets
                .into_iter()
                .map(|t| record::Target {
                    uploads_to: Some(upload.store.clone()),
                    ..t
                })
                .collect(),
            upload: Some(upload),
        };
        let key = record::write(&store, &rec).await?;
        Ok(summarize(
            &rec,
            &key,
            &wait_store_flags(&store_cfg, &store_options),
        ))
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
            method: method.to_string(),
            at,
            started: Some(s),
            error: None,
            uploads_to: None,
        },
        Err(e) => {
            pgappliance::errln!("{address}: not started: {e:#}");
            record::Target {
                address: address.to_string(),
                method: method.to_string(),
                at,
                started: None,
                error: Some(format!("{e:#}")),
                uploads_to: None,
            }
        }
    }
}

/// The store options of the `wait` a launch names (pure): how this machine reached the
/// store the record is in, the plan's endpoint and region included when the command line
/// did not give them (`wait` knows no plan), and this machine's credentials options.
fn wait_store_flags(
    cfg: &pgappliance::upload::StoreConfig,
    options: &pgappliance::upload::StoreOverrides,
) -> String {
    let mut flags = cfg.url.clone();
    // A file:// store has no endpoint or region.
    let s3 = cfg.url.starts_with("s3://");
    let endpoint = cfg.endpoint.clone().filter(|_| s3);
    let region = (s3 && (options.region.is_some() || cfg.region != DEFAULT_REGION))
        .then(|| cfg.region.clone());
    for (flag, value) in [
        ("--endpoint", &endpoint),
        ("--region", &region),
        ("--credentials-file", &options.credentials_file),
        ("--credentials-profile", &options.credentials_profile),
    ] {
        if let Some(v) = value {
            flags.push_str(&format!(" {flag} {v}"));
        }
    }
    flags
}

/// The region `wait` and `collect` take when none is given.
const DEFAULT_REGION: &str = "us-east-1";

/// Prints what happened and what to do next, and returns the exit status.
fn summarize(rec: &record::LaunchRecord, key: &str, store: &str) -> i32 {
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
            Some(record::Started::Ec2(_)) => continue,
        };
        for k in kept {
            pgappliance::outln!("{}: the BMC did not keep what it accepted: {k}", t.address);
        }
        if !kept.is_empty() {
            not_kept += 1;
        }
    }
    pgappliance::outln!(
        "launch {}: {} of {} targets started; record {key}",
        rec.launch_id,
        rec.targets.len() - failed,
        rec.targets.len()
    );
    if failed < rec.targets.len() {
        pgappliance::outln!(
            "next: `pgappliance wait {} --store {store}` follows the started targets until their runs are stored (add --teardown to power them off and collect the store when it ends)",
            rec.launch_id
        );
    }
    if failed > 0 {
        pgappliance::outln!(
            "next: the targets not started are named above with why; fix that and launch them again"
        );
    }
    match (failed, not_kept) {
        (0, 0) => 0,
        (0, _) => 2,
        _ => 1,
    }
}

/// `pgappliance eject`: takes the virtual CD/DVD out on each BMC.
pub(crate) fn eject(args: EjectArgs) -> Result<i32> {
    if args.bmc.bmcs.is_empty() {
        bail!("give --bmc URL");
    }
    let creds = credentials::load(args.bmc.access.bmc_credentials.as_deref())?;
    runtime()?.block_on(async {
        for url in &args.bmc.bmcs {
            let bmc = args.bmc.access.connect(url, &creds)?;
            let media = redfish::eject(&bmc, args.bmc.system.as_deref()).await?;
            pgappliance::outln!("{url}: ejected {media}");
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(endpoint: Option<&str>, region: &str) -> StoreConfig {
        StoreConfig {
            url: "s3://pgappliance-results/campaign-1".into(),
            endpoint: endpoint.map(str::to_string),
            region: region.into(),
            credentials: pgappliance::plan::Credentials::File,
            credentials_file: Some("/etc/pgappliance/s3.credentials".into()),
            credentials_profile: "default".into(),
            caller: None,
        }
    }

    #[test]
    fn the_wait_a_launch_names_reaches_the_store_at_the_plans_endpoint_too() {
        // The plan's endpoint, nothing on the command line but this machine's keys: `wait`
        // knows no plan, so the endpoint is repeated (seen on the docs walk of 2026-12-02:
        // the wait pasted from the next: line went to AWS).
        let options = pgappliance::upload::StoreOverrides {
            credentials_file: Some("lab.credentials".into()),
            ..Default::default()
        };
        assert_eq!(
            wait_store_flags(&cfg(Some("http://10.0.0.5:8333"), "us-east-1"), &options),
            "s3://pgappliance-results/campaign-1 --endpoint http://10.0.0.5:8333 --credentials-file lab.credentials"
        );
        // A region other than wait's default is repeated, given or from the plan.
        assert_eq!(
            wait_store_flags(&cfg(None, "eu-west-1"), &Default::default()),
            "s3://pgappliance-results/campaign-1 --region eu-west-1"
        );
        let given = pgappliance::upload::StoreOverrides {
            region: Some("us-east-1".into()),
            credentials_profile: Some("lab".into()),
            ..Default::default()
        };
        assert_eq!(
            wait_store_flags(&cfg(None, "us-east-1"), &given),
            "s3://pgappliance-results/campaign-1 --region us-east-1 --credentials-profile lab"
        );
        // A file:// store given for a plan with an endpoint: nothing of S3 is repeated.
        let mut file = cfg(Some("http://10.0.0.5:8333"), "eu-west-1");
        file.url = "file:///srv/records".into();
        assert_eq!(
            wait_store_flags(&file, &given),
            "file:///srv/records --credentials-profile lab"
        );
        // The plan's credentials file is the appliance's: never on this machine's command.
        assert!(
            !wait_store_flags(&cfg(None, "us-east-1"), &Default::default())
                .contains("/etc/pgappliance")
        );
    }
}
