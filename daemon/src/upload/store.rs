//! Object stores by URL: `s3://bucket/prefix` (any S3-compatible endpoint, path-style) or
//! `file:///dir`. Credentials come from the environment, the instance role, or a 0600 file;
//! they are handed to the client and never logged or written anywhere.
//!
//! A credentials file may carry the expiry of short-lived keys (`aws_session_expiration =
//! 2026-12-02T04:00:00Z`, what `pgappliance` writes when it mints them). The file is read
//! again whenever it changes on disk ([`FileCredentials`]), so fresh keys put there are
//! used by the next request without restarting the daemon, and an upload refused once the
//! keys expired says so ([`Store::expired_credentials`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use object_store::aws::{AmazonS3Builder, AwsCredential};
use object_store::local::LocalFileSystem;
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::signer::Signer;
use object_store::{BackoffConfig, ClientOptions, CredentialProvider, ObjectStore, RetryConfig};

use crate::plan::Credentials;

/// How to reach a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: String,
    pub credentials: Credentials,
    pub credentials_file: Option<String>,
    /// The profile of `credentials_file` to use.
    pub credentials_profile: String,
    /// Keys this machine found for itself ([`super::caller`]): when set, they are used
    /// instead of `credentials` (the plan's, which is how the appliance reaches the store).
    pub caller: Option<super::caller::CallerKeys>,
}

impl StoreConfig {
    /// `url` reached with the environment's keys (no endpoint, credentials file or caller
    /// keys): the benchmarks' and tests' stores.
    pub(crate) fn environment(url: impl Into<String>, region: impl Into<String>) -> Self {
        StoreConfig {
            url: url.into(),
            endpoint: None,
            region: region.into(),
            credentials: Credentials::Environment,
            credentials_file: None,
            credentials_profile: DEFAULT_PROFILE.into(),
            caller: None,
        }
    }

    pub(crate) fn from_plan(upload: &crate::plan::Upload, url_override: Option<&str>) -> Self {
        StoreConfig {
            url: url_override.unwrap_or(&upload.store).to_string(),
            endpoint: upload.endpoint.clone(),
            region: upload.region.clone(),
            credentials: upload.credentials,
            credentials_file: upload.credentials_file.clone(),
            credentials_profile: upload.profile().to_string(),
            caller: None,
        }
    }

    /// Checks, before any work, what opening the store later needs from this machine: the
    /// credentials file (mode, owner, profile) when an S3 store uses one. Keys that have
    /// already expired are reported (a warning and the STATUS line) but do not stop the run:
    /// the results stay local until fresh keys are put in the file.
    pub fn preflight(&self) -> Result<()> {
        if let Some(dir) = self.url.strip_prefix("file://") {
            check_file_store_dir(Path::new(dir)).with_context(|| format!("store {}", self.url))?;
        }
        if self.url.starts_with("s3://")
            && self.caller.is_none()
            && self.credentials == Credentials::File
        {
            let file = self
                .credentials_file
                .as_deref()
                .context("credentials = \"file\" needs credentials_file")?;
            let pair = read_credentials_file(Path::new(file), &self.credentials_profile)?;
            if let Some(at) = pair.expires_at.filter(|at| *at <= SystemTime::now()) {
                let text = format!(
                    "{}; the run goes on and keeps its results here until then",
                    expired_message(file, Some(at))
                );
                tracing::warn!("{text}");
                crate::notify::status(&text);
            }
        }
        Ok(())
    }
}

/// A file store's directory as the upload will need it: a directory, or a path whose
/// nearest existing ancestor is a directory it can be made in. A regular file on the way
/// would otherwise be found only when the upload starts, after the whole sweep.
pub fn check_file_store_dir(dir: &Path) -> Result<()> {
    let mut at = Some(dir);
    while let Some(p) = at {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => anyhow::bail!(
                "{} is not a directory{}",
                p.display(),
                if p == dir {
                    String::new()
                } else {
                    format!(", so {} cannot be made", dir.display())
                }
            ),
            // ENOTDIR: a file further up, which the parent's turn names.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.kind() == std::io::ErrorKind::NotADirectory =>
            {
                at = p.parent()
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
        }
    }
    Ok(())
}

