//! `pgappliance build PLAN --out DIR`: everything needed to boot a server into the
//! benchmark, checked on the way: the payload (daemon for the plan's architecture, the
//! units compiled into this binary, plan, tuned profile), its sha256, the Rocky 8 kickstart
//! and, given `--payload-url`, the cloud-init user-data. The payload is checked for
//! completeness against what the kickstart and user-data enable before anything is written.
//! Written to a temporary directory and moved into place at the end, so DIR never holds
//! half a build; DIR is only replaced when it is empty or an earlier build ([`crate::outdir`]).

pub(crate) mod credentials;
pub(crate) mod elf;
pub(crate) mod iso;
pub(crate) mod medium;
pub(crate) mod payload;
pub(crate) mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pgappliance::plan::{Plan, PlanError};
use pgappliance::platform::{APPLIANCE_DAEMON, APPLIANCE_PLAN};
use sha2::{Digest, Sha256};

use crate::outdir;
use payload::Member;

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// The plan file.
    pub(crate) plan: PathBuf,
    /// Output directory: new, empty, or an earlier build (replaced as a whole when the build
    /// succeeds); anything else is refused.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// pgapplianced built for the plan's architecture (its ELF machine and type are checked).
    #[arg(long)]
    pub(crate) daemon_binary: Option<PathBuf>,
    /// An http(s) URL where instances fetch the payload (e.g. a presigned URL); enables
    /// user-data.yaml.
    #[arg(long)]
    pub(crate) payload_url: Option<String>,
    /// An http(s) URL taking a PUT (e.g. a presigned one) where an instance reports an
    /// install that failed (payload not fetched, sha256 mismatch); `launch --ec2` presigns
    /// one under `<appliance>/failed/<launch id>/` in the store.
    #[arg(long, requires = "payload_url")]
    pub(crate) failure_url: Option<String>,
    /// The Rocky 8 DVD ISO of the plan's arch (the install source: the kickstart names no
    /// network one) to remaster into appliance.iso (BMC virtual media).
    #[arg(long)]
    pub(crate) iso: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) credentials: credentials::CredentialArgs,
    #[command(flatten)]
    pub(crate) medium: medium::PackageArgs,
    /// Set by `launch`, which goes on itself: no next steps printed.
    #[arg(skip)]
    pub(crate) for_launch: bool,
    /// The store the appliance writes to instead of the plan's (`build --store`, `launch
    /// --store`): written into the packed plan.
    #[arg(skip)]
    pub(crate) store: Option<pgappliance::plan::rewrite::StoreChange>,
}

/// `pgappliance build`: the build's inputs and the store the appliance writes to.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildCommand {
    #[command(flatten)]
    pub(crate) build: BuildArgs,
    /// The store the appliance writes to instead of the plan's upload.store (s3://bucket/prefix
    /// or file:///dir): written into the packed plan, so the run lands where you will look.
    #[arg(long, value_name = "URL", value_parser = pgappliance::upload::overrides::store_url_arg)]
    pub(crate) store: Option<String>,
    /// With --store: the S3 endpoint the appliance reaches it at, written into the packed plan.
    #[arg(long, value_name = "URL", requires = "store", value_parser = pgappliance::upload::overrides::endpoint_arg)]
    pub(crate) endpoint: Option<String>,
    /// With --store: its region, written into the packed plan.
    #[arg(long, requires = "store")]
    pub(crate) region: Option<String>,
}

impl BuildCommand {
    pub(crate) fn into_args(self) -> BuildArgs {
        let mut args = self.build;
        args.store = self
            .store
            .map(|store| pgappliance::plan::rewrite::StoreChange {
                store,
                endpoint: self.endpoint,
                region: self.region,
            });
        args
    }
}

