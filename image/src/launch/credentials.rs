//! BMC credentials: from `PGAPPLIANCE_BMC_USER` / `PGAPPLIANCE_BMC_PASSWORD` or a 0600
//! file, never from the command line. The password is only handed to the HTTP client or to
//! ipmitool's environment; `Debug` does not show it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

pub(crate) const USER_VARIABLE: &str = "PGAPPLIANCE_BMC_USER";
pub(crate) const PASSWORD_VARIABLE: &str = "PGAPPLIANCE_BMC_PASSWORD";

#[derive(Clone)]
pub(crate) struct BmcCredentials {
    pub(crate) user: String,
    password: String,
}

impl std::fmt::Debug for BmcCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BmcCredentials")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl BmcCredentials {
    pub(crate) fn password(&self) -> &str {
        &self.password
    }
}

/// Parses a credentials file: `user = NAME` and `password = SECRET` lines (`#` comments).
/// Errors never contain the password; a key given twice is refused (which one would be
/// meant?), naming the key and both lines.
pub(crate) fn parse(text: &str) -> Result<BmcCredentials, String> {
    let mut user: Option<(usize, String)> = None;
    let mut password: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!(
                "line {}: expected `user = …` or `password = …`",
                n + 1
            ));
        };
        let v = v.trim().to_string();
        let key = k.trim();
        let slot = match key {
            "user" => &mut user,
            "password" => &mut password,
            other => {
                return Err(format!(
                    "line {}: unknown key \"{other}\" (user, password)",
                    n + 1
                ))
            }
        };
        if let Some((first, _)) = slot {
            return Err(format!(
                "line {}: `{key}` is given twice (first on line {first}): keep one",
                n + 1
            ));
        }
        *slot = Some((n + 1, v));
    }
    match (user.map(|(_, u)| u), password.map(|(_, p)| p)) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Ok(BmcCredentials {
            user: u,
            password: p,
        }),
        _ => Err("needs a non-empty `user = …` and `password = …`".into()),
    }
}

/// Reads a credentials file, refusing one others can read or that another user owns.
pub(crate) fn read_file(path: &Path) -> Result<BmcCredentials> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        bail!(
            "{} is mode {:o}: BMC credentials must not be readable by others (chmod 600)",
            path.display(),
            meta.mode() & 0o777
        );
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        bail!(
            "{} is owned by uid {}, not by this user",
            path.display(),
            meta.uid()
        );
    }
    let text = pgappliance::fsutil::read_regular_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?;
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The credentials: the file when given, else the environment.
pub(crate) fn load(file: Option<&Path>) -> Result<BmcCredentials> {
    if let Some(f) = file {
        return read_file(f);
    }
    let user = std::env::var(USER_VARIABLE).unwrap_or_default();
    let password = std::env::var(PASSWORD_VARIABLE).unwrap_or_default();
    if user.is_empty() || password.is_empty() {
        bail!("BMC credentials: set {USER_VARIABLE} and {PASSWORD_VARIABLE}, or give a 0600 file with --bmc-credentials");
    }
    Ok(BmcCredentials { user, password })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_user_and_password_and_hides_the_password() {
        let c = parse("# lab\nuser = admin\npassword = s3cr=t\n").expect("parse");
        assert_eq!(c.user, "admin");
        assert_eq!(c.password(), "s3cr=t");
        assert!(!format!("{c:?}").contains("s3cr"));
    }

    #[test]
    fn refuses_incomplete_or_unknown_without_echoing_values() {
        for (text, want) in [
            ("user = a\n", "needs a non-empty"),
            ("password = topsecret\n", "needs a non-empty"),
            ("user = a\npasswd = topsecret\n", "unknown key \"passwd\""),
            ("topsecret\n", "line 1"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("topsecret"), "{e}");
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_naming_it_and_its_lines() {
        for (text, want) in [
            (
                "user = a\npassword = topsecret\npassword = other\n",
                "line 3: `password` is given twice (first on line 2)",
            ),
            (
                "user = a\n# c\nuser = b\npassword = topsecret\n",
                "line 3: `user` is given twice (first on line 1)",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("topsecret") && !e.contains("other"), "{e}");
        }
    }

    #[test]
    fn a_fifo_as_the_credentials_file_is_refused_at_once() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("bmc");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let e = format!("{:#}", read_file(&p).expect_err("fifo"));
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("bmc");
        std::fs::write(&p, "user = a\npassword = b\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = read_file(&p).expect_err("0644").to_string();
        assert!(e.contains("mode 644"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_file(&p).expect("0600").user, "a");
    }
}
