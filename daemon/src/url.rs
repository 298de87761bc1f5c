//! URLs as the plan and the command lines take them. Credentials never travel in a URL:
//! a URL is kept in the plan copy and results, printed and stored, so one with a user name
//! or password in it (`https://user:PASS@host`) is refused wherever a URL is taken, and
//! every message that shows a URL shows it through [`redact`]. Credentials come from their
//! own files and variables (docs/credentials.md).

/// A URL cut at its parts (`scheme://userinfo@authority/path?query#fragment`), without
/// decoding anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts<'a> {
    pub scheme: &'a str,
    pub(crate) userinfo: Option<&'a str>,
    /// Host and port.
    pub authority: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub fragment: Option<&'a str>,
}

/// A URL without its query and fragment (a presigned URL without its signature).
pub fn without_query(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or(url).to_string()
}

/// The parts of `url`, or `None` when it has no `scheme://`.
pub fn split(url: &str) -> Option<UrlParts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (userinfo, authority) = match authority.rsplit_once('@') {
        Some((u, a)) => (Some(u), a),
        None => (None, authority),
    };
    Some(UrlParts {
        scheme,
        userinfo,
        authority,
        path,
        query,
        fragment,
    })
}

/// `url` with any user name and password replaced by `***`: what every message shows.
pub(crate) fn redact(url: &str) -> String {
    match split(url) {
        Some(UrlParts {
            scheme,
            userinfo: Some(_),
            ..
        }) => {
            let rest = &url[scheme.len() + 3..];
            let at = rest
                .find(['/', '?', '#'])
                .map_or(rest, |end| &rest[..end])
                .rfind('@')
                .unwrap_or(0);
            format!("{scheme}://***{}", &rest[at..])
        }
        _ => url.to_string(),
    }
}

/// Refuses a URL with a user name or password in it, naming it redacted.
pub fn refuse_credentials(url: &str) -> Result<(), String> {
    match split(url) {
        Some(UrlParts {
            userinfo: Some(_), ..
        }) => Err(format!(
            "\"{}\" has a user name or password in it: a URL is kept in the plan copy and the results, printed and stored, so credentials never go in one; give them in their own file or variables (docs/credentials.md)",
            redact(url)
        )),
        _ => Ok(()),
    }
}

/// Refuses a command line with a URL with credentials in it, in any argument (`--opt URL`,
/// `--opt=URL`, a positional one): for the binaries' `main`, before clap sees it, so no
/// option that takes a URL can let one through. The error shows the argument redacted.
pub fn refuse_credentials_in_args<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Result<(), String> {
    let mut previous: Option<String> = None;
    for arg in args {
        let arg = arg.to_string_lossy().into_owned();
        let (option, value) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (Some(o.to_string()), v),
            _ => (
                previous.clone().filter(|p| p.starts_with('-')),
                arg.as_str(),
            ),
        };
        if let Err(why) = refuse_credentials(value) {
            return Err(match option {
                Some(o) => format!("{o}: {why}"),
                None => why,
            });
        }
        previous = Some(arg.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_urls() {
        let p = split("https://admin:PASS@bmc.lab:8443/x/y?token=Q#top").expect("url");
        assert_eq!(p.scheme, "https");
        assert_eq!(p.userinfo, Some("admin:PASS"));
        assert_eq!(p.authority, "bmc.lab:8443");
        assert_eq!(p.path, "/x/y");
        assert_eq!(p.query, Some("token=Q"));
        assert_eq!(p.fragment, Some("top"));
        let p = split("file:///var/tmp/store").expect("url");
        assert_eq!(
            (p.authority, p.path, p.userinfo),
            ("", "/var/tmp/store", None)
        );
        // An @ in the path is no userinfo.
        assert_eq!(split("https://h/a@b").expect("url").userinfo, None);
        assert!(split("/plain/path").is_none());
    }

    #[test]
    fn credentials_are_redacted_and_refused() {
        for (url, shown) in [
            ("http://user:PASS@host:9000/p", "http://***@host:9000/p"),
            ("https://PASS@host", "https://***@host"),
            ("s3://key:SECRET@bucket/prefix", "s3://***@bucket/prefix"),
            ("https://a:b@c:d@host/", "https://***@host/"),
        ] {
            assert_eq!(redact(url), shown);
            let e = refuse_credentials(url).expect_err(url);
            assert!(e.contains(shown), "{e}");
            assert!(!e.contains("PASS") && !e.contains("SECRET"), "{e}");
        }
        for url in [
            "https://host/a@b",
            "s3://bucket/x",
            "file:///d",
            "not a url",
        ] {
            assert_eq!(redact(url), url);
            assert_eq!(refuse_credentials(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn a_command_line_with_credentials_in_a_url_is_refused_in_any_spelling() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        for a in [
            &["pgappliance", "eject", "--bmc", "https://admin:PASS@h"][..],
            &["pgappliance", "eject", "--bmc=https://admin:PASS@h"][..],
            &[
                "pgapplianced",
                "run",
                "--local",
                "p.toml",
                "--endpoint",
                "http://u:PASS@h",
            ][..],
        ] {
            let e = refuse_credentials_in_args(args(a)).expect_err("refused");
            assert!(!e.contains("PASS"), "{e}");
            assert!(
                e.starts_with("--bmc: ") || e.starts_with("--endpoint: "),
                "{e}"
            );
        }
        refuse_credentials_in_args(args(&["pgappliance", "eject", "--bmc", "https://h"]))
            .expect("no credentials");
    }
}