/// A payload member's path: where the appliance has the file, relative to `/`.
pub(crate) fn installed(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// The payload's members for a plan.
pub(crate) fn members(plan_text: &str, plan: &Plan, daemon: &[u8]) -> BTreeMap<String, Member> {
    let mut m = BTreeMap::new();
    m.insert(
        installed(APPLIANCE_DAEMON),
        Member {
            mode: 0o755,
            data: daemon.to_vec(),
        },
    );
    // A plan holding root's password hash is for root's eyes only, like /etc/shadow.
    let has_hash = plan
        .install
        .as_ref()
        .is_some_and(|i| i.root_password_hash.is_some());
    m.insert(
        installed(APPLIANCE_PLAN),
        Member {
            mode: if has_hash { 0o600 } else { 0o644 },
            data: plan_text.as_bytes().to_vec(),
        },
    );
    if plan.tuning.tuned_profile == "postgresql" {
        m.insert(
            format!(
                "{}/postgresql/tuned.conf",
                pgappliance::assets::TUNED_PROFILE_DIR
            ),
            Member {
                mode: 0o644,
                data: pgappliance::assets::TUNED_POSTGRESQL.as_bytes().to_vec(),
            },
        );
    }
    for (name, text) in payload::UNITS {
        m.insert(
            format!("{}/{name}", payload::UNIT_DIR),
            Member {
                mode: 0o644,
                data: text.as_bytes().to_vec(),
            },
        );
    }
    m
}

/// What to do with what the build wrote (pure): boot the ISO, start instances with the
/// user-data, or put the payload on a machine by hand; then follow the launch.
pub(crate) fn next_steps(plan: &Path, out: &Path, iso: bool, user_data: bool) -> Vec<String> {
    let (plan, out) = (plan.display(), out.display());
    let mut next = Vec::new();
    if iso {
        next.push(format!(
            "boot {out}/appliance.iso on the server: `pgappliance launch {plan} --out DIR --daemon-binary BIN --iso ROCKY.iso --bmc https://BMC (--bmc-ca PEM | --insecure)` mounts it over Redfish, or mount it by hand and `pgappliance launch {plan} … --ipmi HOST`"
        ));
    }
    if user_data {
        next.push(format!(
            "start a Rocky 8 instance with {out}/user-data.yaml as its user data, or let `pgappliance launch {plan} --out DIR --daemon-binary BIN --ec2 --image-id AMI --instance-type TYPE` do it"
        ));
    }
    if !iso && !user_data {
        next.push(format!(
            "install {out}/payload.tar.gz on the target by hand (docs/launch.md), or build again with --iso ROCKY.iso (bare metal) or --payload-url URL (cloud instances)"
        ));
    }
    next.push(
        "`pgappliance wait LAUNCH_ID --store STORE` follows a launch until its runs are stored; `pgappliance collect` compares them".into(),
    );
    next
}

pub(crate) fn run(args: BuildArgs) -> Result<i32> {
    if let Some(url) = &args.payload_url {
        render::check_payload_url(url)?;
    }
    let (plan_text, plan, plans_store) = plan_for_build(&args)?;
    if args.iso.is_some() && plan.install.is_none() {
        bail!(
            "--iso: appliance.iso boots the kickstart, and {} has no [install] table: only a bare-metal plan (one with [install]: os_disk and a way in) gets a kickstart (docs/plan.md)",
            args.plan.display()
        );
    }
    if let Some(input) = &args.iso {
        // The medium's own word on what it installs, before anything is built.
        let volid = iso::volume_id(input)?;
        let work = tempfile::tempdir().context("creating a work directory for the ISO")?;
        let medium = iso::medium(input, &volid, work.path())?;
        iso::check_arch(input, &medium, elf::arch_name(plan.appliance.arch))?;
        pgappliance::outln!(
            "installer: {} ({}, volume {volid})",
            medium.describe(),
            input.display()
        );
    }
    let Some(daemon_path) = args.daemon_binary.as_deref() else {
        bail!(
            "give the daemon built for {} with --daemon-binary (tools/cross-build-aarch64 builds it on an x86_64 host)",
            elf::arch_name(plan.appliance.arch)
        );
    };
    let daemon = elf::read_daemon_binary(daemon_path, plan.appliance.arch)?;
    let mut inputs: Vec<(&str, &Path)> = vec![
        ("the plan", args.plan.as_path()),
        ("the daemon binary", daemon_path),
    ];
    if let Some(iso) = &args.iso {
        inputs.push(("the ISO", iso.as_path()));
    }
    if let Some(file) = &args.credentials.upload_credentials {
        inputs.push(("the credentials file", file.as_path()));
    }
    if let Some(dir) = &args.medium.packages {
        inputs.push(("the packages directory", dir.as_path()));
    }
    let out = outdir::check(&args.out, &inputs, outdir::Kind::Build)?;
    let delivery = credentials::prepare(&plan, &args.credentials)?;
    if delivery.is_some() && args.iso.is_none() && args.payload_url.is_none() {
        bail!(
            "store credentials go on the boot medium (--iso ROCKY.iso) or into the user-data (--payload-url URL): give one of them"
        );
    }
    if delivery.is_none() {
        if let Some(file) = credentials::target_file(&plan) {
            pgappliance::errln!("warning: {}", credentials::undelivered_warning(&plan, file));
        }
    }
    let on_medium = delivery
        .as_ref()
        .filter(|_| args.iso.is_some())
        .map(|d| d.target.as_str());
    let in_user_data = delivery
        .as_ref()
        .map(|d| (d.target.as_str(), d.text.as_str()));

    let mut members = members(&plan_text, &plan, &daemon);
    if let Some(sb) = &plan.sysbench {
        // The appliance must not need the network for its benchmark's scripts.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let archive = runtime.block_on(pgappliance::sysbench::scripts::fetch(sb))?;
        members.insert(
            pgappliance::sysbench::scripts::PAYLOAD_ARCHIVE.to_string(),
            Member {
                mode: 0o644,
                data: archive,
            },
        );
    }
    let carried = carry_packages(&args, &plan, &mut members)?;
    let tarball = payload::build(&members, payload::mtime()?)?;
    let sha = format!("{:x}", Sha256::digest(&tarball));
    let ks = match plan.install {
        Some(_) => Some(render::kickstart(
            &plan,
            &sha,
            args.payload_url.as_deref(),
            on_medium,
        )?),
        None => None,
    };
    let user_data = match &args.payload_url {
        Some(url) => Some(render::user_data(
            &plan,
            &sha,
            url,
            in_user_data,
            args.failure_url.as_deref(),
        )?),
        None => None,
    };
    let mut enabled = ks.as_deref().map(render::enabled_units).unwrap_or_default();
    enabled.extend(
        user_data
            .as_deref()
            .map(render::enabled_units)
            .unwrap_or_default(),
    );
    if enabled.is_empty() {
        // A payload-only build (no [install], no --payload-url): whoever installs it (by
        // hand, or the guest tests' hook) enables the daemon's unit as the scripts would.
        enabled.push("pgapplianced.service".to_string());
    }
    payload::check_complete(&members, &plan, &enabled)?;

    let tmp = out.staging()?;
    let write = |name: &str, data: &[u8]| {
        std::fs::write(tmp.path().join(name), data).with_context(|| format!("writing {name}"))
    };
    write("payload.tar.gz", &tarball)?;
    write(
        "payload.tar.gz.sha256",
        format!("{sha}  payload.tar.gz\n").as_bytes(),
    )?;
    if let Some(ks) = &ks {
        write("ks.cfg", ks.as_bytes())?;
    }
    if let Some(u) = &user_data {
        if delivery.is_some() {
            // It holds the credentials: only its owner may read it.
            credentials::write_private(&tmp.path().join("user-data.yaml"), u)?;
        } else {
            write("user-data.yaml", u.as_bytes())?;
        }
    }
    let iso_volid = remaster_iso(&args, tmp.path(), delivery.as_ref())?;
    outdir::write_marker(tmp.path(), outdir::Kind::Build)?;
    let replaced = matches!(out.previous, outdir::Previous::Earlier(_));
    outdir::install(tmp, &out)?;
    Built {
        sha: &sha,
        payload_bytes: tarball.len(),
        plans_store: plans_store.as_deref(),
        plan: &plan,
        user_data: user_data.is_some(),
        carried,
        iso_volid: iso_volid.as_deref(),
        delivery: delivery.as_ref(),
        replaced,
        out: &out.path,
    }
    .print(&args);
    Ok(0)
}

/// The plan as the build packs it: read, `--store` written into it, checked (its warnings
/// printed); with the store the plan named before (None: the plan did not check).
fn plan_for_build(args: &BuildArgs) -> Result<(String, Plan, Option<String>)> {
    let mut plan_text = Plan::read_text(&args.plan)?;
    let plans_store = Plan::examine(&plan_text).plan.map(|p| p.upload.store);
    if let Some(change) = &args.store {
        plan_text = pgappliance::plan::rewrite::with_store(&plan_text, change)
            .map_err(|why| anyhow::anyhow!("--store {}: {why}", change.store))?;
    }
    let found = Plan::examine(&plan_text);
    let Some(plan) = found.plan else {
        return Err(PlanError::Invalid {
            path: args.plan.clone(),
            issues: found.errors,
        }
        .into());
    };
    for w in &found.warnings {
        pgappliance::errln!("{}", w.render(&args.plan, "warning: "));
    }
    Ok((plan_text, plan, plans_store))
}

/// The operator's packages (`--packages DIR`) into the payload's members, checked against
/// what the plan needs and their keys: how many and their bytes (None: none given).
fn carry_packages(
    args: &BuildArgs,
    plan: &Plan,
    members: &mut BTreeMap<String, Member>,
) -> Result<Option<(usize, usize)>> {
    Ok(match &args.medium.packages {
        Some(dir) => {
            if plan.appliance.platform == pgappliance::plan::Platform::Rocky8
                && args.medium.packages_key.is_empty()
            {
                bail!(
                    "--packages {}: give the public key(s) the RPMs are signed with (--packages-key FILE, e.g. PGDG's RPM-GPG-KEY-PGDG and Rocky's RPM-GPG-KEY-rockyofficial): every package is checked against them now, and dnf checks them again on the appliance",
                    dir.display()
                );
            }
            let inv = medium::inventory(&args.medium, dir, plan)?;
            if !inv.lacking.is_empty() {
                bail!(
                    "--packages {}: it lacks {} of the packages the plan needs on {} (the appliance installs from it alone, with no network): download them into it (docs/launch.md)",
                    dir.display(),
                    inv.lacking.join(" "),
                    pgappliance::platform::Profile::of(plan.appliance.platform).name()
                );
            }
            members.extend(medium::members(plan, &inv, &args.medium.packages_key)?);
            Some((
                inv.packages.len(),
                inv.packages.iter().map(|p| p.data.len()).sum::<usize>(),
            ))
        }
        None => None,
    })
}

/// `appliance.iso` remastered from `--iso` into `dir` (which holds ks.cfg and the payload),
/// with the store's credentials when they go on the medium: its volume id (None: no
/// `--iso`).
fn remaster_iso(
    args: &BuildArgs,
    dir: &Path,
    delivery: Option<&credentials::Delivery>,
) -> Result<Option<String>> {
    Ok(match &args.iso {
        Some(input) => {
            let work = tempfile::tempdir().context("creating a work directory for the ISO")?;
            let secret = work.path().join("store.credentials");
            let mut extra = Vec::new();
            if let Some(d) = delivery {
                credentials::write_private(&secret, &d.text)?;
                extra.push((secret.as_path(), "/pgappliance/store.credentials"));
            }
            let iso_path = dir.join("appliance.iso");
            let volid = iso::remaster(
                input,
                &iso_path,
                &dir.join("ks.cfg"),
                &dir.join("payload.tar.gz"),
                &dir.join("payload.tar.gz.sha256"),
                &extra,
                work.path(),
            )?;
            if delivery.is_some() {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&iso_path, std::fs::Permissions::from_mode(0o600))
                    .context("making appliance.iso private")?;
            }
            Some(volid)
        }
        None => None,
    })
}

