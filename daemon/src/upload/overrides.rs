//! What the command line may change of the plan's `[upload]`: the store and how to reach it.
//! The same options (`--store`, `--endpoint`, `--region`, `--credentials-file`,
//! `--credentials-profile`) wherever a store is written or read.

use super::store::StoreConfig;
use crate::plan::{Credentials, Upload};

/// The binaries' store options (`#[command(flatten)]`): one declaration, the same spelling
/// and help wherever a store is written or read.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct StoreOverrides {
    /// Store URL instead of the plan's upload.store (s3://bucket/prefix or file:///dir).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// S3 endpoint (path-style) instead of the plan's upload.endpoint (default: AWS_ENDPOINT_URL
    /// or AWS).
    #[arg(long, value_name = "URL")]
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
    /// Only a store URL.
    pub fn store(url: Option<&str>) -> Self {
        StoreOverrides {
            store: url.map(str::to_string),
            ..Default::default()
        }
    }

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
    pub fn url(&self, upload: &Upload) -> String {
        self.store.clone().unwrap_or_else(|| upload.store.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
