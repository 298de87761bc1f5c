//! `pgappliance wait LAUNCH`: watches the targets of a launch through the status objects
//! their appliances keep in the store (`<prefix>/<appliance>/<machine id>/<run id>.status.json`)
//! until each has a complete run (state `done` and its `manifest.json` in the store), has
//! failed or refused, or the timeout passes; then, with `--teardown`, terminates the EC2
//! instances, ejects and powers off the Redfish servers, powers off the IPMI ones, and runs
//! `collect` on the store.
//!
//! Which status object belongs to which target: an EC2 instance by the instance id the
//! appliance reports, a Redfish server by its ComputerSystem UUID (DMI product_uuid on the
//! server, compared without regard to case); an IPMI target (or a Redfish server whose BMC
//! reported no UUID) takes a run of the plan's appliance that no other target claims and
//! that reports no cloud instance id. Status objects of runs started before the launch are
//! ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use object_store::{ObjectStore, ObjectStoreExt};
use pgappliance::engine::live::LiveStatus;
use pgappliance::plan::Credentials;
use pgappliance::upload::{Manifest, Store, StoreConfig, MANIFEST};

use super::record::{LaunchRecord, Started, UploadRef, SCHEMA};

/// Exit statuses of `wait`, shown in its `--help`.
pub(crate) const WAIT_EXIT_CODES: &str = "\
Exit status: 0 every target has a complete run in the store (and, with --teardown, every
target was torn down and collect wrote its pages); 1 a target failed, refused or did not
arrive before --timeout, a teardown or collect failed, or an error (a launch record that
cannot be read, a store that cannot be opened); 2 the command line is malformed.";

#[derive(Debug, clap::Args)]
#[command(after_help = WAIT_EXIT_CODES)]
// The BMC flags are `launch`'s (`BmcAccess`), their help said for the teardown.
#[command(mut_arg("bmc_credentials", |a| a.help(
    "BMC credentials for the teardown: a 0600 file with `user = …` and `password = …` \
     lines; default: PGAPPLIANCE_BMC_USER and PGAPPLIANCE_BMC_PASSWORD"
)))]
#[command(mut_arg("bmc_ca", |a| a.help(
    "PEM certificate (or CA) the Redfish BMCs' https certificates must chain to"
)))]
#[command(mut_arg("insecure", |a| a.help(
    "Do not check the Redfish BMCs' certificates (and allow plain http BMC URLs)"
)))]
pub(crate) struct WaitArgs {
    /// A launch id (its record is `<prefix>/launches/<id>.json` in the store) or the path of
    /// a local copy of a launch record.
    #[arg(value_name = "LAUNCH_ID_OR_RECORD")]
    pub(crate) launch: String,
    /// The store the launch wrote its record to (s3://bucket/prefix or file:///dir); the
    /// targets' runs are read where the record says they upload. Not needed with a record file.
    #[arg(long, value_name = "URL", value_parser = pgappliance::upload::overrides::store_url_arg)]
    pub(crate) store: Option<String>,
    /// S3 endpoint (path-style); default: the record's, else AWS_ENDPOINT_URL, else AWS.
    #[arg(long, value_name = "URL", value_parser = pgappliance::upload::overrides::endpoint_arg)]
    pub(crate) endpoint: Option<String>,
    /// S3 region [default: the record's, else us-east-1].
    #[arg(long)]
    pub(crate) region: Option<String>,
    /// A 0600 file with this machine's keys for the store; default: --credentials-profile,
    /// else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else ~/.aws/credentials (AWS_PROFILE).
    #[arg(long, value_name = "FILE")]
    pub(crate) credentials_file: Option<PathBuf>,
    /// The profile of --credentials-file, or of ~/.aws/credentials, for the store.
    #[arg(long, value_name = "NAME")]
    pub(crate) credentials_profile: Option<String>,
    /// How long to wait for every target, from when `wait` starts.
    #[arg(long, default_value = "6h", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) timeout: Duration,
    /// How often the store is read.
    #[arg(long, default_value = "30s", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) interval: Duration,
    /// When the output is not a terminal: a `wait:` line with the time elapsed and each
    /// target's last status age and time left at least this often (a terminal shows them
    /// on the targets' lines).
    #[arg(long, default_value = "5m", value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) heartbeat: Duration,
    /// When the wait ends: terminate the EC2 instances, eject and power off (ForceOff) the
    /// Redfish servers, power off the IPMI servers, then collect the store into --out.
    #[arg(long)]
    pub(crate) teardown: bool,
    /// Where collect writes its pages [default: ./collect-<launch id>].
    #[arg(long, value_name = "DIR", requires = "teardown")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) bmc: super::BmcAccess,
    /// EC2 endpoint for the teardown; default: the one the launch used (in its record).
    #[arg(long, value_name = "URL")]
    pub(crate) ec2_endpoint: Option<String>,
    /// A 0600 credentials file with this machine's keys for EC2 (the teardown); default:
    /// --ec2-profile, else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else
    /// ~/.aws/credentials (AWS_PROFILE).
    #[arg(long, value_name = "FILE")]
    pub(crate) ec2_credentials_file: Option<PathBuf>,
    /// The profile of --ec2-credentials-file, or of ~/.aws/credentials, for EC2.
    #[arg(long, value_name = "NAME")]
    pub(crate) ec2_profile: Option<String>,
}

