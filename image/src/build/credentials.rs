//! Store credentials for the appliance, delivered with the boot medium or the user-data
//! and never in the payload: minted with AWS STS from the operator's own keys (short-lived,
//! scoped to the plan's bucket, prefix and appliance), or a lab store's key pair file given
//! by the operator. Either way the appliance gets one file, the plan's `credentials_file`
//! (mode 0600, root), holding only the plan's profile and, for minted keys, their expiry.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use pgappliance::plan::{Credentials, Plan};
use pgappliance::upload::store::{read_credentials_file, render_credentials};
use pgappliance::upload::sts;

/// How `build` gets the credentials it delivers.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct CredentialArgs {
    /// Mint short-lived store credentials with AWS STS from your own AWS keys (environment),
    /// allowed only the upload under the plan's bucket, prefix and appliance name; they go
    /// on the boot medium (--iso) and into the user-data (--payload-url).
    #[arg(
        long,
        requires = "credentials_ttl",
        conflicts_with = "upload_credentials"
    )]
    pub(crate) mint_credentials: bool,
    /// How long minted credentials last (e.g. 36h): 15m to 36h with GetFederationToken, up
    /// to the role's maximum session (at most 12h) with --role-arn.
    #[arg(long, value_parser = pgappliance::clock::parse_flag_duration, requires = "mint_credentials")]
    pub(crate) credentials_ttl: Option<Duration>,
    /// Mint with AssumeRole of this role instead of GetFederationToken (needed when your
    /// keys are session keys: SSO, an assumed role).
    #[arg(long, requires = "mint_credentials")]
    pub(crate) role_arn: Option<String>,
    /// The STS endpoint; default: AWS_ENDPOINT_URL_STS, else the plan's store endpoint,
    /// else https://sts.REGION.amazonaws.com.
    #[arg(long, requires = "mint_credentials")]
    pub(crate) sts_endpoint: Option<String>,
    /// A store without STS (SeaweedFS, MinIO keys): a 0600 key pair file of yours, scoped to
    /// the bucket, holding the plan's credentials profile; that profile is delivered.
    #[arg(long, value_name = "FILE")]
    pub(crate) upload_credentials: Option<PathBuf>,
}

impl CredentialArgs {
    pub(crate) fn given(&self) -> bool {
        self.mint_credentials || self.upload_credentials.is_some()
    }
}

/// Credentials ready to deliver: the file's text and where the appliance reads it.
pub(crate) struct Delivery {
    /// The credentials file as the appliance gets it (secret: never printed).
    pub(crate) text: String,
    /// The plan's `credentials_file`.
    pub(crate) target: String,
    pub(crate) expires_at: Option<SystemTime>,
    /// One line for the operator: where they came from (no secret).
    pub(crate) origin: String,
}

/// The plan's credentials file, when it uploads to S3 with `credentials = "file"`.
pub(crate) fn target_file(plan: &Plan) -> Option<&str> {
    (plan.upload.store.starts_with("s3://") && plan.upload.credentials == Credentials::File)
        .then_some(plan.upload.credentials_file.as_deref())
        .flatten()
}

/// The warning for a plan whose appliance reads a credentials file that nothing delivers.
pub(crate) fn undelivered_warning(plan: &Plan, file: &str) -> String {
    format!(
        "the plan uploads with credentials = \"file\", and nothing delivers {file}: the machine needs it (mode 0600, root, profile \"{}\") before its run ends, or its results wait there for it; `pgappliance build --mint-credentials --credentials-ttl D` or `--upload-credentials FILE` puts it on the boot medium and in the user-data (docs/credentials.md)",
        plan.upload.profile()
    )
}

/// Mints or reads the credentials `args` asks for; None when it asks for none.
pub(crate) fn prepare(plan: &Plan, args: &CredentialArgs) -> Result<Option<Delivery>> {
    if !args.given() {
        return Ok(None);
    }
    let Some(target) = target_file(plan) else {
        bail!(
            "the plan's upload reads no credentials file (it needs an s3:// store with credentials = \"file\" and credentials_file in [upload]): there is nothing to deliver the credentials to"
        );
    };
    let profile = plan.upload.profile();
    let (pair, origin, comment) = if let Some(file) = &args.upload_credentials {
        let pair = read_credentials_file(file, profile)
            .with_context(|| format!("--upload-credentials {}", file.display()))?;
        let origin = format!(
            "the key pair of profile \"{profile}\" in {} (access key {})",
            file.display(),
            pair.access_key_id
        );
        let comment = vec![format!(
            "Store credentials of appliance {} for {} (profile \"{profile}\"), given by the operator.",
            plan.appliance.name, plan.upload.store
        )];
        (pair, origin, comment)
    } else {
        let minted = mint(plan, args)?;
        let scope = sts::Scope::of_plan(plan)?;
        let origin = format!(
            "minted by STS for {} (access key {})",
            minted.principal, minted.keys.access_key_id
        );
        let comment = vec![
            format!(
                "Store credentials of appliance {} minted by STS for {}.",
                plan.appliance.name, minted.principal
            ),
            format!(
                "Allowed only: put, get, abort and list multipart parts under s3://{}/{}/, list keys there, delete a run's manifest.json.",
                scope.bucket, scope.key_prefix
            ),
        ];
        (minted.keys, origin, comment)
    };
    if let Some(at) = pair.expires_at.filter(|at| *at <= SystemTime::now()) {
        bail!(
            "the credentials expired at {}: give fresh ones",
            humantime::format_rfc3339_seconds(at)
        );
    }
    Ok(Some(Delivery {
        text: render_credentials(profile, &pair, &comment),
        target: target.to_string(),
        expires_at: pair.expires_at,
        origin,
    }))
}