/// An opened store and the key prefix under which this appliance writes.
pub struct Store {
    pub url: String,
    pub objects: Arc<dyn ObjectStore>,
    /// Present for S3: the low-level API whose upload ids can be journaled and resumed.
    pub(crate) multipart: Option<Arc<dyn MultipartStore>>,
    /// Present for S3: presigns URLs (e.g. an ISO a BMC fetches without credentials).
    pub signer: Option<Arc<dyn Signer>>,
    pub(crate) prefix: Vec<String>,
    /// The credentials file the S3 client reads its keys from (`credentials = "file"`).
    pub(crate) credentials_file: Option<Arc<FileCredentials>>,
    /// Which keys the store is reached with, for messages: "key AKIA… from …" (never the
    /// secret); None for a file store.
    pub keys: Option<String>,
    /// The S3 endpoint given (plan, command line or AWS_ENDPOINT_URL), for messages.
    pub(crate) endpoint: Option<String>,
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
                signer: None,
                prefix: Vec::new(),
                credentials_file: None,
                keys: None,
                endpoint: None,
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
        let mut b = match (&cfg.caller, cfg.credentials) {
            (Some(_), _) => AmazonS3Builder::new(),
            (None, Credentials::Environment) => AmazonS3Builder::from_env(),
            (None, Credentials::InstanceRole | Credentials::File) => AmazonS3Builder::new(),
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
        let endpoint_given = cfg
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(endpoint) = endpoint_given.clone() {
            // From the plan, a command line or AWS_ENDPOINT_URL: no credentials in it.
            crate::url::refuse_credentials(&endpoint)
                .map_err(|why| anyhow::anyhow!("the S3 endpoint {why}"))?;
            b = b
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint);
        }
        let mut file_source = None;
        let mut keys = match cfg.credentials {
            Credentials::InstanceRole => Some("the instance role".to_string()),
            Credentials::Environment => Some(match std::env::var("AWS_ACCESS_KEY_ID") {
                Ok(k) if !k.is_empty() => {
                    format!("key {k} from the environment (AWS_ACCESS_KEY_ID)")
                }
                _ => "the environment's keys (none set: the instance role)".to_string(),
            }),
            Credentials::File => None,
        };
        if let Some(caller) = &cfg.caller {
            b = b.with_credentials(Arc::new(object_store::StaticCredentialProvider::new(
                caller.credential(),
            )));
            keys = Some(caller.describe());
        } else if cfg.credentials == Credentials::File {
            let file = cfg
                .credentials_file
                .as_deref()
                .context("credentials = \"file\" needs credentials_file")?;
            let source = Arc::new(FileCredentials::new(file, &cfg.credentials_profile));
            // Read now, so a file that cannot be used stops the opening with its reason.
            let (now, _) = source.current()?;
            keys = Some(format!(
                "key {} from {file} (profile \"{}\")",
                now.key_id, cfg.credentials_profile
            ));
            b = b.with_credentials(source.clone());
            file_source = Some(source);
        }
        let s3 = Arc::new(
            b.build()
                .with_context(|| format!("configuring the S3 client for {}", cfg.url))?,
        );
        Ok(Store {
            url: cfg.url.clone(),
            objects: s3.clone(),
            multipart: Some(s3.clone()),
            signer: Some(s3),
            prefix: prefix
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            credentials_file: file_source,
            keys,
            endpoint: endpoint_given,
        })
    }

    /// When a request was refused because the keys expired, what to tell the operator:
    /// the store answered `ExpiredToken`, or it refused the keys (`refused`) after the
    /// expiry the credentials file gives. None for any other failure.
    pub(crate) fn expired_credentials(&self, error_text: &str, refused: bool) -> Option<String> {
        let store_says_expired = error_text.contains("ExpiredToken");
        match &self.credentials_file {
            Some(file) => {
                let expires_at = file.expires_at();
                let passed = expires_at.is_some_and(|at| at <= SystemTime::now());
                (store_says_expired || (refused && passed))
                    .then(|| expired_message(&file.path.display().to_string(), expires_at))
            }
            None => store_says_expired.then(|| {
                "the store credentials from the environment expired (the store answered ExpiredToken); restart the daemon with fresh ones".to_string()
            }),
        }
    }
}