impl WaitArgs {
    /// The store as this machine reaches it: `url` (the record's store or where its targets
    /// upload), with this machine's keys for an S3 store.
    fn store_config(&self, url: &str, upload: Option<&UploadRef>) -> Result<StoreConfig> {
        let recorded = upload.filter(|u| u.store == url);
        super::store_here(
            StoreConfig {
                url: url.to_string(),
                endpoint: self
                    .endpoint
                    .clone()
                    .or_else(|| recorded.and_then(|u| u.endpoint.clone())),
                region: self
                    .region
                    .clone()
                    .or_else(|| recorded.map(|u| u.region.clone()))
                    .unwrap_or_else(|| "us-east-1".into()),
                credentials: Credentials::Environment,
                credentials_file: None,
                credentials_profile: pgappliance::upload::store::DEFAULT_PROFILE.into(),
                caller: None,
            },
            self.credentials_file.as_deref(),
            self.credentials_profile.as_deref(),
        )
    }

    fn ec2_keys(&self) -> Result<pgappliance::upload::caller::CallerKeys> {
        super::ec2_keys(
            self.ec2_credentials_file.as_deref(),
            self.ec2_profile.as_deref(),
        )
    }
}

/// How a watched unit recognises its status object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Matcher {
    /// An EC2 instance id.
    Instance(String),
    /// A Redfish ComputerSystem UUID.
    SystemUuid(String),
    /// Any unclaimed bare-metal run of the appliance (IPMI, or a BMC without a UUID).
    Unclaimed,
    /// The launch did not start it: failed from the start.
    NotStarted(String),
}

/// One thing `wait` follows: a target of the record, or one instance of an EC2 target.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    pub(crate) label: String,
    pub(crate) matcher: Matcher,
}

/// The units of a launch record (pure).
pub(crate) fn units(record: &LaunchRecord) -> Vec<Unit> {
    let mut out = Vec::new();
    for t in &record.targets {
        match (&t.started, &t.error) {
            (Some(Started::Ec2(e)), _) => {
                for id in &e.instances {
                    out.push(Unit {
                        label: id.clone(),
                        matcher: Matcher::Instance(id.clone()),
                    });
                }
            }
            (Some(Started::Redfish(r)), _) => out.push(Unit {
                label: t.address.clone(),
                matcher: match &r.system_uuid {
                    Some(u) => Matcher::SystemUuid(u.clone()),
                    None => Matcher::Unclaimed,
                },
            }),
            (Some(Started::Ipmi(_)), _) => out.push(Unit {
                label: t.address.clone(),
                matcher: Matcher::Unclaimed,
            }),
            (None, e) => out.push(Unit {
                label: t.address.clone(),
                matcher: Matcher::NotStarted(
                    e.clone()
                        .unwrap_or_else(|| "the launch record names no outcome".into()),
                ),
            }),
        }
    }
    out
}

fn same_uuid(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

fn identity_matches(m: &Matcher, s: &LiveStatus) -> bool {
    let Some(id) = &s.identity else {
        return false;
    };
    match m {
        Matcher::Instance(i) => id.instance_id.as_deref() == Some(i.as_str()),
        Matcher::SystemUuid(u) => id.system_uuid.as_deref().is_some_and(|v| same_uuid(u, v)),
        Matcher::Unclaimed | Matcher::NotStarted(_) => false,
    }
}

/// The latest run among `candidates` (by start, then by update).
fn latest<'a>(candidates: impl Iterator<Item = &'a LiveStatus>) -> Option<&'a LiveStatus> {
    candidates.max_by(|a, b| {
        (a.started_at.as_str(), a.updated_at.as_str())
            .cmp(&(b.started_at.as_str(), b.updated_at.as_str()))
    })
}

/// Which status object each unit follows (pure). `claims` keeps the machine an unclaimed
/// unit took, so it follows the same machine from one poll to the next; statuses must
/// already be those of the launch's appliance started after the launch.
pub(crate) fn assign<'a>(
    units: &[Unit],
    statuses: &'a [LiveStatus],
    claims: &mut BTreeMap<usize, String>,
) -> Vec<Option<&'a LiveStatus>> {
    let mut out: Vec<Option<&LiveStatus>> = units
        .iter()
        .map(|u| latest(statuses.iter().filter(|s| identity_matches(&u.matcher, s))))
        .collect();
    let identified = |s: &LiveStatus| units.iter().any(|u| identity_matches(&u.matcher, s));
    // Whether some unit waits for an identity: then a run without one yet (before its
    // inventory step) may be that unit's, and is not taken by an unclaimed unit.
    let identity_expected = units
        .iter()
        .any(|u| matches!(u.matcher, Matcher::Instance(_) | Matcher::SystemUuid(_)));
    let claimable = |s: &LiveStatus| match &s.identity {
        None => !identity_expected,
        Some(id) => id.instance_id.is_none() && !identified(s),
    };
    for (i, u) in units.iter().enumerate() {
        if u.matcher != Matcher::Unclaimed {
            continue;
        }
        if let Some(machine) = claims.get(&i) {
            out[i] = latest(statuses.iter().filter(|s| &s.machine_id == machine));
            continue;
        }
        let taken: Vec<&String> = claims.values().collect();
        let mut free: Vec<&LiveStatus> = statuses
            .iter()
            .filter(|s| claimable(s) && !taken.contains(&&s.machine_id))
            .collect();
        free.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        if let Some(s) = free.first() {
            claims.insert(i, s.machine_id.clone());
            out[i] = latest(statuses.iter().filter(|x| x.machine_id == s.machine_id));
        }
    }
    out
}

/// What `wait` knows of a unit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum View {
    NoStatus,
    /// Working (or done, its manifest not in the store yet): what it does.
    Working(String),
    /// A complete run: the stored key and how many objects its manifest lists.
    Arrived {
        stored_as: String,
        objects: usize,
    },
    Failed(String),
}