fn mint(plan: &Plan, args: &CredentialArgs) -> Result<sts::Minted> {
    let Some(ttl) = args.credentials_ttl else {
        bail!("--mint-credentials needs --credentials-ttl");
    };
    let operator = sts::operator_credentials()?;
    let request = sts::MintRequest {
        method: match &args.role_arn {
            Some(role_arn) => sts::Method::AssumeRole {
                role_arn: role_arn.clone(),
            },
            None => sts::Method::FederationToken,
        },
        endpoint: args.sts_endpoint.clone().unwrap_or_else(|| {
            sts::default_endpoint(plan.upload.endpoint.as_deref(), &plan.upload.region)
        }),
        region: plan.upload.region.clone(),
        ttl,
        scope: sts::Scope::of_plan(plan)?,
        session_name: sts::session_name(&plan.appliance.name),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(sts::mint(&request, &operator))
}

/// Writes `text` to a new file only its owner can read (refusing to replace anything).
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// `pgappliance credentials`: mints fresh credentials for a plan into a new 0600 file (to
/// replace the appliance's when they expire).
#[derive(Debug, clap::Args)]
pub(crate) struct MintCommand {
    /// The plan file.
    pub(crate) plan: PathBuf,
    /// The file to write (new; mode 0600). Copy it to the appliance's credentials_file.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// How long they last (e.g. 36h).
    #[arg(long, value_parser = pgappliance::clock::parse_flag_duration)]
    pub(crate) credentials_ttl: Duration,
    /// Mint with AssumeRole of this role instead of GetFederationToken.
    #[arg(long)]
    pub(crate) role_arn: Option<String>,
    /// The STS endpoint (default as for `build --mint-credentials`).
    #[arg(long)]
    pub(crate) sts_endpoint: Option<String>,
}

pub(crate) fn run_mint(cmd: MintCommand) -> Result<i32> {
    let plan = Plan::load(&cmd.plan)?;
    let args = CredentialArgs {
        mint_credentials: true,
        credentials_ttl: Some(cmd.credentials_ttl),
        role_arn: cmd.role_arn,
        sts_endpoint: cmd.sts_endpoint,
        upload_credentials: None,
    };
    let Some(d) = prepare(&plan, &args)? else {
        bail!("internal: nothing minted");
    };
    write_private(&cmd.out, &d.text)?;
    pgappliance::outln!(
        "{}: {}; they expire at {}; the appliance reads them from {}",
        cmd.out.display(),
        d.origin,
        d.expires_at
            .map(|t| humantime::format_rfc3339_seconds(t).to_string())
            .unwrap_or_else(|| "(no expiry)".into()),
        d.target
    );
    Ok(0)
}

/// A path as one shell word inside single quotes.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(
            shell_quote("/etc/pgappliance/s3.credentials"),
            "'/etc/pgappliance/s3.credentials'"
        );
        assert_eq!(shell_quote("/etc/it's"), "'/etc/it'\\''s'");
    }

    #[test]
    fn a_plan_without_a_credentials_file_takes_none() {
        let mut plan = Plan::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml"),
        )
        .expect("the example plan");
        assert_eq!(target_file(&plan), Some("/etc/pgappliance/s3.credentials"));
        let w = undelivered_warning(&plan, "/etc/pgappliance/s3.credentials");
        assert!(w.contains("/etc/pgappliance/s3.credentials") && w.contains("--mint-credentials"));
        plan.upload.credentials = Credentials::InstanceRole;
        plan.upload.credentials_file = None;
        assert_eq!(target_file(&plan), None);
        let args = CredentialArgs {
            upload_credentials: Some("/nonexistent".into()),
            ..Default::default()
        };
        let e = prepare(&plan, &args).err().expect("refused").to_string();
        assert!(e.contains("nothing to deliver"), "{e}");
        assert!(prepare(&plan, &CredentialArgs::default())
            .expect("none")
            .is_none());
    }
}
