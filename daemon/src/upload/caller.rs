//! The keys of the machine running a command (the operator's laptop), found by its own
//! chain: a plan's `credentials` setting (`instance-role`, `file` with a path on the
//! appliance, `environment`) is how the *appliance* reaches the store, and is never applied
//! here. Each purpose (the store, EC2) has its own flags, so each can be given separately:
//!
//! 1. an explicit credentials file (`--credentials-file F`, `--ec2-credentials-file F`),
//!    with its profile (`--credentials-profile P`, `--ec2-profile P`; default `default`);
//! 2. an explicit profile alone: that profile of the shared credentials file
//!    (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`);
//! 3. `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`);
//! 4. the shared credentials file's `AWS_PROFILE` (else `default`) profile, when the file
//!    exists.
//!
//! No instance metadata service is asked: a laptop has none, and a command run on an EC2
//! instance gives its keys like any other machine. What was found says where it came from
//! and the key id ([`CallerKeys::describe`]), never the secret.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::store::{read_credentials_file, KeyPair, DEFAULT_PROFILE};

/// Keys found on this machine and where.
#[derive(Clone)]
pub struct CallerKeys {
    pub(crate) pair: KeyPair,
    /// Where they came from: `the environment (AWS_ACCESS_KEY_ID)`, `--credentials-file F`,
    /// `profile "lab" of ~/.aws/credentials`.
    pub(crate) source: String,
}

impl std::fmt::Debug for CallerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl CallerKeys {
    /// "key AKIA… from SOURCE": which credentials, without the secret.
    pub fn describe(&self) -> String {
        format!("key {} from {}", self.pair.access_key_id, self.source)
    }

    pub fn credential(&self) -> object_store::aws::AwsCredential {
        object_store::aws::AwsCredential {
            key_id: self.pair.access_key_id.clone(),
            secret_key: self.pair.secret_access_key.clone(),
            token: self.pair.session_token.clone(),
        }
    }
}

/// One purpose's chain: its flags and what it is for (for the messages).
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    /// What the keys are for: "the store", "EC2".
    pub purpose: &'a str,
    pub file: Option<&'a Path>,
    pub profile: Option<&'a str>,
    /// The flags' names, for the messages: `--credentials-file`, `--credentials-profile`.
    pub file_flag: &'a str,
    pub profile_flag: &'a str,
}

/// Where the shared credentials file is: `AWS_SHARED_CREDENTIALS_FILE`, else
/// `$HOME/.aws/credentials`.
fn shared_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".aws/credentials")))
}