impl View {
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, View::Arrived { .. } | View::Failed(_))
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            View::NoStatus => "no status object yet".into(),
            View::Working(w) => w.clone(),
            View::Arrived { stored_as, objects } => {
                format!("arrived: {stored_as} ({objects} objects in its manifest)")
            }
            View::Failed(f) => f.clone(),
        }
    }
}

/// What to do about a unit that did not arrive (pure): a refused plan is fixed and
/// launched again; a failed run resumes when its machine starts again; a unit that timed out
/// is looked at on its console and its way to the store, and is still on (a server with the
/// CD inserted) until a teardown.
pub(crate) fn next_step(
    unit: &Unit,
    view: &View,
    store: &str,
    record: &LaunchRecord,
    teardown: bool,
) -> Option<String> {
    let still_on = |what: &str| {
        if teardown {
            format!("the teardown below {what}")
        } else {
            format!("it is still on until you take it down (`wait --teardown` {what})")
        }
    };
    let again = format!(
        "`pgappliance wait {} --store {store} --timeout …` watches it again",
        record.launch_id
    );
    match view {
        View::Arrived { .. } => None,
        View::Failed(f) if f.starts_with("refused") => Some(
            "the appliance refused a value of the plan: fix the plan as the error says, then build and launch again; resuming cannot help (on the machine `pgapplianced reset` puts the refused run aside)".into(),
        ),
        View::Failed(_) if matches!(unit.matcher, Matcher::NotStarted(_)) => Some(
            "fix what kept the launch from starting it (the BMC's address, credentials or certificate; the EC2 request), then launch again".into(),
        ),
        View::Failed(_) => Some(format!(
            "the failure bundle is in the store under {}/failed/; the appliance resumes the run when it starts again, or `pgapplianced reset` on it puts the run aside",
            record.plan.name
        )),
        View::Working(w) => Some(format!(
            "it was still at work ({w}): {again}; {}",
            still_on("powers it off")
        )),
        View::NoStatus => Some(match &unit.matcher {
            Matcher::Instance(id) => format!(
                "nothing reached the store from {id}: read its console (`aws ec2 get-console-output --instance-id {id}`) for the install, and check that the instance reaches {store} (its subnet, security group and the store's endpoint); {}",
                still_on("terminates it")
            ),
            _ => format!(
                "nothing reached the store from this server: look at its console (the BMC's KVM or serial over LAN) for the installer or the appliance, and check that the server reaches {store} (its network, DNS, the store's endpoint); {}",
                if teardown {
                    "the teardown below ejects the CD and powers it off".to_string()
                } else {
                    "it is still on, with the CD inserted, until you take it down (`wait --teardown` ejects the CD and powers it off)".to_string()
                }
            ),
        }),
    }
}

/// What a status object says while the run works or after it failed (pure).
pub(crate) fn progress(s: &LiveStatus) -> String {
    let mut text = format!("{} (run {}", s.state, s.run_id);
    if let Some(step) = &s.step {
        text.push_str(&format!(", step {step}"));
    }
    if s.points_total > 0 {
        text.push_str(&format!(", point {}/{}", s.points_done, s.points_total));
    }
    if let Some(tps) = s.last_tps {
        text.push_str(&format!(", last {tps:.0} tps"));
    }
    text.push_str(&format!(", updated {})", s.updated_at));
    text
}

/// A failed or refused run, naming the step and the error (pure).
pub(crate) fn failure(s: &LiveStatus) -> String {
    match &s.failure {
        Some(f) => format!(
            "{} at step {}: {} (run {}, at {})",
            s.state,
            f.step.as_str(),
            f.error,
            s.run_id,
            f.at
        ),
        None => format!(
            "{} (run {}, step {}; the status names no error)",
            s.state,
            s.run_id,
            s.step.as_deref().unwrap_or("unknown")
        ),
    }
}