/// Why a store gave no answer in time, from one connection to its endpoint (bounded to a
/// few seconds): refused, not resolved, silent, or it accepts connections and is slow.
pub(crate) async fn probe(store: &Store) -> String {
    let Some(endpoint) = store.endpoint.as_deref() else {
        return "no answer in time".into();
    };
    let Ok(url) = reqwest::Url::parse(endpoint) else {
        return "no answer in time".into();
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return "no answer in time".into();
    };
    let connect = tokio::net::TcpStream::connect((host, port));
    match tokio::time::timeout(Duration::from_secs(3), connect).await {
        Ok(Ok(_)) => format!("{host}:{port} accepts connections but answered no request in time"),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("the connection to {host}:{port} was refused (nothing listens there)")
        }
        Ok(Err(e)) => format!("connecting to {host}:{port}: {e}"),
        Err(_) => format!("{host}:{port} did not answer a connection within 3 s"),
    }
}

/// "the store credentials in FILE expired at T; put fresh ones there" (T unknown when the
/// file carries no expiry and the store said so).
pub(crate) fn expired_message(file: &str, expires_at: Option<SystemTime>) -> String {
    match expires_at {
        Some(at) => format!(
            "the store credentials in {file} expired at {}; put fresh ones there",
            humantime::format_rfc3339_seconds(at)
        ),
        None => format!(
            "the store credentials in {file} expired (the store answered ExpiredToken; the file gives no {EXPIRATION_KEY}); put fresh ones there"
        ),
    }
}

/// The key of a credentials file that holds the keys' expiry (RFC 3339, UTC).
pub(crate) const EXPIRATION_KEY: &str = "aws_session_expiration";

/// The keys of a credentials file for the S3 client, read again whenever the file changes
/// (another inode, size or modification time), so fresh keys put there are used by the
/// next request. A file that cannot be read (being replaced, wrong mode) fails that request
/// with the reason, and the upload retries.
pub(crate) struct FileCredentials {
    pub(crate) path: PathBuf,
    profile: String,
    cache: Mutex<Option<CachedKeys>>,
}

struct CachedKeys {
    stamp: FileStamp,
    credential: Arc<AwsCredential>,
    expires_at: Option<SystemTime>,
}

type FileStamp = (u64, u64, u64, i64, i64);

impl std::fmt::Debug for FileCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCredentials")
            .field("path", &self.path)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl FileCredentials {
    pub(crate) fn new(path: &str, profile: &str) -> Self {
        FileCredentials {
            path: PathBuf::from(path),
            profile: profile.to_string(),
            cache: Mutex::new(None),
        }
    }

    fn stamp(&self) -> Result<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(&self.path)
            .with_context(|| format!("credentials file {}", self.path.display()))?;
        Ok((md.dev(), md.ino(), md.size(), md.mtime(), md.mtime_nsec()))
    }

    /// The keys as the file holds them now, and their expiry.
    pub(crate) fn current(&self) -> Result<(Arc<AwsCredential>, Option<SystemTime>)> {
        let stamp = self.stamp()?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.as_ref().filter(|c| c.stamp == stamp) {
            return Ok((c.credential.clone(), c.expires_at));
        }
        let pair = read_credentials_file(&self.path, &self.profile)?;
        if cache.is_some() {
            tracing::info!(file = %self.path.display(), "the credentials file changed: using its keys from now on");
        }
        let credential = Arc::new(AwsCredential {
            key_id: pair.access_key_id,
            secret_key: pair.secret_access_key,
            token: pair.session_token,
        });
        *cache = Some(CachedKeys {
            stamp,
            credential: credential.clone(),
            expires_at: pair.expires_at,
        });
        Ok((credential, pair.expires_at))
    }

    /// The expiry the file gives for its keys (None: none given, or unreadable now).
    pub(crate) fn expires_at(&self) -> Option<SystemTime> {
        self.current().ok().and_then(|(_, at)| at)
    }
}