impl Chain<'_> {
    /// How to give other keys, for the messages.
    pub fn how(&self) -> String {
        if self.file_flag.is_empty() {
            return "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE for a profile of ~/.aws/credentials".into();
        }
        format!(
            "{} FILE, {} NAME or AWS_PROFILE for a profile of ~/.aws/credentials, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            self.file_flag, self.profile_flag
        )
    }

    /// Resolves the chain with this process's environment.
    pub fn resolve(&self) -> Result<CallerKeys> {
        self.resolve_with(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Resolves the chain with `env` for the environment (pure but for reading files).
    pub(crate) fn resolve_with(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<CallerKeys> {
        if let Some(file) = self.file {
            let profile = self.profile.unwrap_or(DEFAULT_PROFILE);
            let pair = read_credentials_file(file, profile)
                .with_context(|| format!("{} for {}", self.file_flag, self.purpose))?;
            let source = if profile == DEFAULT_PROFILE {
                format!("{} {}", self.file_flag, file.display())
            } else {
                format!(
                    "{} {} (profile \"{profile}\")",
                    self.file_flag,
                    file.display()
                )
            };
            return Ok(CallerKeys { pair, source });
        }
        let shared = shared_file(env);
        if let Some(profile) = self.profile {
            let Some(file) = shared.as_deref() else {
                bail!(
                    "{} {profile}: no shared credentials file to read it from (set HOME or AWS_SHARED_CREDENTIALS_FILE, or give {} FILE)",
                    self.profile_flag,
                    self.file_flag
                );
            };
            return from_profile(file, profile)
                .with_context(|| format!("{} {profile} for {}", self.profile_flag, self.purpose));
        }
        if let (Some(key), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
        {
            return Ok(CallerKeys {
                pair: KeyPair {
                    access_key_id: key,
                    secret_access_key: secret,
                    session_token: env("AWS_SESSION_TOKEN"),
                    expires_at: None,
                },
                source: "the environment (AWS_ACCESS_KEY_ID)".into(),
            });
        }
        if let Some(file) = shared.as_deref().filter(|f| f.exists()) {
            let profile = env("AWS_PROFILE").unwrap_or_else(|| DEFAULT_PROFILE.to_string());
            return from_profile(file, &profile).with_context(|| {
                format!("{} on this machine (AWS_PROFILE={profile})", self.purpose)
            });
        }
        bail!(
            "{} needs AWS keys on this machine: {} (a plan's `credentials` setting is the appliance's, not this machine's)",
            self.purpose,
            self.how()
        )
    }
}

/// The chain of this machine's keys for a store (`--credentials-file`,
/// `--credentials-profile`, the environment, `~/.aws/credentials`).
pub fn store_chain<'a>(file: Option<&'a Path>, profile: Option<&'a str>) -> Chain<'a> {
    Chain {
        purpose: "the store",
        file,
        profile,
        file_flag: "--credentials-file",
        profile_flag: "--credentials-profile",
    }
}

/// How this machine reaches a store: an S3 store with this machine's own keys
/// ([`store_chain`]); the plan's `credentials` setting is left to the appliance.
pub fn store_here(
    mut cfg: super::StoreConfig,
    file: Option<&Path>,
    profile: Option<&str>,
) -> Result<super::StoreConfig> {
    if cfg.url.starts_with("s3://") {
        let keys = store_chain(file, profile)
            .resolve()
            .with_context(|| format!("reaching {} from this machine", cfg.url))?;
        cfg.caller = Some(keys);
    }
    Ok(cfg)
}

fn from_profile(file: &Path, profile: &str) -> Result<CallerKeys> {
    let pair = read_credentials_file(file, profile)?;
    Ok(CallerKeys {
        pair,
        source: format!("profile \"{profile}\" of {}", file.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    #[test]
    fn the_chain_takes_the_flag_then_the_profile_then_the_environment_then_the_default_profile() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        write(
            &home.join(".aws/credentials"),
            "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s-default\n[lab]\naws_access_key_id = AKIALAB\naws_secret_access_key = s-lab\n",
        );
        let explicit = dir.path().join("explicit");
        write(
            &explicit,
            "aws_access_key_id = AKIAFILE\naws_secret_access_key = s-file\n",
        );
        let home_s = home.display().to_string();
        let chain = |file: Option<&'static str>, profile: Option<&'static str>| Chain {
            purpose: "EC2",
            file: file.map(|_| explicit.as_path()),
            profile,
            file_flag: "--ec2-credentials-file",
            profile_flag: "--ec2-profile",
        };
        let with_env = |vars: &[(&str, &str)]| {
            let mut v: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            v.push(("HOME".into(), home_s.clone()));
            move |k: &str| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
        };
        let env_keys = with_env(&[
            ("AWS_ACCESS_KEY_ID", "AKIAENV"),
            ("AWS_SECRET_ACCESS_KEY", "s-env"),
            ("AWS_PROFILE", "lab"),
        ]);
        let k = chain(Some("x"), None)
            .resolve_with(&env_keys)
            .expect("file");
        assert_eq!(k.pair.access_key_id, "AKIAFILE");
        assert!(k
            .describe()
            .starts_with("key AKIAFILE from --ec2-credentials-file "));
        let k = chain(None, Some("lab"))
            .resolve_with(&env_keys)
            .expect("profile");
        assert_eq!(k.pair.access_key_id, "AKIALAB");
        let k = chain(None, None).resolve_with(&env_keys).expect("env");
        assert_eq!(
            k.describe(),
            "key AKIAENV from the environment (AWS_ACCESS_KEY_ID)"
        );
        let k = chain(None, None)
            .resolve_with(&with_env(&[("AWS_PROFILE", "lab")]))
            .expect("AWS_PROFILE");
        assert_eq!(
            k.describe(),
            format!(
                "key AKIALAB from profile \"lab\" of {}",
                home.join(".aws/credentials").display()
            )
        );
        let k = chain(None, None)
            .resolve_with(&with_env(&[]))
            .expect("default");
        assert_eq!(k.pair.access_key_id, "AKIADEFAULT");
        // Nothing at all: the message says what to give and that the plan's setting is not
        // this machine's; no secret anywhere.
        let none = |k: &str| (k == "HOME").then(|| dir.path().join("empty").display().to_string());
        let e = format!(
            "{:#}",
            chain(None, None).resolve_with(&none).expect_err("none")
        );
        assert!(
            e.contains("EC2 needs AWS keys on this machine: --ec2-credentials-file FILE")
                && e.contains("the appliance's"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            chain(None, Some("prod"))
                .resolve_with(&env_keys)
                .expect_err("no such profile")
        );
        assert!(
            e.contains("no profile \"prod\"") && !e.contains("s-lab"),
            "{e}"
        );
    }
}