/// A duration to the second, for people ("12m 3s").
fn short(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// How old a status object is and the time its run says is left (pure): "last status 40s
/// ago, about 25m left".
pub(crate) fn freshness(s: &LiveStatus, now: SystemTime) -> String {
    let mut parts = Vec::new();
    if let Some(age) = parse_time(&s.updated_at, "updated_at")
        .ok()
        .map(|t| now.duration_since(t).unwrap_or_default())
    {
        parts.push(format!("last status {} ago", short(age)));
    }
    if matches!(s.state.as_str(), "running") {
        if let Some(left) = s.left_s.filter(|l| l.is_finite() && *l >= 0.0) {
            let left = short(Duration::from_secs_f64(left));
            parts.push(match s.left_unknown_points {
                0 => format!("about {left} left in the sweep"),
                n => format!("at least {left} left in the sweep ({n} points not estimated yet)"),
            });
        }
    }
    parts.join(", ")
}

/// The line `wait` prints now and then when its output is not a terminal (pure): the time
/// elapsed, then each target still out with what it last said, its age and time left.
pub(crate) fn heartbeat(
    elapsed: Duration,
    timeout: Duration,
    units: &[Unit],
    views: &[View],
    latest: &[Option<LiveStatus>],
    now: SystemTime,
) -> String {
    let mut line = format!(
        "wait: {} elapsed of {}",
        short(elapsed),
        humantime::format_duration(timeout)
    );
    for (i, u) in units.iter().enumerate() {
        if views[i].is_final() {
            continue;
        }
        let what = match &latest[i] {
            Some(s) => {
                let mut w = s.state.clone();
                if let Some(step) = &s.step {
                    w.push_str(&format!(" at step {step}"));
                }
                if s.points_total > 0 {
                    w.push_str(&format!(", point {}/{}", s.points_done, s.points_total));
                }
                let f = freshness(s, now);
                if !f.is_empty() {
                    w.push_str(&format!(", {f}"));
                }
                w
            }
            None => views[i].describe(),
        };
        line.push_str(&format!("; {}: {what}", u.label));
    }
    line
}

/// Parses an RFC 3339 time as the records and status objects write it.
fn parse_time(text: &str, what: &str) -> Result<SystemTime> {
    humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
        .or_else(|_| humantime::parse_rfc3339(text))
        .with_context(|| format!("{what} \"{text}\" is not an RFC 3339 time"))
}

/// Reads the launch record: a local file when `arg` names one, else
/// `<prefix>/launches/<arg>.json` in the store.
pub(crate) async fn load_record(store: Option<&Store>, arg: &str) -> Result<LaunchRecord> {
    let (text, source) = if Path::new(arg).is_file() {
        (
            pgappliance::fsutil::read_regular(Path::new(arg))
                .with_context(|| format!("reading the launch record {arg}"))?,
            arg.to_string(),
        )
    } else if arg.contains('/') || Path::new(arg).exists() {
        bail!(
            "the launch record {arg} {}",
            if Path::new(arg).exists() {
                "is not a regular file"
            } else {
                "does not exist"
            }
        );
    } else {
        if arg.is_empty()
            || !arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            bail!("\"{arg}\" is neither a launch record file nor a launch id (letters, digits, - _ .)");
        }
        let Some(store) = store else {
            bail!("launch {arg}: give --store, the store the launch wrote its record to (its `next:` line names it)");
        };
        let path = store.path(&["launches", &format!("{arg}.json")]);
        let bytes = match store.objects.get(&path).await {
            Ok(r) => r
                .bytes()
                .await
                .with_context(|| format!("reading {path} from {}", store.url))?,
            Err(object_store::Error::NotFound { .. }) => bail!(
                "no launch {arg} in {}: {path} is not there (is it the store the launch wrote to?)",
                store.url
            ),
            Err(e) => {
                return Err(super::store_failure(
                    store,
                    &format!("reading {path} from {}", store.url),
                    &e,
                ))
            }
        };
        (
            bytes.to_vec(),
            format!("{}/{path}", store.url.trim_end_matches('/')),
        )
    };
    let value: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{source} is not JSON"))?;
    match value.get("schema").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(SCHEMA) => {}
        Some(v) => bail!(
            "{source} is a launch record of schema {v}; this pgappliance reads schema {SCHEMA}"
        ),
        None => bail!("{source} is not a launch record: it has no schema number"),
    }
    let record: LaunchRecord = serde_json::from_value(value)
        .with_context(|| format!("{source} is not a launch record"))?;
    check_record(&record)
        .map_err(|why| anyhow::anyhow!("{source} is not a launch record: {why}"))?;
    Ok(record)
}

/// What `launch` always writes and `wait` relies on (pure): a target at least (a record of
/// none would "arrive" at once, exit 0), and a plan name that is a plain name (it is the first
/// level of the keys read in the store).
fn check_record(record: &LaunchRecord) -> std::result::Result<(), String> {
    if record.targets.is_empty() {
        return Err("it names no targets (a launch starts at least one)".into());
    }
    pgappliance::fsutil::check_path_component("its plan name", &record.plan.name)
}

/// How much earlier than the launch an object may have been written and still be read: the
/// store's clock and the launching machine's differ.
const CLOCK_SLACK: Duration = Duration::from_secs(600);

/// The status objects of `appliance` in the store of runs started after `since`; objects
/// that cannot be read or parsed are reported in `problems` and skipped.
pub(crate) async fn statuses(
    store: &Store,
    appliance: &str,
    since: SystemTime,
    problems: &mut Vec<String>,
) -> Result<Vec<LiveStatus>> {
    // One listing of the machines, then one of each machine's own level: the runs' objects
    // (a few dozen each) are not listed at every poll.
    let base = store.path(&[appliance]);
    let machines = store
        .objects
        .list_with_delimiter(Some(&base))
        .await
        .with_context(|| format!("listing {base} in {}", store.url))?
        .common_prefixes;
    let not_before = since.checked_sub(CLOCK_SLACK).unwrap_or(since);
    let mut metas = Vec::new();
    for machine in machines {
        // Failure bundles live under <appliance>/failed/.
        if machine.filename() == Some("failed") {
            continue;
        }
        let level = store
            .objects
            .list_with_delimiter(Some(&machine))
            .await
            .with_context(|| format!("listing {machine} in {}", store.url))?;
        metas.extend(level.objects.into_iter().filter(|m| {
            m.location
                .filename()
                .is_some_and(|f| f.ends_with(".status.json"))
                && SystemTime::from(m.last_modified) >= not_before
        }));
    }
    let mut out = Vec::new();
    for m in metas {
        let bytes = match store.objects.get(&m.location).await {
            Ok(r) => r.bytes().await,
            Err(e) => Err(e),
        };
        let status = match bytes {
            Ok(b) => match serde_json::from_slice::<LiveStatus>(&b) {
                Ok(s) => s,
                Err(e) => {
                    problems.push(format!("{} is not a status object: {e}", m.location));
                    continue;
                }
            },
            Err(e) => {
                problems.push(format!("reading {}: {e}", m.location));
                continue;
            }
        };
        match parse_time(&status.started_at, "started_at") {
            Ok(t) if t >= since => out.push(status),
            Ok(_) => {}
            Err(e) => problems.push(format!("{}: {e:#}", m.location)),
        }
    }
    Ok(out)
}