#[async_trait::async_trait]
impl CredentialProvider for FileCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.current()
            .map(|(c, _)| c)
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: format!("{e:#}").into(),
            })
    }
}

/// The credentials file's profile when the plan names none, and the check of a name.
#[cfg(test)]
pub(crate) use crate::plan::check_profile_name;
pub use crate::plan::DEFAULT_PROFILE;

/// An access key pair read from a credentials file (the secret is never displayed).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPair {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// When short-lived keys stop working (`aws_session_expiration`).
    pub expires_at: Option<SystemTime>,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("access_key_id", &self.access_key_id)
            .field(
                "expires_at",
                &self.expires_at.map(humantime::format_rfc3339_seconds),
            )
            .finish_non_exhaustive()
    }
}

/// The key pair of `profile` in a credentials file's text (pure). Sections are `[name]`
/// (or `[profile name]`); lines before the first section belong to `default`. A file in
/// which a profile or a key appears twice is ambiguous and refused, as are a missing
/// profile or key and a line that is not `key = value`. `aws_session_expiration` (RFC 3339
/// in UTC, e.g. `2026-12-02T04:00:00Z`) is the keys' expiry. Errors name the profile, the
/// key and the line, never a secret.
pub fn parse_credentials(text: &str, profile: &str) -> Result<KeyPair, String> {
    let mut sections: BTreeMap<String, BTreeMap<&'static str, (usize, String)>> = BTreeMap::new();
    let mut seen_lines: BTreeMap<String, usize> = BTreeMap::new();
    let mut current = DEFAULT_PROFILE.to_string();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[') {
            let Some(name) = inner.strip_suffix(']') else {
                return Err(format!("line {n}: a section header needs a closing ]"));
            };
            let name = name.trim();
            let name = name.strip_prefix("profile ").map(str::trim).unwrap_or(name);
            if let Some(first) = seen_lines.get(name) {
                return Err(format!(
                    "profile \"{name}\" appears twice (lines {first} and {n}): ambiguous"
                ));
            }
            if name == DEFAULT_PROFILE && sections.contains_key(DEFAULT_PROFILE) {
                return Err(format!(
                    "line {n}: [default] follows keys outside any section, which already are the default profile: ambiguous"
                ));
            }
            seen_lines.insert(name.to_string(), n);
            sections.entry(name.to_string()).or_default();
            current = name.to_string();
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!(
                "line {n} is neither `key = value` nor a [profile] header"
            ));
        };
        let key: &'static str = match k.trim().to_ascii_lowercase().as_str() {
            "access_key_id" | "aws_access_key_id" => "access_key_id",
            "secret_access_key" | "aws_secret_access_key" => "secret_access_key",
            "session_token" | "aws_session_token" => "session_token",
            "session_expiration" | "aws_session_expiration" => "session_expiration",
            // Other settings of an AWS credentials file (region, output…) are not secrets
            // this daemon uses; they may be there.
            _ => continue,
        };
        let value = v.trim().trim_matches('"').to_string();
        let entries = sections.entry(current.clone()).or_default();
        if let Some((first, _)) = entries.get(key) {
            return Err(format!(
                "profile \"{current}\" sets {key} twice (lines {first} and {n}): ambiguous"
            ));
        }
        entries.insert(key, (n, value));
    }
    let Some(entries) = sections.get(profile) else {
        let names: Vec<&str> = sections.keys().map(String::as_str).collect();
        return Err(format!(
            "has no profile \"{profile}\" (profiles there: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    };
    let get = |k: &str| {
        entries
            .get(k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let expires_at =
        match entries.get("session_expiration") {
            None => None,
            Some((n, v)) => Some(parse_expiration(v).map_err(|why| {
                format!("profile \"{profile}\", line {n}: {EXPIRATION_KEY} {why}")
            })?),
        };
    match (get("access_key_id"), get("secret_access_key")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(KeyPair {
            access_key_id,
            secret_access_key,
            session_token: get("session_token"),
            expires_at,
        }),
        (key, _) => {
            Err(format!(
            "profile \"{profile}\" needs access_key_id = … and secret_access_key = … (missing: {})",
            if key.is_none() { "access_key_id" } else { "secret_access_key" }
        ))
        }
    }
}

/// An expiry as a credentials file gives it: RFC 3339 in UTC (`2026-12-02T04:00:00Z`,
/// fractions of a second allowed), what STS returns.
pub(crate) fn parse_expiration(value: &str) -> Result<SystemTime, String> {
    let v = value.trim();
    if !v.ends_with('Z') {
        return Err(format!(
            "\"{v}\" is not an RFC 3339 time in UTC (like 2026-12-02T04:00:00Z)"
        ));
    }
    humantime::parse_rfc3339_weak(v).map_err(|e| {
        format!("\"{v}\" is not an RFC 3339 time in UTC (like 2026-12-02T04:00:00Z): {e}")
    })
}

/// A credentials file holding `pair` as `profile`, after `comment` lines (`# …`): what
/// `pgappliance` puts on the boot medium. The expiry is written beside the keys.
pub fn render_credentials(profile: &str, pair: &KeyPair, comment: &[String]) -> String {
    let mut s = String::new();
    for line in comment {
        s.push_str(&format!("# {line}\n"));
    }
    s.push_str(&format!("[{profile}]\n"));
    s.push_str(&format!("aws_access_key_id = {}\n", pair.access_key_id));
    s.push_str(&format!(
        "aws_secret_access_key = {}\n",
        pair.secret_access_key
    ));
    if let Some(token) = &pair.session_token {
        s.push_str(&format!("aws_session_token = {token}\n"));
    }
    if let Some(at) = pair.expires_at {
        s.push_str(&format!(
            "{EXPIRATION_KEY} = {}\n",
            humantime::format_rfc3339_seconds(at)
        ));
    }
    s
}

/// Reads the key pair of `profile` from a credentials file that only its owner, the user
/// reading it, can read (mode 0600 or stricter).
pub fn read_credentials_file(path: &std::path::Path, profile: &str) -> Result<KeyPair> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let md =
        std::fs::metadata(path).with_context(|| format!("credentials file {}", path.display()))?;
    if !md.is_file() {
        bail!("credentials file {} is not a regular file", path.display());
    }
    let mode = md.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "credentials file {} is readable by others (mode {mode:o}): chmod 600 it",
            path.display()
        );
    }
    let me = nix::unistd::Uid::effective().as_raw();
    if md.uid() != me {
        bail!(
            "credentials file {} belongs to uid {}, not to the user reading it (uid {me}): chown it",
            path.display(),
            md.uid()
        );
    }
    let text = crate::fsutil::read_regular_to_string(path)
        .with_context(|| format!("reading credentials file {}", path.display()))?;
    parse_credentials(&text, profile)
        .map_err(|why| anyhow::anyhow!("credentials file {}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_store_that_is_a_regular_file_fails_the_preflight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("store");
        std::fs::write(&file, b"not a directory").expect("write");
        let cfg = |path: &Path| {
            StoreConfig::environment(format!("file://{}", path.display()), "us-east-1")
        };
        for (path, words) in [
            (file.clone(), "is not a directory"),
            (file.join("below"), "cannot be made"),
        ] {
            let err = format!("{:#}", cfg(&path).preflight().expect_err("a file"));
            assert!(
                err.contains(words) && err.contains(&file.display().to_string()),
                "{err}"
            );
        }
        cfg(dir.path()).preflight().expect("a directory");
        cfg(&dir.path().join("new/store"))
            .preflight()
            .expect("can be made");
        assert!(!dir.path().join("new").exists(), "nothing made by a check");
    }

    #[test]
    fn credentials_file_must_be_private_owned_and_complete() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("creds");
        std::fs::write(
            &p,
            "[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s3cr3t\n",
        )
        .expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = read_credentials_file(&p, "default").expect_err("world-readable");
        assert!(err.to_string().contains("chmod 600"), "{err}");
        assert!(!err.to_string().contains("s3cr3t"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let pair = read_credentials_file(&p, "default").expect("reads");
        assert_eq!(
            (pair.access_key_id.as_str(), pair.secret_access_key.as_str()),
            ("AKIA1", "s3cr3t")
        );
        assert!(!format!("{pair:?}").contains("s3cr3t"));
        if nix::unistd::Uid::effective().is_root() {
            nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
            let err = read_credentials_file(&p, "default").expect_err("not ours");
            assert!(err.to_string().contains("chown"), "{err}");
            nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(0)), None).expect("chown");
        }
        std::fs::write(&p, "access_key_id = x\n").expect("write");
        assert!(read_credentials_file(&p, "default").is_err());
    }

    #[test]
    fn the_named_profile_is_used_and_ambiguity_is_refused() {
        let two = "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = def-secret\n\n\
                   [profile lab]\naws_access_key_id = AKIALAB\naws_secret_access_key = lab-secret\n\
                   aws_session_token = lab-token\nregion = eu-west-1\n";
        let lab = parse_credentials(two, "lab").expect("lab");
        assert_eq!(lab.access_key_id, "AKIALAB");
        assert_eq!(lab.secret_access_key, "lab-secret");
        assert_eq!(lab.session_token.as_deref(), Some("lab-token"));
        // The default profile is the first one, not the last one in the file.
        assert_eq!(
            parse_credentials(two, "default")
                .expect("default")
                .access_key_id,
            "AKIADEF"
        );
        // Keys outside any section are the default profile.
        let flat = "access_key_id = AKIAFLAT\nsecret_access_key = flat\n";
        assert_eq!(
            parse_credentials(flat, "default")
                .expect("flat")
                .access_key_id,
            "AKIAFLAT"
        );
        let refused = [
            (format!("{two}[lab]\naws_access_key_id = AKIA2\n"), "lab", "appears twice"),
            (
                "[default]\naws_access_key_id = A\naws_access_key_id = B\naws_secret_access_key = secret-x\n".to_string(),
                "default",
                "sets access_key_id twice",
            ),
            (
                "[default]\naccess_key_id = A\naws_access_key_id = B\nsecret_access_key = secret-x\n".to_string(),
                "default",
                "sets access_key_id twice",
            ),
            (format!("{flat}[default]\n"), "default", "ambiguous"),
            (two.to_string(), "prod", "has no profile \"prod\" (profiles there: default, lab)"),
            ("[lab]\naws_access_key_id = A\n".to_string(), "lab", "missing: secret_access_key"),
            ("[lab\n".to_string(), "lab", "closing ]"),
            ("[lab]\nsecret-x-without-equals\n".to_string(), "lab", "line 2"),
        ];
        for (text, profile, want) in refused {
            let err = parse_credentials(&text, profile).expect_err(&text);
            assert!(err.contains(want), "{err} (wanted {want})");
            for secret in ["def-secret", "lab-secret", "lab-token", "secret-x"] {
                assert!(!err.contains(secret), "{err}");
            }
        }
        assert!(check_profile_name("lab").is_ok());
        assert!(check_profile_name("").is_err());
        assert!(check_profile_name("a]b").is_err());
    }

    #[test]
    fn the_expiry_is_read_written_and_checked() {
        let text = "[lab]\naws_access_key_id = ASIALAB\naws_secret_access_key = lab-secret\n\
                    aws_session_token = lab-token\naws_session_expiration = 2026-12-02T04:00:00Z\n";
        let pair = parse_credentials(text, "lab").expect("lab");
        let at = pair.expires_at.expect("an expiry");
        assert_eq!(
            humantime::format_rfc3339_seconds(at).to_string(),
            "2026-12-02T04:00:00Z"
        );
        // What STS returns has fractions of a second at times.
        assert!(parse_expiration("2026-12-02T04:00:00.123Z").is_ok());
        // Written back beside the keys, it reads as the same pair.
        let again = render_credentials("lab", &pair, &["minted for a test".into()]);
        assert!(again.starts_with("# minted for a test\n[lab]\n"), "{again}");
        assert_eq!(parse_credentials(&again, "lab").expect("again"), pair);
        // Without an expiry there is none.
        let plain = "aws_access_key_id = A\naws_secret_access_key = lab-secret\n";
        assert_eq!(
            parse_credentials(plain, "default")
                .expect("plain")
                .expires_at,
            None
        );
        for bad in [
            "tomorrow",
            "2026-12-02T04:00:00+01:00",
            "2026-12-02 04:00",
            "2026-13-02T04:00:00Z",
        ] {
            let t = format!("[lab]\naws_access_key_id = A\naws_secret_access_key = lab-secret\naws_session_expiration = {bad}\n");
            let err = parse_credentials(&t, "lab").expect_err(bad);
            assert!(
                err.contains("line 4") && err.contains(EXPIRATION_KEY) && err.contains("RFC 3339"),
                "{err}"
            );
            assert!(!err.contains("lab-secret"), "{err}");
        }
    }

    #[test]
    fn an_expired_refusal_names_the_file_and_the_time() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s3.credentials");
        let write = |expiry: &str| {
            let tmp = dir.path().join("next");
            std::fs::write(
                &tmp,
                format!("aws_access_key_id = ASIA1\naws_secret_access_key = s3cr3t\naws_session_token = t0k3n\naws_session_expiration = {expiry}\n"),
            )
            .expect("write");
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            std::fs::rename(&tmp, &p).expect("rename");
        };
        write("2020-01-01T00:00:00Z");
        let store = Store {
            url: "s3://b/p".into(),
            objects: Arc::new(object_store::memory::InMemory::new()),
            multipart: None,
            signer: None,
            prefix: vec!["p".into()],
            credentials_file: Some(Arc::new(FileCredentials::new(
                &p.display().to_string(),
                DEFAULT_PROFILE,
            ))),
            keys: None,
            endpoint: None,
        };
        let want = format!(
            "the store credentials in {} expired at 2020-01-01T00:00:00Z; put fresh ones there",
            p.display()
        );
        // Refused after the expiry, or the store says ExpiredToken: the expiry is named.
        assert_eq!(
            store.expired_credentials("403 Forbidden", true),
            Some(want.clone())
        );
        assert_eq!(
            store.expired_credentials("400 <Code>ExpiredToken</Code>", false),
            Some(want)
        );
        // A failure that is not a refusal of the keys is not blamed on them.
        assert_eq!(store.expired_credentials("connection refused", false), None);
        // Fresh keys put in the file are read at once: a refusal is no longer "expired".
        write("2099-01-01T00:00:00Z");
        assert_eq!(store.expired_credentials("403 Forbidden", true), None);
        let source = store.credentials_file.as_ref().expect("file");
        let (cred, at) = source.current().expect("current");
        assert_eq!(cred.token.as_deref(), Some("t0k3n"));
        assert_eq!(
            at.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
            Some("2099-01-01T00:00:00Z".into())
        );
        // The store saying so still counts, naming the expiry the file gives.
        let said = store
            .expired_credentials("ExpiredToken", true)
            .expect("expired");
        assert!(said.contains("expired at 2099-01-01T00:00:00Z"), "{said}");
        assert!(!format!("{source:?}").contains("s3cr3t"));
        // Without a credentials file only the store's word counts.
        let env = Store {
            credentials_file: None,
            ..store
        };
        assert!(env.expired_credentials("403", true).is_none());
        assert!(env
            .expired_credentials("ExpiredToken", true)
            .is_some_and(|m| m.contains("environment")));
    }

    #[test]
    fn paths_join_prefix_and_parts() {
        let s = Store {
            url: "s3://b/p/q".into(),
            objects: Arc::new(object_store::memory::InMemory::new()),
            multipart: None,
            signer: None,
            prefix: vec!["p".into(), "q".into()],
            credentials_file: None,
            keys: None,
            endpoint: None,
        };
        assert_eq!(s.path(&["a", "raw/x.txt"]).as_ref(), "p/q/a/raw/x.txt");
    }
}
