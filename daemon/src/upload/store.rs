//! Object stores by URL: `s3://bucket/prefix` (any S3-compatible endpoint, path-style) or
//! `file:///dir`. Credentials come from the environment, the instance role, or a 0600 file;
//! they are handed to the client and never logged or written anywhere.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::plan::Credentials;

/// How to reach a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: String,
    pub credentials: Credentials,
    pub credentials_file: Option<String>,
}

impl StoreConfig {
    pub fn from_plan(upload: &crate::plan::Upload, url_override: Option<&str>) -> Self {
        StoreConfig {
            url: url_override.unwrap_or(&upload.store).to_string(),
            endpoint: upload.endpoint.clone(),
            region: upload.region.clone(),
            credentials: upload.credentials,
            credentials_file: upload.credentials_file.clone(),
        }
    }
}

/// An opened store and the key prefix under which this appliance writes.
pub struct Store {
    pub url: String,
    pub objects: Arc<dyn ObjectStore>,
    /// Present for S3: the low-level API whose upload ids can be journaled and resumed.
    pub multipart: Option<Arc<dyn MultipartStore>>,
    pub prefix: Vec<String>,
}

impl Store {
    /// The object path for `parts` under the store's prefix.
    pub fn path(&self, parts: &[&str]) -> ObjectPath {
        let all: Vec<&str> = self
            .prefix
            .iter()
            .map(String::as_str)
            .chain(parts.iter().flat_map(|p| p.split('/')))
            .filter(|s| !s.is_empty())
            .collect();
        ObjectPath::from_iter(all)
    }

    pub fn open(cfg: &StoreConfig) -> Result<Store> {
        crate::plan::check_store_url(&cfg.url).map_err(anyhow::Error::msg)?;
        if let Some(rest) = cfg.url.strip_prefix("file://") {
            if !rest.starts_with('/') {
                bail!(
                    "file store \"{}\" needs an absolute path: file:///dir",
                    cfg.url
                );
            }
            std::fs::create_dir_all(rest).with_context(|| format!("creating file store {rest}"))?;
            let fs = LocalFileSystem::new_with_prefix(rest)
                .with_context(|| format!("opening file store {rest}"))?;
            return Ok(Store {
                url: cfg.url.clone(),
                objects: Arc::new(fs),
                multipart: None,
                prefix: Vec::new(),
            });
        }
        let Some(rest) = cfg.url.strip_prefix("s3://") else {
            bail!(
                "\"{}\" is not a store URL: use s3://bucket/prefix or file:///dir",
                cfg.url
            );
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            bail!("store URL \"{}\" names no bucket", cfg.url);
        }
        let mut b = match cfg.credentials {
            Credentials::Environment => AmazonS3Builder::from_env(),
            Credentials::InstanceRole | Credentials::File => AmazonS3Builder::new(),
        };
        b = b
            .with_bucket_name(bucket)
            .with_region(&cfg.region)
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(200),
                    max_backoff: Duration::from_secs(5),
                    base: 2.0,
                },
                max_retries: 6,
                retry_timeout: Duration::from_secs(60),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(Duration::from_secs(120))
                    .with_connect_timeout(Duration::from_secs(5)),
            );
        if let Some(endpoint) = cfg
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        {
            b = b
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint);
        }
        if cfg.credentials == Credentials::File {
            let file = cfg
                .credentials_file
                .as_deref()
                .context("credentials = \"file\" needs credentials_file")?;
            let (key, secret) = read_credentials_file(std::path::Path::new(file))?;
            b = b.with_access_key_id(key).with_secret_access_key(secret);
        }
        let s3 = Arc::new(
            b.build()
                .with_context(|| format!("configuring the S3 client for {}", cfg.url))?,
        );
        Ok(Store {
            url: cfg.url.clone(),
            objects: s3.clone(),
            multipart: Some(s3),
            prefix: prefix
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }
}

/// Reads `access_key_id` / `secret_access_key` (AWS credentials-file spellings accepted)
/// from a file that only its owner can read.
pub fn read_credentials_file(path: &std::path::Path) -> Result<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let md =
        std::fs::metadata(path).with_context(|| format!("credentials file {}", path.display()))?;
    let mode = md.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "credentials file {} is readable by others (mode {mode:o}): chmod 600 it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading credentials file {}", path.display()))?;
    let mut key = None;
    let mut secret = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "access_key_id" | "aws_access_key_id" => key = Some(v),
            "secret_access_key" | "aws_secret_access_key" => secret = Some(v),
            _ => {}
        }
    }
    match (key, secret) {
        (Some(k), Some(s)) if !k.is_empty() && !s.is_empty() => Ok((k, s)),
        _ => bail!(
            "credentials file {} needs access_key_id = … and secret_access_key = … lines",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_file_must_be_private_and_complete() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("creds");
        std::fs::write(
            &p,
            "[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s3cr3t\n",
        )
        .expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = read_credentials_file(&p).expect_err("world-readable");
        assert!(err.to_string().contains("chmod 600"), "{err}");
        assert!(!err.to_string().contains("s3cr3t"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(
            read_credentials_file(&p).expect("reads"),
            ("AKIA1".to_string(), "s3cr3t".to_string())
        );
        std::fs::write(&p, "access_key_id = x\n").expect("write");
        assert!(read_credentials_file(&p).is_err());
    }

    #[test]
    fn paths_join_prefix_and_parts() {
        let s = Store {
            url: "s3://b/p/q".into(),
            objects: Arc::new(object_store::memory::InMemory::new()),
            multipart: None,
            prefix: vec!["p".into(), "q".into()],
        };
        assert_eq!(s.path(&["a", "raw/x.txt"]).as_ref(), "p/q/a/raw/x.txt");
    }
}