/// The run's manifest, when the store has it whole.
async fn manifest(store: &Store, s: &LiveStatus, stored_as: &str) -> Result<Option<Manifest>> {
    let path = store.path(&[stored_as, MANIFEST]);
    let bytes = match store.objects.get(&path).await {
        Ok(r) => r.bytes().await?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let m: Manifest =
        serde_json::from_slice(&bytes).with_context(|| format!("{path} is not a manifest"))?;
    if m.run_id != s.run_id || m.machine_id != s.machine_id {
        bail!(
            "{path} is the manifest of run {} of machine {}, not run {} of {}",
            m.run_id,
            m.machine_id,
            s.run_id,
            s.machine_id
        );
    }
    Ok(Some(m))
}

/// What a status object means for its unit, reading the manifest of a run that says done.
async fn view_of(store: &Store, s: &LiveStatus) -> View {
    match s.state.as_str() {
        "failed" | "refused" => View::Failed(failure(s)),
        "done" => match &s.stored_as {
            None => View::Working(format!("{}, not stored yet", progress(s))),
            Some(key) => match manifest(store, s, key).await {
                Ok(Some(m)) => View::Arrived {
                    stored_as: key.clone(),
                    objects: m.objects.len(),
                },
                Ok(None) => View::Working(format!(
                    "{}, its manifest not in the store yet",
                    progress(s)
                )),
                Err(e) => View::Working(format!("{}: {e:#}", progress(s))),
            },
        },
        _ => View::Working(progress(s)),
    }
}

pub(crate) fn run(args: WaitArgs) -> Result<i32> {
    let record_store = match &args.store {
        Some(url) => {
            let cfg = args.store_config(url, None)?;
            cfg.preflight()?;
            Some(Store::open(&cfg)?)
        }
        None => None,
    };
    super::runtime()?.block_on(async {
        let record = load_record(record_store.as_ref(), &args.launch).await?;
        // The targets upload where the record says (the plan packed into their payload);
        // a record from before it said so: --store.
        let watched = match (&record.upload, &args.store) {
            (Some(u), Some(s)) if u.store != *s => {
                pgappliance::outln!(
                    "launch {}: its targets upload to {} (the launch record says so), not to --store {s}: watching there",
                    record.launch_id,
                    u.store
                );
                u.store.clone()
            }
            (Some(u), _) => u.store.clone(),
            (None, Some(s)) => s.clone(),
            (None, None) => bail!(
                "the launch record {} does not say where its targets upload: give --store (the plan's upload.store)",
                args.launch
            ),
        };
        let cfg = args.store_config(&watched, record.upload.as_ref())?;
        cfg.preflight()?;
        let store = Store::open(&cfg)?;
        let created = parse_time(&record.created_at, "the launch record's created_at")?;
        let units = units(&record);
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("collect-{}", record.launch_id)));
        if args.teardown {
            // Refused now rather than after hours of waiting; checked again when written.
            crate::collect::check_out(
                &out,
                std::slice::from_ref(&cfg),
                &crate::collect::default_cache()?,
            )?;
            teardown_preflight(&record, &args)?;
        }
        pgappliance::outln!(
            "launch {} of plan {} ({} targets, created {}): watching {}",
            record.launch_id,
            record.plan.name,
            record.targets.len(),
            record.created_at,
            store.url
        );
        let views = watch(&store, &record, created, &units, &args).await;
        let mut arrived = 0;
        for (u, v) in units.iter().zip(&views) {
            match v {
                View::Arrived { .. } => {
                    arrived += 1;
                    pgappliance::outln!("{}: {}", u.label, v.describe());
                }
                View::Failed(f) => pgappliance::outln!("{}: FAILED {f}", u.label),
                other => pgappliance::outln!(
                    "{}: TIMED OUT after {}: last {}",
                    u.label,
                    humantime::format_duration(args.timeout),
                    other.describe()
                ),
            }
            if let Some(next) = next_step(u, v, &store.url, &record, args.teardown) {
                pgappliance::outln!("{}: next: {next}", u.label);
            }
        }
        pgappliance::outln!(
            "launch {}: {arrived} of {} arrived",
            record.launch_id,
            units.len()
        );
        let mut ok = arrived == units.len();
        if args.teardown {
            ok &= teardown(&record, &args).await;
            ok &= collect(&cfg, &out).await;
        }
        Ok(if ok { 0 } else { 1 })
    })
}

/// Where `wait` shows what it knows while it waits: a line per change on stdout, or, when
/// stdout and stderr are both a terminal, one line per target redrawn in place (indicatif,
/// on stderr) and cleared at the end. The summary at the end is printed on stdout either way.
enum Display {
    Lines,
    Live {
        multi: indicatif::MultiProgress,
        bars: Vec<indicatif::ProgressBar>,
    },
}