/// What a build wrote, as its summary lines say it.
struct Built<'a> {
    sha: &'a str,
    payload_bytes: usize,
    plans_store: Option<&'a str>,
    plan: &'a Plan,
    user_data: bool,
    carried: Option<(usize, usize)>,
    iso_volid: Option<&'a str>,
    delivery: Option<&'a credentials::Delivery>,
    replaced: bool,
    out: &'a Path,
}

impl Built<'_> {
    /// One line per output, then where it went and what to do next.
    fn print(&self, args: &BuildArgs) {
        let Built {
            sha,
            payload_bytes,
            plans_store,
            plan,
            user_data,
            carried,
            iso_volid,
            delivery,
            replaced,
            out,
        } = *self;
        pgappliance::outln!("payload.tar.gz   {sha}  ({} bytes)", payload_bytes);
        match (&args.store, plans_store) {
        (Some(c), Some(was)) if *was != c.store => pgappliance::outln!(
            "store            the appliance uploads to {} (--store; the plan's {was} replaced in the packed plan)",
            c.store
        ),
        _ => pgappliance::outln!("store            the appliance uploads to {}", plan.upload.store),
    }
        match &plan.install {
            Some(install) => pgappliance::outln!(
                "ks.cfg           Rocky 8 {} kickstart, OS on {}",
                elf::arch_name(plan.appliance.arch),
                install.os_disk()
            ),
            None => pgappliance::outln!(
                "ks.cfg           not written: the plan has no [install] table (bare metal only)"
            ),
        }
        if user_data {
            pgappliance::outln!(
                "user-data.yaml   cloud-config fetching the payload from the given URL"
            );
        } else {
            pgappliance::outln!(
                "user-data.yaml   not written: give --payload-url for cloud instances"
            );
        }
        if let Some((n, bytes)) = carried {
            let keys: Vec<String> = args
                .medium
                .packages_key
                .iter()
                .map(|k| k.display().to_string())
                .collect();
            pgappliance::outln!(
            "packages         {n} from {} ({bytes} bytes{}) in the payload at {}: the appliance installs from them alone",
            args.medium.packages.as_deref().unwrap_or(Path::new("")).display(),
            if keys.is_empty() {
                String::new()
            } else {
                format!(", signatures checked against {}", keys.join(", "))
            },
            pgappliance::platform::MEDIUM_DIR
        );
        }
        match iso_volid {
            Some(v) => {
                pgappliance::outln!(
                    "appliance.iso    remastered, volume id {v}, boots the kickstart"
                )
            }
            None => {
                pgappliance::outln!(
                    "appliance.iso    not written: give --iso ROCKY.iso for BMC virtual media"
                )
            }
        }
        if let Some(d) = delivery {
            let mut on = Vec::new();
            if args.iso.is_some() {
                on.push("appliance.iso");
            }
            if user_data {
                on.push("user-data.yaml");
            }
            pgappliance::outln!(
                "credentials      {} for {} on {} (written 0600, keep private); {}",
                d.origin,
                d.target,
                on.join(" and "),
                d.expires_at
                    .map(|t| format!("they expire at {}", humantime::format_rfc3339_seconds(t)))
                    .unwrap_or_else(|| "no expiry given".into())
            );
        }
        if replaced {
            pgappliance::outln!(
                "built into {} (the earlier build there replaced)",
                out.display()
            );
        } else {
            pgappliance::outln!("built into {}", out.display());
        }
        if !args.for_launch {
            for line in next_steps(&args.plan, out, iso_volid.is_some(), user_data) {
                pgappliance::outln!("next: {line}");
            }
        }
    }
}
