//! What the command line may change of the plan's `[upload]`: the store and how to reach it.
//! The same options (`--store`, `--endpoint`, `--region`, `--credentials-file`,
//! `--credentials-profile`) wherever a store is written or read.

use super::store::StoreConfig;
use crate::plan::{Credentials, Upload};

/// The value parser of a `--store` flag (and `collect`'s store arguments): the plan's own
/// check of a store URL, so a mistyped store is a usage error naming the flag before anything
/// runs (a run --local would otherwise learn it at the upload, after the whole sweep).
pub fn store_url_arg(text: &str) -> Result<String, String> {
    crate::plan::check_store_url(text)?;
    Ok(text.to_string())
}

/// The value parser of an `--endpoint` flag: an http:// or https:// URL, as the plan's
/// `upload.endpoint`.
pub fn endpoint_arg(text: &str) -> Result<String, String> {
    crate::url::refuse_credentials(text)?;
    if text.starts_with("https://") || text.starts_with("http://") {
        Ok(text.to_string())
    } else {
        Err(
            "must be an http:// or https:// URL (the S3 endpoint, e.g. http://10.0.0.5:8333)"
                .into(),
        )
    }
}

/// The binaries' store options (`#[command(flatten)]`): one declaration, the same spelling
/// and help wherever a store is written or read.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct StoreOverrides {
    /// Store URL instead of the plan's upload.store (s3://bucket/prefix or file:///dir).
    #[arg(long, value_name = "URL", value_parser = store_url_arg)]
    pub store: Option<String>,
    /// S3 endpoint (path-style) instead of the plan's upload.endpoint (default: AWS_ENDPOINT_URL
    /// or AWS).
    #[arg(long, value_name = "URL", value_parser = endpoint_arg)]
    pub endpoint: Option<String>,
    /// S3 region instead of the plan's upload.region.
    #[arg(long)]
    pub region: Option<String>,
    /// A 0600 credentials file (access_key_id, secret_access_key) instead of the plan's
    /// credentials (implies credentials = "file").
    #[arg(long, value_name = "FILE")]
    pub credentials_file: Option<String>,
    /// The profile (`[name]` section) of the credentials file instead of the plan's.
    #[arg(long, value_name = "NAME")]
    pub credentials_profile: Option<String>,
}

impl StoreOverrides {
    /// The store the plan's upload section names, with these changes.
    pub fn config(&self, upload: &Upload) -> StoreConfig {
        let mut cfg = StoreConfig::from_plan(upload, self.store.as_deref());
        if let Some(e) = &self.endpoint {
            cfg.endpoint = Some(e.clone());
        }
        if let Some(r) = &self.region {
            cfg.region = r.clone();
        }
        if let Some(f) = &self.credentials_file {
            cfg.credentials = Credentials::File;
            cfg.credentials_file = Some(f.clone());
        }
        if let Some(p) = &self.credentials_profile {
            cfg.credentials_profile = p.clone();
        }
        cfg
    }

    /// The store URL the run goes to.
    pub(crate) fn url(&self, upload: &Upload) -> String {
        self.store.clone().unwrap_or_else(|| upload.store.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_endpoint_flags_are_checked_as_the_plan_checks_them() {
        assert_eq!(store_url_arg("s3://bucket/p"), Ok("s3://bucket/p".into()));
        assert_eq!(
            store_url_arg("file:///var/tmp/s"),
            Ok("file:///var/tmp/s".into())
        );
        for (bad, words) in [
            ("bogus://x", "is not a store URL"),
            ("file://relative", "needs an absolute path"),
            ("s3://b/p", "bucket"),
        ] {
            let e = store_url_arg(bad).expect_err(bad);
            assert!(e.contains(words), "{bad}: {e}");
        }
        assert!(endpoint_arg("http://127.0.0.1:8333").is_ok());
        let e = endpoint_arg("ftp://x").expect_err("ftp");
        assert!(e.contains("http:// or https://"), "{e}");
    }

    #[test]
    fn each_option_replaces_only_its_own_setting() {
        let plan = Upload {
            store: "s3://b/p".into(),
            endpoint: Some("http://127.0.0.1:1".into()),
            ..Default::default()
        };
        let none = StoreOverrides::default().config(&plan);
        assert_eq!(none.url, "s3://b/p");
        assert_eq!(none.endpoint.as_deref(), Some("http://127.0.0.1:1"));
        let all = StoreOverrides {
            store: Some("s3://c/q".into()),
            endpoint: Some("http://127.0.0.1:2".into()),
            region: Some("eu-west-1".into()),
            credentials_file: Some("/etc/x".into()),
            credentials_profile: Some("lab".into()),
        }
        .config(&plan);
        assert_eq!(all.url, "s3://c/q");
        assert_eq!(all.endpoint.as_deref(), Some("http://127.0.0.1:2"));
        assert_eq!(all.region, "eu-west-1");
        assert_eq!(all.credentials, Credentials::File);
        assert_eq!(all.credentials_file.as_deref(), Some("/etc/x"));
        assert_eq!(all.credentials_profile, "lab");
    }
}