impl Display {
    fn new(units: &[Unit]) -> Display {
        use std::io::IsTerminal;
        if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
            return Display::Lines;
        }
        let multi = indicatif::MultiProgress::new();
        let style = indicatif::ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let bars = units
            .iter()
            .map(|_| {
                let b = multi.add(indicatif::ProgressBar::new_spinner());
                b.set_style(style.clone());
                b.enable_steady_tick(Duration::from_millis(250));
                b
            })
            .collect();
        Display::Live { multi, bars }
    }

    fn show(&self, i: usize, unit: &Unit, view: &View) {
        let line = format!("{}: {}", unit.label, view.describe());
        match self {
            Display::Lines => pgappliance::outln!("{line}"),
            Display::Live { bars, .. } if view.is_final() => bars[i].finish_with_message(line),
            Display::Live { bars, .. } => bars[i].set_message(line),
        }
    }

    /// On a terminal: each target still out with its status's age and time left, and the
    /// time elapsed (redrawn at every poll).
    fn refresh(
        &self,
        units: &[Unit],
        views: &[View],
        latest: &[Option<LiveStatus>],
        elapsed: Duration,
    ) {
        let Display::Live { bars, .. } = self else {
            return;
        };
        for (i, u) in units.iter().enumerate() {
            if views[i].is_final() {
                continue;
            }
            let extra = latest[i]
                .as_ref()
                .map(|s| freshness(s, SystemTime::now()))
                .filter(|f| !f.is_empty())
                .map(|f| format!("; {f}"))
                .unwrap_or_default();
            bars[i].set_message(format!(
                "{}: {}{extra} [{} elapsed]",
                u.label,
                views[i].describe(),
                short(elapsed)
            ));
        }
    }

    fn warn(&self, text: &str) {
        match self {
            Display::Lines => pgappliance::errln!("warning: {text}"),
            Display::Live { multi, .. } => multi.suspend(|| pgappliance::errln!("warning: {text}")),
        }
    }

    /// Takes the live lines off the terminal: the summary that follows says the same.
    fn finish(&self) {
        if let Display::Live { multi, bars } = self {
            for b in bars {
                b.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}

/// Polls the store until every unit is final or the timeout passes, showing each change.
async fn watch(
    store: &Store,
    record: &LaunchRecord,
    created: SystemTime,
    units: &[Unit],
    args: &WaitArgs,
) -> Vec<View> {
    let views: Vec<View> = units
        .iter()
        .map(|u| match &u.matcher {
            Matcher::NotStarted(e) => View::Failed(format!("not started by the launch: {e}")),
            _ => View::NoStatus,
        })
        .collect();
    let display = Display::new(units);
    for (i, (u, v)) in units.iter().zip(&views).enumerate() {
        display.show(i, u, v);
    }
    let views = poll(store, record, created, units, args, views, &display).await;
    display.finish();
    views
}

async fn poll(
    store: &Store,
    record: &LaunchRecord,
    created: SystemTime,
    units: &[Unit],
    args: &WaitArgs,
    mut views: Vec<View>,
    display: &Display,
) -> Vec<View> {
    let began = Instant::now();
    let deadline = began + args.timeout;
    let mut claims = BTreeMap::new();
    let mut reported: Vec<String> = Vec::new();
    let mut latest: Vec<Option<LiveStatus>> = vec![None; units.len()];
    let mut last_beat = began;
    loop {
        if views.iter().all(View::is_final) {
            return views;
        }
        let mut problems = Vec::new();
        match statuses(store, &record.plan.name, created, &mut problems).await {
            Ok(all) => {
                let assigned = assign(units, &all, &mut claims);
                for (i, s) in assigned.into_iter().enumerate() {
                    if views[i].is_final() {
                        continue;
                    }
                    let Some(s) = s else { continue };
                    latest[i] = Some(s.clone());
                    let v = view_of(store, s).await;
                    if v != views[i] {
                        display.show(i, &units[i], &v);
                        views[i] = v;
                    }
                }
            }
            Err(e) => problems.push(format!(
                "{} (trying again)",
                super::store_failure(
                    store,
                    &format!("reading the status objects in {}", store.url),
                    &e
                )
            )),
        }
        install_failure(store, record, units, &mut views, display, &mut problems).await;
        for p in problems {
            if !reported.contains(&p) {
                display.warn(&p);
                reported.push(p);
            }
        }
        if views.iter().all(View::is_final) {
            return views;
        }
        let now = Instant::now();
        display.refresh(units, &views, &latest, began.elapsed());
        if matches!(display, Display::Lines) && now.duration_since(last_beat) >= args.heartbeat {
            pgappliance::outln!(
                "{}",
                heartbeat(
                    began.elapsed(),
                    args.timeout,
                    units,
                    &views,
                    &latest,
                    SystemTime::now()
                )
            );
            last_beat = now;
        }
        if now >= deadline {
            return views;
        }
        tokio::time::sleep(args.interval.min(deadline - now)).await;
    }
}

/// An EC2 instance whose install failed never writes a status object: the report it PUT
/// (the launch record's `failure_object`) ends the wait of every instance still without one.
async fn install_failure(
    store: &Store,
    record: &LaunchRecord,
    units: &[Unit],
    views: &mut [View],
    display: &Display,
    problems: &mut Vec<String>,
) {
    let Some(key) = &record.failure_object else {
        return;
    };
    let waiting =
        |u: &Unit, v: &View| matches!(u.matcher, Matcher::Instance(_)) && *v == View::NoStatus;
    if !units.iter().zip(views.iter()).any(|(u, v)| waiting(u, v)) {
        return;
    }
    let path = object_store::path::Path::from(key.as_str());
    let text = match store.objects.get(&path).await {
        Ok(r) => match r.bytes().await {
            Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
            Err(e) => {
                problems.push(format!("reading {key}: {e} (trying again)"));
                return;
            }
        },
        Err(object_store::Error::NotFound { .. }) => return,
        Err(e) => {
            problems.push(format!("reading {key}: {e} (trying again)"));
            return;
        }
    };
    for (i, u) in units.iter().enumerate() {
        if waiting(u, &views[i]) {
            let v = View::Failed(format!("the install failed ({key}): {text}"));
            display.show(i, u, &v);
            views[i] = v;
        }
    }
}

/// What the teardown will need, checked before the wait rather than after it: BMC
/// credentials for Redfish and IPMI targets, `--bmc-ca` or `--insecure` (and https, or
/// `--insecure`) for Redfish BMCs, AWS keys for EC2 instances. Nothing is contacted.
fn teardown_preflight(record: &LaunchRecord, args: &WaitArgs) -> Result<()> {
    let started: Vec<(&str, &Started)> = record
        .targets
        .iter()
        .filter_map(|t| t.started.as_ref().map(|s| (t.address.as_str(), s)))
        .collect();
    let needs_bmc = started
        .iter()
        .any(|(_, s)| matches!(s, Started::Redfish(_) | Started::Ipmi(_)));
    let creds = if needs_bmc {
        Some(
            super::credentials::load(args.bmc.bmc_credentials.as_deref()).context(
                "--teardown powers off the launch's BMC targets when the wait ends, and needs their credentials now",
            )?,
        )
    } else {
        None
    };
    for (address, s) in started {
        match s {
            Started::Redfish(r) => {
                if let Some(c) = &creds {
                    args.bmc.connect(&r.bmc, c).with_context(|| {
                        format!("--teardown ejects and powers off {address} when the wait ends")
                    })?;
                }
            }
            Started::Ec2(_) => {
                args.ec2_keys().with_context(|| {
                    format!(
                        "--teardown terminates the EC2 instances of {address} when the wait ends"
                    )
                })?;
            }
            Started::Ipmi(_) => {}
        }
    }
    Ok(())
}

/// Terminates, ejects and powers off every started target; says what it did for each.
/// True when every teardown succeeded.
async fn teardown(record: &LaunchRecord, args: &WaitArgs) -> bool {
    let needs_bmc = record.targets.iter().any(|t| {
        matches!(
            t.started,
            Some(Started::Redfish(_)) | Some(Started::Ipmi(_))
        )
    });
    let creds = if needs_bmc {
        Some(super::credentials::load(
            args.bmc.bmc_credentials.as_deref(),
        ))
    } else {
        None
    };
    let runner = pgappliance::runner::Runner::local();
    let mut ok = true;
    for t in &record.targets {
        let Some(started) = &t.started else {
            pgappliance::outln!("{}: teardown: nothing to do (not started)", t.address);
            continue;
        };
        let r: Result<String> = async {
            let bmc_creds = || -> Result<&super::credentials::BmcCredentials> {
                match &creds {
                    Some(Ok(c)) => Ok(c),
                    Some(Err(e)) => bail!("{e:#}"),
                    None => bail!("no BMC credentials"),
                }
            };
            match started {
                Started::Ec2(e) => {
                    let endpoint = args
                        .ec2_endpoint
                        .clone()
                        .unwrap_or_else(|| e.endpoint.clone());
                    let client =
                        super::ec2::Ec2Client::new(endpoint, e.region.clone(), args.ec2_keys()?)?;
                    let states = super::ec2::terminate(&client, &e.instances).await?;
                    Ok(states
                        .iter()
                        .map(|(id, s)| format!("{id} {s}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                }
                Started::Redfish(r) => {
                    let bmc = args.bmc.connect(&r.bmc, bmc_creds()?)?;
                    super::redfish::power_off_and_eject(&bmc, &r.system).await
                }
                Started::Ipmi(i) => {
                    let target = super::ipmi::IpmiTarget {
                        host: i.host.clone(),
                        port: i.port,
                    };
                    super::ipmi::power_off(&runner, &target, bmc_creds()?).await
                }
            }
        }
        .await;
        match r {
            Ok(what) => pgappliance::outln!("{}: teardown: {what}", t.address),
            Err(e) => {
                ok = false;
                pgappliance::outln!("{}: teardown FAILED: {e:#}", t.address);
            }
        }
    }
    ok
}

/// `collect`'s own code on the store into `out`.
async fn collect(cfg: &StoreConfig, out: &Path) -> bool {
    let r = async {
        let args = crate::collect::CollectArgs {
            stores: vec![cfg.clone()],
            out: out.to_path_buf(),
            all_runs: false,
            baseline: None,
            threshold_pct: None,
            fail_on_regression: false,
            cache: crate::collect::default_cache()?,
            jobs: 16,
            history: false,
        };
        crate::collect::collect(args).await
    }
    .await;
    match r {
        Ok(0) => {
            pgappliance::outln!("collected {} into {}", cfg.url, out.display());
            true
        }
        Ok(code) => {
            pgappliance::outln!("collect into {} ended with status {code}", out.display());
            false
        }
        Err(e) => {
            pgappliance::outln!("collect FAILED: {e:#}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgappliance::engine::live::Identity;

    fn status(machine: &str, run: &str, started: &str, identity: Option<Identity>) -> LiveStatus {
        LiveStatus {
            schema_version: 1,
            appliance: "tiny".into(),
            machine_id: machine.into(),
            run_id: run.into(),
            state: "running".into(),
            step: Some("dataset".into()),
            text: None,
            points_done: 1,
            points_total: 4,
            last_tps: Some(812.4),
            boots: 1,
            failure: None,
            started_at: started.into(),
            updated_at: started.into(),
            stored_as: None,
            identity,
            left_s: None,
            left_unknown_points: 0,
        }
    }

    fn identity(instance: Option<&str>, uuid: Option<&str>) -> Option<Identity> {
        Some(Identity {
            hostname: "h".into(),
            instance_id: instance.map(Into::into),
            system_uuid: uuid.map(Into::into),
            system_serial: None,
        })
    }

    fn unit(label: &str, matcher: Matcher) -> Unit {
        Unit {
            label: label.into(),
            matcher,
        }
    }

    #[test]
    fn instances_and_uuids_match_by_identity_and_ipmi_takes_what_is_left() {
        let units = vec![
            unit("i-1", Matcher::Instance("i-1".into())),
            unit(
                "https://bmc1",
                Matcher::SystemUuid("0A1B2C3D-0000-4000-8000-00000000AAAA".into()),
            ),
            unit("ipmi1", Matcher::Unclaimed),
        ];
        let statuses = vec![
            status(
                "m-ec2",
                "r1",
                "2026-12-01T10:00:05Z",
                identity(Some("i-1"), None),
            ),
            status(
                "m-rf",
                "r2",
                "2026-12-01T10:00:06Z",
                identity(None, Some("0a1b2c3d-0000-4000-8000-00000000aaaa")),
            ),
            // Another launch's instance: never taken by the IPMI unit.
            status(
                "m-other",
                "r3",
                "2026-12-01T10:00:01Z",
                identity(Some("i-9"), None),
            ),
            status(
                "m-ipmi",
                "r4",
                "2026-12-01T10:00:09Z",
                identity(None, Some("ffff")),
            ),
        ];
        let mut claims = BTreeMap::new();
        let a = assign(&units, &statuses, &mut claims);
        let runs: Vec<Option<&str>> = a.iter().map(|s| s.map(|s| s.run_id.as_str())).collect();
        assert_eq!(runs, vec![Some("r1"), Some("r2"), Some("r4")]);
        assert_eq!(claims.get(&2).map(String::as_str), Some("m-ipmi"));
    }

    #[test]
    fn a_run_without_identity_is_not_claimed_while_an_identity_is_awaited() {
        let units = vec![
            unit("i-1", Matcher::Instance("i-1".into())),
            unit("ipmi1", Matcher::Unclaimed),
        ];
        let early = vec![status("m-ec2", "r1", "2026-12-01T10:00:05Z", None)];
        let mut claims = BTreeMap::new();
        assert_eq!(
            assign(&units, &early, &mut claims)
                .iter()
                .filter(|s| s.is_some())
                .count(),
            0
        );
        assert!(claims.is_empty());
        // With IPMI targets only, a run before its inventory step is claimed, and the claim
        // follows the machine to its later status.
        let units = vec![unit("a", Matcher::Unclaimed), unit("b", Matcher::Unclaimed)];
        let two = vec![
            status("m2", "r2", "2026-12-01T10:00:09Z", None),
            status("m1", "r1", "2026-12-01T10:00:05Z", None),
        ];
        let a = assign(&units, &two, &mut claims);
        assert_eq!(a[0].map(|s| s.run_id.as_str()), Some("r1"));
        assert_eq!(a[1].map(|s| s.run_id.as_str()), Some("r2"));
        let later = vec![status(
            "m1",
            "r1",
            "2026-12-01T10:00:05Z",
            identity(None, None),
        )];
        let a = assign(&units, &later, &mut claims);
        assert_eq!(a[0].map(|s| s.machine_id.as_str()), Some("m1"));
        assert!(a[1].is_none());
    }

    #[test]
    fn failures_name_the_step_and_progress_the_point() {
        let mut s = status("m", "r", "2026-12-01T10:00:05Z", None);
        assert_eq!(
            progress(&s),
            "running (run r, step dataset, point 1/4, last 812 tps, updated 2026-12-01T10:00:05Z)"
        );
        s.state = "failed".into();
        s.failure = Some(pgappliance::journal::Failure {
            step: pgappliance::journal::StepName::Tuning,
            error: "invalid value for parameter \"work_mem\": \"lots\"".into(),
            refused: false,
            at: "2026-12-01T10:01:00Z".into(),
        });
        let f = failure(&s);
        assert!(f.starts_with("failed at step tuning: invalid value"), "{f}");
    }

    #[test]
    fn the_heartbeat_says_the_time_elapsed_and_each_targets_age_and_time_left() {
        let mut s = status("m", "r", "2026-12-01T10:00:05Z", None);
        s.updated_at = "2026-12-01T10:20:00Z".into();
        s.left_s = Some(1530.4);
        let now = parse_time("2026-12-01T10:20:40Z", "now").expect("now");
        assert_eq!(
            freshness(&s, now),
            "last status 40s ago, about 25m 30s left in the sweep"
        );
        s.left_unknown_points = 2;
        assert_eq!(
            freshness(&s, now),
            "last status 40s ago, at least 25m 30s left in the sweep (2 points not estimated yet)"
        );
        let units = vec![
            unit("i-1", Matcher::Instance("i-1".into())),
            unit("bmc", Matcher::Unclaimed),
            unit("done", Matcher::Unclaimed),
        ];
        let views = vec![
            View::Working(progress(&s)),
            View::NoStatus,
            View::Arrived {
                stored_as: "k".into(),
                objects: 3,
            },
        ];
        let line = heartbeat(
            Duration::from_secs(723),
            Duration::from_secs(6 * 3600),
            &units,
            &views,
            &[Some(s), None, None],
            now,
        );
        assert_eq!(
            line,
            "wait: 12m 3s elapsed of 6h; i-1: running at step dataset, point 1/4, last status 40s ago, at least 25m 30s left in the sweep (2 points not estimated yet); bmc: no status object yet"
        );
    }

    #[test]
    fn times_of_records_and_statuses_parse() {
        let t = parse_time("2026-12-01T10:00:05Z", "t").expect("time");
        assert!(t > parse_time("2026-12-01T10:00:04Z", "t").expect("time"));
        assert!(parse_time("yesterday", "started_at")
            .expect_err("bad")
            .to_string()
            .contains("started_at \"yesterday\""));
    }
}
